//===- Lowerings.h - Choices made by lowering a plan more ways --*- C++ -*-===//
//
// What planc and plan-opt learn by lowering a plan again, quietly, with
// something changed: the fit check's alternatives (a plan with more
// `--set`s) and the gradient layout. Mixed precision keeps gradients
// between backward and the step either in fp32 or in the working type
// (`train.grad_dtype`, docs/language.md "Gradient layout"); which costs
// less depends on where the step's peak is, so when the plan does not say,
// both are lowered and the layout of lower device peak is kept.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_REPORT_LOWERINGS_H
#define PLAN_REPORT_LOWERINGS_H

#include "frontend/PlanSpec.h"
#include "report/Report.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <cstdint>
#include <optional>
#include <utility>

namespace plan {

class DiagEmitter;

/// A plan after the whole plan-lower pipeline, and its report.
struct LoweredPlan {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  ScheduleReport report;
};

/// `spec` imported through `diag` (its locations point into the plan's
/// file) and lowered in its context, with MLIR's verifier after every pass
/// when `verifyEachPass`, and analysed as `analysis` says; with
/// `verifyLowered`, MLIR's verifier once on the result, alongside the
/// analysis (both only read it). Nothing, after the diagnostics say why,
/// when it does not import, lower, analyse or verify.
std::optional<LoweredPlan> lowerPlan(const PlanSpec &spec, DiagEmitter &diag,
                                     bool verifyEachPass = true,
                                     AnalysisOptions analysis = {},
                                     bool verifyLowered = false);

/// The report of `spec` after the whole plan-lower pipeline in `context`,
/// whose diagnostic handlers see why a plan does not import or lower (the
/// search keeps one context for all its candidates). `verifyEachPass`: MLIR's
/// structural verifier after every pass, as planc runs it; the search turns it
/// off for the many short plans it lowers (the pipeline's own
/// sched-verify-schedule pass still runs).
std::optional<ScheduleReport> reportOfLowering(const PlanSpec &spec,
                                               mlir::MLIRContext &context,
                                               bool verifyEachPass = true);

/// The two layouts' device peaks (arena + workspace per rank).
struct GradLayoutChoice {
  DType chosen = DType::F32;
  uint64_t chosenPeakBytes = 0;
  DType other = DType::F32;
  uint64_t otherPeakBytes = 0;
};

/// With mixed precision and `train.grad_dtype` not given, lowers `spec`
/// with fp32 gradients and with working-type ones through `diag` (in its
/// context, diagnostics dropped meanwhile, no verifier between passes),
/// sets `spec.train.gradDtype` to the one of lower device peak (fp32 on a
/// tie: it keeps more of the gradient) and returns both peaks; the chosen
/// layout's lowering is left in `chosen`, with its report as `analysis`
/// says (the other's step is not simulated), so that a tool need not lower
/// it again, and verified with `verifyLowered` as lowerPlan verifies.
/// Nothing, and `spec` and `chosen` unchanged, when the choice does not
/// apply, either lowering fails or the chosen one does not verify (the
/// lowering that follows reports why).
std::optional<GradLayoutChoice>
chooseGradDtype(PlanSpec &spec, DiagEmitter &diag,
                std::optional<LoweredPlan> &chosen,
                AnalysisOptions analysis = {}, bool verifyLowered = false);
/// Each layout's device peak, fp32's and the working type's: nothing for
/// one that does not lower.
using LayoutPeaks = std::pair<std::optional<uint64_t>, std::optional<uint64_t>>;

/// The same choice with the two layouts' device peaks from `peaksOf` (the
/// search lowers in a context it keeps).
std::optional<GradLayoutChoice>
chooseGradDtype(PlanSpec &spec,
                llvm::function_ref<LayoutPeaks(const PlanSpec &fp32,
                                               const PlanSpec &working)>
                    peaksOf);

} // namespace plan

#endif // PLAN_REPORT_LOWERINGS_H
