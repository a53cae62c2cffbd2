//===- ExecutorTest.cpp - One rank: compute, optimizer, state, errors -----===//
//
// Single-rank schedules run against MeshPositionComm (no process groups: a
// group of one needs no collective); collectives are in CollectivesTest.cpp.
//
//===----------------------------------------------------------------------===//

#include "Executor.h"
#include "DeviceBackend.h"
#include "TestSupport.h"
#include "ToyModel.h"
#include "ToySchedules.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

using namespace plan::rt;
using namespace plan::rt::test;

namespace {

// ToyTrainSchedule with the step offloaded: the persistent parameters,
// gradients and optimizer state live in pinned host memory; each step copies
// the parameters to a device staging buffer (h2d), runs forward and backward
// there, drains the gradient back (d2h) and steps on the host. A second d2h
// copy `after` the h2d one echoes the staged parameters into a host buffer
// before the h2d copy is waited for.
struct OffloadTrainSchedule {
  ScheduleBuilder b;
  int64_t param = -1, grad = -1, state = -1, echo = -1;

  OffloadTrainSchedule(int64_t microBatches, OptimizerKind optimizer) {
    Schedule &s = b.s;
    b.setMicroBatches(microBatches);
    s.train.optimizer.kind = optimizer;
    addToyUnits(b);
    param = b.state("g", BufferRole::Param, ElementType::F32, false,
                    Space::PinnedHost);
    grad = b.state("g", BufferRole::Grad, ElementType::F32, false,
                   Space::PinnedHost);
    if (optimizer == OptimizerKind::AdamW) {
      state = b.state("g", BufferRole::ExpAvg, ElementType::F32, false,
                      Space::PinnedHost);
      b.state("g", BufferRole::ExpAvgSq, ElementType::F32, false,
              Space::PinnedHost);
    }
    echo = b.alloc("g.param.echo", 2 * kWidth, ElementType::F32, false,
                   BufferRole::Staging, Space::PinnedHost);
    int64_t devParam = b.alloc("g.param.staging", 2 * kWidth, ElementType::F32,
                               false, BufferRole::Staging);
    int64_t devGrad = b.alloc("g.grad.staging", 2 * kWidth, ElementType::F32,
                              false, BufferRole::Staging);
    b.op(ops::Alloc{devParam});
    b.op(ops::Alloc{echo});
    int64_t upEvent =
        b.op(ops::Copy{.src = param, .dst = devParam, .done = b.event()}).done;
    int64_t echoEvent = b.op(ops::Copy{.src = devParam,
                                       .dst = echo,
                                       .after = {upEvent},
                                       .done = b.event()})
                            .done;
    b.wait(upEvent);
    b.op(ops::Alloc{devGrad});
    b.op(ops::Zero{devGrad});
    int64_t p[2] = {b.view(devParam, 0, kWidth),
                    b.view(devParam, kWidth, kWidth)};
    int64_t g[2] = {b.view(devGrad, 0, kWidth),
                    b.view(devGrad, kWidth, kWidth)};
    addMicroBatches(b, microBatches, p, g);
    b.wait(
        b.op(ops::Copy{.src = devGrad, .dst = grad, .done = b.event()}).done);
    b.free(devGrad);
    b.wait(echoEvent);
    b.free(devParam);
    b.free(echo);
    addStep(b, param, grad, state, Space::PinnedHost);
  }
};

bool haveCuda() { return at::hasCUDA() && at::getNumGPUs() > 0; }

// Every executor of these tests runs on the host.
const std::unique_ptr<DeviceBackend> cpu = DeviceBackend::createCpu();

// The toy model's loss and gradients in long double.
struct Reference {
  std::vector<long double> w, grad;
  long double loss = 0;
  Reference(const std::vector<float> &weights,
            const std::vector<std::vector<int64_t>> &inputs,
            const std::vector<std::vector<int64_t>> &targets)
      : w(weights.begin(), weights.end()), grad(weights.size(), 0) {
    long double scale = 1.0L / inputs.size();
    for (size_t mb = 0; mb < inputs.size(); ++mb) {
      long double l = 0;
      for (int64_t i = 0; i < kWidth; ++i) {
        long double x = inputs[mb][i], h = x * w[i], y = h * w[kWidth + i];
        long double d = y - targets[mb][i];
        l += 0.5L * d * d / kWidth;
        long double dy = d / kWidth * scale;
        grad[kWidth + i] += dy * h;
        grad[i] += dy * w[kWidth + i] * x;
      }
      loss += l / inputs.size();
    }
  }
  long double norm() const {
    long double s = 0;
    for (long double g : grad)
      s += g * g;
    return std::sqrt(s);
  }
};

std::vector<float> initialWeights(uint64_t seed) {
  std::vector<float> w;
  for (int u = 0; u < 2; ++u)
    for (int64_t i = 0; i < kWidth; ++i)
      w.push_back(ToyModel::initialValue(u, i, seed));
  return w;
}

const std::vector<std::vector<int64_t>> kInputs = {{1, 2, 3}, {-2, 0, 5}};
const std::vector<std::vector<int64_t>> kTargets = {{2, -1, 4}, {0, 3, 1}};

std::vector<MicroBatch> toyBatches(int64_t count,
                                   at::Device device = at::kCPU) {
  std::vector<MicroBatch> out;
  for (int64_t mb = 0; mb < count; ++mb) {
    MicroBatch b = toyBatch(kInputs[mb], kTargets[mb]);
    b.tokens = b.tokens.to(device);
    b.targets = b.targets.to(device);
    out.push_back(b);
  }
  return out;
}

void expectTensor(const at::Tensor &t, const std::vector<long double> &expected,
                  double tol) {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_NEAR(t[static_cast<int64_t>(i)].item<double>(),
                static_cast<double>(expected[i]), tol)
        << "element " << i;
}

// A schedule that computes no norm (no grad_clip) reports none, rather than
// a norm of 0 that reads like vanished gradients.
TEST(Executor, NoNormOpsNoGradNorm) {
  ScheduleBuilder b;
  b.setMicroBatches(1);
  addToyUnits(b);
  int64_t param = b.state("g", BufferRole::Param);
  int64_t grad = b.state("g", BufferRole::Grad);
  int64_t p[2] = {b.view(param, 0, kWidth), b.view(param, kWidth, kWidth)};
  int64_t g[2] = {b.view(grad, 0, kWidth), b.view(grad, kWidth, kWidth)};
  b.op(ops::Zero{grad});
  addMicroBatches(b, 1, p, g);
  b.op(ops::OptimizerStep{.group = 0, .params = param, .grads = grad});
  ToyModel model(2);
  MeshPositionComm comm(0, 1, 1);
  Executor exec(b.valid(), model, comm, *cpu);
  exec.initState(7);
  StepResult r = exec.runStep(1, toyBatches(1));
  EXPECT_FALSE(r.gradNorm.has_value());
  EXPECT_TRUE(std::isfinite(r.loss));
}

TEST(Executor, TrainStepMatchesHandComputedGradients) {
  ToyTrainSchedule toy(/*microBatches=*/2, /*gradClip=*/0);
  // The planned peak is the arena plus the schedule's workspace.
  toy.b.s.programs.front().workspaceBytes = 1000;
  ToyModel model(2);
  MeshPositionComm comm(0, 1, 1);
  Executor exec(toy.b.valid(), model, comm, *cpu);
  exec.initState(7);
  Reference ref(initialWeights(7), kInputs, kTargets);
  StepResult r = exec.runStep(1, toyBatches(2));
  EXPECT_NEAR(r.loss, static_cast<double>(ref.loss), 1e-6);
  ASSERT_TRUE(r.gradNorm);
  EXPECT_NEAR(*r.gradNorm, static_cast<double>(ref.norm()), 1e-6);
  EXPECT_EQ(r.lr, 0.1);
  EXPECT_EQ(r.step, 1);
  EXPECT_FALSE(r.skipped);
  EXPECT_EQ(r.tokens, 2 * kWidth);
  EXPECT_EQ(r.plannedBytes, exec.arena(Space::Device).numel() + 1000);
  // Measured: the arena plus what the toy keeps (a few KiB).
  EXPECT_GE(r.peakBytes, exec.arena(Space::Device).numel());
  EXPECT_LE(r.peakBytes, r.plannedBytes + 64 * 1024);
  EXPECT_EQ(model.resets, 1);
  expectTensor(exec.buffer(toy.grad), ref.grad, 1e-6);
  std::vector<long double> updated;
  for (size_t i = 0; i < ref.w.size(); ++i)
    updated.push_back(ref.w[i] - 0.1L * ref.grad[i]);
  expectTensor(exec.buffer(toy.param), updated, 1e-6);
}

// The offloaded step gives the numbers of the step on the device, and the
// echo copy (issued `after` the h2d copy, before its wait) sees the staged
// parameters.
TEST(Executor, OffloadedStepMatchesTheDeviceStep) {
  for (OptimizerKind optimizer : {OptimizerKind::SGD, OptimizerKind::AdamW}) {
    SCOPED_TRACE(toString(optimizer));
    ToyTrainSchedule onDevice(2, 0, optimizer);
    OffloadTrainSchedule offload(2, optimizer);
    ToyModel model(2), offloadModel(2);
    MeshPositionComm comm(0, 1, 1);
    Executor a(onDevice.b.valid(), model, comm, *cpu);
    Executor b(offload.b.valid(), offloadModel, comm, *cpu);
    a.initState(3);
    b.initState(3);
    for (int64_t step = 1; step <= 2; ++step) {
      at::Tensor before = b.buffer(offload.param).clone();
      StepResult ra = a.runStep(step, toyBatches(2));
      StepResult rb = b.runStep(step, toyBatches(2));
      EXPECT_EQ(ra.loss, rb.loss);
      EXPECT_EQ(ra.gradNorm, rb.gradNorm);
      EXPECT_TRUE(at::equal(a.buffer(onDevice.param), b.buffer(offload.param)));
      EXPECT_TRUE(at::equal(b.buffer(offload.echo), before));
      int64_t planned = 0;
      for (Space space : {Space::Device, Space::Host, Space::PinnedHost})
        planned += b.arena(space).numel();
      EXPECT_EQ(rb.plannedBytes, planned);
      EXPECT_GE(rb.peakBytes, planned);
      EXPECT_LE(rb.peakBytes, planned + 64 * 1024);
    }
  }
}

// The cuda backend runs the same schedules with the same numbers (up to
// fp32 rounding: the fused AdamW kernel, the device's reductions), through
// the async copy streams for the offloaded one; the measured peak covers
// the planned arenas.
TEST(Executor, CudaStepMatchesTheCpuStep) {
  if (!haveCuda())
    GTEST_SKIP() << "no CUDA device";
  auto gpu = DeviceBackend::createCuda(0);
  at::Device cuda = gpu->device();
  for (OptimizerKind optimizer : {OptimizerKind::SGD, OptimizerKind::AdamW}) {
    for (bool offloaded : {false, true}) {
      SCOPED_TRACE(std::string(toString(optimizer)) +
                   (offloaded ? " offloaded" : ""));
      ToyTrainSchedule plain(2, 0, optimizer);
      OffloadTrainSchedule offload(2, optimizer);
      ValidSchedule s = offloaded ? offload.b.valid() : plain.b.valid();
      int64_t param = offloaded ? offload.param : plain.param;
      ToyModel cpuModel(2), cudaModel(2);
      MeshPositionComm comm(0, 1, 1);
      Executor onCpu(s, cpuModel, comm, *cpu);
      Executor onCuda(s, cudaModel, comm, *gpu);
      EXPECT_TRUE(onCuda.arena(Space::Device).is_cuda());
      if (offloaded) {
        EXPECT_TRUE(onCuda.arena(Space::PinnedHost).is_pinned());
      }
      onCpu.initState(5);
      onCuda.initState(5);
      for (int64_t step = 1; step <= 3; ++step) {
        // A copy: the pinned parameters are updated in place.
        at::Tensor before = onCuda.buffer(param).cpu().clone();
        StepResult rc = onCpu.runStep(step, toyBatches(2));
        StepResult rg = onCuda.runStep(step, toyBatches(2, cuda));
        EXPECT_NEAR(rc.loss, rg.loss, 1e-5 * std::max(1.0, std::fabs(rc.loss)));
        ASSERT_TRUE(rc.gradNorm && rg.gradNorm);
        EXPECT_NEAR(*rc.gradNorm, *rg.gradNorm,
                    1e-5 * std::max(1.0, *rc.gradNorm));
        EXPECT_TRUE(at::allclose(onCpu.buffer(param),
                                 onCuda.buffer(param).cpu(), 1e-4, 1e-5));
        if (offloaded) {
          EXPECT_TRUE(at::equal(onCuda.buffer(offload.echo).cpu(), before));
        }
        int64_t planned = 0, host = 0;
        for (Space space : {Space::Device, Space::Host, Space::PinnedHost})
          planned += onCuda.arena(space).numel();
        host = onCuda.arena(Space::Host).numel() +
               onCuda.arena(Space::PinnedHost).numel();
        EXPECT_EQ(rg.plannedBytes, planned);
        EXPECT_GE(rg.peakBytes, onCuda.arena(Space::Device).numel() + host);
      }
    }
  }
}

TEST(Executor, ClippingScalesTheStepToTheMaximumNorm) {
  Reference ref(initialWeights(7), kInputs, kTargets);
  long double norm = ref.norm();
  ASSERT_GT(norm, 0.01L);
  for (double clip : {0.01, 1e3}) {
    ToyTrainSchedule toy(2, clip);
    ToyModel model(2);
    MeshPositionComm comm(0, 1, 1);
    Executor exec(toy.b.valid(), model, comm, *cpu);
    exec.initState(7);
    StepResult r = exec.runStep(1, toyBatches(2));
    ASSERT_TRUE(r.gradNorm);
    EXPECT_NEAR(*r.gradNorm, static_cast<double>(norm),
                1e-6); // before clipping
    long double coef = std::min(1.0L, clip / (norm + 1e-6L));
    std::vector<long double> updated;
    for (size_t i = 0; i < ref.w.size(); ++i)
      updated.push_back(ref.w[i] - 0.1L * coef * ref.grad[i]);
    expectTensor(exec.buffer(toy.param), updated, 1e-6);
  }
}

TEST(Executor, LearningRateFollowsTheScheduleOverTheRun) {
  ToyTrainSchedule toy(1, 0, OptimizerKind::AdamW);
  toy.b.s.train.lrSchedule.kind = LRScheduleKind::Cosine;
  toy.b.s.train.lrSchedule.warmup = 1;
  toy.b.s.train.steps = 0; // the run's length comes from setTotalSteps
  ToyModel model(2);
  MeshPositionComm comm(0, 1, 1);
  Executor exec(toy.b.valid(), model, comm, *cpu);
  exec.setTotalSteps(5);
  exec.initState(1);
  at::Tensor before = exec.buffer(toy.param).clone();
  StepResult r1 = exec.runStep(1, toyBatches(1));
  EXPECT_EQ(r1.lr, 0.0); // warmup starts at 0: AdamW moves nothing
  EXPECT_TRUE(at::equal(before, exec.buffer(toy.param)));
  StepResult r2 = exec.runStep(2, toyBatches(1));
  EXPECT_DOUBLE_EQ(r2.lr, 0.1); // k = 1: progress 0
  StepResult r3 = exec.runStep(3, toyBatches(1));
  EXPECT_DOUBLE_EQ(r3.lr, 0.1 * 0.5 * (1 + std::cos(M_PI * 0.25)));
  // A step at lr 0 is still a step: AdamW's moments moved.
  EXPECT_GT(exec.buffer(toy.state).abs().sum().item<double>(), 0);
}

// found_inf skips the step; the dynamic loss scale halves on overflow and
// doubles after growth_interval clean steps; grads are unscaled.
TEST(Executor, LossScalingSkipsOverflowAndUnscales) {
  ScheduleBuilder b;
  Schedule &s = b.s;
  s.train.lossScale.kind = LossScaleKind::Dynamic;
  s.train.lossScale.initial = 1024;
  s.train.lossScale.growthInterval = 2;
  b.unit("u", 2);
  b.group("g", {"u"});
  int64_t scale =
      b.alloc("loss_scale", 1, ElementType::F32, true, BufferRole::LossScale);
  int64_t param = b.state("g", BufferRole::Param);
  int64_t grad = b.state("g", BufferRole::Grad, ElementType::F16);
  int64_t gradF32 = b.alloc("g.grad.f32", 2, ElementType::F32, false);
  int64_t found =
      b.alloc("found_inf", 1, ElementType::F32, false, BufferRole::Scalar);
  b.op(ops::Alloc{found});
  b.op(ops::Zero{found});
  b.op(ops::CheckFinite{.buffer = grad, .foundInf = found});
  b.op(ops::Alloc{gradF32});
  b.op(ops::Cast{.src = grad, .dst = gradF32});
  b.op(ops::OptimizerStep{.group = 0,
                          .params = param,
                          .grads = gradF32,
                          .foundInf = found,
                          .lossScale = scale});
  b.op(ops::UpdateLossScale{.lossScale = scale, .foundInf = found});
  b.free(gradF32);
  b.free(found);

  ToyModel model(0);
  MeshPositionComm comm(0, 1, 1);
  Executor exec(b.valid(), model, comm, *cpu);
  exec.initState(0);
  EXPECT_EQ(exec.buffer(scale).item<float>(), 1024.0f);
  exec.buffer(param).copy_(at::tensor({1.0f, 2.0f}));

  exec.buffer(grad).copy_(at::tensor({INFINITY, 1.0f}));
  StepResult r1 = exec.runStep(1, toyBatches(1));
  EXPECT_TRUE(r1.skipped);
  EXPECT_EQ(r1.lossScale, 1024);
  EXPECT_EQ(exec.buffer(scale).item<float>(), 512.0f);
  EXPECT_EQ(exec.buffer(param)[0].item<float>(), 1.0f);
  EXPECT_EQ(exec.buffer(param)[1].item<float>(), 2.0f);

  exec.buffer(grad).copy_(at::tensor({512.0f, -1024.0f})); // (1, -2) scaled
  StepResult r2 = exec.runStep(2, toyBatches(1));
  EXPECT_FALSE(r2.skipped);
  EXPECT_EQ(r2.lossScale, 512);
  EXPECT_EQ(exec.buffer(scale).item<float>(), 512.0f); // one clean step
  EXPECT_NEAR(exec.buffer(param)[0].item<float>(), 0.9f, 1e-7);
  EXPECT_NEAR(exec.buffer(param)[1].item<float>(), 2.2f, 1e-6);

  exec.runStep(3, toyBatches(1));
  EXPECT_EQ(exec.buffer(scale).item<float>(), 1024.0f); // two clean: doubled
}

TEST(Executor, ForwardOfARecomputedUnitKeepsNoGraph) {
  ToyTrainSchedule toy(1, 0);
  Schedule &s = toy.b.s;
  // Recompute unit 0 before its backward, as activation checkpointing does.
  for (size_t i = 0; i < s.programs.front().ops.size(); ++i)
    if (const auto *backward = s.programs.front().ops[i].as<ops::Backward>();
        backward && backward->unit == 0) {
      Op re;
      re.body = ops::Recompute{.unit = 0,
                               .microBatch = 0,
                               .params = backward->params,
                               .input = backward->activations,
                               .saves = backward->activations};
      s.programs.front().ops.insert(
          s.programs.front().ops.begin() + static_cast<long>(i), re);
      break;
    }
  ToyModel model(2);
  MeshPositionComm comm(0, 1, 1);
  Executor exec(toy.b.valid(), model, comm, *cpu);
  exec.initState(0);
  exec.runStep(1, toyBatches(1));
  ASSERT_EQ(model.keepGraphLog.size(), 2u);
  EXPECT_FALSE(model.keepGraphLog[0].keepGraph);
  EXPECT_TRUE(model.keepGraphLog[1].keepGraph);
  ASSERT_EQ(model.recomputeLog.size(), 1u);
}

// Weights of the same groups, full on one rank and sharded over two: the
// shards put together are the full vector, in every dtype the state takes.
TEST(Executor, InitStateShardsTheSameFullWeights) {
  auto withGroup = [](int64_t shard) {
    ScheduleBuilder b(1, shard);
    Schedule &s = b.s;
    b.unit("a", 5);
    b.unit("b", 6);
    b.group("g", {"a", "b"}); // 11 elements, padded to 12 over two
    bool sharded = shard > 1;
    b.state("g", BufferRole::Param, ElementType::BF16, sharded);
    b.state("g", BufferRole::Master, ElementType::F32, sharded);
    b.state("g", BufferRole::Grad, ElementType::BF16, sharded);
    b.state("g", BufferRole::ExpAvg, ElementType::F32, sharded);
    b.alloc("loss_scale", 1, ElementType::F32, true, BufferRole::LossScale);
    s.train.lossScale.initial = 4096;
    return b.valid();
  };
  ValidSchedule full = withGroup(1), sharded = withGroup(2);
  EXPECT_EQ(full->groups[0].paddedNumel, 11);
  EXPECT_EQ(sharded->groups[0].paddedNumel, 12);
  ToyModel model(2);
  MeshPositionComm one(0, 1, 1);
  Executor reference(full, model, one, *cpu);
  reference.arena(Space::Device).fill_(0xff); // NaN everywhere before init
  reference.initState(3);
  at::Tensor master = reference.buffer(1);
  for (int64_t i = 0; i < 11; ++i)
    EXPECT_EQ(master[i].item<float>(),
              ToyModel::initialValue(i < 5 ? 0 : 1, i < 5 ? i : i - 5, 3));
  EXPECT_EQ(reference.buffer(4).item<float>(), 4096.0f);
  at::Tensor padded = at::cat({master, at::zeros({1})});

  for (int rank = 0; rank < 2; ++rank) {
    MeshPositionComm comm(rank, 1, 2);
    Executor exec(sharded, model, comm, *cpu);
    exec.arena(Space::Device).fill_(0xff);
    exec.initState(3);
    at::Tensor slice = padded.narrow(0, rank * 6, 6);
    EXPECT_TRUE(at::equal(exec.buffer(1), slice)) << "rank " << rank;
    EXPECT_TRUE(at::equal(exec.buffer(0), slice.to(at::kBFloat16)));
    EXPECT_EQ(exec.buffer(2).abs().sum().item<float>(), 0.0f);
    EXPECT_EQ(exec.buffer(3).abs().sum().item<float>(), 0.0f);
  }
}

TEST(Executor, ElementwiseOpsConvertBetweenTypesAndSpaces) {
  ScheduleBuilder b;
  int64_t dev = b.alloc("dev", 4);
  int64_t host = b.alloc("host", 4, ElementType::BF16, true,
                         BufferRole::Staging, Space::Host);
  int64_t pinned = b.alloc("pinned", 4, ElementType::F32, true,
                           BufferRole::Staging, Space::PinnedHost);
  int64_t norm = b.alloc("norm", 1);
  int64_t flag = b.alloc("flag", 1);
  b.wait(b.op(ops::Copy{.src = dev, .dst = pinned, .done = b.event()}).done);
  b.op(ops::Cast{.src = dev, .dst = host});
  b.op(ops::Accumulate{.src = host, .dst = dev});
  b.op(ops::Zero{norm});
  b.op(ops::GradNorm{.grads = host, .norm = norm});
  b.op(ops::CheckFinite{.buffer = pinned, .foundInf = flag});

  ToyModel model(0);
  MeshPositionComm comm(0, 1, 1);
  Executor exec(b.valid(), model, comm, *cpu);
  EXPECT_EQ(exec.arena(Space::Host).numel(), 8);
  EXPECT_EQ(exec.arena(Space::PinnedHost).numel(), 16);
  exec.buffer(dev).copy_(at::tensor({1.0f, 2.0f, 1.00390625f, -3.0f}));
  exec.buffer(flag).fill_(1); // stays set: check_finite only raises it
  exec.runStep(1, toyBatches(1));
  // bf16 rounds 1.00390625 (1 + 2^-8) to 1.
  EXPECT_TRUE(
      at::equal(exec.buffer(host),
                at::tensor({1.0f, 2.0f, 1.0f, -3.0f}).to(at::kBFloat16)));
  EXPECT_TRUE(at::equal(exec.buffer(pinned),
                        at::tensor({1.0f, 2.0f, 1.00390625f, -3.0f})));
  EXPECT_TRUE(at::equal(exec.buffer(dev),
                        at::tensor({2.0f, 4.0f, 2.00390625f, -6.0f})));
  EXPECT_EQ(exec.buffer(norm).item<float>(), 1 + 4 + 1 + 9);
  EXPECT_EQ(exec.buffer(flag).item<float>(), 1.0f);

  exec.buffer(flag).zero_();
  exec.buffer(dev).fill_(NAN);
  exec.runStep(2, toyBatches(1));
  EXPECT_EQ(exec.buffer(flag).item<float>(), 1.0f);
}

TEST(Executor, ModelErrorsNameTheOpAndResetTheModel) {
  ToyTrainSchedule toy(1, 0);
  // A loss before any forward: the model has no output for it.
  Op loss;
  loss.body = ops::Loss{.unit = 1, .microBatch = 0, .scale = 1.0};
  loss.line = 42;
  toy.b.s.programs.front().ops.insert(toy.b.s.programs.front().ops.begin(),
                                      loss);
  ToyModel model(2);
  MeshPositionComm comm(0, 1, 1);
  Executor exec(toy.b.valid(), model, comm, *cpu);
  exec.initState(0);
  try {
    exec.runStep(1, toyBatches(1));
    FAIL() << "expected an error";
  } catch (const ExecutionError &e) {
    EXPECT_EQ(std::string(e.what()).rfind("loss (op 0, line 42): ", 0), 0u)
        << e.what();
  }
  EXPECT_EQ(model.resets, 1);
  EXPECT_THROW(exec.runStep(1, toyBatches(0)), ExecutionError);
}

// The executor runs only what validateSchedule accepted: a schedule that
// names a buffer that does not exist never reaches it.
TEST(Executor, RunsOnlyValidatedSchedules) {
  static_assert(!std::is_constructible_v<Executor, const Schedule &, Model &,
                                         Comm &, DeviceBackend &>);
  ScheduleBuilder b;
  b.alloc("x", 4);
  b.op(ops::Zero{7});
  EXPECT_THROW(b.valid(), ScheduleFileError);
}

TEST(Executor, RejectsAMeshOfAnotherSize) {
  ToyTrainSchedule toy(1, 0);
  ToyModel model(2);
  MeshPositionComm comm(0, 1, 2);
  try {
    Executor exec(toy.b.valid(), model, comm, *cpu);
    FAIL() << "expected an error";
  } catch (const ExecutionError &e) {
    EXPECT_STREQ(e.what(),
                 "schedule is for 1 ranks, but the process groups have 2");
  }
}

} // namespace
