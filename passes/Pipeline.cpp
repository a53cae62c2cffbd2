//===- Pipeline.cpp - The plan-lower pipeline -----------------------------===//

#include "passes/Passes.h"

#include "mlir/Pass/PassRegistry.h"

void plan::buildPlanLowerPipeline(mlir::OpPassManager &pm) {
  pm.addPass(createPlanExpandPresets());
  pm.addPass(createPlanWrapUnits());
  pm.addPass(createPlanAssignSharding());
  pm.addPass(createSchedLower());
  pm.addPass(createSchedInsertCollectives());
  pm.addPass(createSchedInsertCasts());
  pm.addPass(createSchedInsertOffloadCopies());
  pm.addPass(createSchedPrefetch());
  pm.addPass(createSchedBucketGradients());
  pm.addPass(createSchedVerifySchedule());
  pm.addPass(createSchedPlanMemory());
  pm.addPass(createSchedPlanWorkspace());
}

void plan::registerPlanCompilerPasses() {
  registerPlanPasses();
  mlir::PassPipelineRegistration<>(
      "plan-lower",
      "Lower a plan to its verified per-rank schedule (docs/sched.md)",
      buildPlanLowerPipeline);
}
