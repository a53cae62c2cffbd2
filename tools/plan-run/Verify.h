//===- Verify.h - plan-run --verify: the plan against one rank --*- C++ -*-===//
//
// `plan-run --verify PLAN.plan` (docs/verify.md): the plan's parallel
// configuration, on a model of the same family and shape ratios shrunk to
// run in seconds, on local CPU ranks of the plan's mesh shape scaled down,
// trained for a few steps against the single-rank run of the same model,
// precision and global batch; per-step loss and gradient norm compared with
// a stated tolerance, and a verdict.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_RUN_VERIFY_H
#define PLAN_RUN_VERIFY_H

#include "Options.h"

#include <string>

namespace plan::run {

/// Runs the check `options` asks for (options.verify); `executable` is this
/// plan-run, which launches both runs. Returns plan-run's exit code: 0 when
/// the plan trains as the reference, 1 when it does not or cannot run.
int verifyPlan(const RunOptions &options, const std::string &executable);

} // namespace plan::run

#endif // PLAN_RUN_VERIFY_H
