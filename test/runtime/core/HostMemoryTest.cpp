//===- HostMemoryTest.cpp - The CPU allocator's byte counters -------------===//

#include "HostMemory.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <thread>

using namespace plan::rt;

TEST(HostMemory, CountsTensorsWhileTheyLive) {
  host_memory::install();
  host_memory::install(); // idempotent
  int64_t before = host_memory::current();
  {
    at::Tensor a = at::empty({1000}, at::kFloat);
    EXPECT_EQ(host_memory::current(), before + 4000);
    at::Tensor b = at::zeros({10, 10}, at::kDouble);
    EXPECT_EQ(host_memory::current(), before + 4800);
    at::Tensor view = a.narrow(0, 0, 10); // no new storage
    EXPECT_EQ(host_memory::current(), before + 4800);
  }
  EXPECT_EQ(host_memory::current(), before);
}

TEST(HostMemory, PeakIsTheMostAliveAtOnceSinceTheReset) {
  host_memory::install();
  int64_t base = host_memory::current();
  host_memory::resetPeak();
  EXPECT_EQ(host_memory::peak(), base);
  { at::Tensor big = at::empty({1 << 20}, at::kByte); }
  at::Tensor small = at::empty({1024}, at::kByte);
  EXPECT_EQ(host_memory::peak(), base + (1 << 20));
  host_memory::resetPeak();
  EXPECT_EQ(host_memory::peak(), base + 1024);
}

TEST(HostMemory, DataIsAlignedAndUsable) {
  host_memory::install();
  for (int64_t n : {1, 3, 64, 1000, 1 << 16}) {
    at::Tensor t = at::arange(n, at::kLong);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data_ptr()) % 64, 0u) << n;
    EXPECT_EQ(t.sum().item<int64_t>(), n * (n - 1) / 2);
    // Resizing reallocates through the allocator and copies.
    t.resize_({2 * n});
    EXPECT_EQ(t.narrow(0, 0, n).sum().item<int64_t>(), n * (n - 1) / 2);
  }
}

TEST(HostMemory, CountsAllocationsFromOtherThreads) {
  host_memory::install();
  int64_t before = host_memory::current();
  at::Tensor kept;
  std::thread worker([&] { kept = at::empty({256}, at::kFloat); });
  worker.join();
  EXPECT_EQ(host_memory::current(), before + 1024);
  kept.reset();
  EXPECT_EQ(host_memory::current(), before);
}
