//===- embed_builder.cpp - Building a plan from C++ -----------------------===//
//
// What a program that embeds the compiler does: build the plan of
// llama3_8b_fsdp_h100.plan with the C++ API instead of a file, get it checked
// exactly as the file would be, and read the result. Errors print like any
// MLIR diagnostic, at the location given to the DiagEmitter.
//
//===----------------------------------------------------------------------===//

#include "frontend/Builder.h"
#include "frontend/Models.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/Format.h"
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

  const plan::ModelSpec &m = spec->model;
  const plan::ClusterSpec &c = spec->cluster;
  const plan::TrainSpec &t = spec->train;
  const plan::ParallelSpec &p = spec->parallel;
  llvm::raw_ostream &os = llvm::outs();
  os << "plan " << spec->name << "\n";
  os << llvm::formatv("  model    {0} ({1}): {2} parameters, {3} layers\n",
                      m.preset, plan::stringify(m.family), plan::countParams(m),
                      m.layers);
  os << llvm::formatv("  cluster  {0} x {1} {2}, {3} GiB each\n", c.nodes,
                      c.gpusPerNode, c.device.name, c.device.memoryBytes >> 30);
  os << "  train    " << plan::stringify(t.optimizer.kind)
     << llvm::format("(lr = %g)", t.optimizer.lr)
     << llvm::formatv(", {0} x {1} tokens, {2}, checkpointing {3}\n",
                      t.microBatch, t.seqLen, plan::stringify(t.precision),
                      plan::stringify(t.activationCheckpointing));
  os << llvm::formatv("  parallel {0} over mesh ({1}, {2}), optimizer step "
                      "on {3}\n",
                      plan::stringify(p.sharding), p.meshReplicate, p.meshShard,
                      plan::stringify(p.optimizerStep));
  return 0;
}
