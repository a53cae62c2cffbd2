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

/// The whole lowering, plan to verified schedule (`--plan-lower`).
void buildPlanLowerPipeline(mlir::OpPassManager &pm);

/// Registers every pass and the `plan-lower` pipeline with the command line.
void registerPlanCompilerPasses();

} // namespace plan

#endif // PLAN_PASSES_PASSES_H
