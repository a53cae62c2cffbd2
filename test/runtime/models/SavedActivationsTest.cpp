//===- SavedActivationsTest.cpp - Saved tensors copied into a buffer ------===//

#include "SavedActivations.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <thread>

using namespace plan::rt;

namespace {

const void *storageOf(const at::Tensor &t) {
  return t.storage().unsafeGetStorageImpl();
}

/// x * w, then exp: mul saves x (for w's gradient) and w (for x's), exp
/// saves its output.
struct Graph {
  at::Tensor x = at::linspace(-1, 1, 1000, at::kFloat).requires_grad_(true);
  at::Tensor w = at::full({1000}, 0.5f).requires_grad_(true);
  at::Tensor y;
  void forward() { y = (x * w).exp(); }
  std::vector<at::Tensor> grads() {
    return torch::autograd::grad({y.sum()}, {x, w});
  }
};

} // namespace

TEST(SaveInto, CopiesWhatAutogradSavesAndReadsItBack) {
  Graph plain;
  plain.forward();
  std::vector<at::Tensor> expected = plain.grads();

  Graph g;
  at::Tensor buffer = at::full({8192}, std::nan(""), at::kFloat); // 32 KiB
  {
    // w is a parameter: kept by reference.
    SaveInto into(buffer, {storageOf(g.w)});
    g.forward();
    // x (4000 bytes) and exp's output (4000), each 64-byte aligned.
    EXPECT_GE(into.usedBytes(), 8000);
    EXPECT_LE(into.usedBytes(), 8000 + 2 * 64);
    EXPECT_EQ(into.overflowBytes(), 0);
  }
  EXPECT_EQ(buffer.isnan().logical_not().sum().item<int64_t>(), 2000);
  std::vector<at::Tensor> got = g.grads();
  EXPECT_TRUE(at::equal(got[0], expected[0]));
  EXPECT_TRUE(at::equal(got[1], expected[1]));
}

TEST(SaveInto, BackwardReadsTheBufferNotTheOriginals) {
  Graph g;
  at::Tensor buffer = at::zeros({8192}, at::kFloat);
  {
    SaveInto into(buffer, {storageOf(g.w)});
    g.forward();
  }
  // The saved x and exp(x * w) now read 0 from the buffer: w's gradient,
  // sum(x * exp(x * w)), becomes 0.
  buffer.zero_();
  std::vector<at::Tensor> got = g.grads();
  EXPECT_EQ(got[1].abs().sum().item<float>(), 0.0f);
}

TEST(SaveInto, ViewsOfOneStorageShareOneCopy) {
  at::Tensor x = at::randn({4, 256}).requires_grad_(true);
  at::Tensor buffer = at::empty({4096}, at::kFloat);
  at::Tensor y;
  {
    SaveInto into(buffer, {});
    at::Tensor h = x * 2;                     // saves nothing (scalar factor)
    auto parts = h.split(128, 1);             // views of h's storage
    y = parts[0] * parts[1];                  // saves both views
    EXPECT_EQ(into.usedBytes(), 4 * 256 * 4); // h's storage, once
  }
  at::Tensor gx = torch::autograd::grad({y.sum()}, {x})[0];
  at::Tensor h = x.detach() * 2;
  at::Tensor expected =
      at::cat({h.narrow(1, 128, 128), h.narrow(1, 0, 128)}, 1) * 2;
  EXPECT_TRUE(at::allclose(gx, expected));
}

TEST(SaveInto, WhatDoesNotFitIsKeptAndCounted) {
  Graph plain;
  plain.forward();
  std::vector<at::Tensor> expected = plain.grads();
  for (int64_t elements : {int64_t(0), int64_t(1100)}) {
    SCOPED_TRACE(elements);
    Graph g;
    at::Tensor buffer = at::empty({elements}, at::kFloat);
    {
      SaveInto into(buffer, {storageOf(g.w)});
      g.forward();
      // 1100 floats hold x but not exp's output too.
      EXPECT_EQ(into.overflowBytes(), elements == 0 ? 8000 : 4000);
    }
    std::vector<at::Tensor> got = g.grads();
    EXPECT_TRUE(at::equal(got[0], expected[0]));
    EXPECT_TRUE(at::equal(got[1], expected[1]));
  }
}

TEST(SaveInto, OnlyTheOpenScopeOnItsThread) {
  at::Tensor buffer = at::full({8192}, 7.0f);
  {
    SaveInto into(buffer, {});
    // Another thread's graph is not this scope's.
    Graph other;
    std::thread worker([&] { other.forward(); });
    worker.join();
    EXPECT_EQ(into.usedBytes(), 0);
    other.grads();
  }
  // Closed: autograd saves as usual, nothing is copied.
  Graph g;
  g.forward();
  EXPECT_TRUE((buffer == 7).all().item<bool>());
  g.grads();
}

// A saved tensor on another device than the buffer's is not that device's
// memory: kept by reference, neither copied nor counted.
TEST(SaveInto, TensorsOnAnotherDeviceAreKeptUncounted) {
  at::Tensor x = at::ones({1000}, at::device(at::kMeta)).requires_grad_(true);
  at::Tensor w = at::ones({1000}, at::device(at::kMeta)).requires_grad_(true);
  at::Tensor buffer = at::empty({8192}, at::kFloat);
  at::Tensor y;
  {
    SaveInto into(buffer, {});
    y = (x * w).exp();
    EXPECT_EQ(into.usedBytes(), 0);
    EXPECT_EQ(into.overflowBytes(), 0);
  }
  std::vector<at::Tensor> g = torch::autograd::grad({y.sum()}, {x, w});
  EXPECT_TRUE(g[0].is_meta());
}
