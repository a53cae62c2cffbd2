//===- Import.h - A .plan from an Accelerate or DeepSpeed config -*- C++
//-*-===//
//
// `planc import accelerate config.yaml` and `planc import deepspeed ds.json`:
// the plan a user's existing config describes. Every key of the config maps
// to a plan key, whose line in the plan says where it came from, or is listed
// at the end of the plan with what it means here ("no effect: ...", "not
// supported: ..."); nothing is dropped without a word. What the config leaves
// to the training script (the model, the device, the sequence length) comes
// from the options, or from a default that the plan names. docs/importing.md
// has the whole mapping.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_FRONTEND_IMPORT_H
#define PLAN_FRONTEND_IMPORT_H

#include "frontend/Diagnostics.h"

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>

namespace llvm {
class SourceMgr;
} // namespace llvm

namespace plan {

enum class ImportSource { Accelerate, DeepSpeed };

/// What the training script and the launcher know and a config does not;
/// each given option wins over the config (and over DeepSpeed's "auto").
struct ImportOptions {
  /// A preset name, or the path of an HF config.json or of its directory.
  std::string model;
  std::string gpu; // a device of the table; "" to take the default
  std::optional<int64_t> nodes, gpusPerNode;
  std::optional<int64_t> microBatch, seqLen, gradAccum;
  std::optional<double> lr;
  std::string hostMemory; // as the plan writes a size ("512GiB"); "" default
  /// The directory the plan is written to: an HF config path in the plan is
  /// relative to it when the config lies below it, else absolute.
  std::string planDir;
};

/// Reads the config at `path` and returns the text of the plan it describes.
/// A file that cannot be read, or a bad option, is one line in `error`;
/// everything about the config's contents is `file:line:col:` through
/// `diag` (warnings for keys it does not know or cannot honour). Returns
/// nothing after an error.
std::optional<std::string> importConfig(llvm::SourceMgr &sourceMgr,
                                        DiagEmitter &diag, ImportSource source,
                                        llvm::StringRef path,
                                        const ImportOptions &options,
                                        std::string &error);

} // namespace plan

#endif // PLAN_FRONTEND_IMPORT_H
