//===- Executor.h - Runs a schedule, one training step at a time -*- C++ -*-===//
//
// Executes the schedule's ops in order on one rank: buffers are views into
// one arena per memory space (sized by the memory plan), collectives go to
// Comm, compute to Model, the optimizer runs on the flat shards. It makes no
// strategy decision of its own: everything it does is an op of the schedule.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_RUNTIME_CORE_EXECUTOR_H
#define PLAN_RUNTIME_CORE_EXECUTOR_H

#include "Comm.h"
#include "Model.h"
#include "Schedule.h"

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace plan::rt {

class TensorSource;

struct StepResult {
  int64_t step = 0;     // 1-based optimizer step
  double loss = 0;      // mean cross-entropy over the global batch
  double lr = 0;        // learning rate this step used
  double gradNorm = 0;  // global L2 norm of the gradients (before clipping), 0 if the
                        // schedule computes none
  bool skipped = false; // fp16 step skipped for non-finite gradients
  double lossScale = 1;
  int64_t tokens = 0;   // tokens in the global batch
  int64_t peakBytes = 0; // arena bytes (all spaces) + allocator peak, this rank
};

class Executor {
public:
  Executor(const Schedule &schedule, Model &model, Comm &comm,
           at::Device device);
  ~Executor();

  /// Fills every persistent state buffer (params, master weights) from the
  /// model's deterministic initialisation, or from `source` (--init), each
  /// rank keeping only its slice; zeroes gradients and optimizer state.
  void initState(uint64_t seed);
  void loadState(const TensorSource &source);

  /// Runs the program once with this rank's micro-batches (size =
  /// schedule.microBatches); `step` is 1-based.
  StepResult runStep(int64_t step, const std::vector<MicroBatch> &batches);

  /// The arena of one memory space (for tests and checkpoints).
  at::Tensor arena(Space space) const;
  /// A buffer of the schedule as a typed tensor view (valid while allocated).
  at::Tensor buffer(int64_t id) const;

private:
  struct Impl;
  Impl *impl_;
};

} // namespace plan::rt

#endif // PLAN_RUNTIME_CORE_EXECUTOR_H
