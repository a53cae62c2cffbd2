//===- Trainer.h - The training loop of one rank ----------------*- C++ -*-===//
//
// Everything a run does between connecting its ranks and finishing: where
// it starts (a fresh initialisation, HF weights, or a checkpoint to resume),
// which data each step reads, the steps themselves, and when to save a
// checkpoint. plan-run is one user (it adds the launch, signals, progress
// and exit codes); a C++ program that embeds the runtime is another
// (examples/runtime/train_embedded.cpp).
//
//   RunStart start = prepareRun(schedule, options);   // before connecting
//   ... connect the ranks: a Comm ...
//   Trainer trainer(schedule, options, std::move(start), comm, backend);
//   while (!trainer.finished()) {
//     rt::StepResult result = trainer.step();
//     trainer.afterStep(stopSignal);                   // checkpoint cadence
//   }
//
// The collectives a trainer makes besides the schedule's are the ones its
// parts make: the executor's metrics all-reduce, the checkpoint's save, and
// afterStep's agreement on stopping (when checkpointing).
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_RUNTIME_TRAIN_TRAINER_H
#define PLAN_RUNTIME_TRAIN_TRAINER_H

#include "Checkpoint.h"
#include "Comm.h"
#include "Data.h"
#include "DeviceBackend.h"
#include "Executor.h"
#include "Model.h"
#include "Schedule.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace plan::rt {

/// One line, for the user: a run that cannot start or go on as asked.
class TrainError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// When a run saves checkpoints (docs/launching.md, "Checkpoints").
struct CheckpointPolicy {
  std::string directory; // "": no checkpoints
  int64_t every = 0;     // also after every `every`-th step; 0: never else
  int keep = 0;          // the newest kept under `directory`; 0: all

  bool enabled() const { return !directory.empty(); }
  /// Whether to save after `step` of a run whose last step is `last`:
  /// every `every` steps, after the last step, and when the ranks agreed to
  /// stop.
  bool due(int64_t step, int64_t last, bool stopping) const;
};

struct TrainOptions {
  int64_t steps = 0;               // the run's last step; 0: train.steps
  std::optional<uint64_t> seed;    // default: train.seed (or the checkpoint's)
  std::optional<std::string> data; // "synthetic" or a token file; default:
                                   // "synthetic" (or the checkpoint's)
  std::string init; // HF directory or .safetensors; "": from the seed
  CheckpointPolicy checkpoints;
  std::string resume;       // a checkpoint, a root, or "auto"; "": none
  bool memoryTrace = false; // StepResult::opMemory for every op
  bool poison = false;      // Executor::setPoison
  /// Called on every rank with the temporary path of its shard file once
  /// written, before it is renamed (plan-run's fault injection).
  std::function<void(int64_t step, const std::string &tmpPath)>
      afterShardWritten;
};

/// Where a run starts, decided before its ranks connect: every rank reads
/// the same checkpoint.json, so a checkpoint that cannot be used fails
/// every rank at once.
struct RunStart {
  std::optional<Checkpoint> checkpoint; // the one --resume found
  int64_t lastStep = 0;                 // the run's last step
  uint64_t seed = 0;
  std::string data;
  /// Nothing to run: the checkpoint is at or past the last step.
  bool complete = false;
  /// What the run does otherwise than asked, for one rank to print:
  /// a --seed or --data the checkpoint overrides, steps past the end of
  /// the learning-rate schedule.
  std::vector<std::string> warnings;
  /// "no checkpoint under DIR yet; starting at step 1" and the like.
  std::vector<std::string> notes;
};

/// Throws TrainError: no steps (neither `options.steps` nor train.steps),
/// --resume naming nothing, a checkpoint of another model.
RunStart prepareRun(const Schedule &schedule, const TrainOptions &options);

class Trainer {
public:
  /// Creates the model (Model::create) and the executor, then fills the
  /// training state: from `start`'s checkpoint (resharding it to this
  /// mesh), else from `options.init`, else from the seed; opens the data at
  /// the step after. `comm` and `backend` must outlive it.
  Trainer(const ValidSchedule &schedule, const TrainOptions &options,
          RunStart start, Comm &comm, DeviceBackend &backend);
  /// The same with a model of the caller's (tests, a custom model).
  Trainer(const ValidSchedule &schedule, const TrainOptions &options,
          RunStart start, Comm &comm, DeviceBackend &backend,
          std::unique_ptr<Model> model);
  ~Trainer();
  Trainer(const Trainer &) = delete;
  Trainer &operator=(const Trainer &) = delete;

  /// The step step() runs next (1-based), and the run's last.
  int64_t nextStep() const { return next_; }
  int64_t lastStep() const { return last_; }
  /// The step the run resumed after (0 for a fresh run).
  int64_t resumedAfter() const { return resumedAfter_; }
  /// With `init`: the parameters of a new task head the weights lacked,
  /// initialised from the seed instead (Model::newTaskHeadParameters).
  const std::vector<std::string> &newTaskHead() const { return newTaskHead_; }
  /// Whether the run stopped early (afterStep saw an agreed stop), or ran
  /// its last step.
  bool finished() const { return stopped_ || next_ > last_; }

  /// Runs step nextStep() with this rank's slice of its global batch.
  StepResult step();

  struct AfterStep {
    /// The stop signal the ranks agreed on (0: none; the largest any rank
    /// gave). Only exchanged when checkpointing: without checkpoints a
    /// signal ends a rank at once and there is nothing to agree on.
    int stop = 0;
    std::optional<SaveResult> saved;
  };
  /// After a step: agrees on `localStop` (this rank's stop signal, 0: none)
  /// and saves a checkpoint when the policy says so; after an agreed stop
  /// the run is finished.
  AfterStep afterStep(int localStop = 0);

  /// Saves a checkpoint of the state after the last step run.
  SaveResult save();

  Executor &executor() { return *executor_; }
  const Schedule &schedule() const { return schedule_.get(); }

private:
  void start(RunStart start, const TrainOptions &options);

  ValidSchedule schedule_;
  Comm &comm_;
  DeviceBackend &backend_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<DataSource> data_;
  CheckpointPolicy checkpoints_;
  std::function<void(int64_t, const std::string &)> afterShardWritten_;
  uint64_t seed_ = 0;
  std::vector<std::string> newTaskHead_;
  std::string dataSpec_;
  std::string base_; // a LoRA run's frozen base: CheckpointInfo::base
  int64_t next_ = 1, last_ = 0, resumedAfter_ = 0;
  bool stopped_ = false;
};

} // namespace plan::rt

#endif // PLAN_RUNTIME_TRAIN_TRAINER_H
