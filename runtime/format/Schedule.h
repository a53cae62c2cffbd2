//===- Schedule.h - The schedule file's contents, in memory ----*- C++ -*-===//
//
// What `planc -o FILE.sched` writes and `plan-run` executes: the lowered
// per-rank (SPMD) program of one training step, the model and the recipe it
// runs, as plain C++ data. It is the compiler/runtime boundary (like IREE's
// VM module): produced from the `sched` dialect by passes/ExportSchedule.cpp,
// serialised by ScheduleFile.h, consumed by the executor. Nothing here
// depends on MLIR, LLVM or LibTorch. docs/schedule-format.md describes every
// field; keep the two in step and bump kScheduleFormatVersion on any change
// a version-1 reader could misread.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_RUNTIME_FORMAT_SCHEDULE_H
#define PLAN_RUNTIME_FORMAT_SCHEDULE_H

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace plan::rt {

inline constexpr uint32_t kScheduleFormatVersion = 1;

// Enumerations mirror the IR's (dialects/sched/SchedDialect.td,
// dialects/plan/PlanEnums.td). In the file they are the IR's keywords
// ("device", "pinned_host", "bf16", "shard", ...), never numbers.
enum class Space : uint8_t { Device, Host, PinnedHost };
enum class ElementType : uint8_t { F32, BF16, F16 };
enum class GroupAxis : uint8_t { Shard, Replicate, World };
enum class ReduceKind : uint8_t { Sum, Avg, Max };
enum class BufferRole : uint8_t {
  Param,
  Master,
  Grad,
  ExpAvg,
  ExpAvgSq,
  Momentum,
  Gathered,
  UnshardedGrad,
  Activations,
  Bucket,
  Staging,
  Scalar
};

//===----------------------------------------------------------------------===//
// Model and recipe (from the plan dialect's attributes)
//===----------------------------------------------------------------------===//

struct RopeScaling { // Llama-3.1 "llama3" rope scaling; absent = none
  double factor = 0, lowFreqFactor = 0, highFreqFactor = 0;
  int64_t originalMaxSeqLen = 0;
};

struct ModelConfig {
  std::string family; // "llama" | "gpt2" | "bert"
  std::string preset; // "" when written out explicitly
  int64_t vocab = 0, hidden = 0, intermediate = 0, layers = 0, heads = 0,
          kvHeads = 0, maxSeqLen = 0;
  double ropeTheta = 10000.0;
  std::optional<RopeScaling> ropeScaling;
  double normEps = 1e-5;
  bool tieEmbeddings = false;
  int64_t typeVocab = 2; // bert
  std::string bertHead =
      "masked_lm";       // bert: "masked_lm" | "sequence_classification"
  int64_t numLabels = 2; // bert sequence classification
};

/// The alignment of every copy the runtime makes into a unit's saves buffer
/// (runtime/models/SavedActivations.h); planc's activation model pads each
/// saved storage by it.
constexpr int64_t kSavesAlignment = 64;

/// CPU AdamW steps over more than this many elements take the runtime's
/// blocked loop (runtime/core/Optimizer.h, adamwStepParallel), smaller ones
/// ATen's ops, whose sqrt and division allocate two fp32 temporaries;
/// planc's workspace model counts them with the same rule.
constexpr int64_t kParallelAdamWMinNumel = int64_t{1} << 20;

/// The runtime computes a head's logits and cross-entropy in chunks of
/// tokens, so that the fp32 logits of one chunk take at most
/// `kLossChunkBytes` (the temporaries of a head stay bounded for any vocab
/// and micro-batch; what backward needs is the same). planc's activation
/// model counts the chunks' saved tensors with the same rule.
constexpr int64_t kLossChunkBytes = int64_t(256) << 20;

/// Tokens per loss chunk for `tokens` tokens over `vocab` classes: as many as
/// keep tokens x vocab fp32 logits within `budgetBytes`, at least 1, at most
/// `tokens`.
inline int64_t lossChunkTokens(int64_t tokens, int64_t vocab,
                               int64_t budgetBytes = kLossChunkBytes) {
  int64_t perToken = 4 * (vocab > 0 ? vocab : 1);
  int64_t chunk = budgetBytes / perToken;
  if (chunk < 1)
    chunk = 1;
  return chunk < tokens ? chunk : (tokens > 0 ? tokens : 1);
}

struct OptimizerConfig {
  std::string kind; // "adamw" | "sgd"
  double lr = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weightDecay = 0,
         momentum = 0;
};

struct LossScaleConfig {
  std::string kind = "none"; // "none" | "static" | "dynamic"
  double initial = 65536.0;
  int64_t growthInterval = 2000;
};

struct LRScheduleConfig {
  std::string kind = "constant"; // "constant" | "cosine" | "linear" (PlanEnums)
  int64_t warmup = 0;
  double minLrRatio = 0;
};

struct TrainConfig {
  OptimizerConfig optimizer;
  int64_t microBatch = 0; // sequences per rank per micro-batch
  int64_t seqLen = 0;
  int64_t gradAccum = 1;
  std::string precision = "fp32"; // "fp32" | "bf16_mixed" | "fp16_mixed" | ...
  LossScaleConfig lossScale;
  std::string reduceDtype = "fp32"; // "fp32" | "bf16" | "fp16"
  std::string activationCheckpointing = "none";
  double gradClip = 0;
  LRScheduleConfig lrSchedule;
  int64_t steps = 0;
  int64_t seed = 0;
};

struct DeviceConfig {
  std::string name;
  int64_t memory = 0;
  double bf16Tflops = 0, fp16Tflops = 0, fp32Tflops = 0, hbmBandwidth = 0,
         nvlinkBandwidth = 0, pcieBandwidth = 0;
};

struct ClusterConfig {
  int64_t nodes = 1, gpusPerNode = 1;
  DeviceConfig device;
  int64_t hostMemory = 0;
  double interNodeBandwidth = 0;
};

/// One parameter tensor of a unit, HF-named; `offset` is in elements within
/// the unit's stored elements (unit order, then parameter order).
struct Param {
  std::string name;           // "model.layers.0.self_attn.q_proj.weight"
  std::vector<int64_t> shape; // row-major
  int64_t offset = 0;
  std::string tiedTo; // "" or the defining parameter's name (stored there)
};

struct Unit {
  std::string name; // "layers.0"
  std::string
      kind; // "embedding" | "llama_block" | "llama_head" | "gpt2_block" | ...
  std::vector<Param> params;
  int64_t numel = 0; // stored elements (tied parameters excluded)
};

/// An FSDP unit (FlatParameter): its units' stored elements concatenated in
/// unit order, zero-padded to `paddedNumel` (a multiple of the shard axis).
struct Group {
  std::string name;               // "fsdp.layers.0"
  std::vector<std::string> units; // in storage order
  int64_t numel = 0, paddedNumel = 0, shardNumel = 0;
};

//===----------------------------------------------------------------------===//
// The program
//===----------------------------------------------------------------------===//

/// A buffer value: an allocation, or a view into one. Ids are dense indices
/// into Schedule::buffers, and every op's operands refer to earlier ids.
struct Buffer {
  enum class Kind : uint8_t { Alloc, View, ShardView } kind = Kind::Alloc;
  ElementType type = ElementType::F32;
  Space space = Space::Device;
  int64_t numel = 0;
  // Alloc
  std::string name; // "fsdp.layers.0.param", "layers.0.saves.mb0"
  BufferRole role = BufferRole::Staging;
  bool persistent = false; // lives across steps (state), allocated once
  int64_t offset = 0; // bytes into its space's arena (from sched-plan-memory)
  // Persistent param/master/grad/optimizer-state allocs: which group's flat
  // vector they hold, and whether all of it (`sharded` false) or this rank's
  // shard along the shard axis (elements [i*shardNumel, (i+1)*shardNumel) for
  // shard-axis index i). Empty for everything else.
  std::string group;
  bool sharded = false;
  // View: elements [viewOffset, viewOffset + numel) of `source`.
  // ShardView: this rank's 1/size slice of `source` along `axis`.
  int64_t source = -1;
  int64_t viewOffset = 0;
  GroupAxis axis = GroupAxis::Shard;
};

enum class OpKind : uint8_t {
  Alloc,         // buffer
  Free,          // buffer
  Wait,          // event
  AllGather,     // src, dst, axis, event, after
  ReduceScatter, // src, dst, axis, reduce, accumulate, event, after
  AllReduce,     // buffer, axis, reduce, event, after
  Broadcast,     // buffer, axis, root, event, after
  Copy,          // src, dst, event, after
  Cast,          // src, dst
  Zero,          // buffer
  Accumulate,    // src, dst (dst += src, converting)
  Forward,       // unit, microBatch, params, tied?, saves
  Recompute,     // unit, microBatch, params, tied?, input, saves
  Loss,          // unit, microBatch, scale, lossScale?
  Backward, // unit, microBatch, params, tied?, activations, grads, tiedGrads?
  GradNorm, // src (grads), scalar (norm, sum of squares added)
  CheckFinite,    // buffer, scalar (found_inf set to 1 if any non-finite)
  OptimizerStep,  // group, params, grads, state, norm?, foundInf?, lossScale?
  UpdateLossScale // scalar (loss scale), foundInf
};

/// One instruction. Fields not used by `kind` keep their defaults (-1 for
/// buffer/event ids); the comment on each OpKind lists the ones it uses.
struct Op {
  OpKind kind = OpKind::Alloc;
  int64_t buffer = -1; // Alloc, Free, AllReduce, Broadcast, Zero, CheckFinite
  int64_t src = -1, dst = -1; // AllGather, ReduceScatter, Copy, Cast,
                              // Accumulate, GradNorm(src)
  GroupAxis axis = GroupAxis::Shard;
  ReduceKind reduce = ReduceKind::Sum;
  bool accumulate = false;    // ReduceScatter: dst += result
  int64_t root = 0;           // Broadcast: rank within the group
  int64_t event = -1;         // async ops: the event they signal (dense ids)
  std::vector<int64_t> after; // async ops: events to wait for before starting
  int64_t waitEvent = -1;     // Wait
  int64_t unit = -1;          // index into Schedule::units (compute ops, Loss)
  int64_t group = -1;         // index into Schedule::groups (OptimizerStep)
  int64_t microBatch = 0;
  int64_t params = -1, tied = -1, saves = -1, input = -1, activations = -1,
          grads = -1, tiedGrads = -1;
  std::vector<int64_t> state; // OptimizerStep: exp_avg, exp_avg_sq | momentum
  int64_t scalar = -1;        // GradNorm: norm; CheckFinite: found_inf;
                              // UpdateLossScale: loss scale
  int64_t norm = -1, foundInf = -1,
          lossScale = -1; // OptimizerStep / Loss / UpdateLossScale
  double scale = 1.0;     // Loss
  uint32_t line = 0;      // the plan file's line of the op's location, 0 = none
};

struct Schedule {
  uint32_t version = kScheduleFormatVersion;
  std::string producer;   // "planc 0.1.0"
  std::string planName;   // "tiny_llama_cpu"
  std::string sourceFile; // the .plan it came from ("" for builder plans)
  // mesh: replicate x shard; world = product
  int64_t replicate = 1, shard = 1;
  int64_t worldSize() const { return replicate * shard; }
  ClusterConfig cluster;
  ModelConfig model;
  TrainConfig train;
  std::string
      sharding; // informative only: the runtime makes no strategy decisions
  std::vector<Unit> units;
  std::vector<Group> groups;
  // Planned arena sizes in bytes per memory space ("device", "pinned_host",
  // "host").
  std::map<std::string, int64_t> arenaBytes, persistentBytes;
  // What LibTorch allocates outside the arenas at the step's worst point,
  // in the memory the backend measures (sched-plan-workspace): the planned
  // peak is the arenas plus this.
  int64_t workspaceBytes = 0;
  int64_t microBatches = 1;
  int64_t numEvents = 0;
  std::vector<Buffer> buffers;
  std::vector<Op> ops;
};

// Keyword spellings shared by the writer, the reader and error messages.
const char *toString(Space);
const char *toString(ElementType);
const char *toString(GroupAxis);
const char *toString(ReduceKind);
const char *toString(BufferRole);
const char *toString(OpKind);
const char *toString(Buffer::Kind);
size_t elementBytes(ElementType);

// The inverses of toString: the enumerator spelled `keyword`, or nullopt.
std::optional<Space> parseSpace(std::string_view keyword);
std::optional<ElementType> parseElementType(std::string_view keyword);
std::optional<GroupAxis> parseGroupAxis(std::string_view keyword);
std::optional<ReduceKind> parseReduceKind(std::string_view keyword);
std::optional<BufferRole> parseBufferRole(std::string_view keyword);
std::optional<OpKind> parseOpKind(std::string_view keyword);
std::optional<Buffer::Kind> parseBufferKind(std::string_view keyword);

} // namespace plan::rt

#endif // PLAN_RUNTIME_FORMAT_SCHEDULE_H
