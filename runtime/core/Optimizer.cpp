//===- Optimizer.cpp - AdamW / SGD on flat fp32 shards --------------------===//

#include "Optimizer.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace plan::rt {

std::vector<std::pair<int64_t, int64_t>>
parameterRanges(const Schedule &schedule, const Group &group, int64_t first,
                int64_t numel,
                const std::function<bool(const Param &)> &select) {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  const int64_t end = first + numel;
  int64_t unitStart = 0; // of the unit in the group's flat vector
  for (const std::string &unitName : group.units) {
    const Unit *unit = nullptr;
    for (const Unit &u : schedule.units)
      if (u.name == unitName)
        unit = &u;
    if (!unit)
      throw std::runtime_error("group '" + group.name + "' names unit '" +
                               unitName + "', which the schedule lacks");
    for (const Param &param : unit->params) {
      // Frozen parameters (a LoRA base) are not in the trained elements.
      if (!param.tiedTo.empty() || param.frozen || !select(param))
        continue;
      int64_t size = param.localNumel(schedule.tensor);
      int64_t b = std::max(unitStart + param.offset, first);
      int64_t e = std::min(unitStart + param.offset + size, end);
      if (b >= e)
        continue;
      if (!ranges.empty() && ranges.back().second == b - first)
        ranges.back().second = e - first;
      else
        ranges.emplace_back(b - first, e - first);
    }
    unitStart += unit->numel;
  }
  return ranges;
}

DecayMask decayMask(const Schedule &schedule, const Group &group, int64_t first,
                    int64_t numel, WeightDecayScope scope) {
  DecayMask mask;
  if (scope == WeightDecayScope::All)
    return mask;
  mask.all = false;
  // Matrices: parameters of two or more dimensions.
  mask.ranges =
      parameterRanges(schedule, group, first, numel, [](const Param &param) {
        return param.shape.size() >= 2;
      });
  return mask;
}

namespace {

/// Calls `f(begin, end, decayed)` for consecutive ranges covering [begin,
/// end) of a buffer, each wholly decayed or not under `mask`.
template <typename F>
void forEachDecayRun(const DecayMask &mask, int64_t begin, int64_t end, F f) {
  if (mask.all) {
    if (begin < end)
      f(begin, end, true);
    return;
  }
  int64_t at = begin;
  for (const auto &[b, e] : mask.ranges) {
    if (e <= at)
      continue;
    if (b >= end)
      break;
    if (b > at)
      f(at, b, false);
    int64_t stop = std::min(e, end);
    f(std::max(b, at), stop, true);
    at = stop;
  }
  if (at < end)
    f(at, end, false);
}

} // namespace

double clipCoefficient(double totalNorm, double maxNorm) {
  if (maxNorm <= 0)
    return 1.0;
  // torch computes the coefficient as an fp32 tensor; round the same way.
  float coef =
      static_cast<float>(maxNorm) / (static_cast<float>(totalNorm) + 1e-6f);
  return coef < 1.0f ? coef : 1.0;
}

at::Tensor stepGradient(const at::Tensor &grads, double invLossScale,
                        double clipCoef) {
  at::Tensor grad = grads.to(at::kFloat);
  bool copied = grads.scalar_type() != at::kFloat;
  auto scaleBy = [&](double factor) {
    if (factor == 1.0)
      return;
    // A fresh tensor the first time: the schedule's buffer is only read.
    if (copied) {
      grad.mul_(static_cast<float>(factor));
    } else {
      grad = grad.mul(static_cast<float>(factor));
      copied = true;
    }
  };
  scaleBy(invLossScale);
  scaleBy(clipCoef);
  return grad;
}

void adamwStep(at::Tensor &params, const at::Tensor &grad, at::Tensor &expAvg,
               at::Tensor &expAvgSq, const OptimizerConfig &config, double lr,
               int64_t t, const DecayMask &mask) {
  // torch/optim/adam.py _single_tensor_adam (decoupled_weight_decay=True),
  // with the same Python-float (double) scalars; a parameter of a group
  // without decay is not multiplied at all.
  if (mask.all)
    params.mul_(1 - lr * config.weightDecay);
  else
    forEachDecayRun(
        mask, 0, params.numel(), [&](int64_t b, int64_t e, bool decayed) {
          if (decayed)
            params.narrow(0, b, e - b).mul_(1 - lr * config.weightDecay);
        });
  expAvg.lerp_(grad, 1 - config.beta1);
  expAvgSq.mul_(config.beta2).addcmul_(grad, grad, 1 - config.beta2);
  double biasCorrection1 = 1 - std::pow(config.beta1, static_cast<double>(t));
  double biasCorrection2 = 1 - std::pow(config.beta2, static_cast<double>(t));
  double stepSize = lr / biasCorrection1;
  double biasCorrection2Sqrt = std::sqrt(biasCorrection2);
  at::Tensor denom = (expAvgSq.sqrt() / biasCorrection2Sqrt).add_(config.eps);
  params.addcdiv_(expAvg, denom, -stepSize);
}

namespace {

// adamwStep's element-wise math over one block, operation by operation as
// ATen's fp32 CPU kernels compute it (each step rounded to fp32; lerp and
// addcmul are fused, as their kernels' vec::fmadd):
//   mul_(s)             p * float(s)
//   lerp_(g, w)         fma(w, g - m, m), or fma(w - 1, g - m, g) if w >= 0.5
//   mul_(b2)            v * float(b2)
//   addcmul_(g, g, c)   fma(float(c) * g, g, v)
//   sqrt()              ATen's own sqrt kernel (vectorized math library, not
//                       always the correctly rounded sqrtf): called on the
//                       block, between the two loops
//   / s                 sqrt(v) / float(s)
//   add_(eps)           d + float(eps)
//   addcdiv_(m, d, s)   p + (float(s) * m) / d
// No other contraction into FMA is allowed here (fp-contract off), or the
// fp32 results would differ from the unfused kernels'.
struct AdamWScalars {
  float decay, weight, beta2, oneMinusBeta2, biasCorrection2Sqrt, eps, step;
  bool smallWeight;
};

#if defined(__GNUC__) && !defined(__clang__)
#define PLAN_NO_FP_CONTRACT __attribute__((optimize("fp-contract=off")))
#else
#define PLAN_NO_FP_CONTRACT
#endif
#if defined(__x86_64__)
#define PLAN_ADAMW_TARGET __attribute__((target("avx2,fma")))
#else
#define PLAN_ADAMW_TARGET
#endif

#if defined(__x86_64__) || defined(__aarch64__)
constexpr bool kHaveFusedAdamWLoop = true;

// p, m, v of [0, n) up to the square root.
PLAN_ADAMW_TARGET PLAN_NO_FP_CONTRACT void
adamwMoments(float *__restrict p, const float *__restrict g,
             float *__restrict m, float *__restrict v, int64_t n,
             const AdamWScalars &s) {
#ifdef __clang__
#pragma clang fp contract(off)
#endif
  for (int64_t i = 0; i < n; ++i) {
    float gi = g[i];
    p[i] = p[i] * s.decay;
    float mi = m[i];
    float diff = gi - mi;
    m[i] = s.smallWeight ? std::fma(s.weight, diff, mi)
                         : std::fma(s.weight - 1.0f, diff, gi);
    float vi = v[i] * s.beta2;
    v[i] = std::fma(s.oneMinusBeta2 * gi, gi, vi);
  }
}

// The update of [0, n) from sqrt(v) (`root`).
PLAN_ADAMW_TARGET PLAN_NO_FP_CONTRACT void
adamwUpdate(float *__restrict p, const float *__restrict m,
            const float *__restrict root, int64_t n, const AdamWScalars &s) {
#ifdef __clang__
#pragma clang fp contract(off)
#endif
  for (int64_t i = 0; i < n; ++i) {
    float denom = root[i] / s.biasCorrection2Sqrt;
    denom = denom + s.eps;
    float update = (s.step * m[i]) / denom;
    p[i] = p[i] + update;
  }
}
#else
constexpr bool kHaveFusedAdamWLoop = false;
void adamwMoments(float *, const float *, float *, float *, int64_t,
                  const AdamWScalars &) {}
void adamwUpdate(float *, const float *, const float *, int64_t,
                 const AdamWScalars &) {}
#endif

bool canRunFusedLoop() {
#if defined(__x86_64__)
  static const bool fma =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return fma;
#else
  return kHaveFusedAdamWLoop;
#endif
}

bool denseFloat(const at::Tensor &t) {
  return t.device().is_cpu() && t.scalar_type() == at::kFloat &&
         t.is_contiguous();
}

} // namespace

bool adamwStepParallel(at::Tensor &params, const at::Tensor &grad,
                       at::Tensor &expAvg, at::Tensor &expAvgSq,
                       const OptimizerConfig &config, double lr, int64_t t,
                       const DecayMask &mask) {
  int64_t n = params.numel();
  if (!canRunFusedLoop() || !denseFloat(params) || !denseFloat(grad) ||
      !denseFloat(expAvg) || !denseFloat(expAvgSq) || grad.numel() != n ||
      expAvg.numel() != n || expAvgSq.numel() != n)
    return false;
  // The scalars exactly as adamwStep hands them to ATen (Python floats,
  // i.e. doubles, that the fp32 kernels round to float).
  double biasCorrection1 = 1 - std::pow(config.beta1, static_cast<double>(t));
  double biasCorrection2 = 1 - std::pow(config.beta2, static_cast<double>(t));
  double stepSize = lr / biasCorrection1;
  AdamWScalars s;
  s.decay = static_cast<float>(1 - lr * config.weightDecay);
  s.weight = static_cast<float>(1 - config.beta1);
  s.smallWeight = std::abs(s.weight) < 0.5f;
  s.beta2 = static_cast<float>(config.beta2);
  s.oneMinusBeta2 = static_cast<float>(1 - config.beta2);
  s.biasCorrection2Sqrt = static_cast<float>(std::sqrt(biasCorrection2));
  s.eps = static_cast<float>(config.eps);
  s.step = static_cast<float>(-stepSize);
  AdamWScalars undecayed = s;
  undecayed.decay = 1.0f; // p * 1.0f is p: as no mul_ at all
  float *p = params.data_ptr<float>();
  const float *g = grad.const_data_ptr<float>();
  float *m = expAvg.data_ptr<float>();
  float *v = expAvgSq.data_ptr<float>();
  // Blocks of 32 Ki elements (640 KiB of the five streams, cache-resident
  // between the two loops), at least 4 blocks per task.
  constexpr int64_t kBlock = int64_t{1} << 15;
  at::parallel_for(0, n, 4 * kBlock, [&](int64_t begin, int64_t end) {
    at::Tensor root = at::empty({std::min(kBlock, end - begin)}, at::kFloat);
    for (int64_t b = begin; b < end; b += kBlock) {
      int64_t len = std::min(kBlock, end - b);
      forEachDecayRun(mask, b, b + len,
                      [&](int64_t rb, int64_t re, bool decayed) {
                        adamwMoments(p + rb, g + rb, m + rb, v + rb, re - rb,
                                     decayed ? s : undecayed);
                      });
      at::Tensor blockRoot = root.narrow(0, 0, len);
      at::sqrt_out(blockRoot, expAvgSq.narrow(0, b, len));
      adamwUpdate(p + b, m + b, blockRoot.const_data_ptr<float>(), len, s);
    }
  });
  return true;
}

void accumulateInto(const at::Tensor &dst, const at::Tensor &src) {
  const at::ScalarType common =
      at::promote_types(dst.scalar_type(), src.scalar_type());
  if (!dst.device().is_cpu() || !src.device().is_cpu() ||
      dst.scalar_type() == src.scalar_type() || !dst.is_contiguous() ||
      !src.is_contiguous() || dst.numel() != src.numel() ||
      dst.scalar_type() == at::kBool || !at::isFloatingType(common)) {
    dst.add_(src);
    return;
  }
  const at::Tensor d = dst.view({-1}), s = src.view({-1});
  constexpr int64_t kBlock = int64_t{1} << 15;
  at::parallel_for(0, d.numel(), kBlock, [&](int64_t begin, int64_t end) {
    // Each operand in the promoted type: the one already in it as it is,
    // the other copied (exactly: promotion only widens) into a block.
    const int64_t most = std::min(kBlock, end - begin);
    at::Tensor dTmp, sTmp;
    if (d.scalar_type() != common)
      dTmp = at::empty({most}, d.options().dtype(common));
    if (s.scalar_type() != common)
      sTmp = at::empty({most}, s.options().dtype(common));
    for (int64_t b = begin; b < end; b += kBlock) {
      const int64_t len = std::min(kBlock, end - b);
      at::Tensor db = d.narrow(0, b, len), sb = s.narrow(0, b, len);
      at::Tensor dc = dTmp.defined() ? dTmp.narrow(0, 0, len).copy_(db) : db;
      at::Tensor sc = sTmp.defined() ? sTmp.narrow(0, 0, len).copy_(sb) : sb;
      dc.add_(sc);
      if (dTmp.defined())
        db.copy_(dc); // rounded once to dst's type, as add_ rounds
    }
  });
}

void fusedAdamWStep(at::Tensor &params, const at::Tensor &grad,
                    at::Tensor &expAvg, at::Tensor &expAvgSq,
                    const OptimizerConfig &config, double lr, int64_t t,
                    const DecayMask &mask) {
  // torch.optim.AdamW(fused=True): the state step is an fp32 tensor on the
  // parameters' device that the optimizer increments before the kernel.
  at::Tensor stepCount =
      at::full({}, static_cast<double>(t), params.options().dtype(at::kFloat));
  if (mask.all) {
    at::_fused_adamw_({params}, {grad}, {expAvg}, {expAvgSq}, {}, {stepCount},
                      lr, config.beta1, config.beta2, config.weightDecay,
                      config.eps, /*amsgrad=*/false, /*maximize=*/false);
    return;
  }
  // Torch's two param groups: one call per group, each over its ranges.
  for (bool decayed : {true, false}) {
    std::vector<at::Tensor> p, g, m, v, steps;
    forEachDecayRun(mask, 0, params.numel(),
                    [&](int64_t b, int64_t e, bool isDecayed) {
                      if (isDecayed != decayed)
                        return;
                      p.push_back(params.narrow(0, b, e - b));
                      g.push_back(grad.narrow(0, b, e - b));
                      m.push_back(expAvg.narrow(0, b, e - b));
                      v.push_back(expAvgSq.narrow(0, b, e - b));
                      steps.push_back(stepCount);
                    });
    if (!p.empty())
      at::_fused_adamw_(p, g, m, v, {}, steps, lr, config.beta1, config.beta2,
                        decayed ? config.weightDecay : 0.0, config.eps,
                        /*amsgrad=*/false, /*maximize=*/false);
  }
}

void sgdStep(at::Tensor &params, const at::Tensor &grad,
             at::Tensor &momentumBuf, const OptimizerConfig &config, double lr,
             int64_t t, const DecayMask &mask) {
  // torch/optim/sgd.py _single_tensor_sgd, dampening 0, nesterov off.
  at::Tensor dp = grad;
  if (config.weightDecay != 0 && mask.all) {
    dp = dp.add(params, config.weightDecay);
  } else if (config.weightDecay != 0) {
    dp = grad.clone(); // as many bytes as the add's result
    forEachDecayRun(
        mask, 0, params.numel(), [&](int64_t b, int64_t e, bool decayed) {
          if (decayed)
            dp.narrow(0, b, e - b)
                .add_(params.narrow(0, b, e - b), config.weightDecay);
        });
  }
  if (config.momentum != 0) {
    if (t == 1)
      momentumBuf.copy_(dp);
    else
      momentumBuf.mul_(config.momentum).add_(dp);
    dp = momentumBuf;
  }
  params.add_(dp, -lr);
}

void optimizerUpdate(const OptimizerConfig &config, at::Tensor &params,
                     const at::Tensor &grad, std::vector<at::Tensor> &state,
                     double lr, int64_t t, const DecayMask &mask) {
  auto expected = static_cast<size_t>(optimizerStateCount(config));
  if (state.size() != expected)
    throw std::runtime_error(std::string(toString(config.kind)) + " needs " +
                             std::to_string(expected) +
                             " state buffers, the schedule gives " +
                             std::to_string(state.size()));
  switch (config.kind) {
  case OptimizerKind::AdamW:
    if (params.is_cuda()) {
      fusedAdamWStep(params, grad, state[0], state[1], config, lr, t, mask);
      return;
    }
    if (params.numel() > kParallelAdamWMinNumel &&
        adamwStepParallel(params, grad, state[0], state[1], config, lr, t,
                          mask))
      return;
    adamwStep(params, grad, state[0], state[1], config, lr, t, mask);
    return;
  case OptimizerKind::SGD: {
    at::Tensor none;
    sgdStep(params, grad, expected ? state[0] : none, config, lr, t, mask);
    return;
  }
  }
}

double DynamicLossScale::update(double scale, bool foundInf) {
  // torch's _amp_update_scale_ with growth_factor 2, backoff_factor 0.5.
  if (foundInf) {
    growthTracker = 0;
    return scale * 0.5;
  }
  if (++growthTracker == growthInterval) {
    growthTracker = 0;
    double grown = scale * 2.0;
    if (std::isfinite(static_cast<float>(grown)))
      return grown;
  }
  return scale;
}

} // namespace plan::rt
