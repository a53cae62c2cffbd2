//===- UnrollTasks.cpp - A sched.tasks' runs written out -----------------===//
//
// sched-unroll-tasks: replaces each sched.tasks of a program by the ops its
// table runs, entry by entry: the entry's body cloned for its micro-batch
// (every `micro_batch` counted on by the entry's difference from the body's,
// every alloc's `.mbN` name likewise), a sched.slot as the sched.view of the
// slot the micro-batch takes, a sched.slot_event as the event of the
// asynchronous op whose sched.slot_signal gave that instance in an earlier
// run, and the slot signals gone. It is the IR form of what the schedule
// file's reader does with a file's tasks (runtime/format/ScheduleTasks.cpp):
// what does not walk a table yet can run on the step written out, and a test
// can compare the two. docs/sched.md ("The micro-batch loop").
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/sched/SlotEvents.h"

#include "runtime/format/Schedule.h"

#include "mlir/IR/IRMapping.h"

namespace plan {
#define GEN_PASS_DEF_SCHEDUNROLLTASKS
#include "passes/Passes.h.inc"
} // namespace plan

using namespace mlir;

LogicalResult plan::writeOutProgram(sched::ProgramOp program) {
  SmallVector<sched::TasksOp> all(program.getBody().getOps<sched::TasksOp>());
  for (sched::TasksOp tasks : all)
    if (failed(plan::unrollTasks(tasks)))
      return failure();
  return success();
}

LogicalResult plan::unrollTasks(sched::TasksOp tasks) {
  SmallVector<sched::TaskOp> bodies = tasks.getTasks();
  OpBuilder builder(tasks);
  // The event each slot event instance (family, micro-batch) got.
  sched::SlotEventInstances<Value> signalled;
  // Which slot each value of the run lies in, and who holds each slot.
  plan::RunSlots slots;
  ArrayRef<int64_t> order = tasks.getOrder();
  ArrayRef<int64_t> picks = tasks.getPicks().value_or(ArrayRef<int64_t>());
  for (size_t entry = 0; entry + 1 < order.size(); entry += 2) {
    sched::TaskOp task = bodies[static_cast<size_t>(order[entry])];
    int64_t mb = order[entry + 1];
    auto written = static_cast<int64_t>(task.getMicroBatch());
    IRMapping map;
    for (Operation &op : task.getBody().front()) {
      if (auto slot = dyn_cast<sched::SlotOp>(op)) {
        Value source = map.lookupOrDefault(slot.getSource());
        auto view = sched::ViewOp::create(builder, slot.getLoc(),
                                          slot.getType(), source, int64_t{0});
        view.setOffset(slots.place(view, slot, source, mb,
                                   picks.empty() ? -1 : picks[entry / 2]));
        map.map(slot.getResult(), view);
        continue;
      }
      if (auto event = dyn_cast<sched::SlotEventOp>(op)) {
        FailureOr<Value> signalledEvent = signalled.lookup(event, mb - written);
        if (failed(signalledEvent))
          return failure();
        map.map(event.getEvent(), *signalledEvent);
        continue;
      }
      if (auto signal = dyn_cast<sched::SlotSignalOp>(op)) {
        if (failed(signalled.signal(signal, mb - written,
                                    map.lookup(signal.getEvent()))))
          return failure();
        continue;
      }
      Operation *copy = builder.clone(op, map);
      if (failed(slots.visit(copy, &op, mb)))
        return failure();
      if (mb == written)
        continue;
      if (auto attr = copy->getAttrOfType<IntegerAttr>("micro_batch"))
        copy->setAttr(
            "micro_batch",
            IntegerAttr::get(attr.getType(), attr.getInt() + mb - written));
      if (auto alloc = dyn_cast<sched::AllocOp>(copy))
        alloc.setName(
            plan::rt::shiftMicroBatchInName(alloc.getName(), written, mb));
    }
  }
  // Written out, a held buffer is an ordinary one again: its slots are
  // views the step's ops use. (Its offset was planned for the loop; a flat
  // plan needs sched-plan-memory again.)
  for (auto alloc : tasks->getBlock()->getOps<sched::AllocOp>())
    alloc.setHeld(false);
  tasks.erase();
  return success();
}

namespace {

struct SchedUnrollTasksPass
    : plan::impl::SchedUnrollTasksBase<SchedUnrollTasksPass> {
  void runOnOperation() override {
    if (failed(plan::writeOutProgram(getOperation())))
      signalPassFailure();
  }
};

} // namespace
