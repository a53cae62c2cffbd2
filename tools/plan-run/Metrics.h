//===- Metrics.h - One JSON object per step (--metrics FILE.jsonl) -*- C++
//-*-===//
//
// The record of a run that plotting scripts and regression checks read: rank
// 0 appends one line per optimizer step and flushes it, so a run that dies
// leaves every completed step on disk. Field names are documented in
// docs/launching.md.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_RUN_METRICS_H
#define PLAN_RUN_METRICS_H

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace plan::run {

/// One step as reported: the executor's result plus what the loop measured.
struct StepMetrics {
  int64_t step = 0;
  double loss = 0, lr = 0;
  std::optional<double> gradNorm;  // when the schedule computes one
  int64_t tokens = 0;              // global batch
  double stepTimeS = 0;            // wall time of the step on rank 0
  int64_t peakBytes = 0;           // rank 0: measured (Executor's StepResult)
  int64_t plannedBytes = 0;        // rank 0: arenas + workspace; 0: unknown
  std::optional<double> lossScale; // fp16 only, with `skipped`
  bool skipped = false;
  /// With a pipeline: the same two for the first rank of each stage, in
  /// stage order (stage 0's is rank 0's); empty without one.
  std::vector<int64_t> stagePeakBytes, stagePlannedBytes;

  double tokensPerSecond() const {
    return stepTimeS > 0 ? static_cast<double>(tokens) / stepTimeS : 0;
  }
};

/// The JSON object of one step, without a newline. Non-finite numbers (a
/// diverged loss) are written as null, which JSON readers accept.
std::string metricsJson(const StepMetrics &metrics);

/// A JSONL file of objects with a "step" key, emptied when opened, then
/// written one flushed line at a time. A resumed run (`resumedAfter` = the
/// checkpoint's step s) keeps the lines of steps <= s of an existing file,
/// drops the later ones (the steps the resumed run repeats) and appends
/// after them; a missing file is created. Throws std::runtime_error (one
/// line, naming the file as `what`) when it cannot be opened, read or
/// written. --metrics and --memory-trace write one each.
class MetricsFile {
public:
  explicit MetricsFile(const std::string &path,
                       std::optional<int64_t> resumedAfter = std::nullopt,
                       std::string what = "metrics file");
  ~MetricsFile();
  MetricsFile(const MetricsFile &) = delete;
  MetricsFile &operator=(const MetricsFile &) = delete;

  void append(const StepMetrics &metrics);
  /// One JSON object (without its newline).
  void appendLine(const std::string &json);

private:
  std::string path_;
  std::string what_;
  std::FILE *file_ = nullptr;
};

} // namespace plan::run

#endif // PLAN_RUN_METRICS_H
