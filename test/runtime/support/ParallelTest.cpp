//===- ParallelTest.cpp - support::parallelFor ----------------------------===//

#include "Parallel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using plan::rt::support::parallelFor;

TEST(ParallelFor, CallsEveryIndexOnce) {
  for (size_t n : {0, 1, 2, 7, 1000}) {
    std::vector<std::atomic<int>> calls(n);
    parallelFor(n, [&](size_t i) { calls[i].fetch_add(1); });
    for (size_t i = 0; i < n; ++i)
      EXPECT_EQ(calls[i].load(), 1) << "index " << i << " of " << n;
  }
}

TEST(ParallelFor, OneItemRunsOnTheCallingThread) {
  std::thread::id ran;
  parallelFor(1, [&](size_t) { ran = std::this_thread::get_id(); });
  EXPECT_EQ(ran, std::this_thread::get_id());
}

// The error a sequential loop would meet first, once every call returned.
TEST(ParallelFor, RethrowsTheLowestIndexsErrorAfterAllCalls) {
  std::atomic<int> calls{0};
  try {
    parallelFor(64, [&](size_t i) {
      calls.fetch_add(1);
      if (i == 5 || i == 40 || i == 63)
        throw std::runtime_error("item " + std::to_string(i));
    });
    FAIL() << "no error";
  } catch (const std::runtime_error &e) {
    EXPECT_EQ(std::string(e.what()), "item 5");
  }
  EXPECT_EQ(calls.load(), 64);
}
