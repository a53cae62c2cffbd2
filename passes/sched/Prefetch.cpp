//===- Prefetch.cpp - Issue all-gathers early -----------------------------===//
//
// sched-prefetch: FSDP's forward_prefetch and backward_prefetch on the
// explicit schedule. sched-insert-collectives places every all-gather right
// before the span that reads it; this pass moves the gather (with the
// allocation of its destination and the host-to-device copy that stages its
// input) up into the previous group's compute, so communication overlaps
// compute. Waits stay where they are. On a pipeline stage's sched.tasks a
// task's first gathers may move into the task before it (TaskPrefetch,
// below). docs/sched.md ("sched-prefetch") is the contract.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/sched/SchedOpTable.h"

#include "mlir/IR/IRMapping.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <map>

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

/// The wait of an all-gather of this block (what the scan counts in flight).
bool isGatherWait(Operation *op) {
  auto wait = dyn_cast<sched::WaitOp>(op);
  return wait && wait.getEvent().getDefiningOp<sched::AllGatherOp>();
}

/// On a pipeline stage's sched.tasks, a task's first group's parameters that
/// the task before it gathered lie in a slot of a buffer of the program, and
/// that gather's event is a slot event: what the rules below need to know of
/// them.
struct SlotGathers {
  /// Each slot buffer of gathered parameters, and the root of the shard its
  /// gathers read.
  llvm::DenseMap<Value, Value> sourceOf;
  /// The slot event families of their gathers.
  llvm::DenseSet<int64_t> families;

  /// Whether `op` waits for a gather, of this block or of the task before.
  bool waitsForGather(Operation *op) const {
    if (isGatherWait(op))
      return true;
    auto wait = dyn_cast<sched::WaitOp>(op);
    auto slotEvent =
        wait ? wait.getEvent().getDefiningOp<sched::SlotEventOp>() : nullptr;
    return slotEvent &&
           families.contains(static_cast<int64_t>(slotEvent.getFamily()));
  }
};

bool isWaitOrStagingFree(Operation *op) {
  if (isa<sched::WaitOp>(op))
    return true;
  auto free = dyn_cast<sched::FreeOp>(op);
  if (!free)
    return false;
  auto alloc = free.getBuffer().getDefiningOp<sched::AllocOp>();
  return alloc && alloc.getRole() == sched::BufferRole::Staging;
}

/// The copy that stages `gather`'s source, when the gather starts after it
/// alone and it fills that source in the gather's block
/// (sched-insert-offload-copies' copy of an offloaded shard to the device);
/// null otherwise.
sched::CopyOp stagingCopyOf(sched::AllGatherOp gather) {
  if (gather.getAfter().size() != 1)
    return nullptr;
  auto copy = gather.getAfter().front().getDefiningOp<sched::CopyOp>();
  if (!copy || copy.getDst() != gather.getSrc() ||
      copy->getBlock() != gather->getBlock())
    return nullptr;
  return copy;
}

/// The root of the shard `gather` gathers: its source's, or the root of
/// what its staging copy reads.
Value shardOf(sched::AllGatherOp gather) {
  if (sched::CopyOp copy = stagingCopyOf(gather))
    return rootBuffer(copy.getSrc());
  return rootBuffer(gather.getSrc());
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
  /// The root of the shard it gathers (shardOf).
  Value shard;
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
  package.shard = shardOf(gather);
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
/// starts before its previous copy is released (staged on the device or
/// not).
bool isGatheredCopyOf(Value freed, Value source) {
  return llvm::any_of(freed.getUsers(), [&](Operation *user) {
    auto gather = dyn_cast<sched::AllGatherOp>(user);
    return gather && gather.getDst() == freed && shardOf(gather) == source;
  });
}

/// Whether `op` reads a gathered copy of the shard `source` that lies in a
/// slot (gathered by the task before). Such a copy is not freed, its slot
/// lasting the loop; its last use stands for the free that ends it.
bool usesSlotCopyOf(Operation *op, Value source, const SlotGathers &slots) {
  return llvm::any_of(op->getOperands(), [&](Value operand) {
    auto slot = rootBuffer(operand).getDefiningOp<sched::SlotOp>();
    return slot && slots.sourceOf.lookup(slot.getSource()) == source;
  });
}

/// Whether moving the package above `op` keeps the program's meaning: the
/// package still follows what defines its operands, and nothing between its
/// new place and its wait writes what it reads or frees it.
bool canCross(const GatherPackage &package, Operation *op,
              const SlotGathers &slots) {
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
        isGatheredCopyOf(free.getBuffer(), package.shard))
      return false;
  }
  return !usesSlotCopyOf(op, package.shard, slots);
}

/// Going up from an op: within its block, and on a pipeline stage from the
/// top of a task's body (`body`) on into the end of the body of the task
/// that runs before it (`before`), where that task's first gather may move.
/// The walk ends at the top of `before`: above the previous group's first
/// compute op a package crosses only waits, and no body starts with one.
struct Walk {
  Block *body = nullptr;
  Block *before = nullptr;
  Operation *prev(Operation *op) const {
    if (Operation *above = op->getPrevNode())
      return above;
    if (before && op->getBlock() == body && !before->empty())
      return &before->back();
    return nullptr;
  }
};

/// Where a gather's package goes: right above `insertBefore`, with the
/// package ops it passes on the way (`moving`, bottom-up).
struct Hoist {
  Operation *insertBefore = nullptr;
  SmallVector<Operation *> moving;
};

/// Only gathers into a fresh buffer for a span are prefetched (not zero1's
/// in-place gather after the step).
bool isPrefetchable(sched::AllGatherOp gather) {
  auto dstAlloc = gather.getDst().getDefiningOp<sched::AllocOp>();
  return dstAlloc && !dstAlloc.getPersistent() &&
         dstAlloc.getRole() == sched::BufferRole::Gathered;
}

/// The span `gather` feeds: the first compute op after it, which must read
/// the gathered buffer.
std::optional<Compute> spanOf(sched::AllGatherOp gather) {
  std::optional<Compute> span;
  for (Operation *op = gather->getNextNode(); op && !span;
       op = op->getNextNode())
    span = asCompute(op);
  if (!span || !span->reads(gather.getDst()))
    return std::nullopt;
  return span;
}

/// Where the prefetch policy and the in-flight limit let `gather`'s package
/// go, going up by `walk`; `inflight` gathers are issued and not waited right
/// before it. None when it stays.
std::optional<Hoist> planHoist(sched::AllGatherOp gather, int64_t inflight,
                               plan::ParallelAttr parallel, const Walk &walk,
                               const SlotGathers &slots) {
  if (!isPrefetchable(gather))
    return std::nullopt;
  std::optional<Compute> span = spanOf(gather);
  if (!span)
    return std::nullopt;

  bool backwardPost = false;
  if (span->phase == Phase::Forward) {
    if (!parallel.getForwardPrefetch())
      return std::nullopt;
  } else {
    plan::Prefetch mode = parallel.getBackwardPrefetch();
    if (mode == plan::Prefetch::None)
      return std::nullopt;
    backwardPost = mode == plan::Prefetch::Post;
  }

  // The previous group's compute: the run of compute ops right above the
  // gather that read the same parameters, in the same phase and micro-batch;
  // on a pipeline stage also the end of the task before (another phase or
  // micro-batch), which the stage runs right before this one.
  Operation *last = nullptr;
  std::optional<Compute> previous;
  for (Operation *op = walk.prev(gather); op && !previous; op = walk.prev(op))
    if ((previous = asCompute(op)))
      last = op;
  if (!previous)
    return std::nullopt;
  bool sameTask = previous->phase == span->phase &&
                  previous->microBatch == span->microBatch;
  if (!sameTask && !gather->getParentOfType<sched::ProgramOp>().getStage())
    return std::nullopt;
  Operation *first = last;
  for (Operation *op = walk.prev(last); op; op = walk.prev(op)) {
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
  Hoist hoist;
  SmallVector<Operation *> pending;
  bool crossedFirst = false;
  for (Operation *op = walk.prev(gather); op; op = walk.prev(op)) {
    if (package.ops.count(op)) {
      pending.push_back(op);
      continue;
    }
    // A slot event names the event of an op of the task before, which a
    // wait below it waits for: it stands where that wait is, as the
    // program written out has it.
    if (isa<sched::SlotEventOp>(op)) {
      llvm::append_range(hoist.moving, pending);
      pending.clear();
      hoist.insertBefore = op;
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
    int64_t inflightAbove = inflight + (slots.waitsForGather(op) ? 1 : 0);
    if (inflightAbove + 1 > limit || !canCross(package, op, slots))
      break;
    inflight = inflightAbove;
    if (op == first)
      crossedFirst = true;
    llvm::append_range(hoist.moving, pending);
    pending.clear();
    hoist.insertBefore = op;
  }
  if (!hoist.insertBefore)
    return std::nullopt;
  return hoist;
}

void applyHoist(const Hoist &hoist, sched::AllGatherOp gather) {
  // `moving` lists the package ops below the new place bottom-up.
  for (Operation *op : llvm::reverse(hoist.moving))
    op->moveBefore(hoist.insertBefore);
  gather->moveBefore(hoist.insertBefore);
}

/// Calls `each(gather, inflight)` on the gathers of `block` in order (only
/// those before its first compute op with `firstSpanOnly`), `inflight` the
/// gathers issued and not waited right before it in the block as it was
/// when the scan began. Gathers are hoisted in that order so each sees the
/// ones before it already in place; ops only move up, above the scan.
template <typename Each>
void scanGathers(Block &block, bool firstSpanOnly, Each &&each) {
  SmallVector<Operation *> ops =
      llvm::map_to_vector(block, [](Operation &op) { return &op; });
  int64_t inflight = 0;
  for (Operation *op : ops) {
    if (firstSpanOnly && asCompute(op))
      break;
    if (isGatherWait(op)) {
      --inflight;
      continue;
    }
    if (auto gather = dyn_cast<sched::AllGatherOp>(op)) {
      each(gather, inflight);
      ++inflight;
    }
  }
}

/// Hoists the gathers of `block`, each within the block.
void prefetchBlock(Block &block, plan::ParallelAttr parallel,
                   const SlotGathers &slots) {
  scanGathers(block, /*firstSpanOnly=*/false,
              [&](sched::AllGatherOp gather, int64_t inflight) {
                if (std::optional<Hoist> hoist =
                        planHoist(gather, inflight, parallel, Walk{}, slots))
                  applyHoist(*hoist, gather);
              });
}

/// A task's first gathers: the sched.all_gathers of its body before any
/// compute op (the first span's parameters, frozen base included) that
/// prefetching may move, and so the task before may issue.
SmallVector<sched::AllGatherOp> leadingGathers(sched::TaskOp task) {
  SmallVector<sched::AllGatherOp> gathers;
  for (Operation &op : task.getBody().front()) {
    if (asCompute(&op))
      break;
    if (auto gather = dyn_cast<sched::AllGatherOp>(op);
        gather && isPrefetchable(gather) && spanOf(gather))
      gathers.push_back(gather);
  }
  return gathers;
}

/// sched-prefetch on a pipeline stage's sched.tasks, with the result it has
/// on the loop written out. Within a body gathers move as in a flat
/// program; a task's first gathers may move into the body of the task
/// before it, which depends on both. So the table is played in order, and
/// for each pair of an entry's body and the body the entry before ends up
/// with (memoized), copies of the two are prefetched as one program would
/// be: the entry's first gathers walk up through its body and on into the
/// one before. A body keeps a variant per way its first gathers went, and
/// one per gathers it took from the task after it. A gather moved into the
/// task before gathers into a slot of a buffer of the program (one per
/// gathered group and phase: a chunk forwards, and backwards, its
/// micro-batches in order) and signals a slot event family of its own, the
/// instance of the micro-batch that waits for it.
class TaskPrefetch {
public:
  TaskPrefetch(sched::TasksOp tasks, plan::ParallelAttr parallel)
      : tasks(tasks), parallel(parallel), builder(tasks.getContext()),
        families(static_cast<int64_t>(tasks.getEventFamilies())) {}

  /// Whether each first gather can move into another body: it reads a
  /// buffer of the program, or a staging buffer of its body that a copy of
  /// one fills, and is issued after nothing else; one wait ends it and its
  /// copy each, and one free its destination and its staging buffer each.
  static bool supported(sched::TasksOp tasks);

  void run();

private:
  /// The slot buffer and slot event family of a gathered group in a phase.
  struct SlotGather {
    sched::AllocOp buffer;
    int64_t family;
  };
  /// What an entry's prefetching makes of its body and of the body before.
  struct Step {
    sched::TaskOp body, before;
  };

  Step step(sched::TaskOp before, int64_t task, int64_t shift);
  void moveToSlot(sched::AllGatherOp gather, Phase phase, Block &body,
                  int64_t shift);
  SlotGather &slotGather(sched::AllocOp alloc, Phase phase, Value source);
  void placeInSlot(sched::AllocOp alloc, Value slots, Block &body,
                   int64_t shift);
  sched::TaskOp cloneTask(sched::TaskOp task);

  sched::TasksOp tasks;
  plan::ParallelAttr parallel;
  OpBuilder builder;
  int64_t families;
  SlotGathers slots;
  SmallVector<sched::TaskOp> templates;
  std::map<std::string, SlotGather> slotGathers;
  std::map<std::tuple<Operation *, int64_t, int64_t>, Step> steps;
  /// A task's bodies by the template ops they keep, in order.
  std::map<std::pair<int64_t, std::vector<int64_t>>, sched::TaskOp> bodies;
};

/// Whether `event` is waited once, by a sched.wait, and otherwise only
/// named by `besides`.
bool waitedOnce(Value event, Operation *besides) {
  int64_t waits = 0;
  for (Operation *user : event.getUsers()) {
    if (isa<sched::WaitOp>(user))
      ++waits;
    else if (user != besides)
      return false;
  }
  return waits == 1;
}

/// Whether `buffer` is allocated in `block` and freed once there, and is
/// otherwise only named by the ops `named` accepts.
template <typename Named>
bool freedOnceIn(Value buffer, Block *block, Named &&named) {
  auto alloc = buffer.getDefiningOp<sched::AllocOp>();
  if (!alloc || alloc->getBlock() != block)
    return false;
  int64_t frees = 0;
  for (Operation *user : alloc->getUsers()) {
    if (isa<sched::FreeOp>(user))
      ++frees;
    else if (!named(user))
      return false;
  }
  return frees == 1;
}

/// Whether `buffer` is gathered parameters allocated by the program around
/// `tasks` (shard_grad_op's, gathered once a step by the first micro-batch's
/// forward and read by every body): a gather into it that moves into the
/// task before still gathers into it, and only its event goes through a
/// slot event.
bool isLoopBuffer(sched::TasksOp tasks, Value buffer) {
  auto alloc = buffer.getDefiningOp<sched::AllocOp>();
  return alloc && !tasks->isAncestor(alloc) && !alloc.getPersistent() &&
         alloc.getRole() == sched::BufferRole::Gathered;
}

bool TaskPrefetch::supported(sched::TasksOp tasks) {
  auto ofProgram = [&](Value buffer) {
    Operation *def = buffer.getDefiningOp();
    return def && !tasks->isAncestor(def);
  };
  for (sched::TaskOp task : tasks.getTasks()) {
    for (sched::AllGatherOp gather : leadingGathers(task)) {
      Block *block = gather->getBlock();
      if (sched::CopyOp copy = stagingCopyOf(gather)) {
        if (!copy.getAfter().empty() || !ofProgram(copy.getSrc()) ||
            !waitedOnce(copy.getDone(), gather) ||
            !freedOnceIn(copy.getDst(), block, [&](Operation *user) {
              return user == copy || user == gather;
            }))
          return false;
      } else if (!ofProgram(gather.getSrc()) || !gather.getAfter().empty()) {
        return false;
      }
      if (!waitedOnce(gather.getDone(), nullptr) ||
          !(isLoopBuffer(tasks, gather.getDst()) ||
            freedOnceIn(gather.getDst(), block, [&](Operation *user) {
              return user == gather || isa<sched::ViewOp>(user);
            })))
        return false;
    }
  }
  return true;
}

sched::TaskOp TaskPrefetch::cloneTask(sched::TaskOp task) {
  builder.setInsertionPointToEnd(&tasks.getBody().front());
  return cast<sched::TaskOp>(builder.clone(*task));
}

/// The slot buffer of `alloc`'s buffer in `phase`: of a gathered group
/// (`source` the root of the shard its gathers read, shardOf) or of a
/// staging copy (null `source`).
TaskPrefetch::SlotGather &TaskPrefetch::slotGather(sched::AllocOp alloc,
                                                   Phase phase, Value source) {
  std::string name =
      alloc.getName().str() +
      (phase == Phase::Forward ? ".prefetch.forward" : ".prefetch.backward");
  auto [it, added] = slotGathers.try_emplace(name);
  if (added) {
    it->second.buffer =
        plan::allocSlotBuffer(tasks, alloc.getType(), name, alloc.getRole());
    it->second.family = families++;
    if (source) {
      slots.sourceOf[it->second.buffer.getBuffer()] = source;
      slots.families.insert(it->second.family);
    }
  }
  return it->second;
}

/// `alloc`, moved from `body` into the body before it, is a slot of the
/// buffer `slots` there, `shift` micro-batches from that run's; `body`
/// reads the slot where it used the buffer, and frees nothing.
void TaskPrefetch::placeInSlot(sched::AllocOp alloc, Value slots, Block &body,
                               int64_t shift) {
  auto attr = [&](int64_t value) { return builder.getI64IntegerAttr(value); };
  Operation *firstUse = nullptr;
  for (Operation *user : llvm::make_early_inc_range(alloc->getUsers())) {
    if (user->getBlock() != &body)
      continue;
    if (isa<sched::FreeOp>(user))
      user->erase();
    else if (!firstUse || user->isBeforeInBlock(firstUse))
      firstUse = user;
  }
  Location loc = alloc.getLoc();
  if (firstUse) {
    builder.setInsertionPoint(firstUse);
    auto read = sched::SlotOp::create(builder, loc, alloc.getType(), slots,
                                      attr(0), attr(1));
    alloc.getResult().replaceUsesWithIf(read.getResult(), [&](OpOperand &use) {
      return use.getOwner()->getBlock() == &body;
    });
  }
  builder.setInsertionPoint(alloc);
  auto write = sched::SlotOp::create(builder, loc, alloc.getType(), slots,
                                     attr(shift), attr(1));
  alloc.getResult().replaceAllUsesWith(write.getResult());
  alloc->erase();
}

/// `gather`, moved from `body` into the body before it (with its
/// destination's allocation, and its staging copy with the copy's), gathers
/// into a slot there, `shift` micro-batches from that run's, and signals its
/// slot event; `body` reads the slot and waits for the slot event instead.
/// A staging copy fills a slot of its own and signals its own slot event,
/// which `body` waits for where it waited for the copy. `phase` is the
/// phase of the span it gathers for.
void TaskPrefetch::moveToSlot(sched::AllGatherOp gather, Phase phase,
                              Block &body, int64_t shift) {
  auto attr = [&](int64_t value) { return builder.getI64IntegerAttr(value); };
  // Each async op's wait in `body` waits for its slot event, which the op
  // signals in the body before.
  auto signalInSlot = [&](Operation *async, Value done, int64_t family) {
    auto wait = cast<sched::WaitOp>(
        *llvm::find_if(done.getUsers(), [](Operation *user) {
          return isa<sched::WaitOp>(user);
        }));
    builder.setInsertionPoint(wait);
    Value event = sched::SlotEventOp::create(
        builder, wait.getLoc(), done.getType(), attr(family), attr(0));
    wait->setOperand(0, event);
    builder.setInsertionPointAfter(async);
    sched::SlotSignalOp::create(builder, async->getLoc(), done, attr(family),
                                attr(shift));
  };
  sched::CopyOp copy = stagingCopyOf(gather);
  auto dst = gather.getDst().getDefiningOp<sched::AllocOp>();
  int64_t family;
  if (isLoopBuffer(tasks, dst)) {
    family = families++;
    slots.families.insert(family);
  } else {
    SlotGather gathered = slotGather(dst, phase, shardOf(gather));
    placeInSlot(dst, gathered.buffer.getBuffer(), body, shift);
    family = gathered.family;
  }
  signalInSlot(gather, gather.getDone(), family);
  if (copy) {
    auto staging = copy.getDst().getDefiningOp<sched::AllocOp>();
    SlotGather staged = slotGather(staging, phase, Value());
    placeInSlot(staging, staged.buffer.getBuffer(), body, shift);
    signalInSlot(copy, copy.getDone(), staged.family);
  }
}

TaskPrefetch::Step TaskPrefetch::step(sched::TaskOp before, int64_t task,
                                      int64_t shift) {
  auto [it, added] = steps.try_emplace({before, task, shift});
  if (!added)
    return it->second;
  Step &out = it->second;
  sched::TaskOp body = cloneTask(templates[task]);
  Block &block = body.getBody().front();
  llvm::DenseMap<Operation *, int64_t> original;
  for (auto [index, op] : llvm::enumerate(block))
    original[&op] = static_cast<int64_t>(index);
  SmallVector<sched::AllGatherOp> leading = leadingGathers(body);
  // The first gathers, walked up through the body and a copy of the body
  // before, in the order of the scan of a flat program.
  sched::TaskOp copy = before && !leading.empty() ? cloneTask(before) : nullptr;
  SmallVector<std::pair<sched::AllGatherOp, Phase>> moved;
  if (copy) {
    Walk walk{&block, &copy.getBody().front()};
    scanGathers(block, /*firstSpanOnly=*/true,
                [&](sched::AllGatherOp gather, int64_t inflight) {
                  if (!llvm::is_contained(leading, gather))
                    return;
                  std::optional<Hoist> hoist =
                      planHoist(gather, inflight, parallel, walk, slots);
                  if (!hoist)
                    return;
                  Phase phase = spanOf(gather)->phase;
                  applyHoist(*hoist, gather);
                  if (gather->getBlock() != &block)
                    moved.push_back({gather, phase});
                });
  }
  // A body per way its first gathers went: the template ops it keeps, in
  // order.
  std::vector<int64_t> kept;
  for (Operation &op : block)
    kept.push_back(original.lookup(&op));
  for (auto [gather, phase] : moved)
    moveToSlot(gather, phase, block, shift);
  sched::TaskOp &shared = bodies[{task, kept}];
  if (shared) {
    body->erase();
  } else {
    prefetchBlock(block, parallel, slots);
    shared = body;
  }
  out.body = shared;
  if (moved.empty()) {
    if (copy)
      copy->erase();
    out.before = before;
  } else {
    out.before = copy;
  }
  return out;
}

void TaskPrefetch::run() {
  templates = tasks.getTasks();
  SmallVector<int64_t> table(tasks.getOrder());
  auto entries = static_cast<int64_t>(table.size() / 2);
  SmallVector<sched::TaskOp> runs(entries);
  sched::TaskOp before;
  int64_t beforeMicroBatch = 0;
  for (int64_t entry = 0; entry < entries; ++entry) {
    int64_t task = table[2 * entry], microBatch = table[2 * entry + 1];
    Step next = step(before, task, before ? microBatch - beforeMicroBatch : 0);
    if (entry > 0)
      runs[entry - 1] = next.before;
    before = next.body;
    beforeMicroBatch = microBatch;
  }
  if (entries > 0)
    runs[entries - 1] = before;

  // The bodies the table runs, in the order it first runs them.
  llvm::DenseMap<Operation *, int64_t> indexOf;
  SmallVector<sched::TaskOp> used;
  for (auto [entry, body] : llvm::enumerate(runs)) {
    auto [it, added] = indexOf.try_emplace(body, used.size());
    if (added)
      used.push_back(body);
    table[2 * entry] = it->second;
  }
  Block &block = tasks.getBody().front();
  for (sched::TaskOp task : tasks.getTasks())
    if (!indexOf.count(task))
      task->erase();
  for (sched::TaskOp task : used)
    task->moveBefore(&block, block.end());
  tasks.setOrder(table);
  tasks.setEventFamilies(families);
}

struct SchedPrefetchPass : plan::impl::SchedPrefetchBase<SchedPrefetchPass> {
  void runOnOperation() override;
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
  if (failed(plan::requireNoRepeat(program, getArgument())))
    return signalPassFailure();
  Block &block = program.getBody().front();
  auto loops = llvm::to_vector(block.getOps<sched::TasksOp>());
  // Outside a pipeline stage's loop nothing is gathered for compute.
  bool onTasks =
      loops.size() == 1 && TaskPrefetch::supported(loops.front()) &&
      llvm::none_of(block.getOps<sched::AllGatherOp>(), isPrefetchable);
  if (onTasks) {
    TaskPrefetch(loops.front(), parallel).run();
    return;
  }
  // Otherwise the loop is written out first (docs/sched.md, "The
  // micro-batch loop").
  if (failed(plan::writeOutProgram(program)) ||
      failed(sched::requireUnrolled(program, getArgument())))
    return signalPassFailure();
  prefetchBlock(block, parallel, SlotGathers());
}

} // namespace
