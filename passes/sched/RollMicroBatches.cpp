//===- RollMicroBatches.cpp - Gradient accumulation as a sched.repeat ----===//
//
// sched-roll-micro-batches: without a pipeline, the micro-batches of a step
// run one after the other, each its own forward and backward, its own
// gathers and reductions; the first (which starts from zeroed gradients)
// and the last (after which the reductions finish and the optimizer steps)
// may differ, the ones between are the same ops on another micro-batch.
//
// sched-lower with `roll-micro-batches` lowers micro-batches 0, 1, 2 and the
// last only, whatever grad_accum is, so that lowering costs the same at
// grad_accum 5 and 64, and marks the program (partial_micro_batches). This
// pass completes such a program: micro-batch 1's ops become a sched.repeat
// of `micro_batches - 2` runs, and micro-batch 2's go. Micro-batch 2 is
// there to prove that the passes between made micro-batch 1 a middle one:
// both must be the same ops, the micro-batch numbers one apart; otherwise the
// ones left out cannot be copies of micro-batch 1 and the pass fails, naming
// the first op that differs. A program without the mark is left alone.
//
// A micro-batch's ops are found as the ranges between cut points: places in
// the program where no transient buffer is allocated and unfreed and no
// event is issued and unwaited, but for buffers every middle micro-batch
// shares (allocated before micro-batch 1, freed after micro-batch 2).
// Micro-batches whose ops overlap fail the check. docs/sched.md
// ("sched-roll-micro-batches") is the contract.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"

#include <optional>

namespace plan {
#define GEN_PASS_DEF_SCHEDROLLMICROBATCHES
#include "passes/Passes.h.inc"
} // namespace plan

using namespace mlir;

namespace {

constexpr llvm::StringLiteral kPartialAttr = sched::kPartialMicroBatchesAttr;

/// The micro-batch `op` runs, if it names one.
std::optional<int64_t> microBatchOf(Operation &op) {
  if (auto mb = op.getAttrOfType<IntegerAttr>("micro_batch"))
    return mb.getInt();
  return std::nullopt;
}

/// One micro-batch's ops: [begin, end) of the program's block.
struct Range {
  Block::iterator begin, end;
  int64_t microBatch;
};

/// Whether `b` is `a` run `shift` micro-batches later: the same ops on the
/// same operands (values of `a`'s range mapped to `b`'s), with the same
/// attributes but the micro-batch numbers and the buffers' names (labels). On a
/// difference, the op of `b` where it is.
bool sameOps(const Range &a, const Range &b, int64_t shift,
             Operation *&differs) {
  DenseMap<Value, Value> mapped;
  auto x = a.begin, y = b.begin;
  for (; x != a.end && y != b.end; ++x, ++y) {
    differs = &*y;
    if (x->getName() != y->getName() ||
        x->getNumOperands() != y->getNumOperands() ||
        x->getNumResults() != y->getNumResults() || x->getNumRegions() != 0 ||
        y->getNumRegions() != 0)
      return false;
    for (auto [p, q] : llvm::zip(x->getOperands(), y->getOperands())) {
      auto it = mapped.find(p);
      if ((it != mapped.end() ? it->second : p) != q)
        return false;
    }
    for (auto [p, q] : llvm::zip(x->getResults(), y->getResults())) {
      if (p.getType() != q.getType())
        return false;
      mapped[p] = q;
    }
    DictionaryAttr xa = x->getAttrDictionary(), ya = y->getAttrDictionary();
    if (xa.size() != ya.size())
      return false;
    for (auto [p, q] : llvm::zip(xa, ya)) {
      if (p.getName() != q.getName())
        return false;
      if (p.getName() == "micro_batch") {
        auto pm = dyn_cast<IntegerAttr>(p.getValue());
        auto qm = dyn_cast<IntegerAttr>(q.getValue());
        if (!pm || !qm || qm.getInt() != pm.getInt() + shift)
          return false;
      } else if (p.getName() == "name" && isa<sched::AllocOp>(*x)) {
        // A buffer's name is a label (`.mbN`, a bucket's number); the
        // export names each run's buffers after micro-batch 1's.
      } else if (p.getValue() != q.getValue()) {
        return false;
      }
    }
  }
  differs = y != b.end ? &*y : nullptr;
  return x == a.end && y == b.end;
}

struct SchedRollMicroBatchesPass
    : plan::impl::SchedRollMicroBatchesBase<SchedRollMicroBatchesPass> {
  void runOnOperation() override {
    sched::ProgramOp program = getOperation();
    auto microBatches = static_cast<int64_t>(program.getMicroBatches());
    Block &body = program.getBody().front();

    // sched-lower's `roll-micro-batches` lowered micro-batches 0, 1, 2 and
    // the last only, and says so.
    if (!program->hasAttr(kPartialAttr))
      return;
    program->removeAttr(kPartialAttr);
    SmallVector<Range> ranges = cut(body);
    int64_t present = static_cast<int64_t>(ranges.size());
    bool expected = present == 4 && microBatches > 4;
    for (int64_t i = 0; expected && i < present; ++i)
      expected = ranges[i].microBatch == (i == 3 ? microBatches - 1 : i);
    Operation *differs = nullptr;
    if (!expected || !sameOps(ranges[1], ranges[2], /*shift=*/1, differs)) {
      // At the plan's location: the program is too large to print.
      InFlightDiagnostic diag = mlir::emitError(
          program.getLoc(),
          "sched-roll-micro-batches: micro-batches 1 and 2 were not lowered "
          "as two separate, identical micro-batches, so the ones sched-lower "
          "left out cannot be copies of 1 (lower without roll-micro-batches)");
      if (differs)
        diag.attachNote(differs->getLoc())
            << "the first op that differs: " << sched::describeOp(differs);
      return signalPassFailure();
    }

    // Micro-batch 1's ops become the body; micro-batch 2's go.
    OpBuilder builder(&getContext());
    builder.setInsertionPoint(&*ranges[1].begin);
    auto repeat =
        sched::RepeatOp::create(builder, ranges[1].begin->getLoc(),
                                builder.getI64IntegerAttr(microBatches - 2));
    Block &loop = repeat.getBody().emplaceBlock();
    loop.getOperations().splice(loop.end(), body.getOperations(),
                                ranges[1].begin, ranges[1].end);
    SmallVector<Operation *> second = llvm::to_vector(
        llvm::map_range(llvm::make_range(ranges[2].begin, ranges[2].end),
                        [](Operation &op) { return &op; }));
    for (Operation *op : llvm::reverse(second)) {
      op->dropAllUses();
      op->erase();
    }
  }

private:
  /// The micro-batches' ranges, in order. A range holds the ops between two
  /// cut points that name a micro-batch, and the ops that name none up to
  /// the next such range (a micro-batch's last waits and frees); the ops
  /// before micro-batch 0 stay outside. Empty when the ops between two cut
  /// points name two micro-batches.
  SmallVector<Range> cut(Block &body) {
    // A buffer allocated before micro-batch 1 and freed after micro-batch
    // 2 (the unsharded gradient every micro-batch adds into with
    // grad_sync = last_micro_batch, shard_grad_op's gathered parameters)
    // is the same buffer for every micro-batch: no cut point waits for it.
    llvm::DenseSet<Value> carried;
    {
      Operation *firstOf1 = nullptr, *lastOf2 = nullptr;
      for (Operation &op : body) {
        std::optional<int64_t> mb = microBatchOf(op);
        if (mb == 1 && !firstOf1)
          firstOf1 = &op;
        if (mb == 2)
          lastOf2 = &op;
      }
      if (firstOf1 && lastOf2)
        for (auto alloc : body.getOps<sched::AllocOp>()) {
          if (alloc.getPersistent() || !alloc->isBeforeInBlock(firstOf1))
            continue;
          if (llvm::any_of(alloc->getUsers(), [&](Operation *user) {
                return isa<sched::FreeOp>(user) &&
                       lastOf2->isBeforeInBlock(user);
              }))
            carried.insert(alloc.getBuffer());
        }
    }
    SmallVector<Range> ranges;
    llvm::DenseSet<Value> live;
    int64_t pending = 0;
    Block::iterator start = body.begin();
    constexpr int64_t kNone = -1;
    int64_t rangeMb = kNone;
    for (auto it = body.begin(); it != body.end(); ++it) {
      Operation &op = *it;
      if (std::optional<int64_t> mb = microBatchOf(op)) {
        if (rangeMb != kNone && rangeMb != *mb)
          return {};
        rangeMb = *mb;
      }
      if (auto alloc = dyn_cast<sched::AllocOp>(op)) {
        if (!alloc.getPersistent() && !carried.contains(alloc.getBuffer()))
          live.insert(alloc.getBuffer());
      } else if (auto free = dyn_cast<sched::FreeOp>(op)) {
        live.erase(free.getBuffer());
      } else if (isa<sched::WaitOp>(op)) {
        --pending;
      }
      for (Value result : op.getResults())
        if (isa<sched::EventType>(result.getType()))
          ++pending;
      if (!live.empty() || pending != 0)
        continue;
      auto end = std::next(it);
      if (rangeMb != kNone && !ranges.empty() &&
          ranges.back().microBatch == rangeMb)
        ranges.back().end = end; // the same micro-batch goes on
      else if (rangeMb != kNone)
        ranges.push_back({start, end, rangeMb});
      else if (!ranges.empty() && ranges.back().end == start)
        ranges.back().end = end; // ops of no micro-batch after one
      start = end;
      rangeMb = kNone;
    }
    return ranges;
  }
};

} // namespace
