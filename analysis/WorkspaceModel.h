//===- WorkspaceModel.h - Memory a unit allocates while it runs -*- C++ -*-===//

#ifndef PLAN_ANALYSIS_WORKSPACEMODEL_H
#define PLAN_ANALYSIS_WORKSPACEMODEL_H

#include "analysis/ActivationModel.h"
#include "dialects/plan/PlanDialect.h"

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>
#include <vector>

namespace plan {

/// The shape a unit's workspace depends on: one micro-batch of `microBatch`
/// sequences of `seqLen` tokens, computed in a type of `workingBytes` bytes
/// (4 for fp32, 2 for bf16 and fp16), by a unit whose backward returns the
/// gradients of `params` parameter elements (those that train, tied ones
/// included).
struct WorkspaceShape {
  int64_t microBatch = 0;
  int64_t seqLen = 0;
  int64_t workingBytes = 4;
  int64_t params = 0;
  /// A LoRA run's unit: its base weights get no gradient. Where the formulas
  /// hold a base weight's gradient, the gradients of its module's adapters
  /// (lora_A and lora_B elements; 0 for a module without) take its place:
  /// the MLP's input projections (gate and up, c_fc, intermediate.dense),
  /// its output projection (down_proj, mlp.c_proj, output.dense) and the
  /// attention's output projection (o_proj, attn.c_proj,
  /// attention.output.dense).
  bool frozenBase = false;
  int64_t mlpInAdapters = 0, mlpOutAdapters = 0, attnOutAdapters = 0;
  /// LoRA dropout (model.lora.dropout > 0): the adapters' rank and the
  /// adapted modules' names within the block ("self_attn.q_proj",
  /// "mlp.c_fc", "attention.output.dense"), whose inputs are dropped.
  int64_t dropoutRank = 0;
  std::vector<std::string> droppedModules;
  /// Tensor parallelism: a rank's unit holds 1/T of the heads,
  /// intermediate features and vocabulary (`params` counts its slices), and
  /// runs in parts, each with its own moments; under sequence parallelism
  /// the norm and residual parts hold 1/T of the tokens (streamTokens).
  TensorShare share;
};

/// `base` (micro-batch, sequence length, working type) completed for
/// `unit` of `plan`: its trained parameter elements and, under LoRA, its
/// adapters.
WorkspaceShape workspaceShapeOf(UnitOp unit, PlanOp plan, WorkspaceShape base);

/// The bytes LibTorch allocates outside the arena while a unit's forward (or
/// recompute) runs, at their highest point: the intermediates before they
/// are copied into the saves buffer and freed, the unit's output before it
/// is moved there, and the head's logits and loss temporaries. The unit's
/// input and parameters are in the arena. docs/sched.md ("Workspace
/// model") lists the terms; keep the two in step with runtime/models.
/// Under tensor parallelism, `part` is the part of the unit that runs
/// (TensorParallelParts.h): a Llama or GPT-2 block's and a head's parts
/// each have their own moments; the embedding's parts are each counted as
/// the whole unit, an upper bound.
int64_t forwardWorkspaceBytes(UnitKind kind, ModelAttr model,
                              const WorkspaceShape &shape, int64_t part = 0);

/// The same for a unit's backward: the gradients of its activations and of
/// its parameters (autograd returns all of them at once, at the end), the
/// gradient it hands to the unit before included; the gradient it received
/// is counted by the caller (it lives before the backward starts).
int64_t backwardWorkspaceBytes(UnitKind kind, ModelAttr model,
                               const WorkspaceShape &shape, int64_t part = 0);

/// The cuBLAS workspaces PyTorch allocates through its caching allocator
/// and keeps, one per (handle, stream): a unit's forward runs on the
/// executor's thread and its backward on autograd's device thread, each with
/// its own handle, both on the compute stream. PyTorch's default size is
/// 32 MiB on Hopper (sm90: the h100 and h200 devices, and an unknown
/// "custom" one) and 8 MiB + 128 KiB on other GPUs; linears with a bias
/// (GPT-2, BERT) also run cuBLASLt, which keeps its own 1 MiB per handle.
int64_t gpuLibraryWorkspaceBytes(llvm::StringRef deviceName,
                                 ModelFamily family);

} // namespace plan

#endif // PLAN_ANALYSIS_WORKSPACEMODEL_H
