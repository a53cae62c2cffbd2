//===- Builder.cpp - Writing a plan in C++ --------------------------------===//
//
// Builders produce syntax, not a PlanSpec: the analyzer is the one place that
// knows the schema, the ranges, the defaults and the messages, and a builder
// that filled a PlanSpec itself would have to repeat all of it and could drift.
//
//===----------------------------------------------------------------------===//

#include "frontend/Builder.h"

#include "frontend/Analyze.h"
#include "frontend/Models.h"

#include "llvm/Support/ErrorHandling.h"

#include <memory>

using namespace plan;
using syntax::Value;
using syntax::ValueKind;

namespace {

Value integerValue(int64_t n, llvm::StringRef unit = "") {
  Value v;
  v.kind = ValueKind::Number;
  v.number = double(n);
  v.isInteger = true;
  v.integer = n;
  v.unit = unit.str();
  return v;
}

Value realValue(double x, llvm::StringRef unit = "") {
  Value v;
  v.kind = ValueKind::Number;
  v.number = x;
  v.unit = unit.str();
  return v;
}

/// A size in the largest binary unit that holds it exactly, so that messages
/// quote `128GiB` rather than a count of bytes.
Value sizeValue(int64_t bytes) {
  static constexpr struct {
    int shift;
    const char *unit;
  } units[] = {{40, "TiB"}, {30, "GiB"}, {20, "MiB"}, {10, "KiB"}};
  for (const auto &u : units) {
    int64_t scale = int64_t(1) << u.shift;
    if (bytes != 0 && bytes % scale == 0)
      return integerValue(bytes / scale, u.unit);
  }
  return integerValue(bytes, "B");
}

/// Bandwidths stay in B/s: rescaling a double could change its last bit, and
/// the plan must hold exactly the value given.
Value bandwidthValue(double bytesPerSecond) {
  return realValue(bytesPerSecond, "B/s");
}

/// Times stay in seconds, for the same reason.
Value timeValue(double seconds) { return realValue(seconds, "s"); }

Value nameValue(llvm::StringRef name) {
  Value v;
  v.kind = ValueKind::Identifier;
  v.text = name.str();
  return v;
}

Value boolValue(bool b) { return nameValue(b ? "true" : "false"); }

Value blockValue(const syntax::Block &block) {
  Value v;
  v.kind = ValueKind::Block;
  v.block = std::make_unique<syntax::Block>(syntax::cloneBlock(block));
  return v;
}

/// `name` with a block of keys when there are any (`llama3_8b { layers = 2
/// }`), plain `name` otherwise.
Value nameWithBlock(llvm::StringRef name, const syntax::Block &keys) {
  Value v = nameValue(name);
  if (!keys.items.empty())
    v.block = std::make_unique<syntax::Block>(syntax::cloneBlock(keys));
  return v;
}

syntax::Argument argument(llvm::StringRef name, Value value) {
  syntax::Argument arg;
  arg.name = name.str();
  arg.value = std::make_unique<Value>(std::move(value));
  return arg;
}

/// `callee(name = value, ...)` from the items of `arguments`.
Value callValue(llvm::StringRef callee, const syntax::Block &arguments) {
  Value v;
  v.kind = ValueKind::Call;
  v.text = callee.str();
  for (const syntax::Item &item : arguments.items)
    v.elements.push_back(argument(item.key, syntax::cloneValue(item.value)));
  return v;
}

Value tupleValue(Value first, Value second) {
  Value v;
  v.kind = ValueKind::Tuple;
  v.elements.push_back(argument("", std::move(first)));
  v.elements.push_back(argument("", std::move(second)));
  return v;
}

Value ropeScalingValue(const std::optional<RopeScaling> &scaling) {
  if (!scaling)
    return nameValue("none");
  Value v;
  v.kind = ValueKind::Call;
  v.text = "llama3";
  v.elements.push_back(argument("factor", realValue(scaling->factor)));
  v.elements.push_back(
      argument("low_freq_factor", realValue(scaling->lowFreqFactor)));
  v.elements.push_back(
      argument("high_freq_factor", realValue(scaling->highFreqFactor)));
  v.elements.push_back(argument("original_max_seq_len",
                                integerValue(scaling->originalMaxSeqLen)));
  return v;
}

Value lossScaleValue(const LossScaleSpec &scale) {
  switch (scale.kind) {
  case LossScaleKind::None:
    return nameValue("none");
  case LossScaleKind::Dynamic: {
    Value v;
    v.kind = ValueKind::Call;
    v.text = "dynamic";
    v.elements.push_back(argument("initial", realValue(scale.initial)));
    v.elements.push_back(
        argument("growth_interval", integerValue(scale.growthInterval)));
    return v;
  }
  case LossScaleKind::Static: {
    Value v;
    v.kind = ValueKind::Call;
    v.text = "static";
    v.elements.push_back(argument("", realValue(scale.initial)));
    return v;
  }
  }
  llvm_unreachable("unknown loss scale kind");
}

/// `constant` has a warmup but no final ratio to decay to.
Value lrScheduleValue(const LRScheduleSpec &schedule) {
  bool constant = schedule.kind == LRScheduleKind::Constant;
  if (constant && schedule.warmupSteps == 0)
    return nameValue(stringify(schedule.kind));
  Value v;
  v.kind = ValueKind::Call;
  v.text = stringify(schedule.kind).str();
  v.elements.push_back(argument("warmup", integerValue(schedule.warmupSteps)));
  if (!constant)
    v.elements.push_back(
        argument("min_lr_ratio", realValue(schedule.minLrRatio)));
  return v;
}

} // namespace

//===----------------------------------------------------------------------===//
// SyntaxItems
//===----------------------------------------------------------------------===//

detail::SyntaxItems::SyntaxItems(const SyntaxItems &other)
    : block(syntax::cloneBlock(other.block)) {}

detail::SyntaxItems &detail::SyntaxItems::operator=(const SyntaxItems &other) {
  if (this != &other)
    block = syntax::cloneBlock(other.block);
  return *this;
}

void detail::SyntaxItems::set(llvm::StringRef key, Value value) {
  if (syntax::Item *existing = block.find(key)) {
    existing->value = std::move(value);
    return;
  }
  syntax::Item item;
  item.key = key.str();
  item.value = std::move(value);
  block.items.push_back(std::move(item));
}

//===----------------------------------------------------------------------===//
// ModelBuilder
//===----------------------------------------------------------------------===//

ModelBuilder ModelBuilder::preset(llvm::StringRef name) {
  return ModelBuilder(name.str());
}

ModelBuilder ModelBuilder::family(ModelFamily family) {
  return ModelBuilder(stringify(family).str());
}

ModelBuilder ModelBuilder::from(const ModelSpec &spec, bool everyKey) {
  const ModelPreset *base = lookupModelPreset(spec.preset);
  if (base && base->spec.family != spec.family)
    base = nullptr;
  ModelBuilder model = base ? preset(base->name) : family(spec.family);
  auto differs = [&](auto field) {
    return everyKey || !base || spec.*field != base->spec.*field;
  };
  if (differs(&ModelSpec::vocab))
    model.vocab(spec.vocab);
  if (differs(&ModelSpec::hidden))
    model.hidden(spec.hidden);
  if (differs(&ModelSpec::intermediate))
    model.intermediate(spec.intermediate);
  if (differs(&ModelSpec::layers))
    model.layers(spec.layers);
  if (differs(&ModelSpec::heads))
    model.heads(spec.heads);
  if (differs(&ModelSpec::maxSeqLen))
    model.maxSeqLen(spec.maxSeqLen);
  if (differs(&ModelSpec::normEps))
    model.normEps(spec.normEps);
  switch (spec.family) {
  case ModelFamily::Llama:
    if (differs(&ModelSpec::kvHeads))
      model.kvHeads(spec.kvHeads);
    if (differs(&ModelSpec::ropeTheta))
      model.ropeTheta(spec.ropeTheta);
    if (differs(&ModelSpec::ropeScaling))
      model.ropeScaling(spec.ropeScaling);
    if (differs(&ModelSpec::tieEmbeddings))
      model.tieEmbeddings(spec.tieEmbeddings);
    break;
  case ModelFamily::GPT2:
    break;
  case ModelFamily::Bert:
    if (differs(&ModelSpec::typeVocab))
      model.typeVocab(spec.typeVocab);
    if (differs(&ModelSpec::bertHead))
      model.head(spec.bertHead);
    // The language accepts num_labels only next to a classification head.
    if (spec.bertHead == BertHead::SequenceClassification &&
        differs(&ModelSpec::numLabels))
      model.numLabels(spec.numLabels);
    break;
  }
  return model;
}

ModelBuilder &ModelBuilder::vocab(int64_t n) {
  keys.set("vocab", integerValue(n));
  return *this;
}
ModelBuilder &ModelBuilder::hidden(int64_t n) {
  keys.set("hidden", integerValue(n));
  return *this;
}
ModelBuilder &ModelBuilder::intermediate(int64_t n) {
  keys.set("intermediate", integerValue(n));
  return *this;
}
ModelBuilder &ModelBuilder::layers(int64_t n) {
  keys.set("layers", integerValue(n));
  return *this;
}
ModelBuilder &ModelBuilder::heads(int64_t n) {
  keys.set("heads", integerValue(n));
  return *this;
}
ModelBuilder &ModelBuilder::kvHeads(int64_t n) {
  keys.set("kv_heads", integerValue(n));
  return *this;
}
ModelBuilder &ModelBuilder::maxSeqLen(int64_t n) {
  keys.set("max_seq_len", integerValue(n));
  return *this;
}
ModelBuilder &ModelBuilder::ropeTheta(double theta) {
  keys.set("rope_theta", realValue(theta));
  return *this;
}
ModelBuilder &ModelBuilder::ropeScaling(std::optional<RopeScaling> scaling) {
  keys.set("rope_scaling", ropeScalingValue(scaling));
  return *this;
}
ModelBuilder &ModelBuilder::normEps(double eps) {
  keys.set("norm_eps", realValue(eps));
  return *this;
}
ModelBuilder &ModelBuilder::tieEmbeddings(bool tie) {
  keys.set("tie_embeddings", boolValue(tie));
  return *this;
}
ModelBuilder &ModelBuilder::typeVocab(int64_t n) {
  keys.set("type_vocab", integerValue(n));
  return *this;
}
ModelBuilder &ModelBuilder::head(BertHead head) {
  keys.set("head", nameValue(stringify(head)));
  return *this;
}
ModelBuilder &ModelBuilder::numLabels(int64_t n) {
  keys.set("num_labels", integerValue(n));
  return *this;
}

ModelBuilder &ModelBuilder::lora(const LoraSpec &lora) {
  detail::SyntaxItems block;
  block.set("rank", integerValue(lora.rank));
  block.set("alpha", realValue(lora.alpha));
  block.set("dropout", realValue(lora.dropout));
  if (!lora.targets.empty()) {
    Value targets;
    targets.kind = ValueKind::List;
    for (const std::string &target : lora.targets)
      targets.elements.push_back(argument("", nameValue(target)));
    block.set("targets", std::move(targets));
  }
  keys.set("lora", blockValue(block.getBlock()));
  if (lora.base)
    keys.set("base", nameValue(stringify(*lora.base)));
  return *this;
}

Value ModelBuilder::toSyntax() const {
  return nameWithBlock(name, keys.getBlock());
}

//===----------------------------------------------------------------------===//
// DeviceBuilder, ClusterBuilder
//===----------------------------------------------------------------------===//

DeviceBuilder DeviceBuilder::named(llvm::StringRef name) {
  return DeviceBuilder(name.str());
}

DeviceBuilder DeviceBuilder::custom() { return DeviceBuilder(""); }

DeviceBuilder DeviceBuilder::from(const DeviceSpec &spec, bool everyKey) {
  const DeviceSpec *base = lookupDevice(spec.name);
  DeviceBuilder device = base ? named(base->name) : custom();
  auto differs = [&](auto field) {
    return everyKey || !base || spec.*field != base->*field;
  };
  if (differs(&DeviceSpec::memoryBytes))
    device.memory(spec.memoryBytes);
  if (differs(&DeviceSpec::bf16Tflops))
    device.bf16Tflops(spec.bf16Tflops);
  if (differs(&DeviceSpec::fp16Tflops))
    device.fp16Tflops(spec.fp16Tflops);
  if (differs(&DeviceSpec::fp32Tflops))
    device.fp32Tflops(spec.fp32Tflops);
  if (differs(&DeviceSpec::hbmBandwidth))
    device.hbmBandwidth(spec.hbmBandwidth);
  if (differs(&DeviceSpec::nvlinkBandwidth))
    device.nvlinkBandwidth(spec.nvlinkBandwidth);
  if (differs(&DeviceSpec::pcieBandwidth))
    device.pcieBandwidth(spec.pcieBandwidth);
  if (differs(&DeviceSpec::linkLatency))
    device.linkLatency(spec.linkLatency);
  return device;
}

DeviceBuilder &DeviceBuilder::memory(int64_t bytes) {
  keys.set("memory", sizeValue(bytes));
  return *this;
}
DeviceBuilder &DeviceBuilder::bf16Tflops(double tflops) {
  keys.set("bf16_tflops", realValue(tflops));
  return *this;
}
DeviceBuilder &DeviceBuilder::fp16Tflops(double tflops) {
  keys.set("fp16_tflops", realValue(tflops));
  return *this;
}
DeviceBuilder &DeviceBuilder::fp32Tflops(double tflops) {
  keys.set("fp32_tflops", realValue(tflops));
  return *this;
}
DeviceBuilder &DeviceBuilder::hbmBandwidth(double bytesPerSecond) {
  keys.set("hbm_bandwidth", bandwidthValue(bytesPerSecond));
  return *this;
}
DeviceBuilder &DeviceBuilder::nvlinkBandwidth(double bytesPerSecond) {
  keys.set("nvlink_bandwidth", bandwidthValue(bytesPerSecond));
  return *this;
}
DeviceBuilder &DeviceBuilder::pcieBandwidth(double bytesPerSecond) {
  keys.set("pcie_bandwidth", bandwidthValue(bytesPerSecond));
  return *this;
}
DeviceBuilder &DeviceBuilder::linkLatency(double seconds) {
  keys.set("link_latency", timeValue(seconds));
  return *this;
}

Value DeviceBuilder::toSyntax() const {
  if (name.empty())
    return blockValue(keys.getBlock());
  return nameWithBlock(name, keys.getBlock());
}

ClusterBuilder &ClusterBuilder::nodes(int64_t n) {
  keys.set("nodes", integerValue(n));
  return *this;
}
ClusterBuilder &ClusterBuilder::gpusPerNode(int64_t n) {
  keys.set("gpus_per_node", integerValue(n));
  return *this;
}
ClusterBuilder &ClusterBuilder::gpu(llvm::StringRef name) {
  keys.set("gpu", nameValue(name));
  return *this;
}
ClusterBuilder &ClusterBuilder::gpu(const DeviceBuilder &device) {
  keys.set("gpu", device.toSyntax());
  return *this;
}
ClusterBuilder &ClusterBuilder::gpu(const DeviceSpec &device) {
  return gpu(DeviceBuilder::from(device));
}
ClusterBuilder &ClusterBuilder::hostMemory(int64_t bytes) {
  keys.set("host_memory", sizeValue(bytes));
  return *this;
}
ClusterBuilder &ClusterBuilder::interNodeBandwidth(double bytesPerSecond) {
  keys.set("inter_node_bandwidth", bandwidthValue(bytesPerSecond));
  return *this;
}
ClusterBuilder &ClusterBuilder::hostBandwidth(double bytesPerSecond) {
  keys.set("host_bandwidth", bandwidthValue(bytesPerSecond));
  return *this;
}
ClusterBuilder &ClusterBuilder::hostCores(int64_t cores) {
  keys.set("host_cores", integerValue(cores));
  return *this;
}

//===----------------------------------------------------------------------===//
// OptimizerBuilder, TrainBuilder
//===----------------------------------------------------------------------===//

OptimizerBuilder::OptimizerBuilder(OptimizerKind kind, double lr) : kind(kind) {
  arguments.set("lr", realValue(lr));
}

OptimizerBuilder plan::adamw(double lr) {
  return OptimizerBuilder(OptimizerKind::AdamW, lr);
}

OptimizerBuilder plan::sgd(double lr) {
  return OptimizerBuilder(OptimizerKind::SGD, lr);
}

OptimizerBuilder &OptimizerBuilder::betas(double beta1, double beta2) {
  arguments.set("betas", tupleValue(realValue(beta1), realValue(beta2)));
  return *this;
}
OptimizerBuilder &OptimizerBuilder::eps(double eps) {
  arguments.set("eps", realValue(eps));
  return *this;
}
OptimizerBuilder &OptimizerBuilder::weightDecay(double decay) {
  arguments.set("weight_decay", realValue(decay));
  return *this;
}
OptimizerBuilder &OptimizerBuilder::decay(WeightDecayScope scope) {
  arguments.set("decay", nameValue(stringify(scope)));
  return *this;
}
OptimizerBuilder &OptimizerBuilder::momentum(double momentum) {
  arguments.set("momentum", realValue(momentum));
  return *this;
}

Value OptimizerBuilder::toSyntax() const {
  return callValue(stringify(kind), arguments.getBlock());
}

LossScaleSpec plan::dynamicLossScale(double initial, int64_t growthInterval) {
  LossScaleSpec scale;
  scale.kind = LossScaleKind::Dynamic;
  scale.initial = initial;
  scale.growthInterval = growthInterval;
  return scale;
}

LossScaleSpec plan::staticLossScale(double scale) {
  LossScaleSpec spec;
  spec.kind = LossScaleKind::Static;
  spec.initial = scale;
  return spec;
}

LRScheduleSpec plan::constantSchedule(int64_t warmupSteps) {
  return LRScheduleSpec{LRScheduleKind::Constant, warmupSteps, 0.0};
}

LRScheduleSpec plan::cosineSchedule(int64_t warmupSteps, double minLrRatio) {
  return LRScheduleSpec{LRScheduleKind::Cosine, warmupSteps, minLrRatio};
}

LRScheduleSpec plan::linearSchedule(int64_t warmupSteps, double minLrRatio) {
  return LRScheduleSpec{LRScheduleKind::Linear, warmupSteps, minLrRatio};
}

TrainBuilder &TrainBuilder::optimizer(const OptimizerBuilder &optimizer) {
  keys.set("optimizer", optimizer.toSyntax());
  return *this;
}
TrainBuilder &TrainBuilder::microBatch(int64_t sequences) {
  keys.set("micro_batch", integerValue(sequences));
  return *this;
}
TrainBuilder &TrainBuilder::seqLen(int64_t tokens) {
  keys.set("seq_len", integerValue(tokens));
  return *this;
}
TrainBuilder &TrainBuilder::gradAccum(int64_t microBatches) {
  keys.set("grad_accum", integerValue(microBatches));
  return *this;
}
TrainBuilder &TrainBuilder::precision(Precision precision) {
  keys.set("precision", nameValue(stringify(precision)));
  return *this;
}
TrainBuilder &TrainBuilder::lossScale(const LossScaleSpec &scale) {
  keys.set("loss_scale", lossScaleValue(scale));
  return *this;
}
TrainBuilder &TrainBuilder::reduceDtype(DType dtype) {
  keys.set("reduce_dtype", nameValue(stringify(dtype)));
  return *this;
}
TrainBuilder &TrainBuilder::gradDtype(DType dtype) {
  keys.set("grad_dtype", nameValue(stringify(dtype)));
  return *this;
}
TrainBuilder &TrainBuilder::activationCheckpointing(Checkpointing mode) {
  keys.set("activation_checkpointing", nameValue(stringify(mode)));
  return *this;
}
TrainBuilder &TrainBuilder::gradClip(std::optional<double> maxNorm) {
  keys.set("grad_clip", maxNorm ? realValue(*maxNorm) : nameValue("none"));
  return *this;
}
TrainBuilder &TrainBuilder::lrSchedule(const LRScheduleSpec &schedule) {
  keys.set("lr_schedule", lrScheduleValue(schedule));
  return *this;
}
TrainBuilder &TrainBuilder::steps(int64_t steps) {
  keys.set("steps", integerValue(steps));
  return *this;
}
TrainBuilder &TrainBuilder::seed(int64_t seed) {
  keys.set("seed", integerValue(seed));
  return *this;
}

//===----------------------------------------------------------------------===//
// ParallelBuilder
//===----------------------------------------------------------------------===//

ParallelBuilder &ParallelBuilder::sharding(Sharding sharding) {
  keys.set("sharding", nameValue(stringify(sharding)));
  return *this;
}
ParallelBuilder &ParallelBuilder::mesh(int64_t replicate, int64_t shard) {
  keys.set("mesh", tupleValue(integerValue(replicate), integerValue(shard)));
  return *this;
}
ParallelBuilder &ParallelBuilder::tensor(int64_t degree) {
  keys.set("tensor", integerValue(degree));
  return *this;
}
ParallelBuilder &ParallelBuilder::sequenceParallel(bool enabled) {
  keys.set("sequence_parallel", boolValue(enabled));
  return *this;
}
ParallelBuilder &ParallelBuilder::pipeline(int64_t degree) {
  keys.set("pipeline", integerValue(degree));
  return *this;
}
ParallelBuilder &ParallelBuilder::schedule(PipelineSchedule schedule,
                                           int64_t virtualStages) {
  if (schedule != PipelineSchedule::Interleaved) {
    keys.set("schedule", nameValue(stringify(schedule)));
    return *this;
  }
  Value call;
  call.kind = ValueKind::Call;
  call.text = stringify(schedule).str();
  call.elements.push_back(argument("", integerValue(virtualStages)));
  keys.set("schedule", std::move(call));
  return *this;
}
ParallelBuilder &ParallelBuilder::stages(llvm::ArrayRef<int64_t> layers) {
  if (layers.empty()) {
    keys.set("stages", nameValue("balanced"));
    return *this;
  }
  Value list;
  list.kind = ValueKind::List;
  for (int64_t n : layers)
    list.elements.push_back(argument("", integerValue(n)));
  keys.set("stages", std::move(list));
  return *this;
}
ParallelBuilder &ParallelBuilder::wrap(WrapKind kind) {
  keys.set("wrap", nameValue(stringify(kind)));
  return *this;
}
ParallelBuilder &ParallelBuilder::wrapMinParams(int64_t params) {
  Value call;
  call.kind = ValueKind::Call;
  call.text = stringify(WrapKind::MinParams).str();
  call.elements.push_back(argument("", integerValue(params)));
  keys.set("wrap", std::move(call));
  return *this;
}
ParallelBuilder &ParallelBuilder::offloadParams(MemorySpace space) {
  offload.set("params", nameValue(stringify(space)));
  return *this;
}
ParallelBuilder &ParallelBuilder::offloadGrads(MemorySpace space) {
  offload.set("grads", nameValue(stringify(space)));
  return *this;
}
ParallelBuilder &ParallelBuilder::offloadOptimizer(MemorySpace space) {
  offload.set("optimizer", nameValue(stringify(space)));
  return *this;
}
ParallelBuilder &ParallelBuilder::optimizerStep(MemorySpace space) {
  keys.set("optimizer_step", nameValue(stringify(space)));
  return *this;
}
ParallelBuilder &ParallelBuilder::backwardPrefetch(Prefetch prefetch) {
  keys.set("backward_prefetch", nameValue(stringify(prefetch)));
  return *this;
}
ParallelBuilder &ParallelBuilder::forwardPrefetch(bool enabled) {
  keys.set("forward_prefetch", boolValue(enabled));
  return *this;
}
ParallelBuilder &ParallelBuilder::maxInflightGathers(int64_t n) {
  keys.set("max_inflight_gathers", integerValue(n));
  return *this;
}
ParallelBuilder &ParallelBuilder::bucket(int64_t bytes) {
  keys.set("bucket", sizeValue(bytes));
  return *this;
}
ParallelBuilder &ParallelBuilder::gradSync(GradSync sync) {
  keys.set("grad_sync", nameValue(stringify(sync)));
  return *this;
}

syntax::Block ParallelBuilder::toSyntax() const {
  syntax::Block block = syntax::cloneBlock(keys.getBlock());
  if (!offload.empty()) {
    syntax::Item item;
    item.key = "offload";
    item.value = blockValue(offload.getBlock());
    block.items.push_back(std::move(item));
  }
  return block;
}

//===----------------------------------------------------------------------===//
// PlanBuilder
//===----------------------------------------------------------------------===//

PlanBuilder &PlanBuilder::model(llvm::StringRef preset) {
  return model(ModelBuilder::preset(preset));
}
PlanBuilder &PlanBuilder::model(const ModelBuilder &model) {
  sections.set("model", model.toSyntax());
  return *this;
}
PlanBuilder &PlanBuilder::model(const ModelSpec &model) {
  return this->model(ModelBuilder::from(model));
}
PlanBuilder &PlanBuilder::cluster(const ClusterBuilder &cluster) {
  sections.set("cluster", blockValue(cluster.toSyntax()));
  return *this;
}
PlanBuilder &PlanBuilder::train(const TrainBuilder &train) {
  sections.set("train", blockValue(train.toSyntax()));
  return *this;
}
PlanBuilder &PlanBuilder::parallel(const ParallelBuilder &parallel) {
  sections.set("parallel", blockValue(parallel.toSyntax()));
  return *this;
}

syntax::Block PlanBuilder::toSyntax() const {
  syntax::Block block = syntax::cloneBlock(sections.getBlock());
  if (fileName) {
    syntax::Item item;
    item.key = "name";
    item.value.kind = ValueKind::String;
    item.value.text = *fileName;
    block.items.insert(block.items.begin(), std::move(item));
  }
  return block;
}

PlanBuilder PlanBuilder::resolved(const PlanSpec &plan) {
  PlanBuilder out(plan.name);
  out.fileName = plan.name;
  ModelBuilder model = ModelBuilder::from(plan.model, /*everyKey=*/true);
  if (plan.lora)
    model.lora(*plan.lora);
  out.model(model);

  const ClusterSpec &c = plan.cluster;
  ClusterBuilder cluster;
  cluster.nodes(c.nodes)
      .gpusPerNode(c.gpusPerNode)
      .gpu(DeviceBuilder::from(c.device, /*everyKey=*/true))
      .hostMemory(c.hostMemoryBytes)
      .hostBandwidth(c.hostBandwidth)
      .hostCores(c.hostCores);
  if (c.nodes > 1)
    cluster.interNodeBandwidth(c.interNodeBandwidth);
  out.cluster(cluster);

  const TrainSpec &t = plan.train;
  const OptimizerSpec &o = t.optimizer;
  OptimizerBuilder optimizer =
      o.kind == OptimizerKind::AdamW
          ? adamw(o.lr).betas(o.beta1, o.beta2).eps(o.eps)
          : sgd(o.lr).momentum(o.momentum);
  optimizer.weightDecay(o.weightDecay).decay(o.decay);
  TrainBuilder train;
  train.optimizer(optimizer)
      .microBatch(t.microBatch)
      .seqLen(t.seqLen)
      .gradAccum(t.gradAccum)
      .precision(t.precision)
      .lossScale(t.lossScale)
      .reduceDtype(t.reduceDtype)
      .gradDtype(t.gradDtype)
      .activationCheckpointing(t.activationCheckpointing)
      .gradClip(t.gradClip)
      .lrSchedule(t.lrSchedule)
      .steps(t.steps)
      .seed(t.seed);
  out.train(train);

  const ParallelSpec &p = plan.parallel;
  ParallelBuilder parallel;
  parallel.sharding(p.sharding).mesh(p.meshReplicate, p.meshShard);
  // Sequence parallelism acts only within a tensor group.
  if (p.tensor > 1)
    parallel.tensor(p.tensor).sequenceParallel(p.sequenceParallel);
  if (p.pipeline > 1)
    parallel.pipeline(p.pipeline)
        .schedule(p.schedule, p.virtualStages)
        .stages(p.stages);
  if (p.wrap.kind == WrapKind::MinParams)
    parallel.wrapMinParams(p.wrap.minParams);
  else
    parallel.wrap(p.wrap.kind);
  parallel.offloadParams(p.offload.params)
      .offloadGrads(p.offload.grads)
      .offloadOptimizer(p.offload.optimizer)
      .optimizerStep(p.optimizerStep);
  // Only the keys that act on this strategy (docs/language.md, "Warnings").
  bool gathers =
      p.sharding != Sharding::NoShard && p.sharding != Sharding::Zero1;
  if (gathers) {
    parallel.forwardPrefetch(p.forwardPrefetch)
        .maxInflightGathers(p.maxInflightGathers);
    if (p.sharding != Sharding::ShardGradOp)
      parallel.backwardPrefetch(p.backwardPrefetch);
  }
  if (p.sharding == Sharding::NoShard)
    parallel.bucket(p.bucketBytes);
  if (t.gradAccum > 1)
    parallel.gradSync(p.gradSync);
  out.parallel(parallel);
  return out;
}

std::optional<PlanSpec> PlanBuilder::build(DiagEmitter &diag) const {
  return analyzePlan(sections.getBlock(), name, diag);
}
