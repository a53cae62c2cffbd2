//===- Passes.h - The plan compiler's passes --------------------*- C++ -*-===//

#ifndef PLAN_PASSES_PASSES_H
#define PLAN_PASSES_PASSES_H

#include "dialects/plan/PlanDialect.h"
#include "dialects/sched/SchedDialect.h"

#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

namespace plan {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// The whole lowering, plan to verified schedule (`--plan-lower`). Without
/// `rollMicroBatches`, gradient accumulation's micro-batches are lowered
/// one by one instead of as a sched.repeat (the program the repeat stands
/// for, which tests compare it with).
void buildPlanLowerPipeline(mlir::OpPassManager &pm,
                            bool rollMicroBatches = true);

/// Registers every pass and the `plan-lower` pipeline with the command line.
void registerPlanCompilerPasses();

} // namespace plan

#endif // PLAN_PASSES_PASSES_H
