//===- Parser.h - Parsing .plan text into a syntax tree ---------*- C++ -*-===//

#ifndef PLAN_FRONTEND_PARSER_H
#define PLAN_FRONTEND_PARSER_H

#include "frontend/Diagnostics.h"
#include "frontend/Syntax.h"

#include "llvm/Support/SourceMgr.h"

namespace plan {

/// Parses the buffer `bufferId` of `sourceMgr` as a .plan file. Syntax errors
/// go to `diag`; the parser recovers at the next line or closing brace so one
/// run reports several errors. Returns the top-level block with everything it
/// could recover (check `diag.hadError()`).
syntax::Block parsePlanSyntax(const llvm::SourceMgr &sourceMgr,
                              unsigned bufferId, DiagEmitter &diag);

/// Applies one `--set path=value` override to a parsed file. `setting` is
/// added to `sourceMgr` as its own buffer (named "<--set>"; later ones
/// "<--set #2>", "<--set #3>", ..., so each message shows its own setting)
/// so a bad value is reported with a caret under it. `path` is dotted
/// ("parallel.sharding", "parallel.offload.params", "model.layers",
/// "model"); the value replaces the item at that path or is added where the
/// path says. A value that is not valid syntax, or a path through something
/// that is not a block, is an error. Whether the key exists is left to the
/// analyzer, so an override gets exactly the checks a file gets.
bool applyOverride(syntax::Block &root, llvm::StringRef setting,
                   llvm::SourceMgr &sourceMgr, DiagEmitter &diag);

} // namespace plan

#endif // PLAN_FRONTEND_PARSER_H
