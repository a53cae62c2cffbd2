//===- planc.cpp - The plan compiler driver -------------------------------===//
//
//   planc model.plan                 check the plan, print a one-line summary
//   planc model.plan --emit=plan     print the plan dialect IR
//   planc model.plan --emit=sched    print the lowered per-rank schedule
//   planc model.plan --set train.micro_batch=2 ...
//
// Exit codes: 0 success, 1 the plan (or a flag or file) has errors.
//
//===----------------------------------------------------------------------===//

#include "frontend/Frontend.h"
#include "frontend/Models.h"
#include "passes/Passes.h"

#include "mlir/Pass/PassManager.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;
namespace cl = llvm::cl;

static cl::OptionCategory plancCategory("planc options");

static cl::opt<std::string> inputFilename(cl::Positional,
                                          cl::desc("<plan file>"), cl::Required,
                                          cl::cat(plancCategory));

static cl::opt<std::string> outputFilename("o", cl::desc("Output file"),
                                           cl::value_desc("filename"),
                                           cl::init("-"),
                                           cl::cat(plancCategory));

static cl::list<std::string>
    overrides("set",
              cl::desc("Override a key, e.g. --set parallel.sharding=zero2 "
                       "(repeatable; same checks as the file)"),
              cl::value_desc("path=value"), cl::cat(plancCategory));

enum class Emit { Summary, Plan, Sched };
static cl::opt<Emit> emit(
    "emit", cl::desc("What to print"), cl::init(Emit::Summary),
    cl::values(clEnumValN(Emit::Summary, "summary",
                          "a one-line summary of the checked plan (default)"),
               clEnumValN(Emit::Plan, "plan", "the plan dialect IR"),
               clEnumValN(Emit::Sched, "sched",
                          "the lowered per-rank schedule (sched dialect)")),
    cl::cat(plancCategory));

static std::string withThousands(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return out;
}

static void printSummary(const plan::PlanSpec &p, llvm::raw_ostream &os) {
  const plan::ModelSpec &m = p.model;
  const plan::ClusterSpec &c = p.cluster;
  const plan::TrainSpec &t = p.train;
  int64_t dataParallel = c.worldSize();
  int64_t globalBatch = t.microBatch * t.gradAccum * dataParallel;
  os << llvm::formatv(
      "{0}: {1} ({2} parameters), {3} node(s) x {4} {5}, {6}, {7}; "
      "global batch {8} x {9} tokens\n",
      p.name, m.preset.empty() ? plan::stringify(m.family).str() : m.preset,
      withThousands(plan::countParams(m)), c.nodes, c.gpusPerNode,
      c.device.name, plan::stringify(p.parallel.sharding),
      plan::stringify(t.precision), globalBatch, t.seqLen);
}

int main(int argc, char **argv) {
  llvm::InitLLVM y(argc, argv);
  cl::HideUnrelatedOptions(plancCategory);
  cl::ParseCommandLineOptions(
      argc, argv,
      "planc: the plan compiler\n\n"
      "Checks a .plan file and prints what it was asked to emit.\n");

  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input =
      openInputFile(inputFilename, &error);
  if (!input) {
    llvm::errs() << "planc: " << error << "\n";
    return 1;
  }

  MLIRContext context;
  llvm::SourceMgr sourceMgr;
  unsigned bufferId = sourceMgr.AddNewSourceBuffer(std::move(input), SMLoc());
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  plan::DiagEmitter diag(
      &context, &sourceMgr,
      FileLineColLoc::get(&context, inputFilename, /*line=*/1, /*col=*/1));

  std::optional<plan::PlanSpec> spec =
      plan::loadPlan(sourceMgr, bufferId, overrides,
                     plan::defaultPlanName(inputFilename), diag);
  if (!spec)
    return 1;
  OwningOpRef<ModuleOp> module = plan::importPlan(*spec, diag);
  if (!module)
    return 1;
  if (emit == Emit::Sched) {
    PassManager pm(&context);
    plan::buildPlanLowerPipeline(pm);
    if (failed(pm.run(*module)))
      return 1;
  }

  std::unique_ptr<llvm::ToolOutputFile> output =
      openOutputFile(outputFilename, &error);
  if (!output) {
    llvm::errs() << "planc: " << error << "\n";
    return 1;
  }
  switch (emit) {
  case Emit::Summary:
    printSummary(*spec, output->os());
    break;
  case Emit::Plan:
  case Emit::Sched:
    module->print(output->os());
    output->os() << "\n";
    break;
  }
  output->keep();
  return 0;
}
