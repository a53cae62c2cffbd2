//===- AssignStages.cpp - Divide the units among pipeline stages ----------===//
//
// Under pipeline parallelism (a mesh whose pipeline axis is above 1) sets
// each plan.unit's `stage`: the model chunk it runs in, chunk c on pipeline
// rank c mod P. The plan's `stages` gives each chunk's transformer blocks;
// without it the chunks are balanced by predicted forward time (the
// analysis' FLOPs of each unit, the head's included), as docs/sched.md
// ("plan-assign-stages") says. The embedding stays with the first block and
// the head with the last. A plan whose units have stages already is left as
// it is; without a pipeline the pass does nothing.
//
//===----------------------------------------------------------------------===//

#include "analysis/PipelineModel.h"
#include "analysis/TimeModel.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace plan {
#define GEN_PASS_DEF_PLANASSIGNSTAGES
#include "passes/Passes.h.inc"
} // namespace plan

using namespace mlir;
using namespace plan;

namespace {

LogicalResult assignStages(PlanOp plan) {
  SmallVector<UnitOp> units(plan.getBody().getOps<UnitOp>());
  int64_t chunks = plan.getPipelineChunks();
  int64_t staged = llvm::count_if(
      units, [](UnitOp unit) { return unit.getStage().has_value(); });
  if (staged == static_cast<int64_t>(units.size()) && staged > 0)
    return success();
  if (staged > 0)
    return plan.emitError("plan '")
           << plan.getSymName()
           << "' has units with a stage and units without: give every unit "
              "its stage, or none and let the pipeline's stages divide them";
  if (chunks <= 1)
    return success();
  if (units.empty())
    return plan.emitError("plan '")
           << plan.getSymName()
           << "' has no units to divide among pipeline stages; run "
              "plan-expand-presets first";

  SmallVector<bool> isBlock;
  SmallVector<double> cost;
  ModelAttr model = plan.getModel();
  TrainAttr train = plan.getTrain();
  for (UnitOp unit : units) {
    isBlock.push_back(isBlockKind(unit.getKind()));
    cost.push_back(
        unitForwardFlops(unit, model, train.getMicroBatch(), train.getSeqLen())
            .executed);
  }
  std::vector<int64_t> chunkOf;
  if (DenseI64ArrayAttr stages = plan.getParallel().getStages())
    chunkOf = stagesOfBlocks(isBlock, stages.asArrayRef());
  else
    chunkOf = balanceStages(cost, isBlock, chunks);
  if (chunkOf.empty())
    return plan.emitError("plan '")
           << plan.getSymName() << "' cannot divide its "
           << llvm::count(isBlock, true) << " transformer blocks into "
           << chunks << " pipeline stages"
           << (plan.getParallel().getStages() ? " of the layer counts given"
                                              : "");
  Builder builder(plan.getContext());
  for (auto [unit, chunk] : llvm::zip_equal(units, chunkOf))
    unit.setStageAttr(builder.getI64IntegerAttr(chunk));
  return success();
}

struct PlanAssignStagesPass
    : plan::impl::PlanAssignStagesBase<PlanAssignStagesPass> {
  void runOnOperation() override {
    for (PlanOp plan : getOperation().getOps<PlanOp>())
      if (failed(assignStages(plan)))
        return signalPassFailure();
  }
};

} // namespace
