//===- Lowerings.cpp - Choices made by lowering a plan more ways ----------===//

#include "report/Lowerings.h"

#include "frontend/Frontend.h"
#include "passes/Passes.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/Support/ThreadPool.h"

#include <future>

using namespace mlir;

/// `module`'s report as `analysis` says, with MLIR's verifier on it at the
/// same time when `verify`, on a thread of the context's; failure when
/// either fails. Both only read the module once every block's ops are
/// numbered: the verifier's dominance checks number a block's ops when they
/// first compare two (Block::recomputeOpOrder), which writes the word that
/// also holds the block's parent, and the analysis reads that parent.
static FailureOr<plan::ScheduleReport>
analyzeAndVerify(ModuleOp module, plan::AnalysisOptions analysis, bool verify) {
  MLIRContext *context = module->getContext();
  std::shared_future<LogicalResult> verified;
  if (verify && context->isMultithreadingEnabled()) {
    module->walk([](Block *block) { block->recomputeOpOrder(); });
    verified = context->getThreadPool().async(
        [module] { return mlir::verify(module); });
  }
  FailureOr<plan::ScheduleReport> report =
      plan::analyzeSchedule(module, analysis);
  bool valid = verified.valid() ? succeeded(verified.get())
               : verify         ? succeeded(mlir::verify(module))
                                : true;
  if (failed(report) || !valid)
    return failure();
  return report;
}

/// `module` lowered by the whole plan-lower pipeline and analysed (and
/// verified when `verify`); nothing when it was not imported or does not
/// lower, analyse or verify.
static std::optional<plan::LoweredPlan>
lowerImported(OwningOpRef<ModuleOp> module, bool verifyEachPass,
              plan::AnalysisOptions analysis, bool verify = false) {
  if (!module)
    return std::nullopt;
  PassManager pm(module->getContext());
  pm.enableVerifier(verifyEachPass);
  plan::buildPlanLowerPipeline(pm);
  if (failed(pm.run(*module)))
    return std::nullopt;
  FailureOr<plan::ScheduleReport> report =
      analyzeAndVerify(*module, analysis, verify);
  if (failed(report))
    return std::nullopt;
  return plan::LoweredPlan{std::move(module), std::move(*report)};
}

std::optional<plan::LoweredPlan>
plan::lowerPlan(const PlanSpec &spec, DiagEmitter &diag, bool verifyEachPass,
                AnalysisOptions analysis, bool verifyLowered) {
  return lowerImported(plan::importPlan(spec, diag), verifyEachPass, analysis,
                       verifyLowered);
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
                      AnalysisOptions analysis, bool verifyLowered) {
  ScopedDiagnosticHandler quiet(diag.getContext(),
                                [](Diagnostic &) { return success(); });
  std::optional<LoweredPlan> fp32, working;
  DType given = spec.train.gradDtype;
  const AnalysisOptions probe{/*time=*/false, /*timeline=*/false};
  MLIRContext *context = diag.getContext();
  std::optional<GradLayoutChoice> choice = chooseGradDtype(
      spec, [&](const PlanSpec &fp32Layout, const PlanSpec &workingLayout) {
        // Both imported here, one after the other (diag keeps the
        // locations it made), then lowered at once: one on a thread of the
        // context's, the other on this one. The pipeline's dialects are
        // loaded first, so that neither run changes the context (MLIR
        // loads a pipeline's dialects as it starts it). The peak decides:
        // the step is simulated for the winner only.
        OwningOpRef<ModuleOp> fp32Module = importPlan(fp32Layout, diag);
        OwningOpRef<ModuleOp> workingModule = importPlan(workingLayout, diag);
        if (fp32Module && workingModule && context->isMultithreadingEnabled()) {
          PassManager pm(context);
          buildPlanLowerPipeline(pm);
          DialectRegistry dialects;
          pm.getDependentDialects(dialects);
          context->appendDialectRegistry(dialects);
          for (StringRef name : dialects.getDialectNames())
            context->getOrLoadDialect(name);
          std::shared_future<void> fp32Done =
              context->getThreadPool().async([&] {
                fp32 = lowerImported(std::move(fp32Module),
                                     /*verifyEachPass=*/false, probe);
              });
          working = lowerImported(std::move(workingModule),
                                  /*verifyEachPass=*/false, probe);
          fp32Done.wait();
        } else {
          fp32 = lowerImported(std::move(fp32Module),
                               /*verifyEachPass=*/false, probe);
          working = lowerImported(std::move(workingModule),
                                  /*verifyEachPass=*/false, probe);
        }
        auto peakOf = [](const std::optional<LoweredPlan> &lowered)
            -> std::optional<uint64_t> {
          if (!lowered)
            return std::nullopt;
          return lowered->report.memory.devicePeakBytes();
        };
        return std::make_pair(peakOf(fp32), peakOf(working));
      });
  if (!choice)
    return std::nullopt;
  std::optional<LoweredPlan> &winner =
      choice->chosen == DType::F32 ? fp32 : working;
  std::optional<LoweredPlan> &loser =
      choice->chosen == DType::F32 ? working : fp32;
  // The loser is taken apart on a thread of the context's while the winner
  // is simulated: both walk a whole step's ops. Neither touches the
  // other's module, and taking ops apart creates nothing in the context.
  std::shared_future<void> loserGone;
  if (context->isMultithreadingEnabled())
    loserGone = context->getThreadPool().async([&loser] { loser.reset(); });
  else
    loser.reset();
  // The probe's report is the whole of one without the time.
  LogicalResult finished = success();
  if (analysis.time) {
    FailureOr<ScheduleReport> report =
        analyzeAndVerify(*winner->module, analysis, verifyLowered);
    if (succeeded(report))
      winner->report = std::move(*report);
    else
      finished = failure();
  } else if (verifyLowered) {
    finished = mlir::verify(*winner->module);
  }
  if (loserGone.valid())
    loserGone.wait();
  if (failed(finished)) {
    spec.train.gradDtype = given;
    return std::nullopt;
  }
  chosen = std::move(winner);
  return choice;
}

std::optional<plan::GradLayoutChoice>
plan::chooseGradDtype(PlanSpec &spec,
                      llvm::function_ref<LayoutPeaks(const PlanSpec &fp32,
                                                     const PlanSpec &working)>
                          peaksOf) {
  if (spec.train.precision == Precision::FP32 ||
      spec.isGiven("train.grad_dtype"))
    return std::nullopt;
  PlanSpec fp32 = spec, working = spec;
  fp32.train.gradDtype = DType::F32;
  working.train.gradDtype = workingDtype(spec.train.precision);
  auto [fp32Peak, workingPeak] = peaksOf(fp32, working);
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
