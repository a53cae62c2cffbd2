//===- Optimizer.cpp - AdamW / SGD on flat fp32 shards --------------------===//

#include "Optimizer.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace plan::rt {

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
               int64_t t) {
  // torch/optim/adam.py _single_tensor_adam (decoupled_weight_decay=True),
  // with the same Python-float (double) scalars.
  params.mul_(1 - lr * config.weightDecay);
  expAvg.lerp_(grad, 1 - config.beta1);
  expAvgSq.mul_(config.beta2).addcmul_(grad, grad, 1 - config.beta2);
  double biasCorrection1 = 1 - std::pow(config.beta1, static_cast<double>(t));
  double biasCorrection2 = 1 - std::pow(config.beta2, static_cast<double>(t));
  double stepSize = lr / biasCorrection1;
  double biasCorrection2Sqrt = std::sqrt(biasCorrection2);
  at::Tensor denom = (expAvgSq.sqrt() / biasCorrection2Sqrt).add_(config.eps);
  params.addcdiv_(expAvg, denom, -stepSize);
}

void sgdStep(at::Tensor &params, const at::Tensor &grad,
             at::Tensor &momentumBuf, const OptimizerConfig &config, double lr,
             int64_t t) {
  // torch/optim/sgd.py _single_tensor_sgd, dampening 0, nesterov off.
  at::Tensor dp = grad;
  if (config.weightDecay != 0)
    dp = dp.add(params, config.weightDecay);
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
                     double lr, int64_t t) {
  if (config.kind == "adamw") {
    if (state.size() != 2)
      throw std::runtime_error("adamw needs 2 state buffers (exp_avg, "
                               "exp_avg_sq), the schedule gives " +
                               std::to_string(state.size()));
    adamwStep(params, grad, state[0], state[1], config, lr, t);
    return;
  }
  if (config.kind == "sgd") {
    size_t expected = config.momentum != 0 ? 1 : 0;
    if (state.size() != expected)
      throw std::runtime_error(
          "sgd with momentum " + std::to_string(config.momentum) + " needs " +
          std::to_string(expected) + " state buffers, the schedule gives " +
          std::to_string(state.size()));
    at::Tensor none;
    sgdStep(params, grad, expected ? state[0] : none, config, lr, t);
    return;
  }
  throw std::runtime_error("unknown optimizer '" + config.kind +
                           "' (expected adamw or sgd)");
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
