//===- Checks.cpp - Checks that need the whole plan -----------------------===//
//
// Everything here works from a PlanSpec alone, so plans from a .plan file and
// plans built in C++ are held to the same rules. Locations come from
// `plan.locs`: a check points at the key the user most likely has to change
// and adds a note at each other key involved that was written down; keys that
// took a default have no location, and DiagEmitter falls back to the plan's.
//
// Three kinds of checks, in order: value ranges (a table), contradictions
// (errors that say why and what to do instead), and settings that have no
// effect (warnings, only for keys the user wrote: an option that silently
// does nothing is what users of other frameworks complain about most).
//
//===----------------------------------------------------------------------===//

#include "frontend/Analyze.h"

#include "analysis/CommModel.h"
#include "analysis/PipelineModel.h"
#include "runtime/support/Format.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <limits>

using namespace plan;
using llvm::formatv;
using llvm::SMLoc;
using llvm::StringRef;

//===----------------------------------------------------------------------===//
// Formatting values for messages
//===----------------------------------------------------------------------===//

/// The shortest spelling that reads back as `x`, exponents as the language
/// writes them (2e-5, not 2e-05).
static std::string formatReal(double x) {
  char buffer[64];
  auto [end, error] = std::to_chars(buffer, buffer + sizeof buffer, x);
  if (error != std::errc())
    return "?";
  std::string text(buffer, end);
  size_t e = text.find('e');
  if (e == std::string::npos)
    return text;
  std::string exponent = text.substr(e + 1);
  bool negative = exponent.front() == '-';
  exponent.erase(0, exponent.find_first_not_of("+-0"));
  return text.substr(0, e + 1) + (negative ? "-" : "") + exponent;
}

/// Bytes as a plan literal ("80GiB", "1536B"): the largest binary unit that
/// divides them exactly, so the value reads back unchanged (unlike
/// support::formatBytes, which rounds for people).
static std::string bytesLiteral(int64_t bytes) {
  static constexpr std::pair<StringRef, int64_t> binaryUnits[] = {
      {"TiB", int64_t(1) << 40},
      {"GiB", int64_t(1) << 30},
      {"MiB", int64_t(1) << 20},
      {"KiB", int64_t(1) << 10}};
  for (auto [unit, size] : binaryUnits)
    if (bytes != 0 && bytes % size == 0)
      return (llvm::Twine(bytes / size) + unit).str();
  return (llvm::Twine(bytes) + "B").str();
}

static std::string formatBandwidth(double bytesPerSecond) {
  return formatReal(bytesPerSecond / 1e9) + "GB/s";
}

static std::string formatMesh(int64_t replicate, int64_t shard) {
  return formatv("({0}, {1})", replicate, shard);
}

//===----------------------------------------------------------------------===//
// Ranges
//===----------------------------------------------------------------------===//

namespace {

/// min <= value <= max for one integer of the plan, where `applies` holds.
struct IntegerRange {
  StringRef path;
  int64_t min;
  int64_t max;
  int64_t (*get)(const PlanSpec &);
  bool (*applies)(const PlanSpec &) = nullptr;
  const char *whyMax = nullptr; // why the upper bound, when it is not the
                                // representable range
};

enum class Shown { Plain, Bytes, BytesPerSecond, Seconds };

/// A lower bound and an optional upper bound for one real of the plan.
struct RealRange {
  StringRef path;
  double min;
  bool minExclusive;
  double max; // infinity: no upper bound
  bool maxExclusive;
  double (*get)(const PlanSpec &);
  bool (*applies)(const PlanSpec &) = nullptr;
  Shown shown = Shown::Plain;
};

} // namespace

// Counts and dimensions stay below 2^31 (PlanSpec.h).
static constexpr int64_t maxCount = kMaxCount;
static constexpr int64_t maxInteger = std::numeric_limits<int64_t>::max();
/// Layers the compiler lowers: each is a unit of the step program (its
/// state, its compute per micro-batch), and lowering time grows with them.
static constexpr int64_t maxLayers = 1024;
/// Unit-micro-batches (units x grad_accum) of one step: each is a forward,
/// a backward and their buffers in the schedule file and in the time
/// model's play of the step (and in the lowered program of a pipeline stage,
/// which unrolls its micro-batches), so those grow with their number.
static constexpr int64_t maxUnitMicroBatches = 32768;
static constexpr double unbounded = std::numeric_limits<double>::infinity();

static bool isLlama(const PlanSpec &p) {
  return p.model.family == ModelFamily::Llama;
}
static bool isBert(const PlanSpec &p) {
  return p.model.family == ModelFamily::Bert;
}
static bool hasLabels(const PlanSpec &p) {
  return isBert(p) && p.model.bertHead == BertHead::SequenceClassification;
}
static bool hasRopeScaling(const PlanSpec &p) {
  return isLlama(p) && p.model.ropeScaling.has_value();
}
static bool isAdamW(const PlanSpec &p) {
  return p.train.optimizer.kind == OptimizerKind::AdamW;
}
static bool isSGD(const PlanSpec &p) {
  return p.train.optimizer.kind == OptimizerKind::SGD;
}
static bool isDynamicScale(const PlanSpec &p) {
  return p.train.lossScale.kind == LossScaleKind::Dynamic;
}
static bool isStaticScale(const PlanSpec &p) {
  return p.train.lossScale.kind == LossScaleKind::Static;
}
static bool decays(const PlanSpec &p) {
  return p.train.lrSchedule.kind != LRScheduleKind::Constant;
}
static bool clips(const PlanSpec &p) { return p.train.gradClip.has_value(); }
/// A LoRA key given under this name (ours or PEFT's).
template <const char *Path> static bool givesLora(const PlanSpec &p) {
  return p.lora && p.isGiven(Path);
}
static constexpr char loraRank[] = "model.lora.rank";
static constexpr char loraR[] = "model.lora.r";
static constexpr char loraAlpha[] = "model.lora.alpha";
static constexpr char loraLoraAlpha[] = "model.lora.lora_alpha";
static constexpr char loraDropout[] = "model.lora.dropout";
static constexpr char loraLoraDropout[] = "model.lora.lora_dropout";

static bool wrapsByParams(const PlanSpec &p) {
  return p.parallel.wrap.kind == WrapKind::MinParams;
}

static bool isInterleaved(const PlanSpec &p) {
  return p.parallel.schedule == PipelineSchedule::Interleaved;
}

static const IntegerRange integerRanges[] = {
    {"model.vocab", 1, maxCount,
     [](const PlanSpec &p) { return p.model.vocab; }},
    {"model.hidden", 1, maxCount,
     [](const PlanSpec &p) { return p.model.hidden; }},
    {"model.intermediate", 1, maxCount,
     [](const PlanSpec &p) { return p.model.intermediate; }},
    {"model.layers", 1, maxLayers,
     [](const PlanSpec &p) { return p.model.layers; }, nullptr,
     "each layer is a unit of the compiled step program; the largest "
     "published models have fewer than 200"},
    {"model.heads", 1, maxCount,
     [](const PlanSpec &p) { return p.model.heads; }},
    {"model.kv_heads", 1, maxCount,
     [](const PlanSpec &p) { return p.model.kvHeads; }, isLlama},
    {"model.max_seq_len", 1, maxCount,
     [](const PlanSpec &p) { return p.model.maxSeqLen; }},
    {"model.type_vocab", 1, maxCount,
     [](const PlanSpec &p) { return p.model.typeVocab; }, isBert},
    {"model.num_labels", 1, maxCount,
     [](const PlanSpec &p) { return p.model.numLabels; }, hasLabels},
    {"model.rope_scaling.original_max_seq_len", 1, maxCount,
     [](const PlanSpec &p) { return p.model.ropeScaling->originalMaxSeqLen; },
     hasRopeScaling},
    {loraRank, 1, maxCount, [](const PlanSpec &p) { return p.lora->rank; },
     givesLora<loraRank>},
    {loraR, 1, maxCount, [](const PlanSpec &p) { return p.lora->rank; },
     givesLora<loraR>},
    {"cluster.nodes", 1, maxCount,
     [](const PlanSpec &p) { return p.cluster.nodes; }},
    {"cluster.gpus_per_node", 1, maxCount,
     [](const PlanSpec &p) { return p.cluster.gpusPerNode; }},
    {"train.micro_batch", 1, maxCount,
     [](const PlanSpec &p) { return p.train.microBatch; }},
    {"train.seq_len", 1, maxCount,
     [](const PlanSpec &p) { return p.train.seqLen; }},
    {"train.grad_accum", 1, maxCount,
     [](const PlanSpec &p) { return p.train.gradAccum; }},
    {"cluster.host_cores", 1, maxCount,
     [](const PlanSpec &p) { return p.cluster.hostCores; }},
    {"train.global_batch", 1, maxCount,
     [](const PlanSpec &p) { return p.train.globalBatch; },
     [](const PlanSpec &p) { return p.isGiven("train.global_batch"); }},
    {"train.steps", 0, maxInteger,
     [](const PlanSpec &p) { return p.train.steps; }},
    {"train.seed", 0, maxInteger,
     [](const PlanSpec &p) { return p.train.seed; }},
    {"train.loss_scale.growth_interval", 1, maxInteger,
     [](const PlanSpec &p) { return p.train.lossScale.growthInterval; },
     isDynamicScale},
    {"train.lr_schedule.warmup", 0, maxInteger,
     [](const PlanSpec &p) { return p.train.lrSchedule.warmupSteps; }},
    {"parallel.wrap.n", 1, maxInteger,
     [](const PlanSpec &p) { return p.parallel.wrap.minParams; },
     wrapsByParams},
    {"parallel.max_inflight_gathers", 1, maxCount,
     [](const PlanSpec &p) { return p.parallel.maxInflightGathers; }},
    {"parallel.tensor", 1, maxCount,
     [](const PlanSpec &p) { return p.parallel.tensor; }},
    {"parallel.pipeline", 1, maxCount,
     [](const PlanSpec &p) { return p.parallel.pipeline; }},
    {"parallel.schedule.v", 2, maxCount,
     [](const PlanSpec &p) { return p.parallel.virtualStages; }, isInterleaved},
};

static const RealRange realRanges[] = {
    // As the schedule reader checks them (runtime/format).
    {"model.norm_eps", 0, true, 1, true,
     [](const PlanSpec &p) { return p.model.normEps; }},
    // A base below 1 turns RoPE's slowest rotation into its fastest.
    {"model.rope_theta", 1, false, unbounded, false,
     [](const PlanSpec &p) { return p.model.ropeTheta; }, isLlama},
    // HF rejects llama3 rope scaling with factor < 1.
    {"model.rope_scaling.factor", 1, false, unbounded, false,
     [](const PlanSpec &p) { return p.model.ropeScaling->factor; },
     hasRopeScaling},
    {"model.rope_scaling.low_freq_factor", 0, true, unbounded, false,
     [](const PlanSpec &p) { return p.model.ropeScaling->lowFreqFactor; },
     hasRopeScaling},
    {"model.rope_scaling.high_freq_factor", 0, true, unbounded, false,
     [](const PlanSpec &p) { return p.model.ropeScaling->highFreqFactor; },
     hasRopeScaling},
    // The adapter's update is scaled by alpha / rank.
    {loraAlpha, 0, true, unbounded, false,
     [](const PlanSpec &p) { return p.lora->alpha; }, givesLora<loraAlpha>},
    {loraLoraAlpha, 0, true, unbounded, false,
     [](const PlanSpec &p) { return p.lora->alpha; }, givesLora<loraLoraAlpha>},
    {loraDropout, 0, false, 1, true,
     [](const PlanSpec &p) { return p.lora->dropout; }, givesLora<loraDropout>},
    {loraLoraDropout, 0, false, 1, true,
     [](const PlanSpec &p) { return p.lora->dropout; },
     givesLora<loraLoraDropout>},
    {"cluster.host_memory", 0, true, unbounded, false,
     [](const PlanSpec &p) { return double(p.cluster.hostMemoryBytes); },
     nullptr, Shown::Bytes},
    {"cluster.inter_node_bandwidth", 0, true, unbounded, false,
     [](const PlanSpec &p) { return p.cluster.interNodeBandwidth; }, nullptr,
     Shown::BytesPerSecond},
    {"cluster.host_bandwidth", 0, true, unbounded, false,
     [](const PlanSpec &p) { return p.cluster.hostBandwidth; }, nullptr,
     Shown::BytesPerSecond},
    {"cluster.gpu.memory", 0, true, unbounded, false,
     [](const PlanSpec &p) { return double(p.cluster.device.memoryBytes); },
     nullptr, Shown::Bytes},
    {"cluster.gpu.bf16_tflops", 0, true, unbounded, false,
     [](const PlanSpec &p) { return p.cluster.device.bf16Tflops; }},
    {"cluster.gpu.fp16_tflops", 0, true, unbounded, false,
     [](const PlanSpec &p) { return p.cluster.device.fp16Tflops; }},
    {"cluster.gpu.fp32_tflops", 0, true, unbounded, false,
     [](const PlanSpec &p) { return p.cluster.device.fp32Tflops; }},
    {"cluster.gpu.hbm_bandwidth", 0, true, unbounded, false,
     [](const PlanSpec &p) { return p.cluster.device.hbmBandwidth; }, nullptr,
     Shown::BytesPerSecond},
    {"cluster.gpu.pcie_bandwidth", 0, true, unbounded, false,
     [](const PlanSpec &p) { return p.cluster.device.pcieBandwidth; }, nullptr,
     Shown::BytesPerSecond},
    {"cluster.gpu.link_latency", 0, false, 1, false,
     [](const PlanSpec &p) { return p.cluster.device.linkLatency; }, nullptr,
     Shown::Seconds},
    // 0 means no NVLink: peers talk over PCIe.
    {"cluster.gpu.nvlink_bandwidth", 0, false, unbounded, false,
     [](const PlanSpec &p) { return p.cluster.device.nvlinkBandwidth; },
     nullptr, Shown::BytesPerSecond},
    {"train.optimizer.lr", 0, true, unbounded, false,
     [](const PlanSpec &p) { return p.train.optimizer.lr; }},
    {"train.optimizer.betas", 0, false, 1, true,
     [](const PlanSpec &p) { return p.train.optimizer.beta1; }, isAdamW},
    {"train.optimizer.betas", 0, false, 1, true,
     [](const PlanSpec &p) { return p.train.optimizer.beta2; }, isAdamW},
    {"train.optimizer.eps", 0, true, unbounded, false,
     [](const PlanSpec &p) { return p.train.optimizer.eps; }, isAdamW},
    {"train.optimizer.weight_decay", 0, false, unbounded, false,
     [](const PlanSpec &p) { return p.train.optimizer.weightDecay; }},
    {"train.optimizer.momentum", 0, false, 1, true,
     [](const PlanSpec &p) { return p.train.optimizer.momentum; }, isSGD},
    {"train.loss_scale.initial", 0, true, unbounded, false,
     [](const PlanSpec &p) { return p.train.lossScale.initial; },
     isDynamicScale},
    {"train.loss_scale.scale", 0, true, unbounded, false,
     [](const PlanSpec &p) { return p.train.lossScale.initial; },
     isStaticScale},
    {"train.grad_clip", 0, true, unbounded, false,
     [](const PlanSpec &p) { return *p.train.gradClip; }, clips},
    {"train.lr_schedule.min_lr_ratio", 0, false, 1, false,
     [](const PlanSpec &p) { return p.train.lrSchedule.minLrRatio; }, decays},
    {"parallel.bucket", 0, true, unbounded, false,
     [](const PlanSpec &p) { return double(p.parallel.bucketBytes); }, nullptr,
     Shown::Bytes},
};

static std::string show(double x, Shown shown) {
  switch (shown) {
  case Shown::Plain:
    return formatReal(x);
  case Shown::Bytes:
    return bytesLiteral(static_cast<int64_t>(x));
  case Shown::BytesPerSecond:
    return formatBandwidth(x);
  case Shown::Seconds:
    return formatReal(x * 1e6) + "us";
  }
  llvm_unreachable("unknown format");
}

static std::string describeBounds(const RealRange &r) {
  // 0 reads the same in every unit.
  auto bound = [&](double x) {
    return x == 0 ? std::string("0") : show(x, r.shown);
  };
  if (std::isinf(r.max))
    return formatv("{0} {1}", r.minExclusive ? ">" : ">=", bound(r.min));
  return formatv("in {0}{1}, {2}{3}", r.minExclusive ? "(" : "[", bound(r.min),
                 bound(r.max), r.maxExclusive ? ")" : "]");
}

//===----------------------------------------------------------------------===//
// The checker
//===----------------------------------------------------------------------===//

namespace {

class PlanChecker {
public:
  PlanChecker(const PlanSpec &plan, DiagEmitter &diag,
              const llvm::StringSet<> &unchecked)
      : plan(plan), diag(diag), unchecked(unchecked) {
    skipDefaultsOfUncheckedKeys();
  }

  bool run() {
    unsigned errorsBefore = diag.numErrors();
    checkRanges();
    checkModel();
    checkRecipe();
    checkMesh();
    checkTensor();
    checkPipeline();
    checkOffload();
    checkNoEffect();
    return diag.numErrors() == errorsBefore;
  }

private:
  void skipDefaultsOfUncheckedKeys();
  void checkRanges();
  void checkModel();
  void checkRecipe();
  /// Whether the tensor groups tile the cluster (an error if not; true when
  /// a key it reads is already wrong).
  bool checkTensorGroups();
  /// Whether the pipeline's stages divide the ranks the tensor groups
  /// leave (an error if not).
  bool checkPipelineRanks();
  void checkMesh();
  void checkTensor();
  void checkPipeline();
  void checkOffload();
  void checkNoEffect();

  /// Whether none of `paths`, nor a key around or inside one, is known to be
  /// wrong: a check that reads a wrong value would only echo that error.
  bool reads(llvm::ArrayRef<StringRef> paths) const;
  /// Whether the user wrote the key down (not a default, not the builder).
  bool written(StringRef path) const { return plan.locOf(path).isValid(); }
  /// Where the key was written, or the nearest enclosing key that was: a
  /// preset's `model.hidden` is reported at the preset.
  SMLoc locOf(StringRef path) const;
  /// The first of `paths` that was written, else the first.
  StringRef firstWritten(std::initializer_list<StringRef> paths) const;

  mlir::InFlightDiagnostic error(StringRef path, const llvm::Twine &message) {
    return diag.error(locOf(path), message);
  }
  void note(mlir::InFlightDiagnostic &d, StringRef path,
            const llvm::Twine &message) {
    if (written(path))
      d.attachNote(diag.loc(plan.locOf(path))) << message.str();
  }
  void warnIfGiven(StringRef path, const llvm::Twine &message) {
    if (plan.isGiven(path) && reads({path}))
      diag.warning(plan.locOf(path), message);
  }
  void noteSharding(mlir::InFlightDiagnostic &d) {
    note(d, "parallel.sharding",
         formatv("sharding is {0} here", stringify(plan.parallel.sharding)));
  }

  const PlanSpec &plan;
  DiagEmitter &diag;
  /// Grows as range checks fail, so later checks do not build on bad values.
  llvm::StringSet<> unchecked;
};

} // namespace

bool PlanChecker::reads(llvm::ArrayRef<StringRef> paths) const {
  for (StringRef path : paths)
    for (StringRef bad : unchecked.keys())
      if (!path.empty() &&
          (path == bad || (path.starts_with(bad) && path[bad.size()] == '.') ||
           (bad.starts_with(path) && bad[path.size()] == '.')))
        return false;
  return true;
}

SMLoc PlanChecker::locOf(StringRef path) const {
  for (;;) {
    SMLoc loc = plan.locOf(path);
    if (loc.isValid())
      return loc;
    size_t dot = path.rfind('.');
    if (dot == StringRef::npos)
      return SMLoc();
    path = path.take_front(dot);
  }
}

StringRef
PlanChecker::firstWritten(std::initializer_list<StringRef> paths) const {
  for (StringRef path : paths)
    if (written(path))
      return path;
  return *paths.begin();
}

/// A key applyDerivedDefaults fills in, and the keys it reads to do so.
struct DerivedDefault {
  StringRef path;
  std::array<StringRef, 6> sources; // unused ones empty
};
static const DerivedDefault derivedDefaults[] = {
    {"parallel.mesh",
     {"parallel.sharding", "cluster.nodes", "cluster.gpus_per_node",
      "parallel.tensor", "parallel.pipeline"}},
    {"parallel.optimizer_step", {"parallel.offload.optimizer"}},
    {"train.loss_scale", {"train.precision"}},
    {"model.kv_heads", {"model.heads"}},
    {"model.intermediate", {"model.hidden"}},
    {"train.grad_accum",
     {"train.global_batch", "train.micro_batch", "cluster.nodes",
      "cluster.gpus_per_node", "parallel.tensor", "parallel.pipeline"}},
    {"cluster.host_bandwidth", {"cluster.gpu"}},
    {"cluster.host_cores", {"cluster.gpu"}},
};

// A default derived from a wrong key is no more reliable than that key.
void PlanChecker::skipDefaultsOfUncheckedKeys() {
  for (const DerivedDefault &derived : derivedDefaults)
    if (!plan.isGiven(derived.path) && !reads(derived.sources))
      unchecked.insert(derived.path);
}

/// shard_grad_op, full_shard and hybrid_shard shard gradients and parameters;
/// no_shard shards nothing and zero1 only the optimizer state.
static bool shardsGradients(Sharding s) {
  return s != Sharding::NoShard && s != Sharding::Zero1;
}

void PlanChecker::checkRanges() {
  for (const IntegerRange &range : integerRanges) {
    if ((range.applies && !range.applies(plan)) || !reads({range.path}))
      continue;
    int64_t value = range.get(plan);
    if (value < range.min)
      error(range.path, formatv("'{0}' must be >= {1}, got {2}", range.path,
                                range.min, value));
    else if (value > range.max)
      error(range.path,
            formatv("'{0}' must be <= {1}, got {2}{3}", range.path, range.max,
                    value,
                    range.whyMax ? std::string(": ") + range.whyMax : ""));
    else
      continue;
    unchecked.insert(range.path);
  }

  for (const RealRange &range : realRanges) {
    if ((range.applies && !range.applies(plan)) || !reads({range.path}))
      continue;
    double value = range.get(plan);
    // Written so that NaN (which the C++ builder can set) fails too.
    bool aboveMin = range.minExclusive ? value > range.min : value >= range.min;
    bool belowMax = range.maxExclusive ? value < range.max : value <= range.max;
    if (aboveMin && belowMax)
      continue;
    // Sizes that fail are <= 0, so showing them as bytes cannot overflow.
    error(range.path, formatv("'{0}' must be {1}, got {2}", range.path,
                              describeBounds(range), show(value, range.shown)));
    unchecked.insert(range.path);
  }

  // A tensor degree that does not tile the cluster is as wrong as one out
  // of range, and the default mesh is derived from it.
  if (!checkTensorGroups()) {
    unchecked.insert("parallel.tensor");
    if (!plan.isGiven("parallel.mesh"))
      unchecked.insert("parallel.mesh");
  }
  if (!checkPipelineRanks()) {
    unchecked.insert("parallel.pipeline");
    if (!plan.isGiven("parallel.mesh"))
      unchecked.insert("parallel.mesh");
  }

  const ParallelSpec &p = plan.parallel;
  if (reads({"parallel.mesh"}) &&
      (p.meshReplicate < 1 || p.meshShard < 1 || p.meshReplicate > maxCount ||
       p.meshShard > maxCount)) {
    error("parallel.mesh",
          formatv("'parallel.mesh' dimensions must be in [1, {0}], got {1}",
                  maxCount, formatMesh(p.meshReplicate, p.meshShard)));
    unchecked.insert("parallel.mesh");
  }
}

void PlanChecker::checkModel() {
  const ModelSpec &m = plan.model;
  if (!reads({"model"}))
    return;

  // The planner counts bytes in int64_t: 16 bytes of optimizer state per
  // parameter and the products it forms need headroom below 2^63.
  double h = m.hidden,
         params =
             2.0 * m.vocab * h + double(m.maxSeqLen) * h +
             double(m.layers) * (4 * h * h + 3 * h * double(m.intermediate));
  if (params > 1e15) {
    error("model", formatv("'model' has about {0} parameters, more than the "
                           "planner can count in 64-bit bytes (at most 1e15)",
                           formatReal(std::round(params / 1e13) * 1e13)));
    return;
  }

  if (m.hidden % m.heads != 0) {
    StringRef at = firstWritten({"model.heads", "model.hidden"});
    auto d = error(at, formatv("'model.hidden' ({0}) is not divisible by "
                               "'model.heads' ({1}): each attention head gets "
                               "hidden / heads dimensions",
                               m.hidden, m.heads));
    note(d, at == "model.heads" ? "model.hidden" : "model.heads",
         "the other size is set here");
    return;
  }
  if (m.family != ModelFamily::Llama)
    return;
  if (m.heads % m.kvHeads != 0) {
    StringRef at = firstWritten({"model.kv_heads", "model.heads"});
    auto d = error(at, formatv("'model.heads' ({0}) is not divisible by "
                               "'model.kv_heads' ({1}): grouped-query "
                               "attention shares each key/value head among "
                               "heads / kv_heads query heads",
                               m.heads, m.kvHeads));
    note(d, at == "model.kv_heads" ? "model.heads" : "model.kv_heads",
         "the other count is set here");
  }
  if (m.headDim() % 2 != 0) {
    StringRef at = firstWritten({"model.heads", "model.hidden"});
    error(at, formatv("a llama head has hidden / heads = {0} dimensions, an "
                      "odd number: RoPE rotates pairs of dimensions",
                      m.headDim()));
  }
  if (m.ropeScaling &&
      reads({"model.rope_scaling.low_freq_factor",
             "model.rope_scaling.high_freq_factor"}) &&
      !(m.ropeScaling->highFreqFactor > m.ropeScaling->lowFreqFactor))
    error("model.rope_scaling.high_freq_factor",
          formatv("'model.rope_scaling' high_freq_factor ({0}) must be "
                  "greater than low_freq_factor ({1})",
                  formatReal(m.ropeScaling->highFreqFactor),
                  formatReal(m.ropeScaling->lowFreqFactor)));
}

void PlanChecker::checkRecipe() {
  const ModelSpec &m = plan.model;
  const TrainSpec &t = plan.train;
  // global_batch = micro_batch x ranks x grad_accum, with grad_accum derived
  // from it when not given.
  if (plan.isGiven("train.global_batch") &&
      reads({"train.global_batch", "train.micro_batch", "train.grad_accum",
             "cluster.nodes", "cluster.gpus_per_node", "parallel.tensor",
             "parallel.pipeline"})) {
    // The ranks of one tensor group, and the stages of one pipeline, read
    // the same micro-batch; readable degrees tile the cluster
    // (checkRanges), so they divide the world.
    int64_t ranks = plan.parallel.dataParallelRanks(plan.cluster.worldSize());
    StringRef ranksName = plan.parallel.tensor * plan.parallel.pipeline > 1
                              ? "data-parallel ranks"
                              : "ranks";
    int64_t perMicroBatch = t.microBatch * ranks;
    if (!plan.isGiven("train.grad_accum") && t.globalBatch % perMicroBatch) {
      int64_t below = t.globalBatch / perMicroBatch * perMicroBatch;
      std::string nearest =
          below == 0 ? formatv("the smallest is {0}", perMicroBatch).str()
                     : formatv("the nearest are {0} and {1}", below,
                               below + perMicroBatch)
                           .str();
      auto d = error("train.global_batch",
                     formatv("'train.global_batch' = {0} is not a multiple of "
                             "micro_batch x {5} = {1} x {2} = {3}: no whole "
                             "number of micro-batches per step makes it ({4})",
                             t.globalBatch, t.microBatch, ranks, perMicroBatch,
                             nearest, ranksName));
      note(d, "train.micro_batch", "micro_batch is set here");
    } else if (plan.isGiven("train.grad_accum") &&
               t.globalBatch != perMicroBatch * t.gradAccum) {
      auto d = error("train.global_batch",
                     formatv("'train.global_batch' = {0}, but micro_batch x "
                             "{5} x grad_accum = {1} x {2} x {3} = {4}; "
                             "give one of global_batch and grad_accum",
                             t.globalBatch, t.microBatch, ranks, t.gradAccum,
                             perMicroBatch * t.gradAccum, ranksName));
      note(d, "train.grad_accum", "grad_accum is set here");
    }
  }
  // The schedule holds every unit's forward and backward for every
  // micro-batch: bounded, so that compiling a plan takes seconds, not
  // minutes and gigabytes (the embedding and the head are units too).
  if (reads({"model.layers", "train.grad_accum"}) &&
      (m.layers + 2) * t.gradAccum > maxUnitMicroBatches) {
    auto d = error("train.grad_accum",
                   formatv("'train.grad_accum' = {0} with {1} units makes a "
                           "step program of {2} unit-micro-batches, more than "
                           "the {3} a step may hold; accumulate fewer, "
                           "larger micro-batches (train.micro_batch)",
                           t.gradAccum, m.layers + 2,
                           (m.layers + 2) * t.gradAccum, maxUnitMicroBatches));
    if (written("model.layers"))
      note(d, "model.layers", "the layers are set here");
  }
  if (reads({"train.seq_len", "model.max_seq_len"}) && t.seqLen > m.maxSeqLen) {
    auto d = error("train.seq_len",
                   formatv("'train.seq_len' is {0}, more than the model's "
                           "max_seq_len of {1}: the model has no positions "
                           "past it; lower seq_len, or raise model.max_seq_len "
                           "to extend the context",
                           t.seqLen, m.maxSeqLen));
    if (written("model.max_seq_len"))
      note(d, "model.max_seq_len", "max_seq_len is set here");
    else if (!m.preset.empty())
      note(d, "model",
           formatv("max_seq_len {0} comes from preset '{1}'", m.maxSeqLen,
                   m.preset));
  }

  if (reads({"model", "train.micro_batch", "train.seq_len"})) {
    double widest = std::max({m.hidden, m.intermediate, m.vocab});
    double elements = double(t.microBatch) * double(t.seqLen) * widest;
    if (elements > 0x1p50)
      error(firstWritten({"train.micro_batch", "train.seq_len"}),
            formatv("one micro-batch of {0} x {1} tokens makes activations "
                    "of about {2} elements, more than the planner can count "
                    "in 64-bit bytes (at most 2^50)",
                    t.microBatch, t.seqLen, formatReal(elements)));
  }

  if (plan.isGiven("train.grad_dtype") &&
      reads({"train.precision", "train.grad_dtype"})) {
    DType working = workingDtype(t.precision);
    if (t.gradDtype != DType::F32 && t.gradDtype != working) {
      auto d = error(
          "train.grad_dtype",
          t.precision == Precision::FP32
              ? formatv("grad_dtype = {0} needs mixed precision: fp32 "
                        "training keeps fp32 gradients",
                        stringify(t.gradDtype))
                    .str()
              : formatv("grad_dtype = {0} is neither fp32 nor the working "
                        "type of {1} ({2})",
                        stringify(t.gradDtype), stringify(t.precision),
                        stringify(working))
                    .str());
      note(d, "train.precision",
           formatv("precision is {0} here", stringify(t.precision)));
    }
  }

  if (!reads({"train.precision", "train.loss_scale"}))
    return;
  bool fp16 = t.precision == Precision::FP16Mixed;
  bool scales = t.lossScale.kind != LossScaleKind::None;
  if (fp16 && !scales) {
    StringRef at = firstWritten({"train.loss_scale", "train.precision"});
    auto d = error(at, "fp16_mixed needs loss scaling: fp16 cannot represent "
                       "gradients below about 6e-8, so small ones flush to "
                       "zero; use loss_scale = dynamic (the default with "
                       "fp16_mixed) or static(N), or precision = bf16_mixed");
    if (at == "train.loss_scale")
      note(d, "train.precision", "precision is fp16_mixed here");
  } else if (!fp16 && scales) {
    auto d = error(
        "train.loss_scale",
        formatv("loss_scale = {0} needs precision = fp16_mixed: only fp16 "
                "gradients underflow (bf16 and fp32 share fp32's exponent "
                "range); remove loss_scale, or use precision = fp16_mixed",
                stringify(t.lossScale.kind)));
    note(d, "train.precision",
         formatv("precision is {0} here", stringify(t.precision)));
  }
}

/// The tensor degrees a cluster takes: the divisors of gpus_per_node (a
/// group inside one node) and gpus_per_node times a divisor of nodes (a
/// group of whole nodes) up to the key's range, ascending.
static std::vector<int64_t> validTensorDegrees(int64_t nodes,
                                               int64_t gpusPerNode) {
  auto divisors = [](int64_t n) {
    std::vector<int64_t> low, high;
    for (int64_t d = 1; d <= n / d; ++d)
      if (n % d == 0) {
        low.push_back(d);
        if (d != n / d)
          high.push_back(n / d);
      }
    low.insert(low.end(), high.rbegin(), high.rend());
    return low;
  };
  std::vector<int64_t> degrees = divisors(gpusPerNode);
  for (int64_t k : divisors(nodes))
    if (k > 1 && gpusPerNode * k <= kMaxCount) // 'parallel.tensor''s range
      degrees.push_back(gpusPerNode * k);
  return degrees;
}

static std::string joinDegrees(llvm::ArrayRef<int64_t> degrees) {
  std::string text;
  for (int64_t d : degrees)
    text += (text.empty() ? "" : ", ") + std::to_string(d);
  return text;
}

bool PlanChecker::checkTensorGroups() {
  if (!reads({"parallel.tensor", "cluster.nodes", "cluster.gpus_per_node"}))
    return true;
  const ClusterSpec &c = plan.cluster;
  int64_t tensor = plan.parallel.tensor;
  // A group inside one node, or of whole nodes: each group's ranks are
  // consecutive (the mesh's innermost axis), so either keeps every group
  // on the same kind of link.
  bool tiles = tensor <= c.gpusPerNode
                   ? c.gpusPerNode % tensor == 0
                   : tensor % c.gpusPerNode == 0 &&
                         c.nodes % (tensor / c.gpusPerNode) == 0;
  if (tiles)
    return true;
  auto d =
      error("parallel.tensor",
            formatv("tensor = {0} does not tile the cluster's {1} x {2} "
                    "ranks: a tensor group is consecutive ranks that "
                    "must sit inside one node (tensor divides "
                    "gpus_per_node) or span whole nodes (a multiple of "
                    "gpus_per_node that divides the ranks); valid "
                    "degrees here: {3}",
                    tensor, c.nodes, c.gpusPerNode,
                    joinDegrees(validTensorDegrees(c.nodes, c.gpusPerNode))));
  note(d, "cluster.gpus_per_node", "the cluster's size is set here");
  return false;
}

void PlanChecker::checkMesh() {
  if (!reads({"parallel.mesh", "parallel.sharding", "cluster.nodes",
              "cluster.gpus_per_node", "parallel.tensor", "parallel.pipeline"}))
    return;
  const ClusterSpec &c = plan.cluster;
  const ParallelSpec &p = plan.parallel;
  // Both are in [1, 2^31) by now, so neither product overflows.
  int64_t world = c.nodes * c.gpusPerNode;
  // The ranks that read different data: the tensor groups and the
  // pipelines split the world.
  int64_t ranks = p.dataParallelRanks(world);
  bool split = p.tensor * p.pipeline > 1;
  std::string mesh = formatMesh(p.meshReplicate, p.meshShard);
  StringRef sharding = stringify(p.sharding);
  bool meshWritten = plan.isGiven("parallel.mesh");

  if (p.meshReplicate * p.meshShard != ranks) {
    auto d = error(
        "parallel.mesh",
        split ? formatv("mesh {0} has {1} data-parallel ranks, but the "
                        "cluster's {2} ranks (nodes {3} x gpus_per_node {4}) "
                        "in {5} make {6}; {7}replicate x shard x tensor must "
                        "equal nodes x gpus_per_node",
                        mesh, p.meshReplicate * p.meshShard, world, c.nodes,
                        c.gpusPerNode,
                        p.pipeline > 1
                            ? formatv("tensor groups of {0} and pipelines of "
                                      "{1}",
                                      p.tensor, p.pipeline)
                                  .str()
                            : formatv("tensor groups of {0}", p.tensor).str(),
                        ranks, p.pipeline > 1 ? "pipeline x " : "")
                    .str()
              : formatv("mesh {0} has {1} ranks, but the cluster has {2} "
                        "(nodes {3} x gpus_per_node {4}); replicate x "
                        "shard must equal nodes x gpus_per_node",
                        mesh, p.meshReplicate * p.meshShard, world, c.nodes,
                        c.gpusPerNode)
                    .str());
    note(d, "cluster.gpus_per_node", "the cluster's size is set here");
    note(d, "parallel.tensor", formatv("tensor is {0} here", p.tensor));
    return;
  }

  if (p.sharding == Sharding::NoShard && p.meshShard > 1) {
    auto d = error(meshWritten ? "parallel.mesh" : "parallel.sharding",
                   formatv("no_shard keeps a full replica on every rank, so "
                           "its mesh is ({0}, 1), got {1}; use mesh = ({0}, "
                           "1) or leave mesh out, or a sharding that shards "
                           "(zero1, shard_grad_op, full_shard, hybrid_shard)",
                           ranks, mesh));
    noteSharding(d);
    return;
  }

  if (p.sharding != Sharding::NoShard && p.meshShard == 1 && ranks > 1) {
    if (meshWritten) {
      auto d = error("parallel.mesh",
                     formatv("{0} over mesh {1} shards over groups of one "
                             "rank, so nothing is sharded: that is no_shard; "
                             "give a mesh with shard > 1, or leave mesh out",
                             sharding, mesh));
      noteSharding(d);
    } else if (split) {
      auto d = error("parallel.sharding",
                     formatv("hybrid_shard shards within a node, and with "
                             "tensor = {0} on gpus_per_node = {1} each node "
                             "holds one data-parallel rank: there is nothing "
                             "to shard within it; use full_shard to shard "
                             "across the nodes, or a smaller tensor",
                             p.tensor, c.gpusPerNode));
      note(d, "parallel.tensor", formatv("tensor is {0} here", p.tensor));
    } else {
      auto d = error("parallel.sharding",
                     "hybrid_shard shards within a node, and with "
                     "gpus_per_node = 1 there is nothing to shard; use "
                     "full_shard to shard across the nodes, or give mesh = "
                     "(replicate, shard) with shard > 1");
      note(d, "cluster.gpus_per_node", "gpus_per_node is 1 here");
    }
    return;
  }

  if (p.sharding == Sharding::HybridShard && p.meshReplicate == 1) {
    if (meshWritten) {
      auto d = error("parallel.mesh",
                     formatv("hybrid_shard over mesh {0} has one shard group "
                             "and nothing to replicate across: that is "
                             "full_shard; use sharding = full_shard, or a "
                             "mesh with replicate > 1",
                             mesh));
      noteSharding(d);
    } else {
      auto d = error("parallel.sharding",
                     "hybrid_shard on one node is full_shard: it replicates "
                     "across nodes, and there is only one; use sharding = "
                     "full_shard, or give mesh = (replicate, shard) with "
                     "replicate > 1 to replicate within the node");
      note(d, "cluster.nodes", "nodes is 1 here");
    }
    return;
  }

  if (p.sharding == Sharding::FullShard && p.meshReplicate > 1) {
    auto d = error("parallel.mesh",
                   formatv("full_shard shards over every rank, so its mesh "
                           "is (1, {0}), got {1}: replicating over {2} groups "
                           "of {3} is hybrid_shard; use sharding = "
                           "hybrid_shard",
                           ranks, mesh, p.meshReplicate, p.meshShard));
    noteSharding(d);
  }
}

void PlanChecker::checkTensor() {
  const ParallelSpec &p = plan.parallel;
  if (!reads({"parallel.tensor", "parallel.sequence_parallel"}))
    return;
  if (p.sequenceParallel && p.tensor == 1) {
    auto d = error("parallel.sequence_parallel",
                   "sequence_parallel = true needs tensor > 1: sequence "
                   "parallelism splits the norms, dropout and residuals "
                   "along the sequence over the ranks of a tensor group, "
                   "and with tensor = 1 there is none; set tensor, or "
                   "remove sequence_parallel");
    note(d, "parallel.tensor", "tensor is 1 here");
    return;
  }
  if (p.tensor == 1)
    return;

  const ModelSpec &m = plan.model;
  const ClusterSpec &c = plan.cluster;
  const TrainSpec &t = plan.train;
  bool modelKnown = reads({"model"});
  if (modelKnown && m.family == ModelFamily::Bert) {
    auto d = error("parallel.tensor",
                   "tensor parallelism splits Llama and GPT-2 blocks; BERT's "
                   "are not split: use tensor = 1 and data parallelism "
                   "(BERT-large's 340M parameters fit one GPU)");
    note(d, "model", "the model is BERT here");
    return;
  }
  if (plan.lora) {
    auto d = error("parallel.tensor",
                   "LoRA with tensor parallelism is not supported yet: the "
                   "adapters of a divided layer would be divided with it "
                   "(lora_B of a column-parallel layer by its rows, lora_A "
                   "of a row-parallel one by its columns), which no pass "
                   "does; use tensor = 1 (a LoRA run's frozen base shards "
                   "with full_shard)");
    note(d, "model.lora", "the adapters are set here");
    return;
  }

  // What the model and the sequence must divide by, for the message that
  // names the degrees that work.
  struct Split {
    StringRef path;
    int64_t size;
    const char *why;
  };
  llvm::SmallVector<Split, 4> splits;
  if (modelKnown) {
    splits.push_back({"model.heads", m.heads,
                      "each rank computes heads / tensor attention heads "
                      "(q, k, v are split by heads, column-parallel, and o "
                      "row-parallel)"});
    if (m.family == ModelFamily::Llama && m.kvHeads != m.heads)
      splits.push_back({"model.kv_heads", m.kvHeads,
                        "each rank holds kv_heads / tensor key/value heads "
                        "with the query heads that share them (Megatron's "
                        "num_query_groups)"});
    splits.push_back({"model.intermediate", m.intermediate,
                      "the MLP's input projections are split "
                      "column-parallel and its output projection "
                      "row-parallel, by intermediate / tensor"});
  }
  if (p.sequenceParallel && reads({"train.seq_len"}))
    splits.push_back({"train.seq_len", t.seqLen,
                      "sequence parallelism gives each rank of a tensor "
                      "group seq_len / tensor tokens of the norms, dropout "
                      "and residuals"});
  auto divides = [&](int64_t degree) {
    return llvm::all_of(splits,
                        [&](const Split &s) { return s.size % degree == 0; });
  };
  for (const Split &split : splits) {
    if (split.size % p.tensor == 0)
      continue;
    std::string valid;
    if (reads({"cluster.nodes", "cluster.gpus_per_node"})) {
      std::vector<int64_t> degrees;
      for (int64_t d : validTensorDegrees(c.nodes, c.gpusPerNode))
        if (divides(d))
          degrees.push_back(d);
      valid = "; degrees that divide the model and tile the cluster: " +
              joinDegrees(degrees);
    }
    auto d = error("parallel.tensor",
                   formatv("'{0}' ({1}) is not divisible by tensor = {2}: "
                           "{3}{4}",
                           split.path, split.size, p.tensor, split.why, valid));
    if (written(split.path))
      note(d, split.path, formatv("{0} is set here", split.path));
    else if (split.path.starts_with("model.") && !m.preset.empty())
      note(d, "model",
           formatv("{0} = {1} comes from preset '{2}'",
                   split.path.drop_front(6), split.size, m.preset));
  }

  // Across nodes the activation collectives leave NVLink: allowed, but say
  // what it costs.
  if (!modelKnown ||
      !reads({"cluster", "train.micro_batch", "train.seq_len",
              "train.grad_accum", "train.precision",
              "train.activation_checkpointing"}) ||
      p.tensor <= c.gpusPerNode)
    return;
  // Each block's forward all-reduces after attention and after the MLP, and
  // its backward once for each of their inputs; full checkpointing reruns
  // the forward's. Sequence parallelism's all-gather and reduce-scatter move
  // what one all-reduce does.
  int64_t perBlock = t.activationCheckpointing == Checkpointing::Full ? 6 : 4;
  double elements = double(t.microBatch) * double(t.seqLen) * double(m.hidden);
  if (elements > 0x1p50) // checkRecipe's error
    return;
  int64_t bytes =
      storageBytes(workingStorage(t.precision), static_cast<int64_t>(elements));
  ClusterLinks links{c.gpusPerNode, c.device.nvlinkBandwidth,
                     c.device.pcieBandwidth, c.device.linkLatency,
                     c.interNodeBandwidth};
  double perStep = double(perBlock) * double(m.layers) * double(t.gradAccum);
  double across =
      perStep * collectiveSeconds(CollectiveKind::AllReduce, bytes,
                                  placeRing(links, p.tensor, p.tensor - 1));
  double inside = perStep * collectiveSeconds(CollectiveKind::AllReduce, bytes,
                                              placeRing(links, p.tensor, 0));
  diag.warning(
      locOf("parallel.tensor"),
      formatv("tensor = {0} spans {1} nodes (gpus_per_node = {2}): each "
              "block's {3} activation all-reduces per micro-batch ({4} each) "
              "cross the inter-node network at {5} instead of {6} at {7}, "
              "about {8} per step against {9} on one node's links; "
              "tensor parallelism is usually kept within a node (tensor <= "
              "{2}) with data parallelism across nodes",
              p.tensor, p.tensor / c.gpusPerNode, c.gpusPerNode, perBlock,
              rt::support::formatBytes(bytes),
              formatBandwidth(c.interNodeBandwidth),
              links.nvlinkBandwidth > 0 ? "NVLink" : "PCIe",
              formatBandwidth(links.intraNodeBandwidth()),
              rt::support::formatSeconds(across),
              rt::support::formatSeconds(inside)));
}

bool PlanChecker::checkPipelineRanks() {
  if (!reads({"parallel.pipeline", "parallel.tensor", "cluster.nodes",
              "cluster.gpus_per_node"}))
    return true;
  const ParallelSpec &p = plan.parallel;
  int64_t perPipeline = plan.cluster.worldSize() / p.tensor;
  if (perPipeline % p.pipeline == 0)
    return true;
  auto d = error("parallel.pipeline",
                 formatv("pipeline = {0} does not divide the cluster's {1} "
                         "ranks{2}: every stage needs the same number of "
                         "ranks",
                         p.pipeline, perPipeline,
                         p.tensor > 1
                             ? formatv(" in tensor groups of {0} ({1} groups)",
                                       p.tensor, perPipeline)
                                   .str()
                             : std::string()));
  note(d, "cluster.gpus_per_node", "the cluster's size is set here");
  return false;
}

void PlanChecker::checkPipeline() {
  const ParallelSpec &p = plan.parallel;
  if (!reads({"parallel.pipeline", "parallel.schedule", "parallel.stages"}))
    return;
  // A schedule or stages without a pipeline is checkNoEffect's warning.
  if (p.pipeline == 1)
    return;

  const ModelSpec &m = plan.model;
  const TrainSpec &t = plan.train;
  bool modelKnown = reads({"model"});

  int64_t chunks = p.pipeline * p.virtualStages;
  std::string chunkWord =
      p.virtualStages > 1
          ? formatv("pipeline x virtual stages = {0} x {1} = {2} model "
                    "chunks",
                    p.pipeline, p.virtualStages, chunks)
                .str()
          : formatv("pipeline = {0} stages", p.pipeline).str();
  if (!p.stages.empty()) {
    if (static_cast<int64_t>(p.stages.size()) != chunks) {
      error("parallel.stages",
            formatv("'parallel.stages' lists {0} layer counts, but there are "
                    "{1}: give one per {2}",
                    p.stages.size(), chunkWord,
                    p.virtualStages > 1 ? "model chunk" : "stage"));
      return;
    }
    int64_t total = 0;
    for (int64_t layers : p.stages) {
      if (layers < 1) {
        error("parallel.stages",
              formatv("'parallel.stages' gives a stage {0} transformer "
                      "blocks: every stage needs at least one",
                      layers));
        return;
      }
      total += layers;
    }
    if (modelKnown && reads({"model.layers"}) && total != m.layers) {
      auto d = error("parallel.stages",
                     formatv("'parallel.stages' adds up to {0} transformer "
                             "blocks, but the model has {1}",
                             total, m.layers));
      note(d, "model.layers", "the layers are set here");
      return;
    }
  } else if (modelKnown && reads({"model.layers"}) && m.layers < chunks) {
    auto d = error("parallel.pipeline",
                   formatv("{0} need at least as many transformer blocks, "
                           "and the model has {1}",
                           chunkWord, m.layers));
    note(d, "model.layers", "the layers are set here");
    return;
  }

  if (!reads({"train.grad_accum"}))
    return;
  StringRef schedule = stringify(p.schedule);
  if (p.schedule != PipelineSchedule::GPipe && t.gradAccum < p.pipeline) {
    auto d = error(
        "train.grad_accum",
        formatv("schedule = {0} keeps every stage busy with at least "
                "pipeline = {1} micro-batches in flight, and grad_accum = {2} "
                "gives fewer; accumulate at least {1} micro-batches (4-8x "
                "pipeline keeps the bubble small)",
                schedule, p.pipeline, t.gradAccum));
    note(d, "parallel.pipeline", formatv("pipeline is {0} here", p.pipeline));
    return;
  }
  if (p.schedule == PipelineSchedule::Interleaved &&
      t.gradAccum % p.pipeline != 0) {
    auto d = error("train.grad_accum",
                   formatv("the interleaved schedule runs micro-batches in "
                           "rounds of pipeline = {0}, and grad_accum = {1} is "
                           "not a multiple of it",
                           p.pipeline, t.gradAccum));
    note(d, "parallel.pipeline", formatv("pipeline is {0} here", p.pipeline));
    return;
  }
  double bubble = pipelineBubbleFraction(p.schedule, p.pipeline, t.gradAccum,
                                         p.virtualStages);
  if (bubble > 0.25)
    diag.warning(
        locOf("parallel.pipeline"),
        formatv("the pipeline's bubble is {0}% of each step: with pipeline "
                "= {1} and grad_accum = {2} micro-batches every stage idles "
                "for (p - 1) / (m + p - 1){3} of it; more micro-batches{4} "
                "shrink it",
                llvm::format("%.0f", bubble * 100), p.pipeline, t.gradAccum,
                p.virtualStages > 1 ? " / v" : "",
                p.schedule == PipelineSchedule::Interleaved
                    ? " or more virtual stages"
                    : " or schedule = interleaved(v)"));
}

void PlanChecker::checkOffload() {
  const ParallelSpec &p = plan.parallel;
  const OffloadSpec &o = p.offload;
  StringRef sharding = stringify(p.sharding);
  bool sharded = shardsGradients(p.sharding);

  if (reads({"parallel.offload.params", "parallel.sharding"}) &&
      o.params == MemorySpace::Host && !sharded) {
    auto d = error("parallel.offload.params",
                   formatv("offloading parameters to the CPU needs them "
                           "sharded (shard_grad_op, full_shard, hybrid_shard), "
                           "which brings them to the device one wrapped unit "
                           "at a time: with {0} every rank needs all of them "
                           "on the device at once; use sharding = full_shard",
                           sharding));
    noteSharding(d);
  }

  if (reads({"parallel.offload.grads", "parallel.sharding",
             "parallel.optimizer_step"}) &&
      o.grads == MemorySpace::Host && !sharded &&
      p.optimizerStep == MemorySpace::Device) {
    auto d = error("parallel.offload.grads",
                   formatv("offloading gradients to the CPU needs them "
                           "sharded (shard_grad_op, full_shard, hybrid_shard) "
                           "or the optimizer step on the CPU (offload."
                           "optimizer = cpu moves it there): with {0} the "
                           "full gradient would cross PCIe only to come back "
                           "for the step",
                           sharding));
    noteSharding(d);
    note(d, "parallel.optimizer_step", "optimizer_step is device here");
  }

  if (!reads({"parallel.offload.optimizer", "parallel.optimizer_step"}))
    return;
  if (o.optimizer == MemorySpace::Host &&
      p.optimizerStep == MemorySpace::Device) {
    auto d = error("parallel.optimizer_step",
                   "optimizer_step = device with the optimizer state on the "
                   "CPU (offload.optimizer = cpu) would copy the whole state "
                   "to the device and back every step; leave optimizer_step "
                   "out (it follows offload.optimizer) or set it to cpu");
    note(d, "parallel.offload.optimizer",
         "the optimizer state is offloaded "
         "here");
  } else if (o.optimizer == MemorySpace::Device &&
             p.optimizerStep == MemorySpace::Host) {
    auto d = error("parallel.optimizer_step",
                   "optimizer_step = cpu needs the optimizer state on the "
                   "CPU: with it on the device every step would copy the "
                   "whole state to the CPU and back; add offload.optimizer = "
                   "cpu (optimizer_step then defaults to cpu)");
    note(d, "parallel.offload.optimizer",
         "the optimizer state is kept on the device here");
  }
}

void PlanChecker::checkNoEffect() {
  const ParallelSpec &p = plan.parallel;
  StringRef sharding = stringify(p.sharding);
  bool sharded = shardsGradients(p.sharding);
  bool shardingKnown = reads({"parallel.sharding"});

  if (reads({"parallel.pipeline"}) && p.pipeline == 1)
    for (StringRef key : {"schedule", "stages"})
      warnIfGiven(("parallel." + key).str(),
                  formatv("'parallel.{0}' has no effect with pipeline = 1: "
                          "it orders and divides the stages of a pipeline, "
                          "and there is one stage",
                          key));

  if (reads({"parallel.grad_sync", "train.grad_accum"}) &&
      plan.train.gradAccum == 1)
    warnIfGiven("parallel.grad_sync",
                "'parallel.grad_sync' has no effect with grad_accum = 1: "
                "each step has a single micro-batch");

  if (shardingKnown && sharded)
    warnIfGiven("parallel.bucket",
                formatv("'parallel.bucket' has no effect with {0}: sharded "
                        "strategies reduce-scatter each wrapped unit's "
                        "gradients in one collective, so there is nothing to "
                        "bucket; bucket applies to no_shard",
                        sharding));
  else if (shardingKnown && p.sharding == Sharding::Zero1)
    warnIfGiven("parallel.bucket",
                "'parallel.bucket' has no effect with zero1: each wrapped "
                "unit's gradient is reduce-scattered on its own, because a "
                "reduce-scatter over a bucket of several units would hand "
                "each rank a slice that crosses unit boundaries; bucket "
                "applies to no_shard");

  if (shardingKnown && !sharded) {
    for (StringRef key :
         {"forward_prefetch", "backward_prefetch", "max_inflight_gathers"})
      warnIfGiven(("parallel." + key).str(),
                  formatv("'parallel.{0}' has no effect with {1}: parameters "
                          "are never gathered, so there is nothing to "
                          "prefetch",
                          key, sharding));
  } else if (shardingKnown && p.sharding == Sharding::ShardGradOp) {
    warnIfGiven("parallel.backward_prefetch",
                "'parallel.backward_prefetch' has no effect with "
                "shard_grad_op: parameters stay gathered from forward to "
                "backward, so backward gathers nothing");
  }

  if (reads({"cluster.nodes"}) && plan.cluster.nodes == 1)
    warnIfGiven("cluster.inter_node_bandwidth",
                "'cluster.inter_node_bandwidth' has no effect with nodes = "
                "1: no traffic leaves the node");

  const ModelSpec &m = plan.model;
  if (reads({"model"}) && m.family == ModelFamily::Bert &&
      m.bertHead != BertHead::SequenceClassification)
    warnIfGiven("model.num_labels",
                formatv("'model.num_labels' has no effect with head = {0}: "
                        "only sequence_classification has labels",
                        stringify(m.bertHead)));

  const TrainSpec &t = plan.train;
  if (reads({"train.steps", "train.lr_schedule"}) && t.steps > 0 &&
      t.lrSchedule.warmupSteps >= t.steps)
    warnIfGiven("train.lr_schedule.warmup",
                formatv("warmup of {0} steps is not shorter than steps = {1}: "
                        "the learning rate schedule never gets past warmup",
                        t.lrSchedule.warmupSteps, t.steps));
}

bool plan::checkPlan(const PlanSpec &plan, DiagEmitter &diag,
                     const llvm::StringSet<> &unchecked) {
  return PlanChecker(plan, diag, unchecked).run();
}

bool plan::checkPlan(const PlanSpec &plan, DiagEmitter &diag) {
  return PlanChecker(plan, diag, {}).run();
}
