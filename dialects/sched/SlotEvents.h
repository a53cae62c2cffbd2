//===- SlotEvents.h - The slot event rule of a walk of a table --*- C++ -*-===//
//
// Every walk of a sched.tasks' runs in the order of its table (sched-unroll-
// tasks, sched-verify-schedule, sched-verify-pipeline, the time model) hands
// an asynchronous op's event from the run that signals a slot event instance
// to the runs that name it, under one rule: an instance (family,
// micro-batch) is signalled once, by one run, and named only by a later run.
// What a walk keeps of the event differs (the op written out, an async op's
// index, an event of a run), so the rule is a template on it.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_DIALECTS_SCHED_SLOTEVENTS_H
#define PLAN_DIALECTS_SCHED_SLOTEVENTS_H

#include "dialects/sched/SchedDialect.h"

#include <map>
#include <utility>

namespace sched {

template <typename Event> class SlotEventInstances {
public:
  /// The sched.slot_signal `signal`, in the run `iteration` micro-batches on
  /// from the one its task is written for (StepCursor::iteration()),
  /// signals `event`; an error at it when a run before signalled that
  /// instance.
  mlir::LogicalResult signal(SlotSignalOp signal, int64_t iteration,
                             Event event) {
    auto [family, instance] = getSlotEventInstance(*signal, iteration);
    if (instances.try_emplace({family, instance}, std::move(event)).second)
      return mlir::success();
    return signal.emitOpError("in the run of micro-batch ")
           << runMicroBatch(signal, iteration) << " signals instance "
           << instance << " of family " << family
           << ", which a run before it signalled";
  }

  /// The event the sched.slot_event `named` stands for in the run
  /// `iteration` micro-batches on: the one the run that signalled its
  /// instance gave; an error at it when no run before signalled it.
  mlir::FailureOr<Event> lookup(SlotEventOp named, int64_t iteration) const {
    auto [family, instance] = getSlotEventInstance(*named, iteration);
    auto it = instances.find({family, instance});
    if (it != instances.end())
      return it->second;
    return named.emitOpError("in the run of micro-batch ")
           << runMicroBatch(named, iteration) << " names instance " << instance
           << " of family " << family << ", which no run before it signals";
  }

  /// Calls `f(family, instance, event)` for each instance signalled so
  /// far, in the order of (family, instance).
  template <typename F> void forEach(F &&f) const {
    for (const auto &[key, event] : instances)
      f(key.first, key.second, event);
  }

private:
  static int64_t runMicroBatch(mlir::Operation *op, int64_t iteration) {
    return static_cast<int64_t>(
               mlir::cast<TaskOp>(op->getParentOp()).getMicroBatch()) +
           iteration;
  }

  std::map<std::pair<int64_t, int64_t>, Event> instances;
};

} // namespace sched

#endif // PLAN_DIALECTS_SCHED_SLOTEVENTS_H
