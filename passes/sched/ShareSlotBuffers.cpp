//===- ShareSlotBuffers.cpp - Boundary slots in one allocation ------------===//
//
// sched-share-slot-buffers: on a pipeline stage's sched.tasks, the one-slot
// buffers that hand a micro-batch's data from one task to a later one (a
// prefetched gather's pool and its staging pool, the slot of a reduction
// the next task completes) are each allocated for the whole loop, where the
// flat step holds each of their buffers only across one task boundary. The
// pass plays the table (sched::StepCursor) and takes, for each instance of
// each such buffer (the buffer and the micro-batch a run's sched.slot names),
// the span of the step from its first use to its last, or to the wait of an
// asynchronous op that uses it. Buffers of one element type, memory space
// and role none of whose spans meet become views at offset 0 of one
// allocation of the largest size, first fit by decreasing size.
// sched-verify-schedule proves the result: plan::RunSlots knows a slot by
// its allocation and first element, so two of them in use at once are an
// error there. docs/sched.md ("sched-share-slot-buffers").
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/sched/SchedOpTable.h"
#include "dialects/sched/SlotEvents.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

#include <map>
#include <tuple>

namespace plan {
#define GEN_PASS_DEF_SCHEDSHARESLOTBUFFERS
#include "passes/Passes.h.inc"
} // namespace plan

using namespace mlir;
using namespace sched;

namespace {

/// A one-slot buffer of the program that only the bodies' sched.slots use.
struct Candidate {
  AllocOp alloc;
  FreeOp free;
  /// The spans [first, last] of the step (op positions in the order the
  /// step runs them) in which its instances are in use, in order of first.
  SmallVector<std::pair<int64_t, int64_t>> spans;
};

/// The program's one-slot buffers of `tasks`: allocated in the program,
/// freed once there, and otherwise named only by one-slot sched.slots of
/// the whole buffer.
SmallVector<Candidate> collectCandidates(ProgramOp program, TasksOp tasks) {
  SmallVector<Candidate> candidates;
  for (auto alloc : program.getBody().front().getOps<AllocOp>()) {
    if (alloc.getPersistent())
      continue;
    Candidate candidate{alloc, nullptr, {}};
    bool slotted = false, other = false;
    for (Operation *user : alloc->getUsers()) {
      if (auto free = dyn_cast<FreeOp>(user);
          free && free->getBlock() == alloc->getBlock() && !candidate.free) {
        candidate.free = free;
      } else if (auto slot = dyn_cast<SlotOp>(user);
                 slot && tasks->isAncestor(slot) && slot.getSlots() == 1 &&
                 slot.getType() == alloc.getType()) {
        slotted = true;
      } else {
        other = true;
      }
    }
    if (slotted && !other && candidate.free)
      candidates.push_back(std::move(candidate));
  }
  return candidates;
}

/// An instance: a candidate's index and the micro-batch its slot holds.
using Instance = std::pair<unsigned, int64_t>;
/// An event of a run: the value and the run (-1 outside the table).
using EventKey = std::pair<void *, int64_t>;

/// Plays `program`'s step and fills each candidate's spans.
LogicalResult findSpans(ProgramOp program,
                        MutableArrayRef<Candidate> candidates) {
  llvm::DenseMap<Operation *, unsigned> indexOf;
  for (auto [index, candidate] : llvm::enumerate(candidates))
    indexOf[candidate.alloc] = static_cast<unsigned>(index);
  std::map<Instance, std::pair<int64_t, int64_t>> spans;
  // The instances a value of the run being walked lies in, and those an
  // asynchronous op uses until its wait.
  llvm::DenseMap<Value, Instance> inSlot;
  std::map<EventKey, SmallVector<Instance, 2>> inFlight;
  SlotEventInstances<EventKey> signalled;
  int64_t position = 0, runs = 0, run = -1;
  auto use = [&](Instance instance) {
    auto [it, added] = spans.try_emplace(instance, position, position);
    it->second.second = position;
  };
  for (StepCursor cursor(program); !cursor.done();
       cursor.advance(), ++position) {
    Operation &op = *cursor;
    auto task = dyn_cast<TaskOp>(op.getParentOp());
    if (!task)
      continue; // only the bodies name the slots
    if (&op == &task.getBody().front().front())
      run = runs++;
    int64_t iteration = cursor.iteration();
    auto keyOf = [&](Value event) -> EventKey {
      Operation *def = event.getDefiningOp();
      return {event.getAsOpaquePointer(),
              def && def->getParentOp() == task ? run : -1};
    };
    if (auto slot = dyn_cast<SlotOp>(op)) {
      auto it = indexOf.find(slot.getSource().getDefiningOp());
      if (it == indexOf.end()) {
        inSlot.erase(slot.getResult());
        continue;
      }
      Instance instance{it->second, static_cast<int64_t>(task.getMicroBatch()) +
                                        iteration +
                                        static_cast<int64_t>(slot.getShift())};
      inSlot[slot.getResult()] = instance;
      use(instance);
      continue;
    }
    if (isa<ViewOp, ShardViewOp>(op)) {
      auto it = inSlot.find(op.getOperand(0));
      if (it == inSlot.end()) {
        inSlot.erase(op.getResult(0));
        continue;
      }
      Instance instance = it->second; // before the map may grow
      inSlot[op.getResult(0)] = instance;
      continue;
    }
    if (auto signal = dyn_cast<SlotSignalOp>(op)) {
      if (failed(signalled.signal(signal, iteration, keyOf(signal.getEvent()))))
        return failure();
      continue;
    }
    if (auto wait = dyn_cast<WaitOp>(op)) {
      EventKey key = keyOf(wait.getEvent());
      if (auto named = wait.getEvent().getDefiningOp<SlotEventOp>()) {
        FailureOr<EventKey> signalledKey = signalled.lookup(named, iteration);
        if (failed(signalledKey))
          return failure();
        key = *signalledKey;
      }
      auto it = inFlight.find(key);
      if (it != inFlight.end()) {
        for (Instance instance : it->second)
          use(instance);
        inFlight.erase(it);
      }
      continue;
    }
    SmallVector<Instance, 2> used;
    for (Value operand : op.getOperands())
      if (auto it = inSlot.find(operand); it != inSlot.end()) {
        use(it->second);
        used.push_back(it->second);
      }
    if (used.empty())
      continue;
    if (std::optional<AsyncInfo> async = getAsyncInfo(&op))
      inFlight[keyOf(async->done)] = std::move(used);
  }
  for (auto &[instance, span] : spans)
    candidates[instance.first].spans.push_back(span);
  for (Candidate &candidate : candidates)
    llvm::sort(candidate.spans);
  return success();
}

/// Whether some span of `a` meets some span of `b` (both in order).
bool meet(ArrayRef<std::pair<int64_t, int64_t>> a,
          ArrayRef<std::pair<int64_t, int64_t>> b) {
  // Spans of one buffer may overlap each other (instances of successive
  // micro-batches); the latest end so far stands for those before.
  size_t i = 0, j = 0;
  int64_t endA = -1, endB = -1;
  while (i < a.size() || j < b.size()) {
    if (j == b.size() || (i < a.size() && a[i].first <= b[j].first)) {
      if (a[i].first <= endB)
        return true;
      endA = std::max(endA, a[i].second);
      ++i;
    } else {
      if (b[j].first <= endA)
        return true;
      endB = std::max(endB, b[j].second);
      ++j;
    }
  }
  return false;
}

int64_t numel(AllocOp alloc) { return alloc.getType().getNumElements(); }

/// Puts each pool of two or more candidates in one allocation, in place of
/// its first member's, freed where its first member was.
void sharePools(ArrayRef<SmallVector<Candidate *>> pools) {
  int64_t count = 0;
  for (ArrayRef<Candidate *> pool : pools) {
    if (pool.size() < 2)
      continue;
    Candidate *first = *llvm::min_element(pool, [](Candidate *a, Candidate *b) {
      return a->alloc->isBeforeInBlock(b->alloc);
    });
    Candidate *firstFree =
        *llvm::min_element(pool, [](Candidate *a, Candidate *b) {
          return a->free->isBeforeInBlock(b->free);
        });
    AllocOp largest = pool.front()->alloc; // the pools are by size
    MemRefType type = largest.getType();
    OpBuilder builder(first->alloc);
    std::string name = "slots." + stringifyBufferRole(largest.getRole()).str() +
                       "." + std::to_string(count++);
    auto shared = AllocOp::create(builder, largest.getLoc(), type, name,
                                  largest.getRole(), /*persistent=*/false,
                                  /*offset=*/IntegerAttr());
    builder.setInsertionPoint(firstFree->free);
    FreeOp::create(builder, firstFree->free.getLoc(), shared);
    for (Candidate *member : pool) {
      builder.setInsertionPoint(member->alloc);
      Value view = ViewOp::create(builder, member->alloc.getLoc(),
                                  member->alloc.getType(), shared,
                                  builder.getI64IntegerAttr(0));
      member->free->erase();
      member->alloc.getResult().replaceAllUsesWith(view);
      member->alloc->erase();
    }
  }
}

struct SchedShareSlotBuffersPass
    : plan::impl::SchedShareSlotBuffersBase<SchedShareSlotBuffersPass> {
  void runOnOperation() override {
    ProgramOp program = getOperation();
    auto loops = llvm::to_vector(program.getBody().getOps<TasksOp>());
    if (loops.size() != 1)
      return; // a flat step's buffers share the arena already
    SmallVector<Candidate> candidates =
        collectCandidates(program, loops.front());
    if (candidates.size() < 2)
      return;
    if (failed(findSpans(program, candidates)))
      return signalPassFailure();
    // By decreasing size (then program order), each into the first pool of
    // its kind none of whose members it meets.
    SmallVector<Candidate *> order =
        llvm::map_to_vector(candidates, [](Candidate &c) { return &c; });
    llvm::stable_sort(order, [](Candidate *a, Candidate *b) {
      return numel(a->alloc) > numel(b->alloc);
    });
    auto kindOf = [](AllocOp alloc) {
      MemRefType type = alloc.getType();
      return std::make_tuple(type.getElementType().getAsOpaquePointer(),
                             type.getMemorySpace().getAsOpaquePointer(),
                             static_cast<uint32_t>(alloc.getRole()));
    };
    SmallVector<SmallVector<Candidate *>> pools;
    for (Candidate *candidate : order) {
      auto fits = [&](ArrayRef<Candidate *> pool) {
        return kindOf(pool.front()->alloc) == kindOf(candidate->alloc) &&
               llvm::none_of(pool, [&](Candidate *member) {
                 return meet(member->spans, candidate->spans);
               });
      };
      auto pool = llvm::find_if(pools, fits);
      if (pool == pools.end())
        pools.push_back({candidate});
      else
        pool->push_back(candidate);
    }
    sharePools(pools);
  }
};

} // namespace
