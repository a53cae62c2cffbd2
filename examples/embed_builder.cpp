//===- embed_builder.cpp - Building a plan from C++ -----------------------===//
//
// What a program that embeds the compiler does: build the plan of
// llama3_8b_fsdp_h100.plan with the C++ API instead of a file, get it checked
// exactly as the file would be, read the result and print its plan IR. Errors
// print like any MLIR diagnostic, at the location given to the DiagEmitter.
//
//===----------------------------------------------------------------------===//

#include "frontend/Builder.h"
#include "frontend/Frontend.h"
#include "frontend/Models.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

int main() {
  mlir::MLIRContext context;
  plan::DiagEmitter diag(
      &context, /*sourceMgr=*/nullptr,
      mlir::NameLoc::get(mlir::StringAttr::get(&context, "embed_builder")));

  std::optional<plan::PlanSpec> spec =
      plan::PlanBuilder("llama3_8b_fsdp_h100")
          .model("llama3_8b")
          .cluster(plan::ClusterBuilder()
                       .gpusPerNode(8)
                       .gpu("h100_sxm")
                       .hostMemory(plan::TiB(2)))
          .train(
              plan::TrainBuilder()
                  .optimizer(
                      plan::adamw(3e-4).betas(0.9, 0.95).eps(1e-8).weightDecay(
                          0.1))
                  .microBatch(1)
                  .seqLen(8192)
                  .precision(plan::Precision::BF16Mixed)
                  .activationCheckpointing(plan::Checkpointing::Full)
                  .gradClip(1.0)
                  .lrSchedule(plan::linearSchedule(200, 0.0))
                  .steps(1000))
          .parallel(plan::ParallelBuilder()
                        .sharding(plan::Sharding::FullShard)
                        .wrap(plan::WrapKind::TransformerBlock)
                        .backwardPrefetch(plan::Prefetch::Pre))
          .build(diag);
  if (!spec)
    return 1;

  // The checked plan, as data...
  llvm::errs() << llvm::formatv(
      "{0}: {1}, {2} parameters, {3} x {4} {5}, {6} over mesh ({7}, {8})\n",
      spec->name, spec->model.preset, plan::countParams(spec->model),
      spec->cluster.nodes, spec->cluster.gpusPerNode, spec->cluster.device.name,
      plan::stringify(spec->parallel.sharding), spec->parallel.meshReplicate,
      spec->parallel.meshShard);

  // ... and as plan IR, identical to `planc llama3_8b_fsdp_h100.plan
  // --emit=plan` (test/frontend/builder-matches-file.test checks it).
  mlir::OwningOpRef<mlir::ModuleOp> module = plan::importPlan(*spec, diag);
  if (!module)
    return 1;
  module->print(llvm::outs());
  llvm::outs() << "\n";
  return 0;
}
