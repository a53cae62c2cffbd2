//===- ArenaPacking.cpp - Offline packing of buffers into an arena --------===//
//
// Why first-fit by decreasing size: every lifetime is known before anything
// runs, so the packing can be offline. Placing large buffers first lets the
// small ones fill the gaps between them, which on training schedules (a few
// sizes, many short transient buffers between long-lived ones) lands at or
// near the peak of live bytes; an online allocator simulation (first fit in
// program order) fragments as soon as a small buffer outlives a large one
// allocated after it. Buffers live over the whole program (persistent state)
// conflict with everything, so they go first and form one contiguous block;
// the others go above it, so the queries below never return them.
//
// Finding the placed buffers that are live with a new one must not scan all
// of them (a 405B plan has thousands of buffers): the intervals, sorted by
// `first`, are the leaves of a static segment tree (over buckets of 32
// leaves) that keeps, per node, the largest `last` among its placed leaves.
// The placed buffers live during [first, last] are the placed leaves with
// leaf.first <= last (a prefix of the leaves) and leaf.last >= first; the
// descent prunes every subtree whose largest `last` is below `first`, so a
// query costs O((k + 1) log n + 32 (k + 1)) for k results.
//
//===----------------------------------------------------------------------===//

#include "analysis/ArenaPacking.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <utility>

using namespace plan;

namespace {

constexpr int64_t kUnplaced = std::numeric_limits<int64_t>::min();

uint64_t alignUp(uint64_t value, uint64_t alignment) {
  alignment = std::max<uint64_t>(alignment, 1);
  return (value + alignment - 1) / alignment * alignment;
}

/// Placed intervals by lifetime: leaves are the input intervals in order of
/// `first`, in buckets of kBucket (scanned linearly: contiguous and cheaper
/// than descending to single leaves); over the buckets a segment tree holds
/// the largest `last` of the placed leaves below each node.
class LiveIndex {
public:
  explicit LiveIndex(const std::vector<ArenaInterval> &intervals) {
    order.resize(intervals.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return intervals[a].first < intervals[b].first;
    });
    leafOf.resize(intervals.size());
    leafFirst.resize(intervals.size());
    lastOf.resize(intervals.size());
    for (size_t leaf = 0; leaf < order.size(); ++leaf) {
      const ArenaInterval &interval = intervals[order[leaf]];
      leafOf[order[leaf]] = leaf;
      leafFirst[leaf] = interval.first;
      lastOf[order[leaf]] = std::max(interval.first, interval.last);
    }
    leafLast.assign(intervals.size(), kUnplaced);
    size_t buckets = (intervals.size() + kBucket - 1) / kBucket;
    for (leaves = 1; leaves < buckets; leaves *= 2)
      ;
    maxLast.assign(2 * leaves, kUnplaced);
  }

  void place(size_t index) {
    size_t leaf = leafOf[index];
    leafLast[leaf] = lastOf[index];
    size_t node = leaves + leaf / kBucket;
    maxLast[node] = std::max(maxLast[node], lastOf[index]);
    for (node /= 2; node >= 1; node /= 2)
      maxLast[node] = std::max(maxLast[2 * node], maxLast[2 * node + 1]);
  }

  /// Appends the placed intervals live at some point of [first, last].
  void collectLive(int64_t first, int64_t last,
                   std::vector<size_t> &result) const {
    // Leaves [0, end) start no later than `last`.
    size_t end = std::upper_bound(leafFirst.begin(), leafFirst.end(), last) -
                 leafFirst.begin();
    if (end > 0)
      collect(1, 0, leaves, end, first, result);
  }

private:
  static constexpr size_t kBucket = 32;

  /// Node `node` covers buckets [lo, hi); leaves before `end` qualify.
  void collect(size_t node, size_t lo, size_t hi, size_t end, int64_t first,
               std::vector<size_t> &result) const {
    if (lo * kBucket >= end || maxLast[node] < first)
      return;
    if (hi - lo == 1) {
      size_t stop = std::min(end, hi * kBucket);
      for (size_t leaf = lo * kBucket; leaf < stop; ++leaf)
        if (leafLast[leaf] >= first)
          result.push_back(order[leaf]);
      return;
    }
    size_t mid = lo + (hi - lo) / 2;
    collect(2 * node, lo, mid, end, first, result);
    collect(2 * node + 1, mid, hi, end, first, result);
  }

  std::vector<size_t> order;      // leaf -> interval
  std::vector<size_t> leafOf;     // interval -> leaf
  std::vector<int64_t> leafFirst; // leaf -> first, ascending
  std::vector<int64_t> lastOf;    // interval -> last (at least first)
  std::vector<int64_t> leafLast;  // leaf -> last if placed, else kUnplaced
  size_t leaves = 1;              // buckets, rounded up to a power of two
  std::vector<int64_t> maxLast;
};

} // namespace

ArenaLayout plan::packArena(const std::vector<ArenaInterval> &intervals) {
  ArenaLayout layout;
  layout.offsets.assign(intervals.size(), 0);
  if (intervals.empty())
    return layout;

  int64_t spanFirst = std::numeric_limits<int64_t>::max();
  int64_t spanLast = std::numeric_limits<int64_t>::min();
  for (const ArenaInterval &interval : intervals) {
    spanFirst = std::min(spanFirst, interval.first);
    spanLast = std::max(spanLast, std::max(interval.first, interval.last));
  }
  // With fixed intervals, the whole-span ones are placed around them and
  // the others may lie below them too (where no fixed one is live).
  bool anyFixed = std::any_of(
      intervals.begin(), intervals.end(),
      [](const ArenaInterval &interval) { return interval.fixed.has_value(); });
  auto spansAll = [&](const ArenaInterval &interval) {
    return !interval.fixed && interval.first <= spanFirst &&
           interval.last >= spanLast;
  };

  std::vector<size_t> placement(intervals.size());
  std::iota(placement.begin(), placement.end(), 0);
  std::stable_sort(placement.begin(), placement.end(), [&](size_t a, size_t b) {
    const ArenaInterval &x = intervals[a], &y = intervals[b];
    if (x.fixed.has_value() != y.fixed.has_value())
      return x.fixed.has_value();
    bool xAll = spansAll(x), yAll = spansAll(y);
    if (xAll != yAll)
      return xAll;
    if (x.size != y.size)
      return x.size > y.size;
    return x.first < y.first;
  });

  // The lowest offset at or above `offset`, aligned, where `size` bytes fit
  // below every range of `taken` (sorted by offset) that they would hit.
  auto firstFit = [](uint64_t offset, uint64_t size, uint64_t alignment,
                     const std::vector<std::pair<uint64_t, uint64_t>> &taken) {
    offset = alignUp(offset, alignment);
    for (auto [begin, end] : taken) {
      if (offset + size <= begin)
        break;
      offset = std::max(offset, alignUp(end, alignment));
    }
    return offset;
  };

  LiveIndex index(intervals);
  auto next = placement.begin();
  for (; next != placement.end() && intervals[*next].fixed; ++next) {
    const ArenaInterval &interval = intervals[*next];
    layout.offsets[*next] = *interval.fixed;
    layout.size = std::max(layout.size, *interval.fixed + interval.size);
    index.place(*next);
  }

  // Whole-span buffers all conflict with each other and with everything
  // else: first fit among themselves (and the fixed ones), kept sorted by
  // offset.
  std::vector<std::pair<uint64_t, uint64_t>> block; // [offset, end)
  for (size_t fixed = 0; fixed < intervals.size(); ++fixed)
    if (intervals[fixed].fixed && intervals[fixed].size)
      block.emplace_back(*intervals[fixed].fixed,
                         *intervals[fixed].fixed + intervals[fixed].size);
  std::sort(block.begin(), block.end());
  for (; next != placement.end() && spansAll(intervals[*next]); ++next) {
    const ArenaInterval &interval = intervals[*next];
    if (interval.size == 0)
      continue;
    uint64_t offset = firstFit(0, interval.size, interval.alignment, block);
    std::pair<uint64_t, uint64_t> range{offset, offset + interval.size};
    block.insert(std::upper_bound(block.begin(), block.end(), range), range);
    layout.offsets[*next] = offset;
    layout.size = std::max(layout.size, range.second);
    if (anyFixed)
      index.place(*next);
  }

  // Everything else goes above that block, so the queries below need not
  // return the whole-span buffers, which are live with every one of them;
  // with fixed intervals, anywhere that is free while it is live.
  uint64_t base = anyFixed ? 0 : layout.size;
  std::vector<size_t> live;
  std::vector<std::pair<uint64_t, uint64_t>> taken; // [offset, end)
  for (; next != placement.end(); ++next) {
    size_t i = *next;
    const ArenaInterval &interval = intervals[i];
    // An empty buffer occupies nothing and conflicts with nothing.
    if (interval.size == 0)
      continue;
    live.clear();
    index.collectLive(interval.first, std::max(interval.first, interval.last),
                      live);
    taken.clear();
    for (size_t other : live)
      taken.emplace_back(layout.offsets[other],
                         layout.offsets[other] + intervals[other].size);
    uint64_t offset = alignUp(base, interval.alignment);
    // Usually a few passes over the live ranges, each moving past the ones
    // in the way, find the lowest free offset, cheaper than sorting them
    // (on the 405B plan, a third of the time). Each move only skips offsets
    // that conflict, so when a pass moves nothing the offset is the one the
    // sorted scan would find; if 8 passes keep moving, fall back to that
    // scan, so a query stays O(k log k).
    bool moved = true;
    for (int pass = 0; moved && pass < 8; ++pass) {
      moved = false;
      for (auto [begin, end] : taken)
        if (begin < offset + interval.size && offset < end) {
          offset = alignUp(end, interval.alignment);
          moved = true;
        }
    }
    if (moved) {
      std::sort(taken.begin(), taken.end());
      offset = firstFit(base, interval.size, interval.alignment, taken);
    }
    layout.offsets[i] = offset;
    layout.size = std::max(layout.size, offset + interval.size);
    index.place(i);
  }
  return layout;
}
