//===- Rank.h - One rank of a run: rendezvous, then the training loop -*- C++
//-*-===//

#ifndef PLAN_RUN_RANK_H
#define PLAN_RUN_RANK_H

#include "Launch.h"
#include "Options.h"
#include "Schedule.h"

#include <string>

namespace plan::run {

/// "plan-run: " or, in a world above one rank, "plan-run: rank R: ": what
/// every message of this rank starts with.
std::string messagePrefix(const RankInfo &rank);

/// Runs this process's rank of `schedule` (`options.file` names it in
/// messages) and returns the process exit code: 0, or 1 after printing
/// messagePrefix() + a one-line reason on stderr.
int runRank(const RunOptions &options, const RankInfo &rank,
            const rt::Schedule &schedule);

} // namespace plan::run

#endif // PLAN_RUN_RANK_H
