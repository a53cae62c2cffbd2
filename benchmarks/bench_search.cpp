//===- bench_search.cpp - How long planc --search takes at scale ----------===//
//
// Runs the auto-planner (report/Search.h) over its whole space on the
// issue's two cases and prints, for each, the wall time (median of several
// searches), the candidates the space holds, those analyzed, the lowerings
// that took, and the winner:
//   Llama-3-70B on 1,024 H100s (128 nodes x 8), bf16, 8,192 tokens a
//   sequence, one sequence per rank: target under 1 s;
//   Llama-3.1-405B on 16,384 H200s (2,048 nodes x 8), the same recipe:
//   target under 5 s. (On H100s nothing fits 405B without tensor or
//   pipeline parallelism, which the search sees at once.)
// docs/planner.md ("Speed") says how to run it.
//
//===----------------------------------------------------------------------===//

#include "report/Report.h"
#include "report/Search.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <vector>

namespace cl = llvm::cl;

static cl::opt<unsigned> runs("runs", cl::desc("Searches per case"),
                              cl::init(3));

namespace {

struct Case {
  const char *name;
  const char *model;
  const char *gpu;
  int64_t nodes;
  /// The global batch, in sequences a rank: micro_batch x grad_accum.
  int64_t sequencesPerRank;
  double targetSeconds; // 0: none (printed for scale)
};

std::string planText(const Case &c) {
  return llvm::formatv("model = {0}\n"
                       "cluster {{ nodes = {1}  gpus_per_node = 8  gpu = {2}  "
                       "host_memory = 2TiB }\n"
                       "train {{\n"
                       "  optimizer = adamw(lr = 8e-5, betas = (0.9, 0.95), "
                       "weight_decay = 0.1)\n"
                       "  micro_batch = 1\n"
                       "  grad_accum = {3}\n"
                       "  seq_len = 8192\n"
                       "  precision = bf16_mixed\n"
                       "}\n"
                       "parallel {{ sharding = full_shard }\n",
                       c.model, c.nodes, c.gpu, c.sequencesPerRank)
      .str();
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM y(argc, argv);
  cl::ParseCommandLineOptions(argc, argv,
                              "Times planc --search on 70B and 405B plans\n");
  // 70B: Llama 3's batch of 16M tokens (2,048 sequences of 8,192), and 16
  // sequences a rank, where micro_batch x grad_accum has 5 splits.
  const Case cases[] = {
      {"llama3_70b, 1,024 x h100_sxm", "llama3_70b", "h100_sxm", 128, 2, 1.0},
      {"llama3_70b, 16 seq a rank", "llama3_70b", "h100_sxm", 128, 16, 0},
      {"llama3_405b, 16,384 x h200", "llama3_405b", "h200", 2048, 2, 5.0},
  };
  llvm::outs() << llvm::formatv("{0,-32}{1,10}{2,8}{3,10}{4,11}{5,9}  {6}\n",
                                "case", "median s", "space", "analyzed",
                                "lowerings", "target", "winner");
  bool allMet = true;
  for (const Case &c : cases) {
    std::vector<double> seconds;
    plan::SearchResult last;
    for (unsigned i = 0; i < runs; ++i) {
      mlir::MLIRContext context;
      llvm::SourceMgr sourceMgr;
      unsigned id = sourceMgr.AddNewSourceBuffer(
          llvm::MemoryBuffer::getMemBufferCopy(planText(c), "bench.plan"),
          llvm::SMLoc());
      mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context);
      plan::DiagEmitter diag(&context, &sourceMgr,
                             mlir::UnknownLoc::get(&context));
      std::optional<plan::SearchResult> result = plan::searchPlan(
          sourceMgr, id, {}, "bench", plan::SearchOptions{}, diag);
      if (!result) {
        llvm::errs() << "bench_search: the " << c.name
                     << " plan does not load\n";
        return 1;
      }
      seconds.push_back(result->stats.seconds);
      last = std::move(*result);
    }
    std::sort(seconds.begin(), seconds.end());
    double median = seconds[seconds.size() / 2];
    bool met = c.targetSeconds == 0 || median < c.targetSeconds;
    allMet &= met;
    std::string winner = "nothing fits";
    if (!last.best.empty()) {
      const plan::SearchCandidate &w = last.best.front();
      winner = llvm::formatv("{0}, offload {1}, ckpt {2}: {3}, {4:f0} tok/s",
                             w.knobs.shardingText(), w.knobs.offloadText(),
                             plan::stringify(w.knobs.checkpointing),
                             plan::formatSeconds(w.metrics.stepSeconds),
                             w.metrics.tokensPerSecond)
                   .str();
    }
    llvm::outs() << llvm::formatv(
        "{0,-32}{1,10:f3}{2,8}{3,10}{4,11}{5,9}  {6}\n", c.name, median,
        last.stats.spaceSize, last.stats.evaluated, last.stats.lowerings,
        c.targetSeconds == 0
            ? std::string("-")
            : llvm::formatv("< {0} s{1}", c.targetSeconds, met ? "" : "!")
                  .str(),
        winner);
  }
  llvm::outs() << (allMet ? "every target met\n"
                          : "a target was missed (marked !)\n");
  return 0;
}
