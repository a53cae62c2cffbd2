//===- ActivationModel.h - Memory a unit saves for backward -----*- C++ -*-===//

#ifndef PLAN_PASSES_ACTIVATIONMODEL_H
#define PLAN_PASSES_ACTIVATIONMODEL_H

#include "dialects/plan/PlanDialect.h"

#include <cstdint>

namespace plan {

/// Elements one unit of `kind` saves for its backward in one micro-batch of
/// `microBatch` sequences of `seqLen` tokens (without checkpointing): what
/// the runtime keeps, documented per kind in docs/sched.md.
int64_t activationElements(UnitKind kind, ModelAttr model, int64_t microBatch,
                           int64_t seqLen);

/// Elements a checkpointed block saves: its input hidden states.
int64_t checkpointElements(ModelAttr model, int64_t microBatch, int64_t seqLen);

} // namespace plan

#endif // PLAN_PASSES_ACTIVATIONMODEL_H
