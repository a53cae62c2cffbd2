//===- plan-opt.cpp - mlir-opt for plans ----------------------------------===//
//
// mlir-opt with the plan dialects and passes. A `.plan` input is compiled by
// the frontend first (with `--set` overrides), then runs through the same
// pass pipeline and printing as `.mlir` input; `-verify-diagnostics` checks
// expected-error comments in `.plan` files as it does in `.mlir` files.
//
//===----------------------------------------------------------------------===//

#include "frontend/Frontend.h"
#include "passes/Passes.h"
#include "report/Lowerings.h"

#include "mlir/Debug/Counter.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;

static llvm::cl::list<std::string>
    planOverrides("set",
                  llvm::cl::desc("Override a key of a .plan input, e.g. "
                                 "--set parallel.sharding=full_shard"),
                  llvm::cl::value_desc("path=value"));

static llvm::cl::opt<unsigned> planErrorLimit(
    "error-limit",
    llvm::cl::desc("Stop printing errors of a .plan input after this many "
                   "(0: no limit)"),
    llvm::cl::init(plan::DiagnosticPrinter::kDefaultErrorLimit));

/// Compiles a .plan file and runs the configured pipeline on it, as
/// MlirOptMain does for .mlir input.
static LogicalResult runOnPlanFile(llvm::StringRef inputFilename,
                                   llvm::StringRef outputFilename,
                                   const MlirOptMainConfig &config,
                                   DialectRegistry &registry) {
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input =
      plan::openInput(inputFilename, error);
  if (!input) {
    llvm::errs() << "plan-opt: error: " << error << "\n";
    return failure();
  }
  std::unique_ptr<llvm::ToolOutputFile> output =
      openOutputFile(outputFilename, &error);
  if (!output) {
    llvm::errs() << "plan-opt: error: " << error << "\n";
    return failure();
  }

  MLIRContext context(registry);
  context.allowUnregisteredDialects(config.shouldAllowUnregisteredDialects());
  llvm::SourceMgr sourceMgr;
  unsigned bufferId = sourceMgr.AddNewSourceBuffer(std::move(input), SMLoc());

  auto compile = [&]() -> LogicalResult {
    plan::DiagEmitter diag(
        &context, &sourceMgr,
        FileLineColLoc::get(&context, inputFilename, /*line=*/1, /*col=*/1));
    std::optional<plan::PlanSpec> spec =
        plan::loadPlan(sourceMgr, bufferId, planOverrides,
                       plan::defaultPlanName(inputFilename), diag);
    if (!spec)
      return failure();
    // The gradient layout planc would choose (its lowerings are dropped:
    // the passes below are the command line's).
    std::optional<plan::LoweredPlan> probed;
    (void)plan::chooseGradDtype(*spec, diag, probed,
                                {/*time=*/false, /*timeline=*/false});
    OwningOpRef<ModuleOp> module = plan::importPlan(*spec, diag);
    if (!module)
      return failure();
    PassManager pm(&context, ModuleOp::getOperationName(),
                   OpPassManager::Nesting::Implicit);
    // --mlir-timing: each pass's time, reported when `timing` goes.
    DefaultTimingManager timing;
    applyDefaultTimingManagerCLOptions(timing);
    TimingScope root = timing.getRootScope();
    pm.enableTiming(root);
    pm.enableVerifier(config.shouldVerifyPasses()); // --verify-each
    if (failed(applyPassManagerCLOptions(pm)) ||
        failed(config.setupPassPipeline(pm)) || failed(pm.run(*module)))
      return failure();
    module->print(output->os());
    output->os() << "\n";
    return success();
  };

  if (config.shouldVerifyDiagnostics()) {
    SourceMgrDiagnosticVerifierHandler handler(sourceMgr, &context,
                                               config.verifyDiagnosticsLevel());
    (void)compile();
    if (failed(handler.verify()))
      return failure();
  } else {
    plan::DiagnosticPrinter handler(sourceMgr, &context, planErrorLimit,
                                    "plan-opt");
    if (failed(compile()))
      return failure();
  }
  if (!plan::keepOutput(*output, outputFilename, error)) {
    llvm::errs() << "plan-opt: error: " << error << "\n";
    return failure();
  }
  return success();
}

/// Hides from --help the options that were registered before main: those of
/// LLVM's code generators, linked in with libLLVM (480 lines of AMDGPU,
/// Polly, ...), which a plan never uses. `--help-hidden` still lists them and
/// they still work. What mlir-opt and the passes register at run time, and
/// the ones in `shown`, stay.
static void hideStartupOptions(const llvm::StringSet<> &startup) {
  static const char *shown[] = {"set", "error-limit", "help", "version",
                                "pipeline-tasks"};
  for (auto &entry : llvm::cl::getRegisteredOptions())
    if (startup.contains(entry.first) &&
        !llvm::is_contained(shown, entry.first))
      entry.second->setHiddenFlag(llvm::cl::Hidden);
}

int main(int argc, char **argv) {
  llvm::InitLLVM y(argc, argv);
  llvm::StringSet<> startup;
  for (auto &entry : llvm::cl::getRegisteredOptions())
    startup.insert(entry.first);
  llvm::cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << "plan-opt " PLAN_COMPILER_VERSION
          "\n  built with LLVM/MLIR " LLVM_VERSION_STRING "\n";
  });
  DialectRegistry registry;
  plan::registerPlanDialects(registry);
  plan::registerPlanCompilerPasses();

  // mlir-opt's options (what registerAndParseCLIOptions registers), then
  // LLVM's hidden, then the command line.
  static llvm::cl::opt<std::string> inputFilename(
      llvm::cl::Positional, llvm::cl::desc("<input file>"),
      llvm::cl::init("-"));
  static llvm::cl::opt<std::string> outputFilename(
      "o", llvm::cl::desc("Output filename"), llvm::cl::value_desc("filename"),
      llvm::cl::init("-"));
  MlirOptMainConfig::registerCLOptions(registry);
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  registerDefaultTimingManagerCLOptions();
  tracing::DebugCounter::registerCLOptions();
  hideStartupOptions(startup);
  std::string dialects;
  llvm::raw_string_ostream names(dialects);
  llvm::interleaveComma(registry.getDialectNames(), names);
  llvm::cl::ParseCommandLineOptions(
      argc, argv,
      "plan-opt: the plan compiler's optimizer driver\n\nAvailable "
      "Dialects: " +
          dialects + "\n");
  MlirOptMainConfig config = MlirOptMainConfig::createFromCLOptions();

  if (llvm::StringRef(inputFilename).ends_with(".plan"))
    return asMainReturnCode(
        runOnPlanFile(inputFilename, outputFilename, config, registry));
  if (!planOverrides.empty()) {
    llvm::errs() << "plan-opt: error: --set only applies to .plan input\n";
    return 1;
  }
  if (std::string error; !plan::checkInput(inputFilename, error)) {
    llvm::errs() << "plan-opt: error: " << error << "\n";
    return 1;
  }
  return asMainReturnCode(
      MlirOptMain(argc, argv, inputFilename, outputFilename, registry));
}
