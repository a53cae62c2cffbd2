//===- ExpandPresets.cpp - One plan.unit per model block ------------------===//
//
// Fills an empty plan.plan body with the model's units and their HuggingFace
// parameters, from `enumerateUnits` (frontend/Models.h), so that every later
// pass sees the real parameter list. On a mesh with a tensor axis above 1
// each parameter tensor parallelism divides says how (`split`, Megatron's
// layout). A plan that already has units (written by hand, or expanded
// before) is left as it is, which makes the pass idempotent.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "frontend/Models.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringExtras.h"

namespace plan {
#define GEN_PASS_DEF_PLANEXPANDPRESETS
#include "passes/Passes.h.inc"
} // namespace plan

using namespace mlir;
using namespace plan;

namespace {

/// The model attribute as the ModelSpec that `enumerateUnits` reads.
ModelSpec toModelSpec(ModelAttr model) {
  ModelSpec spec;
  spec.family = model.getFamily();
  spec.preset = model.getPreset().str();
  spec.vocab = model.getVocab();
  spec.hidden = model.getHidden();
  spec.intermediate = model.getIntermediate();
  spec.layers = model.getLayers();
  spec.heads = model.getHeads();
  spec.kvHeads = model.getKvHeads();
  spec.maxSeqLen = model.getMaxSeqLen();
  spec.ropeTheta = model.getRopeTheta();
  if (RopeScalingAttr scaling = model.getRopeScaling()) {
    RopeScaling rope;
    rope.factor = scaling.getFactor();
    rope.lowFreqFactor = scaling.getLowFreqFactor();
    rope.highFreqFactor = scaling.getHighFreqFactor();
    rope.originalMaxSeqLen = scaling.getOriginalMaxSeqLen();
    spec.ropeScaling = rope;
  }
  spec.normEps = model.getNormEps();
  spec.tieEmbeddings = model.getTieEmbeddings();
  spec.typeVocab = model.getTypeVocab();
  spec.bertHead = model.getBertHead();
  spec.numLabels = model.getNumLabels();
  return spec;
}

/// The lora attribute as the LoraSpec that `enumerateUnits` reads, or a
/// target no module of the family's blocks has.
FailureOr<LoraSpec> toLoraSpec(PlanOp plan, LoraAttr attr) {
  LoraSpec lora;
  lora.rank = attr.getRank();
  lora.alpha = attr.getAlpha();
  lora.dropout = attr.getDropout();
  lora.base = attr.getBase();
  ModelFamily family = plan.getModel().getFamily();
  std::vector<std::string> modules = loraModules(family);
  for (auto target : attr.getTargets().getAsValueRange<StringAttr>()) {
    if (llvm::none_of(modules, [&](const std::string &module) {
          return loraTargetMatches(module, target);
        }))
      return plan.emitError("lora target '")
             << target << "' is no linear layer of a "
             << stringifyModelFamily(family)
             << " block; they are: " << llvm::join(modules, ", ");
    lora.targets.push_back(target.str());
  }
  return lora;
}

LogicalResult expandPlan(PlanOp plan) {
  Block &body = plan.getBody().front();
  if (!body.empty())
    return success();

  ModelSpec model = toModelSpec(plan.getModel());
  std::vector<ModelUnit> units;
  if (LoraAttr loraAttr = plan.getModel().getLora()) {
    FailureOr<LoraSpec> lora = toLoraSpec(plan, loraAttr);
    if (failed(lora))
      return failure();
    units = enumerateUnits(model, *lora,
                           workingStorage(plan.getTrain().getPrecision()));
  } else {
    units = enumerateUnits(model);
  }
  // Check every shape before building anything, so a model the verifier let
  // through with a degenerate size fails with a message, not invalid IR.
  for (const ModelUnit &unit : units)
    for (const ParamInfo &param : unit.params)
      if (llvm::any_of(param.shape, [](int64_t dim) { return dim < 1; }))
        return plan.emitError("model gives parameter '")
               << param.name << "' an empty dimension; check its sizes";

  OpBuilder builder = OpBuilder::atBlockEnd(&body);
  Location loc = plan.getLoc();
  Type f32 = builder.getF32Type();
  // The tensor-parallel layout is written where a tensor axis divides it.
  bool tensorParallel = plan.getMeshSize(MeshAxis::Tensor) > 1;
  for (const ModelUnit &unit : units) {
    auto unitOp = UnitOp::create(builder, loc, unit.name, unit.kind,
                                 /*stage=*/IntegerAttr());
    OpBuilder paramBuilder =
        OpBuilder::atBlockEnd(&unitOp.getBody().emplaceBlock());
    for (const ParamInfo &param : unit.params) {
      StringAttr tiedTo = param.tiedTo.empty()
                              ? StringAttr()
                              : builder.getStringAttr(param.tiedTo);
      BaseStorageAttr frozen =
          param.frozen
              ? BaseStorageAttr::get(builder.getContext(), *param.frozen)
              : BaseStorageAttr();
      TensorSplitAttr split =
          tensorParallel && param.split.dim >= 0
              ? TensorSplitAttr::get(builder.getContext(), param.split.dim,
                                     param.split.chunks)
              : TensorSplitAttr();
      ParamOp::create(paramBuilder, loc, param.name,
                      RankedTensorType::get(param.shape, f32), tiedTo, frozen,
                      split);
    }
  }
  return success();
}

struct PlanExpandPresetsPass
    : plan::impl::PlanExpandPresetsBase<PlanExpandPresetsPass> {
  void runOnOperation() override {
    for (PlanOp plan : getOperation().getOps<PlanOp>())
      if (failed(expandPlan(plan)))
        return signalPassFailure();
  }
};

} // namespace
