//===- Diagnostics.h - Reporting .plan errors through MLIR ------*- C++ -*-===//
//
// Every front-end diagnostic goes through the MLIRContext's diagnostic engine
// with a FileLineColLoc into the llvm::SourceMgr that holds the .plan buffer
// (and one buffer per `--set` override). A SourceMgrDiagnosticHandler then
// prints `file:line:col: error: ...` with the source line and a caret, and
// `plan-opt -verify-diagnostics` can check .plan diagnostics like any other.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_FRONTEND_DIAGNOSTICS_H
#define PLAN_FRONTEND_DIAGNOSTICS_H

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/SMLoc.h"

#include <string>

namespace llvm {
class SourceMgr;
} // namespace llvm

namespace plan {

class DiagEmitter {
public:
  /// `sourceMgr` may be null (plans built through the C++ API): diagnostics
  /// then carry `fallback` as their location.
  DiagEmitter(mlir::MLIRContext *context, llvm::SourceMgr *sourceMgr,
              mlir::Location fallback);

  mlir::MLIRContext *getContext() const { return context; }
  /// The buffers locations point into; null for plans built in C++. Files a
  /// plan refers to (an HF config.json) are read into it, so that their
  /// diagnostics print as the plan's do.
  llvm::SourceMgr *getSourceMgr() const { return sourceMgr; }

  /// The MLIR location of a point in one of the source manager's buffers; the
  /// fallback location for an invalid SMLoc.
  mlir::Location loc(llvm::SMLoc point) const;

  mlir::InFlightDiagnostic error(llvm::SMLoc point, const llvm::Twine &message);
  mlir::InFlightDiagnostic warning(llvm::SMLoc point,
                                   const llvm::Twine &message);

  unsigned numErrors() const { return errors; }
  bool hadError() const { return errors != 0; }

private:
  mlir::MLIRContext *context;
  llvm::SourceMgr *sourceMgr;
  mlir::Location fallback;
  unsigned errors = 0;
  /// The start of the line the last location was on (loc()).
  mutable struct {
    unsigned buffer = 0, line = 0;
    const char *start = nullptr, *end = nullptr; // end: its newline
  } lastLine;
};

/// Prints a tool's diagnostics as `file:line:col: error: ...` with the source
/// line and a caret (mlir::SourceMgrDiagnosticHandler), within bounds that a
/// hostile or generated input cannot blow up: after `errorLimit` errors
/// (0: no limit) the rest are counted, not printed, and `finish` says how
/// many; a source line longer than kMaxShownLine characters is shown as
/// the part around the caret. As clang's -ferror-limit.
class DiagnosticPrinter {
public:
  static constexpr unsigned kDefaultErrorLimit = 20;
  static constexpr size_t kMaxShownLine = 160;

  DiagnosticPrinter(llvm::SourceMgr &sourceMgr, mlir::MLIRContext *context,
                    unsigned errorLimit, llvm::StringRef tool);
  /// Says how many errors were not printed, if any.
  ~DiagnosticPrinter() { finish(); }
  void finish();

private:
  mlir::LogicalResult handle(mlir::Diagnostic &diag);
  /// Prints `diag` (and its notes) itself when its line must be cut.
  bool printCut(mlir::Diagnostic &diag);

  llvm::SourceMgr &sourceMgr;
  std::string tool;
  unsigned errorLimit;
  unsigned errors = 0, dropped = 0;
  mlir::SourceMgrDiagnosticHandler printer;
  mlir::ScopedDiagnosticHandler limiter;
};

/// The closest candidate to `word` by edit distance, or "" when none is close
/// enough to be a plausible typo. Used for every "did you mean" message.
llvm::StringRef closestMatch(llvm::StringRef word,
                             llvm::ArrayRef<llvm::StringRef> candidates);

} // namespace plan

#endif // PLAN_FRONTEND_DIAGNOSTICS_H
