//===- PlanAttrs.td - Attributes of the plan dialect -------*- tablegen -*-===//
//
// One attribute per section of a .plan file. Parameters that equal their
// default are left out when printed, so the IR shows what is special about a
// plan. Sizes are bytes, bandwidths bytes/s, compute TFLOP/s.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_ATTRS_TD
#define PLAN_ATTRS_TD

include "dialects/plan/PlanDialect.td"
include "dialects/plan/PlanEnums.td"
include "mlir/IR/AttrTypeBase.td"

class Plan_Attr<string name, string mnemonic_, list<Trait> traits = []>
    : AttrDef<Plan_Dialect, name, traits> {
  let mnemonic = mnemonic_;
  let assemblyFormat = "`<` struct(params) `>`";
}

// A double printed in the shortest form that reads back bit-exactly.
class F64Param<string desc, string default = ""> : AttrParameter<"::plan::F64", desc> {
  let printer = "::plan::printF64Param($_printer, $_self)";
  let comparator = "::plan::F64::same($_lhs, $_rhs)";
  let parser = "::plan::parseF64Param($_parser)";
  let defaultValue = default;
}
class I64Param<string desc, string default = ""> : AttrParameter<"int64_t", desc> {
  let defaultValue = default;
}
class BoolParam<string desc, string default> : AttrParameter<"bool", desc> {
  let printer = "$_printer << ($_self ? \"true\" : \"false\")";
  let parser = "::plan::parseBoolParam($_parser)";
  let defaultValue = default;
}
class EnumParam<EnumAttrInfo info, string default = "">
    : EnumParameter<info> {
  let defaultValue = default;
}

//===----------------------------------------------------------------------===//
// Model
//===----------------------------------------------------------------------===//

def Plan_RopeScalingAttr : Plan_Attr<"RopeScaling", "rope_scaling"> {
  let summary = "Llama 3.1 RoPE frequency scaling";
  let parameters = (ins
    F64Param<"">:$factor,
    F64Param<"">:$low_freq_factor,
    F64Param<"">:$high_freq_factor,
    I64Param<"">:$original_max_seq_len);
  let genVerifyDecl = 1;
}

def Plan_LoraAttr : Plan_Attr<"Lora", "lora"> {
  let summary = "LoRA adapters on a frozen base (HF PEFT's LoraConfig)";
  let description = [{
    `targets` are the blocks' linear modules that get adapters, as PEFT's
    `target_modules` (a name matches every module whose dotted name ends in
    it); `base` is how the frozen base weights are stored.
  }];
  let parameters = (ins
    I64Param<"">:$rank,
    F64Param<"">:$alpha,
    F64Param<"", "0.0">:$dropout,
    AttrParameter<"::mlir::ArrayAttr", "module names">:$targets,
    EnumParam<Plan_BaseStorage>:$base);
  let genVerifyDecl = 1;
}

def Plan_ModelAttr : Plan_Attr<"Model", "model"> {
  let summary = "A model architecture and its sizes";
  let description = [{
    Keys as in the .plan language (docs/language.md), each the HuggingFace
    config.json value. `preset` names the preset it came from ("" for an
    explicit model).
  }];
  let parameters = (ins
    EnumParam<Plan_ModelFamily>:$family,
    StringRefParameter<"preset name", "\"\"">:$preset,
    I64Param<"">:$vocab,
    I64Param<"">:$hidden,
    I64Param<"">:$intermediate,
    I64Param<"">:$layers,
    I64Param<"">:$heads,
    I64Param<"">:$kv_heads,
    I64Param<"">:$max_seq_len,
    F64Param<"", "10000.0">:$rope_theta,
    OptionalParameter<"::plan::RopeScalingAttr">:$rope_scaling,
    F64Param<"", "1e-5">:$norm_eps,
    BoolParam<"", "false">:$tie_embeddings,
    I64Param<"", "2">:$type_vocab,
    EnumParam<Plan_BertHead, "::plan::BertHead::MaskedLM">:$bert_head,
    I64Param<"", "2">:$num_labels,
    OptionalParameter<"::plan::LoraAttr">:$lora);
  let genVerifyDecl = 1;
}

//===----------------------------------------------------------------------===//
// Cluster
//===----------------------------------------------------------------------===//

def Plan_DeviceAttr : Plan_Attr<"Device", "device"> {
  let summary = "One accelerator kind: memory, peak compute, bandwidths";
  let parameters = (ins
    StringRefParameter<"device table name or \"custom\"">:$name,
    I64Param<"bytes">:$memory,
    F64Param<"dense TFLOP/s">:$bf16_tflops,
    F64Param<"dense TFLOP/s">:$fp16_tflops,
    F64Param<"TFLOP/s">:$fp32_tflops,
    F64Param<"bytes/s">:$hbm_bandwidth,
    F64Param<"bytes/s per direction; 0 = none">:$nvlink_bandwidth,
    F64Param<"bytes/s per direction">:$pcie_bandwidth,
    F64Param<"seconds per ring step between ranks of a node", "::plan::kDefaultLinkLatency">:$link_latency);
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The CPU backend's "device" (`gpu = cpu`, with or without overrides):
    /// its compute and memory figures are one core's, and a rank gets its
    /// node's `host_cores / gpus_per_node` of them (docs/language.md).
    bool isCpu() const { return getName() == "cpu"; }
  }];
}

def Plan_ClusterAttr : Plan_Attr<"Cluster", "cluster"> {
  let summary = "The machines a plan runs on";
  let parameters = (ins
    I64Param<"">:$nodes,
    I64Param<"">:$gpus_per_node,
    AttrParameter<"::plan::DeviceAttr", "">:$device,
    I64Param<"bytes per node">:$host_memory,
    F64Param<"bytes/s per device per direction">:$inter_node_bandwidth,
    F64Param<"host memory bytes/s per node; 0: not modelled", "0.0">:$host_bandwidth,
    I64Param<"CPU cores per node; 0: not modelled", "0">:$host_cores);
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    int64_t getWorldSize() const { return getNodes() * getGpusPerNode(); }
  }];
}

//===----------------------------------------------------------------------===//
// Training recipe
//===----------------------------------------------------------------------===//

def Plan_OptimizerAttr : Plan_Attr<"Optimizer", "optimizer"> {
  let summary = "Optimizer and its hyper-parameters";
  let parameters = (ins
    EnumParam<Plan_OptimizerKind>:$kind,
    F64Param<"">:$lr,
    F64Param<"", "0.9">:$beta1,
    F64Param<"", "0.999">:$beta2,
    F64Param<"", "1e-8">:$eps,
    F64Param<"", "0.0">:$weight_decay,
    F64Param<"", "0.0">:$momentum,
    EnumParam<Plan_WeightDecayScope,
              "::plan::WeightDecayScope::Matrices">:$decay);
  let genVerifyDecl = 1;
}

def Plan_LossScaleAttr : Plan_Attr<"LossScale", "loss_scale"> {
  let summary = "fp16 loss scaling";
  let parameters = (ins
    EnumParam<Plan_LossScaleKind>:$kind,
    F64Param<"", "65536.0">:$initial,
    I64Param<"", "2000">:$growth_interval);
  let genVerifyDecl = 1;
}

def Plan_LRScheduleAttr : Plan_Attr<"LRSchedule", "lr_schedule"> {
  let summary = "Learning-rate schedule";
  let parameters = (ins
    EnumParam<Plan_LRScheduleKind>:$kind,
    I64Param<"", "0">:$warmup,
    F64Param<"", "0.0">:$min_lr_ratio);
  let genVerifyDecl = 1;
}

def Plan_TrainAttr : Plan_Attr<"Train", "train"> {
  let summary = "The training recipe";
  let parameters = (ins
    AttrParameter<"::plan::OptimizerAttr", "">:$optimizer,
    I64Param<"sequences per rank per micro-batch">:$micro_batch,
    I64Param<"">:$seq_len,
    I64Param<"", "1">:$grad_accum,
    EnumParam<Plan_Precision, "::plan::Precision::FP32">:$precision,
    AttrParameter<"::plan::LossScaleAttr", "">:$loss_scale,
    EnumParam<Plan_DType, "::plan::DType::F32">:$reduce_dtype,
    EnumParam<Plan_GradDType, "::plan::GradDType::Working">:$grad_dtype,
    EnumParam<Plan_Checkpointing, "::plan::Checkpointing::None">:$activation_checkpointing,
    F64Param<"max global L2 norm; 0 = no clipping", "0.0">:$grad_clip,
    AttrParameter<"::plan::LRScheduleAttr", "">:$lr_schedule,
    I64Param<"", "0">:$steps,
    I64Param<"", "0">:$seed);
  let genVerifyDecl = 1;
}

//===----------------------------------------------------------------------===//
// Parallelism
//===----------------------------------------------------------------------===//

def Plan_TensorSplitAttr : Plan_Attr<"TensorSplit", "split"> {
  let summary = "How tensor parallelism divides a parameter";
  let description = [{
    Dimension `dim` of the parameter is `chunks` equal parts, and each part
    is cut into as many slices as the mesh's tensor axis has ranks: rank t
    holds slice t of every part, the parts' slices in order. One part is a
    Megatron column-parallel weight (the output features: dim 0 of an
    nn.Linear weight, 1 of a GPT-2 Conv1D), a row-parallel one (the input
    features) or a vocab-parallel embedding (its rows); three are GPT-2's
    fused c_attn, whose slices keep the q, k and v of the same heads
    together. A part the ranks do not divide evenly (a vocabulary) is
    padded up to a multiple of them.
  }];
  let parameters = (ins
    I64Param<"">:$dim,
    I64Param<"", "1">:$chunks);
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The dimension's extent on one of `ranks` ranks: chunks x the part's
    /// slice, rounded up.
    int64_t localExtent(int64_t extent, int64_t ranks) const;
  }];
}

def Plan_WrapAttr : Plan_Attr<"Wrap", "wrap"> {
  let summary = "How parameters are grouped into units";
  let parameters = (ins
    EnumParam<Plan_WrapKind>:$kind,
    I64Param<"", "0">:$min_params);
  let genVerifyDecl = 1;
}

def Plan_OffloadAttr : Plan_Attr<"Offload", "offload"> {
  let summary = "Where parameters, gradients and optimizer state live";
  let parameters = (ins
    EnumParam<Plan_MemorySpace, "::plan::MemorySpace::Device">:$params,
    EnumParam<Plan_MemorySpace, "::plan::MemorySpace::Device">:$grads,
    EnumParam<Plan_MemorySpace, "::plan::MemorySpace::Device">:$optimizer);
}

def Plan_ParallelAttr : Plan_Attr<"Parallel", "parallel"> {
  let summary = "The parallel strategy";
  let description = [{
    How the plan's mesh is used: data parallelism over its replicate and
    shard axes (`sharding`, offload, prefetch, buckets), and over its tensor
    axis `sequence_parallel` (Megatron sequence parallelism, which needs a
    tensor axis above 1). The degrees themselves are the mesh's shape.
  }];
  let parameters = (ins
    EnumParam<Plan_Sharding>:$sharding,
    AttrParameter<"::plan::WrapAttr", "">:$wrap,
    AttrParameter<"::plan::OffloadAttr", "">:$offload,
    EnumParam<Plan_MemorySpace, "::plan::MemorySpace::Device">:$optimizer_step,
    EnumParam<Plan_Prefetch, "::plan::Prefetch::Pre">:$backward_prefetch,
    BoolParam<"", "false">:$forward_prefetch,
    I64Param<"", "2">:$max_inflight_gathers,
    I64Param<"bytes", "26214400">:$bucket,
    EnumParam<Plan_GradSync, "::plan::GradSync::EveryMicroBatch">:$grad_sync,
    BoolParam<"", "false">:$sequence_parallel,
    EnumParam<Plan_PipelineSchedule, "::plan::PipelineSchedule::OneFOneB">:$pipeline_schedule,
    I64Param<"", "1">:$virtual_stages,
    OptionalParameter<"::mlir::DenseI64ArrayAttr">:$stages);
  let genVerifyDecl = 1;
}

#endif // PLAN_ATTRS_TD
