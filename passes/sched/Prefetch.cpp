//===- Prefetch.cpp - Issue all-gathers early -----------------------------===//
//
// sched-prefetch: FSDP's forward_prefetch and backward_prefetch on the
// explicit schedule. sched-insert-collectives places every all-gather right
// before the span that reads it; this pass moves the gather (with the
// allocation of its destination and the host-to-device copy that stages its
// input) up into the previous group's compute, so communication overlaps
// compute. Waits stay where they are. docs/sched.md ("sched-prefetch") is
// the contract.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/sched/SchedOpTable.h"

#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/TypeSwitch.h"

namespace plan {
#define GEN_PASS_DEF_SCHEDPREFETCH
#include "passes/Passes.h.inc"
} // namespace plan

using namespace mlir;

namespace {

/// The buffer a view or shard view is part of; buffers with the same root
/// may overlap.
Value rootBuffer(Value buffer) {
  while (Operation *def = buffer.getDefiningOp()) {
    if (auto view = dyn_cast<sched::ViewOp>(def))
      buffer = view.getSource();
    else if (auto shard = dyn_cast<sched::ShardViewOp>(def))
      buffer = shard.getSource();
    else
      break;
  }
  return buffer;
}

/// Buffers `op` may write: what the runtime's op table says it writes
/// (sched::getBufferAccesses); an op outside the table may write every
/// operand.
void collectWrites(Operation *op, SmallVectorImpl<Value> &writes) {
  if (isa<sched::ViewOp, sched::ShardViewOp>(op))
    return;
  if (std::optional<SmallVector<sched::BufferAccess, 4>> accesses =
          sched::getBufferAccesses(op)) {
    for (const sched::BufferAccess &access : *accesses)
      if (access.writes)
        writes.push_back(access.buffer());
    return;
  }
  for (Value operand : op->getOperands())
    if (isa<MemRefType>(operand.getType()))
      writes.push_back(operand);
}

enum class Phase { Forward, Backward };

/// A unit's compute for one micro-batch: its phase (a recompute belongs to
/// backward), micro-batch and the roots of the parameters it reads (null
/// where it has none of a kind).
struct Compute {
  Phase phase;
  int64_t microBatch;
  Value params;
  Value tied;
  Value frozen;
  bool reads(Value gathered) const {
    return gathered &&
           (params == gathered || tied == gathered || frozen == gathered);
  }
};

Value rootOrNull(Value buffer) { return buffer ? rootBuffer(buffer) : Value(); }

template <typename ComputeOp> Compute computeOf(ComputeOp op, Phase phase) {
  return Compute{phase, static_cast<int64_t>(op.getMicroBatch()),
                 rootOrNull(op.getParams()), rootOrNull(op.getTied()),
                 rootOrNull(op.getFrozen())};
}

std::optional<Compute> asCompute(Operation *op) {
  if (auto fwd = dyn_cast<sched::ForwardOp>(op))
    return computeOf(fwd, Phase::Forward);
  if (auto re = dyn_cast<sched::RecomputeOp>(op))
    return computeOf(re, Phase::Backward);
  if (auto bwd = dyn_cast<sched::BackwardOp>(op))
    return computeOf(bwd, Phase::Backward);
  return std::nullopt;
}

bool isGatherWait(Operation *op) {
  auto wait = dyn_cast<sched::WaitOp>(op);
  return wait && wait.getEvent().getDefiningOp<sched::AllGatherOp>();
}

bool isWaitOrStagingFree(Operation *op) {
  if (isa<sched::WaitOp>(op))
    return true;
  auto free = dyn_cast<sched::FreeOp>(op);
  if (!free)
    return false;
  auto alloc = free.getBuffer().getDefiningOp<sched::AllocOp>();
  return alloc && alloc.getRole() == sched::BufferRole::Staging;
}

/// What moves with an all-gather: the allocation of its destination and the
/// staging copies (with their allocations) its `after` list names.
struct GatherPackage {
  sched::AllGatherOp gather;
  llvm::SmallPtrSet<Operation *, 4> ops;
  /// Ops outside the package that define its operands: it cannot go above
  /// them.
  llvm::SmallPtrSet<Operation *, 8> definers;
  /// Roots of the buffers the package reads (the shard, the staged source).
  SmallVector<Value, 2> reads;
};

void addTransientAlloc(GatherPackage &package, Value buffer) {
  auto alloc = buffer.getDefiningOp<sched::AllocOp>();
  if (alloc && !alloc.getPersistent() &&
      alloc->getBlock() == package.gather->getBlock())
    package.ops.insert(alloc);
}

GatherPackage collectPackage(sched::AllGatherOp gather) {
  GatherPackage package;
  package.gather = gather;
  package.ops.insert(gather);
  addTransientAlloc(package, gather.getDst());
  package.reads.push_back(rootBuffer(gather.getSrc()));
  for (Value event : gather.getAfter()) {
    auto copy = event.getDefiningOp<sched::CopyOp>();
    if (!copy || copy->getBlock() != gather->getBlock())
      continue;
    package.ops.insert(copy);
    addTransientAlloc(package, copy.getDst());
    package.reads.push_back(rootBuffer(copy.getSrc()));
  }
  for (Operation *op : package.ops)
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp();
          def && !package.ops.count(def))
        package.definers.insert(def);
  return package;
}

bool writesAny(Operation *op, ArrayRef<Value> roots) {
  SmallVector<Value, 4> writes;
  collectWrites(op, writes);
  return llvm::any_of(writes, [&](Value written) {
    return llvm::is_contained(roots, rootBuffer(written));
  });
}

/// Whether `freed` is an earlier gathered copy of the shard `source`: FSDP
/// reuses one unsharded buffer per group, so a group's next gather never
/// starts before its previous copy is released.
bool isGatheredCopyOf(Value freed, Value source) {
  return llvm::any_of(freed.getUsers(), [&](Operation *user) {
    auto gather = dyn_cast<sched::AllGatherOp>(user);
    return gather && gather.getDst() == freed &&
           rootBuffer(gather.getSrc()) == source;
  });
}

/// Whether moving the package above `op` keeps the program's meaning: the
/// package still follows what defines its operands, and nothing between its
/// new place and its wait writes what it reads or frees it.
bool canCross(const GatherPackage &package, Operation *op) {
  if (package.definers.count(op))
    return false;
  // Gathers stay in the order sched-insert-collectives issued them.
  if (isa<sched::AllGatherOp>(op))
    return false;
  if (writesAny(op, package.reads))
    return false;
  if (auto wait = dyn_cast<sched::WaitOp>(op))
    if (Operation *producer = wait.getEvent().getDefiningOp();
        producer && writesAny(producer, package.reads))
      return false;
  if (auto free = dyn_cast<sched::FreeOp>(op)) {
    Value freed = rootBuffer(free.getBuffer());
    if (llvm::is_contained(package.reads, freed) ||
        isGatheredCopyOf(free.getBuffer(), package.reads.front()))
      return false;
  }
  return true;
}

struct SchedPrefetchPass : plan::impl::SchedPrefetchBase<SchedPrefetchPass> {
  void runOnOperation() override;

private:
  void prefetch(sched::ProgramOp program, plan::ParallelAttr parallel);
  /// Moves `gather`'s package up as the prefetch policy and the in-flight
  /// limit allow; `inflight` gathers are issued and not waited right before
  /// it.
  void hoist(sched::AllGatherOp gather, int64_t inflight,
             plan::ParallelAttr parallel);
};

void SchedPrefetchPass::runOnOperation() {
  sched::ProgramOp program = getOperation();
  plan::ParallelAttr parallel = program.getParallel();
  plan::Sharding sharding = parallel.getSharding();
  // no_shard and zero1 gather nothing before compute: parameters are full.
  if (sharding == plan::Sharding::NoShard || sharding == plan::Sharding::Zero1)
    return;
  if (!parallel.getForwardPrefetch() &&
      parallel.getBackwardPrefetch() == plan::Prefetch::None)
    return;
  // A pipeline stage's sched.tasks: a task's first gather moves into the
  // task before it, which prefetching on tasks does not do yet, so the loop
  // is written out first (docs/sched.md, "The micro-batch loop").
  if (failed(plan::writeOutProgram(program)) ||
      failed(sched::requireUnrolled(program, getArgument())))
    return signalPassFailure();
  prefetch(program, parallel);
}

void SchedPrefetchPass::prefetch(sched::ProgramOp program,
                                 plan::ParallelAttr parallel) {
  // Gathers are hoisted in program order so each sees the ones before it
  // already in place; ops only move up, above the scan.
  SmallVector<Operation *> ops = llvm::map_to_vector(
      program.getBody().front(), [](Operation &op) { return &op; });
  int64_t inflight = 0;
  for (Operation *op : ops) {
    if (isGatherWait(op)) {
      --inflight;
      continue;
    }
    auto gather = dyn_cast<sched::AllGatherOp>(op);
    if (!gather)
      continue;
    hoist(gather, inflight, parallel);
    ++inflight;
  }
}

void SchedPrefetchPass::hoist(sched::AllGatherOp gather, int64_t inflight,
                              plan::ParallelAttr parallel) {
  // Only gathers into a fresh buffer for a span are prefetched (not zero1's
  // in-place gather after the step).
  auto dstAlloc = gather.getDst().getDefiningOp<sched::AllocOp>();
  if (!dstAlloc || dstAlloc.getPersistent() ||
      dstAlloc.getRole() != sched::BufferRole::Gathered)
    return;

  // The span this gather feeds: the first compute op after it, which must
  // read the gathered buffer.
  std::optional<Compute> span;
  for (Operation *op = gather->getNextNode(); op && !span;
       op = op->getNextNode())
    span = asCompute(op);
  Value gathered = gather.getDst();
  if (!span || !span->reads(gathered))
    return;

  bool backwardPost = false;
  if (span->phase == Phase::Forward) {
    if (!parallel.getForwardPrefetch())
      return;
  } else {
    plan::Prefetch mode = parallel.getBackwardPrefetch();
    if (mode == plan::Prefetch::None)
      return;
    backwardPost = mode == plan::Prefetch::Post;
  }

  // The previous group's compute: the run of compute ops right above the
  // gather that read the same parameters, in the same phase and micro-batch;
  // on a pipeline stage also the end of the task before (another phase or
  // micro-batch), which the stage runs right before this one.
  Operation *last = nullptr;
  std::optional<Compute> previous;
  for (Operation *op = gather->getPrevNode(); op && !previous;
       op = op->getPrevNode())
    if ((previous = asCompute(op)))
      last = op;
  if (!previous)
    return;
  bool sameTask = previous->phase == span->phase &&
                  previous->microBatch == span->microBatch;
  if (!sameTask && !gather->getParentOfType<sched::ProgramOp>().getStage())
    return;
  Operation *first = last;
  for (Operation *op = last->getPrevNode(); op; op = op->getPrevNode()) {
    std::optional<Compute> compute = asCompute(op);
    if (!compute)
      continue;
    if (compute->phase != previous->phase ||
        compute->microBatch != previous->microBatch ||
        compute->params != previous->params ||
        compute->frozen != previous->frozen)
      break;
    first = op;
  }

  GatherPackage package = collectPackage(gather);
  int64_t limit = parallel.getMaxInflightGathers();

  // Walk up from the gather. Package ops on the way are collected; the
  // package lands right above the topmost op it may cross.
  SmallVector<Operation *> pending, moving;
  Operation *insertBefore = nullptr;
  bool crossedFirst = false;
  for (Operation *op = gather->getPrevNode(); op; op = op->getPrevNode()) {
    if (package.ops.count(op)) {
      pending.push_back(op);
      continue;
    }
    if (asCompute(op)) {
      // Post: right after the previous group's backward; pre and forward:
      // through it, up to its start.
      if (backwardPost || crossedFirst)
        break;
    } else if (backwardPost) {
      // FSDP's post order: release the previous group's parameters, then
      // prefetch, then reduce its gradients.
      if (auto free = dyn_cast<sched::FreeOp>(op);
          free && (rootBuffer(free.getBuffer()) == previous->params ||
                   rootBuffer(free.getBuffer()) == previous->frozen))
        break;
    } else if (crossedFirst && !isWaitOrStagingFree(op)) {
      // Above the previous group's first compute op only what prepares it
      // is crossed: the wait for its gather (when the limit allows) and the
      // release of that gather's staging buffer. Crossing the release of an
      // older group's parameters would hold three gathered groups at once.
      break;
    }
    // A wait crossed upward leaves its gather in flight above it.
    int64_t inflightAbove = inflight + (isGatherWait(op) ? 1 : 0);
    if (inflightAbove + 1 > limit || !canCross(package, op))
      break;
    inflight = inflightAbove;
    if (op == first)
      crossedFirst = true;
    llvm::append_range(moving, pending);
    pending.clear();
    insertBefore = op;
  }
  if (!insertBefore)
    return;
  // `moving` lists the package ops below the new place bottom-up.
  for (Operation *op : llvm::reverse(moving))
    op->moveBefore(insertBefore);
  gather->moveBefore(insertBefore);
}

} // namespace
