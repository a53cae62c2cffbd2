//===- Search.cpp - planc --search: the auto-planner's driver -------------===//
//
//   planc job.plan --search                    the best 5, why the first won
//   planc job.plan --search=json               the same as one JSON object
//   planc job.plan --search --search-out best.plan   the winner as a .plan
//   planc job.plan --search --search-tokens 4194304  another global batch
//
// docs/planner.md.
//
//===----------------------------------------------------------------------===//

#include "Search.h"

#include "frontend/Frontend.h"
#include "frontend/PlanEdit.h"
#include "report/Report.h"
#include "report/Search.h"

#include "Format.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;

namespace {

bool writeText(llvm::StringRef path, llvm::StringRef text) {
  std::string error;
  std::unique_ptr<llvm::ToolOutputFile> output = openOutputFile(path, &error);
  if (output) {
    output->os() << text;
    if (plan::keepOutput(*output, path, error))
      return true;
  }
  llvm::errs() << "planc: error: " << error << "\n";
  return false;
}

/// The settings that turn the file into the winner: the command line's
/// `--set`s, then the search's changes, one per key (the last wins).
std::vector<std::string> settingsFor(llvm::ArrayRef<std::string> overrides,
                                     llvm::ArrayRef<std::string> changes) {
  std::vector<std::pair<std::string, std::string>> byKey;
  for (llvm::ArrayRef<std::string> list : {overrides, changes})
    for (const std::string &setting : list) {
      auto [key, value] = llvm::StringRef(setting).split('=');
      auto it = llvm::find_if(
          byKey, [&](const auto &kv) { return kv.first == key.trim(); });
      if (it == byKey.end())
        byKey.push_back({key.trim().str(), value.trim().str()});
      else
        it->second = value.trim().str();
    }
  std::vector<std::string> settings;
  for (const auto &[key, value] : byKey)
    settings.push_back(key + "=" + value);
  return settings;
}

/// The winner as the user's file with its changed keys, checked to load
/// back to the winner.
bool writeWinner(const plan::SearchRequest &request,
                 const plan::SearchResult &result, llvm::SourceMgr &sourceMgr,
                 unsigned bufferId, plan::DiagEmitter &diag) {
  const plan::SearchCandidate &winner = result.best.front();
  const std::vector<std::string> &changes = winner.changes;
  std::vector<std::string> settings = settingsFor(request.overrides, changes);
  std::optional<std::string> text =
      plan::editPlanText(sourceMgr, bufferId, settings, diag);
  if (!text)
    return false;
  std::string header = llvm::formatv(
      "# planc --search: the fastest of {0} candidates that keep the global "
      "batch of {1} sequences\n# and fit: {2} per step, {3:f0} tokens/s, "
      "{4} per rank. Changed from {5}:\n#   {6}\n",
      result.stats.spaceSize, result.globalBatch,
      plan::formatSeconds(winner.metrics.stepSeconds),
      winner.metrics.tokensPerSecond,
      plan::rt::support::formatBytes(winner.metrics.deviceNeedBytes),
      request.inputFilename,
      changes.empty() ? std::string("nothing: the plan is already the best")
                      : llvm::join(changes, "  "));
  *text = header + *text;

  // What is written must compile to the winner, read from where it is
  // written: a relative path in it (a device file, hf()) is taken from the
  // output's directory.
  {
    MLIRContext context;
    ScopedDiagnosticHandler quiet(&context,
                                  [](Diagnostic &) { return success(); });
    auto loadAs = [&](llvm::StringRef identifier) {
      llvm::SourceMgr written;
      written.AddNewSourceBuffer(
          llvm::MemoryBuffer::getMemBufferCopy(*text, identifier),
          llvm::SMLoc());
      plan::DiagEmitter quietDiag(&context, &written,
                                  UnknownLoc::get(&context));
      return plan::loadPlan(written, 1, {},
                            plan::defaultPlanName(request.inputFilename),
                            quietDiag);
    };
    std::optional<plan::PlanSpec> back = loadAs(request.planOut);
    if (!back &&
        loadAs(sourceMgr.getMemoryBuffer(bufferId)->getBufferIdentifier())) {
      llvm::errs() << "planc: error: --search-out=" << request.planOut
                   << ": the plan names a file by a path relative to its own "
                      "directory (cluster.gpu or hf()), which does not "
                      "resolve from the output's directory; write the winner "
                      "beside "
                   << request.inputFilename
                   << ", or name that file by an absolute path\n";
      return false;
    }
    plan::SearchKnobs expected = winner.knobs;
    if (!back || plan::SearchKnobs::of(*back) != expected) {
      llvm::errs() << "planc: error: --search-out=" << request.planOut
                   << ": the edited plan does not compile to the winner "
                      "(a planc bug); the winner is: planc "
                   << request.inputFilename;
      for (const std::string &setting : settings)
        llvm::errs() << " --set " << setting;
      llvm::errs() << "\n";
      return false;
    }
  }
  return writeText(request.planOut, *text);
}

} // namespace

int plan::runSearch(const SearchRequest &request, llvm::SourceMgr &sourceMgr,
                    unsigned bufferId, DiagEmitter &diag) {
  SearchOptions options;
  options.top = request.top;
  options.exhaustive = request.exhaustive;
  if (request.tokens) {
    // The sequence length is the plan's: load it once to divide.
    std::optional<PlanSpec> spec =
        loadPlan(sourceMgr, bufferId, request.overrides,
                 defaultPlanName(request.inputFilename), diag);
    if (!spec)
      return 1;
    if (request.tokens % spec->train.seqLen != 0) {
      int64_t below = request.tokens / spec->train.seqLen;
      llvm::errs() << llvm::formatv(
          "planc: error: --search-tokens={0} is not a whole number of "
          "sequences of {1} tokens; the nearest that are: {2} or {3}\n",
          request.tokens, spec->train.seqLen, below * spec->train.seqLen,
          (below + 1) * spec->train.seqLen);
      return 1;
    }
    options.globalBatch = request.tokens / spec->train.seqLen;
  }
  std::optional<SearchResult> result =
      searchPlan(sourceMgr, bufferId, request.overrides,
                 defaultPlanName(request.inputFilename), options, diag);
  if (!result)
    return 1;
  std::string text;
  llvm::raw_string_ostream os(text);
  if (request.json)
    os << llvm::formatv("{0:2}\n", searchToJson(*result));
  else
    printSearchTable(*result, os);
  if (!writeText(request.outputFilename, text))
    return 1;
  if (result->best.empty()) {
    if (!request.planOut.empty())
      llvm::errs() << "planc: note: " << request.planOut
                   << " was not written: no candidate fits\n";
    return 2;
  }
  if (!request.planOut.empty() &&
      !writeWinner(request, *result, sourceMgr, bufferId, diag))
    return 1;
  return 0;
}
