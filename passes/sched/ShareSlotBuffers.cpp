//===- ShareSlotBuffers.cpp - Boundary slots in one allocation ------------===//
//
// sched-share-slot-buffers: on a pipeline stage's sched.tasks, the one-slot
// buffers that hand a micro-batch's data from one task to a later one (a
// prefetched gather's pool and its staging pool, the slot of a reduction
// the next task completes) are each allocated for the whole loop, where the
// flat step holds each of their buffers only across one task boundary. The
// pass plays the table, each run's ops that can touch such a slot at their
// places in the step (BodyOps), and takes, for each instance of each such
// buffer (the buffer and the micro-batch a run's sched.slot names), the span
// of the step from its first use to its last, or to the wait of an
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
#include "llvm/ADT/DenseSet.h"

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

/// The ops of each body that can use a candidate's slot or end that use:
/// the candidates' sched.slots and their views, the ops that name them or
/// start after one that does, the slot signals of their events and the
/// waits for them (by their events, or by the slot event families those
/// signal). Each with its index in its body; a body's other ops are skipped
/// in every run.
struct BodyOps {
  int64_t size = 0;
  SmallVector<std::pair<int64_t, Operation *>> ops;
};
struct Relevant {
  SmallVector<BodyOps> bodies;
  /// The slot event families that carry a use of a slot.
  llvm::DenseSet<int64_t> families;
  bool carries(Value event) const {
    auto named = event.getDefiningOp<SlotEventOp>();
    return named && families.contains(static_cast<int64_t>(named.getFamily()));
  }
};

Relevant relevantOps(TasksOp tasks,
                     const llvm::DenseMap<Operation *, unsigned> &in) {
  SmallVector<TaskOp> bodies = tasks.getTasks();
  Relevant relevant;
  // Values that lie in a candidate's slot, and the events of the ops that
  // use one (or start after such an event); a family signalled with one
  // carries it to other bodies, so until nothing is added.
  llvm::DenseSet<Value> inSlot, events;
  auto carried = [&](Value value) {
    return inSlot.contains(value) || events.contains(value) ||
           relevant.carries(value);
  };
  size_t before = 1;
  while (before != events.size() + relevant.families.size()) {
    before = events.size() + relevant.families.size();
    for (TaskOp task : bodies)
      for (Operation &op : task.getBody().front()) {
        if (auto slot = dyn_cast<SlotOp>(op)) {
          if (in.count(slot.getSource().getDefiningOp()))
            inSlot.insert(slot.getResult());
        } else if (isa<ViewOp, ShardViewOp>(op)) {
          if (inSlot.contains(op.getOperand(0)))
            inSlot.insert(op.getResult(0));
        } else if (auto signal = dyn_cast<SlotSignalOp>(op)) {
          if (events.contains(signal.getEvent()))
            relevant.families.insert(static_cast<int64_t>(signal.getFamily()));
        } else if (!isa<WaitOp>(op) &&
                   llvm::any_of(op.getOperands(), carried)) {
          if (std::optional<AsyncInfo> async = getAsyncInfo(&op))
            events.insert(async->done);
        }
      }
  }
  for (TaskOp task : bodies) {
    BodyOps &body = relevant.bodies.emplace_back();
    for (Operation &op : task.getBody().front()) {
      bool uses = false;
      if (auto wait = dyn_cast<WaitOp>(op))
        uses = events.contains(wait.getEvent()) ||
               relevant.carries(wait.getEvent());
      else if (auto signal = dyn_cast<SlotSignalOp>(op))
        uses = events.contains(signal.getEvent()) ||
               relevant.families.contains(
                   static_cast<int64_t>(signal.getFamily()));
      else
        uses = llvm::any_of(op.getOperands(), carried) ||
               (op.getNumResults() == 1 && inSlot.contains(op.getResult(0)));
      if (uses)
        body.ops.push_back({body.size, &op});
      ++body.size;
    }
  }
  return relevant;
}

/// Plays `tasks`' table, each run's ops at their places in the step, and
/// fills each candidate's spans.
LogicalResult findSpans(TasksOp tasks, MutableArrayRef<Candidate> candidates) {
  llvm::DenseMap<Operation *, unsigned> indexOf;
  for (auto [index, candidate] : llvm::enumerate(candidates))
    indexOf[candidate.alloc] = static_cast<unsigned>(index);
  SmallVector<TaskOp> bodies = tasks.getTasks();
  Relevant relevant = relevantOps(tasks, indexOf);
  std::map<Instance, std::pair<int64_t, int64_t>> spans;
  // The instances a value of the run being walked lies in, and those an
  // asynchronous op uses until its wait.
  llvm::DenseMap<Value, Instance> inSlot;
  std::map<EventKey, SmallVector<Instance, 2>> inFlight;
  SlotEventInstances<EventKey> signalled;
  int64_t position = 0, start = 0;
  auto use = [&](Instance instance) {
    auto [it, added] = spans.try_emplace(instance, position, position);
    it->second.second = position;
  };
  ArrayRef<int64_t> order = tasks.getOrder();
  for (int64_t run = 0; 2 * run + 1 < static_cast<int64_t>(order.size());
       ++run) {
    auto body = static_cast<size_t>(order[2 * run]);
    TaskOp task = bodies[body];
    int64_t iteration =
        order[2 * run + 1] - static_cast<int64_t>(task.getMicroBatch());
    auto keyOf = [&](Value event) -> EventKey {
      Operation *def = event.getDefiningOp();
      return {event.getAsOpaquePointer(),
              def && def->getParentOp() == task ? run : -1};
    };
    for (auto [index, opPointer] : relevant.bodies[body].ops) {
      Operation &op = *opPointer;
      position = start + index;
      if (auto slot = dyn_cast<SlotOp>(op)) {
        Instance instance{indexOf.lookup(slot.getSource().getDefiningOp()),
                          order[2 * run + 1] +
                              static_cast<int64_t>(slot.getShift())};
        inSlot[slot.getResult()] = instance;
        use(instance);
        continue;
      }
      if (isa<ViewOp, ShardViewOp>(op)) {
        Instance instance = inSlot.lookup(op.getOperand(0));
        inSlot[op.getResult(0)] = instance;
        continue;
      }
      if (auto signal = dyn_cast<SlotSignalOp>(op)) {
        if (failed(
                signalled.signal(signal, iteration, keyOf(signal.getEvent()))))
          return failure();
        continue;
      }
      if (auto wait = dyn_cast<WaitOp>(op)) {
        EventKey key = keyOf(wait.getEvent());
        if (auto named = wait.getEvent().getDefiningOp<SlotEventOp>()) {
          // The wait of an op that uses no slot may wait for its slot
          // event here; nothing to end then.
          if (!relevant.carries(wait.getEvent()))
            continue;
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
      // What it names, and what the ops it starts after still use: those
      // end no earlier than its own wait.
      SmallVector<Instance, 2> used;
      for (Value operand : op.getOperands()) {
        if (auto it = inSlot.find(operand); it != inSlot.end()) {
          use(it->second);
          used.push_back(it->second);
          continue;
        }
        if (!isa<EventType>(operand.getType()))
          continue;
        EventKey key = keyOf(operand);
        if (auto named = operand.getDefiningOp<SlotEventOp>()) {
          if (!relevant.carries(operand))
            continue;
          FailureOr<EventKey> signalledKey = signalled.lookup(named, iteration);
          if (failed(signalledKey))
            return failure();
          key = *signalledKey;
        }
        if (auto it = inFlight.find(key); it != inFlight.end())
          llvm::append_range(used, it->second);
      }
      std::optional<AsyncInfo> async = getAsyncInfo(&op);
      if (async && !used.empty())
        inFlight[keyOf(async->done)] = std::move(used);
    }
    start += relevant.bodies[body].size;
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
    if (failed(findSpans(loops.front(), candidates)))
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
