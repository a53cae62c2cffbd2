//===- ImportedPlan.h - What planc import's readers share -------*- C++ -*-===//
//
// The plan being written (each key with where it came from), the walk over a
// config's keys that lets none pass unread, and what the Accelerate and
// DeepSpeed readers know between them (an Accelerate config that delegates to
// DeepSpeed fills DeepSpeed's "auto" values).
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_FRONTEND_IMPORTEDPLAN_H
#define PLAN_FRONTEND_IMPORTEDPLAN_H

#include "frontend/ConfigDocument.h"
#include "frontend/Import.h"
#include "frontend/PlanSpec.h"

#include "llvm/ADT/ArrayRef.h"

#include <functional>
#include <string>
#include <vector>

namespace plan::import {

/// The plan text, key by key. `set` keeps the order keys are first set in
/// within each section; sections come in the language's order.
class PlanWriter {
public:
  /// Sets `key` (a dotted plan path, "train.grad_accum") to `value` (plan
  /// syntax), `from` saying which source key or option gave it.
  void set(llvm::StringRef key, std::string value, std::string from);
  /// The value `key` was set to, or null.
  const std::string *get(llvm::StringRef key) const;
  /// A source key that sets no plan key, and what it means here.
  void explain(std::string source, std::string meaning);
  void headerLine(std::string line) { header.push_back(std::move(line)); }
  std::string render() const;

private:
  struct Line {
    std::string key, value, from;
  };
  std::vector<Line> lines;
  std::vector<std::pair<std::string, std::string>> explained;
  std::vector<std::string> header;
};

/// One key a reader knows, and what it does with the key's value.
struct KeyHandler {
  llvm::StringRef key;
  std::function<void(const ConfigMember &)> read;
  /// What the plan takes when the config leaves the key out ("DeepSpeed's
  /// default, 1000"), when that is a value of the source's own: a misspelt
  /// key then says that its intended one took the default.
  llvm::StringRef whenAbsent = "";
};

/// A number as a plan writes it: an integer without a point, anything else
/// in the fewest digits that read back the same.
std::string planNumber(double value);

/// `key: value` as a comment shows a source setting; `prefix` names the
/// map it is in ("zero_optimization.").
std::string shown(const ConfigMember &member, llvm::StringRef prefix = "");

struct ImportContext {
  ImportContext(llvm::SourceMgr &sourceMgr, DiagEmitter &diag,
                const ImportOptions &options)
      : sourceMgr(sourceMgr), diag(diag), options(options) {}

  llvm::SourceMgr &sourceMgr;
  DiagEmitter &diag;
  const ImportOptions &options;
  PlanWriter plan;
  ModelSpec model; // what --model names

  // What the Accelerate config says that DeepSpeed's "auto" takes.
  std::optional<int64_t> accelerateGradAccum;
  std::optional<double> accelerateGradClip;
  std::string acceleratePrecision; // a plan precision, "" when not given
  bool useCpu = false;

  /// The world size the config implies, when it does (Accelerate's
  /// num_machines / num_processes; DeepSpeed's train_batch_size).
  std::optional<int64_t> nodes, gpusPerNode;
  std::string nodesFrom, gpusPerNodeFrom; // the source keys, for the plan

  /// The map being read, as a prefix of its keys in the plan's comments
  /// ("zero_optimization."); set with a PrefixScope.
  std::string prefix;
  /// `key: value` of a member of the map being read.
  std::string shown(const ConfigMember &member) const {
    return import::shown(member, prefix);
  }

  /// Reads every member of `map` with its handler; a key no handler takes
  /// is a warning ("did you mean" when one is close, and the default that
  /// one takes when it is not given) and listed in the plan. Every map of a
  /// config is read through here, so that no misspelt key passes unnamed.
  void visit(const ConfigNode &map, llvm::StringRef where,
             llvm::ArrayRef<KeyHandler> handlers);
  /// The keys of a section whose verdict is the section's own (one that is
  /// off, or not supported as a whole): `keys` are its known ones, and any
  /// other is the warning visit gives. Nothing when `map` is not a map.
  void checkKeys(const ConfigNode &map, llvm::StringRef where,
                 llvm::ArrayRef<llvm::StringRef> keys);
  /// An integer that counts something (a batch size, machines, steps): at
  /// least `min` and at most the plan's kMaxCount, else an error at the
  /// value.
  std::optional<int64_t> count(const ConfigMember &member, int64_t min = 1);
  /// A key the config sets that has no counterpart, or none that can be
  /// honoured: a warning at it, and a line at the end of the plan.
  void unsupported(const ConfigMember &member, const llvm::Twine &why);
  /// A key that has no effect on the plan: a line at the end of the plan.
  void noEffect(const ConfigMember &member, const llvm::Twine &why);
  /// A handler for a key that has no effect on the plan, and why.
  std::function<void(const ConfigMember &)> noEffectBecause(std::string why);
  /// Accelerate's gradient_accumulation_steps (top level or DeepSpeed
  /// plugin): train.grad_accum, and what DeepSpeed's "auto" takes.
  void readAccelerateGradAccum(const ConfigMember &member);
  /// An error at the value: "'KEY' is X; expected one of A, B, C".
  void badValue(const ConfigMember &member, const llvm::Twine &expected);
};

/// DeepSpeed's ZeRO stage (`zero_optimization.stage`, Accelerate's
/// `zero_stage`) as the plan's sharding.
void zeroStage(ImportContext &context, const ConfigMember &stage);
/// DeepSpeed's offload device of `state` ("params" or "optimizer"); `stage`
/// is the ZeRO stage's value, when given (parameters offload at stage 3).
void offloadDevice(ImportContext &context, const ConfigMember &device,
                   llvm::StringRef state, const ConfigNode *stage);

/// Names the map being read while it lives.
class PrefixScope {
public:
  PrefixScope(ImportContext &context, std::string prefix)
      : context(context), saved(std::move(context.prefix)) {
    context.prefix = std::move(prefix);
  }
  ~PrefixScope() { context.prefix = std::move(saved); }
  PrefixScope(const PrefixScope &) = delete;
  PrefixScope &operator=(const PrefixScope &) = delete;

private:
  ImportContext &context;
  std::string saved;
};

/// The keys of an Accelerate config (`accelerate config`'s YAML, or JSON).
void importAccelerate(const ConfigNode &root, ImportContext &context,
                      llvm::StringRef path);
/// The keys of a DeepSpeed config: a whole ds_config.json, or the one an
/// Accelerate config names.
void importDeepSpeed(const ConfigNode &root, ImportContext &context);

} // namespace plan::import

#endif // PLAN_FRONTEND_IMPORTEDPLAN_H
