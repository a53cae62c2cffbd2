//===- SchedRuntime.td - What crosses into the runtime -----*- tablegen -*-===//
//
// The root of plan-tblgen's runtime generators (tools/plan-tblgen): the sched
// ops, which are the schedule file's instructions, and the enumerations that
// schedule files spell as keywords, under their names in plan::rt. The
// generated headers live in runtime/format/generated/, checked in so that
// the runtime builds where there is no LLVM (as IREE keeps its VM op table).
//
//===----------------------------------------------------------------------===//

#ifndef SCHED_RUNTIME_TD
#define SCHED_RUNTIME_TD

include "dialects/plan/PlanEnums.td"
include "dialects/sched/SchedOps.td"

// The sched dialect's enumerations.
def : Sched_RuntimeEnum<Sched_MemorySpace, "Space">;
def : Sched_RuntimeEnum<Sched_Group, "GroupAxis">;
def : Sched_RuntimeEnum<Sched_Peer>;
def : Sched_RuntimeEnum<Sched_ReduceOp, "ReduceKind">;
def : Sched_RuntimeEnum<Sched_BufferRole>;

// The plan's, in the file's model, train and unit records.
def : Sched_RuntimeEnum<Plan_ModelFamily>;
def : Sched_RuntimeEnum<Plan_BertHead>;
def : Sched_RuntimeEnum<Plan_UnitKind>;
def : Sched_RuntimeEnum<Plan_OptimizerKind>;
def : Sched_RuntimeEnum<Plan_WeightDecayScope>;
def : Sched_RuntimeEnum<Plan_Precision>;
def : Sched_RuntimeEnum<Plan_DType>;
def : Sched_RuntimeEnum<Plan_LossScaleKind>;
def : Sched_RuntimeEnum<Plan_Checkpointing>;
def : Sched_RuntimeEnum<Plan_LRScheduleKind>;
def : Sched_RuntimeEnum<Plan_Sharding>;
def : Sched_RuntimeEnum<Plan_BaseStorage>;

#endif // SCHED_RUNTIME_TD
