//===- PlanMemory.cpp - Place every buffer in a static arena --------------===//
//
// docs/sched.md ("sched-plan-memory"). The runtime allocates one arena per
// memory space once and places every sched.alloc at the `offset` this pass
// sets; with what LibTorch allocates outside it (sched-plan-workspace), that
// is the peak the run has.
//
// Lifetimes are program points of the straight-line body: a persistent
// buffer lives over the whole program, a transient one from its sched.alloc
// to its sched.free (sched-verify-schedule guarantees that every use,
// including an asynchronous op's, completed before the free). Views do not
// allocate. A sched.repeat's or sched.tasks' bodies, which run one at a
// time and keep their own buffers within a run, share one frame per space,
// live at the loop's point. A held buffer of a sched.tasks (a one-slot
// buffer of the program that only the bodies' sched.slots use: what hands a
// micro-batch's data from one task to a later one) lies in that frame, at a
// fixed place, and each body's buffers go around it only where some run of
// the body has it in use (sched::findSlotSpans). The placement itself is
// packArena (ArenaPacking.h):
// first fit by decreasing size, persistent buffers first, which leaves them
// contiguous at the bottom of each arena. Every offset is a multiple of 256
// bytes, what CUDA's allocator guarantees, so kernels see the alignment they
// would get from cudaMalloc.
//
// Existing offsets are ignored and recomputed, so rerunning the pass gives
// the same result.
//
//===----------------------------------------------------------------------===//

#include "analysis/ArenaPacking.h"
#include "dialects/sched/SlotSpans.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/Sequence.h"

#include <map>

namespace plan {
#define GEN_PASS_DEF_SCHEDPLANMEMORY
#include "passes/Passes.h.inc"
} // namespace plan

using namespace mlir;
using namespace sched;

namespace {

constexpr uint64_t kArenaAlignment = 256;

/// The buffers of one memory space and their lifetimes.
struct SpaceBuffers {
  SmallVector<AllocOp> allocs;
  std::vector<plan::ArenaInterval> intervals;
};

uint32_t spaceKey(AllocOp alloc) {
  auto space = cast<MemorySpaceAttr>(alloc.getType().getMemorySpace());
  return static_cast<uint32_t>(space.getValue());
}

/// The buffers `block`'s allocs define and their lifetimes, per memory space
/// (keyed by the space's enum value, so arenas come out in a fixed order):
/// program points are the indices of the block's ops; an allocation lives
/// from its alloc to its free, a persistent one over the whole block. The
/// allocs of `skip` (held buffers, placed in a loop's frame) are left out.
FailureOr<std::map<uint32_t, SpaceBuffers>>
collectBuffers(Block &block, const llvm::DenseSet<Operation *> &skip = {}) {
  // Persistent buffers span one point past the last op, so no transient one
  // covers the same range.
  int64_t end = static_cast<int64_t>(block.getOperations().size());
  std::map<uint32_t, SpaceBuffers> spaces;
  llvm::DenseMap<Operation *, std::pair<uint32_t, size_t>> slotOf;
  int64_t point = 0;
  for (Operation &op : block) {
    if (auto alloc = dyn_cast<AllocOp>(op); alloc && !skip.contains(alloc)) {
      uint64_t bytes = getBufferBytes(alloc.getType());
      uint32_t key = spaceKey(alloc);
      SpaceBuffers &buffers = spaces[key];
      slotOf[alloc] = {key, buffers.allocs.size()};
      buffers.allocs.push_back(alloc);
      // A transient buffer is live until the end unless its free is found.
      buffers.intervals.push_back(
          {bytes, kArenaAlignment, alloc.getPersistent() ? 0 : point, end});
    } else if (auto free = dyn_cast<FreeOp>(op)) {
      auto alloc = free.getBuffer().getDefiningOp<AllocOp>();
      if (alloc && skip.contains(alloc)) {
        ++point;
        continue;
      }
      auto it = alloc ? slotOf.find(alloc) : slotOf.end();
      if (it == slotOf.end())
        return free.emitOpError(
            "frees a buffer that is not a sched.alloc of this program");
      plan::ArenaInterval &interval =
          spaces[it->second.first].intervals[it->second.second];
      if (interval.last != end)
        return free.emitOpError("frees buffer '")
               << alloc.getName() << "' a second time";
      interval.last = point;
    }
    ++point;
  }
  return spaces;
}

/// The bodies of a sched.repeat or a sched.tasks (none for another op).
SmallVector<Block *> bodiesOf(Operation &op) {
  SmallVector<Block *> bodies;
  if (auto repeat = dyn_cast<RepeatOp>(op))
    bodies.push_back(&repeat.getBody().front());
  if (auto tasks = dyn_cast<TasksOp>(op))
    for (TaskOp task : tasks.getTasks())
      bodies.push_back(&task.getBody().front());
  return bodies;
}

/// The held buffers of a sched.tasks and where each body has them in use.
struct HeldBuffers {
  SmallVector<AllocOp> allocs;
  /// Per body, per held buffer (index into `allocs`), the op ranges
  /// [first, last] of the body (its op indices, merged) in which some run of
  /// it has the buffer in use.
  SmallVector<std::map<unsigned, sched::PositionRanges>> inUse;
};

/// Whether `value` (or a view of it) is a forward's `in` or a recompute's
/// `input`: the graph keeps it by reference until the unit's backward,
/// which names it nowhere (runtime/models/Model.cpp), so its slot is in use
/// past its last op.
bool keptByAGraph(Value value) {
  SmallVector<Value> work = {value};
  while (!work.empty()) {
    Value v = work.pop_back_val();
    for (OpOperand &use : v.getUses()) {
      if (auto forward = dyn_cast<ForwardOp>(use.getOwner());
          forward && forward.getIn() == v)
        return true;
      if (auto recompute = dyn_cast<RecomputeOp>(use.getOwner());
          recompute && recompute.getInput() == v)
        return true;
      if (isa<ViewOp>(use.getOwner()))
        work.push_back(use.getOwner()->getResult(0));
    }
  }
  return false;
}

/// The program's allocs that `tasks`' bodies hold only while a micro-batch
/// is in their slot: transient, freed once in the program and otherwise
/// used only by views of them in the program and one-slot, unpicked
/// sched.slots of those in the bodies, none of which is a forward's `in`.
SmallVector<AllocOp> findHeld(Block &block, TasksOp tasks) {
  SmallVector<AllocOp> held;
  for (auto alloc : block.getOps<AllocOp>()) {
    if (alloc.getPersistent())
      continue;
    int frees = 0;
    bool slotted = false, other = false;
    SmallVector<Operation *> work = {alloc};
    while (!work.empty() && !other) {
      Operation *def = work.pop_back_val();
      for (Operation *user : def->getResult(0).getUsers()) {
        if (isa<FreeOp>(user) && user->getBlock() == &block && def == alloc) {
          ++frees;
        } else if (isa<ViewOp>(user) && user->getBlock() == &block) {
          work.push_back(user);
        } else if (auto slot = dyn_cast<SlotOp>(user);
                   slot && tasks->isAncestor(slot) && slot.getSlots() == 1 &&
                   !slot.isPicked() && !keptByAGraph(slot.getResult())) {
          slotted = true;
        } else {
          other = true;
        }
      }
    }
    if (!other && frees == 1 && slotted)
      held.push_back(alloc);
  }
  return held;
}

/// `tasks`' held buffers and, for each body, where its runs use them.
FailureOr<HeldBuffers> analyzeHeld(Block &block, TasksOp tasks) {
  HeldBuffers held;
  held.allocs = findHeld(block, tasks);
  SmallVector<TaskOp> bodies = tasks.getTasks();
  held.inUse.resize(bodies.size());
  if (held.allocs.empty())
    return held;
  FailureOr<SmallVector<sched::PositionRanges>> spans =
      sched::findHeldSpans(tasks, held.allocs);
  if (failed(spans))
    return failure();
  // Where each run starts among the step's op positions (findSlotSpans').
  SmallVector<int64_t> bodySize = llvm::map_to_vector(bodies, [](TaskOp task) {
    return static_cast<int64_t>(task.getBody().front().getOperations().size());
  });
  ArrayRef<int64_t> order = tasks.getOrder();
  SmallVector<int64_t> runStart;
  int64_t position = 0;
  for (size_t run = 0; 2 * run + 1 < order.size(); ++run) {
    runStart.push_back(position);
    position += bodySize[static_cast<size_t>(order[2 * run])];
  }
  auto runOf = [&](int64_t at) {
    return static_cast<size_t>(llvm::upper_bound(runStart, at) -
                               runStart.begin()) -
           1;
  };
  for (auto [root, ranges] : llvm::enumerate(*spans))
    for (auto [spanFirst, spanLast] : ranges) {
      size_t first = runOf(spanFirst), last = runOf(spanLast);
      for (size_t run = first; run <= last; ++run) {
        auto body = static_cast<size_t>(order[2 * run]);
        int64_t from = run == first ? spanFirst - runStart[run] : 0;
        int64_t to =
            run == last ? spanLast - runStart[run] : bodySize[body] - 1;
        held.inUse[body][static_cast<unsigned>(root)].push_back({from, to});
      }
    }
  for (auto &perBody : held.inUse)
    for (auto &[root, ranges] : perBody)
      sched::mergeRanges(ranges);
  return held;
}

LogicalResult planProgram(ProgramOp program) {
  Block &body = program.getBody().front();
  // Each sched.tasks' held buffers, placed in its frame.
  llvm::DenseMap<Operation *, HeldBuffers> heldOf;
  llvm::DenseSet<Operation *> heldAllocs;
  for (auto tasks : body.getOps<TasksOp>()) {
    FailureOr<HeldBuffers> held = analyzeHeld(body, tasks);
    if (failed(held))
      return failure();
    for (AllocOp alloc : held->allocs)
      heldAllocs.insert(alloc);
    heldOf[tasks] = std::move(*held);
  }
  for (auto alloc : body.getOps<AllocOp>())
    alloc.setHeld(heldAllocs.contains(alloc));
  FailureOr<std::map<uint32_t, SpaceBuffers>> spaces =
      collectBuffers(body, heldAllocs);
  if (failed(spaces))
    return failure();

  // A body that runs more than once (a sched.repeat's, a sched.task's) holds
  // its own buffers within each run, and its runs come one at a time: each
  // body is packed on its own, and all of a loop's bodies in one frame per
  // space, a buffer of the program live at the loop's point only, whose
  // offset places theirs. What crosses runs is the program's (slots).
  struct Frame {
    uint32_t space;
    size_t interval; // the frame's, among its space's
    uint64_t size = 0;
    SmallVector<std::pair<AllocOp, uint64_t>> placed;
  };
  SmallVector<Frame> frames;
  int64_t point = 0;
  for (Operation &op : body) {
    std::map<uint32_t, Frame> here;
    // The loop's held buffers at the bottom of its frames, by decreasing
    // size: where each lies in its space's frame.
    const HeldBuffers *held = nullptr;
    SmallVector<uint64_t> heldAt;
    if (auto it = heldOf.find(&op); it != heldOf.end()) {
      held = &it->second;
      SmallVector<unsigned> bySize =
          llvm::to_vector(llvm::seq<unsigned>(0, held->allocs.size()));
      llvm::stable_sort(bySize, [&](unsigned a, unsigned b) {
        AllocOp first = held->allocs[a], second = held->allocs[b];
        return getBufferBytes(first.getType()) >
               getBufferBytes(second.getType());
      });
      heldAt.resize(held->allocs.size());
      for (unsigned h : bySize) {
        AllocOp alloc = held->allocs[h];
        Frame &frame = here[spaceKey(alloc)];
        heldAt[h] = frame.size;
        frame.size = (frame.size + getBufferBytes(alloc.getType()) +
                      kArenaAlignment - 1) /
                     kArenaAlignment * kArenaAlignment;
        frame.placed.push_back({alloc, heldAt[h]});
      }
    }
    for (auto [index, inner] : llvm::enumerate(bodiesOf(op))) {
      FailureOr<std::map<uint32_t, SpaceBuffers>> local =
          collectBuffers(*inner);
      if (failed(local))
        return failure();
      // Where a run of this body has a held buffer in use, its bytes are
      // taken.
      if (held)
        for (const auto &[h, ranges] : held->inUse[index]) {
          AllocOp alloc = held->allocs[h];
          SpaceBuffers &buffers = (*local)[spaceKey(alloc)];
          for (auto [from, to] : ranges) {
            buffers.allocs.push_back(AllocOp());
            buffers.intervals.push_back({getBufferBytes(alloc.getType()),
                                         kArenaAlignment, from, to, heldAt[h]});
          }
        }
      for (auto &[key, buffers] : *local) {
        plan::ArenaLayout layout = plan::packArena(buffers.intervals);
        Frame &frame = here[key];
        frame.size = std::max(frame.size, layout.size);
        for (auto [alloc, offset] :
             llvm::zip_equal(buffers.allocs, layout.offsets))
          if (alloc)
            frame.placed.push_back({alloc, offset});
      }
    }
    for (auto &[key, frame] : here) {
      SpaceBuffers &buffers = (*spaces)[key];
      frame.space = key;
      frame.interval = buffers.intervals.size();
      buffers.allocs.push_back(AllocOp());
      buffers.intervals.push_back({frame.size, kArenaAlignment, point, point});
      frames.push_back(std::move(frame));
    }
    ++point;
  }

  Builder builder(program.getContext());
  SmallVector<NamedAttribute> arenaBytes, persistentBytes;
  std::map<uint32_t, plan::ArenaLayout> layouts;
  for (auto &[key, buffers] : *spaces) {
    plan::ArenaLayout &layout = layouts[key] =
        plan::packArena(buffers.intervals);
    // Persistent buffers are placed first, so they fill [0, persistent).
    uint64_t persistent = 0;
    for (auto [alloc, offset, interval] :
         llvm::zip_equal(buffers.allocs, layout.offsets, buffers.intervals)) {
      if (!alloc)
        continue; // a frame
      alloc.setOffset(static_cast<int64_t>(offset));
      if (alloc.getPersistent())
        persistent = std::max(persistent, offset + interval.size);
    }
    StringRef name = stringifyMemorySpace(static_cast<MemorySpace>(key));
    arenaBytes.push_back(builder.getNamedAttr(
        name, builder.getI64IntegerAttr(static_cast<int64_t>(layout.size))));
    persistentBytes.push_back(builder.getNamedAttr(
        name, builder.getI64IntegerAttr(static_cast<int64_t>(persistent))));
  }
  for (const Frame &frame : frames) {
    uint64_t base = layouts[frame.space].offsets[frame.interval];
    for (auto [alloc, offset] : frame.placed)
      alloc.setOffset(static_cast<int64_t>(base + offset));
  }
  program->setAttr("arena_bytes", builder.getDictionaryAttr(arenaBytes));
  program->setAttr("persistent_bytes",
                   builder.getDictionaryAttr(persistentBytes));
  return success();
}

struct SchedPlanMemoryPass
    : plan::impl::SchedPlanMemoryBase<SchedPlanMemoryPass> {
  void runOnOperation() override {
    if (failed(planProgram(getOperation())))
      signalPassFailure();
  }
};

} // namespace
