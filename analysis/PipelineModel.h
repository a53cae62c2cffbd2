//===- PipelineModel.h - Stages and bubble of a pipeline --------*- C++ -*-===//
//
// What pipeline parallelism costs and how it divides the model, shared by
// the checker (its bubble warning), plan-assign-stages (the balanced
// partition) and the report (the bubble in the step time): one definition
// of each, no passes in it.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_ANALYSIS_PIPELINEMODEL_H
#define PLAN_ANALYSIS_PIPELINEMODEL_H

#include "dialects/plan/PlanEnums.h"

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <vector>

namespace plan {

/// The fraction of a step a pipeline stage is idle in its warm-up and
/// cool-down: (p - 1) / (m + p - 1) for GPipe and 1F1B with `stages` p and
/// `microBatches` m, and that divided by `virtualStages` for interleaved
/// 1F1B (Narayanan et al. 2021). 0 for one stage.
double pipelineBubbleFraction(PipelineSchedule schedule, int64_t stages,
                              int64_t microBatches, int64_t virtualStages);

/// Divides units, in model order, into `chunks` contiguous chunks so that
/// the largest chunk's `cost` is as small as it can be, every chunk holding
/// at least one unit with `isBlock` set (a transformer block). Returns each
/// unit's chunk, or an empty vector when there are fewer blocks than
/// chunks. Units before the first block join chunk 0 and units after the
/// last block the last chunk, so the embedding stays on the first stage and
/// the head on the last.
std::vector<int64_t> balanceStages(llvm::ArrayRef<double> cost,
                                   llvm::ArrayRef<bool> isBlock,
                                   int64_t chunks);

/// The same division with `blocksPerChunk[c]` blocks in chunk c (the
/// plan's `stages`); empty when they do not add up to the blocks.
std::vector<int64_t> stagesOfBlocks(llvm::ArrayRef<bool> isBlock,
                                    llvm::ArrayRef<int64_t> blocksPerChunk);

/// One forward or backward of a model chunk for one micro-batch: what a
/// pipeline rank does between its sends and receives.
struct PipelineTask {
  int64_t chunk = 0; // the model chunk (plan.unit `stage`), not the rank
  int64_t microBatch = 0;
  bool backward = false;
};

/// The order in which pipeline rank `rank` of `stages` runs its chunks'
/// forwards and backwards for `microBatches` micro-batches: GPipe (every
/// forward, then every backward), 1F1B (PipeDream-Flush: `stages - rank -
/// 1` warm-up forwards, then one forward and one backward alternately, then
/// the remaining backwards) or interleaved 1F1B with `virtualStages`
/// chunks per rank (chunks rank, rank + stages, ...; Megatron-LM's order,
/// micro-batches in rounds of `stages`, which must divide them). Every
/// chunk's forward of a micro-batch comes before its backward.
std::vector<PipelineTask> pipelineTasks(PipelineSchedule schedule,
                                        int64_t stages, int64_t virtualStages,
                                        int64_t microBatches, int64_t rank);

} // namespace plan

#endif // PLAN_ANALYSIS_PIPELINEMODEL_H
