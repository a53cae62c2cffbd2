//===- Rank.cpp - One rank of a run: rendezvous, then the training loop ---===//

#include "Rank.h"

#include "Comm.h"
#include "Data.h"
#include "Executor.h"
#include "FaultInjection.h"
#include "Metrics.h"
#include "Model.h"
#include "Progress.h"
#include "SafeTensors.h"

#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
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
char gTermMessage[128];
char gIntMessage[128];

void exitOnSignal(int sig) {
  const char *msg = sig == SIGINT ? gIntMessage : gTermMessage;
  (void)!::write(STDERR_FILENO, msg, std::strlen(msg));
  ::_exit(128 + sig);
}

void installSignalHandlers(const std::string &prefix) {
  std::snprintf(gTermMessage, sizeof(gTermMessage),
                "%sterminated (SIGTERM); exiting without a checkpoint\n",
                prefix.c_str());
  std::snprintf(gIntMessage, sizeof(gIntMessage),
                "%sinterrupted (SIGINT); exiting without a checkpoint\n",
                prefix.c_str());
  struct sigaction action {};
  action.sa_handler = exitOnSignal;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGTERM, &action, nullptr);
  ::sigaction(SIGINT, &action, nullptr);
}

/// Ends this rank when another rank has failed or the store (on rank 0) is
/// gone, even while the training thread is stuck outside any collective that
/// would time out. Uses its own store connection. Exits with
/// kStoppedForPeerExitCode, which tells a launcher this rank is not the cause.
class FailureWatch {
public:
  FailureWatch(c10::intrusive_ptr<c10d::Store> store, std::string prefix)
      : store_(std::move(store)), prefix_(std::move(prefix)),
        thread_([this] { watch(); }) {}
  ~FailureWatch() { stop(); }
  FailureWatch(const FailureWatch &) = delete;
  FailureWatch &operator=(const FailureWatch &) = delete;

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
    while (!wake_.wait_for(lock, std::chrono::milliseconds(500),
                           [this] { return stopping_; })) {
      std::string message;
      try {
        if (!store_->check({kFailedKey}))
          continue;
        std::vector<uint8_t> value = store_->get(kFailedKey);
        message = prefix_ + "stopping because " +
                  std::string(value.begin(), value.end()) + "\n";
      } catch (const std::exception &e) {
        message = prefix_ + "lost the rendezvous store (" + reason(e) +
                  "); stopping\n";
      }
      std::fputs(message.c_str(), stderr);
      std::fflush(stderr);
      ::_exit(kStoppedForPeerExitCode);
    }
  }

  c10::intrusive_ptr<c10d::Store> store_;
  std::string prefix_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

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

} // namespace

std::string messagePrefix(const RankInfo &rank) {
  if (rank.world == 1)
    return "plan-run: ";
  return "plan-run: rank " + std::to_string(rank.rank) + ": ";
}

int runRank(const RunOptions &options, const RankInfo &rank,
            const Schedule &schedule) {
  std::string prefix = messagePrefix(rank);
  installSignalHandlers(prefix);

  auto timeout =
      std::chrono::milliseconds(std::llround(options.timeoutSeconds * 1000.0));
  // Declared outside the try: an error must not close this rank's Gloo
  // connections (by unwinding) before it has told the other ranks why.
  c10::intrusive_ptr<c10d::Store> store;
  std::unique_ptr<FailureWatch> watch;
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
    int64_t steps = options.steps > 0 ? options.steps : schedule.train.steps;
    if (steps <= 0)
      throw std::runtime_error(
          options.file + ": the schedule sets no train.steps; pass --steps K");
    if (rank.rank == 0 && schedule.train.steps > 0 &&
        steps > schedule.train.steps &&
        schedule.train.lrSchedule.kind != "constant")
      std::fprintf(stderr,
                   "plan-run: warning: running %lld steps, but the %s "
                   "learning-rate schedule ends at train.steps = %lld; later "
                   "steps keep its final rate\n",
                   static_cast<long long>(steps),
                   schedule.train.lrSchedule.kind.c_str(),
                   static_cast<long long>(schedule.train.steps));
    uint64_t seed = options.seed ? *options.seed
                                 : static_cast<uint64_t>(schedule.train.seed);
    std::optional<FaultInjection> fault = faultFromEnvironment();
    // Before the rendezvous: a path that cannot be written fails at once.
    const bool reports = rank.rank == 0;
    std::unique_ptr<MetricsFile> metrics;
    if (reports && !options.metrics.empty())
      metrics = std::make_unique<MetricsFile>(options.metrics);

    store = rendezvous(rank, timeout);
    comm =
        rt::Comm::createGloo(store, rank.rank, rank.world, schedule, timeout);
    if (rank.world > 1)
      watch = std::make_unique<FailureWatch>(store->clone(), prefix);

    at::Device device(at::kCPU);
    model = rt::Model::create(schedule, device);
    executor = std::make_unique<rt::Executor>(schedule, *model, *comm, device);
    executor->setTotalSteps(steps);
    if (options.init.empty())
      executor->initState(seed);
    else
      executor->loadState(*rt::openTensorSource(options.init, schedule.model));
    std::unique_ptr<rt::DataSource> data =
        rt::DataSource::open(options.data, schedule.model.vocab, seed);

    // Every rank is a data-parallel rank under every sharding strategy (the
    // mesh is replicate x shard, all of it data-parallel): each reads its own
    // slice of the global batch.
    const int64_t dpRank = rank.rank, dpSize = rank.world;
    const bool fp16 = schedule.train.precision.rfind("fp16", 0) == 0;
    Progress progress(reports ? Progress::styleFor(options.quiet)
                              : Progress::Style::Quiet,
                      steps);

    Clock::time_point start = Clock::now();
    StepMetrics last;
    int64_t tokens = 0;
    for (int64_t step = 1; step <= steps; ++step) {
      injectFault(fault, rank.rank, step);
      Clock::time_point stepStart = Clock::now();
      std::vector<rt::MicroBatch> batches = data->batches(
          step, schedule.microBatches, dpRank, dpSize,
          schedule.train.microBatch, schedule.train.seqLen, device);
      rt::StepResult result = executor->runStep(step, batches);
      double stepTime =
          std::chrono::duration<double>(Clock::now() - stepStart).count();

      last = StepMetrics{};
      last.step = result.step;
      last.loss = result.loss;
      last.lr = result.lr;
      last.gradNorm = result.gradNorm;
      last.tokens = result.tokens;
      last.stepTimeS = stepTime;
      last.peakBytes = result.peakBytes;
      if (fp16) {
        last.lossScale = result.lossScale;
        last.skipped = result.skipped;
      }
      tokens += result.tokens;
      if (metrics)
        metrics->append(last);
      progress.step(
          last, std::chrono::duration<double>(Clock::now() - start).count());
    }
    if (watch)
      watch->stop();
    finish(*store, rank, timeout);
    progress.finish(last, steps,
                    std::chrono::duration<double>(Clock::now() - start).count(),
                    tokens);
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
