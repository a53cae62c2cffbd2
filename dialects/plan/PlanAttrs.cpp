//===- PlanAttrs.cpp - Attributes of the plan dialect ---------------------===//
//
// The verifiers hold the invariants every plan must satisfy whoever wrote it
// (the frontend, the C++ builder or a hand-written .mlir file). The .plan
// frontend checks the same things earlier, with better locations and advice.
//
//===----------------------------------------------------------------------===//

#include "dialects/plan/PlanDialect.h"

#include "Schedule.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

using namespace mlir;
using namespace plan;

FailureOr<F64> plan::parseF64Param(AsmParser &parser) {
  double value;
  if (parser.parseFloat(value))
    return failure();
  return F64(value);
}

std::string plan::formatF64(double v) {
  if (!std::isfinite(v))
    return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
  char text[32];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(text, sizeof(text), "%.*g", digits, v);
    if (std::strtod(text, nullptr) == v)
      break;
  }
  auto [mantissa, exponent] = llvm::StringRef(text).split('e');
  std::string out = mantissa.str();
  if (!mantissa.contains('.'))
    out += ".0";
  if (!exponent.empty()) {
    // "%g" writes e-05 / e+20; write e-5 / e20, which MLIR reads as well.
    bool negative = exponent.consume_front("-");
    exponent.consume_front("+");
    out += (negative ? "e-" : "e") + exponent.ltrim('0').str();
  }
  return out;
}

void plan::printF64Param(AsmPrinter &printer, F64 value) {
  if (!std::isfinite(value.value)) {
    // Not reachable through the verifiers' ranges; keep the IR exact anyway.
    printer.printFloat(llvm::APFloat(value.value));
    return;
  }
  printer.getStream() << formatF64(value);
}

FailureOr<bool> plan::parseBoolParam(AsmParser &parser) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef word;
  if (parser.parseKeyword(&word))
    return failure();
  if (word == "true")
    return true;
  if (word == "false")
    return false;
  return parser.emitError(loc, "expected 'true' or 'false'");
}

#define GET_ATTRDEF_CLASSES
#include "dialects/plan/PlanAttrs.cpp.inc"

void PlanDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/plan/PlanAttrs.cpp.inc"
      >();
}

using EmitErrorFn = function_ref<InFlightDiagnostic()>;

static LogicalResult checkPositive(EmitErrorFn emitError, StringRef what,
                                   int64_t value) {
  if (value < 1)
    return emitError() << what << " must be >= 1, got " << value;
  return success();
}

static LogicalResult checkPositive(EmitErrorFn emitError, StringRef what,
                                   F64 value) {
  if (!(value > 0))
    return emitError() << what << " must be > 0, got " << formatF64(value);
  return success();
}

static LogicalResult checkNonNegative(EmitErrorFn emitError, StringRef what,
                                      F64 value) {
  if (!(value >= 0))
    return emitError() << what << " must be >= 0, got " << formatF64(value);
  return success();
}

LogicalResult RopeScalingAttr::verify(EmitErrorFn emitError, F64 factor,
                                      F64 lowFreqFactor, F64 highFreqFactor,
                                      int64_t originalMaxSeqLen) {
  if (failed(checkPositive(emitError, "rope_scaling factor", factor)) ||
      failed(checkPositive(emitError, "low_freq_factor", lowFreqFactor)) ||
      failed(
          checkPositive(emitError, "original_max_seq_len", originalMaxSeqLen)))
    return failure();
  if (!(highFreqFactor > lowFreqFactor))
    return emitError() << "high_freq_factor (" << formatF64(highFreqFactor)
                       << ") must be greater than low_freq_factor ("
                       << formatF64(lowFreqFactor) << ")";
  return success();
}

LogicalResult LoraAttr::verify(EmitErrorFn emitError, int64_t rank, F64 alpha,
                               F64 dropout, ArrayAttr targets, BaseStorage) {
  if (failed(checkPositive(emitError, "lora rank", rank)))
    return failure();
  if (!std::isfinite(alpha.value))
    return emitError() << "lora alpha must be a finite number";
  if (!(dropout.value >= 0.0 && dropout.value < 1.0))
    return emitError() << "lora dropout must be in [0, 1), got "
                       << dropout.value;
  if (!targets || targets.empty())
    return emitError() << "lora needs at least one target module";
  for (Attribute target : targets)
    if (!isa<StringAttr>(target) || cast<StringAttr>(target).empty())
      return emitError() << "lora targets must be module names (non-empty "
                            "strings)";
  return success();
}

LogicalResult ModelAttr::verify(EmitErrorFn emitError, ModelFamily family,
                                StringRef, int64_t vocab, int64_t hidden,
                                int64_t intermediate, int64_t layers,
                                int64_t heads, int64_t kvHeads,
                                int64_t maxSeqLen, F64 ropeTheta,
                                RopeScalingAttr ropeScaling, F64 normEps,
                                bool tieEmbeddings, int64_t typeVocab, BertHead,
                                int64_t numLabels, LoraAttr) {
  if (failed(checkPositive(emitError, "vocab", vocab)) ||
      failed(checkPositive(emitError, "hidden", hidden)) ||
      failed(checkPositive(emitError, "intermediate", intermediate)) ||
      failed(checkPositive(emitError, "layers", layers)) ||
      failed(checkPositive(emitError, "heads", heads)) ||
      failed(checkPositive(emitError, "kv_heads", kvHeads)) ||
      failed(checkPositive(emitError, "max_seq_len", maxSeqLen)) ||
      failed(checkPositive(emitError, "rope_theta", ropeTheta)) ||
      failed(checkPositive(emitError, "norm_eps", normEps)) ||
      failed(checkPositive(emitError, "type_vocab", typeVocab)) ||
      failed(checkPositive(emitError, "num_labels", numLabels)))
    return failure();
  if (hidden % heads != 0)
    return emitError() << "hidden (" << hidden
                       << ") must be divisible by heads (" << heads << ")";
  if (heads % kvHeads != 0)
    return emitError() << "heads (" << heads
                       << ") must be divisible by kv_heads (" << kvHeads << ")";
  if (family != ModelFamily::Llama) {
    if (kvHeads != heads)
      return emitError() << stringifyModelFamily(family)
                         << " has no grouped-query attention: kv_heads ("
                         << kvHeads << ") must equal heads (" << heads << ")";
    if (ropeScaling)
      return emitError() << stringifyModelFamily(family)
                         << " has no rotary embeddings to scale";
    if (!tieEmbeddings)
      return emitError() << stringifyModelFamily(family)
                         << " always ties its output layer to the token "
                            "embeddings: tie_embeddings must be true";
  }
  return success();
}

LogicalResult DeviceAttr::verify(EmitErrorFn emitError, StringRef name,
                                 int64_t memory, F64 bf16Tflops, F64 fp16Tflops,
                                 F64 fp32Tflops, F64 hbmBandwidth,
                                 F64 nvlinkBandwidth, F64 pcieBandwidth,
                                 F64 linkLatency) {
  if (name.empty())
    return emitError() << "device name must not be empty";
  if (failed(checkPositive(emitError, "device memory", memory)) ||
      failed(checkPositive(emitError, "bf16_tflops", bf16Tflops)) ||
      failed(checkPositive(emitError, "fp16_tflops", fp16Tflops)) ||
      failed(checkPositive(emitError, "fp32_tflops", fp32Tflops)) ||
      failed(checkPositive(emitError, "hbm_bandwidth", hbmBandwidth)) ||
      failed(
          checkNonNegative(emitError, "nvlink_bandwidth", nvlinkBandwidth)) ||
      failed(checkPositive(emitError, "pcie_bandwidth", pcieBandwidth)) ||
      failed(checkNonNegative(emitError, "link_latency", linkLatency)))
    return failure();
  return success();
}

LogicalResult ClusterAttr::verify(EmitErrorFn emitError, int64_t nodes,
                                  int64_t gpusPerNode, DeviceAttr device,
                                  int64_t hostMemory, F64 interNodeBandwidth,
                                  F64 hostBandwidth, int64_t hostCores) {
  if (!device)
    return emitError() << "cluster needs a device";
  if (failed(checkPositive(emitError, "nodes", nodes)) ||
      failed(checkPositive(emitError, "gpus_per_node", gpusPerNode)) ||
      failed(checkPositive(emitError, "host_memory", hostMemory)) ||
      failed(
          checkPositive(emitError, "inter_node_bandwidth", interNodeBandwidth)))
    return failure();
  if (!(hostBandwidth >= 0) || hostCores < 0)
    return emitError() << "host_bandwidth and host_cores must not be negative";
  return success();
}

LogicalResult OptimizerAttr::verify(EmitErrorFn emitError, OptimizerKind kind,
                                    F64 lr, F64 beta1, F64 beta2, F64 eps,
                                    F64 weightDecay, F64 momentum,
                                    WeightDecayScope) {
  if (failed(checkPositive(emitError, "lr", lr)) ||
      failed(checkPositive(emitError, "eps", eps)) ||
      failed(checkNonNegative(emitError, "weight_decay", weightDecay)))
    return failure();
  if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1))
    return emitError() << "betas must be in [0, 1), got (" << formatF64(beta1)
                       << ", " << formatF64(beta2) << ")";
  if (!(momentum >= 0 && momentum < 1))
    return emitError() << "momentum must be in [0, 1), got "
                       << formatF64(momentum);
  if (kind == OptimizerKind::AdamW && momentum != 0)
    return emitError() << "adamw has no momentum (use betas)";
  return success();
}

LogicalResult LossScaleAttr::verify(EmitErrorFn emitError, LossScaleKind kind,
                                    F64 initial, int64_t growthInterval) {
  if (kind == LossScaleKind::None)
    return success();
  if (failed(checkPositive(emitError, "loss scale", initial)) ||
      failed(checkPositive(emitError, "growth_interval", growthInterval)))
    return failure();
  return success();
}

LogicalResult LRScheduleAttr::verify(EmitErrorFn emitError, LRScheduleKind,
                                     int64_t warmup, F64 minLrRatio) {
  if (warmup < 0)
    return emitError() << "warmup must be >= 0, got " << warmup;
  if (!(minLrRatio >= 0 && minLrRatio <= 1))
    return emitError() << "min_lr_ratio must be in [0, 1], got "
                       << formatF64(minLrRatio);
  return success();
}

LogicalResult TrainAttr::verify(EmitErrorFn emitError, OptimizerAttr optimizer,
                                int64_t microBatch, int64_t seqLen,
                                int64_t gradAccum, Precision precision,
                                LossScaleAttr lossScale, DType,
                                GradDType gradDType, Checkpointing,
                                F64 gradClip, LRScheduleAttr lrSchedule,
                                int64_t steps, int64_t seed) {
  if (!optimizer || !lossScale || !lrSchedule)
    return emitError() << "train needs an optimizer, a loss scale and an lr "
                          "schedule";
  if (failed(checkPositive(emitError, "micro_batch", microBatch)) ||
      failed(checkPositive(emitError, "seq_len", seqLen)) ||
      failed(checkPositive(emitError, "grad_accum", gradAccum)))
    return failure();
  if (!(gradClip >= 0))
    return emitError() << "grad_clip must be >= 0 (0 = no clipping), got "
                       << formatF64(gradClip);
  if (steps < 0 || seed < 0)
    return emitError() << "steps and seed must be >= 0";
  bool scaled = lossScale.getKind() != LossScaleKind::None;
  if (precision == Precision::FP16Mixed && !scaled)
    return emitError() << "fp16_mixed needs loss scaling: fp16 gradients "
                          "underflow without it";
  if (precision != Precision::FP16Mixed && scaled)
    return emitError() << "loss scaling is only for fp16_mixed, not "
                       << stringifyPrecision(precision);
  if (precision == Precision::FP32 && gradDType != GradDType::Working)
    return emitError() << "grad_dtype applies to mixed precision: fp32 "
                          "training keeps fp32 gradients";
  return success();
}

LogicalResult TensorSplitAttr::verify(EmitErrorFn emitError, int64_t dim,
                                      int64_t chunks) {
  if (dim < 0)
    return emitError() << "split dim must be >= 0, got " << dim;
  return checkPositive(emitError, "chunks", chunks);
}

int64_t TensorSplitAttr::localExtent(int64_t extent, int64_t ranks) const {
  // The runtime's definition (runtime/format/Schedule.h).
  return rt::splitExtent(extent, getChunks(), ranks);
}

LogicalResult WrapAttr::verify(EmitErrorFn emitError, WrapKind kind,
                               int64_t minParams) {
  if (kind == WrapKind::MinParams)
    return checkPositive(emitError, "min_params", minParams);
  if (minParams != 0)
    return emitError() << "min_params is only for the min_params policy";
  return success();
}

LogicalResult ParallelAttr::verify(EmitErrorFn emitError, Sharding sharding,
                                   WrapAttr wrap, OffloadAttr offload,
                                   MemorySpace optimizerStep, Prefetch, bool,
                                   int64_t maxInflightGathers, int64_t bucket,
                                   GradSync, bool, PipelineSchedule,
                                   int64_t virtualStages,
                                   mlir::DenseI64ArrayAttr stages) {
  if (!wrap || !offload)
    return emitError() << "parallel needs a wrap policy and an offload";
  if (failed(checkPositive(emitError, "virtual_stages", virtualStages)))
    return failure();
  if (stages)
    for (int64_t layers : stages.asArrayRef())
      if (layers < 1)
        return emitError() << "stages: every pipeline stage needs at least "
                              "one transformer block, got "
                           << layers;
  if (failed(checkPositive(emitError, "max_inflight_gathers",
                           maxInflightGathers)) ||
      failed(checkPositive(emitError, "bucket", bucket)))
    return failure();
  if (offload.getOptimizer() == MemorySpace::Host &&
      optimizerStep == MemorySpace::Device)
    return emitError() << "the optimizer state is offloaded to the CPU, so "
                          "the optimizer step must run there";
  bool gradsSharded = sharding == Sharding::ShardGradOp ||
                      sharding == Sharding::FullShard ||
                      sharding == Sharding::HybridShard;
  if (offload.getGrads() == MemorySpace::Host && !gradsSharded &&
      optimizerStep == MemorySpace::Device)
    return emitError() << "gradients offloaded to the CPU must be sharded or "
                          "stepped on the CPU";
  if (offload.getParams() == MemorySpace::Host &&
      (sharding == Sharding::NoShard || sharding == Sharding::Zero1))
    return emitError() << stringifySharding(sharding)
                       << " keeps full parameters on the device; they cannot "
                          "be offloaded";
  return success();
}
