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
// live at the loop's point. The placement itself is packArena (ArenaPacking.h):
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
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"

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

/// The buffers `block`'s allocs define and their lifetimes, per memory space
/// (keyed by the space's enum value, so arenas come out in a fixed order):
/// program points are the indices of the block's ops; an allocation lives
/// from its alloc to its free, a persistent one over the whole block.
FailureOr<std::map<uint32_t, SpaceBuffers>> collectBuffers(Block &block) {
  // Persistent buffers span one point past the last op, so no transient one
  // covers the same range.
  int64_t end = static_cast<int64_t>(block.getOperations().size());
  std::map<uint32_t, SpaceBuffers> spaces;
  llvm::DenseMap<Operation *, std::pair<uint32_t, size_t>> slotOf;
  int64_t point = 0;
  for (Operation &op : block) {
    if (auto alloc = dyn_cast<AllocOp>(op)) {
      MemRefType type = alloc.getType();
      auto space = cast<MemorySpaceAttr>(type.getMemorySpace());
      unsigned bits = type.getElementType().getIntOrFloatBitWidth();
      uint64_t bytes =
          static_cast<uint64_t>(type.getNumElements()) * ((bits + 7) / 8);
      uint32_t key = static_cast<uint32_t>(space.getValue());
      SpaceBuffers &buffers = spaces[key];
      slotOf[alloc] = {key, buffers.allocs.size()};
      buffers.allocs.push_back(alloc);
      // A transient buffer is live until the end unless its free is found.
      buffers.intervals.push_back(
          {bytes, kArenaAlignment, alloc.getPersistent() ? 0 : point, end});
    } else if (auto free = dyn_cast<FreeOp>(op)) {
      auto alloc = free.getBuffer().getDefiningOp<AllocOp>();
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

LogicalResult planProgram(ProgramOp program) {
  Block &body = program.getBody().front();
  FailureOr<std::map<uint32_t, SpaceBuffers>> spaces = collectBuffers(body);
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
    for (Block *inner : bodiesOf(op)) {
      FailureOr<std::map<uint32_t, SpaceBuffers>> local =
          collectBuffers(*inner);
      if (failed(local))
        return failure();
      for (auto &[key, buffers] : *local) {
        plan::ArenaLayout layout = plan::packArena(buffers.intervals);
        Frame &frame = here[key];
        frame.size = std::max(frame.size, layout.size);
        for (auto [alloc, offset] :
             llvm::zip_equal(buffers.allocs, layout.offsets))
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
