//===- bench_lower.cpp - Cost of --plan-lower as the cluster grows --------===//
//
// Lowers the plan of Llama-3.1-405B (126 layers) trained with full_shard in
// bf16_mixed on 1, 64, 1024 and 16,384 ranks and prints, per rank count, the
// wall time of the whole lowering pipeline (median of several runs), the heap
// it allocates and the peak RSS it adds, the ops in the lowered module and
// the size of its printed IR. The program is SPMD, so everything but the
// mesh shape must stay flat as ranks grow; the target at 16,384 ranks is
// under 0.2 s and 200 MB. With --micro-batches it lowers instead the 3-D plan
// of examples/llama3_405b_3d.plan (tensor 8 x pipeline 8 interleaved x FSDP
// 16 on 1024 ranks) with each number of micro-batches: the cost that grew
// with them while a pipeline's micro-batches were unrolled, as
// --pipeline-tasks=false still does (target: < 0.5 s at 256). With --grad-accum
// it lowers the full_shard plan on 64 ranks with each number of micro-batches
// of gradient accumulation, which sched-roll-micro-batches keeps flat, and
// prints the bytes of its schedule file too, which holds the repeat once
// (format 11's tasks): flat as well. docs/sched.md ("Performance") says how to
// run it.
//
//===----------------------------------------------------------------------===//

#include "ScheduleFile.h"
#include "export/ExportSchedule.h"
#include "frontend/Frontend.h"
#include "passes/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <malloc.h>
#include <sys/resource.h>

namespace cl = llvm::cl;

static cl::list<int64_t> rankCounts("ranks", cl::desc("Rank counts to lower"),
                                    cl::CommaSeparated);
static cl::opt<unsigned>
    runs("runs", cl::desc("Timed lowerings per rank count"), cl::init(5));
static cl::list<int64_t> gradAccums(
    "grad-accum",
    cl::desc("Lower the full_shard plan on 64 ranks with these numbers of "
             "micro-batches (grad_accum) instead"),
    cl::CommaSeparated);
static cl::list<int64_t> microBatchCounts(
    "micro-batches",
    cl::desc("Lower the 3-D plan (TP 8 x PP 8 x FSDP 16) with these "
             "numbers of micro-batches instead"),
    cl::CommaSeparated);

namespace {

/// The .plan text of the benchmark plan on `ranks` ranks: whole nodes of 8
/// GPUs, or one node with fewer. full_shard shards over all of them (mesh
/// (1, ranks)).
std::string planText(int64_t ranks, int64_t gradAccum = 1) {
  int64_t gpusPerNode = std::min<int64_t>(ranks, 8);
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "model = llama3_405b\n"
     << "cluster {\n"
     << "  nodes = " << ranks / gpusPerNode << "\n"
     << "  gpus_per_node = " << gpusPerNode << "\n"
     << "  gpu = h100_sxm\n"
     << "  host_memory = 2TiB\n"
     << "}\n"
     << "train {\n"
     << "  optimizer = adamw(lr = 8e-5, betas = (0.9, 0.95), "
        "weight_decay = 0.1)\n"
     << "  micro_batch = 1\n"
     << "  seq_len = 8192\n"
     << "  precision = bf16_mixed\n"
     << "  activation_checkpointing = full\n"
     << "  grad_clip = 1.0\n"
     << "  grad_accum = " << gradAccum << "\n"
     << "}\n"
     << "parallel {\n"
     << "  sharding = full_shard\n"
     << "}\n";
  return text;
}

/// examples/llama3_405b_3d.plan with `microBatches` micro-batches a step
/// (one sequence each on every one of the 16 data-parallel ranks).
std::string planText3d(int64_t microBatches) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "model = llama3_405b\n"
     << "cluster {\n  nodes = 128\n  gpus_per_node = 8\n  gpu = h100_sxm\n"
     << "  host_memory = 2TiB\n  inter_node_bandwidth = 3200Gb/s\n}\n"
     << "train {\n"
     << "  optimizer = adamw(lr = 8e-5, betas = (0.9, 0.95), "
        "weight_decay = 0.1)\n"
     << "  micro_batch = 1\n  seq_len = 8192\n"
     << "  global_batch = " << 16 * microBatches << "\n"
     << "  precision = bf16_mixed\n  activation_checkpointing = full\n"
     << "  grad_clip = 1.0\n}\n"
     << "parallel {\n  tensor = 8\n  sequence_parallel = true\n"
     << "  pipeline = 8\n  schedule = interleaved(2)\n"
     << "  sharding = full_shard\n}\n";
  return text;
}

/// Bytes the heap holds now (small blocks and mmapped ones).
int64_t heapBytes() {
  struct mallinfo2 info = mallinfo2();
  return static_cast<int64_t>(info.uordblks + info.hblkhd);
}

/// Peak resident set of the process so far, in bytes.
int64_t peakRss() {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;
}

/// Counts what is printed to it, so the IR's size is known without
/// holding it.
class ByteCounter : public llvm::raw_ostream {
public:
  int64_t bytes = 0;

private:
  void write_impl(const char *, size_t size) override { bytes += size; }
  uint64_t current_pos() const override { return bytes; }
};

struct Measurement {
  double seconds = 0;
  int64_t heap = 0; // allocated by the lowering and still held by the module
  int64_t ops = 0;
  int64_t printedBytes = 0;
  int64_t fileBytes = 0; // of the schedule file, when asked for
};

/// Loads and imports the plan `text`; null after printing the
/// diagnostics.
mlir::OwningOpRef<mlir::ModuleOp>
importPlan(mlir::MLIRContext &context, const std::string &text, int64_t ranks) {
  llvm::SourceMgr sourceMgr;
  unsigned id = sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(text, "bench.plan"), llvm::SMLoc());
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  plan::DiagEmitter diag(
      &context, &sourceMgr,
      mlir::FileLineColLoc::get(&context, "bench.plan", 1, 1));
  std::optional<plan::PlanSpec> spec =
      plan::loadPlan(sourceMgr, id, /*overrides=*/{},
                     ("llama3_405b_" + llvm::Twine(ranks)).str(), diag);
  if (!spec)
    return nullptr;
  return plan::importPlan(*spec, diag);
}

/// Lowers a fresh import of the plan `text` of `ranks` ranks once (and with
/// `file`, exports and serialises its schedule file, untimed); the first
/// error of a failing pipeline is in `error`.
std::optional<Measurement> lowerOnce(mlir::MLIRContext &context,
                                     const std::string &text, int64_t ranks,
                                     std::string &error, bool file = false) {
  mlir::OwningOpRef<mlir::ModuleOp> module = importPlan(context, text, ranks);
  if (!module) {
    error = "the benchmark plan does not load";
    return std::nullopt;
  }
  mlir::PassManager pm(&context);
  plan::buildPlanLowerPipeline(pm);
  // As planc lowers: MLIR's structural verifier once on the result, not
  // after every pass (the pipeline's own verifier passes still run).
  pm.enableVerifier(false);

  mlir::ScopedDiagnosticHandler capture(&context, [&](mlir::Diagnostic &d) {
    if (d.getSeverity() == mlir::DiagnosticSeverity::Error && error.empty())
      error = d.str();
    return mlir::success();
  });
  Measurement m;
  int64_t heapBefore = heapBytes();
  auto start = std::chrono::steady_clock::now();
  mlir::LogicalResult result = pm.run(*module);
  if (mlir::succeeded(result))
    result = mlir::verify(*module);
  auto stop = std::chrono::steady_clock::now();
  if (mlir::failed(result)) {
    if (error.empty())
      error = "the pipeline failed without a diagnostic";
    return std::nullopt;
  }
  m.seconds = std::chrono::duration<double>(stop - start).count();
  m.heap = heapBytes() - heapBefore;
  module->walk([&](mlir::Operation *) { ++m.ops; });
  ByteCounter counter;
  module->print(counter);
  counter.flush();
  m.printedBytes = counter.bytes;
  if (file) {
    mlir::FailureOr<plan::rt::Schedule> schedule =
        plan::exportSchedule(*module);
    if (mlir::failed(schedule)) {
      if (error.empty())
        error = "the export failed without a diagnostic";
      return std::nullopt;
    }
    m.fileBytes =
        static_cast<int64_t>(plan::rt::serializeSchedule(*schedule).size());
  }
  return m;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(
      argc, argv,
      "plan-bench-lower: cost of --plan-lower for Llama-3.1-405B full_shard "
      "bf16_mixed as the number of ranks grows\n");
  std::vector<int64_t> ranksList(rankCounts.begin(), rankCounts.end());
  if (ranksList.empty())
    ranksList = {1, 64, 1024, 16384};
  for (int64_t ranks : ranksList)
    if (ranks < 1 || (ranks > 8 && ranks % 8 != 0)) {
      llvm::errs() << "plan-bench-lower: " << ranks
                   << " ranks is not whole nodes of 8 GPUs (or at most 8)\n";
      return 2;
    }
  unsigned timedRuns = std::max(1u, unsigned(runs));

  mlir::DialectRegistry registry;
  plan::registerPlanDialects(registry);
  mlir::MLIRContext context(registry);
  // One thread: the pipeline's passes are module passes, and a single
  // thread makes the timings comparable between machines.
  context.disableMultithreading();
  context.loadAllAvailableDialects();

  // A table by number of micro-batches: of the 3-D plan (target: under
  // 0.5 s at 256), or of gradient accumulation without a pipeline (lowered
  // once for its middle micro-batches: flat in their number).
  // With `file`, also the bytes of the schedule file (the 3-D plan's, which
  // unrolls its micro-batches, would take gigabytes at 256).
  auto byMicroBatches = [&](llvm::ArrayRef<int64_t> counts, const char *label,
                            auto textOf, int64_t ranks, bool file) -> int {
    llvm::outs() << llvm::formatv("{0,14} {1,10} {2,12} {3,10} {4,14}{5}\n",
                                  label, "median s", "heap MB", "ops",
                                  "IR bytes", file ? "     file bytes" : "");
    std::optional<double> at256;
    for (int64_t count : counts) {
      std::vector<double> seconds;
      Measurement last;
      for (unsigned run = 0; run < timedRuns; ++run) {
        std::string error;
        std::optional<Measurement> m =
            lowerOnce(context, textOf(count), ranks, error, file);
        if (!m) {
          llvm::outs().flush();
          llvm::errs() << "plan-bench-lower: lowering " << count
                       << " micro-batches failed: " << error << "\n";
          return 1;
        }
        seconds.push_back(m->seconds);
        last = *m;
      }
      std::sort(seconds.begin(), seconds.end());
      double median = seconds[seconds.size() / 2];
      if (count == 256)
        at256 = median;
      llvm::outs() << llvm::formatv("{0,14} {1,10:F4} {2,12:F1} {3,10} {4,14}",
                                    count, median, double(last.heap) / 1e6,
                                    last.ops, last.printedBytes);
      if (file)
        llvm::outs() << llvm::formatv(" {0,14}", last.fileBytes);
      llvm::outs() << "\n";
    }
    if (at256 && ranks == 1024)
      llvm::outs() << "target at 256 micro-batches (< 0.5 s): "
                   << (*at256 < 0.5 ? "met" : "NOT met") << "\n";
    return 0;
  };
  if (!microBatchCounts.empty())
    return byMicroBatches(
        std::vector<int64_t>(microBatchCounts.begin(), microBatchCounts.end()),
        "micro-batches", [](int64_t n) { return planText3d(n); }, 1024,
        /*file=*/false);
  if (!gradAccums.empty())
    return byMicroBatches(
        std::vector<int64_t>(gradAccums.begin(), gradAccums.end()),
        "grad_accum", [](int64_t n) { return planText(64, n); }, 64,
        /*file=*/true);

  llvm::outs() << llvm::formatv("{0,8} {1,10} {2,12} {3,14} {4,8} {5,12}\n",
                                "ranks", "median s", "heap MB", "peak RSS +MB",
                                "ops", "IR bytes");
  bool metTarget = true;
  for (int64_t ranks : ranksList) {
    int64_t rssBefore = peakRss();
    std::vector<double> seconds;
    Measurement last;
    for (unsigned run = 0; run < timedRuns; ++run) {
      std::string error;
      std::optional<Measurement> m =
          lowerOnce(context, planText(ranks), ranks, error);
      if (!m) {
        llvm::outs().flush();
        llvm::errs() << "plan-bench-lower: lowering " << ranks
                     << " ranks failed: " << error << "\n";
        return 1;
      }
      seconds.push_back(m->seconds);
      last = *m;
    }
    std::sort(seconds.begin(), seconds.end());
    double median = seconds[seconds.size() / 2];
    double heapMB = double(last.heap) / 1e6;
    double rssMB = double(peakRss() - rssBefore) / 1e6;
    llvm::outs() << llvm::formatv(
        "{0,8} {1,10:F4} {2,12:F1} {3,14:F1} {4,8} {5,12}\n", ranks, median,
        heapMB, rssMB, last.ops, last.printedBytes);
    if (ranks == 16384 && (median >= 0.2 || heapMB >= 200 || rssMB >= 200))
      metTarget = false;
  }
  if (llvm::is_contained(ranksList, 16384))
    llvm::outs() << "target at 16384 ranks (< 0.2 s, < 200 MB): "
                 << (metTarget ? "met" : "NOT met") << "\n";
  return 0;
}
