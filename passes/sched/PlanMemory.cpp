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
// allocate. The placement itself is packArena (ArenaPacking.h): first fit by
// decreasing size, persistent buffers first, which leaves them contiguous at
// the bottom of each arena. Every offset is a multiple of 256 bytes, what
// CUDA's allocator guarantees, so kernels see the alignment they would get
// from cudaMalloc.
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

LogicalResult planProgram(ProgramOp program) {
  Block &body = program.getBody().front();
  // Program points: the index of each top-level op. Persistent buffers span
  // one point past the last op, so no transient one covers the same range.
  int64_t end = static_cast<int64_t>(body.getOperations().size());

  // Keyed by the space's enum value, so arenas come out in a fixed order.
  std::map<uint32_t, SpaceBuffers> spaces;
  llvm::DenseMap<Operation *, std::pair<uint32_t, size_t>> slotOf;
  int64_t point = 0;
  for (Operation &op : body) {
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

  Builder builder(program.getContext());
  SmallVector<NamedAttribute> arenaBytes, persistentBytes;
  for (auto &[key, buffers] : spaces) {
    plan::ArenaLayout layout = plan::packArena(buffers.intervals);
    // Persistent buffers are placed first, so they fill [0, persistent).
    uint64_t persistent = 0;
    for (auto [alloc, offset, interval] :
         llvm::zip_equal(buffers.allocs, layout.offsets, buffers.intervals)) {
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
  program->setAttr("arena_bytes", builder.getDictionaryAttr(arenaBytes));
  program->setAttr("persistent_bytes",
                   builder.getDictionaryAttr(persistentBytes));
  return success();
}

struct SchedPlanMemoryPass
    : plan::impl::SchedPlanMemoryBase<SchedPlanMemoryPass> {
  void runOnOperation() override {
    if (failed(sched::requireUnrolled(getOperation(), getArgument())) ||
        failed(planProgram(getOperation())))
      signalPassFailure();
  }
};

} // namespace
