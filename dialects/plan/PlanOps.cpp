//===- PlanOps.cpp - Operations of the plan dialect -----------------------===//

#include "dialects/plan/PlanDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace plan;

//===----------------------------------------------------------------------===//
// PlanOp
//===----------------------------------------------------------------------===//

void PlanOp::build(OpBuilder &builder, OperationState &state, StringRef name,
                   StringRef mesh, ModelAttr model, ClusterAttr cluster,
                   TrainAttr train, ParallelAttr parallel) {
  state.addAttribute(getSymNameAttrName(state.name),
                     builder.getStringAttr(name));
  state.addAttribute(getMeshAttrName(state.name),
                     FlatSymbolRefAttr::get(builder.getContext(), mesh));
  state.addAttribute(getModelAttrName(state.name), model);
  state.addAttribute(getClusterAttrName(state.name), cluster);
  state.addAttribute(getTrainAttrName(state.name), train);
  state.addAttribute(getParallelAttrName(state.name), parallel);
  Region *body = state.addRegion();
  body->push_back(new Block());
}

// plan.plan @name on @mesh
//     model #plan.model<...>
//     cluster #plan.cluster<...>
//     train #plan.train<...>
//     parallel #plan.parallel<...> attributes {...} {
//   ...
// }
ParseResult PlanOp::parse(OpAsmParser &parser, OperationState &result) {
  StringAttr name;
  FlatSymbolRefAttr mesh;
  ModelAttr model;
  ClusterAttr cluster;
  TrainAttr train;
  ParallelAttr parallel;
  if (parser.parseSymbolName(name) || parser.parseKeyword("on") ||
      parser.parseAttribute(mesh) || parser.parseKeyword("model") ||
      parser.parseAttribute(model) || parser.parseKeyword("cluster") ||
      parser.parseAttribute(cluster) || parser.parseKeyword("train") ||
      parser.parseAttribute(train) || parser.parseKeyword("parallel") ||
      parser.parseAttribute(parallel) ||
      parser.parseOptionalAttrDictWithKeyword(result.attributes))
    return failure();
  result.addAttribute(getSymNameAttrName(result.name), name);
  result.addAttribute(getMeshAttrName(result.name), mesh);
  result.addAttribute(getModelAttrName(result.name), model);
  result.addAttribute(getClusterAttrName(result.name), cluster);
  result.addAttribute(getTrainAttrName(result.name), train);
  result.addAttribute(getParallelAttrName(result.name), parallel);
  Region *body = result.addRegion();
  if (parser.parseRegion(*body))
    return failure();
  if (body->empty())
    body->push_back(new Block());
  return success();
}

void PlanOp::print(OpAsmPrinter &p) {
  p << ' ';
  p.printSymbolName(getSymName());
  p << " on ";
  p.printAttributeWithoutType(getMeshAttr());
  p.increaseIndent();
  p.increaseIndent();
  p.printNewline();
  p << "model " << getModel();
  p.printNewline();
  p << "cluster " << getCluster();
  p.printNewline();
  p << "train " << getTrain();
  p.printNewline();
  p << "parallel " << getParallel();
  p.decreaseIndent();
  p.decreaseIndent();
  p.printOptionalAttrDictWithKeyword(
      (*this)->getAttrs(),
      {getSymNameAttrName(), getMeshAttrName(), getModelAttrName(),
       getClusterAttrName(), getTrainAttrName(), getParallelAttrName()});
  p << ' ';
  p.printRegion(getBody(), /*printEntryBlockArgs=*/false,
                /*printBlockTerminators=*/false, /*printEmptyBlock=*/false);
}

UnitOp PlanOp::lookupUnit(StringRef name) {
  return dyn_cast_or_null<UnitOp>(
      mlir::SymbolTable::lookupSymbolIn(*this, name));
}

GroupOp PlanOp::lookupGroup(StringRef name) {
  return dyn_cast_or_null<GroupOp>(
      mlir::SymbolTable::lookupSymbolIn(*this, name));
}

std::pair<UnitOp, ParamOp> PlanOp::lookupTiedTo(ParamOp param) {
  std::optional<StringRef> tied = param.getTiedTo();
  if (!tied)
    return {};
  for (auto unit : getBody().getOps<UnitOp>())
    for (auto p : unit.getBody().getOps<ParamOp>())
      if (p.getParamName() == *tied)
        return {unit, p};
  return {};
}

shard::GridOp PlanOp::getGridOp() {
  // The plan is a symbol table of its units; the mesh is a sibling.
  return mlir::SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(
      (*this)->getParentOp(), getMeshAttr());
}

int64_t PlanOp::getMeshSize(shard::GridOp grid, MeshAxis axis) {
  if (!grid || grid.getShape().size() != kMeshAxes)
    return 0;
  int64_t size = grid.getShape()[static_cast<unsigned>(axis)];
  return ShapedType::isDynamic(size) ? 0 : size;
}

LogicalResult PlanOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto grid = symbolTable.lookupNearestSymbolFrom<shard::GridOp>(
      (*this)->getParentOp(), getMeshAttr());
  if (!grid)
    return emitOpError("mesh '") << getMesh() << "' does not name a shard.grid";
  ArrayRef<int64_t> shape = grid.getShape();
  if (shape.size() != kMeshAxes)
    return emitOpError("mesh '")
           << getMesh() << "' must have " << kMeshAxes
           << " axes (pipeline, replicate, shard, tensor), got "
           << shape.size();
  if (llvm::any_of(shape, ShapedType::isDynamic))
    return emitOpError("mesh '") << getMesh() << "' must have a static shape";
  int64_t pipeline = getMeshSize(MeshAxis::Pipeline);
  int64_t replicate = getMeshSize(MeshAxis::Replicate);
  int64_t shard = getMeshSize(MeshAxis::Shard);
  int64_t tensor = getMeshSize(MeshAxis::Tensor);
  int64_t size = pipeline * replicate * shard * tensor;
  if (size != getWorldSize())
    return emitOpError("mesh '")
           << getMesh() << "' has " << pipeline << "x" << replicate << "x"
           << shard << "x" << tensor << " = " << size
           << " ranks but the cluster has " << getWorldSize() << " ("
           << getCluster().getNodes() << " nodes x "
           << getCluster().getGpusPerNode() << " gpus_per_node)";
  if (getParallel().getSequenceParallel() && tensor < 2)
    return emitOpError("sequence_parallel splits along the sequence over "
                       "the tensor axis, which is 1");
  Sharding sharding = getParallel().getSharding();
  if (sharding == Sharding::NoShard && shard != 1)
    return emitOpError("no_shard does not shard: the mesh's shard axis must "
                       "be 1, got ")
           << shard;
  if (sharding == Sharding::HybridShard && replicate < 2)
    return emitOpError("hybrid_shard needs at least 2 replica groups, the "
                       "mesh has ")
           << replicate;
  ParallelAttr parallel = getParallel();
  int64_t chunks = pipeline * parallel.getVirtualStages();
  if (parallel.getPipelineSchedule() == PipelineSchedule::Interleaved
          ? parallel.getVirtualStages() < 2
          : parallel.getVirtualStages() != 1)
    return emitOpError("virtual_stages ")
           << parallel.getVirtualStages()
           << (parallel.getPipelineSchedule() == PipelineSchedule::Interleaved
                   ? " must be at least 2 for the interleaved schedule"
                   : " must be 1 unless the schedule is interleaved");
  if (parallel.getStages() &&
      static_cast<int64_t>(parallel.getStages().size()) != chunks)
    return emitOpError("stages lists ")
           << parallel.getStages().size() << " layer counts for " << chunks
           << " pipeline stages";
  return success();
}

LogicalResult PlanOp::verify() {
  if (getTrain().getSeqLen() > getModel().getMaxSeqLen())
    return emitOpError("seq_len ")
           << getTrain().getSeqLen() << " exceeds the model's max_seq_len "
           << getModel().getMaxSeqLen();
  // Parameter names are unique across the plan (they are the HF names).
  llvm::StringSet<> names;
  for (auto param : getBody().getOps<UnitOp>()) {
    for (auto p : param.getBody().getOps<ParamOp>())
      if (!names.insert(p.getParamName()).second)
        return p.emitOpError("duplicate parameter name '")
               << p.getParamName() << "'";
  }
  for (Operation &op : getBody().front())
    if (!isa<UnitOp, GroupOp>(op))
      return op.emitOpError("is not allowed in a plan.plan body");
  // A tied parameter names a parameter defined (not itself tied) elsewhere.
  for (auto unit : getBody().getOps<UnitOp>())
    for (auto p : unit.getBody().getOps<ParamOp>())
      if (std::optional<StringRef> tied = p.getTiedTo())
        if (!names.contains(*tied))
          return p.emitOpError("is tied to '")
                 << *tied << "', which is not a parameter of this plan";
  // Each unit is in at most one group, and a group's units in one stage.
  llvm::StringMap<GroupOp> owner;
  for (auto group : getBody().getOps<GroupOp>()) {
    std::optional<int64_t> stage;
    for (auto unit : group.getUnits().getAsRange<FlatSymbolRefAttr>()) {
      auto [it, inserted] = owner.try_emplace(unit.getValue(), group);
      if (!inserted)
        return group.emitOpError("unit '")
               << unit.getValue() << "' is already in group '"
               << it->second.getSymName() << "'";
      UnitOp unitOp = lookupUnit(unit.getValue());
      std::optional<int64_t> unitStage =
          unitOp ? unitOp.getStage() : std::nullopt;
      if (stage && unitStage && *stage != *unitStage)
        return group.emitOpError("holds units of pipeline stages ")
               << *stage << " and " << *unitStage
               << ": a group's units run on one stage";
      if (!stage)
        stage = unitStage;
    }
  }
  // Stages, when units have them, follow the units' order: chunk 0 first,
  // each chunk a run of units, the last one the mesh's last.
  int64_t previous = -1, chunks = getPipelineChunks();
  for (auto unit : getBody().getOps<UnitOp>()) {
    std::optional<int64_t> stage = unit.getStage();
    if (!stage)
      continue;
    if (*stage != previous && *stage != previous + 1)
      return unit.emitOpError("is in pipeline stage ")
             << *stage << " after a unit in stage " << previous
             << ": stages follow the units' order, one after the other";
    if (*stage >= chunks)
      return unit.emitOpError("is in pipeline stage ")
             << *stage << ", but the mesh and virtual_stages make " << chunks;
    previous = *stage;
  }
  if (previous >= 0 && previous != chunks - 1)
    return emitOpError("divides its units among ")
           << previous + 1 << " pipeline stages, but the mesh and "
           << "virtual_stages make " << chunks;
  return success();
}

//===----------------------------------------------------------------------===//
// GroupOp
//===----------------------------------------------------------------------===//

/// The units of `group` that resolve.
static SmallVector<UnitOp> unitsOf(GroupOp group) {
  SmallVector<UnitOp> units;
  auto plan = group->getParentOfType<PlanOp>();
  for (auto unit : group.getUnits().getAsRange<FlatSymbolRefAttr>())
    if (UnitOp op = plan.lookupUnit(unit.getValue()))
      units.push_back(op);
  return units;
}

bool GroupOp::storesFrozenAsBytes() {
  return llvm::any_of(unitsOf(*this),
                      [](UnitOp unit) { return unit.hasQuantizedBase(); });
}

std::optional<BaseStorage> GroupOp::getFrozenElementStorage() {
  std::optional<BaseStorage> shared;
  for (UnitOp unit : unitsOf(*this))
    for (auto param : unit.getBody().getOps<ParamOp>()) {
      std::optional<BaseStorage> storage = param.getFrozen();
      if (!storage || param.getTiedTo())
        continue;
      if (*storage == BaseStorage::NF4 || (shared && *shared != *storage))
        return std::nullopt;
      shared = storage;
    }
  return shared;
}

LogicalResult GroupOp::verify() {
  if (getUnits().empty())
    return emitOpError("must hold at least one unit");
  auto plan = (*this)->getParentOfType<PlanOp>();
  int64_t stored = 0, frozen = 0;
  bool asBytes = storesFrozenAsBytes();
  for (auto unit : getUnits().getAsRange<FlatSymbolRefAttr>()) {
    UnitOp op = plan.lookupUnit(unit.getValue());
    if (!op)
      return emitOpError("'") << unit.getValue() << "' is not a plan.unit";
    stored += op.getStoredNumel();
    frozen += op.getFrozenStorageSize(asBytes);
  }
  if (frozen && !asBytes && !getFrozenElementStorage())
    return emitOpError("the frozen parameters of its units are stored in "
                       "different types: one frozen buffer holds one");
  int64_t groupSize = plan.getMeshSize(MeshAxis::Shard);
  // One flat buffer's sizes: `what` is "" for the trainable one, "frozen_"
  // for the frozen one.
  auto verifySizes = [&](StringRef what, int64_t holds,
                         std::optional<int64_t> numel,
                         std::optional<int64_t> padded,
                         std::optional<int64_t> shard) -> LogicalResult {
    if (numel && *numel != holds)
      return emitOpError() << what << "numel " << *numel << " is not the "
                           << holds
                           << (what.empty() || !asBytes ? " elements"
                                                        : " bytes")
                           << " its units store"
                           << (what.empty() ? " that train" : " frozen");
    if (padded && (!numel || *padded < *numel))
      return emitOpError() << what << "padded_numel must be at least " << what
                           << "numel";
    if (shard) {
      if (!padded || *shard < 0 || (*shard == 0 && *padded != 0) ||
          (*shard > 0 && *padded % *shard != 0))
        return emitOpError()
               << what << "shard_numel must divide " << what << "padded_numel";
      int64_t shards = *shard ? *padded / *shard : groupSize;
      if (groupSize && shards != groupSize)
        return emitOpError() << what << "padded_numel / " << what
                             << "shard_numel = " << shards
                             << " shards, but the mesh's shard axis has "
                             << groupSize << " ranks";
    }
    return success();
  };
  if (failed(verifySizes("", stored, getNumel(), getPaddedNumel(),
                         getShardNumel())) ||
      failed(verifySizes("frozen_", frozen, getFrozenNumel(),
                         getFrozenPaddedNumel(), getFrozenShardNumel())))
    return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// UnitOp
//===----------------------------------------------------------------------===//

/// The ranks of the tensor axis of the plan that holds `unit` (1 without
/// one).
static int64_t tensorRanksOf(UnitOp unit) {
  auto plan = unit->getParentOfType<PlanOp>();
  return plan ? plan.getTensorRanks() : 1;
}

int64_t UnitOp::getStoredNumel() {
  int64_t numel = 0, ranks = tensorRanksOf(*this);
  for (auto param : getBody().getOps<ParamOp>())
    if (!param.getTiedTo() && !param.getFrozen())
      numel += param.getLocalNumel(ranks);
  return numel;
}

int64_t UnitOp::getFrozenNumel() {
  int64_t numel = 0, ranks = tensorRanksOf(*this);
  for (auto param : getBody().getOps<ParamOp>())
    if (!param.getTiedTo() && param.getFrozen())
      numel += param.getLocalNumel(ranks);
  return numel;
}

int64_t UnitOp::getFrozenBytes() {
  int64_t bytes = 0, ranks = tensorRanksOf(*this);
  for (auto param : getBody().getOps<ParamOp>())
    if (std::optional<BaseStorage> storage = param.getFrozen();
        storage && !param.getTiedTo())
      bytes += storageBytes(*storage, param.getLocalNumel(ranks));
  return bytes;
}

bool UnitOp::hasQuantizedBase() {
  return llvm::any_of(getBody().getOps<ParamOp>(), [](ParamOp param) {
    return param.getFrozen() == BaseStorage::NF4;
  });
}

std::pair<UnitOp, ParamOp> UnitOp::lookupTiedOwner() {
  auto plan = (*this)->getParentOfType<PlanOp>();
  for (auto param : getBody().getOps<ParamOp>())
    if (auto owner = plan.lookupTiedTo(param); owner.second)
      return owner;
  return {};
}

LogicalResult UnitOp::verify() {
  for (Operation &op : getBody().front())
    if (!isa<ParamOp>(op))
      return op.emitOpError("is not allowed in a plan.unit body");
  return success();
}

//===----------------------------------------------------------------------===//
// ParamOp
//===----------------------------------------------------------------------===//

int64_t ParamOp::getLocalNumel(int64_t tensorRanks) {
  RankedTensorType type = getTensorType();
  TensorSplitAttr split = getSplitAttr();
  if (!split || tensorRanks <= 1)
    return type.getNumElements();
  int64_t dim = split.getDim();
  return type.getNumElements() / type.getDimSize(dim) *
         split.localExtent(type.getDimSize(dim), tensorRanks);
}

LogicalResult ParamOp::verify() {
  RankedTensorType type = getTensorType();
  if (!type.hasStaticShape())
    return emitOpError("parameter '")
           << getParamName() << "' must have a static shape, got " << type;
  if (llvm::any_of(type.getShape(), [](int64_t d) { return d < 1; }))
    return emitOpError("parameter '")
           << getParamName() << "' has an empty dimension: " << type;
  if (!isa<FloatType>(type.getElementType()))
    return emitOpError("parameter '")
           << getParamName() << "' must have a floating-point element type";
  if (getParamName().empty())
    return emitOpError("parameter name must not be empty");
  if (std::optional<StringRef> tied = getTiedTo()) {
    if (*tied == getParamName())
      return emitOpError("parameter '")
             << getParamName() << "' cannot be tied to itself";
    if (getFrozen())
      return emitOpError("tied parameter '")
             << getParamName()
             << "' cannot say how it is stored: it is stored as '" << *tied
             << "' is";
    if (getSplit())
      return emitOpError("tied parameter '")
             << getParamName()
             << "' cannot say how it is split: it is split as '" << *tied
             << "' is";
  }
  if (TensorSplitAttr split = getSplitAttr()) {
    if (split.getDim() >= type.getRank())
      return emitOpError("parameter '")
             << getParamName() << "' is split along dim " << split.getDim()
             << " but has " << type.getRank() << " dims";
    if (type.getDimSize(split.getDim()) % split.getChunks() != 0)
      return emitOpError("parameter '")
             << getParamName() << "' dim " << split.getDim() << " ("
             << type.getDimSize(split.getDim()) << ") is not "
             << split.getChunks() << " equal parts";
  }
  return success();
}

#define GET_OP_CLASSES
#include "dialects/plan/PlanOps.cpp.inc"
