//===- ConfigDocument.h - Users' YAML and JSON configs, located -*- C++ -*-===//
//
// The files users bring from other tools (an Accelerate YAML, a DeepSpeed
// JSON, an HF config.json) read into one tree that keeps where every key and
// value is written. The file's text is a buffer of the llvm::SourceMgr that
// holds the plan, so a diagnostic about a key of config.json prints
// `config.json:12:5: error: ...` with the line and a caret, exactly as one
// about a .plan key does. YAML is read with yaml-cpp, JSON with nlohmann-json.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_FRONTEND_CONFIGDOCUMENT_H
#define PLAN_FRONTEND_CONFIGDOCUMENT_H

#include "frontend/Diagnostics.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/SMLoc.h"

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace llvm {
class SourceMgr;
} // namespace llvm

namespace plan {

struct ConfigMember;

/// One value of a document. Scalars keep their text as written; the typed
/// readers interpret it the way the format does (YAML 1.2's core schema for
/// an unquoted YAML scalar, JSON's types for JSON).
struct ConfigNode {
  enum class Kind { Null, Bool, Number, String, Map, Sequence };
  Kind kind = Kind::Null;
  llvm::SMLoc loc;  // where the value starts
  std::string text; // a scalar as written; a string's contents
  bool boolean = false;
  double number = 0;
  std::optional<int64_t> integer;    // a whole number that fits in 64 bits
  std::vector<ConfigMember> members; // Map, in file order
  std::vector<ConfigNode> elements;  // Sequence

  bool isNull() const { return kind == Kind::Null; }
  bool isMap() const { return kind == Kind::Map; }
  /// The member `key` of a map, or null.
  const ConfigNode *find(llvm::StringRef key) const;
  /// How the value reads in a message: `"auto"`, `3`, `true`, `a map`.
  std::string describe() const;
};

struct ConfigMember {
  std::string key;
  llvm::SMLoc keyLoc;
  ConfigNode value;
};

enum class ConfigFormat { Yaml, Json };

/// Reads `path` into a new buffer of `sourceMgr` and parses it. A file that
/// cannot be read is one line in `fileError` (nothing is reported through
/// `diag`); a malformed document, a duplicate key or a document that is not
/// a map is `file:line:col: error:` through `diag`. Returns the root map, or
/// nothing after an error.
std::optional<ConfigNode> readConfigDocument(llvm::SourceMgr &sourceMgr,
                                             DiagEmitter &diag,
                                             llvm::StringRef path,
                                             ConfigFormat format,
                                             std::string &fileError);

/// Parses buffer `bufferId` of `sourceMgr`, as readConfigDocument does.
std::optional<ConfigNode> parseConfigDocument(llvm::SourceMgr &sourceMgr,
                                              unsigned bufferId,
                                              DiagEmitter &diag,
                                              ConfigFormat format);

/// Typed reads of a value. Each reports "'KEY' expects an integer, got
/// \"x\"" at the value and returns nothing when it is not one; a JSON or
/// quoted YAML string that spells a number is not a number. An integer
/// outside [min, max] is "'KEY' must be >= MIN, got V" at the value: a count
/// (a batch size, a number of machines) is checked where it is written,
/// before anything divides by it or writes it into a plan.
std::optional<int64_t>
readConfigInteger(const ConfigNode &value, llvm::StringRef key,
                  DiagEmitter &diag,
                  int64_t min = std::numeric_limits<int64_t>::min(),
                  int64_t max = std::numeric_limits<int64_t>::max());
std::optional<double> readConfigNumber(const ConfigNode &value,
                                       llvm::StringRef key, DiagEmitter &diag);
std::optional<bool> readConfigBool(const ConfigNode &value, llvm::StringRef key,
                                   DiagEmitter &diag);
std::optional<std::string> readConfigString(const ConfigNode &value,
                                            llvm::StringRef key,
                                            DiagEmitter &diag);

/// The format a path's extension names: .yaml / .yml is YAML, anything else
/// JSON.
ConfigFormat configFormatOf(llvm::StringRef path);

/// readConfigDocument for a file a plan names at `at`: one that cannot be
/// read is an error at `at`, "WHAT: reason" (`what`: "hf()", "device
/// file").
std::optional<ConfigNode> readNamedDocument(llvm::SourceMgr &sourceMgr,
                                            DiagEmitter &diag,
                                            llvm::StringRef path,
                                            ConfigFormat format, llvm::SMLoc at,
                                            llvm::StringRef what);

/// `path` as a plan that writes it at `at` means it: relative to the
/// directory of the file holding `at`, unless absolute or written where
/// there is no file (stdin, a --set).
std::string pathBesidePlan(const llvm::SourceMgr &sourceMgr, llvm::SMLoc at,
                           llvm::StringRef path);

} // namespace plan

#endif // PLAN_FRONTEND_CONFIGDOCUMENT_H
