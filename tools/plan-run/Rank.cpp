//===- Rank.cpp - One rank of a run: rendezvous, signals, the trainer -----===//
//
// The training loop is the runtime's (runtime/train/Trainer.h); a rank adds
// what belongs to a process: the rendezvous and the process groups, SIGTERM
// and SIGINT, the watch that stops it when a peer fails, fault injection,
// progress, metrics files and its exit code.
//
//===----------------------------------------------------------------------===//

#include "Rank.h"

#include "Comm.h"
#include "DeviceBackend.h"
#include "FaultInjection.h"
#include "Format.h"
#include "Metrics.h"
#include "Progress.h"
#include "Trainer.h"

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <type_traits>

namespace plan::run {

using rt::Schedule;

namespace {

using Clock = std::chrono::steady_clock;

// Keys of the rendezvous store that plan-run itself uses (Gloo's keys are
// prefixed by Comm).
constexpr const char *kFailedKey = "plan-run/failed";
constexpr const char *kFinishedKey = "plan-run/finished";

/// The first line of an exception's message: c10 errors carry a backtrace
/// and context lines after it.
std::string reason(const std::exception &e) {
  std::string text;
  if (const auto *c10 = dynamic_cast<const c10::Error *>(&e))
    text = c10->what_without_backtrace();
  else
    text = e.what();
  size_t newline = text.find('\n');
  if (newline != std::string::npos)
    text.resize(newline);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\r'))
    text.pop_back();
  return text.empty() ? "unknown error" : text;
}

// What a rank prints when SIGTERM or SIGINT arrives (preemption, Ctrl-C, the
// launcher stopping the job), formatted before the handler can run.
char gTermMessage[160];
char gIntMessage[160];

// With --checkpoint-dir the first SIGTERM/SIGINT only sets gStopSignal: the
// training loop sees it after the step, every rank agrees on it, saves a
// checkpoint and exits 0 (a watchdog bounds how long that may take). A
// repeat a second or more later exits at once; one within a second is the
// same event delivered twice (a terminal's Ctrl-C reaches both torchrun or
// srun and their ranks, and the launcher forwards it too).
std::atomic<int> gStopSignal{0};
std::atomic<int64_t> gStopSignalNs{0}; // CLOCK_MONOTONIC of the first
bool gCheckpointOnSignal = false;
static_assert(std::atomic<int>::is_always_lock_free &&
                  std::atomic<int64_t>::is_always_lock_free,
              "the signal handler needs lock-free atomics");

int64_t monotonicNs() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now); // async-signal-safe
  return static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}

void onSignal(int sig) {
  if (gCheckpointOnSignal) {
    int64_t now = monotonicNs();
    int none = 0;
    if (gStopSignal.compare_exchange_strong(none, sig)) {
      gStopSignalNs.store(now);
      return;
    }
    int64_t first = gStopSignalNs.load();
    if (first == 0 || now - first < 1000000000)
      return;
  }
  const char *msg = sig == SIGINT ? gIntMessage : gTermMessage;
  (void)!::write(STDERR_FILENO, msg, std::strlen(msg));
  ::_exit(128 + sig);
}

const char *signalName(int sig) { return sig == SIGINT ? "SIGINT" : "SIGTERM"; }
const char *signalVerb(int sig) {
  return sig == SIGINT ? "interrupted" : "terminated";
}

void installSignalHandlers(const std::string &prefix, bool checkpointing) {
  const char *how = checkpointing ? " again" : "";
  std::snprintf(gTermMessage, sizeof(gTermMessage),
                "%sterminated (SIGTERM)%s; exiting without a checkpoint\n",
                prefix.c_str(), how);
  std::snprintf(gIntMessage, sizeof(gIntMessage),
                "%sinterrupted (SIGINT)%s; exiting without a checkpoint\n",
                prefix.c_str(), how);
  gCheckpointOnSignal = checkpointing;
  struct sigaction action {};
  action.sa_handler = onSignal;
  sigemptyset(&action.sa_mask);
  sigaddset(&action.sa_mask, SIGINT);
  sigaddset(&action.sa_mask, SIGTERM);
  // Interrupted system calls (a collective's socket reads) go on: the loop
  // looks at gStopSignal after the step.
  action.sa_flags = SA_RESTART;
  ::sigaction(SIGTERM, &action, nullptr);
  ::sigaction(SIGINT, &action, nullptr);
}

/// A thread that calls `check` every `interval` until stopped (or
/// destroyed); `check` ends the process when it finds a reason to.
class Watchdog {
public:
  Watchdog(std::chrono::milliseconds interval, std::function<void()> check)
      : interval_(interval), check_(std::move(check)),
        thread_([this] { watch(); }) {}
  ~Watchdog() { stop(); }
  Watchdog(const Watchdog &) = delete;
  Watchdog &operator=(const Watchdog &) = delete;

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable())
      thread_.join();
  }

private:
  void watch() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!wake_.wait_for(lock, interval_, [this] { return stopping_; }))
      check_();
  }

  std::chrono::milliseconds interval_;
  std::function<void()> check_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

/// With --checkpoint-dir: once a stop signal has arrived, ends the process
/// (128 + signal) when it has not checkpointed and exited within
/// --stop-timeout, whatever the training thread is stuck in.
std::unique_ptr<Watchdog> stopWatch(std::string prefix, double timeoutSeconds) {
  return std::make_unique<Watchdog>(
      std::chrono::milliseconds(50), [prefix, timeoutSeconds] {
        int sig = gStopSignal.load();
        int64_t since = gStopSignalNs.load();
        if (sig == 0 || since == 0 ||
            static_cast<double>(monotonicNs() - since) / 1e9 < timeoutSeconds)
          return;
        std::fprintf(stderr,
                     "%s%s (%s) and did not checkpoint within %g s; exiting "
                     "without a checkpoint\n",
                     prefix.c_str(), signalVerb(sig), signalName(sig),
                     timeoutSeconds);
        std::fflush(stderr);
        ::_exit(128 + sig);
      });
}

/// Ends this rank when another rank has failed or the store (on rank 0) is
/// gone, even while the training thread is stuck outside any collective that
/// would time out. Uses its own store connection. Exits with
/// kStoppedForPeerExitCode, which tells a launcher this rank is not the cause.
std::unique_ptr<Watchdog> failureWatch(c10::intrusive_ptr<c10d::Store> store,
                                       std::string prefix) {
  return std::make_unique<Watchdog>(std::chrono::milliseconds(500), [store,
                                                                     prefix] {
    std::string message;
    try {
      if (!store->check({kFailedKey}))
        return;
      std::vector<uint8_t> value = store->get(kFailedKey);
      message = prefix + "stopping because " +
                std::string(value.begin(), value.end()) + "\n";
    } catch (const std::exception &e) {
      message =
          prefix + "lost the rendezvous store (" + reason(e) + "); stopping\n";
    }
    std::fputs(message.c_str(), stderr);
    std::fflush(stderr);
    ::_exit(kStoppedForPeerExitCode);
  });
}

std::optional<FaultInjection> faultFromEnvironment() {
  const char *spec = std::getenv("PLAN_RUN_FAULT");
  if (!spec || !*spec)
    return std::nullopt;
  try {
    return parseFaultInjection(spec);
  } catch (const std::invalid_argument &e) {
    throw std::runtime_error(e.what());
  }
}

std::string meshText(int64_t replicate, int64_t shard, rt::Sharding sharding) {
  return std::to_string(replicate) + "x" + std::to_string(shard) + " " +
         rt::toString(sharding);
}

/// The device backend of this rank: the CPU, or with --backend cuda the
/// CUDA device of its local rank (torchrun's LOCAL_RANK, Open MPI's and
/// SLURM's local ids, --nproc's LOCAL_RANK). Throws std::runtime_error (one
/// line) when there is none.
std::unique_ptr<rt::DeviceBackend> selectBackend(const RunOptions &options,
                                                 const RankInfo &rank) {
  if (options.backend != "cuda")
    return rt::DeviceBackend::createCpu();
  if (!rt::DeviceBackend::cudaBuilt())
    throw std::runtime_error(kNoCudaBackend);
  int visible = rt::DeviceBackend::cudaDeviceCount();
  if (rank.localRank >= visible)
    throw std::runtime_error(
        cudaDeviceMissing(rank.rank, rank.localRank, visible));
  return rt::DeviceBackend::createCuda(rank.localRank);
}

/// With a pipeline (--metrics): the first rank of each stage hands its step's
/// measured peak and its plan to rank 0 through the rendezvous store, and
/// rank 0 adds every stage's to `metrics` (`stage_peak_bytes`). Other ranks
/// do nothing.
void gatherStagePeaks(c10d::Store &store, const rt::Schedule &schedule,
                      const RankInfo &rank, StepMetrics &metrics) {
  const int64_t perStage = schedule.worldSize() / schedule.pipeline;
  if (rank.rank % perStage != 0)
    return;
  const int64_t stage = rank.rank / perStage;
  auto key = [&](int64_t s) {
    return "plan-run/peak/" + std::to_string(metrics.step) + "/" +
           std::to_string(s);
  };
  if (stage > 0) {
    std::string text = std::to_string(metrics.peakBytes) + " " +
                       std::to_string(metrics.plannedBytes);
    store.set(key(stage), std::vector<uint8_t>(text.begin(), text.end()));
    return;
  }
  metrics.stagePeakBytes = {metrics.peakBytes};
  metrics.stagePlannedBytes = {metrics.plannedBytes};
  for (int64_t s = 1; s < schedule.pipeline; ++s) {
    std::vector<uint8_t> value = store.get(key(s));
    store.deleteKey(key(s));
    long long peak = 0, planned = 0;
    std::string text(value.begin(), value.end());
    if (std::sscanf(text.c_str(), "%lld %lld", &peak, &planned) != 2)
      throw std::runtime_error("stage " + std::to_string(s) +
                               " reported its peak as '" + text + "'");
    metrics.stagePeakBytes.push_back(peak);
    metrics.stagePlannedBytes.push_back(planned);
  }
}

std::unique_ptr<rt::Comm> createComm(c10::intrusive_ptr<c10d::Store> store,
                                     const RankInfo &rank,
                                     const Schedule &schedule,
                                     std::chrono::milliseconds timeout,
                                     const rt::DeviceBackend &backend) {
  if (backend.device().is_cuda())
    return rt::Comm::createNccl(std::move(store), rank.rank, rank.world,
                                schedule, timeout, backend.device());
  return rt::Comm::createGloo(std::move(store), rank.rank, rank.world, schedule,
                              timeout);
}

/// --profile: LibTorch's Kineto profiler around one step: the operators on
/// the host and, on a CUDA device, every kernel, copy and collective of every
/// stream (CUPTI), without shapes, stacks or memory events, which would slow
/// the step it measures.
void startProfiler(bool cuda) {
  namespace prof = torch::profiler::impl;
  prof::ProfilerConfig config(prof::ProfilerState::KINETO);
  std::set<prof::ActivityType> activities{prof::ActivityType::CPU};
  if (cuda)
    activities.insert(prof::ActivityType::CUDA);
  else // Kineto logs that it found no GPU, an error line that is no error.
    ::setenv("KINETO_LOG_LEVEL", "5", /*overwrite=*/0);
  torch::autograd::profiler::prepareProfiler(config, activities);
  torch::autograd::profiler::enableProfiler(config, activities);
}

void stopProfiler(const std::string &path) {
  std::unique_ptr<torch::autograd::profiler::ProfilerResult> result =
      torch::autograd::profiler::disableProfiler();
  std::error_code ec;
  std::filesystem::remove(path, ec);
  result->save(path);
  if (!std::filesystem::exists(path))
    throw std::runtime_error(path + ": cannot write the profile");
}

/// One line of --memory-trace: the op and its unit and micro-batch (compute
/// ops), then the allocator's bytes around it (docs/launching.md). Rank 0
/// writes it: the ops are those of the first pipeline stage's program.
std::string memoryTraceJson(const rt::Schedule &schedule, int64_t step,
                            const rt::OpMemory &memory) {
  const rt::Op &op =
      schedule.programs.front().ops[static_cast<size_t>(memory.op)];
  nlohmann::ordered_json json;
  json["step"] = step;
  json["op"] = memory.op;
  json["kind"] = rt::toString(op.kind());
  std::visit(
      [&](const auto &o) {
        std::decay_t<decltype(o)>::fields(o, [&](auto d, const auto &value) {
          if constexpr (std::is_same_v<decltype(d), rt::field::UnitRef>)
            json["unit"] = schedule.units[static_cast<size_t>(value)].name;
          else if constexpr (std::is_same_v<decltype(d), rt::field::MicroBatch>)
            json["mb"] = value;
        });
      },
      op.body);
  json["live_before"] = memory.liveBefore;
  json["peak"] = memory.peak;
  json["live_after"] = memory.liveAfter;
  json["seconds"] = memory.seconds;
  return json.dump();
}

} // namespace

c10::intrusive_ptr<c10d::Store> rendezvous(const RankInfo &rank,
                                           std::chrono::milliseconds timeout) {
  if (rank.world == 1)
    return c10::make_intrusive<c10d::HashStore>();
  c10d::TCPStoreOptions options;
  options.port = rank.masterPort;
  options.isServer = rank.rank == 0 && !rank.launcherServesStore;
  options.numWorkers = static_cast<size_t>(rank.world);
  options.waitWorkers = true;
  options.timeout = timeout;
  return c10::make_intrusive<c10d::TCPStore>(rank.masterAddr, options);
}

c10::intrusive_ptr<c10d::Store> serveLocalStore(LocalRanks &ranks) {
  c10d::TCPStoreOptions options;
  options.port = 0; // the kernel's choice, held from here on
  options.isServer = true;
  options.waitWorkers = false;
  c10::intrusive_ptr<c10d::TCPStore> store;
  try {
    store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", options);
  } catch (const std::exception &e) {
    throw LaunchError("cannot serve the rendezvous store on 127.0.0.1: " +
                      reason(e));
  }
  ranks.masterPort = store->getPort();
  ranks.launcherServesStore = true;
  return store;
}

/// Rank 0 serves the store: it waits (bounded) until every rank is done with
/// it before exiting, so no rank sees it vanish at the end of a good run.
void finish(c10d::Store &store, const RankInfo &rank,
            std::chrono::milliseconds timeout) {
  store.add(kFinishedKey, 1);
  if (rank.rank != 0)
    return;
  Clock::time_point deadline = Clock::now() + timeout;
  while (store.add(kFinishedKey, 0) < rank.world) {
    if (Clock::now() > deadline)
      throw std::runtime_error(
          "timed out waiting for the other ranks to finish");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

ThreadChoice useIntraOpThreads(int requested, const RankInfo &rank) {
  ThreadChoice threads = chooseThreads(requested, rank, [](const char *name) {
    const char *value = std::getenv(name);
    return value ? std::optional<std::string>(value) : std::nullopt;
  });
  if (threads.threads > 0)
    at::set_num_threads(threads.threads);
  return threads;
}

std::string cudaDeviceMissing(int rank, int localRank, int visible) {
  return "--backend cuda: rank " + std::to_string(rank) +
         " needs CUDA device " + std::to_string(localRank) + ", but " +
         std::to_string(visible) + " are visible";
}

std::string messagePrefix(const RankInfo &rank) {
  if (rank.world == 1)
    return "plan-run: ";
  return "plan-run: rank " + std::to_string(rank.rank) + ": ";
}

rt::TrainOptions trainOptions(const RunOptions &options) {
  rt::TrainOptions train;
  train.steps = options.steps;
  train.seed = options.seed;
  if (options.dataGiven)
    train.data = options.data;
  train.init = options.init;
  train.checkpoints.directory = options.checkpointDir;
  train.checkpoints.every = options.checkpointEvery;
  train.checkpoints.keep = options.keep;
  train.resume = options.resume;
  train.memoryTrace = !options.memoryTrace.empty();
  train.poison = options.poison;
  return train;
}

bool runIsComplete(const RunOptions &options, const Schedule &schedule) {
  rt::RunStart start = rt::prepareRun(schedule, trainOptions(options));
  if (start.complete && !options.quiet)
    for (const std::string &note : start.notes) {
      std::printf("plan-run: %s\n", note.c_str());
      std::fflush(stdout);
    }
  return start.complete;
}

int runRank(const RunOptions &options, const RankInfo &rank,
            const rt::ValidSchedule &schedule) {
  std::string prefix = messagePrefix(rank);
  const bool checkpointing = !options.checkpointDir.empty();
  installSignalHandlers(prefix, checkpointing);
  std::unique_ptr<Watchdog> stopTimer;
  if (checkpointing)
    stopTimer = stopWatch(prefix, options.stopTimeoutSeconds);

  auto timeout =
      std::chrono::milliseconds(std::llround(options.timeoutSeconds * 1000.0));
  // Declared outside the try: an error must not close this rank's Gloo
  // connections (by unwinding) before it has told the other ranks why.
  c10::intrusive_ptr<c10d::Store> store;
  std::unique_ptr<Watchdog> watch;
  std::unique_ptr<rt::DeviceBackend> backend;
  std::unique_ptr<rt::Comm> comm;
  std::unique_ptr<rt::Trainer> trainer;
  try {
    if (schedule->worldSize() != rank.world)
      throw std::runtime_error(options.file + ": schedule is for " +
                               std::to_string(schedule->worldSize()) +
                               " ranks (" + rt::meshString(schedule) + "); " +
                               std::to_string(rank.world) + " were launched");
    const bool reports = rank.rank == 0;
    // Before any kernel runs. Also with --backend cuda: a GPU rank's host
    // threads run the offloaded optimizer step and the data.
    ThreadChoice threads = useIntraOpThreads(options.threads, rank);
    if (reports && !options.quiet) {
      int used = at::get_num_threads();
      std::printf("plan-run: %d intra-op thread%s per rank (%s)\n", used,
                  used == 1 ? "" : "s", threads.reason.c_str());
    }
    rt::TrainOptions train = trainOptions(options);
    // Before the rendezvous: every rank reads the same checkpoint.json, so
    // a checkpoint that cannot be used fails every rank at once.
    rt::RunStart start = rt::prepareRun(schedule, train);
    if (reports) {
      // A plan for a GPU runs on the CPU backend (a test, a dry run), but
      // what planc predicted of it is about that GPU.
      const std::string &device = schedule->cluster.device.name;
      if (options.backend != "cuda" && device != "cpu")
        std::fprintf(stderr,
                     "plan-run: warning: the schedule was planned for %s: "
                     "its memory plan (planned_bytes) and predicted step "
                     "time are for that device, not for --backend cpu\n",
                     device.c_str());
      for (const std::string &warning : start.warnings)
        std::fprintf(stderr, "plan-run: warning: %s\n", warning.c_str());
      if (!options.quiet)
        for (const std::string &note : start.notes)
          std::printf("plan-run: %s\n", note.c_str());
      std::fflush(stdout);
    }
    if (start.complete)
      return 0;
    // Before the rendezvous: a rank without its device fails at once.
    backend = selectBackend(options, rank);
    std::optional<FaultInjection> fault = faultFromEnvironment();
    if (fault && fault->kind == FaultInjection::Kind::Save)
      train.afterShardWritten = [&fault, &rank](int64_t step,
                                                const std::string &tmpPath) {
        injectSaveFault(fault, rank.rank, step, tmpPath);
      };
    const int64_t resumedAfter =
        start.checkpoint ? start.checkpoint->info().step : 0;
    std::unique_ptr<MetricsFile> metrics, memoryTrace;
    if (reports && !options.metrics.empty())
      metrics = std::make_unique<MetricsFile>(
          options.metrics, start.checkpoint
                               ? std::optional<int64_t>(resumedAfter)
                               : std::nullopt);
    if (reports && !options.profile.empty() &&
        !std::ofstream(options.profile, std::ios::app))
      throw std::runtime_error(options.profile + ": cannot open the profile: " +
                               std::strerror(errno));
    if (reports && !options.memoryTrace.empty())
      memoryTrace = std::make_unique<MetricsFile>(
          options.memoryTrace,
          start.checkpoint ? std::optional<int64_t>(resumedAfter)
                           : std::nullopt,
          "memory trace");
    std::string resumeNote;
    if (const std::optional<rt::Checkpoint> &c = start.checkpoint) {
      std::string note;
      if (c->replicate() != schedule->replicate ||
          c->shard() != schedule->shard || c->sharding() != schedule->sharding)
        note = " (resharded from " +
               meshText(c->replicate(), c->shard(), c->sharding()) + ")";
      resumeNote = "plan-run: resuming from " + c->directory() + " at step " +
                   std::to_string(resumedAfter + 1) + " of " +
                   std::to_string(start.lastStep) + note;
    }

    store = rendezvous(rank, timeout);
    comm = createComm(store, rank, schedule, timeout, *backend);
    if (rank.world > 1)
      watch = failureWatch(store->clone(), prefix);
    const uint64_t runSeed = start.seed;
    trainer = std::make_unique<rt::Trainer>(schedule, train, std::move(start),
                                            *comm, *backend);
    if (reports && !trainer->newTaskHead().empty()) {
      // transformers says as much ("Some weights ... newly initialized").
      std::string names;
      for (const std::string &name : trainer->newTaskHead())
        names += (names.empty() ? "" : ", ") + name;
      std::fprintf(stderr,
                   "plan-run: warning: %s: no %s: a new task head, "
                   "initialised from seed %llu (train it before use)\n",
                   options.init.c_str(), names.c_str(),
                   static_cast<unsigned long long>(runSeed));
    }
    if (reports && !options.quiet && !resumeNote.empty()) {
      std::printf("%s\n", resumeNote.c_str());
      std::fflush(stdout);
    }

    const bool fp16 = schedule->train.precision == rt::Precision::FP16Mixed;
    Progress progress(reports ? Progress::styleFor(options.quiet)
                              : Progress::Style::Quiet,
                      trainer->lastStep(), trainer->nextStep());
    Clock::time_point began = Clock::now();
    bool warnedUnplanned = false;
    StepMetrics last;
    int64_t tokens = 0, ran = 0;
    while (!trainer->finished()) {
      injectFault(fault, rank.rank, trainer->nextStep());
      const bool profiled = reports && !options.profile.empty() &&
                            trainer->nextStep() == trainer->lastStep();
      if (profiled)
        startProfiler(options.backend == "cuda");
      Clock::time_point stepStart = Clock::now();
      rt::StepResult result = trainer->step();
      double stepTime =
          std::chrono::duration<double>(Clock::now() - stepStart).count();
      if (profiled)
        stopProfiler(options.profile);
      // Every rank: the units that overflow may be on any of them.
      if (result.unplannedSaveBytes > 0 && !warnedUnplanned) {
        warnedUnplanned = true;
        std::fprintf(
            stderr,
            "plan-run: warning: rank %d, step %lld: the model saved "
            "%s for backward outside the planned saves buffers (the "
            "schedule's activation model does not match this "
            "runtime: recompile the plan with this version's planc); "
            "memory exceeds the plan by up to that much\n",
            rank.rank, static_cast<long long>(result.step),
            rt::support::formatBytes(result.unplannedSaveBytes).c_str());
      }

      last = StepMetrics{};
      last.step = result.step;
      last.loss = result.loss;
      last.lr = result.lr;
      last.gradNorm = result.gradNorm;
      last.tokens = result.tokens;
      last.stepTimeS = stepTime;
      last.peakBytes = result.peakBytes;
      last.plannedBytes = result.plannedBytes;
      if (!options.metrics.empty() && schedule->pipeline > 1)
        gatherStagePeaks(*store, schedule, rank, last);
      if (fp16) {
        last.lossScale = result.lossScale;
        last.skipped = result.skipped;
      }
      tokens += result.tokens;
      ++ran;
      if (metrics)
        metrics->append(last);
      if (memoryTrace)
        for (const rt::OpMemory &memory : result.opMemory)
          memoryTrace->appendLine(
              memoryTraceJson(schedule, result.step, memory));
      progress.step(
          last, std::chrono::duration<double>(Clock::now() - began).count());

      rt::Trainer::AfterStep after = trainer->afterStep(gStopSignal.load());
      if (after.saved) {
        char line[64];
        std::snprintf(line, sizeof(line), "%.2f", after.saved->seconds);
        progress.message("plan-run: checkpoint step " +
                         std::to_string(result.step) + ": " +
                         rt::support::formatBytes(after.saved->bytes) + " in " +
                         line + " s -> " + after.saved->directory);
      }
      if (after.stop != 0 && after.saved && reports) {
        std::fprintf(stderr,
                     "plan-run: stopped after step %lld (%s); checkpoint %s; "
                     "resume with --resume %s\n",
                     static_cast<long long>(result.step),
                     signalName(after.stop), after.saved->directory.c_str(),
                     options.checkpointDir.c_str());
        std::fflush(stderr);
      }
    }
    if (watch)
      watch->stop();
    finish(*store, rank, timeout);
    progress.finish(last, ran,
                    std::chrono::duration<double>(Clock::now() - began).count(),
                    tokens);
    if (stopTimer)
      stopTimer->stop();
    return 0;
  } catch (const std::exception &e) {
    std::string why = reason(e);
    // Some runtime messages name the rank already.
    std::string self = "rank " + std::to_string(rank.rank) + ": ";
    if (rank.world > 1 && why.rfind(self, 0) == 0)
      why.erase(0, self.size());
    std::fprintf(stderr, "%s%s\n", prefix.c_str(), why.c_str());
    std::fflush(stderr);
    if (watch)
      watch->stop();
    // Tell the other ranks (best effort, briefly): their watch ends them
    // even when they are not inside a collective that would time out.
    if (store && rank.world > 1) {
      try {
        store->setTimeout(std::chrono::milliseconds(2000));
        std::string value =
            "rank " + std::to_string(rank.rank) + " failed: " + why;
        store->set(kFailedKey,
                   std::vector<uint8_t>(value.begin(), value.end()));
        // Stay a moment, connections open, so that the others' watch reads
        // this reason and stops them (exit code 2) before they see this rank
        // vanish, which they would report as a failure of their own (and
        // rank 0 serves the store).
        std::this_thread::sleep_for(std::chrono::milliseconds(1200));
      } catch (const std::exception &) {
      }
    }
    // Skip destructors: a Gloo context with a dead or stuck peer can block
    // in teardown, and the process is done.
    std::fflush(stdout);
    ::_exit(1);
  }
}

} // namespace plan::run
