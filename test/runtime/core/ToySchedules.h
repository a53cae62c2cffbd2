//===- ToySchedules.h - Training schedules of the toy model -----*- C++ -*-===//
//
// Valid schedules (ScheduleBuilder) that train ToyModel: two units of
// kWidth elements in one group, forward, loss and backward per micro-batch,
// the gradient norm and an optimizer step.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_TEST_RUNTIME_CORE_TOYSCHEDULES_H
#define PLAN_TEST_RUNTIME_CORE_TOYSCHEDULES_H

#include "TestSupport.h"

namespace plan::rt::test {

constexpr int64_t kWidth = 3;

/// Forward of both units, the loss, and backward of both, for each
/// micro-batch: params views `p`, gradient views `g`, a saves buffer per unit
/// and micro-batch.
inline void addMicroBatches(ScheduleBuilder &b, int64_t microBatches,
                            const int64_t (&p)[2], const int64_t (&g)[2]) {
  for (int64_t mb = 0; mb < microBatches; ++mb) {
    int64_t saves[2];
    for (int u = 0; u < 2; ++u) {
      saves[u] = b.alloc("u.saves", kWidth, ElementType::F32, false,
                         BufferRole::Activations);
      b.op(ops::Alloc{saves[u]});
      b.op(ops::Forward{
          .unit = u, .microBatch = mb, .params = p[u], .saves = saves[u]});
    }
    b.op(ops::Loss{.unit = 1,
                   .microBatch = mb,
                   .scale = 1.0 / static_cast<double>(microBatches)});
    for (int u = 1; u >= 0; --u) {
      b.op(ops::Backward{.unit = u,
                         .microBatch = mb,
                         .params = p[u],
                         .activations = saves[u],
                         .grads = g[u]});
      b.free(saves[u]);
    }
  }
}

/// Two toy units of kWidth elements in one group "g".
inline void addToyUnits(ScheduleBuilder &b) {
  b.unit("u0", kWidth);
  b.unit("u1", kWidth);
  b.group("g", {"u0", "u1"});
}

/// The gradient norm into a scalar of `space`, then the optimizer step.
inline void addStep(ScheduleBuilder &b, int64_t param, int64_t grad,
                    int64_t state, Space space = Space::Device) {
  int64_t norm = b.alloc("grad_norm", 1, ElementType::F32, false,
                         BufferRole::Scalar, space);
  b.op(ops::Alloc{norm});
  b.op(ops::Zero{norm});
  b.op(ops::GradNorm{.grads = grad, .norm = norm});
  ops::OptimizerStep step{
      .group = 0, .params = param, .grads = grad, .norm = norm};
  if (state >= 0)
    step.state = {state, state + 1};
  b.op(step);
  b.free(norm);
}

// Two toy units of kWidth elements in one group "g", trained for
// `microBatches` micro-batches, then one optimizer step.
struct ToyTrainSchedule {
  ScheduleBuilder b;
  int64_t param = -1, grad = -1, state = -1;

  ToyTrainSchedule(int64_t microBatches, double gradClip,
                   OptimizerKind optimizer = OptimizerKind::SGD) {
    Schedule &s = b.s;
    b.setMicroBatches(microBatches);
    s.train.gradClip = gradClip;
    s.train.optimizer.kind = optimizer;
    addToyUnits(b);
    param = b.state("g", BufferRole::Param);
    grad = b.state("g", BufferRole::Grad);
    if (optimizer == OptimizerKind::AdamW) {
      state = b.state("g", BufferRole::ExpAvg);
      b.state("g", BufferRole::ExpAvgSq);
    }
    int64_t p[2] = {b.view(param, 0, kWidth), b.view(param, kWidth, kWidth)};
    int64_t g[2] = {b.view(grad, 0, kWidth), b.view(grad, kWidth, kWidth)};
    b.op(ops::Zero{grad});
    addMicroBatches(b, microBatches, p, g);
    addStep(b, param, grad, state);
  }
};

} // namespace plan::rt::test

#endif // PLAN_TEST_RUNTIME_CORE_TOYSCHEDULES_H
