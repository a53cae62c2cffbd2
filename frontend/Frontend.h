//===- Frontend.h - From .plan text to the plan dialect ---------*- C++ -*-===//
//
// The entry points a tool or an embedding program uses: load a .plan buffer
// (with `--set` overrides) into a checked PlanSpec, and import a PlanSpec into
// the plan dialect. All diagnostics go through the MLIRContext's engine.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_FRONTEND_FRONTEND_H
#define PLAN_FRONTEND_FRONTEND_H

#include "frontend/Diagnostics.h"
#include "frontend/PlanSpec.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

#include <memory>
#include <optional>
#include <string>

namespace plan {

/// Parses and checks buffer `bufferId` of `sourceMgr` as a .plan file after
/// applying each `--set` override in order. The plan is named `name` unless
/// the file sets `name`. Returns nothing if there was any error.
std::optional<PlanSpec> loadPlan(llvm::SourceMgr &sourceMgr, unsigned bufferId,
                                 llvm::ArrayRef<std::string> overrides,
                                 llvm::StringRef name, DiagEmitter &diag);

/// The most bytes an input file of planc or plan-opt may have: a plan is
/// kilobytes, and a lowered .mlir file megabytes.
constexpr uint64_t kMaxInputBytes = uint64_t(256) << 20;

/// Whether `path` ("-": stdin) may be planc's or plan-opt's input: a path
/// that is not a regular file (a device such as /dev/zero, a FIFO, a
/// directory) or that is larger than kMaxInputBytes is refused, with a
/// one-line reason in `error`, before anything reads it.
bool checkInput(llvm::StringRef path, std::string &error);
/// Opens `path` after checkInput.
std::unique_ptr<llvm::MemoryBuffer> openInput(llvm::StringRef path,
                                              std::string &error);

/// Flushes an output file of planc or plan-opt ("-": stdout) and keeps it
/// when every byte was written. Otherwise `error` says why in one line and
/// the stream's error is cleared, so that LLVM does not abort on it.
bool keepOutput(llvm::ToolOutputFile &output, llvm::StringRef path,
                std::string &error);

/// The plan name a file gets by default: its file name without directories
/// and without the `.plan` extension.
std::string defaultPlanName(llvm::StringRef path);

/// Builds a module holding the plan's mesh (`shard.grid @mesh`) and its
/// `plan.plan` op. Ops carry the .plan locations recorded in `plan.locs`.
/// Returns null (after reporting through `diag`) if the IR does not verify,
/// which for a plan that passed `checkPlan` is a compiler bug.
mlir::OwningOpRef<mlir::ModuleOp> importPlan(const PlanSpec &plan,
                                             DiagEmitter &diag);

/// Registers every dialect a plan module uses.
void registerPlanDialects(mlir::DialectRegistry &registry);

} // namespace plan

#endif // PLAN_FRONTEND_FRONTEND_H
