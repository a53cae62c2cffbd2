//===- LowerToSched.cpp - The single-rank program of one step -------------===//
//
// Builds `sched.program @<plan>.step` from a plan whose units are grouped and
// sized: the persistent per-group state, each unit's views into it, the
// forward and backward of every micro-batch with its transient activations,
// the loss, clipping and one optimizer step per group. The program is what
// one rank would run alone; sched-insert-collectives distributes it.
// docs/sched.md ("sched-lower") is the contract.
//
//===----------------------------------------------------------------------===//

#include "analysis/ActivationModel.h"
#include "frontend/Models.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/Twine.h"

namespace plan {
#define GEN_PASS_DEF_SCHEDLOWER
#include "passes/Passes.h.inc"
} // namespace plan

using namespace mlir;

namespace {

constexpr unsigned kNone = ~0u;

/// One unit as the program uses it, resolved once so that building the
/// program never searches the plan.
struct UnitSlot {
  plan::UnitOp op;
  plan::UnitKind kind;
  SymbolRefAttr ref; // @plan::@unit
  int64_t storedNumel = 0;
  // Its frozen base in its group's frozen buffer: bytes when that holds
  // bytes (an NF4 base), elements otherwise.
  int64_t frozenSize = 0;
  unsigned group = kNone;
  int64_t offset = 0, frozenOffset = 0; // in its group's flat buffers
  unsigned tiedOwner = kNone; // the unit storing the parameter this one ties
  bool tiesFrozen = false;    // ... which is frozen (a LoRA base)
  Value params, grads;        // views of the group's buffers; null when the
  Value frozen;               // unit stores none of that kind
};

/// A group's persistent buffers: those of what trains (none when nothing
/// does), and the frozen base (none outside a LoRA run), stored as its
/// parameters say: i8 bytes when one is NF4, their float type otherwise.
struct GroupSlot {
  plan::GroupOp op;
  SymbolRefAttr ref;           // @plan::@group
  SmallVector<unsigned> units; // in layout order
  Type frozenType;
  Value param, grad, frozen;
  SmallVector<Value, 2> state;
};

/// Resolves the plan's units and groups into slots, or explains which pass
/// the plan still needs.
LogicalResult resolvePlan(plan::PlanOp planOp, SmallVectorImpl<UnitSlot> &units,
                          SmallVectorImpl<GroupSlot> &groups) {
  MLIRContext *context = planOp.getContext();
  StringAttr planName = planOp.getSymNameAttr();
  llvm::StringMap<unsigned> unitIndex;
  // Parameter name -> the unit that stores it (tied parameters excluded).
  llvm::StringMap<unsigned> storedIn;
  llvm::StringSet<> frozenParams;
  for (auto unit : planOp.getBody().getOps<plan::UnitOp>()) {
    UnitSlot slot;
    slot.op = unit;
    slot.kind = unit.getKind();
    slot.ref = SymbolRefAttr::get(
        planName, {FlatSymbolRefAttr::get(unit.getSymNameAttr())});
    // A tensor-parallel rank stores its slice of each divided weight.
    slot.storedNumel = unit.getStoredNumel();
    for (auto param : unit.getBody().getOps<plan::ParamOp>()) {
      if (param.getTiedTo())
        continue;
      storedIn[param.getParamName()] = units.size();
      if (param.getFrozen())
        frozenParams.insert(param.getParamName());
    }
    unitIndex[unit.getSymName()] = units.size();
    units.push_back(slot);
  }
  if (units.empty())
    return planOp.emitError("plan '")
           << planOp.getSymName()
           << "' has no plan.unit: run plan-expand-presets first";

  for (auto group : planOp.getBody().getOps<plan::GroupOp>()) {
    if (!group.getPaddedNumel())
      return group.emitError("group '")
             << group.getSymName()
             << "' has no padded_numel: run plan-assign-sharding first";
    unsigned index = groups.size();
    GroupSlot slot;
    int64_t offset = 0, frozenOffset = 0;
    bool frozenBytes = group.storesFrozenAsBytes();
    std::optional<plan::BaseStorage> storage =
        frozenBytes ? plan::BaseStorage::NF4 : group.getFrozenElementStorage();
    if (storage)
      slot.frozenType = sched::getStorageElementType(context, *storage);
    for (auto ref : group.getUnits().getAsRange<FlatSymbolRefAttr>()) {
      auto it = unitIndex.find(ref.getValue());
      if (it == unitIndex.end())
        return group.emitError("'") << ref.getValue() << "' is not a plan.unit";
      UnitSlot &unit = units[it->second];
      slot.units.push_back(it->second);
      unit.group = index;
      unit.offset = offset;
      unit.frozenOffset = frozenOffset;
      unit.frozenSize = unit.op.getFrozenStorageSize(frozenBytes);
      offset += unit.storedNumel;
      frozenOffset += unit.frozenSize;
    }
    if (offset > static_cast<int64_t>(*group.getPaddedNumel()))
      return group.emitError("group '")
             << group.getSymName() << "' stores " << offset
             << " elements, more than its padded_numel "
             << *group.getPaddedNumel();
    if (frozenOffset >
        static_cast<int64_t>(group.getFrozenPaddedNumel().value_or(0)))
      return group.emitError("group '")
             << group.getSymName() << "' stores " << frozenOffset
             << (frozenBytes ? " frozen bytes" : " frozen elements")
             << ", more than its frozen_padded_numel "
             << group.getFrozenPaddedNumel().value_or(0)
             << ": run plan-assign-sharding";
    slot.op = group;
    slot.ref = SymbolRefAttr::get(
        planName, {FlatSymbolRefAttr::get(context, group.getSymName())});
    groups.push_back(slot);
  }
  if (groups.empty())
    return planOp.emitError("plan '")
           << planOp.getSymName()
           << "' has no plan.group: run plan-wrap-units and "
              "plan-assign-sharding first";

  for (auto [index, unit] : llvm::enumerate(units)) {
    if (unit.group == kNone)
      return unit.op.emitError("unit '")
             << unit.op.getSymName()
             << "' is in no plan.group: its parameters have no storage";
    for (auto param : unit.op.getBody().getOps<plan::ParamOp>()) {
      std::optional<StringRef> tied = param.getTiedTo();
      if (!tied)
        continue;
      auto owner = storedIn.find(*tied);
      // A compute op takes one `tied` buffer: the whole unit that stores the
      // parameters this one shares.
      if (owner == storedIn.end())
        return param.emitError("parameter '")
               << param.getParamName() << "' is tied to '" << *tied
               << "', which is itself tied: tie it to the stored parameter";
      if (owner->second == index)
        return param.emitError("parameter '")
               << param.getParamName() << "' is tied to '" << *tied
               << "' of its own unit";
      if (unit.tiedOwner != kNone && unit.tiedOwner != owner->second)
        return param.emitError("unit '")
               << unit.op.getSymName()
               << "' ties parameters of two other units; a unit may tie "
                  "parameters of one";
      unit.tiedOwner = owner->second;
      unit.tiesFrozen = frozenParams.contains(*tied);
    }
  }

  plan::UnitOp last = units.back().op;
  if (!plan::isHeadKind(last.getKind()))
    return last.emitError("the last unit '")
           << last.getSymName() << "' is a "
           << plan::stringifyUnitKind(last.getKind())
           << ", not a head: the loss needs the head's logits";
  return success();
}

/// Emits the program's ops, all at the plan's location, in program order.
class StepBuilder {
public:
  StepBuilder(plan::PlanOp planOp, OpBuilder &builder)
      : planOp(planOp), b(builder), loc(planOp.getLoc()),
        f32(builder.getF32Type()) {}

  void build(MutableArrayRef<UnitSlot> units,
             MutableArrayRef<GroupSlot> groups);

private:
  /// An fp32 buffer (sched-insert-casts retypes it for mixed precision),
  /// or one of `elementType` (a frozen base, stored as it says).
  Value alloc(const Twine &name, sched::BufferRole role, int64_t numel,
              bool persistent, Type elementType = {}) {
    MemRefType type = sched::getBufferType(b.getContext(), numel,
                                           elementType ? elementType : f32,
                                           sched::MemorySpace::Device);
    return sched::AllocOp::create(
        b, loc, type, b.getStringAttr(name),
        sched::BufferRoleAttr::get(b.getContext(), role),
        persistent ? b.getUnitAttr() : UnitAttr(), IntegerAttr());
  }

  Value view(Value source, int64_t offset, int64_t numel) {
    MemRefType type = sched::getBufferType(
        b.getContext(), numel,
        cast<MemRefType>(source.getType()).getElementType(),
        sched::MemorySpace::Device);
    return sched::ViewOp::create(b, loc, type, source,
                                 b.getI64IntegerAttr(offset));
  }

  void buildState(MutableArrayRef<UnitSlot> units,
                  MutableArrayRef<GroupSlot> groups);
  void buildMicroBatch(MutableArrayRef<UnitSlot> units, int64_t microBatch);
  void buildStep(MutableArrayRef<GroupSlot> groups);

  plan::PlanOp planOp;
  OpBuilder &b;
  Location loc;
  Type f32;
};

void StepBuilder::build(MutableArrayRef<UnitSlot> units,
                        MutableArrayRef<GroupSlot> groups) {
  buildState(units, groups);
  for (GroupSlot &group : groups)
    if (group.grad)
      sched::ZeroOp::create(b, loc, group.grad);
  int64_t microBatches = planOp.getTrain().getGradAccum();
  for (int64_t i = 0; i < microBatches; ++i)
    buildMicroBatch(units, i);
  buildStep(groups);
}

void StepBuilder::buildState(MutableArrayRef<UnitSlot> units,
                             MutableArrayRef<GroupSlot> groups) {
  plan::OptimizerAttr optimizer = planOp.getTrain().getOptimizer();
  for (GroupSlot &group : groups) {
    StringRef name = group.op.getSymName();
    // The frozen base: read by compute, never reduced or stepped.
    if (int64_t frozen = group.op.getFrozenPaddedNumel().value_or(0)) {
      group.frozen = alloc(name + ".frozen", sched::BufferRole::Frozen, frozen,
                           /*persistent=*/true, group.frozenType);
      for (unsigned member : group.units) {
        UnitSlot &unit = units[member];
        if (unit.frozenSize)
          unit.frozen = view(group.frozen, unit.frozenOffset, unit.frozenSize);
      }
    }
    int64_t numel = static_cast<int64_t>(*group.op.getPaddedNumel());
    if (numel == 0)
      continue;
    group.param = alloc(name + ".param", sched::BufferRole::Param, numel,
                        /*persistent=*/true);
    group.grad = alloc(name + ".grad", sched::BufferRole::Grad, numel,
                       /*persistent=*/true);
    if (optimizer.getKind() == plan::OptimizerKind::AdamW) {
      group.state.push_back(alloc(name + ".exp_avg", sched::BufferRole::ExpAvg,
                                  numel, /*persistent=*/true));
      group.state.push_back(alloc(name + ".exp_avg_sq",
                                  sched::BufferRole::ExpAvgSq, numel,
                                  /*persistent=*/true));
    } else if (optimizer.getMomentum() != 0.0) {
      group.state.push_back(alloc(name + ".momentum",
                                  sched::BufferRole::Momentum, numel,
                                  /*persistent=*/true));
    }
    for (unsigned member : group.units) {
      UnitSlot &unit = units[member];
      if (!unit.storedNumel)
        continue;
      unit.params = view(group.param, unit.offset, unit.storedNumel);
      unit.grads = view(group.grad, unit.offset, unit.storedNumel);
    }
  }
}

void StepBuilder::buildMicroBatch(MutableArrayRef<UnitSlot> units,
                                  int64_t microBatch) {
  plan::TrainAttr train = planOp.getTrain();
  IntegerAttr mb = b.getI64IntegerAttr(microBatch);
  std::string suffix = (".mb" + Twine(microBatch)).str();
  // A tie to a frozen parameter reads the owner's frozen base and gets no
  // gradient.
  auto tiedOf = [&](const UnitSlot &unit, Value UnitSlot::*view) {
    if (unit.tiedOwner == kNone)
      return Value();
    if (unit.tiesFrozen)
      return view == &UnitSlot::params ? units[unit.tiedOwner].frozen : Value();
    return units[unit.tiedOwner].*view;
  };

  // What each unit's forward saves for its backward, in the working type
  // (sched-insert-casts retypes the buffers). sched-activation-checkpointing
  // turns a block's into its input alone.
  SmallVector<Value> saved(units.size());
  for (auto [index, unit] : llvm::enumerate(units)) {
    saved[index] = alloc(unit.op.getSymName() + ".saves" + suffix,
                         sched::BufferRole::Activations,
                         plan::savesElements(unit.op, planOp.getModel(), train),
                         /*persistent=*/false);
    sched::ForwardOp::create(b, loc, unit.ref, mb, /*part=*/IntegerAttr(),
                             unit.params, tiedOf(unit, &UnitSlot::params),
                             unit.frozen, /*in=*/Value(), saved[index],
                             /*out=*/Value());
  }

  double scale = 1.0 / static_cast<double>(train.getGradAccum());
  sched::LossOp::create(b, loc, units.back().ref, mb, b.getF64FloatAttr(scale),
                        /*loss_scale=*/Value(), /*stats=*/Value());

  for (int64_t index = units.size() - 1; index >= 0; --index) {
    UnitSlot &unit = units[index];
    sched::BackwardOp::create(b, loc, unit.ref, mb, /*part=*/IntegerAttr(),
                              unit.params, tiedOf(unit, &UnitSlot::params),
                              unit.frozen, saved[index], /*out_grad=*/Value(),
                              unit.grads, tiedOf(unit, &UnitSlot::grads),
                              /*in_grad=*/Value());
    sched::FreeOp::create(b, loc, saved[index]);
  }
}

void StepBuilder::buildStep(MutableArrayRef<GroupSlot> groups) {
  Value norm;
  if (planOp.getTrain().getGradClip() > 0.0) {
    norm = alloc("grad_norm", sched::BufferRole::Scalar, 1,
                 /*persistent=*/false);
    sched::ZeroOp::create(b, loc, norm);
    for (GroupSlot &group : groups)
      if (group.grad)
        sched::GradNormOp::create(b, loc, group.grad, norm);
  }
  for (GroupSlot &group : groups)
    if (group.param)
      sched::OptimizerStepOp::create(b, loc, group.ref, group.param, group.grad,
                                     group.state, norm, /*found_inf=*/Value(),
                                     /*loss_scale=*/Value());
  if (norm)
    sched::FreeOp::create(b, loc, norm);
}

struct SchedLowerPass : plan::impl::SchedLowerBase<SchedLowerPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    llvm::StringMap<sched::ProgramOp> programs;
    for (auto program : module.getOps<sched::ProgramOp>())
      programs.try_emplace(program.getPlan(), program);

    // Every plan is lowered or reported, so one run shows all the problems.
    bool anyFailed = false;
    for (auto planOp :
         llvm::make_early_inc_range(module.getOps<plan::PlanOp>()))
      if (failed(lowerPlan(planOp, symbols, programs)))
        anyFailed = true;
    if (anyFailed)
      signalPassFailure();
  }

  LogicalResult lowerPlan(plan::PlanOp planOp, SymbolTable &symbols,
                          const llvm::StringMap<sched::ProgramOp> &programs) {
    if (auto existing = programs.lookup(planOp.getSymName())) {
      InFlightDiagnostic diag = planOp.emitError("plan '")
                                << planOp.getSymName()
                                << "' is already lowered";
      diag.attachNote(existing.getLoc()) << "its program";
      return diag;
    }
    std::string name = (planOp.getSymName() + ".step").str();
    if (Operation *clash = symbols.lookup(name)) {
      InFlightDiagnostic diag = planOp.emitError("the program of plan '")
                                << planOp.getSymName() << "' would be named '"
                                << name << "', which is taken";
      diag.attachNote(clash->getLoc()) << "by this symbol";
      return diag;
    }

    SmallVector<UnitSlot> units;
    SmallVector<GroupSlot> groups;
    if (failed(resolvePlan(planOp, units, groups)))
      return failure();

    OpBuilder builder(planOp.getContext());
    builder.setInsertionPointAfter(planOp);
    auto program = sched::ProgramOp::create(
        builder, planOp.getLoc(), builder.getStringAttr(name),
        FlatSymbolRefAttr::get(planOp.getSymNameAttr()),
        builder.getI64IntegerAttr(planOp.getTrain().getGradAccum()),
        planOp.getModel(), planOp.getCluster(), planOp.getTrain(),
        planOp.getParallel());
    builder.setInsertionPointToStart(&program.getBody().emplaceBlock());
    StepBuilder(planOp, builder).build(units, groups);
    symbols.insert(program);
    return success();
  }
};

} // namespace
