//===- Launch.h - Where a rank comes from, and local rank spawning -*- C++
//-*-===//
//
// plan-run runs one rank per process. The rank, the world size and the
// rendezvous address come from whichever launcher started the process:
// torchrun (or `plan-run --nproc N`, which sets the same variables), Open MPI's
// mpirun, or SLURM's srun; with none of them the process is a world of one.
// Nothing here needs LibTorch, so the launch logic is tested on its own.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_RUN_LAUNCH_H
#define PLAN_RUN_LAUNCH_H

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace plan::run {

/// A launch environment that cannot be used (missing MASTER_ADDR, a rank
/// outside the world, a value that is not a number); one line.
class LaunchError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

enum class Launcher { Single, Torchrun, OpenMpi, Slurm };
const char *toString(Launcher launcher);

struct RankInfo {
  Launcher launcher = Launcher::Single;
  int rank = 0, world = 1;
  int localRank = 0;  // the rank among those on this host
  int localWorld = 1; // the ranks on this host
  /// The TCPStore server (rank 0's host); empty when world == 1, which
  /// rendezvouses in-process.
  std::string masterAddr;
  uint16_t masterPort = 0;
  /// The store at MASTER_ADDR:MASTER_PORT is served by the launcher (torchrun
  /// sets TORCHELASTIC_USE_AGENT_STORE=True), so rank 0 connects to it as a
  /// client instead of serving it.
  bool launcherServesStore = false;
};

/// Reads an environment variable; nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const char *)>;

/// Precedence: torchrun's RANK/WORLD_SIZE, then Open MPI's
/// OMPI_COMM_WORLD_RANK/SIZE, then SLURM's SLURM_PROCID/SLURM_NTASKS, else a
/// single rank. The ranks on this host: LOCAL_WORLD_SIZE,
/// OMPI_COMM_WORLD_LOCAL_SIZE, SLURM_NTASKS_PER_NODE or the first count of
/// SLURM_TASKS_PER_NODE ("4(x2),3": 4), else 1. Open MPI comes before SLURM
/// because an sbatch script's own environment already has SLURM_PROCID=0, which
/// every rank of an `mpirun` inside it inherits. Throws LaunchError.
RankInfo rankFromEnvironment(const EnvLookup &env);
RankInfo rankFromEnvironment();

/// How many intra-op threads a rank uses, and why.
struct ThreadChoice {
  int threads = 1;    // 0: as LibTorch reads OMP_NUM_THREADS
  std::string reason; // "--threads", "OMP_NUM_THREADS", or the default's
};

/// `--threads` when given (`requested` > 0), else OMP_NUM_THREADS when it is
/// set (LibTorch reads it), else the cores this process may run on (its CPU
/// affinity: taskset, a cgroup's cpuset) shared evenly by the ranks on this
/// host, at least 1.
ThreadChoice chooseThreads(int requested, const RankInfo &rank,
                           const EnvLookup &env);
/// The CPUs in this process's affinity mask.
int usableCores();

/// What `--nproc N` starts: N copies of `executable` with `arguments`, rank i
/// with RANK=i, WORLD_SIZE=N, LOCAL_RANK=i, LOCAL_WORLD_SIZE=N,
/// MASTER_ADDR=127.0.0.1, MASTER_PORT=`masterPort` and
/// TORCHELASTIC_USE_AGENT_STORE ("True" when `launcherServesStore`, else
/// "False") added to this process's environment.
struct LocalRanks {
  std::string executable;
  std::vector<std::string> arguments; // argv[1..]
  int nproc = 1;
  uint16_t masterPort = 0;
  /// The launcher serves the store at `masterPort` (plan-run --nproc does,
  /// on a port it has bound: no rank races another process for a port that
  /// was free a moment ago), so every rank connects to it as a client.
  bool launcherServesStore = false;
  /// Between SIGTERM and SIGKILL for the ranks still running after one failed.
  std::chrono::milliseconds grace{5000};
  /// The ranks save a checkpoint and exit 0 on SIGTERM/SIGINT
  /// (--checkpoint-dir): after a forwarded signal they get `signalGrace`
  /// before SIGKILL, and a rank's exit is judged as at any other time.
  bool checkpointOnSignal = false;
  std::chrono::milliseconds signalGrace{5000};
};

/// The exit code of a rank that stopped because another rank failed (it saw
/// the failure recorded in the rendezvous store, or the store vanish).
inline constexpr int kStoppedForPeerExitCode = 2;

/// Starts the ranks and waits for all of them. When one exits non-zero or is
/// killed, prints "plan-run: rank R exited with code C" (or "killed by signal
/// S") on stderr, terminates the others (SIGTERM, then SIGKILL after the
/// grace period) and returns that rank's code (128 + S for a signal). A rank
/// that exits with kStoppedForPeerExitCode is only an echo of another's
/// failure: the others get the grace period to exit on their own, so that the
/// rank reported is the one that failed first. SIGINT or SIGTERM to this
/// process is forwarded to the ranks (each time), and the result is 128 +
/// that signal; with `checkpointOnSignal` the ranks get `signalGrace` to
/// checkpoint and exit, and the result is 0 when all of them exit 0, else the
/// code of the first that did not (reported as above). Returns 0 when every
/// rank exited 0. Throws LaunchError when a process cannot be started.
int runLocalRanks(const LocalRanks &ranks);

/// This executable's path (/proc/self/exe), for re-executing it as ranks and
/// finding planc next to it.
std::string currentExecutable();

} // namespace plan::run

#endif // PLAN_RUN_LAUNCH_H
