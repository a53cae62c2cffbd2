//===- Optimizer.h - AdamW / SGD on flat fp32 shards ------------*- C++ -*-===//
//
// The update of one `sched.optimizer_step`, written to give the numbers of
// torch.optim.AdamW / torch.optim.SGD (single-tensor implementation, one
// param group) on the same fp32 tensors, plus torch.nn.utils.clip_grad_norm_
// and torch.amp.GradScaler's unscale and scale update (docs/runtime.md,
// "Optimizer").
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_RUNTIME_CORE_OPTIMIZER_H
#define PLAN_RUNTIME_CORE_OPTIMIZER_H

#include "Schedule.h"

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

namespace plan::rt {

/// The elements of a flat parameter buffer that weight decay applies to:
/// every one, or those in `ranges` (sorted, disjoint [begin, end) element
/// ranges of the buffer).
struct DecayMask {
  bool all = true;
  std::vector<std::pair<int64_t, int64_t>> ranges;
};

/// The elements of `numel` elements of group `group`'s flat vector from
/// element `first` on (a rank's shard, or all of it) that hold trained
/// parameters for which `select` holds: sorted, disjoint [begin, end)
/// ranges, relative to `first` (adjacent ones merged; padding is in none).
std::vector<std::pair<int64_t, int64_t>>
parameterRanges(const Schedule &schedule, const Group &group, int64_t first,
                int64_t numel,
                const std::function<bool(const Param &)> &select);

/// The mask of `numel` elements of group `group`'s flat vector from element
/// `first` on (a rank's shard, or all of it) under `scope`: with `Matrices`,
/// the elements of parameters of two or more dimensions (linear weights,
/// embeddings), not norm scales or biases, as the HF Trainer's and
/// Megatron's parameter groups; padding is in no range.
DecayMask decayMask(const Schedule &schedule, const Group &group, int64_t first,
                    int64_t numel, WeightDecayScope scope);

/// clip_grad_norm_'s multiplier: maxNorm / (totalNorm + 1e-6), at most 1.
/// 1 when maxNorm <= 0 (clipping off).
double clipCoefficient(double totalNorm, double maxNorm);

/// The fp32 gradient the update reads: `grads` (any float dtype) times
/// `invLossScale` (GradScaler.unscale_), then times `clipCoef`, each product
/// rounded to fp32 as torch does in place. Never writes `grads`.
at::Tensor stepGradient(const at::Tensor &grads, double invLossScale,
                        double clipCoef);

/// `dst += src` in dst's type, as `dst.add_(src)` computes it (in the
/// promoted type, rounded once to dst's). On the CPU with two types (bf16
/// gradients accumulated from fp32, the host's accumulation under offload)
/// ATen's add_ is slow, 8x (one thread) to 17x (two) slower than a cast and
/// a same-type add on the development machine: this runs cache-sized blocks
/// of those instead, in parallel, with bitwise the same results. Elsewhere
/// it is `dst.add_(src)`.
void accumulateInto(const at::Tensor &dst, const at::Tensor &src);

/// torch.optim.AdamW, non-amsgrad: `t` is the 1-based step count.
void adamwStep(at::Tensor &params, const at::Tensor &grad, at::Tensor &expAvg,
               at::Tensor &expAvgSq, const OptimizerConfig &config, double lr,
               int64_t t, const DecayMask &mask = {});

/// adamwStep's update in one multithreaded pass over memory (at::parallel_for
/// over cache-sized blocks, each updated completely while it is in cache),
/// with bitwise the same fp32 results: each element goes through the same
/// operations, rounded the same way, as in the ATen fp32 CPU kernels that
/// adamwStep calls. Returns false (and changes nothing) where it cannot run:
/// a tensor that is not a contiguous fp32 CPU tensor of the params' size, or
/// an x86 CPU without AVX2/FMA.
bool adamwStepParallel(at::Tensor &params, const at::Tensor &grad,
                       at::Tensor &expAvg, at::Tensor &expAvgSq,
                       const OptimizerConfig &config, double lr, int64_t t,
                       const DecayMask &mask = {});

/// torch.optim.AdamW(fused=True) on any device ATen has the fused kernel
/// for (CUDA): at::_fused_adamw_ with an fp32 step-count tensor holding `t`.
/// With a mask, two calls as torch's two param groups: the decayed ranges
/// with weight_decay, the others without.
void fusedAdamWStep(at::Tensor &params, const at::Tensor &grad,
                    at::Tensor &expAvg, at::Tensor &expAvgSq,
                    const OptimizerConfig &config, double lr, int64_t t,
                    const DecayMask &mask = {});

/// torch.optim.SGD without dampening or nesterov; `momentumBuf` is undefined
/// when momentum is 0. On step 1 the buffer takes the gradient (torch's
/// clone of the first d_p).
void sgdStep(at::Tensor &params, const at::Tensor &grad,
             at::Tensor &momentumBuf, const OptimizerConfig &config, double lr,
             int64_t t, const DecayMask &mask = {});

/// Dispatches on config.kind; `state` is (exp_avg, exp_avg_sq) for adamw,
/// (momentum) or () for sgd. AdamW on CUDA params runs fusedAdamWStep, on
/// CPU params of more than kParallelAdamWMinNumel elements
/// adamwStepParallel, otherwise adamwStep; SGD runs sgdStep everywhere. Throws
/// std::runtime_error for a state list that does not fit the optimizer.
/// `mask` says which elements config.weightDecay applies to.
void optimizerUpdate(const OptimizerConfig &config, at::Tensor &params,
                     const at::Tensor &grad, std::vector<at::Tensor> &state,
                     double lr, int64_t t, const DecayMask &mask = {});

/// GradScaler.update's rule for one step: on overflow the scale halves and
/// the growth tracker restarts; otherwise after `growthInterval` clean steps
/// in a row it doubles (if the doubled value is finite).
struct DynamicLossScale {
  int64_t growthInterval = 2000;
  int64_t growthTracker = 0;
  double update(double scale, bool foundInf);
};

} // namespace plan::rt

#endif // PLAN_RUNTIME_CORE_OPTIMIZER_H
