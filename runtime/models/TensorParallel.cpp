//===- TensorParallel.cpp - Megatron's tensor-parallel pieces -------------===//

#include "TensorParallel.h"

#include "Schedule.h"

#include <algorithm>
#include <limits>
#include <vector>

namespace plan::rt::tp {

at::Tensor localSlice(const at::Tensor &full, int64_t dim, int64_t chunks,
                      int64_t index, int64_t ranks) {
  const int64_t part = full.size(dim) / chunks;
  const int64_t slice = splitExtent(full.size(dim), chunks, ranks) / chunks;
  std::vector<int64_t> shape = full.sizes().vec();
  shape[dim] = slice;
  const int64_t begin = index * slice;
  const int64_t have = std::clamp<int64_t>(part - begin, 0, slice);
  std::vector<at::Tensor> pieces;
  for (int64_t c = 0; c < chunks; ++c) {
    at::Tensor piece = at::zeros(shape, full.options());
    if (have > 0)
      piece.narrow(dim, 0, have)
          .copy_(full.narrow(dim, c * part + begin, have));
    pieces.push_back(piece);
  }
  return at::cat(pieces, dim);
}

at::Tensor joinSlices(const std::vector<at::Tensor> &slices, int64_t dim,
                      int64_t chunks, int64_t extent) {
  const int64_t part = extent / chunks;
  const int64_t slice = slices.front().size(dim) / chunks;
  std::vector<at::Tensor> parts;
  for (int64_t c = 0; c < chunks; ++c) {
    std::vector<at::Tensor> pieces;
    for (const at::Tensor &s : slices)
      pieces.push_back(s.narrow(dim, c * slice, slice));
    parts.push_back(at::cat(pieces, dim).narrow(dim, 0, part));
  }
  return at::cat(parts, dim).contiguous();
}

at::Tensor vocabRows(const at::Tensor &tokens, const at::Tensor &weight,
                     int64_t start) {
  at::Tensor row = tokens - start;
  at::Tensor outside = (row < 0) | (row >= weight.size(0));
  return at::embedding(weight, row.masked_fill(outside, 0))
      .masked_fill(outside.unsqueeze(-1), 0);
}

/// The fp32 logits with their padding columns (at or past `vocab`) at
/// -inf, and how many columns are real.
static std::pair<at::Tensor, int64_t> realLogits(const at::Tensor &logits,
                                                 int64_t start, int64_t vocab) {
  at::Tensor l = logits.to(at::kFloat).contiguous();
  const int64_t local = l.size(1);
  const int64_t valid = std::clamp<int64_t>(vocab - start, 0, local);
  if (valid < local) {
    l = l.clone();
    l.narrow(1, valid, local - valid)
        .fill_(-std::numeric_limits<float>::infinity());
  }
  return {l, valid};
}

/// Which targets are in this rank's real columns, and their column there
/// (0 elsewhere).
static std::pair<at::Tensor, at::Tensor>
targetColumns(const at::Tensor &targets, int64_t start, int64_t valid) {
  at::Tensor column = targets - start;
  at::Tensor mine = (column >= 0) & (column < valid);
  return {mine, column.masked_fill(mine.logical_not(), 0)};
}

at::Tensor lossStatistics(const at::Tensor &logits, const at::Tensor &targets,
                          int64_t start, int64_t vocab) {
  auto [l, valid] = realLogits(logits, start, vocab);
  at::Tensor max = std::get<0>(l.max(1));
  // A slice of padding alone: no probability (exp of -inf - -inf is NaN).
  at::Tensor shift = max.masked_fill(max.isinf(), 0);
  // exp in place: one temporary of the logits' size, not two.
  at::Tensor sumExp = (l - shift.unsqueeze(1)).exp_().sum(1);
  auto [mine, index] = targetColumns(targets, start, valid);
  at::Tensor picked = l.gather(1, index.unsqueeze(1))
                          .squeeze(1)
                          .masked_fill(mine.logical_not(), 0);
  return at::stack({max, sumExp, picked});
}

/// What the loss's sum over the counted targets is divided by: `divisor`,
/// or where it is not positive their count.
static at::Tensor lossDenominator(const at::Tensor &counted, double divisor) {
  if (divisor > 0)
    return at::full({}, divisor, counted.options().dtype(at::kFloat));
  return counted.sum().to(at::kFloat);
}

VocabParallelLoss lossFromStatistics(const at::Tensor &stats,
                                     const at::Tensor &targets,
                                     int64_t ignoreIndex, double divisor) {
  at::Tensor max = stats.select(1, 0), sumExp = stats.select(1, 1);
  at::Tensor top = std::get<0>(max.max(0));
  // sum over ranks of sumExp_r exp(max_r - top): a rank of padding alone
  // (max -inf, sumExp 0) adds nothing.
  at::Tensor scaled = sumExp * (max - top.unsqueeze(0)).exp();
  scaled.masked_fill_(sumExp == 0, 0);
  at::Tensor logSumExp = top + scaled.sum(0).log();
  at::Tensor picked = stats.select(1, 2).sum(0);
  at::Tensor counted = targets != ignoreIndex;
  at::Tensor perToken =
      (logSumExp - picked).masked_fill(counted.logical_not(), 0);
  // As at::cross_entropy's mean: over the counted targets (NaN for none).
  return {perToken.sum() / lossDenominator(counted, divisor), logSumExp};
}

at::Tensor lossGradient(const at::Tensor &logits, const at::Tensor &targets,
                        const at::Tensor &logSumExp, int64_t start,
                        int64_t vocab, int64_t ignoreIndex, double scale,
                        double divisor) {
  auto [l, valid] = realLogits(logits, start, vocab);
  at::Tensor g = (l - logSumExp.unsqueeze(1)).exp_();
  auto [mine, index] = targetColumns(targets, start, valid);
  g.scatter_add_(1, index.unsqueeze(1), mine.to(at::kFloat).neg().unsqueeze(1));
  at::Tensor counted = targets != ignoreIndex;
  g.mul_(counted.to(at::kFloat).unsqueeze(1));
  g.mul_(scale / lossDenominator(counted, divisor));
  return g.to(logits.scalar_type());
}

} // namespace plan::rt::tp
