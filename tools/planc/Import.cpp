//===- Import.cpp - planc import: a .plan from a user's config ------------===//
//
//   planc import accelerate config.yaml --model llama3_8b -o job.plan
//   planc import deepspeed ds_config.json --model path/to/hf --gpu a100_80g
//
// The plan is written to -o (stdout by default); the config's problems are
// `file:line:col:` diagnostics on stderr. docs/importing.md.
//
//===----------------------------------------------------------------------===//

#include "Import.h"

#include "frontend/Diagnostics.h"
#include "frontend/Frontend.h"
#include "frontend/Import.h"
#include "frontend/PlanSpec.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

namespace cl = llvm::cl;

cl::SubCommand plan::importCommand(
    "import", "Write a .plan from an Accelerate config (YAML or JSON) or a "
              "DeepSpeed config (JSON)");

namespace {

cl::OptionCategory importCategory("planc import options");

cl::list<std::string> arguments(cl::Positional, cl::OneOrMore,
                                cl::desc("accelerate|deepspeed <config>"),
                                cl::sub(plan::importCommand),
                                cl::cat(importCategory));
cl::opt<std::string>
    model("model",
          cl::desc("The model: a preset (llama3_8b, ...) or the path of an HF "
                   "config.json or of its directory (required)"),
          cl::value_desc("preset|path"), cl::sub(plan::importCommand),
          cl::cat(importCategory));
cl::opt<std::string> gpu("gpu",
                         cl::desc("The device (default h100_sxm, or cpu "
                                  "with Accelerate's use_cpu)"),
                         cl::value_desc("name"), cl::sub(plan::importCommand),
                         cl::cat(importCategory));
cl::opt<int64_t> nodes("nodes", cl::desc("Machines, over the config's"),
                       cl::value_desc("N"), cl::sub(plan::importCommand),
                       cl::cat(importCategory));
cl::opt<int64_t> gpusPerNode(
    "gpus-per-node", cl::desc("Processes per machine, over the config's"),
    cl::value_desc("N"), cl::sub(plan::importCommand), cl::cat(importCategory));
cl::opt<int64_t> microBatch("micro-batch",
                            cl::desc("Sequences per rank per micro-batch "
                                     "(default: the config's, else 8)"),
                            cl::value_desc("N"), cl::sub(plan::importCommand),
                            cl::cat(importCategory));
cl::opt<int64_t> seqLen(
    "seq-len", cl::desc("Tokens per sequence (default min(1024, max_seq_len))"),
    cl::value_desc("N"), cl::sub(plan::importCommand), cl::cat(importCategory));
cl::opt<int64_t> gradAccum("grad-accum",
                           cl::desc("Micro-batches per step, over the "
                                    "config's"),
                           cl::value_desc("N"), cl::sub(plan::importCommand),
                           cl::cat(importCategory));
cl::opt<double> lr("lr",
                   cl::desc("Learning rate (default: the config's, else "
                            "5e-5)"),
                   cl::sub(plan::importCommand), cl::cat(importCategory));
cl::opt<std::string> hostMemory("host-memory",
                                cl::desc("CPU memory per machine, e.g. "
                                         "512GiB (the default)"),
                                cl::value_desc("size"),
                                cl::sub(plan::importCommand),
                                cl::cat(importCategory));
cl::opt<std::string> output("o", cl::desc("Where to write the plan"),
                            cl::value_desc("file.plan"), cl::init("-"),
                            cl::sub(plan::importCommand),
                            cl::cat(importCategory));

/// A count option: at least 1 when given, and no more than a plan takes
/// (so that the world size and the batch's products fit in 64 bits).
bool positive(const cl::opt<int64_t> &option, const char *name,
              std::optional<int64_t> &into) {
  if (!option.getNumOccurrences())
    return true;
  if (option < 1) {
    llvm::errs() << "planc: error: --" << name << " must be at least 1, got "
                 << option << "\n";
    return false;
  }
  if (option > plan::kMaxCount) {
    llvm::errs() << "planc: error: --" << name << " must be at most "
                 << plan::kMaxCount << ", got " << option << "\n";
    return false;
  }
  into = option;
  return true;
}

} // namespace

int plan::runImport() {
  if (arguments.size() != 2 ||
      (arguments[0] != "accelerate" && arguments[0] != "deepspeed")) {
    llvm::errs() << "planc: error: usage: planc import accelerate|deepspeed "
                    "CONFIG --model PRESET|PATH [-o FILE.plan]\n";
    return 1;
  }
  ImportSource source = arguments[0] == "accelerate" ? ImportSource::Accelerate
                                                     : ImportSource::DeepSpeed;
  ImportOptions options;
  options.model = model;
  options.gpu = gpu;
  options.hostMemory = hostMemory;
  // A size as a plan writes it, checked here rather than in the plan.
  if (!hostMemory.empty() &&
      !llvm::Regex("^[0-9]+(\\.[0-9]+)?(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)$")
           .match(hostMemory)) {
    llvm::errs() << "planc: error: --host-memory expects a size such as "
                    "512GiB or 1TB, got '"
                 << hostMemory << "'\n";
    return 1;
  }
  if (lr.getNumOccurrences()) {
    if (!(lr > 0)) {
      llvm::errs() << "planc: error: --lr must be > 0, got " << lr << "\n";
      return 1;
    }
    options.lr = lr;
  }
  if (!positive(nodes, "nodes", options.nodes) ||
      !positive(gpusPerNode, "gpus-per-node", options.gpusPerNode) ||
      !positive(microBatch, "micro-batch", options.microBatch) ||
      !positive(seqLen, "seq-len", options.seqLen) ||
      !positive(gradAccum, "grad-accum", options.gradAccum))
    return 1;
  llvm::StringRef planDir =
      output == "-" ? "" : llvm::sys::path::parent_path(output);
  options.planDir = planDir.empty() ? std::string(".") : planDir.str();

  mlir::MLIRContext context;
  llvm::SourceMgr sourceMgr;
  DiagnosticPrinter printer(sourceMgr, &context,
                            DiagnosticPrinter::kDefaultErrorLimit, "planc");
  DiagEmitter diag(&context, &sourceMgr,
                   mlir::FileLineColLoc::get(&context, arguments[1], 1, 1));
  std::string error;
  std::optional<std::string> text =
      importConfig(sourceMgr, diag, source, arguments[1], options, error);
  if (!text) {
    if (!error.empty())
      llvm::errs() << "planc: error: " << error << "\n";
    return 1;
  }
  std::unique_ptr<llvm::ToolOutputFile> file =
      mlir::openOutputFile(output, &error);
  if (file) {
    file->os() << *text;
    if (keepOutput(*file, output, error))
      return 0;
  }
  llvm::errs() << "planc: error: " << error << "\n";
  return 1;
}
