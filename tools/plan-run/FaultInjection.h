//===- FaultInjection.h - Test-only rank failures (PLAN_RUN_FAULT) -*- C++
//-*-===//
//
// The end-to-end tests check that one failing rank brings the whole job down
// within a bounded time. PLAN_RUN_FAULT="rank=R,step=K,kind=KIND" makes rank
// R, at the start of step K: `exit` with code 3, `abort()`, `hang` (sleep
// forever: a stand-in for a deadlocked or stalled rank), or fail with an
// `error` (an exception, like any run-time error). `save` strikes during the
// checkpoint save after step K instead: rank R truncates its freshly written
// temporary shard file to half its size and exits with code 3, a crash in
// the middle of a save. Unset: no fault.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_RUN_FAULTINJECTION_H
#define PLAN_RUN_FAULTINJECTION_H

#include <cstdint>
#include <optional>
#include <string>

namespace plan::run {

struct FaultInjection {
  enum class Kind { Exit, Abort, Hang, Error, Save };
  int rank = 0;
  int64_t step = 1;
  Kind kind = Kind::Exit;

  /// The exit code of Kind::Exit, distinct from plan-run's own error code 1.
  static constexpr int kExitCode = 3;
};

/// Parses the PLAN_RUN_FAULT syntax; throws std::invalid_argument (one line)
/// naming the bad part.
FaultInjection parseFaultInjection(const std::string &spec);

/// Does what `fault` says when it is for `rank` and `step` (Kind::Error throws
/// std::runtime_error); returns otherwise.
void injectFault(const std::optional<FaultInjection> &fault, int rank,
                 int64_t step);

/// Kind::Save for `rank` and `step`: truncates `tmpPath` (the shard file the
/// save has just written, not yet renamed) to half its size and exits with
/// kExitCode. Returns otherwise. Called from the checkpoint save's
/// afterShardWritten hook.
void injectSaveFault(const std::optional<FaultInjection> &fault, int rank,
                     int64_t step, const std::string &tmpPath);

} // namespace plan::run

#endif // PLAN_RUN_FAULTINJECTION_H
