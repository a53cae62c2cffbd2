//===- ExportSchedule.h - The lowered module as a schedule file --*- C++
//-*-===//
//
// The last step of `planc -o FILE.sched`, after buildPlanLowerPipeline: the
// sched.program and its plan become a plan::rt::Schedule, the MLIR-free
// structure the runtime executes (runtime/format/Schedule.h,
// docs/schedule-format.md). Not a pass: it reads the module and changes
// nothing.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_EXPORT_EXPORTSCHEDULE_H
#define PLAN_EXPORT_EXPORTSCHEDULE_H

#include "Schedule.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

namespace plan {

/// "planc <version>": who wrote a schedule file.
std::string scheduleProducer();

/// Converts the module's one sched.program (fully lowered: memory planned)
/// and its plan. Buffer ids follow the program order of the values that
/// define them (sched.alloc, sched.view, sched.shard_view), event ids that of
/// the asynchronous ops. Emits an error at the offending op and fails on
/// anything the schedule format cannot express: never drops an op.
mlir::FailureOr<rt::Schedule> exportSchedule(mlir::ModuleOp module);

} // namespace plan

#endif // PLAN_EXPORT_EXPORTSCHEDULE_H
