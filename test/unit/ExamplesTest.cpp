//===- ExamplesTest.cpp - The example plans users start from --------------===//
//
// Every examples/*.plan must compile without an error or a warning, say what
// it is on its first line, and describe the setup its comment promises.
//
//===----------------------------------------------------------------------===//

#include "frontend/Analyze.h"
#include "frontend/Builder.h"
#include "frontend/Models.h"
#include "frontend/Parser.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"

#include "gtest/gtest.h"

#include <map>
#include <string>
#include <vector>

#ifndef PLAN_EXAMPLES_DIR
#error "PLAN_EXAMPLES_DIR must name the examples directory"
#endif

using namespace plan;

namespace {

class ExamplesTest : public ::testing::Test {
protected:
  ExamplesTest()
      : handler(&context, [this](mlir::Diagnostic &d) {
          messages.push_back(d.str());
          return mlir::success();
        }) {}

  /// Analyzes examples/`file`; any diagnostic fails the test.
  std::optional<PlanSpec> load(llvm::StringRef file) {
    llvm::SmallString<128> path(PLAN_EXAMPLES_DIR);
    llvm::sys::path::append(path, file);
    auto buffer = llvm::MemoryBuffer::getFile(path);
    if (!buffer) {
      ADD_FAILURE() << "cannot read " << path.str().str();
      return std::nullopt;
    }
    llvm::StringRef text = (*buffer)->getBuffer();
    EXPECT_TRUE(text.starts_with("# ")) << file.str();
    unsigned id = sourceMgr.AddNewSourceBuffer(std::move(*buffer), {});
    DiagEmitter diag(&context, &sourceMgr, mlir::UnknownLoc::get(&context));
    syntax::Block root = parsePlanSyntax(sourceMgr, id, diag);
    std::optional<PlanSpec> plan;
    if (!diag.hadError())
      plan = analyzePlan(root, llvm::sys::path::stem(file), diag);
    EXPECT_TRUE(messages.empty()) << file.str() << ":\n"
                                  << llvm::join(messages, "\n");
    messages.clear();
    return plan;
  }

  mlir::MLIRContext context;
  mlir::ScopedDiagnosticHandler handler;
  llvm::SourceMgr sourceMgr;
  std::vector<std::string> messages;
};

TEST_F(ExamplesTest, EveryExampleCompilesCleanly) {
  std::vector<std::string> files;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(PLAN_EXAMPLES_DIR, ec), end;
       it != end && !ec; it.increment(ec))
    if (llvm::StringRef(it->path()).ends_with(".plan"))
      files.push_back(llvm::sys::path::filename(it->path()).str());
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_GE(files.size(), 8u);
  for (const std::string &file : files)
    EXPECT_TRUE(load(file)) << file;
}

TEST_F(ExamplesTest, BertDDPOnOneGPU) {
  auto plan = load("bert_base_cased_ddp.plan");
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->model.preset, "bert_base_cased");
  EXPECT_EQ(plan->model.bertHead, BertHead::SequenceClassification);
  EXPECT_EQ(plan->cluster.worldSize(), 1);
  EXPECT_EQ(plan->parallel.sharding, Sharding::NoShard);
  EXPECT_EQ(plan->train.lossScale.kind, LossScaleKind::Dynamic);
}

TEST_F(ExamplesTest, TinyLlamaDDPOnFourAdaGPUs) {
  auto plan = load("tinyllama_1_1b_ddp.plan");
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->model.preset, "tinyllama_1_1b");
  EXPECT_EQ(plan->cluster.device.name, "a6000_ada");
  EXPECT_EQ(plan->cluster.worldSize(), 4);
  EXPECT_EQ(plan->train.microBatch, 16);
  EXPECT_EQ(plan->train.gradAccum, 2);
  EXPECT_EQ(plan->train.seqLen, 1024);
  EXPECT_EQ(plan->parallel.sharding, Sharding::NoShard);
  EXPECT_EQ(plan->parallel.meshReplicate, 4);
}

TEST_F(ExamplesTest, CodeLlamaFullShardOnFourAdaGPUs) {
  auto plan = load("codellama_34b_fsdp_offload.plan");
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->model.preset, "codellama_34b");
  EXPECT_EQ(plan->cluster.device.name, "a6000_ada");
  EXPECT_EQ(plan->cluster.worldSize(), 4);
  EXPECT_EQ(plan->train.microBatch, 4);
  EXPECT_EQ(plan->train.gradAccum, 4);
  EXPECT_EQ(plan->parallel.sharding, Sharding::FullShard);
  EXPECT_EQ(plan->parallel.optimizerStep, MemorySpace::Host);
}

// The published LoRA cases (issue 17): the same machines, adapters on every
// linear layer, the base frozen in the working type.
TEST_F(ExamplesTest, TinyLlamaLoraDDPOnFourAdaGPUs) {
  auto plan = load("tinyllama_1_1b_lora_ddp.plan");
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->model.preset, "tinyllama_1_1b");
  EXPECT_EQ(plan->cluster.device.name, "a6000_ada");
  EXPECT_EQ(plan->cluster.worldSize(), 4);
  EXPECT_EQ(plan->train.microBatch, 16);
  EXPECT_EQ(plan->train.gradAccum, 2);
  EXPECT_EQ(plan->train.seqLen, 1024);
  EXPECT_EQ(plan->parallel.sharding, Sharding::NoShard);
  ASSERT_TRUE(plan->lora);
  EXPECT_EQ(plan->lora->rank, 8);
  EXPECT_EQ(plan->lora->alpha, 16);
  EXPECT_EQ(plan->lora->targets.size(), 7u);
  EXPECT_EQ(plan->lora->base, BaseStorage::BF16);
}

TEST_F(ExamplesTest, CodeLlamaLoraFullShardOnFourAdaGPUs) {
  auto plan = load("codellama_34b_lora_fsdp.plan");
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->model.preset, "codellama_34b");
  EXPECT_EQ(plan->cluster.device.name, "a6000_ada");
  EXPECT_EQ(plan->cluster.worldSize(), 4);
  EXPECT_EQ(plan->train.microBatch, 4);
  EXPECT_EQ(plan->train.gradAccum, 4);
  EXPECT_EQ(plan->parallel.sharding, Sharding::FullShard);
  ASSERT_TRUE(plan->lora);
  EXPECT_EQ(plan->lora->targets, loraModules(ModelFamily::Llama));
  EXPECT_EQ(plan->lora->base, BaseStorage::BF16);
}

TEST_F(ExamplesTest, Llama3OffloadOnTwoRTX4090) {
  auto plan = load("llama3_8b_offload_rtx4090.plan");
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->model.preset, "llama3_8b");
  EXPECT_EQ(plan->cluster.device.name, "rtx4090");
  EXPECT_EQ(plan->cluster.worldSize(), 2);
  EXPECT_EQ(plan->parallel.sharding, Sharding::FullShard);
  EXPECT_EQ(plan->parallel.offload.params, MemorySpace::Host);
}

TEST_F(ExamplesTest, Llama31HybridShardOnTwoNodes) {
  auto plan = load("llama3_1_8b_hsdp.plan");
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->model.preset, "llama3_1_8b");
  EXPECT_EQ(plan->cluster.device.name, "a100_64g");
  EXPECT_EQ(plan->cluster.nodes, 2);
  EXPECT_EQ(plan->cluster.gpusPerNode, 4);
  EXPECT_EQ(plan->parallel.sharding, Sharding::HybridShard);
  EXPECT_EQ(plan->parallel.meshReplicate, 2);
  EXPECT_EQ(plan->parallel.meshShard, 4);
  EXPECT_DOUBLE_EQ(plan->cluster.interNodeBandwidth, 12.5e9);
}

TEST_F(ExamplesTest, ZeRO3SevenAndAHalfBillionOn64GPUs) {
  auto plan = load("zero3_7_5b_64gpu.plan");
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->model.preset, "");
  EXPECT_EQ(plan->model.layers, 32);
  EXPECT_EQ(plan->model.hidden, 4096);
  // 2 * 50304 * 4096 + 32 * (4 * 4096^2 + 3 * 4096 * 12544 + 2 * 4096) +
  // 4096.
  EXPECT_EQ(countParams(plan->model), 7'492'341'760);
  EXPECT_EQ(plan->cluster.worldSize(), 64);
  EXPECT_EQ(plan->parallel.sharding, Sharding::FullShard);
  EXPECT_EQ(plan->parallel.meshShard, 64);
}

TEST_F(ExamplesTest, TinyLlamaOnTheCPU) {
  auto plan = load("tiny_llama_cpu.plan");
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->model.preset, "llama_tiny");
  EXPECT_EQ(plan->cluster.device.name, "cpu");
  EXPECT_EQ(plan->cluster.worldSize(), 2);
  EXPECT_EQ(plan->train.precision, Precision::FP32);
  EXPECT_EQ(plan->parallel.sharding, Sharding::FullShard);
  EXPECT_EQ(plan->train.lrSchedule.kind, LRScheduleKind::Cosine);
  EXPECT_GT(plan->train.steps, plan->train.lrSchedule.warmupSteps);
}

// The plan examples/embed_builder.cpp builds is this file's.
TEST_F(ExamplesTest, EmbedExampleBuildsTheH100Plan) {
  auto file = load("llama3_8b_fsdp_h100.plan");
  ASSERT_TRUE(file);
  DiagEmitter diag(&context, nullptr, mlir::UnknownLoc::get(&context));
  auto built =
      PlanBuilder("llama3_8b_fsdp_h100")
          .model("llama3_8b")
          .cluster(ClusterBuilder()
                       .gpusPerNode(8)
                       .gpu("h100_sxm")
                       .hostMemory(TiB(2)))
          .train(
              TrainBuilder()
                  .optimizer(
                      adamw(3e-4).betas(0.9, 0.95).eps(1e-8).weightDecay(0.1))
                  .microBatch(1)
                  .seqLen(8192)
                  .precision(Precision::BF16Mixed)
                  .activationCheckpointing(Checkpointing::Full)
                  .gradClip(1.0)
                  .lrSchedule(linearSchedule(200, 0.0))
                  .steps(1000))
          .parallel(ParallelBuilder()
                        .sharding(Sharding::FullShard)
                        .wrap(WrapKind::TransformerBlock)
                        .backwardPrefetch(Prefetch::Pre))
          .build(diag);
  ASSERT_TRUE(built) << llvm::join(messages, "\n");
  EXPECT_EQ(built->name, file->name);
  EXPECT_EQ(built->model, file->model);
  EXPECT_EQ(built->cluster, file->cluster);
  EXPECT_EQ(built->train, file->train);
  EXPECT_EQ(built->parallel, file->parallel);
}

} // namespace
