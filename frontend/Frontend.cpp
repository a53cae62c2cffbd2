//===- Frontend.cpp - From .plan text to the plan dialect -----------------===//

#include "frontend/Frontend.h"

#include "dialects/plan/PlanDialect.h"
#include "dialects/sched/SchedDialect.h"
#include "frontend/Analyze.h"
#include "frontend/Parser.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <functional>

using namespace mlir;

namespace plan {

std::optional<PlanSpec> loadPlan(llvm::SourceMgr &sourceMgr, unsigned bufferId,
                                 llvm::ArrayRef<std::string> overrides,
                                 llvm::StringRef name, DiagEmitter &diag) {
  syntax::Block root = parsePlanSyntax(sourceMgr, bufferId, diag);
  // Apply overrides even after a syntax error: a bad --set is worth
  // reporting in the same run.
  for (const std::string &setting : overrides)
    applyOverride(root, setting, sourceMgr, diag);
  if (diag.hadError())
    return std::nullopt;
  return analyzePlan(root, name, diag);
}

bool checkInput(llvm::StringRef path, std::string &error) {
  if (path == "-")
    return true;
  llvm::sys::fs::file_status status;
  if (std::error_code ec = llvm::sys::fs::status(path, status)) {
    error = ("cannot open input file '" + path + "': " + ec.message()).str();
    return false;
  }
  if (status.type() != llvm::sys::fs::file_type::regular_file) {
    error = (path + ": not a regular file").str();
    return false;
  }
  if (status.getSize() > kMaxInputBytes) {
    error = (path + ": " + llvm::Twine(status.getSize()) +
             " bytes, more than the " + llvm::Twine(kMaxInputBytes >> 20) +
             " MiB an input file may have")
                .str();
    return false;
  }
  return true;
}

std::unique_ptr<llvm::MemoryBuffer> openInput(llvm::StringRef path,
                                              std::string &error) {
  if (!checkInput(path, error))
    return nullptr;
  auto buffer = llvm::MemoryBuffer::getFileOrSTDIN(path, /*IsText=*/true);
  if (!buffer) {
    error = ("cannot open input file '" + path +
             "': " + buffer.getError().message())
                .str();
    return nullptr;
  }
  return std::move(*buffer);
}

bool keepOutput(llvm::ToolOutputFile &output, llvm::StringRef path,
                std::string &error) {
  llvm::raw_fd_ostream &os = output.os();
  os.flush();
  if (std::error_code ec = os.error()) {
    os.clear_error();
    error = ("cannot write '" + (path == "-" ? "<stdout>" : path) +
             "': " + ec.message())
                .str();
    return false;
  }
  output.keep();
  return true;
}

std::string defaultPlanName(llvm::StringRef path) {
  llvm::StringRef file = llvm::sys::path::filename(path);
  file.consume_back(".plan");
  return file.empty() ? "plan" : file.str();
}

void registerPlanDialects(DialectRegistry &registry) {
  registry.insert<PlanDialect, shard::ShardDialect, sched::SchedDialect,
                  memref::MemRefDialect>();
}

namespace {

/// Turns the spec's sections into the dialect's attributes.
struct PlanImporter {
  const PlanSpec &plan;
  DiagEmitter &diag;
  MLIRContext *ctx;

  Location locOf(llvm::StringRef path) const {
    return diag.loc(plan.locOf(path));
  }

  /// Attribute verifier errors point at the section they come from.
  llvm::function_ref<InFlightDiagnostic()> errorAt(llvm::StringRef path) {
    errorLoc = locOf(path);
    return emitErrorAtSection;
  }
  Location errorLoc = UnknownLoc::get(ctx);
  std::function<InFlightDiagnostic()> emitErrorAtSection = [this] {
    return mlir::emitError(errorLoc);
  };

  ModelAttr model() {
    const ModelSpec &m = plan.model;
    RopeScalingAttr rope;
    if (m.ropeScaling)
      rope = RopeScalingAttr::getChecked(
          errorAt("model"), ctx, F64(m.ropeScaling->factor),
          F64(m.ropeScaling->lowFreqFactor), F64(m.ropeScaling->highFreqFactor),
          m.ropeScaling->originalMaxSeqLen);
    LoraAttr lora;
    // The analyzer resolves the base's storage (applyDerivedDefaults).
    if (const std::optional<LoraSpec> &l = plan.lora) {
      llvm::SmallVector<Attribute> targets;
      for (const std::string &target : l->targets)
        targets.push_back(StringAttr::get(ctx, target));
      lora = LoraAttr::getChecked(errorAt("model.lora"), ctx, l->rank,
                                  F64(l->alpha), F64(l->dropout),
                                  ArrayAttr::get(ctx, targets), *l->base);
      if (!lora)
        return nullptr;
    }
    return ModelAttr::getChecked(
        errorAt("model"), ctx, m.family, llvm::StringRef(m.preset), m.vocab,
        m.hidden, m.intermediate, m.layers, m.heads, m.kvHeads, m.maxSeqLen,
        F64(m.ropeTheta), rope, F64(m.normEps), m.tieEmbeddings, m.typeVocab,
        m.bertHead, m.numLabels, lora);
  }

  ClusterAttr cluster() {
    const ClusterSpec &c = plan.cluster;
    const DeviceSpec &d = c.device;
    auto device = DeviceAttr::getChecked(
        errorAt("cluster.gpu"), ctx, llvm::StringRef(d.name), d.memoryBytes,
        F64(d.bf16Tflops), F64(d.fp16Tflops), F64(d.fp32Tflops),
        F64(d.hbmBandwidth), F64(d.nvlinkBandwidth), F64(d.pcieBandwidth),
        F64(d.linkLatency));
    if (!device)
      return nullptr;
    return ClusterAttr::getChecked(errorAt("cluster"), ctx, c.nodes,
                                   c.gpusPerNode, device, c.hostMemoryBytes,
                                   F64(c.interNodeBandwidth),
                                   F64(c.hostBandwidth), c.hostCores);
  }

  /// fp32 gradients under mixed precision are the layout's other choice;
  /// the working type is the default layout of the IR.
  static GradDType gradDType(const TrainSpec &t) {
    return t.precision != Precision::FP32 && t.gradDtype == DType::F32
               ? GradDType::F32
               : GradDType::Working;
  }

  TrainAttr train() {
    const TrainSpec &t = plan.train;
    const OptimizerSpec &o = t.optimizer;
    auto optimizer = OptimizerAttr::getChecked(
        errorAt("train.optimizer"), ctx, o.kind, F64(o.lr), F64(o.beta1),
        F64(o.beta2), F64(o.eps), F64(o.weightDecay), F64(o.momentum), o.decay);
    auto lossScale = LossScaleAttr::getChecked(
        errorAt("train.loss_scale"), ctx, t.lossScale.kind,
        F64(t.lossScale.initial), t.lossScale.growthInterval);
    auto schedule = LRScheduleAttr::getChecked(
        errorAt("train.lr_schedule"), ctx, t.lrSchedule.kind,
        t.lrSchedule.warmupSteps, F64(t.lrSchedule.minLrRatio));
    if (!optimizer || !lossScale || !schedule)
      return nullptr;
    return TrainAttr::getChecked(
        errorAt("train"), ctx, optimizer, t.microBatch, t.seqLen, t.gradAccum,
        t.precision, lossScale, t.reduceDtype, gradDType(t),
        t.activationCheckpointing, F64(t.gradClip.value_or(0.0)), schedule,
        t.steps, t.seed);
  }

  ParallelAttr parallel() {
    const ParallelSpec &p = plan.parallel;
    auto wrap = WrapAttr::getChecked(errorAt("parallel.wrap"), ctx, p.wrap.kind,
                                     p.wrap.minParams);
    auto offload = OffloadAttr::get(ctx, p.offload.params, p.offload.grads,
                                    p.offload.optimizer);
    if (!wrap)
      return nullptr;
    return ParallelAttr::getChecked(
        errorAt("parallel"), ctx, p.sharding, wrap, offload, p.optimizerStep,
        p.backwardPrefetch, p.forwardPrefetch, p.maxInflightGathers,
        p.bucketBytes, p.gradSync, p.sequenceParallel, p.schedule,
        p.virtualStages,
        p.stages.empty() ? mlir::DenseI64ArrayAttr()
                         : mlir::DenseI64ArrayAttr::get(ctx, p.stages));
  }
};

} // namespace

OwningOpRef<ModuleOp> importPlan(const PlanSpec &plan, DiagEmitter &diag) {
  MLIRContext *ctx = diag.getContext();
  ctx->loadDialect<PlanDialect, shard::ShardDialect>();
  PlanImporter importer{plan, diag, ctx};
  // Build all four so one run reports every inconsistent section.

  // Attribute verifiers report through the context; a failure yields null.
  ModelAttr model = importer.model();
  ClusterAttr cluster = importer.cluster();
  TrainAttr train = importer.train();
  ParallelAttr parallel = importer.parallel();
  if (!model || !cluster || !train || !parallel)
    return nullptr;

  Location fileLoc = diag.loc(llvm::SMLoc());
  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc);
  OpBuilder builder = OpBuilder::atBlockEnd(module->getBody());
  llvm::StringRef meshName = "mesh";
  // Axes (pipeline, replicate, shard, tensor): a tensor group is
  // consecutive ranks, a pipeline's stages the farthest apart.
  const ParallelSpec &p = plan.parallel;
  shard::GridOp::create(builder,
                        importer.locOf(p.pipeline > 1 ? "parallel.pipeline"
                                       : p.tensor > 1 ? "parallel.tensor"
                                                      : "parallel.mesh"),
                        meshName,
                        llvm::ArrayRef<int64_t>{p.pipeline, p.meshReplicate,
                                                p.meshShard, p.tensor});
  PlanOp::create(builder, fileLoc, plan.name, meshName, model, cluster, train,
                 parallel);
  if (failed(verify(*module)))
    return nullptr;
  return module;
}

} // namespace plan
