//===- BucketGradients.cpp - DDP gradient buckets -------------------------===//
//
// sched-bucket-gradients: DDP's gradient buckets on the explicit schedule.
// sched-insert-collectives all-reduces each group's gradient on its own;
// small groups (a norm, a block of a small model) then pay one collective
// launch each. This pass lays the buffers that groups finishing backward one
// after another reduce into one bucket buffer of at most `parallel.bucket`
// bytes and reduces each bucket once, after its last group. On a pipeline
// stage's sched.tasks, each body's reductions are bucketed within the body.
//
// Only no_shard is bucketed. zero1 reduce-scatters each group's gradient so
// that every rank receives its 1/S slice of that group, the slice its
// optimizer state covers; reduce-scattering a bucket of several groups would
// hand each rank a 1/S slice of the bucket, which straddles groups, and a
// bucket laid out rank-major so that slices match would make a group's
// gradient non-contiguous, which no sched.view can express. docs/sched.md
// ("sched-bucket-gradients") is the contract.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

#include <algorithm>

namespace plan {
#define GEN_PASS_DEF_SCHEDBUCKETGRADIENTS
#include "passes/Passes.h.inc"
} // namespace plan

using namespace mlir;

namespace {

/// One all-reduce of a whole gradient buffer, with what a bucket rewrites:
/// the buffer's allocation, the wait for the reduction and, for a transient
/// buffer, its free.
struct Reduction {
  sched::AllReduceOp allReduce;
  sched::AllocOp alloc;
  sched::WaitOp wait;
  sched::FreeOp free; // null for a persistent buffer
  int64_t bytes;
};

int64_t bufferBytes(MemRefType type) {
  return type.getNumElements() *
         llvm::divideCeil(type.getElementTypeBitWidth(), 8);
}

/// The reduction of `allReduce` when it reduces a whole gradient buffer
/// this pass can re-lay: a persistent gradient, a transient unsharded
/// gradient of one micro-batch, or the transient reduce-dtype copy of one.
std::optional<Reduction> asGradientReduction(sched::AllReduceOp allReduce) {
  Block *block = allReduce->getBlock();
  auto alloc = allReduce.getBuffer().getDefiningOp<sched::AllocOp>();
  if (!alloc || alloc->getBlock() != block)
    return std::nullopt;
  sched::BufferRole role = alloc.getRole();
  if (alloc.getPersistent() ? role != sched::BufferRole::Grad
                            : role != sched::BufferRole::UnshardedGrad &&
                                  role != sched::BufferRole::Staging)
    return std::nullopt;

  Reduction reduction{allReduce, alloc, {}, {}, bufferBytes(alloc.getType())};
  Value event = allReduce.getDone();
  if (!event.hasOneUse())
    return std::nullopt;
  reduction.wait = dyn_cast<sched::WaitOp>(*event.getUsers().begin());
  if (!reduction.wait || reduction.wait->getBlock() != block)
    return std::nullopt;
  if (!alloc.getPersistent()) {
    for (Operation *user : alloc->getUsers()) {
      auto free = dyn_cast<sched::FreeOp>(user);
      if (!free)
        continue;
      if (reduction.free || free->getBlock() != block)
        return std::nullopt;
      reduction.free = free;
    }
    if (!reduction.free || !reduction.wait->isBeforeInBlock(reduction.free))
      return std::nullopt;
  }
  return reduction;
}

/// Whether `next` can join a bucket that holds `members`: same kind of
/// buffer and reduction, room left, and reduced before any member's result
/// is waited for, so one reduction at `next` serves them all.
bool canJoin(MutableArrayRef<Reduction> members, Reduction next,
             int64_t bucketBytes) {
  Reduction &first = members.front();
  MemRefType type = first.alloc.getType(), nextType = next.alloc.getType();
  if (type.getElementType() != nextType.getElementType() ||
      type.getMemorySpace() != nextType.getMemorySpace() ||
      first.alloc.getPersistent() != next.alloc.getPersistent() ||
      first.alloc.getRole() != next.alloc.getRole() ||
      first.allReduce.getGroup() != next.allReduce.getGroup() ||
      first.allReduce.getReduce() != next.allReduce.getReduce())
    return false;
  int64_t bytes = next.bytes;
  for (Reduction &member : members)
    bytes += member.bytes;
  if (bytes > bucketBytes)
    return false;
  return llvm::all_of(members, [&](Reduction &member) {
    return next.allReduce->isBeforeInBlock(member.wait);
  });
}

bool isBefore(Operation *a, Operation *b) { return a->isBeforeInBlock(b); }

Operation *earliest(ArrayRef<Operation *> ops) {
  return *std::min_element(ops.begin(), ops.end(), isBefore);
}

Operation *latest(ArrayRef<Operation *> ops) {
  return *std::max_element(ops.begin(), ops.end(), isBefore);
}

struct SchedBucketGradientsPass
    : plan::impl::SchedBucketGradientsBase<SchedBucketGradientsPass> {
  void runOnOperation() override;

private:
  /// Buckets the reductions of `block` (the program's, or a task's body,
  /// whose buckets are named for its micro-batch `microBatch`).
  void bucketBlock(Block &block, std::optional<int64_t> microBatch);
  /// Replaces the members' buffers by views of one bucket, named `name`,
  /// and their reductions by one.
  void rewriteBucket(MutableArrayRef<Reduction> members, StringRef name);
};

void SchedBucketGradientsPass::runOnOperation() {
  sched::ProgramOp program = getOperation();
  if (program.getParallel().getSharding() != plan::Sharding::NoShard)
    return;
  if (failed(plan::requireNoRepeat(program, getArgument())))
    return signalPassFailure();
  Block &block = program.getBody().front();
  bucketBlock(block, std::nullopt);
  // A pipeline stage's sched.tasks (docs/sched.md, "The micro-batch loop"):
  // each body's own. A reduction a later task completes (in a slot) joins
  // no bucket, and one a body waits for completes before the next body's
  // are issued, so a bucket never spans bodies and the loop written out
  // would bucket the same.
  for (auto tasks : block.getOps<sched::TasksOp>())
    for (sched::TaskOp task : tasks.getTasks())
      bucketBlock(task.getBody().front(),
                  static_cast<int64_t>(task.getMicroBatch()));
}

void SchedBucketGradientsPass::bucketBlock(Block &block,
                                           std::optional<int64_t> microBatch) {
  // Reductions in the order groups finish backward; a bucket is a run of
  // consecutive ones.
  int64_t bucketBytes = getOperation().getParallel().getBucket();
  SmallVector<SmallVector<Reduction>> buckets;
  for (auto allReduce : block.getOps<sched::AllReduceOp>()) {
    std::optional<Reduction> reduction = asGradientReduction(allReduce);
    if (!reduction)
      continue;
    if (buckets.empty() || !canJoin(buckets.back(), *reduction, bucketBytes))
      buckets.emplace_back();
    buckets.back().push_back(*reduction);
  }
  int64_t index = 0;
  for (MutableArrayRef<Reduction> bucket : buckets) {
    // A bucket of one keeps its buffer and its reduction.
    if (bucket.size() < 2)
      continue;
    std::string name = ("grad.bucket" + Twine(index++)).str();
    if (microBatch)
      name += (".mb" + Twine(*microBatch)).str();
    rewriteBucket(bucket, name);
  }
}

void SchedBucketGradientsPass::rewriteBucket(MutableArrayRef<Reduction> members,
                                             StringRef name) {
  Reduction &first = members.front();
  MemRefType memberType = first.alloc.getType();
  int64_t numel = 0;
  for (Reduction &member : members)
    numel += member.alloc.getType().getNumElements();

  SmallVector<Operation *> allocs, allReduces, waits, frees;
  for (Reduction &member : members) {
    allocs.push_back(member.alloc);
    allReduces.push_back(member.allReduce);
    waits.push_back(member.wait);
    if (member.free)
      frees.push_back(member.free);
  }

  // The bucket is allocated where its first member was, and every member
  // becomes a view of it there, ahead of all their uses.
  OpBuilder builder(earliest(allocs));
  Location loc = first.alloc.getLoc();
  auto bucketType =
      MemRefType::get({numel}, memberType.getElementType(),
                      MemRefLayoutAttrInterface(), memberType.getMemorySpace());
  bool persistent = first.alloc.getPersistent();
  Value bucket = sched::AllocOp::create(builder, loc, bucketType, name,
                                        sched::BufferRole::Bucket, persistent,
                                        /*offset=*/IntegerAttr());
  // One reduction where the last member's was, waited where the first
  // result was needed.
  auto lastAllReduce = cast<sched::AllReduceOp>(latest(allReduces));
  SmallVector<Value> after;
  for (Reduction &member : members)
    llvm::append_range(after, member.allReduce.getAfter());
  builder.setInsertionPoint(lastAllReduce);
  auto bucketReduce = sched::AllReduceOp::create(
      builder, lastAllReduce.getLoc(), lastAllReduce.getDone().getType(),
      bucket, first.allReduce.getGroup(), first.allReduce.getReduce(), after);
  Operation *firstWait = earliest(waits);
  builder.setInsertionPoint(firstWait);
  sched::WaitOp::create(builder, firstWait->getLoc(), bucketReduce.getDone());
  if (!persistent) {
    Operation *lastFree = latest(frees);
    builder.setInsertionPoint(lastFree);
    sched::FreeOp::create(builder, lastFree->getLoc(), bucket);
  }
  for (Operation *wait : waits)
    wait->erase();
  for (Operation *allReduce : allReduces)
    allReduce->erase();
  for (Operation *free : frees)
    free->erase();

  builder.setInsertionPointAfterValue(bucket);
  int64_t offset = 0;
  for (Reduction &member : members) {
    MemRefType type = member.alloc.getType();
    // Views of a member's buffer (the units' gradients) become views of
    // the bucket directly.
    for (Operation *user : llvm::make_early_inc_range(member.alloc->getUsers()))
      if (auto view = dyn_cast<sched::ViewOp>(user);
          view && view.getSource() == member.alloc.getResult()) {
        view.getSourceMutable().assign(bucket);
        view.setOffset(offset + view.getOffset());
      }
    if (!member.alloc->use_empty()) {
      Value whole = sched::ViewOp::create(builder, member.alloc.getLoc(), type,
                                          bucket, offset);
      member.alloc.getResult().replaceAllUsesWith(whole);
    }
    offset += type.getNumElements();
  }
  for (Operation *alloc : allocs)
    alloc->erase();
}

} // namespace
