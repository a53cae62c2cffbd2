//===- Executor.h - Runs a schedule, one training step at a time -*- C++
//-*-===//
//
// Executes the schedule's ops in order on one rank: buffers are views into
// one arena per memory space (sized by the memory plan), collectives go to
// Comm, compute to Model, the optimizer runs on the flat shards, and the
// device backend places memory and orders streams. It makes no strategy
// decision of its own: everything it does is an op of the schedule, which
// validateSchedule has checked (it takes a ValidSchedule and checks nothing
// again).
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_RUNTIME_CORE_EXECUTOR_H
#define PLAN_RUNTIME_CORE_EXECUTOR_H

#include "Comm.h"
#include "DeviceBackend.h"
#include "Model.h"
#include "Schedule.h"

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <vector>

namespace plan::rt {

class TensorSource;

/// A schedule the executor cannot run, or an op that failed (a collective
/// that timed out, a model error): one line naming the op and its plan line.
class ExecutionError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// Memory around one op of a step run with a memory trace
/// (Executor::setMemoryTrace): bytes allocated by the backend's allocator,
/// the one peakBytes measures (cpu: the process's CPU tensors; cuda: the
/// CUDA caching allocator's allocated bytes, the device arena included).
struct OpMemory {
  int64_t op = 0;         // index into Schedule::ops
  int64_t liveBefore = 0; // allocated when the op started
  int64_t peak = 0;       // the most allocated while it ran
  int64_t liveAfter = 0;  // allocated when it returned
  // Wall time of the op on the rank's thread, from its start to its return:
  // on the cpu backend the op's run (an asynchronous collective's issue
  // only; its wait holds the time); on cuda its launch, unless it waits.
  double seconds = 0;
};

struct StepResult {
  int64_t step = 0; // 1-based optimizer step
  double loss = 0;  // mean cross-entropy over the global batch
  double lr = 0;    // learning rate this step used
  // Global L2 norm of the gradients (before clipping); none when the
  // schedule computes no norm (no grad_clip): not a made-up 0.
  std::optional<double> gradNorm;
  bool skipped = false; // fp16 step skipped for non-finite gradients
  double lossScale = 1; // the loss scale this step's backward used (1 if none)
  int64_t tokens = 0;   // tokens in the global batch
  // Measured peak memory of this rank during the step, bytes: on the cuda
  // backend the CUDA caching allocator's peak allocated bytes (the device
  // arena included) plus the host and pinned-host arenas; on the cpu backend
  // the peak bytes of all CPU tensors of the process (HostMemory.h), the
  // arenas included.
  int64_t peakBytes = 0;
  int64_t plannedBytes = 0; // the schedule's arenas (all spaces) + workspace
  // Bytes autograd saved outside the planned saves buffers this step
  // (Model::takeUnplannedSaveBytes); 0 when the activation model holds.
  int64_t unplannedSaveBytes = 0;
  // Every op of the step, in order, when the memory trace is on.
  std::vector<OpMemory> opMemory;
};

/// The training state that lives outside the buffers: what a checkpoint
/// saves besides the persistent buffers (runtime/checkpoint).
struct ExecutorCounters {
  int64_t optimizerSteps = 0; // non-skipped steps taken: AdamW's t
  /// The persistent loss-scale buffer's value; nullopt when the schedule has
  /// no loss scale.
  std::optional<double> lossScale;
  int64_t growthTracker = 0; // dynamic loss scale: clean steps in a row
};

class Executor {
public:
  /// Allocates the arenas. Keeps a copy of `schedule`; `model`, `comm` and
  /// `backend` must outlive it. Throws ExecutionError when `comm`'s world is
  /// not the schedule's.
  Executor(const ValidSchedule &schedule, Model &model, Comm &comm,
           DeviceBackend &backend);
  ~Executor();
  Executor(const Executor &) = delete;
  Executor &operator=(const Executor &) = delete;

  /// The run's number of optimizer steps, which the learning-rate schedule
  /// decays over when the schedule's train.steps is 0 (ignored otherwise).
  void setTotalSteps(int64_t steps);

  /// Records the allocator's bytes around every op of each step
  /// (StepResult::opMemory). peakBytes is then the largest of the ops'
  /// peaks (the allocator's peak restarts at each op).
  void setMemoryTrace(bool on);

  /// Fills every transient buffer with all-ones bytes (NaN in every
  /// floating type) when it is allocated and when it is freed, so that a
  /// read the schedule does not name (of a buffer before it is written or
  /// after it is freed) shows in the losses or the gradient norm instead of
  /// reading whatever the arena held. A check of schedules; it costs a
  /// fill per alloc and free.
  void setPoison(bool on);

  /// Fills every persistent state buffer (params, master weights) from the
  /// model's deterministic initialisation, or from `source` (--init), each
  /// rank keeping only its slice; zeroes gradients and optimizer state.
  /// (`seed`: for a new task head's parameters, Model::loadUnit.)
  void initState(uint64_t seed);
  void loadState(const TensorSource &source, uint64_t seed);
  /// Zeroes every persistent buffer but a LoRA run's frozen base, sets the
  /// loss scale to its initial value and the counters to a fresh run's: the
  /// state a checkpoint restore then fills.
  void clearState();

  /// The counters after the last step; setCounters restores them (and writes
  /// the loss-scale buffer). Throws ExecutionError when the groups' step
  /// counts differ (they never do: every group steps, or none) or a loss
  /// scale is given to a schedule without one.
  ExecutorCounters counters() const;
  void setCounters(const ExecutorCounters &counters);

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
