//===- AssignSharding.cpp - Size each group's flat buffer and shard -------===//
//
// Sets numel, padded_numel and shard_numel on every plan.group, as
// docs/sched.md ("plan-assign-sharding") says: the flat buffer is padded to a
// multiple of the mesh's shard axis so that every rank of the shard group
// holds an equal slice, as FSDP pads its FlatParameter. On a mesh with a
// tensor axis the buffer holds this rank's part of each divided parameter
// (`split`), so the shards are of the tensor-parallel weights, as FSDP2 + TP
// shards its DTensors. The values depend only on the units and the mesh, so
// running the pass again rewrites the same numbers.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace plan {
#define GEN_PASS_DEF_PLANASSIGNSHARDING
#include "passes/Passes.h.inc"
} // namespace plan

using namespace mlir;
using namespace plan;

namespace {

LogicalResult assignSharding(PlanOp plan) {
  int64_t shardRanks = plan.getMeshSize(MeshAxis::Shard);
  if (shardRanks < 1)
    return plan.emitError("plan '")
           << plan.getSymName() << "' needs a static 4-axis mesh '"
           << plan.getMesh()
           << "' (pipeline, replicate, shard, tensor) to size its shards";

  auto groups = plan.getBody().getOps<GroupOp>();
  if (groups.empty())
    return plan.emitError("plan '")
           << plan.getSymName()
           << "' has no groups to shard; run plan-wrap-units first";

  Builder builder(plan.getContext());
  for (GroupOp group : groups) {
    int64_t numel = 0, frozen = 0;
    // An NF4 base (QLoRA) is sharded as bytes.
    bool frozenBytes = group.storesFrozenAsBytes();
    for (auto ref : group.getUnits().getAsRange<FlatSymbolRefAttr>()) {
      UnitOp unit = plan.lookupUnit(ref.getValue());
      if (!unit)
        return group.emitError("'") << ref.getValue() << "' is not a plan.unit";
      numel += unit.getStoredNumel();
      frozen += unit.getFrozenStorageSize(frozenBytes);
    }
    if (numel == 0 && frozen == 0)
      return group.emitError("group '")
             << group.getSymName()
             << "' stores no elements (all its parameters are tied to other "
                "groups): it has nothing to shard";
    int64_t padded = llvm::divideCeil(numel, shardRanks) * shardRanks;
    group.setNumelAttr(builder.getI64IntegerAttr(numel));
    group.setPaddedNumelAttr(builder.getI64IntegerAttr(padded));
    group.setShardNumelAttr(builder.getI64IntegerAttr(padded / shardRanks));
    // The frozen base (LoRA) is sharded as the trainable parameters are.
    if (frozen) {
      int64_t frozenPadded = llvm::divideCeil(frozen, shardRanks) * shardRanks;
      group.setFrozenNumelAttr(builder.getI64IntegerAttr(frozen));
      group.setFrozenPaddedNumelAttr(builder.getI64IntegerAttr(frozenPadded));
      group.setFrozenShardNumelAttr(
          builder.getI64IntegerAttr(frozenPadded / shardRanks));
    }
  }
  return success();
}

struct PlanAssignShardingPass
    : plan::impl::PlanAssignShardingBase<PlanAssignShardingPass> {
  void runOnOperation() override {
    for (PlanOp plan : getOperation().getOps<PlanOp>())
      if (failed(assignSharding(plan)))
        return signalPassFailure();
  }
};

} // namespace
