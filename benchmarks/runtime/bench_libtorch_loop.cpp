//===- bench_libtorch_loop.cpp - A schedule's model in a plain LibTorch loop
//===//
//
// The baseline of plan-run's overhead at world 1 (docs/benchmarks.md): the
// model of a schedule file trained the way a user would write it without
// plan-run, as ONE autograd graph over ordinary parameter tensors, with
// torch::optim::AdamW, in one process. Everything a step's result depends on
// is the runtime's: the initial weights come from Model::initUnit, the
// batches from DataSource, the math is runtime/models/Model.cpp's (HF Llama:
// RMSNorm, RoPE, GQA, SDPA, SwiGLU, fp32 cross-entropy), so the losses match
// plan-run's up to rounding and the step times compare the same work.
//
// A step is timed like plan-run times it (tools/plan-run/Rank.cpp): from
// fetching the step's batches to having its loss on the host.
//
//   plan-bench-loop FILE.sched --steps K [--warmup W] [--threads N]
//                   [--seed S] [--data synthetic|FILE]
//
// Prints one line per step ("step k loss L time T") and then
// "median_step_time_s X" over the steps after the warmup.
//
//===----------------------------------------------------------------------===//

#include "Data.h"
#include "Model.h"
#include "ScheduleFile.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/optim/adamw.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using plan::rt::Schedule;

class UsageError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

struct Options {
  std::string file;
  std::string data = "synthetic";
  int64_t steps = 0, warmup = 2, threads = 0;
  std::optional<uint64_t> seed;
};

int64_t parseCount(const std::string &flag, const char *text) {
  char *end = nullptr;
  long long value = std::strtoll(text, &end, 10);
  if (!*text || *end || value < 0)
    throw UsageError(flag + " needs a non-negative integer, got '" + text +
                     "'");
  return value;
}

Options parseOptions(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> const char * {
      if (i + 1 >= argc)
        throw UsageError(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--steps")
      o.steps = parseCount(arg, value());
    else if (arg == "--warmup")
      o.warmup = parseCount(arg, value());
    else if (arg == "--threads")
      o.threads = parseCount(arg, value());
    else if (arg == "--seed")
      o.seed = static_cast<uint64_t>(parseCount(arg, value()));
    else if (arg == "--data")
      o.data = value();
    else if (!arg.empty() && arg[0] == '-')
      throw UsageError("unknown option '" + arg + "'");
    else if (o.file.empty())
      o.file = arg;
    else
      throw UsageError("one schedule file only, got '" + o.file + "' and '" +
                       arg + "'");
  }
  if (o.file.empty() || o.steps == 0)
    throw UsageError("usage: plan-bench-loop FILE.sched --steps K [--warmup "
                     "W] [--threads N] [--seed S] [--data synthetic|FILE]");
  if (o.warmup >= o.steps)
    throw UsageError("--warmup " + std::to_string(o.warmup) +
                     " leaves no step of " + std::to_string(o.steps) +
                     " to measure");
  return o;
}

/// What this loop implements of a schedule: the rest of the recipe (mixed
/// precision, clipping, decay schedules, other models) is plan-run's to
/// measure against other baselines.
void checkSupported(const Schedule &s) {
  auto reject = [&](const std::string &why) {
    throw UsageError(s.planName + ": " + why +
                     "; plan-bench-loop covers fp32 Llama with AdamW, "
                     "constant learning rate, no clipping, world 1");
  };
  if (s.worldSize() != 1)
    reject("the schedule is for " + std::to_string(s.worldSize()) + " ranks");
  using namespace plan::rt;
  if (s.model.family != ModelFamily::Llama)
    reject(std::string("model family '") + toString(s.model.family) + "'");
  if (s.train.precision != Precision::FP32)
    reject(std::string("precision '") + toString(s.train.precision) + "'");
  if (s.train.optimizer.kind != OptimizerKind::AdamW)
    reject(std::string("optimizer '") + toString(s.train.optimizer.kind) + "'");
  if (s.train.lrSchedule.kind != LRScheduleKind::Constant ||
      s.train.lrSchedule.warmup != 0)
    reject(std::string("learning-rate schedule '") +
           toString(s.train.lrSchedule.kind) + "'");
  if (s.train.gradClip > 0)
    reject("gradient clipping");
}

/// The model's parameters as ordinary leaf tensors, by HF name, initialised
/// by the runtime's recipe.
std::map<std::string, at::Tensor> initialParameters(const Schedule &s,
                                                    uint64_t seed) {
  std::unique_ptr<plan::rt::Model> model =
      plan::rt::Model::create(s, at::Device(at::kCPU));
  std::map<std::string, at::Tensor> params;
  for (size_t u = 0; u < s.units.size(); ++u) {
    const plan::rt::Unit &unit = s.units[u];
    at::Tensor flat = at::empty({unit.numel}, at::kFloat);
    model->initUnit(static_cast<int64_t>(u), seed, flat);
    for (const plan::rt::Param &p : unit.params) {
      if (!p.tiedTo.empty())
        continue;
      int64_t numel = 1;
      for (int64_t d : p.shape)
        numel *= d;
      params[p.name] = flat.narrow(0, p.offset, numel)
                           .view(p.shape)
                           .clone()
                           .requires_grad_(true);
    }
  }
  for (const plan::rt::Unit &unit : s.units)
    for (const plan::rt::Param &p : unit.params)
      if (!p.tiedTo.empty())
        params[p.name] = params.at(p.tiedTo);
  return params;
}

/// HF LlamaForCausalLM, as runtime/models/Model.cpp computes it, in fp32.
class Llama {
public:
  Llama(const plan::rt::ModelConfig &config,
        std::map<std::string, at::Tensor> params, int64_t seqLen)
      : c_(config), params_(std::move(params)) {
    if (c_.ropeScaling)
      throw UsageError("rope scaling is not implemented by plan-bench-loop");
    const int64_t d = c_.hidden / c_.heads;
    at::Tensor exponents = at::arange(0, d, 2, at::kLong).to(at::kFloat) / d;
    at::Tensor invFreq = at::reciprocal(at::pow(c_.ropeTheta, exponents));
    at::Tensor freqs = at::outer(at::arange(seqLen, at::kFloat), invFreq);
    at::Tensor emb = at::cat({freqs, freqs}, -1);
    cos_ = emb.cos();
    sin_ = emb.sin();
  }

  /// Distinct parameters (a tied one once), for the optimizer.
  std::vector<at::Tensor> parameters() const {
    std::vector<at::Tensor> out;
    for (const auto &[name, t] : params_)
      if (std::none_of(out.begin(), out.end(),
                       [&](const at::Tensor &o) { return o.is_same(t); }))
        out.push_back(t);
    return out;
  }

  at::Tensor loss(const at::Tensor &tokens, const at::Tensor &targets) const {
    at::Tensor x = at::embedding(p("model.embed_tokens.weight"), tokens);
    for (int64_t l = 0; l < c_.layers; ++l)
      x = block("model.layers." + std::to_string(l), x);
    x = rmsNorm(x, p("model.norm.weight"));
    at::Tensor logits = at::linear(x, p("lm_head.weight")).to(at::kFloat);
    return at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}),
                                  targets.reshape({-1}));
  }

private:
  const at::Tensor &p(const std::string &name) const {
    auto it = params_.find(name);
    if (it == params_.end())
      throw UsageError("the schedule has no parameter '" + name + "'");
    return it->second;
  }

  at::Tensor rmsNorm(const at::Tensor &x, const at::Tensor &weight) const {
    at::Tensor h = x * at::rsqrt(x.pow(2).mean({-1}, true) + c_.normEps);
    return weight * h;
  }

  static at::Tensor rotateHalf(const at::Tensor &x) {
    int64_t half = x.size(-1) / 2;
    return at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  }

  at::Tensor block(const std::string &prefix, const at::Tensor &x) const {
    const int64_t b = x.size(0), s = x.size(1), h = c_.hidden;
    const int64_t heads = c_.heads, kv = c_.kvHeads, d = h / heads;
    at::Tensor n = rmsNorm(x, p(prefix + ".input_layernorm.weight"));
    at::Tensor q = at::linear(n, p(prefix + ".self_attn.q_proj.weight"))
                       .view({b, s, heads, d})
                       .transpose(1, 2);
    at::Tensor k = at::linear(n, p(prefix + ".self_attn.k_proj.weight"))
                       .view({b, s, kv, d})
                       .transpose(1, 2);
    at::Tensor v = at::linear(n, p(prefix + ".self_attn.v_proj.weight"))
                       .view({b, s, kv, d})
                       .transpose(1, 2);
    at::Tensor cos = cos_.narrow(0, 0, s), sin = sin_.narrow(0, 0, s);
    q = q * cos + rotateHalf(q) * sin;
    k = k * cos + rotateHalf(k) * sin;
    if (heads != kv) {
      k = k.unsqueeze(2)
              .expand({b, kv, heads / kv, s, d})
              .reshape({b, heads, s, d});
      v = v.unsqueeze(2)
              .expand({b, kv, heads / kv, s, d})
              .reshape({b, heads, s, d});
    }
    at::Tensor a = at::scaled_dot_product_attention(q, k, v, {}, 0.0, true)
                       .transpose(1, 2)
                       .contiguous()
                       .reshape({b, s, h});
    at::Tensor h1 = x + at::linear(a, p(prefix + ".self_attn.o_proj.weight"));
    n = rmsNorm(h1, p(prefix + ".post_attention_layernorm.weight"));
    at::Tensor gate = at::linear(n, p(prefix + ".mlp.gate_proj.weight"));
    at::Tensor up = at::linear(n, p(prefix + ".mlp.up_proj.weight"));
    return h1 +
           at::linear(at::silu(gate) * up, p(prefix + ".mlp.down_proj.weight"));
  }

  plan::rt::ModelConfig c_;
  std::map<std::string, at::Tensor> params_;
  at::Tensor cos_, sin_;
};

int run(const Options &o) {
  Schedule s = plan::rt::readScheduleFile(o.file);
  checkSupported(s);
  if (o.threads > 0)
    at::set_num_threads(static_cast<int>(o.threads));
  uint64_t seed = o.seed ? *o.seed : static_cast<uint64_t>(s.train.seed);

  Llama model(s.model, initialParameters(s, seed), s.train.seqLen);
  std::vector<at::Tensor> params = model.parameters();
  const plan::rt::OptimizerConfig &oc = s.train.optimizer;
  torch::optim::AdamW optimizer(params, torch::optim::AdamWOptions(oc.lr)
                                            .betas({oc.beta1, oc.beta2})
                                            .eps(oc.eps)
                                            .weight_decay(oc.weightDecay));
  std::unique_ptr<plan::rt::DataSource> data =
      plan::rt::DataSource::open(o.data, s.model.vocab, seed);

  using Clock = std::chrono::steady_clock;
  std::vector<double> times;
  const double scale = 1.0 / static_cast<double>(s.microBatches);
  for (int64_t step = 1; step <= o.steps; ++step) {
    Clock::time_point start = Clock::now();
    std::vector<plan::rt::MicroBatch> batches =
        data->batches(step, s.microBatches, 0, 1, s.train.microBatch,
                      s.train.seqLen, at::Device(at::kCPU));
    optimizer.zero_grad(/*set_to_none=*/true);
    // The mean of the micro-batches' mean losses, as plan-run reports it.
    at::Tensor total = at::zeros({}, at::kDouble);
    for (const plan::rt::MicroBatch &batch : batches) {
      at::Tensor loss = model.loss(batch.tokens, batch.targets);
      torch::autograd::backward({loss * scale});
      total += loss.detach().to(at::kDouble) * scale;
    }
    optimizer.step();
    double loss = total.item<double>();
    double seconds =
        std::chrono::duration<double>(Clock::now() - start).count();
    times.push_back(seconds);
    std::printf("step %lld loss %.9g time %.6f\n", static_cast<long long>(step),
                loss, seconds);
  }
  std::vector<double> measured(times.begin() + o.warmup, times.end());
  std::sort(measured.begin(), measured.end());
  size_t n = measured.size();
  double median =
      n % 2 ? measured[n / 2] : (measured[n / 2 - 1] + measured[n / 2]) / 2;
  std::printf("median_step_time_s %.6f (%zu steps after %lld warmup, %d "
              "threads)\n",
              median, n, static_cast<long long>(o.warmup),
              at::get_num_threads());
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  try {
    return run(parseOptions(argc, argv));
  } catch (const UsageError &e) {
    std::fprintf(stderr, "plan-bench-loop: %s\n", e.what());
    return 2;
  } catch (const std::exception &e) {
    std::string what = e.what();
    what = what.substr(0, what.find('\n'));
    std::fprintf(stderr, "plan-bench-loop: %s\n", what.c_str());
    return 1;
  }
}
