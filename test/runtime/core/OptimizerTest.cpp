//===- OptimizerTest.cpp - AdamW, SGD, clipping, loss scale, LR -----------===//

#include "Optimizer.h"
#include "LRSchedule.h"

#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

using namespace plan::rt;

namespace {

at::Tensor floats(const std::vector<float> &v) {
  return at::tensor(v, at::kFloat);
}

void expectClose(const at::Tensor &actual,
                 const std::vector<long double> &expected, double relTol) {
  ASSERT_EQ(actual.numel(), static_cast<int64_t>(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i) {
    double a = actual[static_cast<int64_t>(i)].item<double>();
    double e = static_cast<double>(expected[i]);
    EXPECT_NEAR(a, e, relTol * std::max(1.0, std::fabs(e))) << "element " << i;
  }
}

TEST(Optimizer, AdamWMatchesTheFormulaOverTwoSteps) {
  OptimizerConfig config;
  config.kind = OptimizerKind::AdamW;
  config.lr = 1e-2;
  config.beta1 = 0.9;
  config.beta2 = 0.95;
  config.eps = 1e-8;
  config.weightDecay = 0.1;
  at::Tensor p = floats({0.5f, -1.25f, 2.0f});
  at::Tensor m = at::zeros({3}), v = at::zeros({3});
  std::vector<std::vector<float>> grads = {{0.1f, -0.2f, 0.3f},
                                           {-0.05f, 0.4f, 0.0f}};
  std::vector<long double> P = {0.5L, -1.25L, 2.0L}, M(3, 0), V(3, 0);
  const long double lr = 1e-2L, b1 = 0.9L, b2 = 0.95L, eps = 1e-8L, wd = 0.1L;
  for (int t = 1; t <= 2; ++t) {
    at::Tensor g = floats(grads[t - 1]);
    std::vector<at::Tensor> state{m, v};
    optimizerUpdate(config, p, g, state, 1e-2, t);
    for (int i = 0; i < 3; ++i) {
      long double gi = grads[t - 1][i];
      P[i] *= 1 - lr * wd;
      M[i] = b1 * M[i] + (1 - b1) * gi;
      V[i] = b2 * V[i] + (1 - b2) * gi * gi;
      long double bias1 = 1 - std::pow(b1, (long double)t);
      long double bias2 = 1 - std::pow(b2, (long double)t);
      P[i] -= lr / bias1 * M[i] / (std::sqrt(V[i]) / std::sqrt(bias2) + eps);
    }
    expectClose(p, P, 1e-6);
    expectClose(m, M, 1e-6);
    expectClose(v, V, 1e-6);
    // By hand: 0.5 * (1 - 1e-3) - (1e-2 / 0.1) * 0.01 / (0.1 + 1e-8).
    if (t == 1) {
      EXPECT_NEAR(p[0].item<double>(), 0.4895, 1e-6);
    }
  }
}

TEST(Optimizer, SgdMomentumStartsFromTheFirstGradient) {
  OptimizerConfig config;
  config.kind = OptimizerKind::SGD;
  config.momentum = 0.9;
  config.weightDecay = 0.01;
  at::Tensor p = floats({1.0f, -2.0f, 0.5f});
  at::Tensor buf = at::full({3}, 123.0f); // must be ignored on step 1
  std::vector<long double> P = {1.0L, -2.0L, 0.5L}, B(3, 0);
  std::vector<std::vector<float>> grads = {
      {0.5f, 0.25f, -1.0f}, {0.1f, 0.2f, 0.3f}, {-0.4f, 0.0f, 0.2f}};
  for (int t = 1; t <= 3; ++t) {
    std::vector<at::Tensor> state{buf};
    optimizerUpdate(config, p, floats(grads[t - 1]), state, 0.1, t);
    for (int i = 0; i < 3; ++i) {
      long double d = grads[t - 1][i] + 0.01L * P[i];
      B[i] = t == 1 ? d : 0.9L * B[i] + d;
      P[i] -= 0.1L * B[i];
    }
    expectClose(p, P, 1e-6);
    expectClose(buf, B, 1e-6);
  }
}

TEST(Optimizer, PlainSgdHasNoState) {
  OptimizerConfig config;
  config.kind = OptimizerKind::SGD;
  at::Tensor p = floats({1.0f, 2.0f});
  std::vector<at::Tensor> none;
  optimizerUpdate(config, p, floats({0.5f, -0.5f}), none, 0.2, 1);
  expectClose(p, {0.9L, 2.1L}, 1e-7);
  std::vector<at::Tensor> one{at::zeros({2})};
  EXPECT_THROW(optimizerUpdate(config, p, floats({0, 0}), one, 0.2, 2),
               std::runtime_error);
}

TEST(Optimizer, ClipCoefficientFollowsClipGradNorm) {
  EXPECT_NEAR(clipCoefficient(10.0, 1.0), 1.0 / (10.0 + 1e-6), 1e-7);
  EXPECT_EQ(clipCoefficient(0.5, 1.0), 1.0);
  EXPECT_EQ(clipCoefficient(1e9, 0.0), 1.0); // clipping off
}

TEST(Optimizer, StepGradientUnscalesAndClipsWithoutTouchingTheBuffer) {
  at::Tensor g = at::tensor({1024.0f, -2048.0f}).to(at::kHalf);
  at::Tensor out = stepGradient(g, 1.0 / 1024, 0.5);
  EXPECT_EQ(out.scalar_type(), at::kFloat);
  expectClose(out, {0.5L, -1.0L}, 0);
  EXPECT_EQ(g[0].item<float>(), 1024.0f);
  at::Tensor f = floats({3.0f});
  EXPECT_EQ(stepGradient(f, 0.5, 1.0)[0].item<float>(), 1.5f);
  EXPECT_EQ(f[0].item<float>(), 3.0f);
}

OptimizerConfig adamwConfig(double beta1, double weightDecay) {
  OptimizerConfig config;
  config.kind = OptimizerKind::AdamW;
  config.lr = 3e-3;
  config.beta1 = beta1;
  config.beta2 = 0.95;
  config.eps = 1e-8;
  config.weightDecay = weightDecay;
  return config;
}

// Random AdamW inputs over a few orders of magnitude, with exact zeros.
struct AdamWInputs {
  at::Tensor p, m, v;
  std::vector<at::Tensor> grads;
  AdamWInputs(int64_t n, int steps, uint64_t seed) {
    at::Generator gen = at::detail::createCPUGenerator(seed);
    auto spread = [&](at::Tensor t) {
      return t * at::exp(at::randn({n}, gen) * 3);
    };
    p = spread(at::randn({n}, gen));
    m = at::randn({n}, gen) * 1e-3;
    v = at::rand({n}, gen) * 1e-6;
    for (int i = 0; i < steps; ++i) {
      at::Tensor g = spread(at::randn({n}, gen));
      g.masked_fill_(at::rand({n}, gen) < 0.01, 0);
      grads.push_back(g);
    }
  }
};

TEST(Optimizer, ParallelAdamWIsBitwiseAdamWStep) {
  for (int64_t n : {int64_t{33}, int64_t{1000}, (int64_t{3} << 16) + 5,
                    (int64_t{1} << 20) + 37}) {
    for (double beta1 : {0.9, 0.3}) {
      for (double wd : {0.0, 0.1}) {
        SCOPED_TRACE("n " + std::to_string(n) + " beta1 " +
                     std::to_string(beta1) + " wd " + std::to_string(wd));
        OptimizerConfig config = adamwConfig(beta1, wd);
        AdamWInputs in(n, 3, static_cast<uint64_t>(n) + (wd > 0));
        at::Tensor p = in.p.clone(), m = in.m.clone(), v = in.v.clone();
        at::Tensor rp = in.p.clone(), rm = in.m.clone(), rv = in.v.clone();
        auto firstDiff = [](const at::Tensor &a, const at::Tensor &b) {
          at::Tensor bad = (a != b).nonzero();
          if (bad.numel() == 0)
            return std::string("none");
          int64_t i = bad[0][0].item<int64_t>();
          char text[128];
          std::snprintf(text, sizeof text, "element %lld: %a vs %a",
                        static_cast<long long>(i), a[i].item<float>(),
                        b[i].item<float>());
          return std::string(text);
        };
        for (int t = 1; t <= 3; ++t) {
          double lr = config.lr * t / 3;
          ASSERT_TRUE(
              adamwStepParallel(p, in.grads[t - 1], m, v, config, lr, t));
          adamwStep(rp, in.grads[t - 1], rm, rv, config, lr, t);
          ASSERT_TRUE(at::equal(m, rm))
              << "exp_avg, step " << t << ", " << firstDiff(m, rm);
          ASSERT_TRUE(at::equal(v, rv))
              << "exp_avg_sq, step " << t << ", " << firstDiff(v, rv);
          ASSERT_TRUE(at::equal(p, rp))
              << "params, step " << t << ", " << firstDiff(p, rp);
        }
        EXPECT_FALSE(at::equal(p, in.p)); // it did update
      }
    }
  }
}

TEST(Optimizer, LargeCpuShardsTakeTheParallelPathWithTheSameNumbers) {
  int64_t n = kParallelAdamWMinNumel + 1001;
  OptimizerConfig config = adamwConfig(0.9, 0.01);
  AdamWInputs in(n, 1, 11);
  at::Tensor p = in.p.clone(), rp = in.p.clone();
  std::vector<at::Tensor> state{in.m.clone(), in.v.clone()};
  at::Tensor rm = in.m.clone(), rv = in.v.clone();
  optimizerUpdate(config, p, in.grads[0], state, 1e-3, 1);
  adamwStep(rp, in.grads[0], rm, rv, config, 1e-3, 1);
  EXPECT_TRUE(at::equal(p, rp));
  EXPECT_TRUE(at::equal(state[0], rm));
  EXPECT_TRUE(at::equal(state[1], rv));
  // Not contiguous: the parallel loop declines, nothing changes.
  at::Tensor strided = at::zeros({2 * n}).slice(0, 0, 2 * n, 2);
  at::Tensor before = strided.clone();
  EXPECT_FALSE(
      adamwStepParallel(strided, in.grads[0], rm, rv, config, 1e-3, 2));
  EXPECT_TRUE(at::equal(strided, before));
}

TEST(Optimizer, ParallelLoopsRunOnSeveralThreads) {
  // at::parallel_for compiles into its caller: without OpenMP (the wheel's
  // threading) it runs on one thread, as the host AdamW loop once did.
  const int threads = at::get_num_threads();
  at::set_num_threads(2);
  std::mutex mutex;
  std::set<std::thread::id> ids;
  at::parallel_for(0, 1 << 20, 1, [&](int64_t, int64_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::lock_guard<std::mutex> lock(mutex);
    ids.insert(std::this_thread::get_id());
  });
  at::set_num_threads(threads);
  EXPECT_EQ(ids.size(), 2u);
}

TEST(Optimizer, AccumulateIntoEqualsAddBitwise) {
  // Across blocks and a ragged end, each type pair: the same bits as add_.
  const int64_t n = 3 * (int64_t{1} << 15) + 77;
  at::Tensor f32 =
      at::randn({n}, at::make_generator<at::CPUGeneratorImpl>(0)) * 3;
  at::Tensor g32 =
      at::randn({n}, at::make_generator<at::CPUGeneratorImpl>(1)) * 1e-3;
  for (at::ScalarType dt : {at::kBFloat16, at::kHalf, at::kFloat})
    for (at::ScalarType st : {at::kBFloat16, at::kHalf, at::kFloat}) {
      at::Tensor dst = f32.to(dt), src = g32.to(st);
      at::Tensor expected = dst.clone().add_(src);
      accumulateInto(dst, src);
      EXPECT_TRUE(at::equal(dst, expected))
          << c10::toString(dt) << " += " << c10::toString(st);
    }
  // Not contiguous: add_ itself.
  at::Tensor strided = at::zeros({2 * n}, at::kBFloat16).slice(0, 0, 2 * n, 2);
  accumulateInto(strided, g32);
  EXPECT_TRUE(at::equal(strided, g32.to(at::kBFloat16)));
}

TEST(Optimizer, DecayMaskCoversTheMatricesOfTheShard) {
  // Two units in one group: a norm (1-D), a matrix, a bias, a matrix tied
  // away (not stored), then a matrix in the second unit.
  Schedule s;
  Unit a{"a", UnitKind::Embedding, {}, 0};
  a.params = {{"norm.weight", {4}, 0, ""},
              {"proj.weight", {2, 3}, 4, ""},
              {"proj.bias", {2}, 10, ""},
              {"tied.weight", {2, 3}, 0, "proj.weight"}};
  a.numel = 12;
  Unit b{"b", UnitKind::Embedding, {{"w", {2, 2}, 0, ""}}, 4};
  s.units = {a, b};
  Group g{"fsdp.all", {"a", "b"}, 16, 16, 8};
  using Ranges = std::vector<std::pair<int64_t, int64_t>>;
  DecayMask whole = decayMask(s, g, 0, 16, WeightDecayScope::Matrices);
  EXPECT_FALSE(whole.all);
  EXPECT_EQ(whole.ranges, (Ranges{{4, 10}, {12, 16}}));
  // The second shard, [8, 16): ranges relative to it.
  EXPECT_EQ(decayMask(s, g, 8, 8, WeightDecayScope::Matrices).ranges,
            (Ranges{{0, 2}, {4, 8}}));
  EXPECT_TRUE(decayMask(s, g, 8, 8, WeightDecayScope::All).all);
}

TEST(Optimizer, MaskedStepsDecayOnlyTheMaskedElements) {
  // Each path equals adamwStep/sgdStep run on the pieces separately, with
  // and without weight decay: torch's two param groups.
  int64_t n = kParallelAdamWMinNumel + 4099;
  DecayMask mask{false, {{0, 1000}, {5000, n - 77}}};
  OptimizerConfig config = adamwConfig(0.9, 0.1);
  OptimizerConfig noDecay = config;
  noDecay.weightDecay = 0;
  AdamWInputs in(n, 2, 21);
  at::Tensor p = in.p.clone(), m = in.m.clone(), v = in.v.clone();
  at::Tensor rp = in.p.clone(), rm = in.m.clone(), rv = in.v.clone();
  std::vector<at::Tensor> state{in.m.clone(), in.v.clone()};
  at::Tensor up = in.p.clone();
  std::vector<std::pair<int64_t, int64_t>> pieces{
      {0, 1000}, {1000, 5000}, {5000, n - 77}, {n - 77, n}};
  for (int t = 1; t <= 2; ++t) {
    ASSERT_TRUE(
        adamwStepParallel(p, in.grads[t - 1], m, v, config, 1e-3, t, mask));
    optimizerUpdate(config, up, in.grads[t - 1], state, 1e-3, t, mask);
    for (size_t i = 0; i < pieces.size(); ++i) {
      auto [b, e] = pieces[i];
      at::Tensor pp = rp.narrow(0, b, e - b), pm = rm.narrow(0, b, e - b),
                 pv = rv.narrow(0, b, e - b);
      adamwStep(pp, in.grads[t - 1].narrow(0, b, e - b), pm, pv,
                i % 2 == 0 ? config : noDecay, 1e-3, t);
    }
  }
  EXPECT_TRUE(at::equal(p, rp));
  EXPECT_TRUE(at::equal(m, rm));
  EXPECT_TRUE(at::equal(v, rv));
  EXPECT_TRUE(at::equal(up, rp));
  // The same through ATen's ops.
  at::Tensor ap = in.p.clone(), am = in.m.clone(), av = in.v.clone();
  for (int t = 1; t <= 2; ++t)
    adamwStep(ap, in.grads[t - 1], am, av, config, 1e-3, t, mask);
  EXPECT_TRUE(at::equal(ap, rp));
  // Undecayed elements moved exactly as without any decay.
  at::Tensor zp = in.p.clone(), zm = in.m.clone(), zv = in.v.clone();
  for (int t = 1; t <= 2; ++t)
    adamwStep(zp, in.grads[t - 1], zm, zv, noDecay, 1e-3, t);
  EXPECT_TRUE(at::equal(ap.narrow(0, 1000, 4000), zp.narrow(0, 1000, 4000)));
  EXPECT_FALSE(at::equal(ap.narrow(0, 0, 1000), zp.narrow(0, 0, 1000)));

  // SGD: the decay term only where the mask says.
  OptimizerConfig sgd;
  sgd.kind = OptimizerKind::SGD;
  sgd.weightDecay = 0.5;
  OptimizerConfig sgdNoDecay = sgd;
  sgdNoDecay.weightDecay = 0;
  at::Tensor sp = in.p.clone(), rsp = in.p.clone(), none;
  sgdStep(sp, in.grads[0], none, sgd, 0.1, 1, mask);
  for (size_t i = 0; i < pieces.size(); ++i) {
    auto [b, e] = pieces[i];
    at::Tensor piece = rsp.narrow(0, b, e - b);
    sgdStep(piece, in.grads[0].narrow(0, b, e - b), none,
            i % 2 == 0 ? sgd : sgdNoDecay, 0.1, 1);
  }
  EXPECT_TRUE(at::equal(sp, rsp));
}

TEST(Optimizer, FusedAdamWOnCudaMatchesAdamWStep) {
  if (!at::hasCUDA() || at::getNumGPUs() == 0)
    GTEST_SKIP() << "no CUDA device";
  OptimizerConfig config = adamwConfig(0.9, 0.1);
  int64_t n = 100003;
  AdamWInputs in(n, 3, 5);
  at::Device cuda(at::kCUDA, 0);
  at::Tensor p = in.p.to(cuda), m = in.m.to(cuda), v = in.v.to(cuda);
  at::Tensor rp = in.p.clone(), rm = in.m.clone(), rv = in.v.clone();
  for (int t = 1; t <= 3; ++t) {
    std::vector<at::Tensor> state{m, v};
    optimizerUpdate(config, p, in.grads[t - 1].to(cuda), state, 1e-3, t);
    adamwStep(rp, in.grads[t - 1], rm, rv, config, 1e-3, t);
  }
  // The fused kernel computes the same formula in fp32 in another order,
  // with fused multiply-adds: m = b1 m + (1 - b1) g rounds once where the
  // CPU rounds twice. Where the two terms nearly cancel, m is tiny and the
  // difference is a rounding of the terms, not of m (seen on an H100: m off
  // by more than 1e-9 absolute): so m's absolute tolerance is 8 fp32 ulps
  // (1e-6 relative) of the largest gradient that entered it.
  EXPECT_TRUE(at::allclose(p.cpu(), rp, 1e-5, 1e-7));
  at::Tensor gmax = in.grads[0].abs();
  for (int t = 1; t < 3; ++t)
    gmax = at::maximum(gmax, in.grads[t].abs());
  EXPECT_TRUE(((m.cpu() - rm).abs() <= 1e-5 * rm.abs() + 1e-6 * gmax + 1e-9)
                  .all()
                  .item<bool>());
  EXPECT_TRUE(at::allclose(v.cpu(), rv, 1e-5, 1e-12));
  EXPECT_FALSE(at::allclose(p.cpu(), in.p, 1e-7, 0));
  // With a mask: two fused calls, as torch's two param groups.
  DecayMask mask{false, {{10, 5000}, {9000, n}}};
  at::Tensor mp = in.p.to(cuda), mm = in.m.to(cuda), mv = in.v.to(cuda);
  at::Tensor rmp = in.p.clone(), rmm = in.m.clone(), rmv = in.v.clone();
  std::vector<at::Tensor> masked{mm, mv};
  optimizerUpdate(config, mp, in.grads[0].to(cuda), masked, 1e-3, 1, mask);
  adamwStep(rmp, in.grads[0], rmm, rmv, config, 1e-3, 1, mask);
  EXPECT_TRUE(at::allclose(mp.cpu(), rmp, 1e-5, 1e-7));
  // SGD runs the same ops on the device.
  OptimizerConfig sgd;
  sgd.kind = OptimizerKind::SGD;
  sgd.momentum = 0.9;
  at::Tensor sp = in.p.to(cuda), rsp = in.p.clone();
  std::vector<at::Tensor> buf{at::zeros({n}, sp.options())};
  std::vector<at::Tensor> rbuf{at::zeros({n})};
  optimizerUpdate(sgd, sp, in.grads[0].to(cuda), buf, 0.1, 1);
  optimizerUpdate(sgd, rsp, in.grads[0], rbuf, 0.1, 1);
  EXPECT_TRUE(at::allclose(sp.cpu(), rsp, 1e-6, 1e-9));
}

TEST(Optimizer, DynamicLossScaleBacksOffAndGrows) {
  DynamicLossScale scaler{/*growthInterval=*/3, 0};
  double s = 1024;
  s = scaler.update(s, /*foundInf=*/true);
  EXPECT_EQ(s, 512);
  s = scaler.update(s, false);
  s = scaler.update(s, false);
  EXPECT_EQ(s, 512);
  EXPECT_EQ(scaler.growthTracker, 2);
  s = scaler.update(s, true); // an overflow restarts the count
  EXPECT_EQ(s, 256);
  EXPECT_EQ(scaler.growthTracker, 0);
  for (int i = 0; i < 3; ++i)
    s = scaler.update(s, false);
  EXPECT_EQ(s, 512);
  EXPECT_EQ(scaler.growthTracker, 0);
}

LRScheduleConfig lrConfig(LRScheduleKind kind, int64_t warmup,
                          double minRatio) {
  LRScheduleConfig c;
  c.kind = kind;
  c.warmup = warmup;
  c.minLrRatio = minRatio;
  return c;
}

TEST(LRSchedule, ConstantWithWarmup) {
  auto c = lrConfig(LRScheduleKind::Constant, 4, 0);
  EXPECT_EQ(lrFactor(c, 0, 10), 0.0);
  EXPECT_EQ(lrFactor(c, 1, 10), 0.25);
  EXPECT_EQ(lrFactor(c, 3, 10), 0.75);
  EXPECT_EQ(lrFactor(c, 4, 10), 1.0);
  EXPECT_EQ(lrFactor(c, 9, 10), 1.0);
  EXPECT_EQ(lrFactor(lrConfig(LRScheduleKind::Constant, 0, 0), 0, 10), 1.0);
}

TEST(LRSchedule, LinearMatchesHuggingFace) {
  auto c = lrConfig(LRScheduleKind::Linear, 2, 0);
  EXPECT_EQ(lrFactor(c, 1, 10), 0.5); // warmup: 1/2
  EXPECT_EQ(lrFactor(c, 2, 10), 1.0); // (10-2)/8
  EXPECT_EQ(lrFactor(c, 6, 10), 0.5); // (10-6)/8
  EXPECT_EQ(lrFactor(c, 9, 10), 0.125);
  EXPECT_EQ(lrFactor(c, 12, 10), 0.0); // clamped
  auto floor = lrConfig(LRScheduleKind::Linear, 2, 0.2);
  EXPECT_DOUBLE_EQ(lrFactor(floor, 6, 10), 0.6); // 0.2 + 0.8 * 0.5
  EXPECT_DOUBLE_EQ(lrFactor(floor, 9, 10), 0.3); // 0.2 + 0.8 * 0.125
  EXPECT_DOUBLE_EQ(lrFactor(floor, 12, 10), 0.2);
}

TEST(LRSchedule, CosineMatchesHuggingFace) {
  auto c = lrConfig(LRScheduleKind::Cosine, 2, 0);
  EXPECT_EQ(lrFactor(c, 0, 10), 0.0);
  EXPECT_EQ(lrFactor(c, 2, 10), 1.0);
  EXPECT_DOUBLE_EQ(lrFactor(c, 4, 10), 0.8535533905932737); // 0.5(1+cos(pi/4))
  EXPECT_NEAR(lrFactor(c, 6, 10), 0.5, 1e-15);
  EXPECT_DOUBLE_EQ(lrFactor(c, 9, 10),
                   0.038060233744356631);              // 0.5(1+cos(7pi/8))
  auto min = lrConfig(LRScheduleKind::Cosine, 2, 0.1); // cosine_with_min_lr
  EXPECT_NEAR(lrFactor(min, 6, 10), 0.55, 1e-15);
  EXPECT_DOUBLE_EQ(lrFactor(min, 4, 10), 0.1 + 0.9 * 0.8535533905932737);
  EXPECT_DOUBLE_EQ(lrFactor(min, 0, 10), 0.0); // warmup starts at 0 still
}

TEST(LRSchedule, HoldsTheFinalRatePastTheLastStep) {
  // HF's cosine would climb back (0.5(1+cos(pi*12/8)) = 0.5 at k = 14);
  // a run longer than train.steps keeps the end of the schedule instead.
  auto c = lrConfig(LRScheduleKind::Cosine, 2, 0);
  EXPECT_NEAR(lrFactor(c, 10, 10), 0.0, 1e-15);
  EXPECT_NEAR(lrFactor(c, 14, 10), 0.0, 1e-15);
  auto min = lrConfig(LRScheduleKind::Cosine, 2, 0.1);
  EXPECT_NEAR(lrFactor(min, 14, 10), 0.1, 1e-15);
  EXPECT_NEAR(lrFactor(min, 100, 10), 0.1, 1e-15);
}

TEST(LRSchedule, UnknownKindIsAnError) {}

} // namespace
