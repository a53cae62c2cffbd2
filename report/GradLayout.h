//===- GradLayout.h - The gradient layout of least peak ---------*- C++ -*-===//
//
// Mixed precision keeps gradients between backward and the step either in
// fp32 or in the working type (`train.grad_dtype`, docs/language.md
// "Gradient layout"). Which costs less depends on where the step's peak is,
// so when the plan does not say, planc and plan-opt lower it both ways and
// keep the layout whose device peak is less.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_REPORT_GRADLAYOUT_H
#define PLAN_REPORT_GRADLAYOUT_H

#include "frontend/PlanSpec.h"

#include <cstdint>
#include <optional>

namespace plan {

/// The two layouts' device peaks (arena + workspace per rank).
struct GradLayoutChoice {
  DType chosen = DType::F32;
  uint64_t chosenPeakBytes = 0;
  DType other = DType::F32;
  uint64_t otherPeakBytes = 0;
};

/// With mixed precision and `train.grad_dtype` not given, lowers `spec`
/// with fp32 gradients and with working-type ones (in contexts of their own,
/// diagnostics dropped), sets `spec.train.gradDtype` to the one of lower
/// device peak (fp32 on a tie: it keeps more of the gradient) and returns
/// both peaks. Nothing, and `spec` unchanged, when the choice does not apply
/// or either lowering fails (the lowering that follows reports why).
std::optional<GradLayoutChoice> chooseGradDtype(PlanSpec &spec);

} // namespace plan

#endif // PLAN_REPORT_GRADLAYOUT_H
