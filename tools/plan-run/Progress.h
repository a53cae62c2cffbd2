//===- Progress.h - What rank 0 prints while it trains ----------*- C++ -*-===//
//
// On a terminal, one progress bar redrawn in place (stderr); in a log file,
// one plain line per step (stdout), which grep and tail handle; nothing with
// --quiet. A summary line closes the run either way (not with --quiet).
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_RUN_PROGRESS_H
#define PLAN_RUN_PROGRESS_H

#include "Metrics.h"

#include <cstdint>
#include <cstdio>
#include <string>

namespace plan::run {

/// "step 3/10 loss 5.1234 lr 1.0e-03 tok/s 12345"
std::string formatStepLine(const StepMetrics &metrics, int64_t totalSteps);

/// "[#######.............] 3/10 loss 5.1234 tok/s 12345 ETA 0:07", with a bar
/// `width` characters wide; `elapsedS` is the time of the steps so far, from
/// `firstStep` (a resumed run's first) on.
std::string formatProgressBar(const StepMetrics &metrics, int64_t totalSteps,
                              double elapsedS, int width,
                              int64_t firstStep = 1);

/// "h:mm:ss" or "m:ss".
std::string formatDuration(double seconds);

class Progress {
public:
  enum class Style { Bar, Lines, Quiet };
  /// Bar when stderr is a terminal, otherwise Lines; Quiet when asked.
  static Style styleFor(bool quiet);

  /// A resumed run starts at `firstStep` > 1: the ETA counts the steps this
  /// process ran.
  Progress(Style style, int64_t totalSteps, int64_t firstStep = 1);

  void step(const StepMetrics &metrics, double elapsedS);
  /// One line of news between steps (a checkpoint was saved) on stdout,
  /// below the bar if one is drawn; nothing when Quiet.
  void message(const std::string &line);
  /// "plan-run: 10 steps in 1.2 s, final loss 5.1234, 12345 tok/s, peak 12.3
  /// MiB on rank 0", then " (planned 12.0 MiB)" when the measured peak is
  /// not the plan's prediction itself (cuda).
  void finish(const StepMetrics &last, int64_t steps, double elapsedS,
              int64_t tokens);

private:
  Style style_;
  int64_t totalSteps_, firstStep_;
  bool barDrawn_ = false;
};

} // namespace plan::run

#endif // PLAN_RUN_PROGRESS_H
