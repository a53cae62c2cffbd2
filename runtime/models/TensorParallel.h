//===- TensorParallel.h - Megatron's tensor-parallel pieces -----*- C++ -*-===//
//
// What a tensor-parallel unit computes with besides the schedule's
// activation collectives (which run between a unit's parts as sched ops,
// docs/sched.md): the slice of a full weight a rank holds (the plan's
// `#plan.split` layout) and its inverse, a rank's rows of a vocab-parallel
// embedding, and the vocab-parallel cross-entropy in the form the schedule
// exchanges (per-token statistics, TensorParallelParts.h). Model.cpp's parts
// and the checkpoints compute with them; TensorParallelTest proves them,
// with Megatron's f/g collectives written as autograd functions, equal to
// the undivided computation on 2 Gloo ranks.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_RUNTIME_MODELS_TENSORPARALLEL_H
#define PLAN_RUNTIME_MODELS_TENSORPARALLEL_H

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace plan::rt::tp {

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

/// A rank's part of a vocab-parallel embedding lookup: `weight` holds rows
/// [start, start + weight.size(0)) of the table; tokens outside them look
/// up zeros. The ranks' lookups sum to the whole table's.
at::Tensor vocabRows(const at::Tensor &tokens, const at::Tensor &weight,
                     int64_t start);

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
