//===- BuilderTest.cpp - The C++ builder API against .plan text -----------===//
//
// Every builder plan here has a .plan twin; both must give the same PlanSpec
// (and the same set of explicitly given keys), or be rejected with the same
// messages.
//
//===----------------------------------------------------------------------===//

#include "frontend/Builder.h"

#include "frontend/Analyze.h"
#include "frontend/Models.h"
#include "frontend/Parser.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <string>
#include <vector>

using namespace plan;

namespace {

/// One MLIRContext whose diagnostics are collected as "severity: message".
class BuilderTest : public ::testing::Test {
protected:
  BuilderTest()
      : handler(&context, [this](mlir::Diagnostic &d) {
          const char *severity =
              d.getSeverity() == mlir::DiagnosticSeverity::Error ? "error"
                                                                 : "warning";
          messages.push_back(std::string(severity) + ": " + d.str());
          locations.push_back(d.getLocation());
          return mlir::success();
        }) {}

  std::optional<PlanSpec> analyzeText(llvm::StringRef text,
                                      llvm::StringRef name) {
    sourceMgr.AddNewSourceBuffer(
        llvm::MemoryBuffer::getMemBufferCopy(text, (name + ".plan").str()),
        llvm::SMLoc());
    DiagEmitter diag(&context, &sourceMgr, mlir::UnknownLoc::get(&context));
    syntax::Block root =
        parsePlanSyntax(sourceMgr, sourceMgr.getNumBuffers(), diag);
    if (diag.hadError())
      return std::nullopt;
    return analyzePlan(root, name, diag);
  }

  std::optional<PlanSpec> build(const PlanBuilder &builder) {
    DiagEmitter diag(&context, nullptr, builderLoc());
    return builder.build(diag);
  }

  mlir::Location builderLoc() {
    return mlir::NameLoc::get(mlir::StringAttr::get(&context, "builder"));
  }

  /// The messages so far, forgetting them.
  std::vector<std::string> takeMessages() {
    std::vector<std::string> taken = std::move(messages);
    messages.clear();
    locations.clear();
    return taken;
  }

  mlir::MLIRContext context;
  mlir::ScopedDiagnosticHandler handler;
  llvm::SourceMgr sourceMgr;
  std::vector<std::string> messages;
  std::vector<mlir::Location> locations;
};

std::vector<std::string> givenKeys(const PlanSpec &plan) {
  std::vector<std::string> keys;
  for (const auto &entry : plan.locs)
    keys.push_back(entry.getKey().str());
  llvm::sort(keys);
  return keys;
}

void expectSamePlan(const PlanSpec &built, const PlanSpec &analyzed) {
  EXPECT_EQ(built.name, analyzed.name);
  EXPECT_EQ(built.model, analyzed.model);
  EXPECT_EQ(built.cluster, analyzed.cluster);
  EXPECT_EQ(built.train, analyzed.train);
  EXPECT_EQ(built.parallel, analyzed.parallel);
  EXPECT_EQ(givenKeys(built), givenKeys(analyzed));
  for (const auto &entry : built.locs)
    EXPECT_FALSE(entry.getValue().isValid()) << entry.getKey().str();
}

TEST(BuilderUnits, SizesAndBandwidths) {
  EXPECT_EQ(GiB(24), int64_t(24) << 30);
  EXPECT_EQ(MiB(25), 25 * 1024 * 1024);
  EXPECT_EQ(TiB(1), int64_t(1) << 40);
  EXPECT_EQ(KiB(4), 4096);
  EXPECT_EQ(GB(80), int64_t(80'000'000'000));
  EXPECT_EQ(TB(2), int64_t(2'000'000'000'000));
  EXPECT_DOUBLE_EQ(GBps(25), 25e9);
  EXPECT_DOUBLE_EQ(TBps(3.35), 3.35e12);
  EXPECT_DOUBLE_EQ(Gbps(400), 50e9);
  EXPECT_DOUBLE_EQ(GiBps(1), 1073741824.0);
}

TEST_F(BuilderTest, FullShardWithParameterOffload) {
  auto analyzed = analyzeText(R"(
model = llama3_8b
cluster {
  nodes = 1
  gpus_per_node = 2
  gpu = rtx4090
  host_memory = 128GiB
}
train {
  optimizer = adamw(lr = 2e-5, betas = (0.9, 0.95), weight_decay = 0.0)
  micro_batch = 1
  seq_len = 2048
  grad_accum = 4
  precision = bf16_mixed
  activation_checkpointing = full
}
parallel {
  sharding = full_shard
  offload { params = cpu }
}
)",
                              "llama3_8b_offload");
  ASSERT_TRUE(analyzed) << llvm::join(takeMessages(), "\n");

  auto built = build(
      PlanBuilder("llama3_8b_offload")
          .model("llama3_8b")
          .cluster(ClusterBuilder()
                       .nodes(1)
                       .gpusPerNode(2)
                       .gpu("rtx4090")
                       .hostMemory(GiB(128)))
          .train(TrainBuilder()
                     .optimizer(adamw(2e-5).betas(0.9, 0.95).weightDecay(0.0))
                     .microBatch(1)
                     .seqLen(2048)
                     .gradAccum(4)
                     .precision(Precision::BF16Mixed)
                     .activationCheckpointing(Checkpointing::Full))
          .parallel(ParallelBuilder()
                        .sharding(Sharding::FullShard)
                        .offloadParams(MemorySpace::Host)));
  ASSERT_TRUE(built) << llvm::join(takeMessages(), "\n");
  expectSamePlan(*built, *analyzed);
  EXPECT_EQ(built->parallel.offload.params, MemorySpace::Host);
  EXPECT_EQ(built->parallel.meshShard, 2);
  EXPECT_EQ(*lookupDevice("rtx4090"), built->cluster.device);
}

TEST_F(BuilderTest, HybridShardOnTwoNodes) {
  auto analyzed = analyzeText(R"(
model = llama3_1_8b
cluster {
  nodes = 2
  gpus_per_node = 4
  gpu = a100_64g
  host_memory = 512GiB
  inter_node_bandwidth = 25GB/s
}
train {
  optimizer = adamw(lr = 3e-4, betas = (0.9, 0.95), eps = 1e-8, weight_decay = 0.1)
  micro_batch = 2
  seq_len = 4096
  grad_accum = 8
  precision = bf16_mixed
  activation_checkpointing = full
  grad_clip = 1.0
  lr_schedule = cosine(warmup = 100, min_lr_ratio = 0.1)
  steps = 1000
  seed = 1234
}
parallel {
  sharding = hybrid_shard
  backward_prefetch = pre
  forward_prefetch = true
  grad_sync = last_micro_batch
}
)",
                              "llama31_hsdp");
  ASSERT_TRUE(analyzed) << llvm::join(takeMessages(), "\n");

  auto built = build(
      PlanBuilder("llama31_hsdp")
          .model("llama3_1_8b")
          .cluster(ClusterBuilder()
                       .nodes(2)
                       .gpusPerNode(4)
                       .gpu("a100_64g")
                       .hostMemory(GiB(512))
                       .interNodeBandwidth(GBps(25)))
          .train(
              TrainBuilder()
                  .optimizer(
                      adamw(3e-4).betas(0.9, 0.95).eps(1e-8).weightDecay(0.1))
                  .microBatch(2)
                  .seqLen(4096)
                  .gradAccum(8)
                  .precision(Precision::BF16Mixed)
                  .activationCheckpointing(Checkpointing::Full)
                  .gradClip(1.0)
                  .lrSchedule(cosineSchedule(100, 0.1))
                  .steps(1000)
                  .seed(1234))
          .parallel(ParallelBuilder()
                        .sharding(Sharding::HybridShard)
                        .backwardPrefetch(Prefetch::Pre)
                        .forwardPrefetch(true)
                        .gradSync(GradSync::LastMicroBatch)));
  ASSERT_TRUE(built) << llvm::join(takeMessages(), "\n");
  expectSamePlan(*built, *analyzed);
  EXPECT_EQ(built->parallel.meshReplicate, 2);
  EXPECT_EQ(built->parallel.meshShard, 4);
}

// torchtitan's 2-D recipe: TP within each node, FSDP over the nodes.
TEST_F(BuilderTest, TensorParallelWithFullShard) {
  auto analyzed = analyzeText(R"(
model = llama3_8b
cluster { nodes = 2  gpus_per_node = 8  gpu = h100_sxm  host_memory = 2TiB }
train { optimizer = adamw(lr = 3e-4)  micro_batch = 1  seq_len = 8192  precision = bf16_mixed }
parallel {
  tensor = 8
  sequence_parallel = true
  sharding = full_shard
}
)",
                              "llama3_8b_tp");
  ASSERT_TRUE(analyzed) << llvm::join(takeMessages(), "\n");

  auto built = build(
      PlanBuilder("llama3_8b_tp")
          .model("llama3_8b")
          .cluster(ClusterBuilder()
                       .nodes(2)
                       .gpusPerNode(8)
                       .gpu("h100_sxm")
                       .hostMemory(TiB(2)))
          .train(TrainBuilder()
                     .optimizer(adamw(3e-4))
                     .microBatch(1)
                     .seqLen(8192)
                     .precision(Precision::BF16Mixed))
          .parallel(ParallelBuilder().tensor(8).sequenceParallel(true).sharding(
              Sharding::FullShard)));
  ASSERT_TRUE(built) << llvm::join(takeMessages(), "\n");
  expectSamePlan(*built, *analyzed);
  EXPECT_EQ(built->parallel.tensor, 8);
  EXPECT_TRUE(built->parallel.sequenceParallel);
  EXPECT_EQ(built->parallel.meshReplicate, 1);
  EXPECT_EQ(built->parallel.meshShard, 2);
}

TEST_F(BuilderTest, BertClassifierWithFP16AndSGD) {
  auto analyzed = analyzeText(R"(
model = bert_base_cased { head = sequence_classification  num_labels = 3 }
cluster { gpus_per_node = 1  gpu = l40s  host_memory = 64GiB }
train {
  optimizer = sgd(lr = 0.01, momentum = 0.9, weight_decay = 1e-4)
  micro_batch = 32
  seq_len = 128
  precision = fp16_mixed
  loss_scale = dynamic(initial = 1024, growth_interval = 1000)
  lr_schedule = linear(warmup = 10, min_lr_ratio = 0.0)
}
parallel { sharding = ddp  bucket = 50MiB }
)",
                              "bert_cls");
  ASSERT_TRUE(analyzed) << llvm::join(takeMessages(), "\n");

  auto built = build(
      PlanBuilder("bert_cls")
          .model(ModelBuilder::preset("bert_base_cased")
                     .head(BertHead::SequenceClassification)
                     .numLabels(3))
          .cluster(
              ClusterBuilder().gpusPerNode(1).gpu("l40s").hostMemory(GiB(64)))
          .train(TrainBuilder()
                     .optimizer(sgd(0.01).momentum(0.9).weightDecay(1e-4))
                     .microBatch(32)
                     .seqLen(128)
                     .precision(Precision::FP16Mixed)
                     .lossScale(dynamicLossScale(1024, 1000))
                     .lrSchedule(linearSchedule(10, 0.0)))
          .parallel(
              ParallelBuilder().sharding(Sharding::NoShard).bucket(MiB(50))));
  ASSERT_TRUE(built) << llvm::join(takeMessages(), "\n");
  expectSamePlan(*built, *analyzed);
  EXPECT_EQ(built->model.bertHead, BertHead::SequenceClassification);
  EXPECT_EQ(built->model.numLabels, 3);
}

TEST_F(BuilderTest, ExplicitModelAndDeviceOverrides) {
  auto analyzed = analyzeText(R"(
model = llama {
  vocab = 50304  hidden = 4096  intermediate = 11008  layers = 32
  heads = 32  max_seq_len = 2048  norm_eps = 1e-6  rope_theta = 10000
}
cluster {
  nodes = 8
  gpus_per_node = 8
  gpu = a100_40g { memory = 32GiB  nvlink_bandwidth = 150GB/s }
  host_memory = 1TiB
  inter_node_bandwidth = 100Gb/s
}
train {
  optimizer = adamw(lr = 1e-4)
  micro_batch = 4
  seq_len = 1024
  precision = fp16_mixed
  loss_scale = static(1024)
  reduce_dtype = fp16
}
parallel {
  sharding = zero3
  mesh = (1, 64)
  wrap = min_params(100_000_000)
  max_inflight_gathers = 3
  offload { optimizer = cpu }
}
)",
                              "zero3_7b");
  ASSERT_TRUE(analyzed) << llvm::join(takeMessages(), "\n");

  auto built = build(PlanBuilder("zero3_7b")
                         .model(ModelBuilder::family(ModelFamily::Llama)
                                    .vocab(50304)
                                    .hidden(4096)
                                    .intermediate(11008)
                                    .layers(32)
                                    .heads(32)
                                    .maxSeqLen(2048)
                                    .normEps(1e-6)
                                    .ropeTheta(10000))
                         .cluster(ClusterBuilder()
                                      .nodes(8)
                                      .gpusPerNode(8)
                                      .gpu(DeviceBuilder::named("a100_40g")
                                               .memory(GiB(32))
                                               .nvlinkBandwidth(GBps(150)))
                                      .hostMemory(TiB(1))
                                      .interNodeBandwidth(Gbps(100)))
                         .train(TrainBuilder()
                                    .optimizer(adamw(1e-4))
                                    .microBatch(4)
                                    .seqLen(1024)
                                    .precision(Precision::FP16Mixed)
                                    .lossScale(staticLossScale(1024))
                                    .reduceDtype(DType::F16))
                         .parallel(ParallelBuilder()
                                       .sharding(Sharding::FullShard)
                                       .mesh(1, 64)
                                       .wrapMinParams(100'000'000)
                                       .maxInflightGathers(3)
                                       .offloadOptimizer(MemorySpace::Host)));
  ASSERT_TRUE(built) << llvm::join(takeMessages(), "\n");
  expectSamePlan(*built, *analyzed);
  EXPECT_EQ(built->model.kvHeads, 32);
  EXPECT_EQ(built->cluster.device.memoryBytes, GiB(32));
  EXPECT_EQ(built->parallel.optimizerStep, MemorySpace::Host);
}

TEST_F(BuilderTest, SpecsRoundTrip) {
  // A ModelSpec / DeviceSpec taken from the tables and edited becomes the
  // preset or device with overrides.
  ModelSpec model = lookupModelPreset("llama_tiny")->spec;
  model.layers = 4;
  model.tieEmbeddings = true;
  DeviceSpec device = *lookupDevice("cpu");
  device.memoryBytes = GiB(8);

  auto analyzed = analyzeText(R"(
model = llama_tiny { layers = 4  tie_embeddings = true }
cluster { gpus_per_node = 2  gpu = cpu { memory = 8GiB }  host_memory = 16GiB }
train { optimizer = adamw(lr = 1e-3)  micro_batch = 2  seq_len = 64 }
)",
                              "tiny");
  ASSERT_TRUE(analyzed) << llvm::join(takeMessages(), "\n");

  auto built = build(
      PlanBuilder("tiny")
          .model(model)
          .cluster(
              ClusterBuilder().gpusPerNode(2).gpu(device).hostMemory(GiB(16)))
          .train(
              TrainBuilder().optimizer(adamw(1e-3)).microBatch(2).seqLen(64)));
  ASSERT_TRUE(built) << llvm::join(takeMessages(), "\n");
  expectSamePlan(*built, *analyzed);
  EXPECT_EQ(built->model.layers, 4);
  EXPECT_EQ(built->cluster.device, device);

  // The whole of a plan's model and device, given back to a builder, is the
  // same plan again.
  auto again = build(
      PlanBuilder("tiny")
          .model(built->model)
          .cluster(ClusterBuilder()
                       .gpusPerNode(2)
                       .gpu(built->cluster.device)
                       .hostMemory(GiB(16)))
          .train(
              TrainBuilder().optimizer(adamw(1e-3)).microBatch(2).seqLen(64)));
  ASSERT_TRUE(again) << llvm::join(takeMessages(), "\n");
  EXPECT_EQ(again->model, built->model);
  EXPECT_EQ(again->cluster, built->cluster);
}

TEST_F(BuilderTest, ContradictionIsRejectedWithTheFilesMessage) {
  auto analyzed = analyzeText(R"(
model = gpt2
cluster { gpus_per_node = 4  gpu = a6000_ada  host_memory = 256GiB }
train { optimizer = adamw(lr = 6e-4)  micro_batch = 8  seq_len = 1024 }
parallel {
  sharding = full_shard
  optimizer_step = device
  offload { optimizer = cpu }
}
)",
                              "contradiction");
  EXPECT_FALSE(analyzed);
  std::vector<std::string> fileMessages = takeMessages();
  ASSERT_FALSE(fileMessages.empty());

  auto built = build(
      PlanBuilder("contradiction")
          .model("gpt2")
          .cluster(ClusterBuilder()
                       .gpusPerNode(4)
                       .gpu("a6000_ada")
                       .hostMemory(GiB(256)))
          .train(
              TrainBuilder().optimizer(adamw(6e-4)).microBatch(8).seqLen(1024))
          .parallel(ParallelBuilder()
                        .sharding(Sharding::FullShard)
                        .optimizerStep(MemorySpace::Device)
                        .offloadOptimizer(MemorySpace::Host)));
  EXPECT_FALSE(built);
  EXPECT_EQ(messages, fileMessages);
  for (mlir::Location loc : locations)
    EXPECT_EQ(loc, builderLoc());
}

TEST_F(BuilderTest, OutOfRangeValueIsRejectedWithTheFilesMessage) {
  auto analyzed = analyzeText(R"(
model = gpt2_tiny
cluster { gpus_per_node = 1  gpu = cpu  host_memory = 16GiB }
train { optimizer = adamw(lr = 1e-3)  micro_batch = 0  seq_len = 128 }
)",
                              "bad_values");
  EXPECT_FALSE(analyzed);
  std::vector<std::string> fileMessages = takeMessages();
  ASSERT_FALSE(fileMessages.empty());

  auto built = build(
      PlanBuilder("bad_values")
          .model("gpt2_tiny")
          .cluster(
              ClusterBuilder().gpusPerNode(1).gpu("cpu").hostMemory(GiB(16)))
          .train(
              TrainBuilder().optimizer(adamw(1e-3)).microBatch(0).seqLen(128)));
  EXPECT_FALSE(built);
  EXPECT_EQ(messages, fileMessages);
}

TEST_F(BuilderTest, UnknownNamesAreErrorsAtTheFallbackLocation) {
  auto built = build(PlanBuilder("typos")
                         .model("llama3_9b")
                         .cluster(ClusterBuilder()
                                      .gpusPerNode(8)
                                      .gpu("h100_sxn")
                                      .hostMemory(GiB(1024)))
                         .train(TrainBuilder()
                                    .optimizer(adamw(1e-4))
                                    .microBatch(1)
                                    .seqLen(2048)));
  EXPECT_FALSE(built);
  ASSERT_GE(messages.size(), 2u);
  auto mentions = [&](llvm::StringRef word) {
    return llvm::any_of(messages, [&](const std::string &m) {
      return llvm::StringRef(m).contains(word);
    });
  };
  EXPECT_TRUE(mentions("llama3_9b"));
  EXPECT_TRUE(mentions("h100_sxn"));
  EXPECT_TRUE(mentions("h100_sxm")) << "a did-you-mean suggestion";
  for (mlir::Location loc : locations)
    EXPECT_EQ(loc, builderLoc());
}

TEST_F(BuilderTest, MissingSectionIsAnError) {
  auto built = build(PlanBuilder("no_train")
                         .model("gpt2")
                         .cluster(ClusterBuilder()
                                      .gpusPerNode(1)
                                      .gpu("h100_sxm")
                                      .hostMemory(GiB(64))));
  EXPECT_FALSE(built);
  EXPECT_FALSE(messages.empty());
}

TEST_F(BuilderTest, LastSettingWins) {
  auto built = build(
      PlanBuilder("twice")
          .model("gpt2")
          .model("gpt2_tiny")
          .cluster(ClusterBuilder()
                       .gpusPerNode(2)
                       .gpusPerNode(1)
                       .gpu("cpu")
                       .hostMemory(GiB(16)))
          .train(
              TrainBuilder().optimizer(adamw(1e-3)).microBatch(4).seqLen(128))
          .parallel(ParallelBuilder()
                        .sharding(Sharding::FullShard)
                        .sharding(Sharding::NoShard)));
  ASSERT_TRUE(built) << llvm::join(takeMessages(), "\n");
  EXPECT_EQ(built->model.preset, "gpt2_tiny");
  EXPECT_EQ(built->cluster.gpusPerNode, 1);
  EXPECT_EQ(built->parallel.sharding, Sharding::NoShard);
}

TEST_F(BuilderTest, OverridesApplyToBuilderSyntax) {
  PlanBuilder builder("overridden");
  builder.model("gpt2_tiny")
      .cluster(ClusterBuilder().gpusPerNode(2).gpu("cpu").hostMemory(GiB(16)))
      .train(TrainBuilder().optimizer(adamw(1e-3)).microBatch(4).seqLen(128))
      .parallel(ParallelBuilder().sharding(Sharding::FullShard));
  syntax::Block root = builder.toSyntax();
  DiagEmitter diag(&context, &sourceMgr, builderLoc());
  ASSERT_TRUE(
      applyOverride(root, "parallel.sharding=shard_grad_op", sourceMgr, diag))
      << llvm::join(takeMessages(), "\n");
  auto plan = analyzePlan(root, "overridden", diag);
  ASSERT_TRUE(plan) << llvm::join(takeMessages(), "\n");
  EXPECT_EQ(plan->parallel.sharding, Sharding::ShardGradOp);
}

} // namespace
