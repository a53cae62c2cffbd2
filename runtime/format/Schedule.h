//===- Schedule.h - The schedule file's contents, in memory ----*- C++ -*-===//
//
// What `planc -o FILE.sched` writes and `plan-run` executes: the lowered
// per-rank (SPMD) program of one training step, the model and the recipe it
// runs, as plain C++ data. It is the compiler/runtime boundary (like IREE's
// VM module): produced from the `sched` dialect by export/ExportSchedule.cpp,
// serialised by ScheduleFile.h, consumed by the executor. Nothing here
// depends on MLIR, LLVM or LibTorch.
//
// The ops (generated/ScheduleOps.h) and the enumerations
// (generated/ScheduleEnums.h) are generated from the sched dialect's ODS by
// plan-tblgen; this file holds the rest. docs/schedule-format.md describes
// every field; keep the two in step and bump kScheduleFormatVersion on any
// change an older reader could misread.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_RUNTIME_FORMAT_SCHEDULE_H
#define PLAN_RUNTIME_FORMAT_SCHEDULE_H

#include "Keywords.h"
#include "generated/ScheduleEnums.h"
#include "generated/ScheduleOps.h"

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace plan::rt {

/// 2: ops are the generated op table's (fields named as in the sched
/// dialect), configuration strings are checked keywords.
/// 3: the optimizer's `decay` (which parameters weight decay applies to).
/// 4: compute ops' `frozen` (a LoRA base), optional `params` / `grads`.
/// 5: LoRA: model.lora, params' `frozen`, units' and groups' frozen sizes.
/// 6: QLoRA: frozen params' `base` (how each is stored), `i8` buffers (a base
/// with an NF4 part, whose group sizes count bytes), the `dequantize` op.
/// 7: tensor parallelism's fields: compute ops' `part` and exchange buffers
/// (`in`, `out`, `out_grad`, `in_grad`; recompute's `from` optional for a
/// later part), the loss's `stats`, grad_norm's `tensor_replicas`, the
/// `tensor` group and `exchange` role; refused by this runtime's reader.
/// 8: the mesh's tensor axis and sequence parallelism, params' `split`: a
/// tensor-parallel program runs.
/// 9: the mesh's pipeline axis, units' `stage`, one program per pipeline
/// stage (`stages`), the `send` and `recv` ops, the `pipeline` group.
/// 10: the `embedding` group (a pipeline's first and last stages, which add
/// a tied embedding's gradient), and the last stage's replica of the tied
/// embedding's group.
/// 11: a program's `tasks` and `runs`: a body of ops written once and run
/// once per entry of an order table (a sched.repeat's), which the reader
/// expands.
inline constexpr uint32_t kScheduleFormatVersion = 14;

/// A buffer's element type: the IR's float types, and i8 for bytes (a
/// frozen base stored with an NF4 part), spelled as in MLIR.
enum class ElementType : uint8_t { F32, BF16, F16, I8 };
template <> struct EnumKeywords<ElementType> {
  static constexpr std::array<const char *, 4> keywords = {"f32", "bf16", "f16",
                                                           "i8"};
};
inline const char *toString(ElementType value) {
  auto index = static_cast<size_t>(value);
  const auto &keywords = EnumKeywords<ElementType>::keywords;
  return index < keywords.size() ? keywords[index] : "?";
}
size_t elementBytes(ElementType type);

//===----------------------------------------------------------------------===//
// Model and recipe (from the plan dialect's attributes)
//===----------------------------------------------------------------------===//

struct RopeScaling { // Llama-3.1 "llama3" rope scaling; absent = none
  double factor = 0, lowFreqFactor = 0, highFreqFactor = 0;
  int64_t originalMaxSeqLen = 0;
};

/// LoRA (model.lora): adapters `<module>.lora_A.weight` [rank, in] and
/// `<module>.lora_B.weight` [out, rank] on the target modules train, every
/// other parameter is the frozen base; a target's output gains
/// x A^T B^T alpha/rank (PEFT's LoRA).
struct LoraConfig {
  int64_t rank = 0;
  double alpha = 0;
  double dropout = 0;
  std::vector<std::string> targets; // as the plan resolved them
};

struct ModelConfig {
  ModelFamily family = ModelFamily::Llama;
  std::string preset; // "" when written out explicitly
  int64_t vocab = 0, hidden = 0, intermediate = 0, layers = 0, heads = 0,
          kvHeads = 0, maxSeqLen = 0;
  double ropeTheta = 10000.0;
  std::optional<RopeScaling> ropeScaling;
  double normEps = 1e-5;
  bool tieEmbeddings = false;
  int64_t typeVocab = 2; // bert
  BertHead bertHead = BertHead::MaskedLM;
  int64_t numLabels = 2; // bert sequence classification
  std::optional<LoraConfig> lora;
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

/// LoRA dropout draws its uniform fp32 values (which elements of an
/// adapter's input drop) a few whole rows at a time, at most this many
/// elements (at least one row), so that they stay small next to the mask;
/// planc's workspace model counts them with the same rule.
constexpr int64_t kDropoutChunkElements = int64_t{1} << 16;

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::AdamW;
  double lr = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weightDecay = 0,
         momentum = 0;
  /// Which parameters weightDecay applies to (decayMask).
  WeightDecayScope decay = WeightDecayScope::Matrices;
};

/// The state buffers an optimizer keeps per parameter buffer, in the order
/// optimizer_step lists them: adamw 2 (exp_avg, exp_avg_sq), sgd with
/// momentum 1, sgd 0.
int64_t optimizerStateCount(const OptimizerConfig &config);

struct LossScaleConfig {
  LossScaleKind kind = LossScaleKind::None;
  double initial = 65536.0;
  int64_t growthInterval = 2000;
};

struct LRScheduleConfig {
  LRScheduleKind kind = LRScheduleKind::Constant;
  int64_t warmup = 0;
  double minLrRatio = 0;
};

struct TrainConfig {
  OptimizerConfig optimizer;
  int64_t microBatch = 0; // sequences per rank per micro-batch
  int64_t seqLen = 0;
  int64_t gradAccum = 1;
  Precision precision = Precision::FP32;
  LossScaleConfig lossScale;
  DType reduceDtype = DType::F32;
  Checkpointing activationCheckpointing = Checkpointing::None;
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

/// How tensor parallelism divides a parameter (the IR's #plan.split):
/// dimension `dim` is `chunks` equal parts, and tensor rank t holds slice t
/// of each part, the parts' slices in order (a part the ranks do not divide
/// is padded with zeros: splitExtent).
struct TensorSplit {
  int64_t dim = 0, chunks = 1;
};

/// One parameter tensor of a unit, HF-named; `offset` is in elements within
/// the unit's stored elements (unit order, then parameter order): its
/// trainable ones, or, for a `frozen` parameter (a LoRA run's base), its
/// frozen ones. A frozen parameter is stored as `base` says (a tied one as
/// the parameter it ties to).
struct Param {
  std::string name;           // "model.layers.0.self_attn.q_proj.weight"
  std::vector<int64_t> shape; // row-major
  int64_t offset = 0;
  std::string tiedTo; // "" or the defining parameter's name (stored there)
  bool frozen = false;
  BaseStorage base = BaseStorage::F32; // when frozen
  // Under tensor parallelism: how the ranks divide it; none where every
  // tensor rank holds all of it (a norm, a row-parallel bias).
  std::optional<TensorSplit> split;

  /// Elements of the whole (HF) parameter.
  int64_t numel() const;
  /// The shape and elements one of `tensor` tensor ranks stores and
  /// computes with: `shape`, its split dimension cut to its slice.
  std::vector<int64_t> localShape(int64_t tensor) const;
  int64_t localNumel(int64_t tensor) const;
};

/// Bytes `numel` elements take stored as `storage` (NF4: NF4Layout.h).
int64_t storageBytes(BaseStorage storage, int64_t numel);

/// One rank's extent of a dimension of `extent` elements that tensor
/// parallelism divides in `chunks` equal parts over `ranks` ranks: each
/// part's slice rounded up (a vocabulary the ranks do not divide is padded),
/// times the parts. The plan dialect's #plan.split sizes with it.
int64_t splitExtent(int64_t extent, int64_t chunks, int64_t ranks);

/// Whether units of `kind` are the model's layers (a transformer block):
/// `model.layers` counts them. The plan dialect's `plan::isBlockKind`, on
/// this side of the boundary.
bool isBlockKind(UnitKind kind);

struct Unit {
  std::string name; // "layers.0"
  UnitKind kind = UnitKind::Embedding;
  std::vector<Param> params;
  int64_t numel = 0;       // stored trainable elements (tied ones excluded)
  int64_t frozenNumel = 0; // stored frozen elements (a LoRA base)
  int64_t stage = 0;       // the pipeline stage that computes it

  /// The bytes its frozen parameters take stored as each says, in
  /// parameter order: what it holds in a group's frozen buffer of bytes.
  int64_t frozenBytes() const;
  /// Its frozen parameters' size in a frozen buffer of `type`: bytes in an
  /// i8 one, elements otherwise.
  int64_t frozenSizeIn(ElementType type) const {
    return type == ElementType::I8 ? frozenBytes() : frozenNumel;
  }
  /// Whether one of its frozen parameters is stored in NF4 (QLoRA): then
  /// its group's frozen buffer holds bytes.
  bool hasQuantizedBase() const;
};

/// An FSDP unit (FlatParameter): its units' stored elements concatenated in
/// unit order, zero-padded to `paddedNumel` (a multiple of the shard axis).
/// A LoRA run's frozen base is a second flat vector laid out the same way
/// (`frozen*`), of bytes when one of its parameters is stored in NF4 (the
/// sizes then count bytes); a group without trainable elements has
/// paddedNumel 0.
struct Group {
  std::string name;               // "fsdp.layers.0"
  std::vector<std::string> units; // in storage order
  int64_t numel = 0, paddedNumel = 0, shardNumel = 0;
  int64_t frozenNumel = 0, frozenPaddedNumel = 0, frozenShardNumel = 0;
};

//===----------------------------------------------------------------------===//
// The program
//===----------------------------------------------------------------------===//

/// A buffer value: an allocation, or a view into one. Ids are dense indices
/// into Schedule::buffers, and every op's operands refer to earlier ids.
struct Buffer {
  enum class Kind : uint8_t { Alloc, View, ShardView, Slot } kind = Kind::Alloc;
  ElementType type = ElementType::F32;
  Space space = Space::Device;
  int64_t numel = 0;
  // Alloc
  std::string name; // "fsdp.layers.0.param", "layers.0.saves.mb0"
  BufferRole role = BufferRole::Staging;
  bool persistent = false; // lives across steps (state), allocated once
  int64_t offset = 0; // bytes into its space's arena (from sched-plan-memory)
  // A transient alloc of a program with tasks, used only through its tasks'
  // one-slot slots (directly or through views of it): its bytes are claimed
  // only while a micro-batch holds its slot, from that holder's first use to
  // its last or to the wait that completes an asynchronous op using it, not
  // from its alloc to its free. The expansion gives each holder an alloc of
  // its own at those bytes (expandTasks), and the buffer claims none.
  bool held = false;
  // Persistent param/master/grad/optimizer-state allocs: which group's flat
  // vector they hold, and whether all of it (`sharded` false) or this rank's
  // shard along the shard axis (elements [i*shardNumel, (i+1)*shardNumel) for
  // shard-axis index i). Empty for everything else.
  std::string group;
  bool sharded = false;
  // View: elements [viewOffset, viewOffset + numel) of `source`.
  // ShardView: this rank's 1/size slice of `source` along `axis`.
  // Slot (a task's buffer only): in the run of micro-batch `mb`, slot
  // `(mb + shift) mod slots` of `source`, a program buffer of `slots` such
  // slots: elements [slot * numel, (slot + 1) * numel). Expanded into a View.
  // Picked (`slotGroup` >= 0, shift 0): slot `p`, the pick of the run's
  // entry (TaskRuns::picks), of `slots` slots of `slotStride` elements:
  // elements [p * slotStride + slotOffset, ... + numel), held by group
  // `slotGroup`'s micro-batch `mb`.
  int64_t source = -1;
  int64_t viewOffset = 0;
  GroupAxis axis = GroupAxis::Shard;
  int64_t slots = 0, shift = 0;
  int64_t slotGroup = -1, slotStride = 0, slotOffset = 0;
};
template <> struct EnumKeywords<Buffer::Kind> {
  static constexpr std::array<const char *, 4> keywords = {
      "alloc", "view", "shard_view", "slot"};
};
inline const char *toString(Buffer::Kind value) {
  auto index = static_cast<size_t>(value);
  const auto &keywords = EnumKeywords<Buffer::Kind>::keywords;
  return index < keywords.size() ? keywords[index] : "?";
}

/// Whether a buffer is training state: what initialisation fills, what a
/// checkpoint saves and restores (runtime/checkpoint), and what survives
/// from one step to the next besides the counters. The persistent
/// parameters, fp32 master weights and optimizer moments of a group;
/// persistent gradients are not (every step zeroes them first).
bool isTrainingState(const Buffer &buffer);
/// The roles of training state: parameters, master weights, moments.
bool isTrainingStateRole(BufferRole role);

/// One instruction: its kind and fields (generated/ScheduleOps.h), and the
/// line of the plan file it comes from (0: none).
struct Op {
  OpBody body;
  uint32_t line = 0;

  OpKind kind() const { return static_cast<OpKind>(body.index()); }
  template <typename T> const T *as() const { return std::get_if<T>(&body); }
  template <typename T> T *as() { return std::get_if<T>(&body); }
};

/// A body of ops a program runs once per entry of an order table
/// (`TaskRuns`): a sched.repeat's body, written once. Its ops are written
/// for micro-batch `microBatch`; its own buffers and events are numbered
/// after the program's (ids `P + i` and `E + i` for a program of `P`
/// buffers and `E` events), and each run of it gets new ones. Its slot
/// events follow its own events (ids `E + numEvents + j`): `slotEvents[j]`
/// is `(family, shift)`, in the run of micro-batch `mb` the instance
/// `mb + shift` of the program's slot event family, one event whichever
/// run names it (what one task signals and a later one waits for).
struct Task {
  int64_t microBatch = 0;
  int64_t numEvents = 0;
  std::vector<Buffer> buffers;
  std::vector<std::pair<int64_t, int64_t>> slotEvents;
  std::vector<Op> ops;
};

/// Where a program runs tasks: before its op `at`, where its first
/// `buffersBefore` buffers and `eventsBefore` events are defined, each
/// (task, micro-batch) of `order` in turn. `picks` is empty, or the slot of
/// their pools that each entry's picked slot buffers take (-1 where its task
/// has none).
struct TaskRuns {
  int64_t at = 0, buffersBefore = 0, eventsBefore = 0;
  std::vector<std::pair<int64_t, int64_t>> order;
  std::vector<int64_t> picks;
};

/// `name` (an alloc's) with its `.mb<from>` component (followed by the end
/// or a `.`) made `.mb<to>`; unchanged if it has none. A task's buffers are
/// named for its micro-batch, and each run's for the run's.
std::string shiftMicroBatchInName(std::string_view name, int64_t from,
                                  int64_t to);

/// The slot of `slots` that a task's slot buffer of shift `shift` takes in
/// the run of micro-batch `microBatch`: `(microBatch + shift) mod slots`,
/// the non-negative remainder (`slots` >= 1).
inline int64_t slotIndex(int64_t microBatch, int64_t shift, int64_t slots) {
  return ((microBatch + shift) % slots + slots) % slots;
}

/// A slot holds one micro-batch at a time: the rule that the slots of a
/// source buffer (`Source` names it) are at least the micro-batches in
/// flight. The reader's expansion and sched-unroll-tasks check each use of
/// a slot, in run order, with it. What holds a slot is a micro-batch, or,
/// where several buffers lie in one source (`Holder`), a buffer's
/// micro-batch.
template <typename Source, typename Holder = int64_t> class SlotOccupancy {
public:
  /// Records that slot `slot` of `source` is used for `mb`: false, with
  /// `holder` what holds it now, when another took the slot after `mb` had
  /// it.
  bool use(Source source, int64_t slot, Holder mb, Holder &holder) {
    auto [it, first] = slots.try_emplace({source, slot}, Held{mb, {}});
    Held &held = it->second;
    if (first || held.now == mb)
      return true;
    if (held.before.count(mb)) {
      holder = held.now;
      return false;
    }
    held.before.insert(held.now);
    held.now = mb;
    return true;
  }

  /// Calls `f(source, slot, now, before)` for each slot used so far, in the
  /// order of (source, slot): what holds it and what held it before.
  template <typename F> void forEach(F &&f) const {
    for (const auto &[key, held] : slots)
      f(key.first, key.second, held.now, held.before);
  }

private:
  struct Held {
    Holder now;
    std::set<Holder> before;
  };
  std::map<std::pair<Source, int64_t>, Held> slots;
};

/// One pipeline stage's program (the whole step's without a pipeline): its
/// buffers, its ops in order, and their planned memory. As a file holds it,
/// it may have tasks (`tasks`, `runs`); the executor runs only an expanded
/// program (expandTasks, ScheduleFile.h), which has none.
struct Program {
  // Planned arena sizes in bytes per memory space.
  std::map<Space, int64_t> arenaBytes, persistentBytes;
  // What LibTorch allocates outside the arenas at the step's worst point,
  // in the memory the backend measures (sched-plan-workspace): the planned
  // peak is the arenas plus this.
  int64_t workspaceBytes = 0;
  int64_t numEvents = 0;
  std::vector<Buffer> buffers;
  std::vector<Op> ops;
  // The families of slot events its tasks name (Task::slotEvents).
  int64_t slotEventFamilies = 0;
  std::vector<Task> tasks;
  std::vector<TaskRuns> runs; // in program order

  /// The planned bytes of `space`'s arena (0 when it has none).
  int64_t arenaSize(Space space) const {
    auto it = arenaBytes.find(space);
    return it == arenaBytes.end() ? 0 : it->second;
  }
};

struct Schedule {
  uint32_t version = kScheduleFormatVersion;
  std::string producer;   // "planc 0.1.0"
  std::string planName;   // "tiny_llama_cpu"
  std::string sourceFile; // the .plan it came from ("" for builder plans)
  // mesh: pipeline x replicate x shard x tensor, rank = ((p * replicate + r)
  // * shard + s) * tensor + t (docs/schedule-format.md); world = product.
  // The data-parallel ranks (the `world` group) are replicate x shard.
  int64_t pipeline = 1, replicate = 1, shard = 1, tensor = 1;
  // Megatron's sequence parallelism (tensor > 1 only): what lies between
  // the column- and row-parallel layers covers 1/tensor of the sequence.
  bool sequenceParallel = false;
  int64_t worldSize() const { return pipeline * replicate * shard * tensor; }
  int64_t dataParallelSize() const { return replicate * shard; }
  ClusterConfig cluster;
  ModelConfig model;
  TrainConfig train;
  // Informative only: the runtime makes no strategy decisions.
  Sharding sharding = Sharding::NoShard;
  std::vector<Unit> units;
  std::vector<Group> groups;
  int64_t microBatches = 1;
  // One per pipeline stage, in stage order: the program a rank runs is its
  // stage's (the only one without a pipeline).
  std::vector<Program> programs = std::vector<Program>(1);

  /// The pipeline stage that holds `group`: its units' (0 when its first
  /// unit is not one of `units`, which validation rejects).
  int64_t stageOf(const Group &group) const;
  /// The stage that holds the group named `group` (0 when there is none).
  /// Another stage may hold a replica of it: the last stage's of a tied
  /// input embedding's group.
  int64_t stageOf(const std::string &group) const;
};

/// Whether pipeline stage `stage` saves `buffer` of its program in a
/// checkpoint: training state of one of its own groups, not its replica of
/// another stage's (a tied embedding's, saved by the stage that holds it).
bool isSavedState(const Schedule &schedule, int64_t stage,
                  const Buffer &buffer);

/// The mesh as messages spell it: "2x4" (replicate x shard), "1x2x4" with
/// a tensor axis, "2x1x2x4" (pipeline first) with a pipeline.
std::string meshString(const Schedule &schedule);

/// A schedule that validateSchedule accepted (ScheduleFile.h): the only kind
/// the executor runs. Reading a file gives one; a schedule built in memory
/// becomes one by validation.
class ValidSchedule {
public:
  /// The schedule the executor runs: every program expanded (no tasks).
  const Schedule &get() const { return schedule_; }
  const Schedule *operator->() const { return &schedule_; }
  operator const Schedule &() const { return schedule_; }
  /// The schedule as a file holds it: with its tasks, if it had any.
  const Schedule &file() const { return compact_ ? *compact_ : schedule_; }

private:
  friend ValidSchedule validateSchedule(Schedule, const std::string &);
  ValidSchedule(Schedule schedule, std::optional<Schedule> compact)
      : schedule_(std::move(schedule)), compact_(std::move(compact)) {}
  Schedule schedule_;
  std::optional<Schedule> compact_;
};

} // namespace plan::rt

#endif // PLAN_RUNTIME_FORMAT_SCHEDULE_H
