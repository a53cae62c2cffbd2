//===- LRSchedule.h - Learning-rate factor per optimizer step ---*- C++ -*-===//
//
// The plan's `lr_schedule` as the multiplier of the base learning rate,
// exactly as HuggingFace transformers' get_{constant,linear,cosine}_schedule_
// with_warmup and get_cosine_with_min_lr_schedule_with_warmup compute it
// (docs/runtime.md, "Learning-rate schedule").
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_RUNTIME_CORE_LRSCHEDULE_H
#define PLAN_RUNTIME_CORE_LRSCHEDULE_H

#include "Schedule.h"

#include <cstdint>

namespace plan::rt {

/// The factor for optimizer step index `k` (0 for the first step) of a run of
/// `totalSteps` steps. Throws std::invalid_argument for an unknown kind.
double lrFactor(const LRScheduleConfig &config, int64_t k, int64_t totalSteps);

} // namespace plan::rt

#endif // PLAN_RUNTIME_CORE_LRSCHEDULE_H
