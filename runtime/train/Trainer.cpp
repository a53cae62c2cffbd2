//===- Trainer.cpp - The training loop of one rank ------------------------===//

#include "Trainer.h"

#include "SafeTensors.h"

#include <torch/csrc/distributed/c10d/Types.hpp>

#include <filesystem>

namespace plan::rt {

bool CheckpointPolicy::due(int64_t step, int64_t last, bool stopping) const {
  if (!enabled())
    return false;
  return stopping || step == last || (every > 0 && step % every == 0);
}

RunStart prepareRun(const Schedule &schedule, const TrainOptions &options) {
  RunStart start;
  start.lastStep = options.steps > 0 ? options.steps : schedule.train.steps;
  if (start.lastStep <= 0)
    throw TrainError("the schedule sets no train.steps; give the run's steps "
                     "(plan-run --steps K)");
  if (schedule.train.steps > 0 && start.lastStep > schedule.train.steps &&
      schedule.train.lrSchedule.kind != LRScheduleKind::Constant)
    start.warnings.push_back("running " + std::to_string(start.lastStep) +
                             " steps, but the " +
                             toString(schedule.train.lrSchedule.kind) +
                             " learning-rate schedule ends at train.steps = " +
                             std::to_string(schedule.train.steps) +
                             "; later steps keep its final rate");

  // Before any step: a directory that cannot be written fails the run now.
  if (options.checkpoints.enabled()) {
    try {
      makeCheckpointRoot(options.checkpoints.directory);
    } catch (const CheckpointError &e) {
      throw TrainError("cannot use the checkpoint directory " +
                       options.checkpoints.directory + ": " + e.what());
    }
  }
  if (!options.resume.empty()) {
    bool automatic = options.resume == "auto";
    const std::string &where =
        automatic ? options.checkpoints.directory : options.resume;
    if (automatic && where.empty())
      throw TrainError("--resume auto needs a checkpoint directory to look in "
                       "(--checkpoint-dir)");
    if (std::optional<std::string> directory = findCheckpoint(where)) {
      start.checkpoint.emplace(Checkpoint::open(*directory));
      start.checkpoint->checkCompatible(schedule);
    } else if (automatic) {
      start.notes.push_back("no checkpoint under " + where +
                            " yet; starting at step 1");
    } else {
      throw TrainError("--resume " + where +
                       ": no checkpoint there (neither a checkpoint.json nor "
                       "a complete step-NNNNNNNN directory)");
    }
  }

  // A resumed run continues the checkpoint's seed and data stream.
  start.seed =
      options.seed ? *options.seed : static_cast<uint64_t>(schedule.train.seed);
  start.data = options.data.value_or("synthetic");
  if (const std::optional<Checkpoint> &c = start.checkpoint) {
    const CheckpointInfo &info = c->info();
    if (options.seed && *options.seed != info.seed)
      start.warnings.push_back("--seed " + std::to_string(*options.seed) +
                               " differs from the checkpoint's seed " +
                               std::to_string(info.seed) +
                               ", which the resumed run keeps");
    start.seed = info.seed;
    if (!options.data)
      start.data = info.data;
    else if (*options.data != info.data)
      start.warnings.push_back(
          "--data " + *options.data + " differs from the checkpoint's " +
          info.data + "; reading it from the checkpoint's position (sequence " +
          std::to_string(info.sequencesConsumed) + ")");
    if (info.step >= start.lastStep) {
      start.complete = true;
      start.notes.push_back(c->directory() + " is at step " +
                            std::to_string(info.step) + "; the run's " +
                            std::to_string(start.lastStep) +
                            " steps are done already");
    }
  }
  return start;
}

Trainer::Trainer(const ValidSchedule &schedule, const TrainOptions &options,
                 RunStart start, Comm &comm, DeviceBackend &backend)
    : Trainer(schedule, options, std::move(start), comm, backend,
              Model::create(schedule, backend.device(),
                            comm.groupRank(GroupAxis::Tensor))) {}

Trainer::Trainer(const ValidSchedule &schedule, const TrainOptions &options,
                 RunStart start, Comm &comm, DeviceBackend &backend,
                 std::unique_ptr<Model> model)
    : schedule_(schedule), comm_(comm), backend_(backend),
      model_(std::move(model)), checkpoints_(options.checkpoints),
      afterShardWritten_(options.afterShardWritten) {
  executor_ = std::make_unique<Executor>(schedule_, *model_, comm_, backend_);
  this->start(std::move(start), options);
}

Trainer::~Trainer() = default;

void Trainer::start(RunStart start, const TrainOptions &options) {
  last_ = start.lastStep;
  seed_ = start.seed;
  dataSpec_ = start.data;
  executor_->setTotalSteps(last_);
  executor_->setMemoryTrace(options.memoryTrace);
  executor_->setPoison(options.poison);
  if (schedule_->model.lora)
    base_ = options.init.empty() ? std::string("seed")
                                 : std::filesystem::absolute(options.init)
                                       .lexically_normal()
                                       .string();
  if (start.checkpoint) {
    // A LoRA checkpoint holds what trains; the frozen base comes from where
    // the run took it, before the trained state is restored over it.
    const std::string &base = start.checkpoint->info().base;
    if (schedule_->model.lora) {
      if (base.empty())
        throw TrainError(start.checkpoint->directory() +
                         " holds no LoRA run (its checkpoint.json has no "
                         "base): resume it with the schedule it was saved "
                         "with");
      if (base == "seed") {
        executor_->initState(start.checkpoint->info().seed);
      } else {
        std::unique_ptr<TensorSource> source =
            openTensorSource(base, schedule_->model);
        executor_->loadState(*source, start.checkpoint->info().seed);
      }
      base_ = base;
    }
    start.checkpoint->restore(schedule_, *executor_, comm_);
    resumedAfter_ = start.checkpoint->info().step;
  } else if (!options.init.empty()) {
    std::unique_ptr<TensorSource> source =
        openTensorSource(options.init, schedule_->model);
    newTaskHead_ = model_->newTaskHeadParameters(*source);
    executor_->loadState(*source, seed_);
  } else {
    executor_->initState(seed_);
  }
  data_ = DataSource::open(dataSpec_, schedule_->model.vocab, seed_,
                           Objective::of(schedule_->model));
  if (start.checkpoint)
    data_->setPosition(resumedAfter_,
                       start.checkpoint->info().sequencesConsumed);
  next_ = resumedAfter_ + 1;
}

StepResult Trainer::step() {
  if (finished())
    throw TrainError("the run is finished: it has no step " +
                     std::to_string(next_));
  // Each data-parallel rank (replicate x shard) reads its own slice of the
  // global batch; the ranks of a tensor group read the same one.
  const Schedule &s = schedule_;
  std::vector<MicroBatch> batches =
      data_->batches(next_, s.microBatches, comm_.groupRank(GroupAxis::World),
                     comm_.groupSize(GroupAxis::World), s.train.microBatch,
                     s.train.seqLen, backend_.device());
  StepResult result = executor_->runStep(next_, batches);
  ++next_;
  return result;
}

Trainer::AfterStep Trainer::afterStep(int localStop) {
  AfterStep after;
  if (!checkpoints_.enabled())
    return after;
  after.stop = localStop;
  if (comm_.world() > 1) {
    std::vector<at::Tensor> value{
        at::full({1}, static_cast<int64_t>(localStop), at::kLong)};
    c10d::AllreduceOptions options;
    options.reduceOp = c10d::ReduceOp::MAX;
    try {
      comm_.everyone().allreduce(value, options)->wait();
    } catch (const std::exception &e) {
      std::string what = e.what();
      throw TrainError("the stop-signal all_reduce failed: " +
                       what.substr(0, what.find('\n')));
    }
    after.stop = static_cast<int>(value[0].item<int64_t>());
  }
  int64_t step = next_ - 1;
  if (checkpoints_.due(step, last_, after.stop != 0))
    after.saved = save();
  if (after.stop != 0)
    stopped_ = true;
  return after;
}

SaveResult Trainer::save() {
  int64_t step = next_ - 1;
  const Schedule &s = schedule_;
  CheckpointInfo info;
  info.step = step;
  info.seed = seed_;
  info.data = dataSpec_;
  info.base = base_;
  info.globalBatch =
      s.microBatches * comm_.groupSize(GroupAxis::World) * s.train.microBatch;
  info.sequencesConsumed = data_->sequencesConsumed(step, info.globalBatch);
  SaveOptions options;
  options.keep = checkpoints_.keep;
  if (afterShardWritten_)
    options.afterShardWritten = [&](const std::string &tmpPath) {
      afterShardWritten_(step, tmpPath);
    };
  return saveCheckpoint(checkpoints_.directory, info, s, *executor_, comm_,
                        options);
}

} // namespace plan::rt
