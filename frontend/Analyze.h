//===- Analyze.h - Giving a syntax tree meaning -----------------*- C++ -*-===//

#ifndef PLAN_FRONTEND_ANALYZE_H
#define PLAN_FRONTEND_ANALYZE_H

#include "frontend/Diagnostics.h"
#include "frontend/PlanSpec.h"
#include "frontend/Syntax.h"

#include "llvm/ADT/StringSet.h"

#include <optional>

namespace plan {

/// Checks every item of a parsed .plan file against the language's schema
/// (docs/language.md): unknown keys (with a suggestion), wrong types, values
/// out of range, missing required keys, duplicate keys; resolves presets,
/// devices, aliases and defaults; then runs `checkPlan`. Reports as many
/// errors as it can find in one run. Returns the plan only when there were
/// none. `name` is the plan's name when the file does not set `name`.
std::optional<PlanSpec> analyzePlan(const syntax::Block &root,
                                    llvm::StringRef name, DiagEmitter &diag);

/// Fills in the defaults that depend on other settings (the mesh from the
/// sharding and the cluster, the loss scale from the precision, where the
/// optimizer step runs from the optimizer offload, ...) for every key that
/// `plan.locs` does not record as written. Shared by the analyzer and the C++
/// builder so both give the same plan for the same settings.
void applyDerivedDefaults(PlanSpec &plan);

/// The checks that need the whole plan: contradictory combinations (offloading
/// unsharded gradients with the optimizer step on the device, hybrid_shard on
/// one node, fp16 without loss scaling, a mesh that does not divide the world,
/// ...) and settings that have no effect. Shared by the analyzer and the C++
/// builder so both paths reject the same plans. Returns false on any error.
bool checkPlan(const PlanSpec &plan, DiagEmitter &diag);

/// checkPlan for a plan some of whose keys were already reported as wrong or
/// missing (`unchecked`, dotted paths): every check that reads one of them, or
/// a key inside or around one, is skipped, so one mistake is reported once and
/// not again as the contradictions it causes.
bool checkPlan(const PlanSpec &plan, DiagEmitter &diag,
               const llvm::StringSet<> &unchecked);

/// What an FSDP or Accelerate setting that has no key of its own means for a
/// plan (`use_orig_params`: "FSDP's use_orig_params does not apply: ..."),
/// or "" for a key it does not know. The analyzer says it for such a key in
/// `parallel`; `planc import` for the same key in an Accelerate config.
llvm::StringRef foreignParallelKeyMeaning(llvm::StringRef key);

} // namespace plan

#endif // PLAN_FRONTEND_ANALYZE_H
