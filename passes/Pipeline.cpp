//===- Pipeline.cpp - The plan-lower pipeline -----------------------------===//

#include "passes/Passes.h"

#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/CommandLine.h"

/// A pipeline's micro-batch loop lowered as a sched.tasks: each distinct
/// forward and backward once, the stage's order as its table, what crosses
/// tasks in slot buffers. Each rewriting pass rewrites its bodies where it
/// can for the plan and writes the loop out first where it cannot yet; the
/// passes after them read the table. Off, every micro-batch's ops are
/// written out (the flat lowering): compile time grows with the
/// micro-batches, and the slots' few extra bytes are not planned.
/// docs/sched.md ("The micro-batch loop").
static llvm::cl::opt<bool> pipelineTasksFlag(
    "pipeline-tasks", llvm::cl::init(true),
    llvm::cl::desc("Lower each pipeline stage's micro-batch loop once, as a "
                   "table of its distinct forwards and backwards (default "
                   "on; =false writes every micro-batch out: compile time "
                   "grows with the micro-batches, the plan can be a little "
                   "smaller; docs/sched.md)"));

void plan::buildPlanLowerPipeline(mlir::OpPassManager &pm,
                                  bool rollMicroBatches,
                                  std::optional<bool> pipelineTasks) {
  pm.addPass(createPlanExpandPresets());
  pm.addPass(createPlanAssignStages());
  pm.addPass(createPlanWrapUnits());
  pm.addPass(createPlanAssignSharding());
  // Gradient accumulation lowered once for its middle micro-batches, which
  // sched-roll-micro-batches completes.
  pm.addPass(createSchedLower(SchedLowerOptions{
      rollMicroBatches, pipelineTasks.value_or(pipelineTasksFlag)}));
  // Each program on its own, with the recipe sched-lower copied onto it.
  mlir::OpPassManager &program = pm.nest<sched::ProgramOp>();
  program.addPass(createSchedActivationCheckpointing());
  program.addPass(createSchedInsertCollectives());
  program.addPass(createSchedInsertCasts());
  program.addPass(createSchedInsertOffloadCopies());
  program.addPass(createSchedPrefetch());
  program.addPass(createSchedBucketGradients());
  program.addPass(createSchedSplitTensorParallel());
  program.addPass(createSchedDequantizeBase());
  program.addPass(createSchedShareSlotBuffers());
  program.addPass(createSchedVerifySchedule());
  program.addPass(createSchedPlanMemory());
  program.addPass(createSchedPlanWorkspace());
  program.addPass(createSchedRollMicroBatches());
  // The stages of a pipeline together.
  pm.addPass(createSchedVerifyPipeline());
}

void plan::registerPlanCompilerPasses() {
  registerPlanPasses();
  mlir::PassPipelineRegistration<>(
      "plan-lower",
      "Lower a plan to its verified per-rank schedule (docs/sched.md)",
      [](mlir::OpPassManager &pm) { buildPlanLowerPipeline(pm); });
}
