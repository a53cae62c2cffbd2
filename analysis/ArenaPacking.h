//===- ArenaPacking.h - Offline packing of buffers into an arena -*- C++
//-*-===//
//
// The placement half of the memory planner (sched-plan-memory), kept free of
// MLIR so it can be tested on its own: given every buffer's size, alignment
// and lifetime in a straight-line program, give each an offset in one arena
// such that two buffers whose lifetimes overlap never overlap in memory.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_ANALYSIS_ARENAPACKING_H
#define PLAN_ANALYSIS_ARENAPACKING_H

#include <cstdint>
#include <optional>
#include <vector>

namespace plan {

/// One buffer: `size` bytes at an offset that is a multiple of `alignment`
/// (a power of two), live from program point `first` to `last`, both
/// included. Two buffers conflict when their [first, last] ranges intersect.
struct ArenaInterval {
  uint64_t size = 0;
  uint64_t alignment = 1;
  int64_t first = 0;
  int64_t last = 0;
  /// Set: the buffer is already placed there (a held buffer's bytes while a
  /// micro-batch holds it, sched-plan-memory), and the others go around it.
  std::optional<uint64_t> fixed;
};

struct ArenaLayout {
  /// offsets[i] places intervals[i].
  std::vector<uint64_t> offsets;
  /// The arena's size: the largest offset + size (0 for no buffers).
  uint64_t size = 0;
};

/// First-fit by decreasing size. Intervals live over the whole span of the
/// input (from the smallest `first` to the largest `last`) go first, packed
/// from offset 0, so they form one block at the bottom of the arena; then
/// the others, above that block, by decreasing size (ties: earlier `first`,
/// then input order), each at the lowest aligned offset where it fits
/// between the buffers already placed that are live at the same time.
/// Deterministic, and O(n log n + sum over buffers of k log k) where k is the
/// number of placed buffers live with it. Intervals with `first > last` are
/// treated as live at `first` only. Intervals with a `fixed` offset keep it,
/// and the others are placed around them (their offsets are neither checked
/// against each other nor aligned).
ArenaLayout packArena(const std::vector<ArenaInterval> &intervals);

} // namespace plan

#endif // PLAN_ANALYSIS_ARENAPACKING_H
