//===- PlanDialect.td - The plan dialect -------------------*- tablegen -*-===//

#ifndef PLAN_DIALECT_TD
#define PLAN_DIALECT_TD

include "mlir/IR/OpBase.td"

def Plan_Dialect : Dialect {
  let name = "plan";
  let cppNamespace = "::plan";
  let summary = "A training plan: model, cluster, recipe and parallelism";
  let description = [{
    The `plan` dialect is close to the .plan file. One `plan.plan` op holds the
    model, cluster, training recipe and parallel strategy as typed attributes
    and refers to its data-parallel device mesh, an upstream `shard.grid`.
    Once presets are expanded its body lists the model's units and their
    parameter tensors (`plan.unit`, `plan.param`) with HuggingFace names.
  }];
  let useDefaultAttributePrinterParser = 1;
  let dependentDialects = ["::mlir::shard::ShardDialect"];
  let extraClassDeclaration = [{
    void registerAttributes();
  }];
}

#endif // PLAN_DIALECT_TD
