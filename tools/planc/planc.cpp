//===- planc.cpp - The plan compiler driver -------------------------------===//
//
//   planc model.plan                 check the plan, print a one-line summary
//   planc model.plan --emit=plan     print the plan dialect IR
//   planc model.plan --emit=plan-resolved   the plan with every value written
//   planc model.plan --emit=sched    print the lowered per-rank schedule
//   planc model.plan -o model.sched  write the schedule file plan-run reads
//                                    (docs/schedule-format.md)
//   planc model.plan --emit=schedule-json   print that file's JSON body
//   planc model.plan --set train.micro_batch=2 ...
//   planc model.plan --error-limit=N     print at most N errors (0: all)
//   planc model.plan --report[=json] [--trace=t.json] [--timeline=t.svg]
//                                    memory, communication and time per rank
//                                    (docs/report.md)
//   planc model.plan --search[=json] [--search-out best.plan]
//                                    the auto-planner (Search.cpp,
//                                    docs/planner.md)
//   planc import accelerate|deepspeed CONFIG --model M [-o job.plan]
//                                    a .plan from a user's config
//                                    (Import.cpp, docs/importing.md)
//
// Exit codes: 0 success, 1 the plan (or a flag or file) has errors, 2 the
// plan does not fit the cluster's memory (any mode that lowers it). A plan
// that does not fit is still emitted (--emit=sched, --emit=schedule-json,
// the report, the trace and the timeline); the schedule file only with
// --allow-oversubscribe.
//
//===----------------------------------------------------------------------===//

#include "Import.h"
#include "Search.h"
#include "SvgToPng.h"
#include "export/ExportSchedule.h"
#include "frontend/Builder.h"
#include "frontend/Frontend.h"
#include "frontend/Models.h"
#include "passes/Passes.h"
#include "report/Lowerings.h"
#include "report/Report.h"

#include "Format.h"
#include "ScheduleFile.h"

#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Config/llvm-config.h"

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

enum class Emit { Summary, Plan, PlanResolved, Sched, Schedule, ScheduleJson };
static cl::opt<Emit> emit(
    "emit", cl::desc("What to print"), cl::init(Emit::Summary),
    cl::values(clEnumValN(Emit::Summary, "summary",
                          "a one-line summary of the checked plan (default)"),
               clEnumValN(Emit::Plan, "plan", "the plan dialect IR"),
               clEnumValN(Emit::PlanResolved, "plan-resolved",
                          "the plan as a .plan file with every value written "
                          "out (defaults and derived defaults included)"),
               clEnumValN(Emit::Sched, "sched",
                          "the lowered per-rank schedule (sched dialect)"),
               clEnumValN(Emit::Schedule, "schedule",
                          "the schedule file (binary; the default for "
                          "-o FILE.sched)"),
               clEnumValN(Emit::ScheduleJson, "schedule-json",
                          "the schedule file's JSON body, indented")),
    cl::cat(plancCategory));

enum class ReportFormat { None, Table, Json };
static cl::opt<ReportFormat> reportFormat(
    "report",
    cl::desc("Print per-rank memory, communication and predicted step time "
             "(docs/report.md); exits 2 when the plan does not fit"),
    cl::ValueOptional, cl::init(ReportFormat::None),
    cl::values(clEnumValN(ReportFormat::Table, "", "a readable table"),
               clEnumValN(ReportFormat::Table, "table", "a readable table"),
               clEnumValN(ReportFormat::Json, "json", "one JSON object")),
    cl::cat(plancCategory));

static cl::opt<std::string>
    traceFilename("trace",
                  cl::desc("Write rank 0's predicted timeline as a Chrome "
                           "trace (Perfetto)"),
                  cl::value_desc("file.json"), cl::cat(plancCategory));

static cl::opt<std::string> timelineFilename(
    "timeline",
    cl::desc("Draw rank 0's predicted step as a picture (.svg, or .png): a "
             "lane per stream, the exposed waits, the memory curve and its "
             "peak (docs/report.md, \"Timeline\")"),
    cl::value_desc("file.svg|file.png"), cl::cat(plancCategory));

static cl::opt<unsigned>
    errorLimit("error-limit",
               cl::desc("Stop printing errors after this many (0: no limit)"),
               cl::init(plan::DiagnosticPrinter::kDefaultErrorLimit),
               cl::cat(plancCategory));

static cl::opt<bool> allowOversubscribe(
    "allow-oversubscribe",
    cl::desc("Write the schedule file (-o FILE.sched) even when the plan does "
             "not fit the cluster's memory (still exits 2)"),
    cl::init(false), cl::cat(plancCategory));

static cl::opt<ReportFormat> searchFormat(
    "search",
    cl::desc("Search sharding, offload, checkpointing, micro-batch x "
             "accumulation, gradient layout and prefetch for the fastest "
             "step that fits and keeps the global batch (docs/planner.md); "
             "exits 2 when nothing fits"),
    cl::ValueOptional, cl::init(ReportFormat::None),
    cl::values(clEnumValN(ReportFormat::Table, "", "a readable table"),
               clEnumValN(ReportFormat::Table, "table", "a readable table"),
               clEnumValN(ReportFormat::Json, "json", "one JSON object")),
    cl::cat(plancCategory));

static cl::opt<unsigned>
    searchTop("search-top", cl::desc("Candidates --search shows (default 5)"),
              cl::init(5), cl::cat(plancCategory));

static cl::opt<std::string>
    searchOut("search-out",
              cl::desc("Write --search's winner as a .plan: the input file "
                       "with the keys it changes, comments kept"),
              cl::value_desc("best.plan"), cl::cat(plancCategory));

static cl::opt<int64_t> searchTokens(
    "search-tokens",
    cl::desc("The global batch --search keeps, in tokens (a whole number of "
             "sequences); default: the plan's"),
    cl::value_desc("N"), cl::init(0), cl::cat(plancCategory));

static cl::opt<bool> searchExhaustive(
    "search-exhaustive",
    cl::desc("Analyze every candidate of --search whole, without pruning "
             "(slow; checks the pruning)"),
    cl::init(false), cl::cat(plancCategory));

static void printSummary(const plan::PlanSpec &p, llvm::raw_ostream &os) {
  const plan::ModelSpec &m = p.model;
  const plan::ClusterSpec &c = p.cluster;
  const plan::TrainSpec &t = p.train;
  // The ranks of a tensor group, and the stages of a pipeline, read the
  // same micro-batches.
  int64_t dataParallel = p.parallel.dataParallelRanks(c.worldSize());
  int64_t globalBatch = t.microBatch * t.gradAccum * dataParallel;
  std::string strategy = plan::stringify(p.parallel.sharding).str();
  if (p.parallel.tensor > 1)
    strategy += llvm::formatv(
        " x tensor {0}{1}", p.parallel.tensor,
        p.parallel.sequenceParallel ? " with sequence parallelism" : "");
  if (p.parallel.pipeline > 1)
    strategy += llvm::formatv(
        " x pipeline {0} ({1}{2})", p.parallel.pipeline,
        plan::stringify(p.parallel.schedule),
        p.parallel.schedule == plan::PipelineSchedule::Interleaved
            ? llvm::formatv("({0})", p.parallel.virtualStages).str()
            : std::string());
  os << llvm::formatv(
      "{0}: {1} ({2} parameters), {3} node(s) x {4} {5}, {6}, {7}; "
      "global batch {8} x {9} tokens\n",
      p.name, m.preset.empty() ? plan::stringify(m.family).str() : m.preset,
      plan::rt::support::withThousands(plan::countParams(m)), c.nodes,
      c.gpusPerNode, c.device.name, strategy, plan::stringify(t.precision),
      globalBatch, t.seqLen);
  if (const std::optional<plan::LoraSpec> &lora = p.lora) {
    plan::ParamCounts counts = plan::countParams(
        plan::enumerateUnits(m, *lora, plan::workingStorage(t.precision)));
    os << llvm::formatv(
        "  LoRA rank {0}, alpha {1} on {2}: {3} trainable parameters of {4} "
        "({5:f2}%); frozen base in {6}: {7}\n",
        lora->rank, plan::formatF64(lora->alpha),
        llvm::join(lora->targets, ", "),
        plan::rt::support::withThousands(counts.trainable),
        plan::rt::support::withThousands(counts.total),
        100.0 * static_cast<double>(counts.trainable) /
            static_cast<double>(counts.total),
        plan::stringify(*lora->base),
        plan::rt::support::formatBytes(counts.frozenBytes));
  }
}

/// Opens `path` ("-": stdout), lets `write` fill it and keeps it; a file that
/// cannot be opened or written is `planc: error: ...` and false.
static bool writeOutput(llvm::StringRef path,
                        llvm::function_ref<void(llvm::raw_ostream &)> write) {
  std::string error;
  std::unique_ptr<llvm::ToolOutputFile> output = openOutputFile(path, &error);
  if (output) {
    write(output->os());
    if (plan::keepOutput(*output, path, error))
      return true;
  }
  llvm::errs() << "planc: error: " << error << "\n";
  return false;
}

/// --emit=schedule (the file, written atomically) or --emit=schedule-json.
/// Either is validated as plan-run will validate it, so planc never hands
/// out a schedule the runtime rejects.
static int emitSchedule(ModuleOp module) {
  FailureOr<plan::rt::Schedule> schedule = plan::exportSchedule(module);
  if (failed(schedule))
    return 1;
  std::optional<plan::rt::ValidSchedule> valid;
  try {
    valid.emplace(
        plan::rt::validateSchedule(std::move(*schedule), inputFilename));
    if (emit == Emit::Schedule) {
      if (outputFilename == "-") {
        llvm::errs()
            << "planc: error: the schedule file is binary: name it with "
               "-o FILE.sched (or use --emit=schedule-json)\n";
        return 1;
      }
      plan::rt::writeScheduleFile(*valid, outputFilename);
      return 0;
    }
  } catch (const plan::rt::ScheduleFileError &e) {
    llvm::errs() << "planc: error: " << e.what() << "\n";
    return 1;
  }
  return writeOutput(outputFilename,
                     [&](llvm::raw_ostream &os) {
                       os << plan::rt::scheduleJsonText(valid->file());
                     })
             ? 0
             : 1;
}

/// The report of the plan with `extra` overrides after the command line's,
/// lowered in a context of its own whose diagnostics are dropped: the fit
/// check's alternatives. Nothing when the plan rejects the overrides.
static std::optional<plan::ScheduleReport>
reportWithOverrides(llvm::SourceMgr &sourceMgr, unsigned bufferId,
                    llvm::ArrayRef<std::string> extra) {
  MLIRContext context;
  ScopedDiagnosticHandler quiet(&context,
                                [](Diagnostic &) { return success(); });
  plan::DiagEmitter diag(
      &context, &sourceMgr,
      FileLineColLoc::get(&context, inputFilename, /*line=*/1, /*col=*/1));
  std::vector<std::string> sets(overrides.begin(), overrides.end());
  sets.insert(sets.end(), extra.begin(), extra.end());
  std::optional<plan::PlanSpec> spec = plan::loadPlan(
      sourceMgr, bufferId, sets, plan::defaultPlanName(inputFilename), diag);
  if (!spec)
    return std::nullopt;
  // A probe: like planc's own lowering, without the verifier between passes.
  std::optional<plan::LoweredPlan> lowered;
  plan::AnalysisOptions analysis{/*time=*/true, /*timeline=*/false};
  (void)plan::chooseGradDtype(*spec, diag, lowered, analysis);
  if (!lowered)
    lowered = plan::lowerPlan(*spec, diag, /*verifyEachPass=*/false, analysis);
  if (!lowered)
    return std::nullopt;
  return std::move(lowered->report);
}

/// What the fit check found: nothing when the plan fits, or the
/// alternatives, each lowered again.
struct FitCheck {
  bool fits = true;
  std::vector<plan::FitOutcome> outcomes;
};

static FitCheck checkFit(const plan::ScheduleReport &report,
                         llvm::SourceMgr &sourceMgr, unsigned bufferId) {
  FitCheck check;
  check.fits = report.memory.fits();
  if (!check.fits)
    for (plan::FitAlternative &alternative : plan::fitAlternatives(report))
      check.outcomes.push_back(
          {alternative,
           reportWithOverrides(sourceMgr, bufferId, alternative.overrides)});
  return check;
}

/// Mixed precision: the report shows what the other gradient layout
/// (grad_dtype fp32 or the working type) would peak at: from the choice
/// when planc made it, else lowered again.
static void
compareGradLayouts(plan::ScheduleReport &report, const plan::PlanSpec &spec,
                   const std::optional<plan::GradLayoutChoice> &choice,
                   llvm::SourceMgr &sourceMgr, unsigned bufferId) {
  plan::MemoryReport &memory = report.memory;
  if (memory.gradDtype.empty())
    return;
  if (choice) {
    memory.gradDtypeChosen = true;
    memory.otherGradLayout = plan::MemoryReport::GradLayout{
        plan::stringify(choice->other).str(), choice->otherPeakBytes};
    return;
  }
  llvm::StringRef other =
      memory.gradDtype == "fp32"
          ? plan::stringify(plan::workingDtype(spec.train.precision))
          : llvm::StringRef("fp32");
  std::optional<plan::ScheduleReport> lowered = reportWithOverrides(
      sourceMgr, bufferId, {("train.grad_dtype=" + other).str()});
  if (lowered)
    memory.otherGradLayout = plan::MemoryReport::GradLayout{
        other.str(), lowered->memory.devicePeakBytes()};
}

static bool isPng(llvm::StringRef path) {
  return path.ends_with_insensitive(".png");
}

/// --report, --trace and --timeline, about the plan as given: written whether
/// it fits or not. Returns false when an output cannot be opened.
static bool writeAnalyses(const plan::ScheduleReport &report,
                          const FitCheck &fit) {
  if (!traceFilename.empty() &&
      !writeOutput(traceFilename, [&](llvm::raw_ostream &os) {
        plan::writeChromeTrace(report, os);
      }))
    return false;
  if (!timelineFilename.empty()) {
    std::string picture;
    llvm::raw_string_ostream svg(picture);
    plan::writeTimelineSvg(report, svg);
    if (isPng(timelineFilename)) {
      std::string png, error;
      // Twice the SVG's size: legible on a high-density screen.
      if (!plan::renderSvgToPng(picture, 2.0, png, error)) {
        llvm::errs() << "planc: error: --timeline=" << timelineFilename << ": "
                     << error << "\n";
        return false;
      }
      picture = std::move(png);
    }
    if (!writeOutput(timelineFilename,
                     [&](llvm::raw_ostream &os) { os << picture; }))
      return false;
  }
  if (reportFormat == ReportFormat::None)
    return true;
  // With `-o FILE.sched` the file gets the schedule and stdout the report;
  // otherwise the report is what planc emits.
  bool alongside = emit == Emit::Schedule;
  return writeOutput(
      alongside ? llvm::StringRef("-") : llvm::StringRef(outputFilename),
      [&](llvm::raw_ostream &os) {
        if (reportFormat == ReportFormat::Json)
          os << llvm::formatv("{0:2}\n",
                              plan::reportToJson(report, fit.outcomes));
        else
          plan::printReportTable(report, os);
      });
}

/// Prints or writes what --emit asks for.
static int emitOutput(const plan::PlanSpec &spec, ModuleOp module) {
  if (emit == Emit::Schedule || emit == Emit::ScheduleJson)
    return emitSchedule(module);
  bool written = writeOutput(outputFilename, [&](llvm::raw_ostream &os) {
    if (emit == Emit::Summary) {
      printSummary(spec, os);
    } else if (emit == Emit::PlanResolved) {
      os << "# " << inputFilename
         << " with every value written out (planc --emit=plan-resolved): the "
            "same plan\n";
      plan::syntax::printBlock(plan::PlanBuilder::resolved(spec).toSyntax(),
                               os);
    } else {
      module.print(os);
      os << "\n";
    }
  });
  return written ? 0 : 1;
}

int main(int argc, char **argv) {
  llvm::InitLLVM y(argc, argv);
  // The lowering's own switch (passes/Pipeline.cpp), listed with planc's.
  if (cl::Option *tasks = cl::getRegisteredOptions().lookup("pipeline-tasks"))
    tasks->addCategory(plancCategory);
  cl::HideUnrelatedOptions(plancCategory);
  cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << "planc " PLAN_COMPILER_VERSION
          "\n  built with LLVM/MLIR " LLVM_VERSION_STRING "\n"
       << "  timeline formats: " << (plan::whyNoPng() ? "svg" : "svg, png")
       << "\n";
  });
  cl::ParseCommandLineOptions(
      argc, argv,
      "planc: the plan compiler\n\n"
      "Checks a .plan file and prints what it was asked to emit.\n"
      "`planc import accelerate|deepspeed CONFIG` writes a .plan from an\n"
      "Accelerate or DeepSpeed config (planc import --help).\n");
  if (plan::importCommand)
    return plan::runImport();
  // `planc model.plan -o model.sched` is how a schedule is compiled.
  if (!emit.getNumOccurrences() &&
      llvm::StringRef(outputFilename).ends_with(".sched"))
    emit.setValue(Emit::Schedule);

  // The picture's format is its file's extension: said before any work.
  if (!timelineFilename.empty()) {
    llvm::StringRef path(timelineFilename);
    if (!path.ends_with_insensitive(".svg") && !isPng(path)) {
      llvm::errs() << "planc: error: --timeline=" << path
                   << ": the file must end in .svg or .png\n";
      return 1;
    }
    if (const char *why = plan::whyNoPng(); isPng(path) && why) {
      llvm::errs() << "planc: error: --timeline=" << path << ": " << why
                   << "\n";
      return 1;
    }
  }

  bool searching = searchFormat != ReportFormat::None;
  if (!searching &&
      (searchOut.getNumOccurrences() || searchTop.getNumOccurrences() ||
       searchTokens.getNumOccurrences() || searchExhaustive)) {
    llvm::errs() << "planc: error: --search-out, --search-top, "
                    "--search-tokens and --search-exhaustive go with "
                    "--search\n";
    return 1;
  }
  if (searching &&
      (emit.getNumOccurrences() || reportFormat.getNumOccurrences() ||
       !traceFilename.empty() || !timelineFilename.empty() ||
       allowOversubscribe)) {
    llvm::errs() << "planc: error: --search prints its own table; compile "
                    "the plan it writes (--search-out) for --emit, --report, "
                    "--trace or --timeline\n";
    return 1;
  }
  if (searching && searchTop == 0) {
    llvm::errs() << "planc: error: --search-top=0: show at least one\n";
    return 1;
  }
  if (searching && searchTokens < 0) {
    llvm::errs() << "planc: error: --search-tokens=" << searchTokens
                 << ": must be positive\n";
    return 1;
  }

  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input =
      plan::openInput(inputFilename, error);
  if (!input) {
    llvm::errs() << "planc: error: " << error << "\n";
    return 1;
  }

  MLIRContext context;
  llvm::SourceMgr sourceMgr;
  unsigned bufferId = sourceMgr.AddNewSourceBuffer(std::move(input), SMLoc());
  plan::DiagnosticPrinter handler(sourceMgr, &context, errorLimit, "planc");
  plan::DiagEmitter diag(
      &context, &sourceMgr,
      FileLineColLoc::get(&context, inputFilename, /*line=*/1, /*col=*/1));

  if (searching) {
    plan::SearchRequest request;
    request.inputFilename = inputFilename;
    request.overrides.assign(overrides.begin(), overrides.end());
    request.json = searchFormat == ReportFormat::Json;
    request.top = searchTop;
    request.tokens = searchTokens;
    request.exhaustive = searchExhaustive;
    request.outputFilename = outputFilename;
    request.planOut = searchOut;
    return plan::runSearch(request, sourceMgr, bufferId, diag);
  }

  std::optional<plan::PlanSpec> spec =
      plan::loadPlan(sourceMgr, bufferId, overrides,
                     plan::defaultPlanName(inputFilename), diag);
  if (!spec)
    return 1;
  // Checking alone does not lower the plan; everything else shows the
  // gradient layout of least peak when the plan leaves it open.
  bool lowers = emit == Emit::Sched || emit == Emit::Schedule ||
                emit == Emit::ScheduleJson ||
                reportFormat != ReportFormat::None || !traceFilename.empty() ||
                !timelineFilename.empty();
  std::optional<plan::GradLayoutChoice> gradChoice;
  // The chosen layout's lowering, when the choice was made: kept rather
  // than lowered again.
  std::optional<plan::LoweredPlan> lowered;
  // planc exits right after: the lowering's memory goes back with the
  // process, sooner than taking a whole step's ops apart one by one (as
  // clang's -disable-free).
  llvm::scope_exit keep([&lowered] {
    if (lowered)
      (void)lowered->module.release();
  });
  // The timeline's slices only for the files that draw it.
  plan::AnalysisOptions analysis{/*time=*/true,
                                 /*timeline=*/!traceFilename.empty() ||
                                     !timelineFilename.empty()};
  // Lowered without the verifier between passes (plan-opt --verify-each
  // has it), then verified once.
  if (emit != Emit::Summary || lowers)
    gradChoice = plan::chooseGradDtype(*spec, diag, lowered, analysis,
                                       /*verifyLowered=*/lowers);
  if (lowers) {
    if (!lowered)
      lowered = plan::lowerPlan(*spec, diag, /*verifyEachPass=*/false, analysis,
                                /*verifyLowered=*/true);
    if (!lowered)
      return 1;
    ModuleOp module = *lowered->module;
    plan::ScheduleReport *report = &lowered->report;
    if (reportFormat != ReportFormat::None)
      compareGradLayouts(*report, *spec, gradChoice, sourceMgr, bufferId);
    FitCheck fit = checkFit(*report, sourceMgr, bufferId);
    if (!writeAnalyses(*report, fit))
      return 1;
    // The report is what planc emits, except next to the schedule file.
    // Otherwise what was asked is emitted first, then the fit failure: the
    // schedule is what a user wants to see when the plan does not fit. The
    // schedule file, with which plan-run would run out of memory, is
    // written then only when asked for anyway.
    bool reportIsOutput =
        reportFormat != ReportFormat::None && emit != Emit::Schedule;
    bool written = reportIsOutput || emit != Emit::Schedule || fit.fits ||
                   allowOversubscribe;
    if (!reportIsOutput && written)
      if (int code = emitOutput(*spec, module))
        return code;
    if (fit.fits)
      return 0;
    plan::printFitFailure(*report, fit.outcomes, llvm::errs());
    if (!written)
      llvm::errs() << "planc: note: " << outputFilename
                   << " was not written; --allow-oversubscribe writes it "
                      "anyway\n";
    return 2;
  }
  OwningOpRef<ModuleOp> module = plan::importPlan(*spec, diag);
  if (!module)
    return 1;
  return emitOutput(*spec, *module);
}
