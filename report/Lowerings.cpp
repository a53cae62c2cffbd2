//===- Lowerings.cpp - Choices made by lowering a plan more ways ----------===//

#include "report/Lowerings.h"

#include "frontend/Frontend.h"
#include "passes/Passes.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

using namespace mlir;

std::optional<plan::LoweredPlan> plan::lowerPlan(const PlanSpec &spec,
                                                 DiagEmitter &diag,
                                                 bool verifyEachPass,
                                                 AnalysisOptions analysis) {
  OwningOpRef<ModuleOp> module = plan::importPlan(spec, diag);
  if (!module)
    return std::nullopt;
  PassManager pm(diag.getContext());
  pm.enableVerifier(verifyEachPass);
  plan::buildPlanLowerPipeline(pm);
  if (failed(pm.run(*module)))
    return std::nullopt;
  FailureOr<plan::ScheduleReport> report =
      plan::analyzeSchedule(*module, analysis);
  if (failed(report))
    return std::nullopt;
  return LoweredPlan{std::move(module), std::move(*report)};
}

std::optional<plan::ScheduleReport>
plan::reportOfLowering(const PlanSpec &spec, MLIRContext &context,
                       bool verifyEachPass) {
  plan::DiagEmitter diag(&context, nullptr, UnknownLoc::get(&context));
  std::optional<LoweredPlan> lowered = lowerPlan(
      spec, diag, verifyEachPass, {/*time=*/true, /*timeline=*/false});
  if (!lowered)
    return std::nullopt;
  return std::move(lowered->report);
}

std::optional<plan::GradLayoutChoice>
plan::chooseGradDtype(PlanSpec &spec, DiagEmitter &diag,
                      std::optional<LoweredPlan> &chosen,
                      AnalysisOptions analysis) {
  ScopedDiagnosticHandler quiet(diag.getContext(),
                                [](Diagnostic &) { return success(); });
  std::optional<LoweredPlan> fp32, working;
  DType given = spec.train.gradDtype;
  const AnalysisOptions probe{/*time=*/false, /*timeline=*/false};
  std::optional<GradLayoutChoice> choice = chooseGradDtype(
      spec, [&](const PlanSpec &layout) -> std::optional<uint64_t> {
        std::optional<LoweredPlan> &lowered =
            layout.train.gradDtype == DType::F32 ? fp32 : working;
        // The peak decides: the step is simulated for the winner only.
        lowered = lowerPlan(layout, diag, /*verifyEachPass=*/false, probe);
        if (!lowered)
          return std::nullopt;
        return lowered->report.memory.devicePeakBytes();
      });
  if (!choice)
    return std::nullopt;
  std::optional<LoweredPlan> &winner =
      choice->chosen == DType::F32 ? fp32 : working;
  // The probe's report is the whole of one without the time.
  if (analysis.time) {
    FailureOr<ScheduleReport> report =
        analyzeSchedule(*winner->module, analysis);
    if (failed(report)) {
      spec.train.gradDtype = given;
      return std::nullopt;
    }
    winner->report = std::move(*report);
  }
  chosen = std::move(winner);
  return choice;
}

std::optional<plan::GradLayoutChoice> plan::chooseGradDtype(
    PlanSpec &spec,
    llvm::function_ref<std::optional<uint64_t>(const PlanSpec &)> peakOf) {
  if (spec.train.precision == Precision::FP32 ||
      spec.isGiven("train.grad_dtype"))
    return std::nullopt;
  PlanSpec fp32 = spec, working = spec;
  fp32.train.gradDtype = DType::F32;
  working.train.gradDtype = workingDtype(spec.train.precision);
  std::optional<uint64_t> fp32Peak = peakOf(fp32);
  std::optional<uint64_t> workingPeak = peakOf(working);
  if (!fp32Peak || !workingPeak)
    return std::nullopt;
  GradLayoutChoice choice;
  bool fp32Wins = *fp32Peak <= *workingPeak;
  choice.chosen = fp32Wins ? DType::F32 : working.train.gradDtype;
  choice.chosenPeakBytes = fp32Wins ? *fp32Peak : *workingPeak;
  choice.other = fp32Wins ? working.train.gradDtype : DType::F32;
  choice.otherPeakBytes = fp32Wins ? *workingPeak : *fp32Peak;
  spec.train.gradDtype = choice.chosen;
  return choice;
}
