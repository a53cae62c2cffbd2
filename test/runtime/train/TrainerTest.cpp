//===- TrainerTest.cpp - The training loop without plan-run ---------------===//
//
// One rank (a mesh of one needs no process group) training the toy model on
// synthetic tokens: where a run starts, its steps, the checkpoint cadence,
// a stop, and resuming, all through the library a C++ program embeds.
//
//===----------------------------------------------------------------------===//

#include "Trainer.h"

#include "Files.h"
#include "TestSupport.h"
#include "ToyModel.h"
#include "ToySchedules.h"

#include <gtest/gtest.h>

#include <cstdlib>

using namespace plan::rt;
using namespace plan::rt::test;

namespace {

/// The toy schedule, fed by synthetic sequences of kWidth tokens.
ValidSchedule toySchedule(int64_t steps = 0) {
  ToyTrainSchedule toy(/*microBatches=*/2, /*gradClip=*/0);
  toy.b.s.model.vocab = 16;
  toy.b.s.train.seqLen = kWidth;
  toy.b.s.train.steps = steps;
  return toy.b.valid();
}

class TempDir {
public:
  TempDir() {
    char name[] = "/tmp/plan-trainer-test-XXXXXX";
    if (!::mkdtemp(name))
      throw std::runtime_error("mkdtemp failed");
    path_ = name;
  }
  ~TempDir() { support::removeTree(path_); }
  const std::string &path() const { return path_; }

private:
  std::string path_;
};

struct ToyRun {
  MeshPositionComm comm{0, 1, 1};
  std::unique_ptr<DeviceBackend> backend = DeviceBackend::createCpu();
  std::unique_ptr<Trainer> trainer;

  ToyRun(const ValidSchedule &schedule, const TrainOptions &options) {
    trainer = std::make_unique<Trainer>(
        schedule, options, prepareRun(schedule, options), comm, *backend,
        std::make_unique<ToyModel>(2));
  }
  /// The losses of the steps up to the run's end (or its stop).
  std::vector<double> losses(int stopAfter = 0) {
    std::vector<double> out;
    while (!trainer->finished()) {
      out.push_back(trainer->step().loss);
      trainer->afterStep(stopAfter && trainer->nextStep() > stopAfter ? 15 : 0);
    }
    return out;
  }
};

TEST(CheckpointPolicy, SavesEveryNStepsAtTheEndAndOnAStop) {
  CheckpointPolicy none;
  EXPECT_FALSE(none.due(10, 10, true));
  CheckpointPolicy atEnd{"ckpt", 0, 0};
  EXPECT_FALSE(atEnd.due(3, 10, false));
  EXPECT_TRUE(atEnd.due(10, 10, false));
  EXPECT_TRUE(atEnd.due(3, 10, true));
  CheckpointPolicy every{"ckpt", 4, 2};
  EXPECT_TRUE(every.due(4, 10, false));
  EXPECT_TRUE(every.due(8, 10, false));
  EXPECT_FALSE(every.due(9, 10, false));
  EXPECT_TRUE(every.due(10, 10, false));
}

TEST(PrepareRun, NeedsAStepCount) {
  ValidSchedule schedule = toySchedule(/*steps=*/0);
  EXPECT_THROW(prepareRun(schedule, TrainOptions{}), TrainError);
  TrainOptions options;
  options.steps = 3;
  RunStart start = prepareRun(schedule, options);
  EXPECT_EQ(start.lastStep, 3);
  EXPECT_EQ(start.data, "synthetic");
  EXPECT_FALSE(start.checkpoint);
  EXPECT_TRUE(start.warnings.empty());
  EXPECT_EQ(prepareRun(toySchedule(5), TrainOptions{}).lastStep, 5);
}

TEST(PrepareRun, WarnsWhenTheRunOutlastsItsLearningRateSchedule) {
  ToyTrainSchedule toy(2, 0);
  toy.b.s.train.steps = 4;
  toy.b.s.train.lrSchedule.kind = LRScheduleKind::Cosine;
  ValidSchedule schedule = toy.b.valid();
  TrainOptions options;
  options.steps = 6;
  RunStart start = prepareRun(schedule, options);
  ASSERT_EQ(start.warnings.size(), 1u);
  EXPECT_EQ(start.warnings[0],
            "running 6 steps, but the cosine learning-rate schedule ends at "
            "train.steps = 4; later steps keep its final rate");
}

TEST(PrepareRun, ResumeFindsACheckpointOrSaysWhyNot) {
  TempDir dir;
  ValidSchedule schedule = toySchedule(4);
  TrainOptions options;
  options.checkpoints.directory = dir.path() + "/ckpt";
  options.resume = "auto";
  RunStart fresh = prepareRun(schedule, options);
  EXPECT_FALSE(fresh.checkpoint);
  ASSERT_EQ(fresh.notes.size(), 1u);
  EXPECT_EQ(fresh.notes[0], "no checkpoint under " + dir.path() +
                                "/ckpt yet; starting at step 1");
  EXPECT_TRUE(support::isDirectory(dir.path() + "/ckpt"));

  TrainOptions missing;
  missing.resume = dir.path() + "/nothing";
  try {
    prepareRun(schedule, missing);
    FAIL() << "expected an error";
  } catch (const TrainError &e) {
    EXPECT_EQ(std::string(e.what()),
              "--resume " + dir.path() +
                  "/nothing: no checkpoint there (neither a checkpoint.json "
                  "nor a complete step-NNNNNNNN directory)");
  }
}

// The trainer's steps are the executor's on the data's batches, in order,
// bitwise.
TEST(Trainer, RunsTheStepsOfTheScheduleOnItsData) {
  ValidSchedule schedule = toySchedule(3);
  ToyRun run(schedule, TrainOptions{});
  EXPECT_EQ(run.trainer->nextStep(), 1);
  EXPECT_EQ(run.trainer->lastStep(), 3);
  std::vector<double> losses = run.losses();
  EXPECT_TRUE(run.trainer->finished());
  EXPECT_THROW(run.trainer->step(), TrainError);

  ToyModel model(2);
  MeshPositionComm comm(0, 1, 1);
  auto backend = DeviceBackend::createCpu();
  Executor executor(schedule, model, comm, *backend);
  executor.setTotalSteps(3);
  executor.initState(static_cast<uint64_t>(schedule->train.seed));
  auto data = DataSource::open("synthetic", 16, schedule->train.seed);
  ASSERT_EQ(losses.size(), 3u);
  for (int64_t step = 1; step <= 3; ++step) {
    auto batches = data->batches(step, 2, 0, 1, 1, kWidth, at::kCPU);
    EXPECT_EQ(executor.runStep(step, batches).loss, losses[step - 1])
        << "step " << step;
  }
}

// Checkpoints every two steps and at the end; a run resumed from the one
// after step 2 continues bitwise as the uninterrupted run.
TEST(Trainer, ResumedRunContinuesBitwise) {
  TempDir dir;
  ValidSchedule schedule = toySchedule(5);
  TrainOptions saving;
  saving.checkpoints = CheckpointPolicy{dir.path(), 2, 0};
  ToyRun first(schedule, saving);
  std::vector<double> uninterrupted = first.losses();
  ASSERT_EQ(uninterrupted.size(), 5u);
  for (const char *step : {"step-00000002", "step-00000004", "step-00000005"})
    EXPECT_TRUE(
        support::isRegularFile(dir.path() + "/" + step + "/checkpoint.json"))
        << step;

  TrainOptions resuming;
  resuming.resume = dir.path() + "/step-00000002";
  ToyRun second(schedule, resuming);
  EXPECT_EQ(second.trainer->resumedAfter(), 2);
  EXPECT_EQ(second.trainer->nextStep(), 3);
  std::vector<double> resumed = second.losses();
  ASSERT_EQ(resumed.size(), 3u);
  for (size_t i = 0; i < resumed.size(); ++i)
    EXPECT_EQ(resumed[i], uninterrupted[i + 2]) << "step " << i + 3;

  // From the last checkpoint there is nothing left to run.
  TrainOptions done;
  done.resume = dir.path();
  RunStart start = prepareRun(schedule, done);
  EXPECT_TRUE(start.complete);
  EXPECT_EQ(start.checkpoint->info().step, 5);
}

// A stop agreed after a step saves a checkpoint and ends the run; without
// checkpoints there is nothing to agree on.
TEST(Trainer, AStopSavesAndEndsTheRun) {
  TempDir dir;
  ValidSchedule schedule = toySchedule(6);
  TrainOptions options;
  options.checkpoints = CheckpointPolicy{dir.path(), 0, 0};
  ToyRun run(schedule, options);
  EXPECT_EQ(run.losses(/*stopAfter=*/2).size(), 2u);
  EXPECT_TRUE(run.trainer->finished());
  EXPECT_TRUE(
      support::isRegularFile(dir.path() + "/step-00000002/checkpoint.json"));
  EXPECT_EQ(support::listDirectory(dir.path()).size(), 1u);

  ToyRun unsaved(schedule, TrainOptions{});
  unsaved.trainer->step();
  Trainer::AfterStep after = unsaved.trainer->afterStep(15);
  EXPECT_EQ(after.stop, 0);
  EXPECT_FALSE(after.saved);
  EXPECT_FALSE(unsaved.trainer->finished());
}

} // namespace
