//===- SlotSpans.cpp - When each micro-batch holds a one-slot buffer ------===//
//
// SlotSpans.h.
//
//===----------------------------------------------------------------------===//

#include "dialects/sched/SlotSpans.h"

#include "dialects/sched/SchedOpTable.h"
#include "dialects/sched/SlotEvents.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>

using namespace mlir;
using namespace sched;

namespace {

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
  // The first round finds every value in a slot (a view follows what it
  // views in its body); the later ones need only the ops that name events.
  SmallVector<Operation *> namingEvents;
  auto visit = [&](Operation &op, bool first) {
    if (auto slot = dyn_cast<SlotOp>(op)) {
      if (in.count(slot.getSource().getDefiningOp()))
        inSlot.insert(slot.getResult());
    } else if (isa<ViewOp, ShardViewOp>(op)) {
      if (inSlot.contains(op.getOperand(0)))
        inSlot.insert(op.getResult(0));
    } else if (auto signal = dyn_cast<SlotSignalOp>(op)) {
      if (first)
        namingEvents.push_back(&op);
      if (events.contains(signal.getEvent()))
        relevant.families.insert(static_cast<int64_t>(signal.getFamily()));
    } else if (!isa<WaitOp>(op)) {
      if (first && llvm::any_of(op.getOperandTypes(),
                                [](Type type) { return isa<EventType>(type); }))
        namingEvents.push_back(&op);
      if (llvm::any_of(op.getOperands(), carried))
        if (std::optional<AsyncInfo> async = getAsyncInfo(&op))
          events.insert(async->done);
    }
  };
  for (TaskOp task : bodies)
    for (Operation &op : task.getBody().front())
      visit(op, /*first=*/true);
  size_t before = 0;
  while (before != events.size() + relevant.families.size()) {
    before = events.size() + relevant.families.size();
    for (Operation *op : namingEvents)
      visit(*op, /*first=*/false);
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

} // namespace

FailureOr<SlotInstanceSpans>
sched::findSlotSpans(TasksOp tasks,
                     const llvm::DenseMap<Operation *, unsigned> &indexOf) {
  SmallVector<TaskOp> bodies = tasks.getTasks();
  Relevant relevant = relevantOps(tasks, indexOf);
  SlotInstanceSpans spans;
  // The instances a value of the run being walked lies in, and those an
  // asynchronous op uses until its wait.
  llvm::DenseMap<Value, SlotInstance> inSlot;
  std::map<EventKey, SmallVector<SlotInstance, 2>> inFlight;
  SlotEventInstances<EventKey> signalled;
  int64_t position = 0, start = 0;
  auto use = [&](SlotInstance instance) {
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
        SlotInstance instance{indexOf.lookup(slot.getSource().getDefiningOp()),
                              order[2 * run + 1] +
                                  static_cast<int64_t>(slot.getShift())};
        inSlot[slot.getResult()] = instance;
        use(instance);
        continue;
      }
      if (isa<ViewOp, ShardViewOp>(op)) {
        SlotInstance instance = inSlot.lookup(op.getOperand(0));
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
          for (SlotInstance instance : it->second)
            use(instance);
          inFlight.erase(it);
        }
        continue;
      }
      // What it names, and what the ops it starts after still use: those
      // end no earlier than its own wait.
      SmallVector<SlotInstance, 2> used;
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
  return spans;
}

void sched::mergeRanges(PositionRanges &ranges) {
  llvm::sort(ranges);
  PositionRanges merged;
  for (auto range : ranges)
    if (!merged.empty() && range.first <= merged.back().second + 1)
      merged.back().second = std::max(merged.back().second, range.second);
    else
      merged.push_back(range);
  ranges = std::move(merged);
}

FailureOr<SmallVector<PositionRanges>>
sched::findHeldSpans(TasksOp tasks, ArrayRef<AllocOp> held) {
  // Each buffer and the views of it that the bodies' slots name are the
  // sources of its instances.
  llvm::DenseMap<Operation *, unsigned> sources;
  SmallVector<unsigned> rootOf;
  for (auto [root, alloc] : llvm::enumerate(held)) {
    SmallVector<Operation *> work = {alloc};
    while (!work.empty()) {
      Operation *def = work.pop_back_val();
      bool slotted = false;
      for (Operation *user : def->getResult(0).getUsers()) {
        if (isa<ViewOp>(user) && user->getBlock() == alloc->getBlock())
          work.push_back(user);
        else if (isa<SlotOp>(user) && tasks->isAncestor(user))
          slotted = true;
      }
      if (slotted && sources.try_emplace(def, rootOf.size()).second)
        rootOf.push_back(static_cast<unsigned>(root));
    }
  }
  SmallVector<PositionRanges> ranges(held.size());
  if (sources.empty())
    return ranges;
  FailureOr<SlotInstanceSpans> spans = findSlotSpans(tasks, sources);
  if (failed(spans))
    return failure();
  for (const auto &[instance, span] : *spans)
    ranges[rootOf[instance.first]].push_back(span);
  for (PositionRanges &buffer : ranges)
    mergeRanges(buffer);
  return ranges;
}
