//===- TensorParallel.h - Megatron's tensor-parallel pieces -----*- C++ -*-===//
//
// What a tensor-parallel unit computes with besides its own weights: the
// slice of a full weight a rank holds (the plan's `#plan.split` layout), the
// four collectives that join the column- and row-parallel regions in autograd
// (Megatron's f, g and their sequence-parallel forms), the vocab-parallel
// embedding, and the vocab-parallel cross-entropy in the form the schedule
// exchanges (per-token statistics, TensorParallelParts.h). Each collective
// runs on the tensor group it is given and is an autograd function whose
// backward is the matching collective.
//
// plan-run's units use localSlice and the loss's statistics (Model.cpp:
// the schedule runs the collectives between a unit's parts itself);
// TensorParallelTest proves a Llama block, GPT-2's attention and the
// vocab-parallel embedding and loss built from these pieces equal to the
// undivided computation on 2 Gloo ranks.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_RUNTIME_MODELS_TENSORPARALLEL_H
#define PLAN_RUNTIME_MODELS_TENSORPARALLEL_H

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <cstdint>
#include <vector>

namespace plan::rt::tp {

/// The tensor group the collectives run on. The Comm that owns the backend
/// outlives every autograd graph built on it.
using Group = c10::intrusive_ptr<c10d::Backend>;

/// Rank `index` of `ranks`'s part of `full` under a split of dimension `dim`
/// in `chunks` equal parts (the IR's `split <dim, chunks>`): slice `index` of
/// every part, the parts in order; a part the ranks do not divide is padded
/// with zeros first (splitExtent). A copy, contiguous.
at::Tensor localSlice(const at::Tensor &full, int64_t dim, int64_t chunks,
                      int64_t index, int64_t ranks);

/// The inverse of localSlice: the whole tensor from every rank's slice
/// (`slices`, in rank order) of a split of dimension `dim` in `chunks` parts
/// of a whole extent `extent` there (padding dropped).
at::Tensor joinSlices(const std::vector<at::Tensor> &slices, int64_t dim,
                      int64_t chunks, int64_t extent);

/// Megatron's f, before a column-parallel layer: the identity, and in
/// backward the sum of the input's gradient over the group (each rank's
/// columns contribute to it).
at::Tensor copyToGroup(const at::Tensor &x, const Group &group);

/// Megatron's g, after a row-parallel layer: the sum of the ranks' partial
/// outputs, and in backward the identity.
at::Tensor reduceFromGroup(const at::Tensor &x, const Group &group);

/// Sequence parallelism before a column-parallel layer: the ranks' slices of
/// dimension `dim` (the sequence) gathered in rank order; in backward the
/// gradient reduce-scattered back to the slices.
at::Tensor gatherSequence(const at::Tensor &x, int64_t dim, const Group &group);

/// Sequence parallelism after a row-parallel layer: the partial outputs
/// summed and scattered along `dim`, each rank keeping its slice; in
/// backward the gradient all-gathered.
at::Tensor reduceScatterSequence(const at::Tensor &x, int64_t dim,
                                 const Group &group);

/// A vocab-parallel embedding lookup: `weight` holds rows [start, start +
/// weight.size(0)) of the table; tokens outside them look up zeros, and the
/// ranks' lookups are summed (reduceFromGroup).
at::Tensor vocabParallelEmbedding(const at::Tensor &tokens,
                                  const at::Tensor &weight, int64_t start,
                                  const Group &group);

/// The vocab-parallel cross-entropy in the schedule's form
/// (TensorParallelParts.h, LossStatistics): each rank reduces its [N,
/// V_local] logits, which hold vocabulary columns [start, start + V_local)
/// (those at or past `vocab` padding, never predicted), to kLossStatistics
/// fp32 values a token: [kLossStatistics, N], the maximum of its real
/// columns (-inf for a slice of padding alone), the sum of exp(logit -
/// maximum), and the target's logit where the target is in the slice (0
/// elsewhere).
at::Tensor lossStatistics(const at::Tensor &logits, const at::Tensor &targets,
                          int64_t start, int64_t vocab);

/// From every rank's statistics ([ranks, kLossStatistics, N], the
/// all-gather of lossStatistics): each token's log-sum-exp over the whole
/// vocabulary, and the cross-entropy summed over the targets that are not
/// `ignoreIndex` over `divisor`, or where `divisor` is not positive their
/// mean, as at::cross_entropy of the gathered logits would give it
/// (MicroBatch::lossDivisor).
struct VocabParallelLoss {
  at::Tensor loss, logSumExp;
};
VocabParallelLoss lossFromStatistics(const at::Tensor &stats,
                                     const at::Tensor &targets,
                                     int64_t ignoreIndex, double divisor = 0);

/// The gradient of `scale` times that loss with respect to this rank's
/// logits: exp(logit - log-sum-exp) minus the one-hot target, on the counted
/// targets, over `divisor` or their count (0 on padding columns), in the
/// logits' type.
at::Tensor lossGradient(const at::Tensor &logits, const at::Tensor &targets,
                        const at::Tensor &logSumExp, int64_t start,
                        int64_t vocab, int64_t ignoreIndex, double scale,
                        double divisor = 0);

} // namespace plan::rt::tp

#endif // PLAN_RUNTIME_MODELS_TENSORPARALLEL_H
