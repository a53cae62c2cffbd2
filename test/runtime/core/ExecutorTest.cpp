//===- ExecutorTest.cpp - One rank: compute, optimizer, state, errors -----===//
//
// Single-rank schedules run against MeshPositionComm (no process groups: a
// group of one needs no collective); collectives are in CollectivesTest.cpp.
//
//===----------------------------------------------------------------------===//

#include "Executor.h"
#include "TestSupport.h"
#include "ToyModel.h"

#include <algorithm>
#include <cmath>
#include <vector>

using namespace plan::rt;
using namespace plan::rt::test;

namespace {

constexpr int64_t kWidth = 3;

/// Forward of both units, the loss, and backward of both, for each
/// micro-batch: params views `p`, gradient views `g`, a saves buffer per unit
/// and micro-batch.
void addMicroBatches(ScheduleBuilder &b, int64_t microBatches,
                     const int64_t (&p)[2], const int64_t (&g)[2]) {
  for (int64_t mb = 0; mb < microBatches; ++mb) {
    int64_t saves[2];
    for (int u = 0; u < 2; ++u) {
      saves[u] = b.alloc("u.saves", kWidth, ElementType::F32, false,
                         BufferRole::Activations);
      b.op(OpKind::Alloc).buffer = saves[u];
      Op &f = b.op(OpKind::Forward);
      f.unit = u, f.microBatch = mb, f.params = p[u], f.saves = saves[u];
    }
    Op &l = b.op(OpKind::Loss);
    l.unit = 1, l.microBatch = mb,
    l.scale = 1.0 / static_cast<double>(microBatches);
    for (int u = 1; u >= 0; --u) {
      Op &bw = b.op(OpKind::Backward);
      bw.unit = u, bw.microBatch = mb, bw.params = p[u],
      bw.activations = saves[u], bw.grads = g[u];
      b.op(OpKind::Free).buffer = saves[u];
    }
  }
}

// Two toy units of kWidth elements in one group "g", trained for
// `microBatches` micro-batches, then one optimizer step.
struct ToyTrainSchedule {
  ScheduleBuilder b;
  int64_t param = -1, grad = -1, state = -1;

  ToyTrainSchedule(int64_t microBatches, double gradClip,
                   const std::string &optimizer = "sgd") {
    Schedule &s = b.s;
    s.microBatches = microBatches;
    s.train.gradClip = gradClip;
    s.train.optimizer.kind = optimizer;
    for (const char *name : {"u0", "u1"}) {
      Unit u;
      u.name = name;
      u.kind = "toy";
      u.numel = kWidth;
      s.units.push_back(u);
    }
    s.groups.push_back(
        Group{"g", {"u0", "u1"}, 2 * kWidth, 2 * kWidth, 2 * kWidth});
    param = b.alloc("g.param", 2 * kWidth, ElementType::F32, true,
                    BufferRole::Param);
    s.buffers[param].group = "g";
    grad =
        b.alloc("g.grad", 2 * kWidth, ElementType::F32, true, BufferRole::Grad);
    s.buffers[grad].group = "g";
    if (optimizer == "adamw") {
      state = b.alloc("g.exp_avg", 2 * kWidth, ElementType::F32, true,
                      BufferRole::ExpAvg);
      b.alloc("g.exp_avg_sq", 2 * kWidth, ElementType::F32, true,
              BufferRole::ExpAvgSq);
    }
    int64_t p[2] = {b.view(param, 0, kWidth), b.view(param, kWidth, kWidth)};
    int64_t g[2] = {b.view(grad, 0, kWidth), b.view(grad, kWidth, kWidth)};
    b.op(OpKind::Zero).buffer = grad;
    addMicroBatches(b, microBatches, p, g);
    int64_t norm =
        b.alloc("grad_norm", 1, ElementType::F32, false, BufferRole::Scalar);
    b.op(OpKind::Alloc).buffer = norm;
    b.op(OpKind::Zero).buffer = norm;
    Op &gn = b.op(OpKind::GradNorm);
    gn.src = grad, gn.scalar = norm;
    Op &step = b.op(OpKind::OptimizerStep);
    step.group = 0, step.params = param, step.grads = grad, step.norm = norm;
    if (state >= 0)
      step.state = {state, state + 1};
    b.op(OpKind::Free).buffer = norm;
  }
};

// ToyTrainSchedule with the step offloaded: the persistent parameters,
// gradients and optimizer state live in pinned host memory; each step copies
// the parameters to a device staging buffer (h2d), runs forward and backward
// there, drains the gradient back (d2h) and steps on the host. A second d2h
// copy `after` the h2d one echoes the staged parameters into a host buffer
// before the h2d copy is waited for.
struct OffloadTrainSchedule {
  ScheduleBuilder b;
  int64_t param = -1, grad = -1, state = -1, echo = -1;

  OffloadTrainSchedule(int64_t microBatches, const std::string &optimizer) {
    Schedule &s = b.s;
    s.microBatches = microBatches;
    s.train.optimizer.kind = optimizer;
    for (const char *name : {"u0", "u1"}) {
      Unit u;
      u.name = name;
      u.kind = "toy";
      u.numel = kWidth;
      s.units.push_back(u);
    }
    s.groups.push_back(
        Group{"g", {"u0", "u1"}, 2 * kWidth, 2 * kWidth, 2 * kWidth});
    auto host = [&](const char *name, BufferRole role, bool persistent) {
      int64_t id = b.alloc(name, 2 * kWidth, ElementType::F32, persistent, role,
                           Space::PinnedHost);
      s.buffers[id].group = "g";
      return id;
    };
    param = host("g.param", BufferRole::Param, true);
    grad = host("g.grad", BufferRole::Grad, true);
    if (optimizer == "adamw") {
      state = host("g.exp_avg", BufferRole::ExpAvg, true);
      host("g.exp_avg_sq", BufferRole::ExpAvgSq, true);
    }
    echo = host("g.param.echo", BufferRole::Staging, false);
    int64_t devParam = b.alloc("g.param.staging", 2 * kWidth);
    int64_t devGrad = b.alloc("g.grad.staging", 2 * kWidth, ElementType::F32,
                              false, BufferRole::Staging);
    b.op(OpKind::Alloc).buffer = devParam;
    b.op(OpKind::Alloc).buffer = echo;
    Op &up = b.op(OpKind::Copy);
    up.src = param, up.dst = devParam, up.event = b.event();
    int64_t upEvent = up.event;
    Op &back = b.op(OpKind::Copy);
    back.src = devParam, back.dst = echo, back.event = b.event(),
    back.after = {upEvent};
    int64_t echoEvent = back.event;
    b.wait(upEvent);
    b.op(OpKind::Alloc).buffer = devGrad;
    b.op(OpKind::Zero).buffer = devGrad;
    int64_t p[2] = {b.view(devParam, 0, kWidth),
                    b.view(devParam, kWidth, kWidth)};
    int64_t g[2] = {b.view(devGrad, 0, kWidth),
                    b.view(devGrad, kWidth, kWidth)};
    addMicroBatches(b, microBatches, p, g);
    Op &down = b.op(OpKind::Copy);
    down.src = devGrad, down.dst = grad, down.event = b.event();
    b.wait(down.event);
    b.op(OpKind::Free).buffer = devGrad;
    b.wait(echoEvent);
    b.op(OpKind::Free).buffer = devParam;
    int64_t norm = b.alloc("grad_norm", 1, ElementType::F32, false,
                           BufferRole::Scalar, Space::PinnedHost);
    b.op(OpKind::Alloc).buffer = norm;
    b.op(OpKind::Zero).buffer = norm;
    Op &gn = b.op(OpKind::GradNorm);
    gn.src = grad, gn.scalar = norm;
    Op &step = b.op(OpKind::OptimizerStep);
    step.group = 0, step.params = param, step.grads = grad, step.norm = norm;
    if (state >= 0)
      step.state = {state, state + 1};
    b.op(OpKind::Free).buffer = norm;
  }
};

bool haveCuda() { return at::hasCUDA() && at::getNumGPUs() > 0; }

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

TEST(Executor, TrainStepMatchesHandComputedGradients) {
  ToyTrainSchedule toy(/*microBatches=*/2, /*gradClip=*/0);
  // The planned peak is the arena plus the schedule's workspace.
  toy.b.s.workspaceBytes = 1000;
  ToyModel model(2);
  MeshPositionComm comm(0, 1, 1);
  Executor exec(toy.b.s, model, comm, at::kCPU);
  exec.initState(7);
  Reference ref(initialWeights(7), kInputs, kTargets);
  StepResult r = exec.runStep(1, toyBatches(2));
  EXPECT_NEAR(r.loss, static_cast<double>(ref.loss), 1e-6);
  EXPECT_NEAR(r.gradNorm, static_cast<double>(ref.norm()), 1e-6);
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
  for (const char *optimizer : {"sgd", "adamw"}) {
    SCOPED_TRACE(optimizer);
    ToyTrainSchedule onDevice(2, 0, optimizer);
    OffloadTrainSchedule offload(2, optimizer);
    ToyModel model(2), offloadModel(2);
    MeshPositionComm comm(0, 1, 1);
    Executor a(onDevice.b.s, model, comm, at::kCPU);
    Executor b(offload.b.s, offloadModel, comm, at::kCPU);
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
  at::Device cuda(at::kCUDA, 0);
  for (const char *optimizer : {"sgd", "adamw"}) {
    for (bool offloaded : {false, true}) {
      SCOPED_TRACE(std::string(optimizer) + (offloaded ? " offloaded" : ""));
      ToyTrainSchedule plain(2, 0, optimizer);
      OffloadTrainSchedule offload(2, optimizer);
      const Schedule &s = offloaded ? offload.b.s : plain.b.s;
      int64_t param = offloaded ? offload.param : plain.param;
      ToyModel cpuModel(2), cudaModel(2);
      MeshPositionComm comm(0, 1, 1);
      Executor onCpu(s, cpuModel, comm, at::kCPU);
      Executor onCuda(s, cudaModel, comm, cuda);
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
        EXPECT_NEAR(rc.gradNorm, rg.gradNorm,
                    1e-5 * std::max(1.0, rc.gradNorm));
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
    Executor exec(toy.b.s, model, comm, at::kCPU);
    exec.initState(7);
    StepResult r = exec.runStep(1, toyBatches(2));
    EXPECT_NEAR(r.gradNorm, static_cast<double>(norm), 1e-6); // before clipping
    long double coef = std::min(1.0L, clip / (norm + 1e-6L));
    std::vector<long double> updated;
    for (size_t i = 0; i < ref.w.size(); ++i)
      updated.push_back(ref.w[i] - 0.1L * coef * ref.grad[i]);
    expectTensor(exec.buffer(toy.param), updated, 1e-6);
  }
}

TEST(Executor, LearningRateFollowsTheScheduleOverTheRun) {
  ToyTrainSchedule toy(1, 0, "adamw");
  toy.b.s.train.lrSchedule.kind = "cosine";
  toy.b.s.train.lrSchedule.warmup = 1;
  toy.b.s.train.steps = 0; // the run's length comes from setTotalSteps
  ToyModel model(2);
  MeshPositionComm comm(0, 1, 1);
  Executor exec(toy.b.s, model, comm, at::kCPU);
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
  s.train.lossScale.kind = "dynamic";
  s.train.lossScale.initial = 1024;
  s.train.lossScale.growthInterval = 2;
  s.groups.push_back(Group{"g", {}, 2, 2, 2});
  int64_t scale =
      b.alloc("loss_scale", 1, ElementType::F32, true, BufferRole::Scalar);
  int64_t param =
      b.alloc("g.param", 2, ElementType::F32, true, BufferRole::Param);
  int64_t grad = b.alloc("g.grad", 2, ElementType::F16, true, BufferRole::Grad);
  int64_t found =
      b.alloc("found_inf", 1, ElementType::F32, false, BufferRole::Scalar);
  b.op(OpKind::Alloc).buffer = found;
  b.op(OpKind::Zero).buffer = found;
  Op &check = b.op(OpKind::CheckFinite);
  check.buffer = grad, check.scalar = found;
  Op &step = b.op(OpKind::OptimizerStep);
  step.group = 0, step.params = param, step.grads = grad, step.foundInf = found,
  step.lossScale = scale;
  Op &update = b.op(OpKind::UpdateLossScale);
  update.scalar = scale, update.foundInf = found;
  b.op(OpKind::Free).buffer = found;
  s.microBatches = 0;

  ToyModel model(0);
  MeshPositionComm comm(0, 1, 1);
  Executor exec(s, model, comm, at::kCPU);
  exec.initState(0);
  EXPECT_EQ(exec.buffer(scale).item<float>(), 1024.0f);
  exec.buffer(param).copy_(at::tensor({1.0f, 2.0f}));

  exec.buffer(grad).copy_(at::tensor({INFINITY, 1.0f}));
  StepResult r1 = exec.runStep(1, {});
  EXPECT_TRUE(r1.skipped);
  EXPECT_EQ(r1.lossScale, 1024);
  EXPECT_EQ(exec.buffer(scale).item<float>(), 512.0f);
  EXPECT_EQ(exec.buffer(param)[0].item<float>(), 1.0f);
  EXPECT_EQ(exec.buffer(param)[1].item<float>(), 2.0f);

  exec.buffer(grad).copy_(at::tensor({512.0f, -1024.0f})); // (1, -2) scaled
  StepResult r2 = exec.runStep(2, {});
  EXPECT_FALSE(r2.skipped);
  EXPECT_EQ(r2.lossScale, 512);
  EXPECT_EQ(exec.buffer(scale).item<float>(), 512.0f); // one clean step
  EXPECT_NEAR(exec.buffer(param)[0].item<float>(), 0.9f, 1e-7);
  EXPECT_NEAR(exec.buffer(param)[1].item<float>(), 2.2f, 1e-6);

  exec.runStep(3, {});
  EXPECT_EQ(exec.buffer(scale).item<float>(), 1024.0f); // two clean: doubled
}

TEST(Executor, ForwardOfARecomputedUnitKeepsNoGraph) {
  ToyTrainSchedule toy(1, 0);
  Schedule &s = toy.b.s;
  // Recompute unit 0 before its backward, as activation checkpointing does.
  for (size_t i = 0; i < s.ops.size(); ++i)
    if (s.ops[i].kind == OpKind::Backward && s.ops[i].unit == 0) {
      Op re;
      re.kind = OpKind::Recompute;
      re.unit = 0;
      re.microBatch = 0;
      re.params = s.ops[i].params;
      re.input = s.ops[i].activations;
      re.saves = s.ops[i].activations;
      s.ops.insert(s.ops.begin() + static_cast<long>(i), re);
      break;
    }
  ToyModel model(2);
  MeshPositionComm comm(0, 1, 1);
  Executor exec(s, model, comm, at::kCPU);
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
    for (auto [name, numel] : {std::pair{"a", 5}, std::pair{"b", 6}}) {
      Unit u;
      u.name = name;
      u.numel = numel;
      s.units.push_back(u);
    }
    s.groups.push_back(Group{"g", {"a", "b"}, 11, 12, 12 / shard});
    bool sharded = shard > 1;
    int64_t n = 12 / shard;
    auto add = [&](const char *name, ElementType t, BufferRole role) {
      int64_t id = b.alloc(name, n, t, true, role);
      s.buffers[id].group = "g";
      s.buffers[id].sharded = sharded;
      return id;
    };
    add("g.param", ElementType::BF16, BufferRole::Param);
    add("g.master", ElementType::F32, BufferRole::Master);
    add("g.grad", ElementType::BF16, BufferRole::Grad);
    add("g.exp_avg", ElementType::F32, BufferRole::ExpAvg);
    b.alloc("loss_scale", 1, ElementType::F32, true, BufferRole::Scalar);
    s.train.lossScale.initial = 4096;
    return s;
  };
  Schedule full = withGroup(1), sharded = withGroup(2);
  ToyModel model(2);
  MeshPositionComm one(0, 1, 1);
  Executor reference(full, model, one, at::kCPU);
  reference.arena(Space::Device).fill_(0xff); // NaN everywhere before init
  reference.initState(3);
  at::Tensor master = reference.buffer(1);
  for (int64_t i = 0; i < 11; ++i)
    EXPECT_EQ(master[i].item<float>(),
              ToyModel::initialValue(i < 5 ? 0 : 1, i < 5 ? i : i - 5, 3));
  EXPECT_EQ(master[11].item<float>(), 0.0f); // padding
  EXPECT_EQ(reference.buffer(4).item<float>(), 4096.0f);

  for (int rank = 0; rank < 2; ++rank) {
    MeshPositionComm comm(rank, 1, 2);
    Executor exec(sharded, model, comm, at::kCPU);
    exec.arena(Space::Device).fill_(0xff);
    exec.initState(3);
    at::Tensor slice = master.narrow(0, rank * 6, 6);
    EXPECT_TRUE(at::equal(exec.buffer(1), slice)) << "rank " << rank;
    EXPECT_TRUE(at::equal(exec.buffer(0), slice.to(at::kBFloat16)));
    EXPECT_TRUE(
        at::equal(exec.buffer(0), reference.buffer(0).narrow(0, rank * 6, 6)));
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
  Op &copy = b.op(OpKind::Copy);
  copy.src = dev, copy.dst = pinned, copy.event = b.event();
  b.wait(copy.event);
  Op &cast = b.op(OpKind::Cast);
  cast.src = dev, cast.dst = host;
  Op &acc = b.op(OpKind::Accumulate);
  acc.src = host, acc.dst = dev;
  b.op(OpKind::Zero).buffer = norm;
  Op &gn = b.op(OpKind::GradNorm);
  gn.src = host, gn.scalar = norm;
  Op &check = b.op(OpKind::CheckFinite);
  check.buffer = pinned, check.scalar = flag;
  b.s.microBatches = 0;

  ToyModel model(0);
  MeshPositionComm comm(0, 1, 1);
  Executor exec(b.s, model, comm, at::kCPU);
  EXPECT_EQ(exec.arena(Space::Host).numel(), 8);
  EXPECT_EQ(exec.arena(Space::PinnedHost).numel(), 16);
  exec.buffer(dev).copy_(at::tensor({1.0f, 2.0f, 1.00390625f, -3.0f}));
  exec.buffer(flag).fill_(1); // stays set: check_finite only raises it
  exec.runStep(1, {});
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
  exec.runStep(2, {});
  EXPECT_EQ(exec.buffer(flag).item<float>(), 1.0f);
}

TEST(Executor, RejectsABufferOutsideItsArena) {
  ScheduleBuilder b;
  int64_t id = b.alloc("big", 64);
  b.s.arenaBytes["device"] = 128;
  ToyModel model(0);
  MeshPositionComm comm(0, 1, 1);
  try {
    Executor exec(b.s, model, comm, at::kCPU);
    FAIL() << "expected an error";
  } catch (const ExecutionError &e) {
    EXPECT_STREQ(e.what(), "buffer 0 \"big\" (256 bytes at offset 0) does not "
                           "fit the device arena of 128 bytes");
  }
  (void)id;
}

TEST(Executor, ModelErrorsNameTheOpAndResetTheModel) {
  ToyTrainSchedule toy(1, 0);
  // A loss before any forward: the model has no output for it.
  Op loss;
  loss.kind = OpKind::Loss;
  loss.unit = 1;
  loss.line = 42;
  toy.b.s.ops.insert(toy.b.s.ops.begin(), loss);
  ToyModel model(2);
  MeshPositionComm comm(0, 1, 1);
  Executor exec(toy.b.s, model, comm, at::kCPU);
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

TEST(Executor, RejectsOperandsThatDoNotExist) {
  ScheduleBuilder b;
  b.alloc("x", 4);
  b.op(OpKind::Zero).buffer = 7;
  ToyModel model(0);
  MeshPositionComm comm(0, 1, 1);
  EXPECT_THROW(Executor(b.s, model, comm, at::kCPU), ExecutionError);

  ScheduleBuilder missing;
  missing.op(OpKind::AllGather).src = missing.alloc("x", 4);
  try {
    Executor exec(missing.s, model, comm, at::kCPU);
    FAIL() << "expected an error";
  } catch (const ExecutionError &e) {
    EXPECT_STREQ(e.what(),
                 "all_gather (op 0, line 1) has no destination operand");
  }
}

} // namespace
