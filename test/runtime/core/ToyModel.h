//===- ToyModel.h - A deterministic Model test double -----------*- C++ -*-===//
//
// Every unit is y = x * w elementwise over `width` elements; the loss is
// 0.5 * mean((y - target)^2) of the last unit. Gradients are written by hand
// (no autograd) so tests can compute the expected numbers in long double.
// Micro-batch tokens / targets are int64 tensors of `width` elements.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_TEST_RUNTIME_CORE_TOYMODEL_H
#define PLAN_TEST_RUNTIME_CORE_TOYMODEL_H

#include "Model.h"

#include <map>
#include <stdexcept>
#include <utility>
#include <vector>

namespace plan::rt::test {

class ToyModel : public Model {
public:
  explicit ToyModel(int64_t numUnits) : numUnits_(numUnits) {}

  /// Unit `u`'s i-th initial element; shared with the tests' expectations.
  static float initialValue(int64_t unit, int64_t i, uint64_t seed) {
    return 1.0f + 0.01f * static_cast<float>(i + 1) +
           0.1f * static_cast<float>(unit) + 0.001f * static_cast<float>(seed);
  }

  void initUnit(int64_t unit, uint64_t seed, at::Tensor out,
                at::Tensor) override {
    for (int64_t i = 0; i < out.numel(); ++i)
      out[i] = initialValue(unit, i, seed);
  }
  void loadUnit(int64_t, const TensorSource &, uint64_t, at::Tensor,
                at::Tensor) override {
    throw std::runtime_error("the toy model loads nothing");
  }
  void setMicroBatch(int64_t mb, MicroBatch batch) override {
    inputs_[mb] = batch.tokens.to(at::kFloat).reshape(-1);
    targets_[mb] = batch.targets.to(at::kFloat).reshape(-1);
  }
  void forward(int64_t unit, int64_t mb, const UnitWeights &weights,
               const at::Tensor &saves, bool keepGraph,
               const UnitPart &) override {
    const at::Tensor &params = weights.params;
    keepGraphLog.push_back({unit, mb, keepGraph});
    at::Tensor x = unit == 0 ? inputs_.at(mb) : outputs_.at({unit - 1, mb});
    if (saves.defined() && saves.numel() >= x.numel())
      saves.narrow(0, 0, x.numel()).copy_(x);
    saved_[{unit, mb}] = x.clone();
    outputs_[{unit, mb}] = x * params.to(at::kFloat);
  }
  void recompute(int64_t unit, int64_t mb, const UnitWeights &,
                 const at::Tensor &input, const at::Tensor &,
                 const UnitPart &) override {
    recomputeLog.push_back({unit, mb});
    saved_[{unit, mb}] = input.to(at::kFloat)
                             .narrow(0, 0, saved_.at({unit, mb}).numel())
                             .clone();
  }
  at::Tensor loss(int64_t unit, int64_t mb, double scale, double lossScale,
                  const at::Tensor &) override {
    at::Tensor diff = outputs_.at({unit, mb}) - targets_.at(mb);
    upstream_[mb] =
        diff / static_cast<double>(diff.numel()) * (scale * lossScale);
    return 0.5 * diff.square().mean();
  }
  void backward(int64_t unit, int64_t mb, const UnitWeights &weights,
                const at::Tensor &, const at::Tensor &grads, const at::Tensor &,
                const UnitPart &) override {
    const at::Tensor &params = weights.params;
    at::Tensor up = upstream_.at(mb);
    grads.add_((up * saved_.at({unit, mb})).to(grads.scalar_type()));
    upstream_[mb] = up * params.to(at::kFloat);
  }
  void reset() override {
    inputs_.clear();
    targets_.clear();
    outputs_.clear();
    saved_.clear();
    upstream_.clear();
    ++resets;
  }

  struct ForwardCall {
    int64_t unit, mb;
    bool keepGraph;
  };
  std::vector<ForwardCall> keepGraphLog;
  std::vector<std::pair<int64_t, int64_t>> recomputeLog;
  int resets = 0;

private:
  int64_t numUnits_;
  std::map<int64_t, at::Tensor> inputs_, targets_, upstream_;
  std::map<std::pair<int64_t, int64_t>, at::Tensor> outputs_, saved_;
};

} // namespace plan::rt::test

#endif // PLAN_TEST_RUNTIME_CORE_TOYMODEL_H
