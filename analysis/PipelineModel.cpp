//===- PipelineModel.cpp - Stages and bubble of a pipeline ----------------===//

#include "analysis/PipelineModel.h"

#include <algorithm>
#include <limits>

namespace plan {

double pipelineBubbleFraction(PipelineSchedule schedule, int64_t stages,
                              int64_t microBatches, int64_t virtualStages) {
  if (stages <= 1 || microBatches < 1)
    return 0.0;
  double bubble = double(stages - 1) / double(microBatches + stages - 1);
  if (schedule == PipelineSchedule::Interleaved && virtualStages > 1)
    bubble /= double(virtualStages);
  return bubble;
}

std::vector<int64_t> stagesOfBlocks(llvm::ArrayRef<bool> isBlock,
                                    llvm::ArrayRef<int64_t> blocksPerChunk) {
  int64_t blocks = std::count(isBlock.begin(), isBlock.end(), true);
  int64_t total = 0;
  for (int64_t n : blocksPerChunk) {
    if (n < 1)
      return {};
    total += n;
  }
  if (blocksPerChunk.empty() || total != blocks)
    return {};
  std::vector<int64_t> chunkOf(isBlock.size());
  int64_t chunk = 0, inChunk = 0;
  for (size_t i = 0; i < isBlock.size(); ++i) {
    if (isBlock[i] && inChunk == blocksPerChunk[chunk]) {
      ++chunk;
      inChunk = 0;
    }
    chunkOf[i] = chunk;
    inChunk += isBlock[i];
  }
  return chunkOf;
}

std::vector<int64_t> balanceStages(llvm::ArrayRef<double> cost,
                                   llvm::ArrayRef<bool> isBlock,
                                   int64_t chunks) {
  // Cut only between blocks: the units before the first block go with it,
  // those after a block with it, so a cut k picks the block a chunk starts
  // at and the chunks are sums over runs of "block + what follows it".
  std::vector<double> runCost;
  double leading = 0;
  for (size_t i = 0; i < cost.size(); ++i) {
    if (isBlock[i])
      runCost.push_back(cost[i] + (runCost.empty() ? leading : 0.0));
    else if (runCost.empty())
      leading += cost[i];
    else
      runCost.back() += cost[i];
  }
  int64_t n = runCost.size();
  if (chunks < 1 || n < chunks)
    return {};
  std::vector<double> prefix(n + 1, 0.0);
  for (int64_t i = 0; i < n; ++i)
    prefix[i + 1] = prefix[i] + runCost[i];
  // best[c][i]: the smallest largest chunk of runs [0, i) in c chunks;
  // O(chunks x runs^2), a few million steps for the largest models.
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(chunks + 1,
                                        std::vector<double>(n + 1, kInf));
  std::vector<std::vector<int64_t>> cut(chunks + 1,
                                        std::vector<int64_t>(n + 1, 0));
  best[0][0] = 0;
  for (int64_t c = 1; c <= chunks; ++c)
    for (int64_t i = c; i <= n - (chunks - c); ++i)
      for (int64_t j = c - 1; j < i; ++j) {
        double worst = std::max(best[c - 1][j], prefix[i] - prefix[j]);
        // Ties go to the later cut, so that earlier stages, which hold more
        // micro-batches' activations under 1F1B, get fewer blocks.
        if (worst <= best[c][i]) {
          best[c][i] = worst;
          cut[c][i] = j;
        }
      }
  std::vector<int64_t> blocksPerChunk(chunks);
  for (int64_t c = chunks, i = n; c > 0; --c) {
    blocksPerChunk[c - 1] = i - cut[c][i];
    i = cut[c][i];
  }
  return stagesOfBlocks(isBlock, blocksPerChunk);
}

std::vector<PipelineTask> pipelineTasks(PipelineSchedule schedule,
                                        int64_t stages, int64_t virtualStages,
                                        int64_t microBatches, int64_t rank) {
  std::vector<PipelineTask> tasks;
  int64_t p = stages, m = microBatches;
  if (schedule == PipelineSchedule::GPipe) {
    for (int64_t mb = 0; mb < m; ++mb)
      tasks.push_back({rank, mb, false});
    for (int64_t mb = 0; mb < m; ++mb)
      tasks.push_back({rank, mb, true});
    return tasks;
  }
  // 1F1B is interleaved 1F1B with one chunk per rank. The k-th forward of
  // the rank runs chunk rank + p x ((k / p) mod v) on micro-batch
  // (k / (p v)) x p + k mod p; the k-th backward the chunks in reverse.
  int64_t v = schedule == PipelineSchedule::Interleaved ? virtualStages : 1;
  int64_t total = m * v;
  auto task = [&](int64_t k, bool backward) {
    int64_t local = (k / p) % v;
    if (backward)
      local = v - 1 - local;
    int64_t mb = v == 1 ? k : (k / (p * v)) * p + k % p;
    return PipelineTask{rank + p * local, mb, backward};
  };
  int64_t warmup;
  if (v == 1)
    warmup = std::min(p - rank - 1, m);
  else if (m == p)
    warmup = total; // Megatron-LM: every forward before the backwards
  else
    warmup = std::min((p - rank - 1) * 2 + (v - 1) * p, total);
  for (int64_t k = 0; k < warmup; ++k)
    tasks.push_back(task(k, false));
  for (int64_t k = 0; k < total - warmup; ++k) {
    tasks.push_back(task(warmup + k, false));
    tasks.push_back(task(k, true));
  }
  for (int64_t k = total - warmup; k < total; ++k)
    tasks.push_back(task(k, true));
  return tasks;
}

} // namespace plan
