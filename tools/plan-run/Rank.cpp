//===- Rank.cpp - One rank of a run: rendezvous, then the training loop ---===//

#include "Rank.h"

#include "Checkpoint.h"
#include "Comm.h"
#include "Data.h"
#include "Executor.h"
#include "FaultInjection.h"
#include "Metrics.h"
#include "Model.h"
#include "Progress.h"
#include "SafeTensors.h"

#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>
#ifdef PLAN_HAVE_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>

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

/// The stop signal every rank agrees on after a step: the largest any rank
/// has received (0: none). Collective over the world when it is above 1.
int agreeOnStop(rt::Comm &comm) {
  int local = gStopSignal.load();
  if (comm.world() == 1)
    return local;
  std::vector<at::Tensor> value{
      at::full({1}, static_cast<int64_t>(local), at::kLong)};
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp::MAX;
  try {
    comm.group(rt::GroupAxis::World).allreduce(value, options)->wait();
  } catch (const std::exception &e) {
    throw std::runtime_error("the stop-signal all_reduce failed: " + reason(e));
  }
  return static_cast<int>(value[0].item<int64_t>());
}

std::string meshText(int64_t replicate, int64_t shard,
                     const std::string &sharding) {
  return std::to_string(replicate) + "x" + std::to_string(shard) + " " +
         sharding;
}

/// The run's last step: --steps, else the schedule's train.steps.
int64_t lastStep(const RunOptions &options, const Schedule &schedule) {
  int64_t steps = options.steps > 0 ? options.steps : schedule.train.steps;
  if (steps <= 0)
    throw std::runtime_error(
        options.file + ": the schedule sets no train.steps; pass --steps K");
  return steps;
}

/// The checkpoint --resume names, opened and checked against `schedule`;
/// nullopt without --resume, or with `auto` when there is none yet. Throws
/// (one line) when there is no checkpoint where --resume PATH points, or it
/// cannot be used.
std::optional<rt::Checkpoint> openResume(const RunOptions &options,
                                         const Schedule &schedule) {
  if (options.resume.empty())
    return std::nullopt;
  bool automatic = options.resume == "auto";
  const std::string &where = automatic ? options.checkpointDir : options.resume;
  std::optional<std::string> directory = rt::findCheckpoint(where);
  if (!directory) {
    if (automatic)
      return std::nullopt;
    throw rt::CheckpointError(
        "--resume " + where +
        ": no checkpoint there (neither a checkpoint.json nor a complete "
        "step-NNNNNNNN directory)");
  }
  std::optional<rt::Checkpoint> checkpoint;
  checkpoint.emplace(rt::Checkpoint::open(*directory));
  checkpoint->checkCompatible(schedule);
  return checkpoint;
}

/// rt::makeCheckpointRoot, its message naming the flag.
void makeCheckpointRoot(const std::string &path) {
  try {
    rt::makeCheckpointRoot(path);
  } catch (const rt::CheckpointError &e) {
    throw std::runtime_error("--checkpoint-dir " + path + ": " + e.what());
  }
}

/// Says so (unless quiet) when `checkpoint` is at or past the run's last
/// step, which leaves nothing to run.
bool alreadyDone(const rt::Checkpoint &checkpoint, int64_t steps, bool quiet) {
  int64_t step = checkpoint.info().step;
  if (step < steps)
    return false;
  if (!quiet) {
    std::printf("plan-run: %s is at step %lld; the run's %lld steps are done "
                "already\n",
                checkpoint.directory().c_str(), static_cast<long long>(step),
                static_cast<long long>(steps));
    std::fflush(stdout);
  }
  return true;
}

/// The device this rank computes on: the CPU, or with --backend cuda the
/// CUDA device of its local rank (torchrun's LOCAL_RANK, Open MPI's and
/// SLURM's local ids, --nproc's LOCAL_RANK), made the current device of this
/// process. Throws std::runtime_error (one line) when there is none.
at::Device selectDevice(const RunOptions &options, const RankInfo &rank) {
  if (options.backend != "cuda")
    return at::Device(at::kCPU);
#ifdef PLAN_HAVE_CUDA
  int visible = c10::cuda::device_count();
  if (rank.localRank >= visible)
    throw std::runtime_error(
        cudaDeviceMissing(rank.rank, rank.localRank, visible));
  auto index = static_cast<c10::DeviceIndex>(rank.localRank);
  c10::cuda::set_device(index);
  return at::Device(at::kCUDA, index);
#else
  (void)rank;
  throw std::runtime_error(kNoCudaBackend);
#endif
}

std::unique_ptr<rt::Comm> createComm(c10::intrusive_ptr<c10d::Store> store,
                                     const RankInfo &rank,
                                     const Schedule &schedule,
                                     std::chrono::milliseconds timeout,
                                     at::Device device) {
  if (device.is_cuda())
    return rt::Comm::createNccl(std::move(store), rank.rank, rank.world,
                                schedule, timeout, device);
  return rt::Comm::createGloo(std::move(store), rank.rank, rank.world, schedule,
                              timeout);
}

/// One line of --memory-trace: the op and its unit and micro-batch (compute
/// ops), then the allocator's bytes around it (docs/launching.md).
std::string memoryTraceJson(const rt::Schedule &schedule, int64_t step,
                            const rt::OpMemory &memory) {
  const rt::Op &op = schedule.ops[static_cast<size_t>(memory.op)];
  nlohmann::ordered_json json;
  json["step"] = step;
  json["op"] = memory.op;
  json["kind"] = rt::toString(op.kind);
  if (op.unit >= 0) {
    json["unit"] = schedule.units[static_cast<size_t>(op.unit)].name;
    json["mb"] = op.microBatch;
  }
  json["live_before"] = memory.liveBefore;
  json["peak"] = memory.peak;
  json["live_after"] = memory.liveAfter;
  return json.dump();
}

} // namespace

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

bool checkResume(const RunOptions &options, const Schedule &schedule) {
  if (!options.checkpointDir.empty())
    makeCheckpointRoot(options.checkpointDir);
  std::optional<rt::Checkpoint> checkpoint = openResume(options, schedule);
  return checkpoint &&
         alreadyDone(*checkpoint, lastStep(options, schedule), options.quiet);
}

int runRank(const RunOptions &options, const RankInfo &rank,
            const Schedule &schedule) {
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
  std::unique_ptr<rt::Comm> comm;
  std::unique_ptr<rt::Model> model;
  std::unique_ptr<rt::Executor> executor;
  try {
    if (schedule.worldSize() != rank.world)
      throw std::runtime_error(options.file + ": schedule is for " +
                               std::to_string(schedule.worldSize()) +
                               " ranks (" + std::to_string(schedule.replicate) +
                               "x" + std::to_string(schedule.shard) + "); " +
                               std::to_string(rank.world) + " were launched");
    int64_t steps = lastStep(options, schedule);
    const bool reports = rank.rank == 0;
    if (reports && schedule.train.steps > 0 && steps > schedule.train.steps &&
        schedule.train.lrSchedule.kind != "constant")
      std::fprintf(stderr,
                   "plan-run: warning: running %lld steps, but the %s "
                   "learning-rate schedule ends at train.steps = %lld; later "
                   "steps keep its final rate\n",
                   static_cast<long long>(steps),
                   schedule.train.lrSchedule.kind.c_str(),
                   static_cast<long long>(schedule.train.steps));
    // Before the rendezvous: every rank reads the same checkpoint.json, so a
    // checkpoint that cannot be used fails every rank at once.
    std::optional<rt::Checkpoint> checkpoint = openResume(options, schedule);
    if (checkpoint &&
        alreadyDone(*checkpoint, steps, options.quiet || !reports))
      return 0;
    if (reports && !options.quiet && !checkpoint && !options.resume.empty()) {
      std::printf("plan-run: no checkpoint under %s yet; starting at step 1\n",
                  options.checkpointDir.c_str());
      std::fflush(stdout);
    }
    // A resumed run continues the checkpoint's seed and data stream.
    uint64_t seed = options.seed ? *options.seed
                                 : static_cast<uint64_t>(schedule.train.seed);
    std::string dataSpec = options.data;
    const int64_t resumedAfter = checkpoint ? checkpoint->info().step : 0;
    if (checkpoint) {
      const rt::CheckpointInfo &info = checkpoint->info();
      if (reports && options.seed && *options.seed != info.seed)
        std::fprintf(stderr,
                     "plan-run: warning: --seed %llu differs from the "
                     "checkpoint's seed %llu, which the resumed run keeps\n",
                     static_cast<unsigned long long>(*options.seed),
                     static_cast<unsigned long long>(info.seed));
      seed = info.seed;
      if (!options.dataGiven)
        dataSpec = info.data;
      else if (reports && options.data != info.data)
        std::fprintf(stderr,
                     "plan-run: warning: --data %s differs from the "
                     "checkpoint's %s; reading it from the checkpoint's "
                     "position (sequence %lld)\n",
                     options.data.c_str(), info.data.c_str(),
                     static_cast<long long>(info.sequencesConsumed));
    }
    // Before the rendezvous: a rank without its device fails at once.
    const at::Device device = selectDevice(options, rank);
    std::optional<FaultInjection> fault = faultFromEnvironment();
    // Before the rendezvous: a path that cannot be written fails at once.
    if (reports && checkpointing)
      makeCheckpointRoot(options.checkpointDir);
    std::unique_ptr<MetricsFile> metrics, memoryTrace;
    if (reports && !options.metrics.empty())
      metrics = std::make_unique<MetricsFile>(
          options.metrics,
          checkpoint ? std::optional<int64_t>(resumedAfter) : std::nullopt);
    if (reports && !options.memoryTrace.empty())
      memoryTrace = std::make_unique<MetricsFile>(
          options.memoryTrace,
          checkpoint ? std::optional<int64_t>(resumedAfter) : std::nullopt,
          "memory trace");

    store = rendezvous(rank, timeout);
    comm = createComm(store, rank, schedule, timeout, device);
    if (rank.world > 1)
      watch = failureWatch(store->clone(), prefix);

    model = rt::Model::create(schedule, device);
    executor = std::make_unique<rt::Executor>(schedule, *model, *comm, device);
    executor->setTotalSteps(steps);
    executor->setMemoryTrace(memoryTrace != nullptr);
    if (checkpoint)
      checkpoint->restore(schedule, *executor, *comm);
    else if (options.init.empty())
      executor->initState(seed);
    else
      executor->loadState(*rt::openTensorSource(options.init, schedule.model));
    std::unique_ptr<rt::DataSource> data =
        rt::DataSource::open(dataSpec, schedule.model.vocab, seed);
    if (checkpoint) {
      data->setPosition(resumedAfter, checkpoint->info().sequencesConsumed);
      if (reports && !options.quiet) {
        std::string note;
        if (checkpoint->replicate() != schedule.replicate ||
            checkpoint->shard() != schedule.shard ||
            checkpoint->sharding() != schedule.sharding)
          note = " (resharded from " +
                 meshText(checkpoint->replicate(), checkpoint->shard(),
                          checkpoint->sharding()) +
                 ")";
        std::printf("plan-run: resuming from %s at step %lld of %lld%s\n",
                    checkpoint->directory().c_str(),
                    static_cast<long long>(resumedAfter + 1),
                    static_cast<long long>(steps), note.c_str());
        std::fflush(stdout);
      }
      checkpoint.reset(); // its file cache
    }

    // Every rank is a data-parallel rank under every sharding strategy (the
    // mesh is replicate x shard, all of it data-parallel): each reads its own
    // slice of the global batch.
    const int64_t dpRank = rank.rank, dpSize = rank.world;
    const int64_t globalBatch =
        schedule.microBatches * dpSize * schedule.train.microBatch;
    const bool fp16 = schedule.train.precision.rfind("fp16", 0) == 0;
    Progress progress(reports ? Progress::styleFor(options.quiet)
                              : Progress::Style::Quiet,
                      steps, resumedAfter + 1);

    Clock::time_point start = Clock::now();
    bool warnedUnplanned = false;
    StepMetrics last;
    int64_t tokens = 0, ran = 0;
    int stopSignal = 0;
    for (int64_t step = resumedAfter + 1; step <= steps; ++step) {
      injectFault(fault, rank.rank, step);
      Clock::time_point stepStart = Clock::now();
      std::vector<rt::MicroBatch> batches = data->batches(
          step, schedule.microBatches, dpRank, dpSize,
          schedule.train.microBatch, schedule.train.seqLen, device);
      rt::StepResult result = executor->runStep(step, batches);
      double stepTime =
          std::chrono::duration<double>(Clock::now() - stepStart).count();
      // Every rank: the units that overflow may be on any of them.
      if (result.unplannedSaveBytes > 0 && !warnedUnplanned) {
        warnedUnplanned = true;
        std::fprintf(stderr,
                     "plan-run: warning: rank %d, step %lld: the model saved "
                     "%s for "
                     "backward outside the planned saves buffers (the "
                     "schedule's activation model does not match this "
                     "runtime: recompile the plan with this version's planc); "
                     "memory exceeds the plan by up to that much\n",
                     rank.rank, static_cast<long long>(step),
                     formatBytes(result.unplannedSaveBytes).c_str());
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
          last, std::chrono::duration<double>(Clock::now() - start).count());

      if (!checkpointing)
        continue;
      stopSignal = agreeOnStop(*comm);
      bool due = (options.checkpointEvery > 0 &&
                  step % options.checkpointEvery == 0) ||
                 step == steps || stopSignal != 0;
      if (due) {
        rt::CheckpointInfo info;
        info.step = step;
        info.seed = seed;
        info.data = dataSpec;
        info.sequencesConsumed = data->sequencesConsumed(step, globalBatch);
        info.globalBatch = globalBatch;
        rt::SaveOptions saveOptions;
        saveOptions.keep = options.keep;
        if (fault && fault->kind == FaultInjection::Kind::Save)
          saveOptions.afterShardWritten = [&fault, &rank,
                                           step](const std::string &tmpPath) {
            injectSaveFault(fault, rank.rank, step, tmpPath);
          };
        rt::SaveResult saved =
            rt::saveCheckpoint(options.checkpointDir, info, schedule, *executor,
                               *comm, saveOptions);
        char line[64];
        std::snprintf(line, sizeof(line), "%.2f", saved.seconds);
        progress.message("plan-run: checkpoint step " + std::to_string(step) +
                         ": " + formatBytes(saved.bytes) + " in " + line +
                         " s -> " + saved.directory);
        if (stopSignal != 0) {
          if (reports) {
            std::fprintf(stderr,
                         "plan-run: stopped after step %lld (%s); checkpoint "
                         "%s; resume with --resume %s\n",
                         static_cast<long long>(step), signalName(stopSignal),
                         saved.directory.c_str(),
                         options.checkpointDir.c_str());
            std::fflush(stderr);
          }
          break;
        }
      }
    }
    if (watch)
      watch->stop();
    finish(*store, rank, timeout);
    progress.finish(last, ran,
                    std::chrono::duration<double>(Clock::now() - start).count(),
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
