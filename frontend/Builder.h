//===- Builder.h - Writing a plan in C++ ------------------------*- C++ -*-===//
//
// A fluent C++ API for the .plan language, for programs that embed the
// compiler:
//
//   std::optional<plan::PlanSpec> spec =
//       plan::PlanBuilder("llama3_8b_fsdp")
//           .model("llama3_8b")
//           .cluster(plan::ClusterBuilder().gpusPerNode(8).gpu("h100_sxm")
//                        .hostMemory(plan::GiB(1024)))
//           .train(plan::TrainBuilder()
//                      .optimizer(plan::adamw(2e-5).betas(0.9, 0.95))
//                      .microBatch(1).seqLen(8192)
//                      .precision(plan::Precision::BF16Mixed))
//           .parallel(plan::ParallelBuilder()
//                         .sharding(plan::Sharding::FullShard)
//                         .offloadParams(plan::MemorySpace::Host))
//           .build(diag);
//
// Each setter is one .plan key, named as the key in camelCase (`gpusPerNode`
// sets `gpus_per_node`; `offloadParams` sets `offload.params`), and the
// builders write exactly the syntax tree the parser would produce for those
// keys, with no source locations; `build` hands it to `analyzePlan`. So a
// builder plan and the equivalent .plan file go through one analyzer: the
// same schema (required keys, preset and device names), the same defaults
// (`applyDerivedDefaults`), the same range and contradiction checks
// (`checkPlan`) and the same messages. Keys a builder set are recorded in
// `PlanSpec::locs` with an invalid SMLoc, and diagnostics carry the
// DiagEmitter's fallback location. Setting a key twice keeps the last value.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_FRONTEND_BUILDER_H
#define PLAN_FRONTEND_BUILDER_H

#include "frontend/Diagnostics.h"
#include "frontend/PlanSpec.h"
#include "frontend/Syntax.h"

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>

namespace plan {

//===----------------------------------------------------------------------===//
// Units, as in .plan quantities: sizes in bytes, bandwidths in bytes/s.
//===----------------------------------------------------------------------===//

constexpr int64_t KiB(int64_t n) { return n << 10; }
constexpr int64_t MiB(int64_t n) { return n << 20; }
constexpr int64_t GiB(int64_t n) { return n << 30; }
constexpr int64_t TiB(int64_t n) { return n << 40; }
constexpr int64_t KB(int64_t n) { return n * 1000; }
constexpr int64_t MB(int64_t n) { return n * 1000 * 1000; }
constexpr int64_t GB(int64_t n) { return n * 1000 * 1000 * 1000; }
constexpr int64_t TB(int64_t n) { return n * 1000 * 1000 * 1000 * 1000; }
/// `GB/s`, `TB/s`, `GiB/s`, and network `Gb/s` (1 Gb/s = 0.125 GB/s). Each is
/// one multiplication by the unit's factor, as the analyzer reads `25GB/s`, so
/// both give the same double.
constexpr double GBps(double n) { return n * 1e9; }
constexpr double TBps(double n) { return n * 1e12; }
constexpr double GiBps(double n) { return n * double(int64_t(1) << 30); }
constexpr double Gbps(double n) { return n * (1e9 / 8); }

namespace detail {
/// The items a builder has set so far, as the parser would have produced
/// them. Copyable (syntax trees own their children), so builders are values.
class SyntaxItems {
public:
  SyntaxItems() = default;
  SyntaxItems(const SyntaxItems &other);
  SyntaxItems &operator=(const SyntaxItems &other);
  SyntaxItems(SyntaxItems &&) = default;
  SyntaxItems &operator=(SyntaxItems &&) = default;

  /// Replaces the item `key` or appends it.
  void set(llvm::StringRef key, syntax::Value value);
  bool empty() const { return block.items.empty(); }
  const syntax::Block &getBlock() const { return block; }

private:
  syntax::Block block;
};
} // namespace detail

//===----------------------------------------------------------------------===//
// model
//===----------------------------------------------------------------------===//

/// The value of `model`: a preset, a preset with overrides, or a family with
/// its keys (`model = llama { ... }`).
class ModelBuilder {
public:
  /// A preset by its .plan name ("llama3_8b"); setters then override its keys.
  static ModelBuilder preset(llvm::StringRef name);
  /// A fully explicit model: every key without a default must be set.
  static ModelBuilder family(ModelFamily family);
  /// The keys that describe `spec`: the preset named by `spec.preset` with the
  /// keys where `spec` differs from it, or, without a known preset, the family
  /// with all its keys. Fields that are not keys of the family (rope_theta of
  /// a GPT-2) are left to the analyzer.
  /// With `everyKey`, each key the family has is written, also where it
  /// equals the preset's.
  static ModelBuilder from(const ModelSpec &spec, bool everyKey = false);

  ModelBuilder &vocab(int64_t n);
  ModelBuilder &hidden(int64_t n);
  ModelBuilder &intermediate(int64_t n);
  ModelBuilder &layers(int64_t n);
  ModelBuilder &heads(int64_t n);
  ModelBuilder &kvHeads(int64_t n);
  ModelBuilder &maxSeqLen(int64_t n);
  ModelBuilder &ropeTheta(double theta);
  ModelBuilder &ropeScaling(std::optional<RopeScaling> scaling);
  ModelBuilder &normEps(double eps);
  ModelBuilder &tieEmbeddings(bool tie);
  ModelBuilder &typeVocab(int64_t n);
  ModelBuilder &head(BertHead head);
  ModelBuilder &numLabels(int64_t n);
  /// `lora { rank alpha dropout targets }`, and `base` when `lora` gives
  /// one (empty targets: PEFT's default for the family).
  ModelBuilder &lora(const LoraSpec &lora);

  /// The value of the `model` item.
  syntax::Value toSyntax() const;

private:
  explicit ModelBuilder(std::string name) : name(std::move(name)) {}
  std::string name; // preset or family spelling
  detail::SyntaxItems keys;
};

//===----------------------------------------------------------------------===//
// cluster
//===----------------------------------------------------------------------===//

/// The value of `cluster.gpu`: a device of the table, one with overrides
/// (`gpu = a100_40g { memory = 32GiB }`), or a custom one (`gpu = { ... }`).
class DeviceBuilder {
public:
  /// A device of the table (`lookupDevice`); setters then override its keys.
  static DeviceBuilder named(llvm::StringRef name);
  /// A fully explicit device: every key must be set.
  static DeviceBuilder custom();
  /// `spec` as the table device of its name with the keys where it differs,
  /// or, for a name that is not in the table, as a custom device with all
  /// keys (the analyzer names it).
  static DeviceBuilder from(const DeviceSpec &spec, bool everyKey = false);

  DeviceBuilder &memory(int64_t bytes);
  DeviceBuilder &bf16Tflops(double tflops);
  DeviceBuilder &fp16Tflops(double tflops);
  DeviceBuilder &fp32Tflops(double tflops);
  DeviceBuilder &hbmBandwidth(double bytesPerSecond);
  DeviceBuilder &nvlinkBandwidth(double bytesPerSecond);
  DeviceBuilder &pcieBandwidth(double bytesPerSecond);
  DeviceBuilder &linkLatency(double seconds);

  /// The value of the `gpu` item.
  syntax::Value toSyntax() const;

private:
  explicit DeviceBuilder(std::string name) : name(std::move(name)) {}
  std::string name; // "" for a custom device
  detail::SyntaxItems keys;
};

class ClusterBuilder {
public:
  ClusterBuilder &nodes(int64_t n);
  ClusterBuilder &gpusPerNode(int64_t n);
  /// `gpu = NAME`, a device of the table.
  ClusterBuilder &gpu(llvm::StringRef name);
  ClusterBuilder &gpu(const DeviceBuilder &device);
  /// As `DeviceBuilder::from(device)`.
  ClusterBuilder &gpu(const DeviceSpec &device);
  ClusterBuilder &hostMemory(int64_t bytes);
  ClusterBuilder &interNodeBandwidth(double bytesPerSecond);
  ClusterBuilder &hostBandwidth(double bytesPerSecond);
  ClusterBuilder &hostCores(int64_t cores);

  const syntax::Block &toSyntax() const { return keys.getBlock(); }

private:
  detail::SyntaxItems keys;
};

//===----------------------------------------------------------------------===//
// train
//===----------------------------------------------------------------------===//

/// `adamw(...)` or `sgd(...)`; see `plan::adamw` and `plan::sgd`. Arguments
/// not set take the language's defaults.
class OptimizerBuilder {
public:
  /// AdamW's `betas = (beta1, beta2)` and `eps`.
  OptimizerBuilder &betas(double beta1, double beta2);
  OptimizerBuilder &eps(double eps);
  OptimizerBuilder &weightDecay(double decay);
  /// Which parameters weight decay applies to (default: matrices).
  OptimizerBuilder &decay(WeightDecayScope scope);
  /// SGD's `momentum`.
  OptimizerBuilder &momentum(double momentum);

  syntax::Value toSyntax() const;

private:
  friend OptimizerBuilder adamw(double lr);
  friend OptimizerBuilder sgd(double lr);
  OptimizerBuilder(OptimizerKind kind, double lr);
  OptimizerKind kind;
  detail::SyntaxItems arguments; // named arguments, in call order
};

/// `adamw(lr = ...)`.
OptimizerBuilder adamw(double lr);
/// `sgd(lr = ...)`.
OptimizerBuilder sgd(double lr);

/// `dynamic(initial = ..., growth_interval = ...)`.
LossScaleSpec dynamicLossScale(double initial = 65536.0,
                               int64_t growthInterval = 2000);
/// `static(scale)`.
LossScaleSpec staticLossScale(double scale);
/// `constant` or `constant(warmup = ...)`.
LRScheduleSpec constantSchedule(int64_t warmupSteps = 0);
/// `cosine(warmup = ..., min_lr_ratio = ...)`.
LRScheduleSpec cosineSchedule(int64_t warmupSteps = 0, double minLrRatio = 0.0);
/// `linear(warmup = ..., min_lr_ratio = ...)`.
LRScheduleSpec linearSchedule(int64_t warmupSteps = 0, double minLrRatio = 0.0);

class TrainBuilder {
public:
  TrainBuilder &optimizer(const OptimizerBuilder &optimizer);
  TrainBuilder &microBatch(int64_t sequences);
  TrainBuilder &seqLen(int64_t tokens);
  TrainBuilder &gradAccum(int64_t microBatches);
  TrainBuilder &precision(Precision precision);
  TrainBuilder &lossScale(const LossScaleSpec &scale);
  TrainBuilder &reduceDtype(DType dtype);
  TrainBuilder &gradDtype(DType dtype);
  TrainBuilder &activationCheckpointing(Checkpointing mode);
  /// `grad_clip = N`, or `none` for std::nullopt.
  TrainBuilder &gradClip(std::optional<double> maxNorm);
  TrainBuilder &lrSchedule(const LRScheduleSpec &schedule);
  TrainBuilder &steps(int64_t steps);
  TrainBuilder &seed(int64_t seed);

  const syntax::Block &toSyntax() const { return keys.getBlock(); }

private:
  detail::SyntaxItems keys;
};

//===----------------------------------------------------------------------===//
// parallel
//===----------------------------------------------------------------------===//

class ParallelBuilder {
public:
  ParallelBuilder &sharding(Sharding sharding);
  ParallelBuilder &mesh(int64_t replicate, int64_t shard);
  /// The tensor-parallel degree (`tensor = N`).
  ParallelBuilder &tensor(int64_t degree);
  ParallelBuilder &sequenceParallel(bool enabled);
  /// The pipeline-parallel degree (`pipeline = N`).
  ParallelBuilder &pipeline(int64_t degree);
  /// `schedule = gpipe | 1f1b | interleaved(virtualStages)`.
  ParallelBuilder &schedule(PipelineSchedule schedule,
                            int64_t virtualStages = 1);
  /// `stages = [layers, ...]`, or `balanced` when `layers` is empty.
  ParallelBuilder &stages(llvm::ArrayRef<int64_t> layers);
  /// `wrap = transformer_block` or `wrap = whole_model`.
  ParallelBuilder &wrap(WrapKind kind);
  /// `wrap = min_params(N)`.
  ParallelBuilder &wrapMinParams(int64_t params);
  ParallelBuilder &offloadParams(MemorySpace space);
  ParallelBuilder &offloadGrads(MemorySpace space);
  ParallelBuilder &offloadOptimizer(MemorySpace space);
  ParallelBuilder &optimizerStep(MemorySpace space);
  ParallelBuilder &backwardPrefetch(Prefetch prefetch);
  ParallelBuilder &forwardPrefetch(bool enabled);
  ParallelBuilder &maxInflightGathers(int64_t n);
  ParallelBuilder &bucket(int64_t bytes);
  ParallelBuilder &gradSync(GradSync sync);

  /// The `parallel` block (offload settings gathered in `offload { ... }`).
  syntax::Block toSyntax() const;

private:
  detail::SyntaxItems keys;
  detail::SyntaxItems offload;
};

//===----------------------------------------------------------------------===//
// The whole plan
//===----------------------------------------------------------------------===//

class PlanBuilder {
public:
  /// `name` plays the part of a file's name: the plan's name.
  explicit PlanBuilder(llvm::StringRef name) : name(name.str()) {}

  /// `model = PRESET`.
  PlanBuilder &model(llvm::StringRef preset);
  PlanBuilder &model(const ModelBuilder &model);
  /// As `ModelBuilder::from(model)`.
  PlanBuilder &model(const ModelSpec &model);
  PlanBuilder &cluster(const ClusterBuilder &cluster);
  PlanBuilder &train(const TrainBuilder &train);
  PlanBuilder &parallel(const ParallelBuilder &parallel);

  /// The plan as the syntax tree of the equivalent .plan file (for example to
  /// apply `--set` overrides with `applyOverride` before analyzing it).
  syntax::Block toSyntax() const;

  /// An analyzed plan with every value written out: the defaults and the
  /// derived defaults it took, each key that applies to it (none that would
  /// have no effect), and its name. `planc --emit=plan-resolved` prints it;
  /// it analyzes to the same plan.
  static PlanBuilder resolved(const PlanSpec &plan);

  /// Checks the plan exactly as the analyzer checks a file and returns it, or
  /// nothing after reporting every error through `diag`.
  std::optional<PlanSpec> build(DiagEmitter &diag) const;

private:
  std::string name;
  detail::SyntaxItems sections;
  std::optional<std::string> fileName; // the `name` key, when written
};

} // namespace plan

#endif // PLAN_FRONTEND_BUILDER_H
