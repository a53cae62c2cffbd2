//===- Launch.cpp - Where a rank comes from, and local rank spawning ------===//

#include "Launch.h"

#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

extern char **environ;

namespace plan::run {

const char *toString(Launcher launcher) {
  switch (launcher) {
  case Launcher::Single:
    return "single process";
  case Launcher::Torchrun:
    return "torchrun";
  case Launcher::OpenMpi:
    return "Open MPI";
  case Launcher::Slurm:
    return "SLURM";
  }
  return "?";
}

namespace {

std::optional<int> parseInt(const std::string &text, int min, int max) {
  int value = 0;
  const char *end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || value < min ||
      value > max)
    return std::nullopt;
  return value;
}

/// The integer in variable `name`; `fallback` when unset (nullopt: required).
int readInt(const EnvLookup &env, const char *name, int min, int max,
            std::optional<int> fallback, const char *launcher) {
  std::optional<std::string> text = env(name);
  if (!text) {
    if (fallback)
      return *fallback;
    throw LaunchError(std::string(launcher) + " launch: " + name +
                      " is not set");
  }
  std::optional<int> value = parseInt(*text, min, max);
  if (!value)
    throw LaunchError(std::string(name) + "='" + *text +
                      "' is not an integer in [" + std::to_string(min) + ", " +
                      std::to_string(max) + "]");
  return *value;
}

/// MASTER_ADDR / MASTER_PORT, which every launcher but plan-run --nproc and
/// torchrun leaves to the user.
void readMaster(const EnvLookup &env, RankInfo &info, const char *hint) {
  std::optional<std::string> addr = env("MASTER_ADDR");
  std::optional<std::string> port = env("MASTER_PORT");
  if (!addr || addr->empty() || !port) {
    throw LaunchError(std::string(toString(info.launcher)) + " launch of " +
                      std::to_string(info.world) + " ranks: " +
                      (!addr || addr->empty() ? "MASTER_ADDR" : "MASTER_PORT") +
                      " is not set; export MASTER_ADDR (rank 0's host) and "
                      "MASTER_PORT (a free TCP port there)" +
                      hint);
  }
  std::optional<int> value = parseInt(*port, 1, 65535);
  if (!value)
    throw LaunchError("MASTER_PORT='" + *port +
                      "' is not a TCP port (1 to 65535)");
  info.masterAddr = *addr;
  info.masterPort = static_cast<uint16_t>(*value);
}

/// Rank, world and local rank from one launcher's variables.
RankInfo readRank(const EnvLookup &env, Launcher launcher, const char *rankVar,
                  const char *worldVar, const char *localVar,
                  const char *localSizeVar, const char *hint) {
  const char *name = toString(launcher);
  RankInfo info;
  info.launcher = launcher;
  info.world = readInt(env, worldVar, 1, 1 << 20, std::nullopt, name);
  info.rank = readInt(env, rankVar, 0, INT_MAX, std::nullopt, name);
  if (info.rank >= info.world)
    throw LaunchError(std::string(rankVar) + "=" + std::to_string(info.rank) +
                      " is not below " + worldVar + "=" +
                      std::to_string(info.world));
  info.localRank = readInt(env, localVar, 0, INT_MAX, 0, name);
  info.localWorld = readInt(env, localSizeVar, 1, 1 << 20, 1, name);
  if (info.world > 1)
    readMaster(env, info, hint);
  return info;
}

} // namespace

RankInfo rankFromEnvironment(const EnvLookup &env) {
  if (env("RANK") || env("WORLD_SIZE")) {
    RankInfo info = readRank(env, Launcher::Torchrun, "RANK", "WORLD_SIZE",
                             "LOCAL_RANK", "LOCAL_WORLD_SIZE", "");
    info.launcherServesStore =
        info.world > 1 && env("TORCHELASTIC_USE_AGENT_STORE") == "True";
    return info;
  }
  if (env("OMPI_COMM_WORLD_RANK") || env("OMPI_COMM_WORLD_SIZE"))
    return readRank(env, Launcher::OpenMpi, "OMPI_COMM_WORLD_RANK",
                    "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                    "OMPI_COMM_WORLD_LOCAL_SIZE",
                    " (mpirun -x MASTER_ADDR -x MASTER_PORT passes them on)");
  if (env("SLURM_PROCID")) {
    RankInfo info =
        readRank(env, Launcher::Slurm, "SLURM_PROCID", "SLURM_NTASKS",
                 "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE",
                 " (e.g. MASTER_ADDR=$(scontrol show hostnames "
                 "\"$SLURM_JOB_NODELIST\" | head -n 1))");
    // Without --ntasks-per-node SLURM says "4(x2),3": 4 on each of the
    // first two nodes, 3 on the next. The first count is this host's on a
    // homogeneous allocation, and only sizes the default thread count.
    if (!env("SLURM_NTASKS_PER_NODE"))
      if (std::optional<std::string> tasks = env("SLURM_TASKS_PER_NODE")) {
        size_t digits = 0;
        while (digits < tasks->size() && std::isdigit((*tasks)[digits]))
          ++digits;
        if (std::optional<int> count =
                parseInt(tasks->substr(0, digits), 1, 1 << 20))
          info.localWorld = *count;
      }
    return info;
  }
  return RankInfo{};
}

int usableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0)
    return std::max(1, CPU_COUNT(&set));
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

ThreadChoice chooseThreads(int requested, const RankInfo &rank,
                           const EnvLookup &env) {
  if (requested > 0)
    return {requested, "--threads"};
  // LibTorch reads OMP_NUM_THREADS itself (also a form such as "4,2" that
  // is not one number: 0 here leaves it to LibTorch).
  if (std::optional<std::string> omp = env("OMP_NUM_THREADS"))
    return {parseInt(*omp, 1, 1 << 20).value_or(0), "OMP_NUM_THREADS"};
  int cores = usableCores();
  int threads = std::max(1, cores / std::max(1, rank.localWorld));
  return {threads, std::to_string(cores) + " cores / " +
                       std::to_string(rank.localWorld) +
                       (rank.localWorld == 1 ? " rank" : " ranks") +
                       " on this host"};
}

RankInfo rankFromEnvironment() {
  return rankFromEnvironment(
      [](const char *name) -> std::optional<std::string> {
        if (const char *value = std::getenv(name))
          return std::string(value);
        return std::nullopt;
      });
}

std::string currentExecutable() {
  std::string path(PATH_MAX, '\0');
  ssize_t n = ::readlink("/proc/self/exe", path.data(), path.size());
  if (n <= 0)
    throw LaunchError(
        std::string("cannot find this executable (/proc/self/exe): ") +
        std::strerror(errno));
  path.resize(static_cast<size_t>(n));
  return path;
}

//===----------------------------------------------------------------------===//
// Local ranks
//===----------------------------------------------------------------------===//

namespace {

// The signal handler forwards to the ranks, so it needs their pids without
// taking a lock; entries are 0 once reaped.
pid_t *gRankPids = nullptr;
int gNumRanks = 0;
volatile sig_atomic_t gForwardedSignal = 0;

/// Signals rank `pid` and whatever it started: each rank leads its own
/// process group (spawnRank), so a rank that is a shell or a wrapper script
/// takes its children along instead of leaving them holding our output pipes.
void signalRank(pid_t pid, int sig) { ::kill(-pid, sig); }

void forwardSignal(int sig) {
  gForwardedSignal = sig;
  for (int i = 0; i < gNumRanks; ++i)
    if (gRankPids[i] > 0)
      signalRank(gRankPids[i], sig);
}

/// Restores the previous SIGINT/SIGTERM handlers when the ranks are done.
class ForwardedSignals {
public:
  explicit ForwardedSignals(std::vector<pid_t> &pids) {
    gRankPids = pids.data();
    gNumRanks = static_cast<int>(pids.size());
    gForwardedSignal = 0;
    struct sigaction action {};
    action.sa_handler = forwardSignal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = 0; // no SA_RESTART: waitpid returns EINTR
    ::sigaction(SIGINT, &action, &oldInt_);
    ::sigaction(SIGTERM, &action, &oldTerm_);
  }
  ~ForwardedSignals() {
    ::sigaction(SIGINT, &oldInt_, nullptr);
    ::sigaction(SIGTERM, &oldTerm_, nullptr);
    gRankPids = nullptr;
    gNumRanks = 0;
  }
  ForwardedSignals(const ForwardedSignals &) = delete;
  ForwardedSignals &operator=(const ForwardedSignals &) = delete;

private:
  struct sigaction oldInt_ {
  }, oldTerm_{};
};

/// The environment of rank `rank`: this process's, with the rendezvous
/// variables replaced. Built before fork: the child may only call
/// async-signal-safe functions.
std::vector<std::string> rankEnvironment(const LocalRanks &ranks, int rank) {
  std::vector<std::pair<const char *, std::string>> vars = {
      {"RANK", std::to_string(rank)},
      {"WORLD_SIZE", std::to_string(ranks.nproc)},
      {"LOCAL_RANK", std::to_string(rank)},
      {"LOCAL_WORLD_SIZE", std::to_string(ranks.nproc)},
      {"MASTER_ADDR", "127.0.0.1"},
      {"MASTER_PORT", std::to_string(ranks.masterPort)},
      {"TORCHELASTIC_USE_AGENT_STORE",
       ranks.launcherServesStore ? "True" : "False"}};
  std::vector<std::string> env;
  for (char **e = environ; *e; ++e) {
    std::string_view entry(*e);
    bool replaced = false;
    for (const auto &[name, value] : vars) {
      size_t len = std::strlen(name);
      replaced |= entry.size() > len && entry.compare(0, len, name) == 0 &&
                  entry[len] == '=';
    }
    if (!replaced)
      env.emplace_back(entry);
  }
  for (const auto &[name, value] : vars)
    env.push_back(std::string(name) + "=" + value);
  return env;
}

std::vector<char *> pointers(std::vector<std::string> &strings) {
  std::vector<char *> out;
  for (std::string &s : strings)
    out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

pid_t spawnRank(const LocalRanks &ranks, int rank, pid_t parent) {
  std::vector<std::string> argStrings{ranks.executable};
  argStrings.insert(argStrings.end(), ranks.arguments.begin(),
                    ranks.arguments.end());
  std::vector<std::string> envStrings = rankEnvironment(ranks, rank);
  std::vector<char *> argv = pointers(argStrings), envp = pointers(envStrings);

  // The forwarding handler must not run in the child before exec: block the
  // signals across fork, restore the defaults in the child, then unblock.
  sigset_t forwarded, previous;
  sigemptyset(&forwarded);
  sigaddset(&forwarded, SIGINT);
  sigaddset(&forwarded, SIGTERM);
  ::sigprocmask(SIG_BLOCK, &forwarded, &previous);
  pid_t pid = ::fork();
  if (pid != 0) {
    int forkErrno = errno;
    // Also here, so that the group exists before the launcher signals it,
    // whichever of the two runs first.
    if (pid > 0)
      ::setpgid(pid, pid);
    ::sigprocmask(SIG_SETMASK, &previous, nullptr);
    if (pid < 0)
      throw LaunchError(std::string("cannot start rank ") +
                        std::to_string(rank) + ": " + std::strerror(forkErrno));
    return pid;
  }
  // The child: the leader of a process group of its own (signalRank). A
  // terminal's Ctrl-C then reaches the launcher alone, which forwards it
  // once. A rank must not outlive a launcher that was killed outright.
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != parent)
    ::_exit(1);
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
  ::sigprocmask(SIG_SETMASK, &previous, nullptr);
  ::execve(argv[0], argv.data(), envp.data());
  const char msg[] = "plan-run: cannot execute rank process\n";
  (void)!::write(STDERR_FILENO, msg, sizeof(msg) - 1);
  ::_exit(127);
}

/// 0 for a clean exit, else the code the launcher reports.
int failureCode(int status) {
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  if (WIFSIGNALED(status))
    return 128 + WTERMSIG(status);
  return 1;
}

} // namespace

int runLocalRanks(const LocalRanks &ranks) {
  std::vector<pid_t> pids(static_cast<size_t>(ranks.nproc), 0);
  ForwardedSignals forwarded(pids);
  pid_t self = ::getpid();
  for (int rank = 0; rank < ranks.nproc; ++rank) {
    try {
      pids[rank] = spawnRank(ranks, rank, self);
    } catch (...) {
      for (pid_t pid : pids)
        if (pid > 0)
          signalRank(pid, SIGKILL);
      for (pid_t pid : pids)
        if (pid > 0)
          ::waitpid(pid, nullptr, 0);
      throw;
    }
  }

  using Clock = std::chrono::steady_clock;
  int running = ranks.nproc;
  int result = 0;
  bool terminating = false;
  // time_point::max(): not scheduled.
  const Clock::time_point never = Clock::time_point::max();
  Clock::time_point killAt = never;
  // The first rank that stopped for a peer, reported only when no rank
  // fails for a reason of its own before `echoDeadline`.
  std::optional<std::pair<int, int>> echo; // rank, wait status
  Clock::time_point echoDeadline = never;
  auto terminateAll = [&](int sig) {
    for (pid_t pid : pids)
      if (pid > 0)
        signalRank(pid, sig);
  };
  auto reportFailure = [&](int rank, int status) {
    if (WIFSIGNALED(status))
      std::fprintf(stderr, "plan-run: rank %d killed by signal %d (%s)\n", rank,
                   WTERMSIG(status), strsignal(WTERMSIG(status)));
    else
      std::fprintf(stderr, "plan-run: rank %d exited with code %d\n", rank,
                   failureCode(status));
    result = failureCode(status);
    terminating = true;
    echoDeadline = never;
    if (running > 0) {
      terminateAll(SIGTERM);
      killAt = Clock::now() + ranks.grace;
    }
  };

  bool interrupted = false;
  while (running > 0) {
    if (gForwardedSignal && !interrupted && !terminating) {
      // Interrupted: the handler already forwarded the signal.
      interrupted = true;
      if (ranks.checkpointOnSignal) {
        // The ranks save a checkpoint and exit 0; a rank that exits
        // otherwise is a failure like any other.
        killAt = Clock::now() + ranks.signalGrace;
      } else {
        terminating = true;
        result = 128 + gForwardedSignal;
        echoDeadline = never;
        killAt = Clock::now() + ranks.grace;
      }
    }
    if (Clock::now() >= echoDeadline)
      reportFailure(echo->first, echo->second);
    if (Clock::now() >= killAt) {
      terminateAll(SIGKILL);
      killAt = never;
    }
    int status = 0;
    bool polling = killAt != never || echoDeadline != never;
    pid_t pid = ::waitpid(-1, &status, polling ? WNOHANG : 0);
    if (pid == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    if (pid < 0) {
      if (errno == EINTR)
        continue;
      break; // ECHILD: nothing left to wait for
    }
    int rank = -1;
    for (int i = 0; i < ranks.nproc; ++i)
      if (pids[i] == pid)
        rank = i;
    if (rank < 0)
      continue;
    pids[rank] = 0;
    --running;
    int code = failureCode(status);
    if (code == 0 || terminating)
      continue;
    if (WIFEXITED(status) && code == kStoppedForPeerExitCode) {
      if (!echo) {
        echo = {rank, status};
        echoDeadline = Clock::now() + ranks.grace;
      }
      continue;
    }
    reportFailure(rank, status);
  }
  if (!terminating && echo)
    reportFailure(echo->first, echo->second);
  return result;
}

} // namespace plan::run
