//===- ArenaPackingTest.cpp - Offline arena packing
//------------------------===//
//
// packArena must never place two buffers live at the same time on the same
// bytes, must honour alignment, and should reach the peak of live bytes where
// the lifetimes allow it (nested, stack-like sequences).
//
//===----------------------------------------------------------------------===//

#include "analysis/ArenaPacking.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <map>
#include <random>

using namespace plan;

namespace {

bool liveTogether(const ArenaInterval &a, const ArenaInterval &b) {
  return a.first <= b.last && b.first <= a.last;
}

/// Checks every pair of buffers live together, the alignment and the arena
/// size.
void expectValid(const std::vector<ArenaInterval> &intervals,
                 const ArenaLayout &layout) {
  ASSERT_EQ(layout.offsets.size(), intervals.size());
  uint64_t size = 0;
  for (size_t i = 0; i < intervals.size(); ++i) {
    EXPECT_EQ(layout.offsets[i] % intervals[i].alignment, 0u) << "buffer " << i;
    size = std::max(size, layout.offsets[i] + intervals[i].size);
  }
  EXPECT_EQ(layout.size, size);
  for (size_t i = 0; i < intervals.size(); ++i)
    for (size_t j = i + 1; j < intervals.size(); ++j) {
      if (!liveTogether(intervals[i], intervals[j]))
        continue;
      bool apart = layout.offsets[i] + intervals[i].size <= layout.offsets[j] ||
                   layout.offsets[j] + intervals[j].size <= layout.offsets[i];
      EXPECT_TRUE(apart) << "buffers " << i << " and " << j << " overlap";
    }
}

/// The largest sum of sizes live at one program point: no packing is smaller.
uint64_t peakLiveBytes(const std::vector<ArenaInterval> &intervals) {
  std::map<int64_t, int64_t> delta;
  for (const ArenaInterval &interval : intervals) {
    delta[interval.first] += static_cast<int64_t>(interval.size);
    delta[interval.last + 1] -= static_cast<int64_t>(interval.size);
  }
  int64_t live = 0, peak = 0;
  for (auto [point, change] : delta) {
    live += change;
    peak = std::max(peak, live);
  }
  return static_cast<uint64_t>(peak);
}

TEST(ArenaPackingTest, EmptyInput) {
  ArenaLayout layout = packArena({});
  EXPECT_TRUE(layout.offsets.empty());
  EXPECT_EQ(layout.size, 0u);
}

TEST(ArenaPackingTest, DisjointLifetimesShareMemory) {
  std::vector<ArenaInterval> intervals = {
      {512, 256, 0, 1}, {1024, 256, 2, 3}, {256, 256, 4, 9}};
  ArenaLayout layout = packArena(intervals);
  expectValid(intervals, layout);
  EXPECT_EQ(layout.offsets, (std::vector<uint64_t>{0, 0, 0}));
  EXPECT_EQ(layout.size, 1024u);
}

TEST(ArenaPackingTest, OverlappingLifetimesDoNotShareMemory) {
  // Each pair overlaps, the last two at one point only (inclusive ends).
  std::vector<ArenaInterval> intervals = {
      {512, 256, 0, 5}, {1024, 256, 3, 7}, {256, 256, 7, 9}};
  ArenaLayout layout = packArena(intervals);
  expectValid(intervals, layout);
  // Largest first: 1024 at 0, then 512 above it, then 256 above the 1024
  // (it is not live with the 512, which ended at 5).
  EXPECT_EQ(layout.offsets, (std::vector<uint64_t>{1024, 0, 1024}));
  EXPECT_EQ(layout.size, 1536u);
}

TEST(ArenaPackingTest, Alignment) {
  std::vector<ArenaInterval> intervals = {
      {10, 256, 0, 4}, {3, 256, 0, 4}, {1, 64, 0, 4}, {7, 1, 0, 4}};
  ArenaLayout layout = packArena(intervals);
  expectValid(intervals, layout);
  // All live together: largest first, each at the lowest multiple of its
  // alignment past the bytes taken below it: 10 at 0, 7 right after it (no
  // alignment), 3 at 256, and 1 in the gap at 64.
  EXPECT_EQ(layout.offsets, (std::vector<uint64_t>{0, 256, 64, 10}));
  EXPECT_EQ(layout.size, 259u);
}

TEST(ArenaPackingTest, StackLikeSequenceReachesPeak) {
  // Pushes and pops as a forward/backward pass makes them: activations
  // saved in order and released in reverse, with scratch buffers between.
  std::vector<ArenaInterval> intervals = {
      {256, 256, 0, 20},   // embedding input, live to the end
      {2048, 256, 1, 19},  // block 0 saves
      {512, 256, 2, 3},    // scratch
      {2048, 256, 4, 17},  // block 1 saves
      {768, 256, 5, 6},    // scratch
      {1024, 256, 7, 15},  // head saves
      {4096, 256, 8, 9},   // logits
      {4096, 256, 10, 11}, // their gradient
      {1536, 256, 16, 16}, // scratch during backward of block 1
  };
  ArenaLayout layout = packArena(intervals);
  expectValid(intervals, layout);
  EXPECT_EQ(layout.size, peakLiveBytes(intervals));
  EXPECT_EQ(layout.size, 256u + 2048 + 2048 + 1024 + 4096);
}

TEST(ArenaPackingTest, WholeSpanBuffersFormTheBottomBlock) {
  // Buffers live over the whole input (persistent state) go first, even
  // when a transient one is larger, so they stay contiguous from 0.
  std::vector<ArenaInterval> intervals = {
      {100, 256, 0, 100}, {100000, 256, 10, 20}, {300, 256, 0, 100}};
  ArenaLayout layout = packArena(intervals);
  expectValid(intervals, layout);
  EXPECT_EQ(layout.offsets[2], 0u);
  EXPECT_EQ(layout.offsets[0], 512u);
  EXPECT_EQ(layout.offsets[1], 768u);
}

TEST(ArenaPackingTest, FreedSpaceIsReusedByALaterSmallerBuffer) {
  std::vector<ArenaInterval> intervals = {
      {256, 256, 0, 10}, {4096, 256, 1, 2}, {1024, 256, 3, 4}};
  ArenaLayout layout = packArena(intervals);
  expectValid(intervals, layout);
  EXPECT_EQ(layout.offsets[1], layout.offsets[2]);
  EXPECT_EQ(layout.size, 4096u + 256);
}

TEST(ArenaPackingTest, RandomizedNoOverlap) {
  std::mt19937_64 random(20261122);
  for (int round = 0; round < 20; ++round) {
    std::uniform_int_distribution<int> count(1, 300);
    std::uniform_int_distribution<uint64_t> size(1, 1 << 16);
    std::uniform_int_distribution<int> alignmentLog(0, 8);
    std::uniform_int_distribution<int64_t> start(0, 1000);
    std::uniform_int_distribution<int64_t> length(0, 200);
    std::vector<ArenaInterval> intervals(count(random));
    for (ArenaInterval &interval : intervals) {
      interval.size = size(random);
      interval.alignment = uint64_t(1) << alignmentLog(random);
      interval.first = start(random);
      interval.last = interval.first + length(random);
    }
    // Some whole-program buffers, as persistent state would be.
    for (int i = 0; i < 5; ++i)
      intervals.push_back({size(random), 256, 0, 1200});
    ArenaLayout layout = packArena(intervals);
    expectValid(intervals, layout);
    EXPECT_GE(layout.size, peakLiveBytes(intervals));
    // Deterministic: the same input gives the same layout.
    ArenaLayout again = packArena(intervals);
    EXPECT_EQ(again.offsets, layout.offsets);
    EXPECT_EQ(again.size, layout.size);
    if (HasFailure())
      return;
  }
}

// A fixed interval keeps its offset (a held buffer's bytes while held, in
// sched-plan-memory's frames): the others lie on its bytes where they are
// not live with it, and go around it where they are.
TEST(ArenaPackingTest, FixedIntervalsKeepTheirPlaceAndTheOthersGoAround) {
  std::vector<ArenaInterval> intervals = {
      {256, 256, 5, 9, 0},   // held over 5-9 at 0
      {512, 256, 0, 4},      // before it: at its bytes
      {256, 256, 3, 6},      // meets it and the one before: above both
      {256, 256, 10, 12, 0}, // held again over 10-12
  };
  ArenaLayout layout = packArena(intervals);
  expectValid(intervals, layout);
  EXPECT_EQ(layout.offsets[0], 0u);
  EXPECT_EQ(layout.offsets[3], 0u);
  EXPECT_EQ(layout.offsets[1], 0u);
  EXPECT_EQ(layout.offsets[2], 512u);
  EXPECT_EQ(layout.size, 768u);
  // A buffer live over the whole span goes around it as well.
  intervals.push_back({256, 256, 0, 12});
  layout = packArena(intervals);
  expectValid(intervals, layout);
  EXPECT_EQ(layout.offsets[0], 0u);
  EXPECT_EQ(layout.offsets[4], 256u);
}

TEST(ArenaPackingTest, RandomizedFixedIntervalsNoOverlap) {
  std::mt19937_64 random(20261203);
  for (int round = 0; round < 20; ++round) {
    std::uniform_int_distribution<int> count(1, 200);
    std::uniform_int_distribution<uint64_t> size(1, 1 << 14);
    std::uniform_int_distribution<int64_t> start(0, 400);
    std::uniform_int_distribution<int64_t> length(0, 60);
    std::vector<ArenaInterval> intervals(count(random));
    for (ArenaInterval &interval : intervals) {
      interval.size = size(random);
      interval.alignment = 256;
      interval.first = start(random);
      interval.last = interval.first + length(random);
    }
    // Three held buffers side by side at the bottom, each held over a few
    // disjoint spans.
    uint64_t at = 0;
    for (int held = 0; held < 3; ++held) {
      uint64_t bytes = size(random);
      for (int64_t from = held * 7; from < 400; from += 97)
        intervals.push_back({bytes, 256, from, from + 20, at});
      at = (at + bytes + 255) / 256 * 256;
    }
    intervals.push_back({size(random), 256, 0, 460});
    ArenaLayout layout = packArena(intervals);
    expectValid(intervals, layout);
    for (size_t i = 0; i < intervals.size(); ++i) {
      if (intervals[i].fixed) {
        EXPECT_EQ(layout.offsets[i], *intervals[i].fixed) << "buffer " << i;
      }
    }
    if (HasFailure())
      return;
  }
}

TEST(ArenaPackingTest, EqualSizesInSequenceNeedOneSlotEach) {
  // Many same-size buffers, each overlapping only the next: two slots.
  std::vector<ArenaInterval> intervals;
  for (int64_t i = 0; i < 1000; ++i)
    intervals.push_back({1024, 256, 2 * i, 2 * i + 2});
  ArenaLayout layout = packArena(intervals);
  expectValid(intervals, layout);
  EXPECT_EQ(layout.size, 2048u);
}

} // namespace
