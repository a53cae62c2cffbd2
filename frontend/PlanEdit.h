//===- PlanEdit.h - Changing keys of a .plan file in its text ---*- C++ -*-===//
//
// What `planc --search-out` writes: the user's own file with some keys set
// to new values, everything else as it was (comments, order, spacing). A
// key the file writes gets its value replaced where it is written; a key it
// lacks is added at the end of its section, as a dotted key where the
// section is there but its sub-section is not (`offload.params = cpu`); a
// missing section is added at the end of the file. A key under a value
// written without a block that takes one (a preset's name, hf()) goes in a
// block added after the value (`model = llama3_8b { layers = 2 }`), as
// `--set` places it.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_FRONTEND_PLANEDIT_H
#define PLAN_FRONTEND_PLANEDIT_H

#include "frontend/Diagnostics.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/SourceMgr.h"

#include <optional>
#include <string>

namespace plan {

/// The text of buffer `bufferId` with each `path=value` setting (as `--set`
/// spells it) applied. Nothing when the buffer does not parse (the errors go
/// to `diag`).
std::optional<std::string> editPlanText(const llvm::SourceMgr &sourceMgr,
                                        unsigned bufferId,
                                        llvm::ArrayRef<std::string> settings,
                                        DiagEmitter &diag);

} // namespace plan

#endif // PLAN_FRONTEND_PLANEDIT_H
