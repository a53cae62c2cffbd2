//===- PlanSpec.h - The typed content of a training plan --------*- C++ -*-===//
//
// What a .plan file (or the C++ builder) says, after every key was checked:
// the model, the cluster, the training recipe and the parallelism. It holds no
// defaults of its own that the analyzer does not document in docs/language.md;
// `plan::importPlan` turns it into the `plan` dialect.
//
// Sizes are bytes, bandwidths bytes per second, compute TFLOP/s (1e12).
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_FRONTEND_PLANSPEC_H
#define PLAN_FRONTEND_PLANSPEC_H

#include "dialects/plan/PlanEnums.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/SMLoc.h"

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace plan {

// The enumerations (ModelFamily, Sharding, Precision, ...) are generated from
// dialects/plan/PlanEnums.td, so their .plan spelling, their IR spelling and
// `stringify` are one definition. `symbolizeSharding("full_shard")` parses a
// spelling; aliases (zero3, ddp, ...) are the analyzer's business.
#define PLAN_ENUM_STRINGIFY(Enum)                                              \
  inline llvm::StringRef stringify(Enum value) {                               \
    return stringify##Enum(value);                                             \
  }
PLAN_ENUM_STRINGIFY(ModelFamily)
PLAN_ENUM_STRINGIFY(BertHead)
PLAN_ENUM_STRINGIFY(WeightDecayScope)
PLAN_ENUM_STRINGIFY(OptimizerKind)
PLAN_ENUM_STRINGIFY(Precision)
PLAN_ENUM_STRINGIFY(DType)
PLAN_ENUM_STRINGIFY(LossScaleKind)
PLAN_ENUM_STRINGIFY(Checkpointing)
PLAN_ENUM_STRINGIFY(LRScheduleKind)
PLAN_ENUM_STRINGIFY(Sharding)
PLAN_ENUM_STRINGIFY(MemorySpace)
PLAN_ENUM_STRINGIFY(WrapKind)
PLAN_ENUM_STRINGIFY(Prefetch)
PLAN_ENUM_STRINGIFY(GradSync)
PLAN_ENUM_STRINGIFY(PipelineSchedule)
PLAN_ENUM_STRINGIFY(UnitKind)
PLAN_ENUM_STRINGIFY(BaseStorage)
#undef PLAN_ENUM_STRINGIFY

/// The largest count or dimension a plan takes (nodes, micro_batch, hidden,
/// ...): below 2^31, so that the products the planner forms from a few of
/// them (bytes of a tensor, of a micro-batch's activations) fit in 64 bits.
/// `planc import` checks a config's counts against it at their key.
constexpr int64_t kMaxCount = std::numeric_limits<int32_t>::max();

//===----------------------------------------------------------------------===//
// Model
//===----------------------------------------------------------------------===//

/// Llama 3.1 "llama3" RoPE frequency scaling (HF `rope_scaling`).
struct RopeScaling {
  double factor = 8.0;
  double lowFreqFactor = 1.0;
  double highFreqFactor = 4.0;
  int64_t originalMaxSeqLen = 8192;
  bool operator==(const RopeScaling &) const = default;
};

/// One model architecture with its sizes. Field names follow the .plan keys;
/// the HF config.json name is in the comment.
struct ModelSpec {
  ModelFamily family = ModelFamily::Llama;
  std::string preset; // the preset it came from, "" when fully explicit

  int64_t vocab = 0;          // vocab_size
  int64_t hidden = 0;         // hidden_size / n_embd
  int64_t intermediate = 0;   // intermediate_size / n_inner (gpt2: 4 * hidden)
  int64_t layers = 0;         // num_hidden_layers / n_layer
  int64_t heads = 0;          // num_attention_heads / n_head
  int64_t kvHeads = 0;        // num_key_value_heads (== heads without GQA)
  int64_t maxSeqLen = 0;      // max_position_embeddings / n_positions
  double ropeTheta = 10000.0; // rope_theta (llama)
  std::optional<RopeScaling> ropeScaling; // rope_scaling (llama 3.1+)
  double normEps = 1e-5;                  // rms_norm_eps / layer_norm_epsilon
  bool tieEmbeddings = false;             // tie_word_embeddings

  // BERT only.
  int64_t typeVocab = 2; // type_vocab_size
  BertHead bertHead = BertHead::MaskedLM;
  int64_t numLabels = 2; // for SequenceClassification

  int64_t headDim() const { return heads ? hidden / heads : 0; }
  bool operator==(const ModelSpec &) const = default;
};

/// LoRA (`model.lora`, HF PEFT's LoraConfig): the base weights are frozen
/// and each targeted linear layer of the blocks gains a trainable low-rank
/// update x * A^T * B^T * (alpha / rank).
struct LoraSpec {
  int64_t rank = 8;     // r
  double alpha = 8;     // lora_alpha
  double dropout = 0.0; // lora_dropout, on the adapter's input
  /// The block's linear layers the adapters go on, as PEFT's
  /// target_modules names them: "q_proj" matches every module whose name
  /// ends in it, "self_attn.q_proj" one. The analyzer fills in the family's
  /// PEFT default (llama: q_proj, v_proj) when the plan gives none.
  std::vector<std::string> targets;
  /// How the frozen base is stored (`model.base`); the working precision's
  /// type when not given.
  std::optional<BaseStorage> base;
  bool operator==(const LoraSpec &) const = default;
};

//===----------------------------------------------------------------------===//
// Cluster
//===----------------------------------------------------------------------===//

/// One accelerator kind. Bandwidths are per device and per direction.
struct DeviceSpec {
  std::string name; // table name ("h100_sxm"), "custom" when fully explicit
  int64_t memoryBytes = 0;
  double bf16Tflops = 0; // dense peak
  double fp16Tflops = 0;
  double fp32Tflops = 0;
  double hbmBandwidth = 0; // bytes/s
  double nvlinkBandwidth =
      0;                    // bytes/s per direction; 0 = no NVLink (PCIe peer)
  double pcieBandwidth = 0; // bytes/s per direction, host <-> device
  // Seconds per ring step between two ranks of a node (what a collective
  // costs besides its bytes: n-1 steps, 2(n-1) for an all-reduce).
  double linkLatency = kDefaultLinkLatency;
  bool operator==(const DeviceSpec &) const = default;
};

struct ClusterSpec {
  int64_t nodes = 1;
  int64_t gpusPerNode = 1;
  DeviceSpec device;
  int64_t hostMemoryBytes = 0;   // per node
  double interNodeBandwidth = 0; // bytes/s per device per direction (NIC share)
  double hostBandwidth = 0;      // host memory bytes/s per node
  int64_t hostCores = 0;         // CPU cores per node
  int64_t worldSize() const { return nodes * gpusPerNode; }
  bool operator==(const ClusterSpec &) const = default;
};

//===----------------------------------------------------------------------===//
// Training recipe
//===----------------------------------------------------------------------===//

struct OptimizerSpec {
  OptimizerKind kind = OptimizerKind::AdamW;
  double lr = 1e-4;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8; // adamw
  double weightDecay = 0.0;
  WeightDecayScope decay = WeightDecayScope::Matrices;
  double momentum = 0.0; // sgd
  bool operator==(const OptimizerSpec &) const = default;
};

struct LossScaleSpec {
  LossScaleKind kind = LossScaleKind::None;
  double initial = 65536.0;      // dynamic: initial scale; static: the scale
  int64_t growthInterval = 2000; // dynamic only
  bool operator==(const LossScaleSpec &) const = default;
};

struct LRScheduleSpec {
  LRScheduleKind kind = LRScheduleKind::Constant;
  int64_t warmupSteps = 0;
  double minLrRatio = 0.0; // final lr = lr * minLrRatio (cosine, linear)
  bool operator==(const LRScheduleSpec &) const = default;
};

/// The element type a precision recipe computes in (fp32 for fp32).
inline DType workingDtype(Precision precision) {
  return precision == Precision::BF16Mixed   ? DType::BF16
         : precision == Precision::FP16Mixed ? DType::F16
                                             : DType::F32;
}

struct TrainSpec {
  OptimizerSpec optimizer;
  int64_t microBatch = 1;
  int64_t seqLen = 0;
  int64_t gradAccum = 1;
  /// Sequences per optimizer step over all ranks; 0 when not given (then it
  /// is micro_batch x grad_accum x the data-parallel ranks).
  int64_t globalBatch = 0;
  Precision precision = Precision::FP32;
  LossScaleSpec lossScale;
  DType reduceDtype = DType::F32;
  /// What gradients are accumulated and kept in until the step: fp32 (a
  /// Megatron main_grad) or the working type of mixed precision. When not
  /// given: the layout of lower peak (chooseGradDtype), or the strategy's
  /// usual one (applyDerivedDefaults) for a plan nothing lowered both ways.
  DType gradDtype = DType::F32;
  Checkpointing activationCheckpointing = Checkpointing::None;
  std::optional<double> gradClip; // max global L2 norm
  LRScheduleSpec lrSchedule;
  int64_t steps = 0; // 0: as many as the run asks for
  int64_t seed = 0;
  bool operator==(const TrainSpec &) const = default;
};

//===----------------------------------------------------------------------===//
// Parallelism
//===----------------------------------------------------------------------===//

struct WrapSpec {
  WrapKind kind = WrapKind::TransformerBlock;
  int64_t minParams = 0; // MinParams only
  bool operator==(const WrapSpec &) const = default;
};

struct OffloadSpec {
  MemorySpace params = MemorySpace::Device;
  MemorySpace grads = MemorySpace::Device;
  MemorySpace optimizer = MemorySpace::Device;
  bool operator==(const OffloadSpec &) const = default;
};

struct ParallelSpec {
  Sharding sharding = Sharding::NoShard;
  /// The data-parallel mesh: `replicate` groups of `shard` ranks each;
  /// replicate * shard == the data-parallel ranks (world / tensor). Axis 0
  /// replicates, axis 1 shards.
  int64_t meshReplicate = 1;
  int64_t meshShard = 1;
  /// The tensor-parallel degree: ranks that split each block's weights
  /// between them (Megatron-style), the mesh's innermost axis.
  int64_t tensor = 1;
  /// Megatron sequence parallelism: the regions between the tensor-parallel
  /// ones (norms, dropout, residuals) split along the sequence.
  bool sequenceParallel = false;
  /// Pipeline parallelism: the stages the units are divided among (the
  /// mesh's outermost axis), the order of their micro-batches, the model
  /// chunks per stage (interleaved(v)) and each chunk's transformer blocks
  /// (empty: balanced by predicted compute time).
  int64_t pipeline = 1;
  PipelineSchedule schedule = PipelineSchedule::OneFOneB;
  int64_t virtualStages = 1;
  std::vector<int64_t> stages;
  WrapSpec wrap;
  OffloadSpec offload;
  MemorySpace optimizerStep = MemorySpace::Device;
  Prefetch backwardPrefetch = Prefetch::Pre;
  bool forwardPrefetch = false;
  int64_t maxInflightGathers = 2;
  int64_t bucketBytes = 25 * 1024 * 1024;
  GradSync gradSync = GradSync::EveryMicroBatch;
  /// The ranks that read different data out of `world`: the tensor groups
  /// and the pipelines split it.
  int64_t dataParallelRanks(int64_t world) const {
    int64_t split = tensor * pipeline;
    return split > 0 ? world / split : world;
  }
  /// The mesh `(replicate, shard)` of `sharding` over `dataParallel` ranks
  /// when the plan names none (docs/language.md, derived defaults).
  std::pair<int64_t, int64_t> defaultMesh(Sharding sharding,
                                          int64_t dataParallel,
                                          int64_t gpusPerNode) const {
    switch (sharding) {
    case Sharding::NoShard:
      return {dataParallel, 1};
    // ZeRO-1 shards the optimizer state over every data-parallel rank.
    case Sharding::Zero1:
    case Sharding::ShardGradOp:
    case Sharding::FullShard:
      return {1, dataParallel};
    // Shard within a node over NVLink, replicate across nodes. A tensor
    // group wider than a node leaves one data-parallel rank per node, which
    // the checker reports.
    case Sharding::HybridShard: {
      int64_t shard = gpusPerNode > 0 && tensor > 0 && gpusPerNode % tensor == 0
                          ? gpusPerNode / tensor
                          : 1;
      return {dataParallel / shard, shard};
    }
    }
    return {dataParallel, 1};
  }
  bool operator==(const ParallelSpec &) const = default;
};

//===----------------------------------------------------------------------===//
// The whole plan
//===----------------------------------------------------------------------===//

struct PlanSpec {
  std::string name;
  ModelSpec model;
  std::optional<LoraSpec> lora; // model.lora: fine-tune adapters only
  ClusterSpec cluster;
  TrainSpec train;
  ParallelSpec parallel;

  /// Every key the user gave (in the file, by `--set`, or through the C++
  /// builder), by dotted path ("parallel.offload.grads", "train.optimizer",
  /// "model", "cluster"), with where it was written: semantic checks and the
  /// importer point their diagnostics and IR locations here. The location is
  /// invalid for keys set through the builder. A key absent from this map
  /// took its default.
  llvm::StringMap<llvm::SMLoc> locs;

  /// The model `model = PRESET` or `model = hf("...")` gave, before the
  /// plan's own model keys; derived defaults follow it (a model with
  /// grouped-query attention keeps its kv_heads when `heads` is changed).
  std::optional<ModelSpec> baseModel;

  bool isGiven(llvm::StringRef path) const { return locs.count(path); }
  llvm::SMLoc locOf(llvm::StringRef path) const {
    auto it = locs.find(path);
    return it == locs.end() ? llvm::SMLoc() : it->second;
  }
};

} // namespace plan

#endif // PLAN_FRONTEND_PLANSPEC_H
