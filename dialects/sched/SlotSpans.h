//===- SlotSpans.h - When each micro-batch holds a one-slot buffer -*- C++
//-*-===//
//
// The span of a pipeline stage's step in which each micro-batch holds a slot
// of a buffer of the program: from the first use of its slot to its last,
// or to the wait of an asynchronous op that uses it or starts after one
// that does (through a slot event when a later task waits). Found by
// playing the sched.tasks' table, each run's ops that can touch such a slot
// at their places in the step; the other ops are skipped in every run.
// sched-share-slot-buffers pools the buffers whose spans never meet, and
// sched-plan-memory places a held buffer's bytes where the bodies' own
// buffers lie while it is not held.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_DIALECTS_SCHED_SLOTSPANS_H
#define PLAN_DIALECTS_SCHED_SLOTSPANS_H

#include "dialects/sched/SchedDialect.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <map>
#include <utility>

namespace sched {

/// An instance: the index of a slot's source (among those asked about) and
/// the micro-batch its slot holds.
using SlotInstance = std::pair<unsigned, int64_t>;
/// The span [first, last] of the step in which each instance is in use:
/// op positions, each run's ops numbered on from the ops of the runs before
/// it in the table's order (a body's op `i` in a run starting at `s` is at
/// `s + i`).
using SlotInstanceSpans = std::map<SlotInstance, std::pair<int64_t, int64_t>>;

/// Plays `tasks`' table and gives each instance of a slot of the sources
/// `indexOf` names (by their defining ops: a sched.slot's source's) its
/// span; fails, with the error at the op, on a slot event a run names
/// before any run signals it.
mlir::FailureOr<SlotInstanceSpans>
findSlotSpans(TasksOp tasks,
              const llvm::DenseMap<mlir::Operation *, unsigned> &indexOf);

/// The op ranges [first, last] of a step's positions (findSlotSpans'),
/// sorted and merged.
using PositionRanges = llvm::SmallVector<std::pair<int64_t, int64_t>, 4>;

/// Sorts `ranges` and merges those that overlap or touch.
void mergeRanges(PositionRanges &ranges);

/// For each of `held` (allocs of `tasks`' program, each used by the bodies'
/// one-slot sched.slots of it or of its views: held buffers), the positions
/// where some micro-batch holds its slot: the union of its holders' spans.
/// Empty for a buffer none of `tasks`' slots use.
mlir::FailureOr<llvm::SmallVector<PositionRanges>>
findHeldSpans(TasksOp tasks, llvm::ArrayRef<AllocOp> held);

} // namespace sched

#endif // PLAN_DIALECTS_SCHED_SLOTSPANS_H
