//===- OutputTest.cpp - Metrics JSONL and progress lines ------------------===//

#include "Format.h"
#include "Metrics.h"
#include "Progress.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

using namespace plan::run;

namespace {

StepMetrics sample() {
  StepMetrics m;
  m.step = 3;
  m.loss = 5.25;
  m.lr = 1e-3;
  m.gradNorm = 0.5;
  m.tokens = 1024;
  m.stepTimeS = 0.5;
  m.peakBytes = 3 * 1024 * 1024;
  return m;
}

TEST(Metrics, FieldsInDocumentedOrder) {
  EXPECT_EQ(metricsJson(sample()),
            "{\"step\":3,\"loss\":5.25,\"lr\":0.001,\"grad_norm\":0.5,"
            "\"tokens\":1024,\"step_time_s\":0.5,\"tokens_per_s\":2048.0,"
            "\"peak_bytes\":3145728}");
}

TEST(Metrics, NoNormNoGradNorm) {
  StepMetrics m = sample();
  m.gradNorm.reset(); // the schedule computes none (no grad_clip)
  EXPECT_FALSE(nlohmann::json::parse(metricsJson(m)).contains("grad_norm"));
}

TEST(Metrics, Fp16AddsLossScaleAndSkipped) {
  StepMetrics m = sample();
  m.lossScale = 32768;
  m.skipped = true;
  nlohmann::json json = nlohmann::json::parse(metricsJson(m));
  EXPECT_EQ(json["loss_scale"], 32768.0);
  EXPECT_EQ(json["skipped"], true);
  EXPECT_FALSE(
      nlohmann::json::parse(metricsJson(sample())).contains("loss_scale"));
}

TEST(Metrics, NonFiniteLossIsNull) {
  StepMetrics m = sample();
  m.loss = NAN;
  nlohmann::json json = nlohmann::json::parse(metricsJson(m));
  EXPECT_TRUE(json["loss"].is_null());
}

TEST(Metrics, FileHoldsThisRunsStepsAsSoonAsTheyAreWritten) {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() /
      ("plan-run-metrics-" + std::to_string(::getpid()) + ".jsonl");
  std::ofstream(path) << "{\"step\":99}\n"; // an earlier run's
  {
    MetricsFile file(path.string());
    StepMetrics m = sample();
    for (int64_t step = 1; step <= 2; ++step) {
      m.step = step;
      file.append(m);
      // Flushed: readable while the run goes on.
      std::ifstream in(path);
      int lines = 0;
      for (std::string line; std::getline(in, line); ++lines)
        EXPECT_EQ(nlohmann::json::parse(line)["step"], lines + 1);
      EXPECT_EQ(lines, step);
    }
  }
  std::filesystem::remove(path);
  EXPECT_THROW(MetricsFile("/nonexistent-dir/m.jsonl"), std::runtime_error);
}

TEST(Metrics, ResumeKeepsTheCheckpointsStepsAndDropsLaterOnes) {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() /
      ("plan-run-metrics-resume-" + std::to_string(::getpid()) + ".jsonl");
  auto read = [&] {
    std::vector<int64_t> steps;
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);)
      steps.push_back(nlohmann::json::parse(line)["step"].get<int64_t>());
    return steps;
  };
  // An interrupted run: steps 1..5 written, the last line cut short.
  {
    std::ofstream out(path);
    StepMetrics m = sample();
    for (int64_t step = 1; step <= 5; ++step) {
      m.step = step;
      out << metricsJson(m) << "\n";
    }
    out << "{\"step\":6,\"lo";
  }
  {
    // Resumed from the checkpoint of step 3: steps 4.. are run again.
    MetricsFile file(path.string(), 3);
    EXPECT_EQ(read(), (std::vector<int64_t>{1, 2, 3}));
    StepMetrics m = sample();
    m.step = 4;
    file.append(m);
    EXPECT_EQ(read(), (std::vector<int64_t>{1, 2, 3, 4}));
  }
  EXPECT_FALSE(std::filesystem::exists(path.string() + ".tmp"));
  {
    // Resumed after the end of the file: nothing to drop.
    MetricsFile file(path.string(), 10);
    EXPECT_EQ(read(), (std::vector<int64_t>{1, 2, 3, 4}));
  }
  {
    // A fresh run (no resume) empties it.
    MetricsFile file(path.string());
    EXPECT_EQ(read(), (std::vector<int64_t>{}));
  }
  std::filesystem::remove(path);
  {
    // A resumed run whose file is gone starts a new one.
    MetricsFile file(path.string(), 3);
    StepMetrics m = sample();
    m.step = 4;
    file.append(m);
    EXPECT_EQ(read(), (std::vector<int64_t>{4}));
  }
  std::filesystem::remove(path);
  EXPECT_THROW(MetricsFile("/nonexistent-dir/m.jsonl", 3), std::runtime_error);
}

TEST(Progress, StepLine) {
  EXPECT_EQ(formatStepLine(sample(), 10),
            "step 3/10 loss 5.2500 lr 1.0e-03 tok/s 2048");
  StepMetrics m = sample();
  m.lossScale = 1024;
  m.skipped = true;
  EXPECT_EQ(
      formatStepLine(m, 10),
      "step 3/10 loss 5.2500 lr 1.0e-03 tok/s 2048 loss_scale 1024 skipped");
}

TEST(Progress, BarAndEta) {
  // 3 of 10 steps in 6 s: 2 s a step, 7 to go.
  EXPECT_EQ(formatProgressBar(sample(), 10, 6.0, 10),
            "[###.......] 3/10 loss 5.2500 tok/s 2048 ETA 0:14");
  // Resumed at step 3: the 6 s are one step's, 7 to go.
  EXPECT_EQ(formatProgressBar(sample(), 10, 6.0, 10, 3),
            "[###.......] 3/10 loss 5.2500 tok/s 2048 ETA 0:42");
  EXPECT_EQ(formatDuration(3725), "1:02:05");
  EXPECT_EQ(formatDuration(59.6), "1:00");
  EXPECT_EQ(formatDuration(NAN), "?");
}

TEST(Progress, BytesAndMessages) {
  using plan::rt::support::formatBytes;
  EXPECT_EQ(formatBytes(512), "512 B");
  EXPECT_EQ(formatBytes(1258291), "1.2 MiB");
  EXPECT_EQ(formatBytes(int64_t(55513432064)), "51.70 GiB");
  EXPECT_EQ(formatBytes(-1536), "-1.5 KiB");
  EXPECT_EQ(formatBytes(INT64_MIN), "-8388608.00 TiB");
  Progress quiet(Progress::Style::Quiet, 10);
  testing::internal::CaptureStdout();
  quiet.message("plan-run: checkpoint step 3");
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "");
  Progress lines(Progress::Style::Lines, 10);
  testing::internal::CaptureStdout();
  lines.message("plan-run: checkpoint step 3");
  EXPECT_EQ(testing::internal::GetCapturedStdout(),
            "plan-run: checkpoint step 3\n");
}

} // namespace
