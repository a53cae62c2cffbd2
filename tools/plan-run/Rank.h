//===- Rank.h - One rank of a run: rendezvous, then the training loop -*- C++
//-*-===//

#ifndef PLAN_RUN_RANK_H
#define PLAN_RUN_RANK_H

#include "Launch.h"
#include "Options.h"
#include "Schedule.h"
#include "Trainer.h"

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <string>

namespace plan::run {

/// "plan-run: " or, in a world above one rank, "plan-run: rank R: ": what
/// every message of this rank starts with.
std::string messagePrefix(const RankInfo &rank);

/// Runs this process's rank of `schedule` (`options.file` names it in
/// messages) and returns the process exit code: 0, or 1 after printing
/// messagePrefix() + a one-line reason on stderr. With --checkpoint-dir,
/// SIGTERM/SIGINT make every rank save a checkpoint after the step and
/// return 0; without, the rank exits at once with 128 + the signal.
int runRank(const RunOptions &options, const RankInfo &rank,
            const rt::ValidSchedule &schedule);

/// The one-line error of --backend cuda in a build without the CUDA backend.
inline constexpr const char *kNoCudaBackend =
    "--backend cuda: plan-run was built without the CUDA backend "
    "(PLAN_ENABLE_CUDA=OFF)";

/// "--backend cuda: rank R needs CUDA device L, but N are visible": the
/// one-line error of a rank whose local rank has no device.
std::string cudaDeviceMissing(int rank, int localRank, int visible);
inline std::string cudaDeviceMissing(int localRank, int visible) {
  return cudaDeviceMissing(localRank, localRank, visible);
}

/// The rendezvous store of `rank`'s world: rank 0 serves a TCPStore at
/// masterAddr:masterPort (unless the launcher does); one rank needs none
/// and gets an in-process store.
c10::intrusive_ptr<c10d::Store> rendezvous(const RankInfo &rank,
                                           std::chrono::milliseconds timeout);

/// The rendezvous store of the ranks that `ranks` starts, served by this
/// process (the launcher) on all interfaces at a port the kernel picks, so
/// that no rank can lose a port that was free a moment ago to another
/// process: sets `ranks.masterPort` and `ranks.launcherServesStore`. Keep it
/// until the ranks are done. Throws LaunchError when no port can be bound.
c10::intrusive_ptr<c10d::Store> serveLocalStore(LocalRanks &ranks);

/// Rank 0 serves the store: it waits (bounded by `timeout`) until every rank
/// is done with it before exiting, so no rank sees it vanish at the end of a
/// good run. Throws std::runtime_error on the timeout.
void finish(c10d::Store &store, const RankInfo &rank,
            std::chrono::milliseconds timeout);

/// Sets LibTorch's intra-op threads as chooseThreads says for this process's
/// environment (before any kernel runs) and returns the choice.
ThreadChoice useIntraOpThreads(int requested, const RankInfo &rank);

/// The runtime's options of a run (runtime/train/Trainer.h).
rt::TrainOptions trainOptions(const RunOptions &options);

/// The checks the ranks make before their rendezvous, for --nproc to make
/// once (rt::prepareRun): creates --checkpoint-dir; throws (one line) when
/// there are no steps, when --resume names no checkpoint, or one that
/// `schedule` cannot resume (malformed, a missing shard file, another
/// model). Returns true, after saying so unless --quiet, when the
/// checkpoint is at or past the run's last step: nothing to run.
bool runIsComplete(const RunOptions &options, const rt::Schedule &schedule);

} // namespace plan::run

#endif // PLAN_RUN_RANK_H
