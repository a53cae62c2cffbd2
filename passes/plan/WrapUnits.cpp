//===- WrapUnits.cpp - Group units into FSDP units ------------------------===//
//
// Forms the plan.groups (FSDP units, each one FlatParameter) from the wrap
// policy, as docs/sched.md ("plan-wrap-units") says. The non-block units
// (embedding, head) always share the root group, as under FSDP's root
// module, which also keeps a tied embedding and lm_head in one buffer.
// Under pipeline parallelism (units with a `stage`) no group spans two
// stages: each stage is wrapped on its own, its non-block units in its own
// root group `fsdp.stage<c>.root` (`fsdp.stage<c>` for whole_model). A unit
// whose parameter a unit of another stage ties (the input embedding of a
// tied head) is then in a group of its own under whole_model too: the tie's
// stage holds a replica of that group (sched-lower), which should not copy
// the rest of the stage.
//
// A plan whose units are all grouped already (by hand, or by an earlier run)
// is left alone; one where only some are grouped is rejected, since the
// later passes need every unit in exactly one group.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringSet.h"

#include <algorithm>

namespace plan {
#define GEN_PASS_DEF_PLANWRAPUNITS
#include "passes/Passes.h.inc"
} // namespace plan

using namespace mlir;
using namespace plan;

namespace {

/// A group to create: its units, and the position of its first unit in the
/// plan, which orders the groups.
struct GroupPlan {
  std::string name;
  SmallVector<UnitOp> units;
  size_t firstUnit = 0;
};

/// `fsdp.layers.0` for one unit, `fsdp.layers.0-3` for a run of units whose
/// names differ only after the last '.'.
std::string groupName(MutableArrayRef<UnitOp> units) {
  StringRef first = units.front().getSymName();
  std::string name = ("fsdp." + first).str();
  if (units.size() == 1)
    return name;
  StringRef last = units.back().getSymName();
  size_t dot = first.rfind('.');
  if (dot != StringRef::npos && last.starts_with(first.take_front(dot + 1)))
    last = last.drop_front(dot + 1);
  return name + "-" + last.str();
}

/// Every unit must be in a group; an existing grouping is kept as it is.
LogicalResult checkExistingGroups(PlanOp plan) {
  llvm::StringSet<> grouped;
  for (GroupOp group : plan.getBody().getOps<GroupOp>())
    for (auto unit : group.getUnits().getAsRange<FlatSymbolRefAttr>())
      grouped.insert(unit.getValue());
  for (UnitOp unit : plan.getBody().getOps<UnitOp>())
    if (!grouped.contains(unit.getSymName()))
      return unit.emitError("unit '")
             << unit.getSymName()
             << "' is in no plan.group, but the plan has groups: group every "
                "unit, or none and let the wrap policy do it";
  return success();
}

LogicalResult wrapPlan(PlanOp plan) {
  if (!plan.getBody().getOps<GroupOp>().empty())
    return checkExistingGroups(plan);

  SmallVector<UnitOp> units(plan.getBody().getOps<UnitOp>());
  if (units.empty())
    return plan.emitError("plan '")
           << plan.getSymName()
           << "' has no units to wrap; run plan-expand-presets first";

  WrapAttr wrap = plan.getParallel().getWrap();
  auto stageOf = [](UnitOp unit) { return unit.getStage().value_or(0); };
  bool staged = llvm::any_of(
      units, [](UnitOp unit) { return unit.getStage().has_value(); });
  // Units whose parameters a unit of another stage ties.
  llvm::SmallPtrSet<Operation *, 2> tiedAcrossStages;
  for (UnitOp unit : units)
    if (auto [owner, param] = unit.lookupTiedOwner();
        owner && stageOf(owner) != stageOf(unit))
      tiedAcrossStages.insert(owner);
  SmallVector<GroupPlan> groups;
  // One stage's units, [begin, end) of `units`.
  auto wrapStage = [&](size_t begin, size_t end) {
    std::string stagePrefix =
        staged ? "fsdp.stage" + std::to_string(stageOf(units[begin])) : "";
    GroupPlan root{staged ? (wrap.getKind() == WrapKind::WholeModel
                                 ? stagePrefix
                                 : stagePrefix + ".root")
                          : "fsdp.root",
                   {},
                   end};
    GroupPlan pending;
    int64_t pendingNumel = 0;
    auto closePending = [&] {
      if (pending.units.empty())
        return;
      pending.name = groupName(pending.units);
      groups.push_back(std::move(pending));
      pending = GroupPlan();
      pendingNumel = 0;
    };
    for (size_t index = begin; index < end; ++index) {
      UnitOp unit = units[index];
      if (wrap.getKind() == WrapKind::WholeModel &&
          tiedAcrossStages.contains(unit)) {
        SmallVector<UnitOp> alone{unit};
        groups.push_back({groupName(alone), alone, index});
        continue;
      }
      if (wrap.getKind() == WrapKind::WholeModel ||
          !isBlockKind(unit.getKind())) {
        if (root.units.empty())
          root.firstUnit = index;
        root.units.push_back(unit);
        continue;
      }
      if (pending.units.empty())
        pending.firstUnit = index;
      pending.units.push_back(unit);
      // Every stored element counts, frozen ones too (a LoRA base), as
      // PyTorch's size_based_auto_wrap_policy counts them.
      pendingNumel += unit.getStoredNumel() + unit.getFrozenNumel();
      // transformer_block closes a group after every block, min_params once
      // it holds enough elements. Groups are runs of consecutive blocks, so
      // a run that the head (or any non-block unit, or the stage's end)
      // cuts short stays a smaller group.
      if (wrap.getKind() == WrapKind::TransformerBlock ||
          pendingNumel >= wrap.getMinParams() || index + 1 == end ||
          !isBlockKind(units[index + 1].getKind()))
        closePending();
    }
    if (!root.units.empty())
      groups.push_back(std::move(root));
  };
  for (size_t begin = 0, end; begin < units.size(); begin = end) {
    end = begin + 1;
    while (end < units.size() && stageOf(units[end]) == stageOf(units[begin]))
      ++end;
    wrapStage(begin, end);
  }
  llvm::stable_sort(groups, [](const GroupPlan &a, const GroupPlan &b) {
    return a.firstUnit < b.firstUnit;
  });

  OpBuilder builder = OpBuilder::atBlockEnd(&plan.getBody().front());
  for (const GroupPlan &group : groups) {
    if (SymbolTable::lookupSymbolIn(plan, group.name))
      return plan.emitError("cannot name a group '")
             << group.name << "': a unit of plan '" << plan.getSymName()
             << "' already has that name";
    SmallVector<Attribute> refs =
        llvm::map_to_vector(group.units, [](UnitOp unit) -> Attribute {
          return FlatSymbolRefAttr::get(unit.getSymNameAttr());
        });
    GroupOp::create(builder, plan.getLoc(), group.name,
                    builder.getArrayAttr(refs), IntegerAttr(), IntegerAttr(),
                    IntegerAttr(), IntegerAttr(), IntegerAttr(), IntegerAttr());
  }
  return success();
}

struct PlanWrapUnitsPass : plan::impl::PlanWrapUnitsBase<PlanWrapUnitsPass> {
  void runOnOperation() override {
    for (PlanOp plan : getOperation().getOps<PlanOp>())
      if (failed(wrapPlan(plan)))
        return signalPassFailure();
  }
};

} // namespace
