//===- bench_plan_phases.cpp - Where a plan-run step's time goes ----------===//
//
// Runs a schedule like plan-run does (Gloo over a FileStore, one forked
// process per rank, the runtime's init and synthetic data) with the Model
// wrapped in a decorator that timestamps every compute call, and splits rank
// 0's step time into phases:
//
//   forward   step start .. the loss op (all-gathers + forward compute)
//   backward  the loss op .. the end of the last unit's backward
//   tail      .. the end of runStep (last reduce-scatter wait, optimizer
//             steps, the metrics loss all-reduce)
//
// and each of the first two into the model's compute and the rest (the
// executor's own work and waits on collectives). docs/benchmarks.md explains
// how to read it.
//
//   plan-bench-phases FILE.sched --steps K [--warmup W] [--threads N]
//
//===----------------------------------------------------------------------===//

#include "Comm.h"
#include "Data.h"
#include "Executor.h"
#include "Model.h"
#include "ScheduleFile.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/distributed/c10d/FileStore.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using plan::rt::Schedule;

/// One step's split, in seconds.
struct Phases {
  double forward = 0, forwardCompute = 0;
  double backward = 0, backwardCompute = 0;
  double tail = 0, total = 0;
};

/// Forwards every call to the runtime's model and adds its duration to the
/// phase it falls in; the phase changes at the loss op.
class TimedModel final : public plan::rt::Model {
public:
  explicit TimedModel(std::unique_ptr<plan::rt::Model> inner)
      : inner_(std::move(inner)) {}

  void beginStep() {
    phases_ = Phases{};
    start_ = lastCompute_ = lossAt_ = Clock::now();
    inBackward_ = false;
  }
  Phases endStep() {
    Clock::time_point end = Clock::now();
    auto seconds = [](Clock::time_point a, Clock::time_point b) {
      return std::chrono::duration<double>(b - a).count();
    };
    phases_.forward = seconds(start_, lossAt_);
    phases_.backward = seconds(lossAt_, lastCompute_);
    phases_.tail = seconds(lastCompute_, end);
    phases_.total = seconds(start_, end);
    return phases_;
  }

  void initUnit(int64_t unit, uint64_t seed, at::Tensor out,
                at::Tensor frozen) override {
    inner_->initUnit(unit, seed, out, frozen);
  }
  void loadUnit(int64_t unit, const plan::rt::TensorSource &source,
                uint64_t seed, at::Tensor out, at::Tensor frozen) override {
    inner_->loadUnit(unit, source, seed, out, frozen);
  }
  void setMicroBatch(int64_t mb, plan::rt::MicroBatch batch) override {
    inner_->setMicroBatch(mb, std::move(batch));
  }
  void forward(int64_t unit, int64_t mb, const plan::rt::UnitWeights &weights,
               const at::Tensor &saves, bool keepGraph,
               const plan::rt::UnitPart &part) override {
    timed([&] { inner_->forward(unit, mb, weights, saves, keepGraph, part); });
  }
  void recompute(int64_t unit, int64_t mb, const plan::rt::UnitWeights &weights,
                 const at::Tensor &input, const at::Tensor &saves,
                 const plan::rt::UnitPart &part) override {
    timed([&] { inner_->recompute(unit, mb, weights, input, saves, part); });
  }
  at::Tensor loss(int64_t unit, int64_t mb, double scale, double lossScale,
                  const at::Tensor &stats) override {
    at::Tensor value = inner_->loss(unit, mb, scale, lossScale, stats);
    if (!inBackward_) {
      lossAt_ = lastCompute_ = Clock::now();
      inBackward_ = true;
    }
    return value;
  }
  void backward(int64_t unit, int64_t mb, const plan::rt::UnitWeights &weights,
                const at::Tensor &activations, const at::Tensor &grads,
                const at::Tensor &tiedGrads,
                const plan::rt::UnitPart &part) override {
    timed([&] {
      inner_->backward(unit, mb, weights, activations, grads, tiedGrads, part);
    });
  }
  void reset() override { inner_->reset(); }

private:
  template <typename F> void timed(F &&call) {
    Clock::time_point start = Clock::now();
    call();
    lastCompute_ = Clock::now();
    double seconds =
        std::chrono::duration<double>(lastCompute_ - start).count();
    (inBackward_ ? phases_.backwardCompute : phases_.forwardCompute) += seconds;
  }

  std::unique_ptr<plan::rt::Model> inner_;
  Phases phases_;
  Clock::time_point start_, lastCompute_, lossAt_;
  bool inBackward_ = false;
};

struct Options {
  std::string file;
  int64_t steps = 0, warmup = 2, threads = 0;
};

Options parseOptions(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto count = [&]() -> int64_t {
      if (i + 1 >= argc)
        throw std::invalid_argument(arg + " needs a value");
      char *end = nullptr;
      long long v = std::strtoll(argv[++i], &end, 10);
      if (!*argv[i] || *end || v < 0)
        throw std::invalid_argument(arg + " needs a non-negative integer");
      return v;
    };
    if (arg == "--steps")
      o.steps = count();
    else if (arg == "--warmup")
      o.warmup = count();
    else if (arg == "--threads")
      o.threads = count();
    else if (!arg.empty() && arg[0] != '-' && o.file.empty())
      o.file = arg;
    else
      throw std::invalid_argument("unexpected argument '" + arg + "'");
  }
  if (o.file.empty() || o.steps <= o.warmup)
    throw std::invalid_argument("usage: plan-bench-phases FILE.sched --steps K "
                                "[--warmup W < K] [--threads N]");
  return o;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int runRank(const Options &o, const plan::rt::ValidSchedule &s, int rank,
            const std::string &storePath) {
  if (o.threads > 0)
    at::set_num_threads(static_cast<int>(o.threads));
  int world = static_cast<int>(s->worldSize());
  auto store = c10::make_intrusive<c10d::FileStore>(storePath, world);
  std::unique_ptr<plan::rt::Comm> comm = plan::rt::Comm::createGloo(
      store, rank, world, s, std::chrono::seconds(60));
  auto backend = plan::rt::DeviceBackend::createCpu();
  at::Device device = backend->device();
  TimedModel model(plan::rt::Model::create(s, device));
  plan::rt::Executor executor(s, model, *comm, *backend);
  executor.setTotalSteps(o.steps);
  uint64_t seed = static_cast<uint64_t>(s->train.seed);
  executor.initState(seed);
  auto data = plan::rt::DataSource::open("synthetic", s->model.vocab, seed);

  std::vector<Phases> measured;
  for (int64_t step = 1; step <= o.steps; ++step) {
    model.beginStep();
    auto batches = data->batches(step, s->microBatches, rank, world,
                                 s->train.microBatch, s->train.seqLen, device);
    plan::rt::StepResult result = executor.runStep(step, batches);
    Phases p = model.endStep();
    if (rank == 0)
      std::printf("step %lld loss %.6f total %.4f forward %.4f (compute "
                  "%.4f) backward %.4f (compute %.4f) tail %.4f\n",
                  static_cast<long long>(step), result.loss, p.total, p.forward,
                  p.forwardCompute, p.backward, p.backwardCompute, p.tail);
    if (step > o.warmup)
      measured.push_back(p);
  }
  if (rank == 0) {
    auto med = [&](double Phases::*field) {
      std::vector<double> v;
      for (const Phases &p : measured)
        v.push_back(p.*field);
      return median(v);
    };
    double total = med(&Phases::total);
    double fc = med(&Phases::forwardCompute),
           bc = med(&Phases::backwardCompute);
    double f = med(&Phases::forward), b = med(&Phases::backward);
    double t = med(&Phases::tail);
    std::printf("world %d, %d threads, medians over %zu steps (s):\n", world,
                at::get_num_threads(), measured.size());
    std::printf("  total    %.4f\n", total);
    std::printf("  forward  %.4f = compute %.4f + other %.4f\n", f, fc, f - fc);
    std::printf("  backward %.4f = compute %.4f + other %.4f\n", b, bc, b - bc);
    std::printf("  tail     %.4f (last reduce-scatter wait, optimizer, loss "
                "all-reduce)\n",
                t);
    std::printf("  not compute: %.1f%% of the step\n",
                100.0 * (total - fc - bc) / total);
  }
  std::fflush(stdout);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  try {
    Options o = parseOptions(argc, argv);
    plan::rt::ValidSchedule s = plan::rt::readScheduleFile(o.file);
    int world = static_cast<int>(s->worldSize());
    char dir[] = "/tmp/plan-bench-phases-XXXXXX";
    if (!::mkdtemp(dir))
      throw std::runtime_error("cannot create a temporary directory");
    std::string storePath = std::string(dir) + "/store";
    // Fork before any rank creates threads (Gloo, OpenMP).
    std::vector<pid_t> children;
    for (int rank = 1; rank < world; ++rank) {
      pid_t pid = ::fork();
      if (pid < 0)
        throw std::runtime_error("fork failed");
      if (pid == 0) {
        int rc = 1;
        try {
          rc = runRank(o, s, rank, storePath);
        } catch (const std::exception &e) {
          std::string what = e.what();
          std::fprintf(stderr, "plan-bench-phases: rank %d: %s\n", rank,
                       what.substr(0, what.find('\n')).c_str());
        }
        std::fflush(stdout);
        ::_exit(rc);
      }
      children.push_back(pid);
    }
    int rc = runRank(o, s, 0, storePath);
    for (pid_t pid : children) {
      int status = 0;
      ::waitpid(pid, &status, 0);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        rc = 1;
    }
    ::unlink(storePath.c_str());
    ::rmdir(dir);
    return rc;
  } catch (const std::exception &e) {
    std::string what = e.what();
    std::fprintf(stderr, "plan-bench-phases: %s\n",
                 what.substr(0, what.find('\n')).c_str());
    return 1;
  }
}
