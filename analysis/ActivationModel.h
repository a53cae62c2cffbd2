//===- ActivationModel.h - Memory a unit saves for backward -----*- C++ -*-===//

#ifndef PLAN_ANALYSIS_ACTIVATIONMODEL_H
#define PLAN_ANALYSIS_ACTIVATIONMODEL_H

#include "dialects/plan/PlanDialect.h"

#include <cstdint>

namespace plan {

/// A tensor-parallel rank's share of the activations: 1/`ranks` of the
/// heads, intermediate features and vocabulary, and under
/// `sequenceParallel` 1/`ranks` of the tokens outside the column- and
/// row-parallel layers. {1, false} without tensor parallelism.
struct TensorShare {
  int64_t ranks = 1;
  bool sequenceParallel = false;
};

/// The share of `plan`'s mesh and parallel settings.
TensorShare tensorShareOf(PlanOp plan);

/// The tokens of the residual stream (the hidden states between units, and
/// the norms') a rank holds of a micro-batch of `tokens`: all of them, or
/// 1/ranks under sequence parallelism.
inline int64_t streamTokens(int64_t tokens, TensorShare share) {
  return share.sequenceParallel ? tokens / share.ranks : tokens;
}

/// Bytes one unit of `kind` keeps for its backward in one micro-batch of
/// `microBatch` sequences of `seqLen` tokens (a forward with a graph, or a
/// recompute), when it computes in a type of `workingBytes` bytes (4 for
/// fp32, 2 for bf16 and fp16): what the runtime copies into the unit's saves
/// buffer, its output included, alignment included; documented per kind in
/// docs/sched.md. `ownInput`: the unit also keeps its input (a head after
/// blocks checkpointed without a graph).
/// Under tensor parallelism (`share`), one rank's: the same op list with
/// its heads, features and vocabulary slice (docs/sched.md, "Activation
/// model"), at or slightly above what plan-run's parts save.
int64_t activationBytes(UnitKind kind, ModelAttr model, int64_t microBatch,
                        int64_t seqLen, int64_t workingBytes,
                        bool ownInput = false, TensorShare share = {});

/// What LoRA changes in what `unit` keeps for backward, next to a full
/// fine-tune's activationBytes (0 without LoRA; negative where the frozen
/// base keeps less than the adapters add): for each adapted layer, the
/// rank-wide intermediate x A^T that B's gradient reads and, with dropout,
/// the dropped input and its mask (one byte an element); less what only a
/// base weight's gradient would have read. For Llama units that is as exact
/// as a full fine-tune's count (measured against the runtime's saves): each
/// RMSNorm's normalised value (its weight's), and the input of projections
/// that are frozen and not adapted (q/k/v's, gate/up's, down_proj's,
/// lm_head's; o_proj's input stays, autograd keeps it anyway). For
/// GPT-2 and BERT, whose LayerNorm and Conv1D/Linear keep their inputs for
/// the input's gradient anyway, the full fine-tune's count stands (within a
/// few storages of alignment).
int64_t loraActivationBytes(UnitOp unit, ModelAttr model, int64_t microBatch,
                            int64_t seqLen, int64_t workingBytes);

/// Bytes a checkpointed block saves: its input hidden states (1/T of the
/// tokens under sequence parallelism).
int64_t checkpointBytes(ModelAttr model, int64_t microBatch, int64_t seqLen,
                        int64_t workingBytes, TensorShare share = {});

/// Bytes of the type units compute and keep activations in: 4 under fp32,
/// 2 under bf16 or fp16 mixed precision.
int64_t workingBytes(TrainAttr train);

/// Elements of a saves buffer of `train`'s micro-batch: `activationBytes`
/// and `loraActivationBytes` (or, `checkpointed`, `checkpointBytes`) in the
/// working type, rounded up, at least one. sched-lower and
/// sched-activation-checkpointing size the buffers with it; sched-insert-casts
/// retypes them to the working type.
int64_t savesElements(UnitOp unit, ModelAttr model, TrainAttr train,
                      bool ownInput = false);
int64_t checkpointElements(ModelAttr model, TrainAttr train,
                           TensorShare share = {});

} // namespace plan

#endif // PLAN_ANALYSIS_ACTIVATIONMODEL_H
