//===- PlanEnums.td - Enumerations of the plan language ----*- tablegen -*-===//
//
// One definition per enumeration, shared by the .plan language (the string of
// each case is its spelling in a .plan file), the frontend's PlanSpec and the
// plan dialect's attributes (the same string in the IR).
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_ENUMS_TD
#define PLAN_ENUMS_TD

include "mlir/IR/EnumAttr.td"

class Plan_Enum<string name, string summary, list<I32EnumAttrCase> cases>
    : I32EnumAttr<name, summary, cases> {
  let cppNamespace = "::plan";
  let genSpecializedAttr = 0;
  let stringToSymbolFnName = "symbolize" # name;
  let symbolToStringFnName = "stringify" # name;
}

def Plan_ModelFamily : Plan_Enum<"ModelFamily", "model architecture family", [
  I32EnumAttrCase<"Llama", 0, "llama">,
  I32EnumAttrCase<"GPT2", 1, "gpt2">,
  I32EnumAttrCase<"Bert", 2, "bert">]>;

def Plan_BertHead : Plan_Enum<"BertHead", "BERT task head", [
  I32EnumAttrCase<"MaskedLM", 0, "masked_lm">,
  I32EnumAttrCase<"SequenceClassification", 1, "sequence_classification">]>;

def Plan_OptimizerKind : Plan_Enum<"OptimizerKind", "optimizer", [
  I32EnumAttrCase<"AdamW", 0, "adamw">,
  I32EnumAttrCase<"SGD", 1, "sgd">]>;

// Which parameters an optimizer's weight_decay applies to: `matrices`, those
// of two or more dimensions (as the HF Trainer and Megatron: no decay on
// norm scales and biases), or `all` (torch.optim's one param group).
def Plan_WeightDecayScope : Plan_Enum<"WeightDecayScope",
                                      "parameters weight decay applies to", [
  I32EnumAttrCase<"Matrices", 0, "matrices">,
  I32EnumAttrCase<"All", 1, "all">]>;

def Plan_Precision : Plan_Enum<"Precision", "training precision recipe", [
  I32EnumAttrCase<"FP32", 0, "fp32">,
  I32EnumAttrCase<"BF16Mixed", 1, "bf16_mixed">,
  I32EnumAttrCase<"FP16Mixed", 2, "fp16_mixed">]>;

def Plan_DType : Plan_Enum<"DType", "floating-point element type", [
  I32EnumAttrCase<"F32", 0, "fp32">,
  I32EnumAttrCase<"BF16", 1, "bf16">,
  I32EnumAttrCase<"F16", 2, "fp16">]>;

def Plan_GradDType : Plan_Enum<"GradDType",
    "element type gradients are accumulated and kept in until the step", [
  I32EnumAttrCase<"Working", 0, "working">,
  I32EnumAttrCase<"F32", 1, "fp32">]>;

def Plan_LossScaleKind : Plan_Enum<"LossScaleKind", "loss scaling", [
  I32EnumAttrCase<"None", 0, "none">,
  I32EnumAttrCase<"Dynamic", 1, "dynamic">,
  I32EnumAttrCase<"Static", 2, "static">]>;

def Plan_Checkpointing : Plan_Enum<"Checkpointing", "activation checkpointing", [
  I32EnumAttrCase<"None", 0, "none">,
  I32EnumAttrCase<"Full", 1, "full">]>;

def Plan_LRScheduleKind : Plan_Enum<"LRScheduleKind", "learning-rate schedule", [
  I32EnumAttrCase<"Constant", 0, "constant">,
  I32EnumAttrCase<"Cosine", 1, "cosine">,
  I32EnumAttrCase<"Linear", 2, "linear">]>;

def Plan_Sharding : Plan_Enum<"Sharding", "data-parallel sharding strategy", [
  I32EnumAttrCase<"NoShard", 0, "no_shard">,
  I32EnumAttrCase<"Zero1", 1, "zero1">,
  I32EnumAttrCase<"ShardGradOp", 2, "shard_grad_op">,
  I32EnumAttrCase<"FullShard", 3, "full_shard">,
  I32EnumAttrCase<"HybridShard", 4, "hybrid_shard">]>;

def Plan_MemorySpace : Plan_Enum<"MemorySpace", "where a state lives", [
  I32EnumAttrCase<"Device", 0, "device">,
  I32EnumAttrCase<"Host", 1, "cpu">]>;

def Plan_WrapKind : Plan_Enum<"WrapKind", "unit wrapping policy", [
  I32EnumAttrCase<"TransformerBlock", 0, "transformer_block">,
  I32EnumAttrCase<"MinParams", 1, "min_params">,
  I32EnumAttrCase<"WholeModel", 2, "whole_model">]>;

def Plan_Prefetch : Plan_Enum<"Prefetch", "backward prefetch", [
  I32EnumAttrCase<"None", 0, "none">,
  I32EnumAttrCase<"Pre", 1, "pre">,
  I32EnumAttrCase<"Post", 2, "post">]>;

def Plan_GradSync : Plan_Enum<"GradSync",
    "when accumulated gradients are reduced", [
  I32EnumAttrCase<"EveryMicroBatch", 0, "every_micro_batch">,
  I32EnumAttrCase<"LastMicroBatch", 1, "last_micro_batch">]>;

def Plan_PipelineSchedule : Plan_Enum<"PipelineSchedule",
    "order of a pipeline's forward and backward micro-batches", [
  I32EnumAttrCase<"GPipe", 0, "gpipe">,
  I32EnumAttrCase<"OneFOneB", 1, "1f1b">,
  I32EnumAttrCase<"Interleaved", 2, "interleaved">]>;

def Plan_BaseStorage : Plan_Enum<"BaseStorage",
    "how the frozen base weights of a LoRA run are stored", [
  I32EnumAttrCase<"NF4", 0, "nf4">,
  I32EnumAttrCase<"BF16", 1, "bf16">,
  I32EnumAttrCase<"F16", 2, "fp16">,
  I32EnumAttrCase<"F32", 3, "fp32">]>;

def Plan_UnitKind : Plan_Enum<"UnitKind", "kind of model unit", [
  I32EnumAttrCase<"Embedding", 0, "embedding">,
  I32EnumAttrCase<"LlamaBlock", 1, "llama_block">,
  I32EnumAttrCase<"GPT2Block", 2, "gpt2_block">,
  I32EnumAttrCase<"BertBlock", 3, "bert_block">,
  I32EnumAttrCase<"LlamaHead", 4, "llama_head">,
  I32EnumAttrCase<"GPT2Head", 5, "gpt2_head">,
  I32EnumAttrCase<"BertHead", 6, "bert_head">]>;

#endif // PLAN_ENUMS_TD
