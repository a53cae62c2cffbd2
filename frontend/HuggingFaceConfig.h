//===- HuggingFaceConfig.h - A model from an HF config.json -----*- C++ -*-===//
//
// `model = hf("path/to/config.json")` (or a directory holding one): any
// Llama-, Mistral-, GPT-2- or BERT-family config the runtime computes
// exactly, read with the defaults of transformers' config classes. A config
// whose architecture or options the runtime does not implement (another
// model_type, a rope scaling other than Llama 3's, attention biases, ...) is
// an error at the key that says so, never a different model.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_FRONTEND_HUGGINGFACECONFIG_H
#define PLAN_FRONTEND_HUGGINGFACECONFIG_H

#include "frontend/Diagnostics.h"
#include "frontend/PlanSpec.h"

#include "llvm/ADT/StringMap.h"

#include <optional>
#include <string>

namespace llvm {
class SourceMgr;
} // namespace llvm

namespace plan {

struct HuggingFaceModel {
  ModelSpec spec;
  /// Where config.json gives each model key ("model.hidden" -> its
  /// `hidden_size`), so that a check of the plan points into config.json.
  llvm::StringMap<llvm::SMLoc> keyLocs;
  std::string path; // the config.json read
};

/// Reads `path` (a config.json, or a directory with one; a relative path is
/// taken from the directory of the file `at` is in) into a model. A file
/// that cannot be read is reported at `at`; everything else at config.json's
/// keys.
std::optional<HuggingFaceModel> readHuggingFaceModel(llvm::SourceMgr &sourceMgr,
                                                     DiagEmitter &diag,
                                                     llvm::StringRef path,
                                                     llvm::SMLoc at);

/// The config.json a path names: `path` itself, or `path/config.json` for a
/// directory; relative to `baseDir` unless absolute or `baseDir` is empty.
std::string huggingFaceConfigPath(llvm::StringRef path,
                                  llvm::StringRef baseDir);

} // namespace plan

#endif // PLAN_FRONTEND_HUGGINGFACECONFIG_H
