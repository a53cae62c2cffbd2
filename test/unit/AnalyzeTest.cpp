//===- AnalyzeTest.cpp - The .plan analyzer and whole-plan checks ---------===//
//
// Each test parses a .plan text, analyzes it and compares every diagnostic,
// with its line:col, against the exact expected list. Most tests start from
// `minimal`, a valid three-line plan, and append lines from line 4 on; dotted
// keys there merge with minimal's sections, as the language says they do.
//
//===----------------------------------------------------------------------===//

#include "frontend/Analyze.h"
#include "frontend/Diagnostics.h"
#include "frontend/Models.h"
#include "frontend/Parser.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

using namespace plan;
using llvm::StringRef;
using Diags = std::vector<std::string>;

namespace {

/// "line:col" in test.plan, "file:line:col" in another buffer (a `--set`).
std::string describeLocation(mlir::Location loc) {
  auto fileLoc = llvm::dyn_cast<mlir::FileLineColLoc>(loc);
  if (!fileLoc)
    return "?";
  std::string lineCol =
      (llvm::Twine(fileLoc.getLine()) + ":" + llvm::Twine(fileLoc.getColumn()))
          .str();
  StringRef file = fileLoc.getFilename().getValue();
  return file == "test.plan" ? lineCol : (file + ":" + lineCol).str();
}

StringRef severityName(mlir::DiagnosticSeverity severity) {
  switch (severity) {
  case mlir::DiagnosticSeverity::Error:
    return "error";
  case mlir::DiagnosticSeverity::Warning:
    return "warning";
  case mlir::DiagnosticSeverity::Note:
    return "note";
  case mlir::DiagnosticSeverity::Remark:
    return "remark";
  }
  return "?";
}

/// Records every diagnostic as "line:col: severity: message", each note
/// after its diagnostic; "?" stands for the fallback (unknown) location.
class DiagnosticLog {
public:
  explicit DiagnosticLog(mlir::MLIRContext &context)
      : handler(&context, [this](mlir::Diagnostic &d) {
          record(d);
          return mlir::success();
        }) {}
  Diags diags;

private:
  void record(mlir::Diagnostic &d) {
    diags.push_back(describeLocation(d.getLocation()) + ": " +
                    severityName(d.getSeverity()).str() + ": " + d.str());
    for (mlir::Diagnostic &note : d.getNotes())
      record(note);
  }
  mlir::ScopedDiagnosticHandler handler;
};

/// A .plan text parsed and analyzed as "test.plan", plan name "test".
class Analysis {
public:
  /// `settings` are `--set` overrides, applied in order.
  explicit Analysis(StringRef text, llvm::ArrayRef<StringRef> settings = {})
      : context(mlir::MLIRContext::Threading::DISABLED), log(context),
        diag(&context, &sourceMgr, mlir::UnknownLoc::get(&context)) {
    unsigned id = sourceMgr.AddNewSourceBuffer(
        llvm::MemoryBuffer::getMemBufferCopy(text, "test.plan"), llvm::SMLoc());
    syntax::Block root = parsePlanSyntax(sourceMgr, id, diag);
    for (StringRef setting : settings)
      applyOverride(root, setting, sourceMgr, diag);
    EXPECT_FALSE(diag.hadError()) << "syntax error in the test's text";
    plan = analyzePlan(root, "test", diag);
  }

  const Diags &diags() const { return log.diags; }
  /// "line:col" recorded in plan.locs for `path`; "" when not recorded.
  std::string at(StringRef path) const {
    if (!plan || !plan->isGiven(path))
      return "";
    return describeLocation(diag.loc(plan->locOf(path)));
  }

  mlir::MLIRContext context;
  DiagnosticLog log;
  llvm::SourceMgr sourceMgr;
  DiagEmitter diag;
  std::optional<PlanSpec> plan;
};

/// The smallest valid plan, on lines 1 to 3.
const std::string minimal =
    "model = llama_tiny\n"
    "cluster { gpus_per_node = 2  gpu = cpu  host_memory = 64GiB }\n"
    "train { optimizer = adamw(lr = 1e-3)  micro_batch = 1  seq_len = 128 }\n";

/// `minimal` with `lines` from line 4 on.
std::string withMinimal(StringRef lines) { return minimal + lines.str(); }

/// The diagnostics of a text that must not analyze.
Diags errorsOf(StringRef text) {
  Analysis a(text);
  EXPECT_FALSE(a.plan.has_value());
  return a.diags();
}

/// The diagnostics (warnings) of a text that must analyze.
Diags warningsOf(StringRef text) {
  Analysis a(text);
  EXPECT_TRUE(a.plan.has_value());
  return a.diags();
}

/// The plan of a text that must analyze without any diagnostic.
PlanSpec planOf(StringRef text) {
  Analysis a(text);
  EXPECT_EQ(a.diags(), Diags{});
  EXPECT_TRUE(a.plan.has_value());
  return a.plan.value_or(PlanSpec{});
}

/// Two plans, compared without their locations.
void expectSamePlan(const PlanSpec &a, const PlanSpec &b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.model, b.model);
  EXPECT_EQ(a.cluster, b.cluster);
  EXPECT_EQ(a.train, b.train);
  EXPECT_EQ(a.parallel, b.parallel);
}

constexpr int64_t GiB = int64_t(1) << 30;
constexpr int64_t MiB = int64_t(1) << 20;

//===----------------------------------------------------------------------===//
// Valid plans
//===----------------------------------------------------------------------===//

TEST(AnalyzeValid, DocumentationExample) {
  PlanSpec plan = planOf(
      R"(# Full fine-tune of Llama-3-8B on 2 x RTX 4090, parameters offloaded to CPU.
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
)");
  EXPECT_EQ(plan.name, "test");
  EXPECT_EQ(plan.model, lookupModelPreset("llama3_8b")->spec);
  EXPECT_EQ(plan.model.preset, "llama3_8b");
  EXPECT_EQ(plan.cluster.device, *lookupDevice("rtx4090"));
  EXPECT_EQ(plan.cluster.nodes, 1);
  EXPECT_EQ(plan.cluster.gpusPerNode, 2);
  EXPECT_EQ(plan.cluster.hostMemoryBytes, 128 * GiB);
  const TrainSpec &t = plan.train;
  EXPECT_EQ(t.optimizer.kind, OptimizerKind::AdamW);
  EXPECT_EQ(t.optimizer.lr, 2e-5);
  EXPECT_EQ(t.optimizer.beta1, 0.9);
  EXPECT_EQ(t.optimizer.beta2, 0.95);
  EXPECT_EQ(t.optimizer.eps, 1e-8);
  EXPECT_EQ(t.optimizer.weightDecay, 0.0);
  EXPECT_EQ(t.microBatch, 1);
  EXPECT_EQ(t.seqLen, 2048);
  EXPECT_EQ(t.gradAccum, 4);
  EXPECT_EQ(t.precision, Precision::BF16Mixed);
  EXPECT_EQ(t.lossScale.kind, LossScaleKind::None);
  EXPECT_EQ(t.activationCheckpointing, Checkpointing::Full);
  const ParallelSpec &p = plan.parallel;
  EXPECT_EQ(p.sharding, Sharding::FullShard);
  EXPECT_EQ(p.meshReplicate, 1);
  EXPECT_EQ(p.meshShard, 2);
  EXPECT_EQ(p.offload.params, MemorySpace::Host);
  EXPECT_EQ(p.offload.grads, MemorySpace::Device);
  EXPECT_EQ(p.offload.optimizer, MemorySpace::Device);
  EXPECT_EQ(p.optimizerStep, MemorySpace::Device);
}

TEST(AnalyzeValid, Defaults) {
  PlanSpec plan = planOf(minimal);
  EXPECT_EQ(plan.name, "test");
  EXPECT_EQ(plan.model, lookupModelPreset("llama_tiny")->spec);

  const ClusterSpec &c = plan.cluster;
  EXPECT_EQ(c.nodes, 1);
  EXPECT_EQ(c.device, *lookupDevice("cpu"));
  EXPECT_EQ(c.hostMemoryBytes, 64 * GiB);
  EXPECT_EQ(c.interNodeBandwidth, 25e9);

  const TrainSpec &t = plan.train;
  EXPECT_EQ(t.optimizer, (OptimizerSpec{.kind = OptimizerKind::AdamW,
                                        .lr = 1e-3,
                                        .beta1 = 0.9,
                                        .beta2 = 0.999,
                                        .eps = 1e-8,
                                        .weightDecay = 0.0,
                                        .momentum = 0.0}));
  EXPECT_EQ(t.gradAccum, 1);
  EXPECT_EQ(t.precision, Precision::FP32);
  EXPECT_EQ(t.lossScale, LossScaleSpec{});
  EXPECT_EQ(t.reduceDtype, DType::F32);
  EXPECT_EQ(t.activationCheckpointing, Checkpointing::None);
  EXPECT_FALSE(t.gradClip.has_value());
  EXPECT_EQ(t.lrSchedule, LRScheduleSpec{});
  EXPECT_EQ(t.steps, 0);
  EXPECT_EQ(t.seed, 0);

  const ParallelSpec &p = plan.parallel;
  EXPECT_EQ(p.sharding, Sharding::NoShard);
  EXPECT_EQ(p.meshReplicate, 2);
  EXPECT_EQ(p.meshShard, 1);
  EXPECT_EQ(p.wrap, WrapSpec{});
  EXPECT_EQ(p.offload, OffloadSpec{});
  EXPECT_EQ(p.optimizerStep, MemorySpace::Device);
  EXPECT_EQ(p.backwardPrefetch, Prefetch::Pre);
  EXPECT_FALSE(p.forwardPrefetch);
  EXPECT_EQ(p.maxInflightGathers, 2);
  EXPECT_EQ(p.bucketBytes, 25 * MiB);
  EXPECT_EQ(p.gradSync, GradSync::EveryMicroBatch);

  // Only what the file wrote is recorded.
  for (StringRef given :
       {"model", "cluster", "cluster.gpus_per_node", "cluster.gpu",
        "cluster.host_memory", "train", "train.optimizer", "train.optimizer.lr",
        "train.micro_batch", "train.seq_len"})
    EXPECT_TRUE(plan.isGiven(given)) << given.str();
  EXPECT_EQ(plan.locs.size(), 10u);
}

TEST(AnalyzeValid, EveryKey) {
  PlanSpec plan = planOf(R"(name = "every key"
model = llama {
  vocab = 1000  hidden = 128  intermediate = 344  layers = 3  heads = 4
  kv_heads = 2  max_seq_len = 512  rope_theta = 500000
  rope_scaling = llama3(factor = 8, low_freq_factor = 1, high_freq_factor = 4, original_max_seq_len = 256)
  norm_eps = 1e-6  tie_embeddings = true
}
cluster {
  nodes = 2  gpus_per_node = 4  host_memory = 1TiB  inter_node_bandwidth = 400Gb/s
  gpu = { memory = 24GiB  bf16_tflops = 165  fp16_tflops = 165.5  fp32_tflops = 82.6
          hbm_bandwidth = 1TB/s  nvlink_bandwidth = 0GB/s  pcie_bandwidth = 32GB/s
          link_latency = 8us }
}
train {
  optimizer = sgd(0.1, momentum = 0.9, weight_decay = 1e-4)
  micro_batch = 2  seq_len = 512  grad_accum = 8
  precision = fp16_mixed  loss_scale = dynamic(initial = 1024, growth_interval = 100)
  reduce_dtype = bf16  activation_checkpointing = none  grad_clip = 1
  lr_schedule = cosine(warmup = 100, min_lr_ratio = 0.1)  steps = 1_000  seed = 42
}
parallel {
  sharding = hybrid_shard  mesh = (2, 4)  wrap = min_params(1e6)
  offload { params = cpu  grads = cpu  optimizer = cpu }
  optimizer_step = cpu  backward_prefetch = post  forward_prefetch = true
  max_inflight_gathers = 3  grad_sync = last_micro_batch
}
)");
  EXPECT_EQ(plan.name, "every key");
  const ModelSpec &m = plan.model;
  EXPECT_EQ(m.family, ModelFamily::Llama);
  EXPECT_EQ(m.preset, "");
  EXPECT_EQ(m.vocab, 1000);
  EXPECT_EQ(m.hidden, 128);
  EXPECT_EQ(m.intermediate, 344);
  EXPECT_EQ(m.layers, 3);
  EXPECT_EQ(m.heads, 4);
  EXPECT_EQ(m.kvHeads, 2);
  EXPECT_EQ(m.maxSeqLen, 512);
  EXPECT_EQ(m.ropeTheta, 500000.0);
  EXPECT_EQ(m.ropeScaling, (RopeScaling{.factor = 8,
                                        .lowFreqFactor = 1,
                                        .highFreqFactor = 4,
                                        .originalMaxSeqLen = 256}));
  EXPECT_EQ(m.normEps, 1e-6);
  EXPECT_TRUE(m.tieEmbeddings);

  const ClusterSpec &c = plan.cluster;
  EXPECT_EQ(c.nodes, 2);
  EXPECT_EQ(c.gpusPerNode, 4);
  EXPECT_EQ(c.hostMemoryBytes, 1024 * GiB);
  EXPECT_EQ(c.interNodeBandwidth, 50e9);
  EXPECT_EQ(c.device, (DeviceSpec{.name = "custom",
                                  .memoryBytes = 24 * GiB,
                                  .bf16Tflops = 165,
                                  .fp16Tflops = 165.5,
                                  .fp32Tflops = 82.6,
                                  .hbmBandwidth = 1e12,
                                  .nvlinkBandwidth = 0,
                                  .pcieBandwidth = 32e9,
                                  .linkLatency = 8e-6}));

  const TrainSpec &t = plan.train;
  EXPECT_EQ(t.optimizer.kind, OptimizerKind::SGD);
  EXPECT_EQ(t.optimizer.lr, 0.1);
  EXPECT_EQ(t.optimizer.momentum, 0.9);
  EXPECT_EQ(t.optimizer.weightDecay, 1e-4);
  EXPECT_EQ(t.microBatch, 2);
  EXPECT_EQ(t.seqLen, 512);
  EXPECT_EQ(t.gradAccum, 8);
  EXPECT_EQ(t.precision, Precision::FP16Mixed);
  EXPECT_EQ(t.lossScale, (LossScaleSpec{.kind = LossScaleKind::Dynamic,
                                        .initial = 1024,
                                        .growthInterval = 100}));
  EXPECT_EQ(t.reduceDtype, DType::BF16);
  EXPECT_EQ(t.activationCheckpointing, Checkpointing::None);
  EXPECT_EQ(t.gradClip, 1.0);
  EXPECT_EQ(t.lrSchedule, (LRScheduleSpec{.kind = LRScheduleKind::Cosine,
                                          .warmupSteps = 100,
                                          .minLrRatio = 0.1}));
  EXPECT_EQ(t.steps, 1000);
  EXPECT_EQ(t.seed, 42);

  const ParallelSpec &p = plan.parallel;
  EXPECT_EQ(p.sharding, Sharding::HybridShard);
  EXPECT_EQ(p.meshReplicate, 2);
  EXPECT_EQ(p.meshShard, 4);
  EXPECT_EQ(p.wrap,
            (WrapSpec{.kind = WrapKind::MinParams, .minParams = 1000000}));
  EXPECT_EQ(p.offload, (OffloadSpec{.params = MemorySpace::Host,
                                    .grads = MemorySpace::Host,
                                    .optimizer = MemorySpace::Host}));
  EXPECT_EQ(p.optimizerStep, MemorySpace::Host);
  EXPECT_EQ(p.backwardPrefetch, Prefetch::Post);
  EXPECT_TRUE(p.forwardPrefetch);
  EXPECT_EQ(p.maxInflightGathers, 3);
  EXPECT_EQ(p.gradSync, GradSync::LastMicroBatch);
}

TEST(AnalyzeValid, ShardingAliases) {
  struct Case {
    const char *spelling;
    Sharding sharding;
  };
  for (Case c : {Case{"no_shard", Sharding::NoShard},
                 {"ddp", Sharding::NoShard},
                 {"zero0", Sharding::NoShard},
                 {"zero1", Sharding::Zero1},
                 {"shard_grad_op", Sharding::ShardGradOp},
                 {"zero2", Sharding::Zero1},
                 {"full_shard", Sharding::FullShard},
                 {"zero3", Sharding::FullShard}}) {
    SCOPED_TRACE(c.spelling);
    PlanSpec plan =
        planOf(withMinimal(std::string("parallel.sharding = ") + c.spelling));
    EXPECT_EQ(plan.parallel.sharding, c.sharding);
  }
}

TEST(AnalyzeValid, MemorySpaceAlias) {
  PlanSpec plan = planOf(withMinimal("parallel.offload.optimizer = gpu\n"
                                     "parallel.optimizer_step = gpu"));
  EXPECT_EQ(plan.parallel.offload.optimizer, MemorySpace::Device);
  EXPECT_EQ(plan.parallel.optimizerStep, MemorySpace::Device);
}

TEST(AnalyzeValid, DottedKeysMeanNestedBlocks) {
  PlanSpec blocks =
      planOf("model = llama_tiny { layers = 4 }\n"
             "cluster { gpus_per_node = 2  gpu = cpu { memory = 8GiB }  "
             "host_memory = 64GiB }\n"
             "train { optimizer = adamw(lr = 1e-3)  micro_batch = 1  "
             "seq_len = 128 }\n"
             "parallel { sharding = full_shard\n"
             "  offload { params = cpu  optimizer = cpu } }\n");
  PlanSpec dotted =
      planOf(withMinimal("model.layers = 4\n"
                         "cluster.gpu.memory = 8GiB\n"
                         "parallel.sharding = full_shard\n"
                         "parallel.offload.params = cpu\n"
                         "parallel { offload.optimizer = cpu }\n"));
  expectSamePlan(blocks, dotted);
  EXPECT_EQ(dotted.model.layers, 4);
  EXPECT_EQ(dotted.cluster.device.memoryBytes, 8 * GiB);
  EXPECT_EQ(dotted.parallel.offload.optimizer, MemorySpace::Host);
  EXPECT_TRUE(dotted.isGiven("model.layers"));
  EXPECT_TRUE(dotted.isGiven("parallel.offload.optimizer"));
}

TEST(AnalyzeValid, LocationsPointAtValues) {
  Analysis a(withMinimal("parallel.offload.params = cpu\n"
                         "parallel { sharding = full_shard }\n"));
  ASSERT_TRUE(a.plan.has_value()) << ::testing::PrintToString(a.diags());
  EXPECT_EQ(a.at("model"), "1:9");
  EXPECT_EQ(a.at("cluster"), "2:1");
  EXPECT_EQ(a.at("cluster.gpus_per_node"), "2:27");
  EXPECT_EQ(a.at("cluster.gpu"), "2:36");
  EXPECT_EQ(a.at("cluster.host_memory"), "2:55");
  EXPECT_EQ(a.at("train"), "3:1");
  EXPECT_EQ(a.at("train.optimizer"), "3:21");
  EXPECT_EQ(a.at("train.optimizer.lr"), "3:32");
  EXPECT_EQ(a.at("parallel"), "4:1");
  EXPECT_EQ(a.at("parallel.offload"), "4:10");
  EXPECT_EQ(a.at("parallel.offload.params"), "4:27");
  EXPECT_EQ(a.at("parallel.sharding"), "5:23");
  EXPECT_EQ(a.at("parallel.mesh"), "");
}

/// A plan like `minimal` whose train section holds `trainItems` (line 3),
/// for tests that change minimal's own train keys.
std::string withTrain(StringRef trainItems, StringRef lines = "") {
  return "model = llama_tiny\n"
         "cluster { gpus_per_node = 2  gpu = cpu  host_memory = 64GiB }\n"
         "train { " +
         trainItems.str() + " }\n" + lines.str();
}

/// A plan like `minimal` whose cluster section holds `clusterItems` (line 2).
std::string withCluster(StringRef clusterItems, StringRef lines = "") {
  return "model = llama_tiny\n"
         "cluster { " +
         clusterItems.str() +
         " }\n"
         "train { optimizer = adamw(lr = 1e-3)  micro_batch = 1  seq_len = "
         "128 }\n" +
         lines.str();
}

/// A plan like `minimal` with `model = <model>` on line 1.
std::string withModel(StringRef model, StringRef lines = "") {
  return "model = " + model.str() + "\n" +
         minimal.substr(minimal.find('\n') + 1) + lines.str();
}

const char *const trainRest = "micro_batch = 1  seq_len = 128";

TEST(AnalyzeValid, CallForms) {
  auto optimizerOf = [](StringRef optimizer) {
    return planOf(
               withTrain(("optimizer = " + optimizer + "  " + trainRest).str()))
        .train.optimizer;
  };
  EXPECT_EQ(optimizerOf("adamw(3e-4)"),
            (OptimizerSpec{.kind = OptimizerKind::AdamW, .lr = 3e-4}));
  EXPECT_EQ(optimizerOf("adamw(lr = 1e-4, betas = (0.8, 0.9), eps = 1e-6, "
                        "weight_decay = 0.1)"),
            (OptimizerSpec{.kind = OptimizerKind::AdamW,
                           .lr = 1e-4,
                           .beta1 = 0.8,
                           .beta2 = 0.9,
                           .eps = 1e-6,
                           .weightDecay = 0.1}));
  EXPECT_EQ(optimizerOf("sgd(0.1)"),
            (OptimizerSpec{.kind = OptimizerKind::SGD, .lr = 0.1}));
  EXPECT_EQ(
      optimizerOf("sgd(lr = 1, momentum = 0.9)"),
      (OptimizerSpec{.kind = OptimizerKind::SGD, .lr = 1, .momentum = 0.9}));

  auto lossScaleOf = [](StringRef scale) {
    return planOf(withMinimal(("train.precision = fp16_mixed\n"
                               "train.loss_scale = " +
                               scale + "\n")
                                  .str()))
        .train.lossScale;
  };
  EXPECT_EQ(lossScaleOf("dynamic"),
            (LossScaleSpec{.kind = LossScaleKind::Dynamic,
                           .initial = 65536,
                           .growthInterval = 2000}));
  EXPECT_EQ(lossScaleOf("dynamic(initial = 1024)"),
            (LossScaleSpec{.kind = LossScaleKind::Dynamic,
                           .initial = 1024,
                           .growthInterval = 2000}));
  EXPECT_EQ(lossScaleOf("static(1024)"),
            (LossScaleSpec{.kind = LossScaleKind::Static, .initial = 1024}));
  EXPECT_EQ(lossScaleOf("static(scale = 512)"),
            (LossScaleSpec{.kind = LossScaleKind::Static, .initial = 512}));

  auto scheduleOf = [](StringRef schedule) {
    return planOf(withMinimal(("train.lr_schedule = " + schedule).str()))
        .train.lrSchedule;
  };
  EXPECT_EQ(scheduleOf("constant"), LRScheduleSpec{});
  EXPECT_EQ(scheduleOf("constant(warmup = 10)"),
            (LRScheduleSpec{.warmupSteps = 10}));
  EXPECT_EQ(scheduleOf("cosine"),
            (LRScheduleSpec{.kind = LRScheduleKind::Cosine}));
  EXPECT_EQ(scheduleOf("linear(warmup = 5, min_lr_ratio = 0.5)"),
            (LRScheduleSpec{.kind = LRScheduleKind::Linear,
                            .warmupSteps = 5,
                            .minLrRatio = 0.5}));

  auto wrapOf = [](StringRef wrap) {
    return planOf(
               withMinimal(
                   ("parallel.sharding = full_shard\nparallel.wrap = " + wrap)
                       .str()))
        .parallel.wrap;
  };
  EXPECT_EQ(wrapOf("transformer_block"), WrapSpec{});
  EXPECT_EQ(wrapOf("whole_model"), WrapSpec{.kind = WrapKind::WholeModel});
  EXPECT_EQ(wrapOf("min_params(1e8)"),
            (WrapSpec{.kind = WrapKind::MinParams, .minParams = 100000000}));
  EXPECT_EQ(wrapOf("min_params(n = 5_000)"),
            (WrapSpec{.kind = WrapKind::MinParams, .minParams = 5000}));

  auto clipOf = [](StringRef clip) {
    return planOf(withMinimal(("train.grad_clip = " + clip).str()))
        .train.gradClip;
  };
  EXPECT_EQ(clipOf("1.0"), 1.0);
  EXPECT_EQ(clipOf("2"), 2.0);
  EXPECT_EQ(clipOf("none"), std::nullopt);

  EXPECT_EQ(planOf(withModel("llama_tiny { rope_scaling = llama3 }"))
                .model.ropeScaling,
            RopeScaling{});
  EXPECT_EQ(planOf(withModel("llama3_1_8b { rope_scaling = none }"))
                .model.ropeScaling,
            std::nullopt);
}

TEST(AnalyzeValid, Units) {
  struct Size {
    const char *text;
    int64_t bytes;
  };
  for (Size c : {Size{"64GiB", 64 * GiB},
                 {"1.5GiB", 3 * GiB / 2},
                 {"512MB", 512'000'000},
                 {"2TB", 2'000'000'000'000},
                 {"1TiB", 1024 * GiB},
                 {"64KiB", 64 * 1024},
                 {"1_000B", 1000},
                 {"3KB", 3000}}) {
    SCOPED_TRACE(c.text);
    EXPECT_EQ(planOf(withCluster(std::string("gpus_per_node = 2  gpu = cpu  "
                                             "host_memory = ") +
                                 c.text))
                  .cluster.hostMemoryBytes,
              c.bytes);
  }
  struct Bandwidth {
    const char *text;
    double bytesPerSecond;
  };
  for (Bandwidth c : {Bandwidth{"400Gb/s", 50e9},
                      {"3.35TB/s", 3.35e12},
                      {"25GB/s", 25e9},
                      {"10GiB/s", 10.0 * GiB},
                      {"100Mb/s", 12.5e6},
                      {"1Tb/s", 125e9},
                      {"800MB/s", 800e6}}) {
    SCOPED_TRACE(c.text);
    EXPECT_EQ(
        planOf(withMinimal(std::string("cluster.nodes = 2\n"
                                       "cluster.inter_node_bandwidth = ") +
                           c.text))
            .cluster.interNodeBandwidth,
        c.bytesPerSecond);
  }
}

TEST(AnalyzeValid, NameFromTheFile) {
  EXPECT_EQ(planOf(withMinimal("name = \"llama tiny on cpu\"")).name,
            "llama tiny on cpu");
}

//===----------------------------------------------------------------------===//
// Derived defaults
//===----------------------------------------------------------------------===//

// The data-parallel mesh is of world / tensor ranks; hybrid_shard shards
// the ranks of a node that are not in one tensor group.
TEST(AnalyzeDerived, MeshFollowsShardingClusterAndTensor) {
  struct Case {
    const char *sharding;
    int64_t tensor, replicate, shard;
  };
  for (Case c : {Case{"no_shard", 1, 8, 1},
                 {"zero1", 1, 1, 8},
                 {"shard_grad_op", 1, 1, 8},
                 {"full_shard", 1, 1, 8},
                 {"hybrid_shard", 1, 2, 4},
                 {"no_shard", 2, 4, 1},
                 {"zero1", 2, 1, 4},
                 {"full_shard", 2, 1, 4},
                 {"hybrid_shard", 2, 2, 2}}) {
    SCOPED_TRACE(std::string(c.sharding) + " tensor " +
                 std::to_string(c.tensor));
    PlanSpec plan = planOf(withCluster(
        "nodes = 2  gpus_per_node = 4  gpu = cpu  host_memory = 64GiB",
        "parallel { sharding = " + std::string(c.sharding) +
            "  tensor = " + std::to_string(c.tensor) + " }"));
    EXPECT_EQ(plan.parallel.tensor, c.tensor);
    EXPECT_EQ(plan.parallel.meshReplicate, c.replicate);
    EXPECT_EQ(plan.parallel.meshShard, c.shard);
  }
}

// The ranks of a tensor group read the same micro-batches: 32 sequences in
// micro-batches of 1 on 8 ranks in tensor groups of 2 take 8 of them.
TEST(AnalyzeDerived, GlobalBatchCountsDataParallelRanks) {
  PlanSpec plan = planOf(withCluster(
      "nodes = 2  gpus_per_node = 4  gpu = cpu  host_memory = 64GiB",
      "parallel { tensor = 2  sharding = full_shard }\n"
      "train.global_batch = 32"));
  EXPECT_EQ(plan.train.gradAccum, 8);
}

TEST(AnalyzeDerived, GivenMeshIsKept) {
  PlanSpec plan = planOf(withCluster(
      "nodes = 2  gpus_per_node = 4  gpu = cpu  host_memory = 64GiB",
      "parallel { sharding = zero1  mesh = (2, 4) }"));
  EXPECT_EQ(plan.parallel.meshReplicate, 2);
  EXPECT_EQ(plan.parallel.meshShard, 4);
}

TEST(AnalyzeDerived, LossScaleFollowsPrecision) {
  EXPECT_EQ(planOf(withMinimal("train.precision = fp16_mixed")).train.lossScale,
            (LossScaleSpec{.kind = LossScaleKind::Dynamic,
                           .initial = 65536,
                           .growthInterval = 2000}));
  EXPECT_EQ(planOf(withMinimal("train.precision = bf16_mixed")).train.lossScale,
            LossScaleSpec{});
}

TEST(AnalyzeDerived, OptimizerStepFollowsOptimizerOffload) {
  EXPECT_EQ(planOf(withMinimal("parallel.offload.optimizer = cpu"))
                .parallel.optimizerStep,
            MemorySpace::Host);
  EXPECT_EQ(planOf(withMinimal("parallel.sharding = full_shard\n"
                               "parallel.offload.params = cpu"))
                .parallel.optimizerStep,
            MemorySpace::Device);
}

TEST(AnalyzeDerived, ModelSizesFollowOverrides) {
  // GPT-2's n_inner is null: 4 x hidden, also after overriding hidden.
  ModelSpec gpt2 = planOf(withModel("gpt2 { hidden = 128  heads = 4 }")).model;
  EXPECT_EQ(gpt2.intermediate, 512);
  EXPECT_EQ(gpt2.kvHeads, 4);
  EXPECT_TRUE(gpt2.tieEmbeddings);
  EXPECT_EQ(
      planOf(withModel("gpt2 { intermediate = 1000 }")).model.intermediate,
      1000);
  // A GQA preset keeps its kv_heads; a preset without GQA follows heads.
  EXPECT_EQ(planOf(withModel("llama3_8b { heads = 16 }")).model.kvHeads, 8);
  EXPECT_EQ(planOf(withModel("llama2_7b { heads = 16 }")).model.kvHeads, 16);
  // A family block without kv_heads has no GQA.
  ModelSpec llama = planOf(withModel("llama { vocab = 512  hidden = 64  "
                                     "intermediate = 128  layers = 2  "
                                     "heads = 4  max_seq_len = 256 }"))
                        .model;
  EXPECT_EQ(llama.kvHeads, 4);
  EXPECT_EQ(llama.preset, "");
  EXPECT_EQ(llama.ropeTheta, 10000.0);
  EXPECT_EQ(llama.normEps, 1e-5);
  EXPECT_FALSE(llama.tieEmbeddings);
  ModelSpec bert = planOf(withModel("bert { vocab = 512  hidden = 64  "
                                    "intermediate = 128  layers = 2  "
                                    "heads = 4  max_seq_len = 256 }"))
                       .model;
  EXPECT_EQ(bert.family, ModelFamily::Bert);
  EXPECT_EQ(bert.normEps, 1e-12);
  EXPECT_EQ(bert.kvHeads, 4);
  EXPECT_EQ(bert.typeVocab, 2);
  EXPECT_EQ(bert.bertHead, BertHead::MaskedLM);
  EXPECT_EQ(bert.numLabels, 2);
  EXPECT_TRUE(bert.tieEmbeddings);
}

TEST(AnalyzeDerived, OnlyKeysNotGiven) {
  PlanSpec plan;
  plan.cluster.nodes = 2;
  plan.cluster.gpusPerNode = 4;
  plan.parallel.sharding = Sharding::FullShard;
  plan.parallel.meshReplicate = 2;
  plan.parallel.meshShard = 4;
  plan.locs["parallel.mesh"] = llvm::SMLoc();
  plan.train.precision = Precision::FP16Mixed;
  plan.parallel.offload.optimizer = MemorySpace::Host;
  applyDerivedDefaults(plan);
  EXPECT_EQ(plan.parallel.meshReplicate, 2);
  EXPECT_EQ(plan.parallel.meshShard, 4);
  EXPECT_EQ(plan.train.lossScale.kind, LossScaleKind::Dynamic);
  EXPECT_EQ(plan.parallel.optimizerStep, MemorySpace::Host);
  EXPECT_EQ(plan.cluster.interNodeBandwidth, 25e9);
}

//===----------------------------------------------------------------------===//
// Presets and devices
//===----------------------------------------------------------------------===//

TEST(AnalyzeModel, EveryPreset) {
  for (const ModelPreset &preset : modelPresets()) {
    SCOPED_TRACE(preset.name.str());
    PlanSpec plan = planOf(withModel(preset.name));
    EXPECT_EQ(plan.model, preset.spec);
    EXPECT_EQ(plan.model.preset, preset.name);
  }
}

TEST(AnalyzeModel, FamilyBlockGivesEverySize) {
  EXPECT_EQ(
      errorsOf(withModel("llama { hidden = 64  heads = 4 }")),
      (Diags{"1:1: error: 'model' is missing required key 'vocab' (a llama "
             "model without a preset gives every size)",
             "1:1: error: 'model' is missing required key 'intermediate' (a "
             "llama model without a preset gives every size)",
             "1:1: error: 'model' is missing required key 'layers' (a llama "
             "model without a preset gives every size)",
             "1:1: error: 'model' is missing required key 'max_seq_len' (a "
             "llama model without a preset gives every size)"}));
}

TEST(AnalyzeModel, KeyOfAnotherFamily) {
  EXPECT_EQ(errorsOf(withModel("gpt2 { kv_heads = 4  head = masked_lm }")),
            (Diags{"1:16: error: unknown key 'kv_heads' in 'model'; it "
                   "applies to llama models, and this is a gpt2 model",
                   "1:30: error: unknown key 'head' in 'model'; it applies "
                   "to bert models, and this is a gpt2 model"}));
}

TEST(AnalyzeModel, UnknownPreset) {
  EXPECT_EQ(errorsOf(withModel("llama3_9b")),
            Diags{"1:9: error: unknown model 'llama3_9b'; did you mean "
                  "'llama3_8b'?"});
  EXPECT_EQ(errorsOf(withModel("gpt2_")),
            Diags{"1:9: error: unknown model 'gpt2_'; did you mean "
                  "'gpt2_medium', 'gpt2_large', 'gpt2_xl' or 'gpt2_tiny'?"});
  std::string presets;
  for (const ModelPreset &preset : modelPresets())
    presets += (presets.empty() ? "" : ", ") + preset.name.str();
  EXPECT_EQ(errorsOf(withModel("mistral_7b")),
            Diags{"1:9: error: unknown model 'mistral_7b'; expected a preset "
                  "(" +
                  presets + ") or a family (llama, gpt2, bert)"});
}

TEST(AnalyzeModel, ModelNeedsAPresetOrFamily) {
  EXPECT_EQ(errorsOf(withModel("{ layers = 2 }")),
            Diags{"1:9: error: 'model' expects a preset, a family (llama, "
                  "gpt2, bert) or hf(\"config.json\"), got a block"});
  EXPECT_EQ(
      errorsOf("cluster { gpus_per_node = 2  gpu = cpu  host_memory = 64GiB "
               "}\n"
               "train { optimizer = adamw(lr = 1e-3)  micro_batch = 1  "
               "seq_len = 128 }\n"
               "model.layers = 2\n"),
      Diags{"3:1: error: 'model' needs a preset or a family before its keys, "
            "e.g. model = llama3_8b or model = llama { ... }"});
}

TEST(AnalyzeDevice, TableOverridesAndCustom) {
  PlanSpec plan = planOf(withCluster(
      "gpus_per_node = 2  gpu = a100_80g { memory = 40GiB }  host_memory = "
      "1TiB"));
  DeviceSpec expected = *lookupDevice("a100_80g");
  expected.memoryBytes = 40 * GiB;
  EXPECT_EQ(plan.cluster.device, expected);
  EXPECT_TRUE(plan.isGiven("cluster.gpu.memory"));

  EXPECT_EQ(
      errorsOf(withCluster("gpus_per_node = 2  host_memory = 1TiB\n"
                           "  gpu = { memory = 24GiB  bf16_tflops = 165 }")),
      (Diags{"3:3: error: 'cluster.gpu' is missing required key "
             "'fp16_tflops' (a device not in the table gives every key)",
             "3:3: error: 'cluster.gpu' is missing required key "
             "'fp32_tflops' (a device not in the table gives every key)",
             "3:3: error: 'cluster.gpu' is missing required key "
             "'hbm_bandwidth' (a device not in the table gives every key)",
             "3:3: error: 'cluster.gpu' is missing required key "
             "'nvlink_bandwidth' (a device not in the table gives every key)",
             "3:3: error: 'cluster.gpu' is missing required key "
             "'pcie_bandwidth' (a device not in the table gives every key)"}));
}

// link_latency is a time: a number with s, ms, us or ns; optional even for a
// custom device (kDefaultLinkLatency); at most a second.
TEST(AnalyzeDevice, LinkLatencyIsATime) {
  auto latency = [](const std::string &value) {
    return planOf(withMinimal("cluster.gpu.link_latency = " + value))
        .cluster.device.linkLatency;
  };
  EXPECT_DOUBLE_EQ(latency("250us"), 250e-6);
  EXPECT_DOUBLE_EQ(latency("1.5ms"), 1.5e-3);
  EXPECT_DOUBLE_EQ(latency("800ns"), 800e-9);
  EXPECT_DOUBLE_EQ(latency("0s"), 0);
  EXPECT_EQ(errorsOf(withMinimal("cluster.gpu.link_latency = 5")),
            Diags{"4:29: error: 'cluster.gpu.link_latency' needs a time unit, "
                  "e.g. 5us"});
  EXPECT_EQ(errorsOf(withMinimal("cluster.gpu.link_latency = 5GB/s")),
            Diags{"4:29: error: 'cluster.gpu.link_latency' expects a time, got "
                  "a bandwidth (5GB/s)"});
  EXPECT_EQ(errorsOf(withMinimal("cluster.gpu.memory = 5us")),
            Diags{"4:23: error: 'cluster.gpu.memory' expects a size, got a "
                  "time (5us)"});
  EXPECT_EQ(errorsOf(withMinimal("cluster.gpu.link_latency = 2s")).size(), 1u);
  PlanSpec custom = planOf(withCluster(
      "gpus_per_node = 2  host_memory = 1TiB\n"
      "  gpu = { memory = 24GiB  bf16_tflops = 165  fp16_tflops = 165  "
      "fp32_tflops = 82  hbm_bandwidth = 1TB/s  nvlink_bandwidth = 0GB/s  "
      "pcie_bandwidth = 32GB/s }"));
  EXPECT_EQ(custom.cluster.device.linkLatency, kDefaultLinkLatency);
}

TEST(AnalyzeDevice, UnknownDevice) {
  EXPECT_EQ(errorsOf(withCluster(
                "gpus_per_node = 2  gpu = h100  host_memory = 1TiB")),
            Diags{"2:36: error: unknown device 'h100'; did you mean "
                  "'h100_sxm' or 'h100_pcie'?"});
  EXPECT_EQ(errorsOf(withCluster(
                "gpus_per_node = 2  gpu = RTX4090  host_memory = 1TiB")),
            Diags{"2:36: error: unknown device 'RTX4090'; did you mean "
                  "'rtx4090'?"});
  EXPECT_EQ(errorsOf(withCluster(
                "gpus_per_node = 2  gpu = mi300x  host_memory = 1TiB")),
            Diags{"2:36: error: unknown device 'mi300x'; expected one of: "
                  "h100_sxm, h100_pcie, h200, a100_80g, a100_40g, a100_64g, "
                  "rtx4090, a6000_ada, l40s, cpu"});
  EXPECT_EQ(errorsOf(withMinimal("cluster.gpu.tflops = 1")),
            Diags{"4:13: error: unknown key 'tflops' in 'cluster.gpu'; valid "
                  "keys are: memory, bf16_tflops, fp16_tflops, fp32_tflops, "
                  "hbm_bandwidth, nvlink_bandwidth, pcie_bandwidth, "
                  "link_latency"});
}

//===----------------------------------------------------------------------===//
// Keys: unknown, missing, duplicate
//===----------------------------------------------------------------------===//

TEST(AnalyzeKeys, UnknownKeySuggestsTheClosest) {
  // The typo is reported once: not again as a missing `optimizer`.
  EXPECT_EQ(
      errorsOf(withTrain(
          "optimiser = adamw(lr = 1e-3)  micro_batch = 1  seq_len = 128")),
      Diags{"3:9: error: unknown key 'optimiser' in 'train'; did you "
            "mean 'optimizer'?"});
  EXPECT_EQ(errorsOf(withMinimal("paralel.sharding = full_shard")),
            Diags{"4:1: error: unknown top-level key 'paralel'; did you mean "
                  "'parallel'?"});
  EXPECT_EQ(errorsOf(withMinimal("parallel.offload.gradients = cpu")),
            Diags{"4:18: error: unknown key 'gradients' in "
                  "'parallel.offload'; valid keys are: params, grads, "
                  "optimizer"});
}

TEST(AnalyzeKeys, UnknownKeyListsTheValidOnes) {
  EXPECT_EQ(
      errorsOf(withMinimal("train.colour = 1")),
      Diags{"4:7: error: unknown key 'colour' in 'train'; valid keys "
            "are: optimizer, micro_batch, seq_len, grad_accum, global_batch, "
            "precision, loss_scale, reduce_dtype, grad_dtype, "
            "activation_checkpointing, grad_clip, lr_schedule, steps, "
            "seed"});
  EXPECT_EQ(errorsOf(withMinimal("zzz = 1")),
            Diags{"4:1: error: unknown top-level key 'zzz'; valid keys are: "
                  "name, model, cluster, train, parallel"});
}

TEST(AnalyzeKeys, MissingRequiredKey) {
  EXPECT_EQ(
      errorsOf(withTrain("optimizer = adamw(lr = 1e-3)  micro_batch = 1")),
      Diags{"3:1: error: 'train' is missing required key 'seq_len'"});
  // A section given only through dotted keys is named at its first one.
  EXPECT_EQ(errorsOf("model = llama_tiny\n"
                     "train { optimizer = adamw(lr = 1e-3)  micro_batch = 1  "
                     "seq_len = 128 }\n"
                     "cluster.gpu = cpu\n"
                     "cluster.host_memory = 1TiB\n"),
            Diags{"3:1: error: 'cluster' is missing required key "
                  "'gpus_per_node'"});
}

TEST(AnalyzeKeys, MissingRequiredSection) {
  EXPECT_EQ(errorsOf("# a comment first\n"
                     "model = llama_tiny\n"
                     "train { optimizer = adamw(lr = 1e-3)  micro_batch = 1  "
                     "seq_len = 128 }\n"),
            Diags{"1:1: error: missing required section 'cluster'"});
  EXPECT_EQ(errorsOf(""),
            (Diags{"1:1: error: missing required section 'model'",
                   "1:1: error: missing required section 'cluster'",
                   "1:1: error: missing required section 'train'"}));
}

TEST(AnalyzeKeys, DuplicateKey) {
  EXPECT_EQ(errorsOf(withMinimal("train.seq_len = 64")),
            (Diags{"4:7: error: duplicate key 'seq_len' in 'train'",
                   "3:66: note: previous value is here"}));
  EXPECT_EQ(errorsOf(withMinimal("parallel.sharding = zero3\n"
                                 "parallel { sharding = zero2 }")),
            (Diags{"5:12: error: duplicate key 'sharding' in 'parallel'",
                   "4:21: note: previous value is here"}));
  EXPECT_EQ(errorsOf(withMinimal("model = gpt2")),
            (Diags{"4:1: error: duplicate key 'model'",
                   "1:9: note: previous value is here"}));
}

TEST(AnalyzeKeys, SectionsAndValuesInTheirPlace) {
  EXPECT_EQ(errorsOf(withMinimal("parallel = full_shard")),
            Diags{"4:12: error: 'parallel' is a section and expects a block "
                  "{ ... }, got 'full_shard'"});
  EXPECT_EQ(errorsOf(withMinimal("parallel.sharding = full_shard { x = 1 }")),
            Diags{"4:32: error: 'parallel.sharding' takes a value, not a "
                  "block"});
  EXPECT_EQ(errorsOf(withMinimal("train.grad_accum.x = 1")),
            Diags{"4:18: error: 'train.grad_accum' is a value, not a "
                  "section; it has no key 'x'"});
}

//===----------------------------------------------------------------------===//
// Values: types, units, ranges, names
//===----------------------------------------------------------------------===//

TEST(AnalyzeValues, WrongType) {
  EXPECT_EQ(errorsOf(withMinimal("train.grad_accum = \"4\"")),
            Diags{"4:20: error: 'train.grad_accum' expects an integer, got a "
                  "string"});
  EXPECT_EQ(errorsOf(withMinimal("train.grad_accum = 1.5")),
            Diags{"4:20: error: 'train.grad_accum' expects an integer, got "
                  "1.5"});
  EXPECT_EQ(errorsOf(withMinimal("cluster.nodes = true")),
            Diags{"4:17: error: 'cluster.nodes' expects an integer, got "
                  "'true'"});
  EXPECT_EQ(errorsOf(withMinimal("parallel.forward_prefetch = yes")),
            Diags{"4:29: error: 'parallel.forward_prefetch' expects true or "
                  "false, got 'yes'"});
  EXPECT_EQ(errorsOf(withMinimal("name = tiny")),
            Diags{"4:8: error: 'name' expects a string, got 'tiny'"});
  EXPECT_EQ(errorsOf(withMinimal("parallel.sharding = \"full_shard\"")),
            Diags{"4:21: error: 'parallel.sharding' expects one of no_shard, "
                  "zero1, shard_grad_op, full_shard, hybrid_shard, ddp, "
                  "zero0, zero2, zero3, fsdp, FULL_SHARD, SHARD_GRAD_OP, "
                  "NO_SHARD, HYBRID_SHARD, got a string"});
  EXPECT_EQ(errorsOf(withMinimal("train.grad_clip = full")),
            Diags{"4:19: error: 'train.grad_clip' expects a number or none, "
                  "got 'full'"});
}

TEST(AnalyzeValues, Units) {
  EXPECT_EQ(errorsOf(withMinimal("train.grad_accum = 4GiB")),
            Diags{"4:21: error: 'train.grad_accum' expects an integer "
                  "without a unit, got 4GiB"});
  EXPECT_EQ(errorsOf(withCluster("gpus_per_node = 2  gpu = cpu  host_memory = "
                                 "128")),
            Diags{"2:58: error: 'cluster.host_memory' needs a size unit, "
                  "e.g. 128GiB"});
  EXPECT_EQ(errorsOf(withMinimal("cluster.inter_node_bandwidth = 25")),
            Diags{"4:34: error: 'cluster.inter_node_bandwidth' needs a "
                  "bandwidth unit, e.g. 25GB/s"});
  EXPECT_EQ(errorsOf(withMinimal("parallel.bucket = 25GB/s")),
            Diags{"4:21: error: 'parallel.bucket' expects a size, got a "
                  "bandwidth (25GB/s)"});
  EXPECT_EQ(errorsOf(withMinimal("cluster.inter_node_bandwidth = 25GB")),
            Diags{"4:34: error: 'cluster.inter_node_bandwidth' expects a "
                  "bandwidth, got a size (25GB)"});
  EXPECT_EQ(errorsOf(withMinimal("parallel.bucket = 25MIB")),
            Diags{"4:21: error: unknown unit 'MIB' in 'parallel.bucket'; did "
                  "you mean 'MiB'?"});
  EXPECT_EQ(errorsOf(withMinimal("parallel.bucket = 25xyz")),
            Diags{"4:21: error: unknown unit 'xyz' in 'parallel.bucket'; "
                  "expected one of: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB"});
  EXPECT_EQ(errorsOf(withMinimal("model.norm_eps = 1e-5GiB")),
            Diags{"4:22: error: 'model.norm_eps' expects a number without a "
                  "unit, got 1e-5GiB"});
}

TEST(AnalyzeValues, OutOfRange) {
  EXPECT_EQ(errorsOf(withMinimal("train.grad_accum = 0")),
            Diags{"4:20: error: 'train.grad_accum' must be >= 1, got 0"});
  EXPECT_EQ(errorsOf(withMinimal("train.steps = -1")),
            Diags{"4:15: error: 'train.steps' must be >= 0, got -1"});
  EXPECT_EQ(errorsOf(withMinimal("train.grad_accum = 3_000_000_000")),
            Diags{"4:20: error: 'train.grad_accum' must be <= 2147483647, "
                  "got 3000000000"});
  // Bounds of what the compiler lowers, with the reason (a billion layers
  // used to abort in enumerateUnits; 2^31 micro-batches to lower for hours).
  EXPECT_EQ(errorsOf(withMinimal("model.layers = 1_000_000_000")),
            Diags{"4:16: error: 'model.layers' must be <= 1024, got "
                  "1000000000: each layer is a unit of the compiled step "
                  "program; the largest published models have fewer than "
                  "200"});
  EXPECT_EQ(
      errorsOf(withMinimal("model.layers = 1000\ntrain.grad_accum = 33")),
      (Diags{"5:20: error: 'train.grad_accum' = 33 with 1002 units makes a "
             "step program of 33066 unit-micro-batches, more than the 32768 "
             "a step may hold; accumulate fewer, larger micro-batches "
             "(train.micro_batch)",
             "4:16: note: the layers are set here"}));
  EXPECT_TRUE(Analysis(withMinimal("model.layers = 1000\ntrain.grad_accum = "
                                   "32"))
                  .plan.has_value());
  EXPECT_EQ(errorsOf(withMinimal("train.seed = 99999999999999999999")),
            Diags{"4:14: error: 'train.seed' is out of range: "
                  "99999999999999999999 does not fit in a 64-bit integer"});
  EXPECT_EQ(errorsOf(withMinimal("parallel.bucket = 1e30GiB")),
            Diags{"4:19: error: 'parallel.bucket' is out of range: 1e30GiB "
                  "is more bytes than fit in a 64-bit integer"});
  EXPECT_EQ(errorsOf(withMinimal("parallel.bucket = 0MiB")),
            Diags{"4:19: error: 'parallel.bucket' must be > 0, got 0B"});
  EXPECT_EQ(errorsOf(withMinimal("cluster.gpu.memory = 0GiB")),
            Diags{"4:22: error: 'cluster.gpu.memory' must be > 0, got 0B"});
  EXPECT_EQ(errorsOf(withMinimal("train.grad_clip = 0")),
            Diags{"4:19: error: 'train.grad_clip' must be > 0, got 0"});
  EXPECT_EQ(errorsOf(withMinimal("parallel.mesh = (0, 2)")),
            Diags{"4:17: error: 'parallel.mesh' dimensions must be in [1, "
                  "2147483647], got (0, 2)"});
  EXPECT_EQ(
      errorsOf(withTrain("optimizer = adamw(lr = -1, betas = (0.9, 1.0))  " +
                         std::string(trainRest))),
      (Diags{"3:32: error: 'train.optimizer.lr' must be > 0, got -1",
             "3:44: error: 'train.optimizer.betas' must be in [0, 1), got "
             "1"}));
  EXPECT_EQ(errorsOf(withMinimal("train.lr_schedule = cosine(min_lr_ratio = "
                                 "2)")),
            Diags{"4:43: error: 'train.lr_schedule.min_lr_ratio' must be in "
                  "[0, 1], got 2"});
  EXPECT_EQ(errorsOf(withModel("llama_tiny { rope_scaling = llama3(factor = "
                               "0.5, low_freq_factor = 4, high_freq_factor "
                               "= 2) }")),
            (Diags{"1:53: error: 'model.rope_scaling.factor' must be >= 1, "
                   "got 0.5"}));
}

TEST(AnalyzeValues, SeqLenWithinTheModel) {
  EXPECT_EQ(errorsOf(withTrain("optimizer = adamw(lr = 1e-3)  micro_batch = 1 "
                               " seq_len = 512")),
            (Diags{"3:66: error: 'train.seq_len' is 512, more than the "
                   "model's max_seq_len of 256: the model has no positions "
                   "past it; lower seq_len, or raise model.max_seq_len to "
                   "extend the context",
                   "1:9: note: max_seq_len 256 comes from preset "
                   "'llama_tiny'"}));
  EXPECT_EQ(errorsOf(withMinimal("model.max_seq_len = 100")),
            (Diags{"3:66: error: 'train.seq_len' is 128, more than the "
                   "model's max_seq_len of 100: the model has no positions "
                   "past it; lower seq_len, or raise model.max_seq_len to "
                   "extend the context",
                   "4:21: note: max_seq_len is set here"}));
}

TEST(AnalyzeValues, ModelShapes) {
  EXPECT_EQ(errorsOf(withMinimal("model.heads = 3")),
            Diags{"4:15: error: 'model.hidden' (64) is not divisible by "
                  "'model.heads' (3): each attention head gets hidden / heads "
                  "dimensions"});
  EXPECT_EQ(errorsOf(withMinimal("model.kv_heads = 3")),
            Diags{"4:18: error: 'model.heads' (4) is not divisible by "
                  "'model.kv_heads' (3): grouped-query attention shares each "
                  "key/value head among heads / kv_heads query heads"});
  EXPECT_EQ(errorsOf(withModel("llama_tiny { hidden = 36 }")),
            Diags{"1:31: error: a llama head has hidden / heads = 9 "
                  "dimensions, an odd number: RoPE rotates pairs of "
                  "dimensions"});
  EXPECT_EQ(errorsOf(withModel("llama_tiny { rope_scaling = llama3("
                               "low_freq_factor = 4, high_freq_factor = 2) }")),
            Diags{"1:84: error: 'model.rope_scaling' high_freq_factor (2) "
                  "must be greater than low_freq_factor (4)"});
}

// FSDP's and Accelerate's spellings of the strategies are accepted, and
// their settings that do not apply say what the plan does instead.
TEST(AnalyzeValues, FsdpAndAccelerateNames) {
  EXPECT_EQ(planOf(withMinimal("parallel.sharding = fsdp")).parallel.sharding,
            Sharding::FullShard);
  EXPECT_EQ(planOf(withMinimal("parallel.sharding = SHARD_GRAD_OP"))
                .parallel.sharding,
            Sharding::ShardGradOp);
  EXPECT_EQ(errorsOf(withMinimal("parallel.sync_module_states = true")),
            Diags{"4:10: error: unknown key 'sync_module_states' in "
                  "'parallel'; FSDP's sync_module_states does not apply: "
                  "every rank initialises its own shards from the same seed, "
                  "or loads them with plan-run --init, so there is nothing to "
                  "broadcast"});
  EXPECT_EQ(errorsOf(withMinimal("parallel.limit_all_gathers = true")),
            Diags{"4:10: error: unknown key 'limit_all_gathers' in "
                  "'parallel'; use max_inflight_gathers instead (FSDP's "
                  "limit_all_gathers = true is max_inflight_gathers = 2, the "
                  "default)"});
}

TEST(AnalyzeValues, UnknownNames) {
  EXPECT_EQ(errorsOf(withMinimal("parallel.sharding = fulll_shard")),
            Diags{"4:21: error: unknown sharding 'fulll_shard'; did you mean "
                  "'full_shard'?"});
  EXPECT_EQ(errorsOf(withMinimal("parallel.sharding = everything")),
            Diags{"4:21: error: unknown sharding 'everything'; expected one "
                  "of: no_shard, zero1, shard_grad_op, full_shard, "
                  "hybrid_shard, ddp, zero0, zero2, zero3, fsdp, "
                  "FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD"});
  EXPECT_EQ(errorsOf(withMinimal("train.precision = bf16")),
            Diags{"4:19: error: unknown precision 'bf16'; did you mean "
                  "'bf16_mixed'?"});
  EXPECT_EQ(errorsOf(withMinimal("parallel.offload.grads = host")),
            Diags{"4:26: error: unknown memory space 'host'; expected one "
                  "of: device, cpu, gpu"});
  EXPECT_EQ(errorsOf(withMinimal("parallel.wrap = transformer_blocks")),
            Diags{"4:17: error: unknown wrap policy 'transformer_blocks'; "
                  "did you mean 'transformer_block'?"});
  EXPECT_EQ(errorsOf(withMinimal("train.lr_schedule = cosine_annealing")),
            Diags{"4:21: error: unknown lr schedule 'cosine_annealing'; did "
                  "you mean 'cosine'?"});
}

TEST(AnalyzeValues, CallArguments) {
  auto optimizerErrors = [](StringRef optimizer) {
    return errorsOf(
        withTrain(("optimizer = " + optimizer + "  " + trainRest).str()));
  };
  EXPECT_EQ(optimizerErrors("adamw(lr = 1e-3, weight_decy = 0.1)"),
            Diags{"3:38: error: unknown argument 'weight_decy' to 'adamw'; "
                  "did you mean 'weight_decay'?"});
  EXPECT_EQ(optimizerErrors("adamw(lr = 1e-3, wd = 0.1)"),
            Diags{"3:38: error: unknown argument 'wd' to 'adamw'; 'adamw' "
                  "takes: lr, betas, eps, weight_decay, decay"});
  EXPECT_EQ(optimizerErrors("adamw(1e-3, lr = 1e-4)"),
            (Diags{"3:33: error: duplicate argument 'lr' to 'adamw'",
                   "3:27: note: previous value is here"}));
  EXPECT_EQ(optimizerErrors("adamw(1e-3, 0.9)"),
            Diags{"3:33: error: only the first argument of 'adamw' (lr) may "
                  "omit its name"});
  EXPECT_EQ(optimizerErrors("adamw(weight_decay = 0.1)"),
            Diags{"3:21: error: 'adamw' is missing required argument 'lr', "
                  "e.g. adamw(lr = 1e-4)"});
  EXPECT_EQ(optimizerErrors("sgd"),
            Diags{"3:21: error: 'sgd' is missing required argument 'lr', "
                  "e.g. sgd(lr = 0.1)"});
  EXPECT_EQ(optimizerErrors("adam(lr = 1e-3)"),
            Diags{"3:21: error: unknown optimizer 'adam'; did you mean "
                  "'adamw'?"});
  EXPECT_EQ(optimizerErrors("0.001"),
            Diags{"3:21: error: 'train.optimizer' expects one of adamw(...), "
                  "sgd(...), got 0.001"});
  EXPECT_EQ(optimizerErrors("adamw(lr = \"fast\")"),
            Diags{"3:32: error: 'train.optimizer.lr' expects a number, got a "
                  "string"});
  EXPECT_EQ(optimizerErrors("adamw(lr = 1e-3, betas = 0.9)"),
            Diags{"3:46: error: 'train.optimizer.betas' expects (beta1, "
                  "beta2), e.g. (0.9, 0.999), got 0.9"});
  EXPECT_EQ(errorsOf(withMinimal("train.lr_schedule = cosine(100)")),
            Diags{"4:28: error: the arguments of 'cosine' need names: "
                  "warmup, min_lr_ratio"});
  EXPECT_EQ(errorsOf(withMinimal("parallel.wrap = whole_model(2)")),
            Diags{"4:29: error: 'whole_model' takes no arguments"});
  EXPECT_EQ(errorsOf(withMinimal("train.loss_scale = static")),
            Diags{"4:20: error: 'static' is missing required argument "
                  "'scale', e.g. static(1024)"});
  EXPECT_EQ(errorsOf(withMinimal("parallel.mesh = (1, 2, 3)")),
            Diags{"4:17: error: 'parallel.mesh' expects two values "
                  "(replicate, shard), e.g. (2, 4), got 3"});
  EXPECT_EQ(errorsOf(withMinimal("parallel.mesh = (2, 1.5)")),
            Diags{"4:21: error: 'parallel.mesh' expects an integer, got 1.5"});
}

TEST(AnalyzeValues, EveryErrorInOneRun) {
  EXPECT_EQ(errorsOf("model = llama_tiny { layer = 2 }\n"
                     "cluster { gpus_per_node = two  gpu = cpu  host_memory = "
                     "64 }\n"
                     "train { optimizer = adamw(lr = 1e-3)  micro_batch = 0  "
                     "seq_len = 128  precision = fp8 }\n"
                     "parallel { sharding = fulll_shard  bucket = 1MiB  "
                     "bucket = 2MiB }\n"),
            (Diags{"1:22: error: unknown key 'layer' in 'model'; did you mean "
                   "'layers'?",
                   "2:27: error: 'cluster.gpus_per_node' expects an integer, "
                   "got 'two'",
                   "2:59: error: 'cluster.host_memory' needs a size unit, "
                   "e.g. 64GiB",
                   "3:83: error: unknown precision 'fp8'; expected one of: "
                   "fp32, bf16_mixed, fp16_mixed",
                   "4:23: error: unknown sharding 'fulll_shard'; did you mean "
                   "'full_shard'?",
                   "4:51: error: duplicate key 'bucket' in 'parallel'",
                   "4:45: note: previous value is here",
                   "3:53: error: 'train.micro_batch' must be >= 1, got 0"}));
}

//===----------------------------------------------------------------------===//
// Contradictions
//===----------------------------------------------------------------------===//

TEST(AnalyzeContradictions, GradientOffloadNeedsShardsOrACpuStep) {
  EXPECT_EQ(
      errorsOf(withMinimal("parallel.offload.grads = cpu")),
      Diags{"4:26: error: offloading gradients to the CPU needs them sharded "
            "(shard_grad_op, full_shard, hybrid_shard) or the optimizer step "
            "on the CPU (offload.optimizer = cpu moves it there): with "
            "no_shard the full gradient would cross PCIe only to come back "
            "for the step"});
  EXPECT_EQ(
      errorsOf(withMinimal("parallel { sharding = zero1  optimizer_step = "
                           "device\n"
                           "  offload.grads = cpu }")),
      (Diags{"5:19: error: offloading gradients to the CPU needs them sharded "
             "(shard_grad_op, full_shard, hybrid_shard) or the optimizer step "
             "on the CPU (offload.optimizer = cpu moves it there): with zero1 "
             "the full gradient would cross PCIe only to come back for the "
             "step",
             "4:23: note: sharding is zero1 here",
             "4:47: note: optimizer_step is device here"}));
  // Either way out is accepted.
  planOf(withMinimal("parallel { sharding = zero1  offload { grads = cpu  "
                     "optimizer = cpu } }"));
  planOf(withMinimal("parallel { sharding = shard_grad_op  offload.grads = "
                     "cpu }"));
}

TEST(AnalyzeContradictions, HybridShardNeedsReplicas) {
  EXPECT_EQ(errorsOf(withMinimal("parallel.sharding = hybrid_shard")),
            Diags{"4:21: error: hybrid_shard on one node is full_shard: it "
                  "replicates across nodes, and there is only one; use "
                  "sharding = full_shard, or give mesh = (replicate, shard) "
                  "with replicate > 1 to replicate within the node"});
  EXPECT_EQ(errorsOf(withMinimal("cluster.nodes = 1\n"
                                 "parallel.sharding = hybrid_shard")),
            (Diags{"5:21: error: hybrid_shard on one node is full_shard: it "
                   "replicates across nodes, and there is only one; use "
                   "sharding = full_shard, or give mesh = (replicate, shard) "
                   "with replicate > 1 to replicate within the node",
                   "4:17: note: nodes is 1 here"}));
  EXPECT_EQ(errorsOf(withMinimal("parallel { sharding = hybrid_shard  mesh = "
                                 "(1, 2) }")),
            (Diags{"4:44: error: hybrid_shard over mesh (1, 2) has one shard "
                   "group and nothing to replicate across: that is "
                   "full_shard; use sharding = full_shard, or a mesh with "
                   "replicate > 1",
                   "4:23: note: sharding is hybrid_shard here"}));
  EXPECT_EQ(errorsOf(withCluster("nodes = 4  gpus_per_node = 1  gpu = cpu  "
                                 "host_memory = 64GiB",
                                 "parallel.sharding = hybrid_shard")),
            (Diags{"4:21: error: hybrid_shard shards within a node, and with "
                   "gpus_per_node = 1 there is nothing to shard; use "
                   "full_shard to shard across the nodes, or give mesh = "
                   "(replicate, shard) with shard > 1",
                   "2:38: note: gpus_per_node is 1 here"}));
  // Replicating within one node is what an explicit mesh is for.
  planOf(withCluster("gpus_per_node = 8  gpu = cpu  host_memory = 64GiB",
                     "parallel { sharding = hybrid_shard  mesh = (2, 4) }"));
}

TEST(AnalyzeContradictions, LossScalingGoesWithFp16) {
  EXPECT_EQ(errorsOf(withMinimal("train.precision = fp16_mixed\n"
                                 "train.loss_scale = none")),
            (Diags{"5:20: error: fp16_mixed needs loss scaling: fp16 cannot "
                   "represent gradients below about 6e-8, so small ones "
                   "flush to zero; use loss_scale = dynamic (the default "
                   "with fp16_mixed) or static(N), or precision = bf16_mixed",
                   "4:19: note: precision is fp16_mixed here"}));
  EXPECT_EQ(errorsOf(withMinimal("train.loss_scale = dynamic")),
            Diags{"4:20: error: loss_scale = dynamic needs precision = "
                  "fp16_mixed: only fp16 gradients underflow (bf16 and fp32 "
                  "share fp32's exponent range); remove loss_scale, or use "
                  "precision = fp16_mixed"});
  EXPECT_EQ(errorsOf(withMinimal("train.precision = bf16_mixed\n"
                                 "train.loss_scale = static(1024)")),
            (Diags{"5:20: error: loss_scale = static needs precision = "
                   "fp16_mixed: only fp16 gradients underflow (bf16 and fp32 "
                   "share fp32's exponent range); remove loss_scale, or use "
                   "precision = fp16_mixed",
                   "4:19: note: precision is bf16_mixed here"}));
}

TEST(AnalyzeContradictions, MeshMatchesClusterAndSharding) {
  EXPECT_EQ(errorsOf(withMinimal("parallel.mesh = (2, 2)")),
            (Diags{"4:17: error: mesh (2, 2) has 4 ranks, but the cluster "
                   "has 2 (nodes 1 x gpus_per_node 2); replicate x shard "
                   "must equal nodes x gpus_per_node",
                   "2:27: note: the cluster's size is set here"}));
  EXPECT_EQ(errorsOf(withMinimal("parallel { sharding = ddp  mesh = (1, 2) }")),
            (Diags{"4:35: error: no_shard keeps a full replica on every rank, "
                   "so its mesh is (2, 1), got (1, 2); use mesh = (2, 1) or "
                   "leave mesh out, or a sharding that shards (zero1, "
                   "shard_grad_op, full_shard, hybrid_shard)",
                   "4:23: note: sharding is no_shard here"}));
  EXPECT_EQ(errorsOf(withMinimal("parallel { sharding = zero1  mesh = (2, 1) "
                                 "}")),
            (Diags{"4:37: error: zero1 over mesh (2, 1) shards over groups of "
                   "one rank, so nothing is sharded: that is no_shard; give a "
                   "mesh with shard > 1, or leave mesh out",
                   "4:23: note: sharding is zero1 here"}));
  EXPECT_EQ(errorsOf(withCluster("gpus_per_node = 4  gpu = cpu  host_memory = "
                                 "64GiB",
                                 "parallel { sharding = full_shard  mesh = "
                                 "(2, 2) }")),
            (Diags{"4:42: error: full_shard shards over every rank, so its "
                   "mesh is (1, 4), got (2, 2): replicating over 2 groups of "
                   "2 is hybrid_shard; use sharding = hybrid_shard",
                   "4:23: note: sharding is full_shard here"}));
  // Hybrid ZeRO-1 and ZeRO-2 keep their mesh.
  for (const char *sharding : {"zero1", "shard_grad_op"})
    planOf(withCluster("gpus_per_node = 4  gpu = cpu  host_memory = 64GiB",
                       std::string("parallel { sharding = ") + sharding +
                           "  mesh = (2, 2) }"));
}

TEST(AnalyzeContradictions, OffloadWhereTheStrategyAllowsIt) {
  EXPECT_EQ(errorsOf(withMinimal("parallel.offload.params = cpu")),
            Diags{"4:27: error: offloading parameters to the CPU needs them "
                  "sharded (shard_grad_op, full_shard, hybrid_shard), which "
                  "brings them to the device one wrapped unit at a time: "
                  "with no_shard every rank needs all of them on the device "
                  "at once; use sharding = full_shard"});
  EXPECT_EQ(errorsOf(withMinimal("parallel { sharding = zero1  "
                                 "offload.params = cpu }")),
            (Diags{"4:47: error: offloading parameters to the CPU needs them "
                   "sharded (shard_grad_op, full_shard, hybrid_shard), which "
                   "brings them to the device one wrapped unit at a time: "
                   "with zero1 every rank needs all of them on the device at "
                   "once; use sharding = full_shard",
                   "4:23: note: sharding is zero1 here"}));
  EXPECT_EQ(errorsOf(withMinimal("parallel { offload.optimizer = cpu\n"
                                 "  optimizer_step = device }")),
            (Diags{"5:20: error: optimizer_step = device with the optimizer "
                   "state on the CPU (offload.optimizer = cpu) would copy the "
                   "whole state to the device and back every step; leave "
                   "optimizer_step out (it follows offload.optimizer) or set "
                   "it to cpu",
                   "4:32: note: the optimizer state is offloaded here"}));
  EXPECT_EQ(errorsOf(withMinimal("parallel.optimizer_step = cpu")),
            Diags{"4:27: error: optimizer_step = cpu needs the optimizer "
                  "state on the CPU: with it on the device every step would "
                  "copy the whole state to the CPU and back; add "
                  "offload.optimizer = cpu (optimizer_step then defaults to "
                  "cpu)"});
}

TEST(AnalyzeContradictions, NotEchoedFromAWrongKey) {
  // optimizer_step follows offload.optimizer; with that misspelt, the
  // gradient offload is not also reported as lacking a CPU step.
  EXPECT_EQ(errorsOf(withMinimal("parallel.offload { grads = cpu  optimizer "
                                 "= cpuu }")),
            Diags{"4:45: error: unknown memory space 'cpuu'; did you mean "
                  "'cpu'?"});
  // A mesh derived from a misspelt sharding is not checked either.
  EXPECT_EQ(errorsOf(withCluster("nodes = 1  gpus_per_node = 2  gpu = cpu  "
                                 "host_memory = 64GiB",
                                 "parallel.sharding = hybrid_sharding")),
            Diags{"4:21: error: unknown sharding 'hybrid_sharding'; did you "
                  "mean 'hybrid_shard'?"});
}

//===----------------------------------------------------------------------===//
// Settings without effect
//===----------------------------------------------------------------------===//

TEST(AnalyzeNoEffect, Warnings) {
  EXPECT_EQ(warningsOf(withMinimal("parallel.grad_sync = last_micro_batch")),
            Diags{"4:22: warning: 'parallel.grad_sync' has no effect with "
                  "grad_accum = 1: each step has a single micro-batch"});
  EXPECT_EQ(warningsOf(withMinimal("parallel { sharding = full_shard  bucket "
                                   "= 50MiB }")),
            Diags{"4:44: warning: 'parallel.bucket' has no effect with "
                  "full_shard: sharded strategies reduce-scatter each wrapped "
                  "unit's gradients in one collective, so there is nothing "
                  "to bucket; bucket applies to no_shard"});
  EXPECT_EQ(warningsOf(withMinimal("parallel { sharding = zero1  bucket "
                                   "= 50MiB }")),
            Diags{"4:39: warning: 'parallel.bucket' has no effect with "
                  "zero1: each wrapped unit's gradient is reduce-scattered "
                  "on its own, because a reduce-scatter over a bucket of "
                  "several units would hand each rank a slice that crosses "
                  "unit boundaries; bucket applies to no_shard"});
  EXPECT_EQ(
      warningsOf(withMinimal("parallel { sharding = zero1\n"
                             "  forward_prefetch = true  backward_prefetch = "
                             "post  max_inflight_gathers = 4 }")),
      (Diags{"5:22: warning: 'parallel.forward_prefetch' has no effect with "
             "zero1: parameters are never gathered, so there is nothing to "
             "prefetch",
             "5:48: warning: 'parallel.backward_prefetch' has no effect with "
             "zero1: parameters are never gathered, so there is nothing to "
             "prefetch",
             "5:77: warning: 'parallel.max_inflight_gathers' has no effect "
             "with zero1: parameters are never gathered, so there is nothing "
             "to prefetch"}));
  EXPECT_EQ(warningsOf(withMinimal("parallel { sharding = shard_grad_op  "
                                   "backward_prefetch = none }")),
            Diags{"4:58: warning: 'parallel.backward_prefetch' has no effect "
                  "with shard_grad_op: parameters stay gathered from forward "
                  "to backward, so backward gathers nothing"});
  EXPECT_EQ(warningsOf(withMinimal("cluster.inter_node_bandwidth = 50GB/s")),
            Diags{"4:32: warning: 'cluster.inter_node_bandwidth' has no "
                  "effect with nodes = 1: no traffic leaves the node"});
  EXPECT_EQ(warningsOf(withModel("bert_base_cased { num_labels = 3 }")),
            Diags{"1:40: warning: 'model.num_labels' has no effect with "
                  "head = masked_lm: only sequence_classification has "
                  "labels"});
  EXPECT_EQ(warningsOf(withMinimal("train.steps = 100\n"
                                   "train.lr_schedule = cosine(warmup = 100)")),
            Diags{"5:37: warning: warmup of 100 steps is not shorter than "
                  "steps = 100: the learning rate schedule never gets past "
                  "warmup"});
  // Settings that do something are silent.
  planOf(withModel("bert_base_cased { head = sequence_classification  "
                   "num_labels = 3 }"));
  planOf(withMinimal("train.grad_accum = 4\n"
                     "parallel { grad_sync = last_micro_batch  bucket = "
                     "50MiB }"));
}

//===----------------------------------------------------------------------===//
// Command-line overrides and robustness
//===----------------------------------------------------------------------===//

TEST(AnalyzeOverrides, SameChecksAsTheFile) {
  Analysis a(minimal, {"model.layers=4", "parallel.sharding=zero3",
                       "train.optimizer=adamw(lr = 1e-5)"});
  ASSERT_TRUE(a.plan.has_value()) << ::testing::PrintToString(a.diags());
  EXPECT_EQ(a.plan->model.layers, 4);
  EXPECT_EQ(a.plan->parallel.sharding, Sharding::FullShard);
  EXPECT_EQ(a.plan->train.optimizer.lr, 1e-5);
  EXPECT_EQ(a.at("model.layers"), "<--set>:1:14");

  Analysis bad(minimal, {"parallel.sharding=fulll_shard", "train.grad_accum=0",
                         "train.optimiser=sgd(0.1)"});
  EXPECT_FALSE(bad.plan.has_value());
  EXPECT_EQ(bad.diags(),
            (Diags{"<--set #3>:1:7: error: unknown key 'optimiser' in "
                   "'train'; did you mean 'optimizer'?",
                   "<--set>:1:19: error: unknown sharding 'fulll_shard'; did "
                   "you mean 'full_shard'?",
                   "<--set #2>:1:18: error: 'train.grad_accum' must be >= 1, "
                   "got 0"}));
}

/// Bad input never crashes: every syntactically valid mutation of a plan
/// that uses every key is analyzed to a plan or to errors.
TEST(AnalyzeRobustness, MutatedPlans) {
  const std::string text = R"(model = llama { vocab = 1000 hidden = 128
  intermediate = 344 layers = 3 heads = 4 kv_heads = 2 max_seq_len = 512
  rope_scaling = llama3(factor = 8, original_max_seq_len = 256) }
cluster { nodes = 2 gpus_per_node = 4 host_memory = 1TiB
  gpu = a100_80g { memory = 40GiB nvlink_bandwidth = 0GB/s } }
train { optimizer = adamw(1e-4, betas = (0.9, 0.95)) micro_batch = 2
  seq_len = 512 grad_accum = 8 precision = fp16_mixed loss_scale = static(8)
  grad_clip = 1 lr_schedule = cosine(warmup = 10) steps = 100 }
parallel { sharding = hybrid_shard mesh = (2, 4) wrap = min_params(1e6)
  offload { params = cpu optimizer = cpu } bucket = 1MiB }
)";
  // Pieces that change a value's kind, sign, size, unit or name.
  const char *const pieces[] = {
      "0",         "-1",     "1.5",    "1e300", "99999999999999999999",
      "4GiB",      "1GB/s",  "cpu",    "none",  "x",
      "\"s\"",     "(1, 2)", "(0, 0)", "f()",   "{ }",
      "{ a = 1 }", "gpt2",   "bert",   "zero1", "llama"};
  std::mt19937 random(1234);
  int analyzed = 0, accepted = 0;
  for (int round = 0; round < 3000; ++round) {
    // Replace one word (a run of characters between blanks) by a piece.
    std::string mutated = text;
    size_t at = mutated.find_first_not_of(" \n", random() % mutated.size());
    if (at == std::string::npos)
      continue;
    at = mutated.find_last_of(" \n", at) + 1;
    size_t end = mutated.find_first_of(" \n", at);
    mutated.replace(at, end - at, pieces[random() % std::size(pieces)]);
    mlir::MLIRContext context(mlir::MLIRContext::Threading::DISABLED);
    DiagnosticLog log(context);
    llvm::SourceMgr sourceMgr;
    DiagEmitter diag(&context, &sourceMgr, mlir::UnknownLoc::get(&context));
    unsigned id = sourceMgr.AddNewSourceBuffer(
        llvm::MemoryBuffer::getMemBufferCopy(mutated, "test.plan"),
        llvm::SMLoc());
    syntax::Block root = parsePlanSyntax(sourceMgr, id, diag);
    if (diag.hadError())
      continue;
    std::optional<PlanSpec> plan = analyzePlan(root, "test", diag);
    EXPECT_EQ(plan.has_value(), !diag.hadError()) << mutated;
    ++analyzed;
    accepted += plan.has_value();
  }
  // Enough mutations get past the parser, and a few still make sense.
  EXPECT_GT(analyzed, 1000);
  EXPECT_GT(accepted, 10);
}

//===----------------------------------------------------------------------===//
// Plans built in C++
//===----------------------------------------------------------------------===//

TEST(AnalyzeChecks, WorkFromThePlanAlone) {
  mlir::MLIRContext context(mlir::MLIRContext::Threading::DISABLED);
  DiagnosticLog log(context);
  DiagEmitter diag(&context, nullptr, mlir::UnknownLoc::get(&context));

  PlanSpec plan;
  plan.model = lookupModelPreset("llama_tiny")->spec;
  plan.cluster.gpusPerNode = 2;
  plan.cluster.device = *lookupDevice("cpu");
  plan.cluster.hostMemoryBytes = 64 * GiB;
  plan.train.seqLen = 128;
  plan.parallel.sharding = Sharding::HybridShard;
  plan.locs["parallel.sharding"] = llvm::SMLoc();
  applyDerivedDefaults(plan);
  EXPECT_FALSE(checkPlan(plan, diag));
  EXPECT_EQ(log.diags,
            Diags{"?: error: hybrid_shard on one node is full_shard: it "
                  "replicates across nodes, and there is only one; use "
                  "sharding = full_shard, or give mesh = (replicate, shard) "
                  "with replicate > 1 to replicate within the node"});

  log.diags.clear();
  plan.parallel.sharding = Sharding::FullShard;
  plan.train.optimizer.lr = std::nan("");
  applyDerivedDefaults(plan);
  EXPECT_FALSE(checkPlan(plan, diag));
  EXPECT_EQ(log.diags,
            Diags{"?: error: 'train.optimizer.lr' must be > 0, got nan"});

  log.diags.clear();
  plan.train.optimizer.lr = 1e-3;
  EXPECT_TRUE(checkPlan(plan, diag));
  EXPECT_EQ(log.diags, Diags{});
}

} // namespace
