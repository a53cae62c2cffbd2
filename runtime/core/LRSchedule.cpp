//===- LRSchedule.cpp - Learning-rate factor per optimizer step -----------===//

#include "LRSchedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace plan::rt {

double lrFactor(const LRScheduleConfig &config, int64_t k, int64_t totalSteps) {
  int64_t warmup = config.warmup;
  if (k < warmup)
    return static_cast<double>(k) /
           static_cast<double>(std::max<int64_t>(1, warmup));
  double decaySteps =
      static_cast<double>(std::max<int64_t>(1, totalSteps - warmup));
  double minRatio = config.minLrRatio;
  switch (config.kind) {
  case LRScheduleKind::Constant:
    return 1.0;
  case LRScheduleKind::Linear: {
    // HF's linear schedule, (total - k) / (total - warmup) clamped at 0; a
    // floor of min_lr_ratio generalises it the way cosine_with_min_lr does
    // cosine (and gives HF's numbers bit for bit when the ratio is 0).
    double remaining = static_cast<double>(totalSteps - k) / decaySteps;
    return std::max(minRatio, minRatio + (1.0 - minRatio) * remaining);
  }
  case LRScheduleKind::Cosine: {
    // Past the last step (plan-run --steps beyond train.steps) the schedule
    // holds its final rate; HF's cosine would climb back up.
    double progress =
        std::min(1.0, static_cast<double>(k - warmup) / decaySteps);
    // HF cosine with num_cycles = 0.5 (cos(pi * 2 * 0.5 * progress)), and
    // cosine_with_min_lr's affine map onto [min_lr_rate, 1].
    double cosine = 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
    return std::max(0.0, cosine * (1.0 - minRatio) + minRatio);
  }
  }
  return 1.0;
}

} // namespace plan::rt
