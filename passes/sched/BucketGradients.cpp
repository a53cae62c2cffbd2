//===- BucketGradients.cpp - DDP gradient buckets -------------------------===//
//
// sched-bucket-gradients: DDP's gradient buckets on the explicit schedule.
// sched-insert-collectives all-reduces each group's gradient on its own;
// small groups (a norm, a block of a small model) then pay one collective
// launch each. This pass lays the buffers that groups finishing backward one
// after another reduce into one bucket buffer of at most `parallel.bucket`
// bytes and reduces each bucket once, after its last group. On a pipeline
// stage's sched.tasks, each body's reductions are bucketed within the body
// (a bucket of persistent gradients, which only the last micro-batch's
// bodies reduce, is a persistent buffer of the program), and those that
// later tasks complete into slots of bucket buffers of the program
// (bucketSlotReductions).
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
#include "llvm/ADT/SetVector.h"

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
  if (!alloc)
    return std::nullopt;
  // Or a persistent gradient of the program that a body of its sched.tasks
  // reduces (grad_sync = last_micro_batch: the last micro-batch's bodies).
  auto task = dyn_cast<sched::TaskOp>(block->getParentOp());
  bool programGradient = task && alloc.getPersistent() &&
                         alloc->getBlock() == task->getParentOp()->getBlock();
  if (alloc->getBlock() != block && !programGradient)
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
/// Whether one all-reduce can serve `a` and `b`, each of a whole buffer of
/// `aBuffer` and `bBuffer`: same element type, memory space, persistence
/// and role, on the same group with the same reduction.
bool sameKind(sched::AllReduceOp a, sched::AllocOp aBuffer,
              sched::AllReduceOp b, sched::AllocOp bBuffer) {
  MemRefType type = aBuffer.getType(), otherType = bBuffer.getType();
  return type.getElementType() == otherType.getElementType() &&
         type.getMemorySpace() == otherType.getMemorySpace() &&
         aBuffer.getPersistent() == bBuffer.getPersistent() &&
         aBuffer.getRole() == bBuffer.getRole() &&
         a.getGroup() == b.getGroup() && a.getReduce() == b.getReduce();
}

bool canJoin(MutableArrayRef<Reduction> members, Reduction next,
             int64_t bucketBytes) {
  Reduction &first = members.front();
  if (!sameKind(first.allReduce, first.alloc, next.allReduce, next.alloc))
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

/// A reduction of a task's body that later tasks complete: an all-reduce
/// of a whole slot buffer of the program (one slot, the body's own: shift
/// 0), its event the body's instance of a slot event family.
struct SlotReduction {
  sched::AllReduceOp allReduce;
  sched::AllocOp source;
  sched::SlotSignalOp signal;
  int64_t bytes;

  int64_t family() { return static_cast<int64_t>(signal.getFamily()); }
};

std::optional<SlotReduction> asSlotReduction(sched::AllReduceOp allReduce) {
  auto slot = allReduce.getBuffer().getDefiningOp<sched::SlotOp>();
  if (!slot || slot.getShift() != 0 || slot.getSlots() != 1)
    return std::nullopt;
  auto source = slot.getSource().getDefiningOp<sched::AllocOp>();
  if (!source || source.getPersistent() ||
      (source.getRole() != sched::BufferRole::UnshardedGrad &&
       source.getRole() != sched::BufferRole::Staging))
    return std::nullopt;
  // Its slots only, and its free after the loop.
  for (Operation *user : source->getUsers())
    if (auto other = dyn_cast<sched::SlotOp>(user);
        !isa<sched::FreeOp>(user) && (!other || other.getSlots() != 1))
      return std::nullopt;
  Value done = allReduce.getDone();
  if (!done.hasOneUse())
    return std::nullopt;
  auto signal = dyn_cast<sched::SlotSignalOp>(*done.getUsers().begin());
  if (!signal || signal.getShift() != 0)
    return std::nullopt;
  return SlotReduction{allReduce, source, signal,
                       bufferBytes(source.getType())};
}

/// The waits of each slot event family of `tasks` per body and shift.
using FamilyWaits =
    std::map<std::tuple<Operation *, int64_t, int64_t>, sched::WaitOp>;

/// Buckets the reductions that later tasks complete (asSlotReduction):
/// consecutive ones of a body as canJoin would (their waits all lie in
/// later bodies), each bucket one slot buffer of the program
/// ("grad.bucket<k>.reducing") whose members are views of its slot, one
/// all-reduce signalling the first member's family, and in each body that
/// waits for them one wait of that family where the first member's was.
/// Nothing is bucketed unless every body that signals a family (or reduces
/// a slot buffer) buckets it with the same others and every body that waits
/// for one member waits for all, at the same shift.
void bucketSlotReductions(sched::TasksOp tasks, int64_t bucketBytes) {
  SmallVector<SmallVector<SlotReduction>> buckets;
  std::map<int64_t, std::vector<int64_t>> bucketOf; // family -> families
  // A slot buffer's reductions, whichever body issues them: one bucket.
  llvm::DenseMap<Operation *, std::vector<int64_t>> bucketOfSource;
  for (sched::TaskOp task : tasks.getTasks()) {
    SmallVector<SmallVector<SlotReduction>> body;
    for (auto allReduce : task.getBody().front().getOps<sched::AllReduceOp>()) {
      std::optional<SlotReduction> reduction = asSlotReduction(allReduce);
      if (!reduction)
        continue;
      SmallVector<SlotReduction> *last = body.empty() ? nullptr : &body.back();
      int64_t bytes = reduction->bytes;
      if (last)
        for (SlotReduction &member : *last)
          bytes += member.bytes;
      if (!last ||
          !sameKind(last->front().allReduce, last->front().source,
                    reduction->allReduce, reduction->source) ||
          bytes > bucketBytes)
        body.emplace_back();
      body.back().push_back(*reduction);
    }
    for (SmallVector<SlotReduction> &bucket : body) {
      std::vector<int64_t> families;
      for (SlotReduction &member : bucket)
        families.push_back(member.family());
      for (int64_t family : families) {
        auto [it, added] = bucketOf.try_emplace(family, families);
        if (!added && it->second != families)
          return;
      }
      for (SlotReduction &member : bucket) {
        auto [it, added] = bucketOfSource.try_emplace(member.source, families);
        if (!added && it->second != families)
          return;
      }
      if (bucket.size() > 1)
        buckets.push_back(std::move(bucket));
    }
  }
  if (buckets.empty())
    return;
  FamilyWaits waits;
  for (sched::TaskOp task : tasks.getTasks())
    for (auto event : task.getBody().front().getOps<sched::SlotEventOp>()) {
      auto family = static_cast<int64_t>(event.getFamily());
      if (!bucketOf.count(family))
        continue;
      Value done = event.getEvent();
      auto wait = done.hasOneUse()
                      ? dyn_cast<sched::WaitOp>(*done.getUsers().begin())
                      : sched::WaitOp();
      auto [it, added] = waits.try_emplace(
          {task, family, static_cast<int64_t>(event.getShift())}, wait);
      if (!wait || !added)
        return;
    }
  // Every member waited for where any is.
  for (auto &[key, wait] : waits) {
    auto [task, family, shift] = key;
    for (int64_t other : bucketOf[family])
      if (!waits.count({task, other, shift}))
        return;
  }

  OpBuilder builder(tasks.getContext());
  auto attr = [&](int64_t value) { return builder.getI64IntegerAttr(value); };
  std::map<std::vector<int64_t>, sched::AllocOp> built;
  llvm::SetVector<Operation *> sources;
  for (MutableArrayRef<SlotReduction> bucket : buckets) {
    std::vector<int64_t> families = bucketOf[bucket.front().family()];
    // One slot buffer per bucket, its members laid out in reduction order.
    auto [it, isNew] = built.try_emplace(families);
    MemRefType memberType = bucket.front().source.getType();
    int64_t numel = 0;
    for (SlotReduction &member : bucket)
      numel += member.source.getType().getNumElements();
    MemRefType type = MemRefType::get({numel}, memberType.getElementType(),
                                      MemRefLayoutAttrInterface(),
                                      memberType.getMemorySpace());
    sched::AllocOp &buffer = it->second;
    if (isNew) {
      std::string name = ("grad.bucket" + Twine(built.size() - 1)).str() +
                         plan::reducingSuffix.str();
      buffer =
          plan::allocSlotBuffer(tasks, type, name, sched::BufferRole::Bucket);
      // Each member's slots become views of the bucket's.
      int64_t offset = 0;
      for (SlotReduction &member : bucket) {
        for (Operation *user :
             llvm::make_early_inc_range(member.source->getUsers())) {
          if (isa<sched::FreeOp>(user)) {
            user->erase();
            continue;
          }
          auto slot = cast<sched::SlotOp>(user);
          builder.setInsertionPoint(slot);
          Value whole =
              sched::SlotOp::create(builder, slot.getLoc(), type, buffer,
                                    slot.getShiftAttr(), attr(1));
          Value view = sched::ViewOp::create(
              builder, slot.getLoc(), slot.getType(), whole, attr(offset));
          slot.getResult().replaceAllUsesWith(view);
          slot->erase();
        }
        offset += member.source.getType().getNumElements();
      }
      // One wait of the first member's family per body and shift, where
      // the first of the members' was.
      for (auto &[key, wait] : waits) {
        auto [task, family, shift] = key;
        if (family != families.front())
          continue;
        SmallVector<sched::WaitOp> memberWaits;
        for (int64_t member : families)
          memberWaits.push_back(waits.at({task, member, shift}));
        sched::WaitOp first = memberWaits.front();
        for (sched::WaitOp other : memberWaits)
          if (other->isBeforeInBlock(first))
            first = other;
        for (sched::WaitOp other : memberWaits) {
          if (other == first)
            continue;
          Operation *event = other.getEvent().getDefiningOp();
          other->erase();
          event->erase();
        }
        auto event = cast<sched::SlotEventOp>(first.getEvent().getDefiningOp());
        event.setFamily(static_cast<uint64_t>(families.front()));
      }
    }
    // One reduction of the bucket's slot where the last member's was,
    // signalling the first member's family.
    sched::AllReduceOp last = bucket.back().allReduce;
    SmallVector<Value> after;
    for (SlotReduction &member : bucket)
      llvm::append_range(after, member.allReduce.getAfter());
    builder.setInsertionPoint(last);
    Value whole = sched::SlotOp::create(builder, last.getLoc(), type, buffer,
                                        attr(0), attr(1));
    auto reduce = sched::AllReduceOp::create(
        builder, last.getLoc(), last.getDone().getType(), whole,
        last.getGroup(), last.getReduce(), after);
    sched::SlotSignalOp::create(builder, last.getLoc(), reduce.getDone(),
                                attr(families.front()), attr(0));
    for (SlotReduction &member : bucket) {
      member.signal->erase();
      member.allReduce->erase();
      sources.insert(member.source);
    }
  }
  for (Operation *source : sources)
    source->erase();
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

  /// The program's buckets named so far.
  int64_t programBuckets = 0;
};

void SchedBucketGradientsPass::runOnOperation() {
  sched::ProgramOp program = getOperation();
  if (program.getParallel().getSharding() != plan::Sharding::NoShard)
    return;
  if (failed(plan::requireNoRepeat(program, getArgument())))
    return signalPassFailure();
  Block &block = program.getBody().front();
  programBuckets = 0;
  bucketBlock(block, std::nullopt);
  // A pipeline stage's sched.tasks (docs/sched.md, "The micro-batch loop"):
  // each body's own (one a body waits for completes before the next body's
  // are issued, so such a bucket never spans bodies), then those later
  // tasks complete, in slots.
  for (auto tasks : block.getOps<sched::TasksOp>()) {
    for (sched::TaskOp task : tasks.getTasks())
      bucketBlock(task.getBody().front(),
                  static_cast<int64_t>(task.getMicroBatch()));
    bucketSlotReductions(tasks, program.getParallel().getBucket());
  }
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
    // A body's transient bucket is named for its micro-batch; a buffer of
    // the program (a flat step's, or persistent) as the flat step names it.
    std::string name =
        microBatch && !bucket.front().alloc.getPersistent()
            ? ("grad.bucket" + Twine(index++) + ".mb" + Twine(*microBatch))
                  .str()
            : ("grad.bucket" + Twine(programBuckets++)).str();
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
