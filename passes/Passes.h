//===- Passes.h - The plan compiler's passes --------------------*- C++ -*-===//

#ifndef PLAN_PASSES_PASSES_H
#define PLAN_PASSES_PASSES_H

#include "dialects/plan/PlanDialect.h"
#include "dialects/sched/SchedDialect.h"
#include "runtime/format/Schedule.h"

#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

#include <optional>
#include <vector>

namespace plan {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// The whole lowering, plan to verified schedule (`--plan-lower`). Without
/// `rollMicroBatches`, gradient accumulation's micro-batches are lowered
/// one by one instead of as a sched.repeat (the program the repeat stands
/// for, which tests compare it with). `pipelineTasks` says whether each
/// pipeline stage's micro-batch loop is lowered as a sched.tasks
/// (sched-lower's pipeline-tasks) or written out; unset, `--pipeline-tasks`
/// says (on unless given =false).
void buildPlanLowerPipeline(mlir::OpPassManager &pm,
                            bool rollMicroBatches = true,
                            std::optional<bool> pipelineTasks = std::nullopt);

/// Replaces `tasks` by the ops its table runs, entry by entry (what
/// sched-unroll-tasks does to each of a program's). Fails, with an error at
/// the op, on a slot event no earlier run signalled, an instance signalled
/// twice, or a slot used for a micro-batch after another took it.
mlir::LogicalResult unrollTasks(sched::TasksOp tasks);

/// Unrolls each sched.tasks of `program` (unrollTasks): what a rewriting pass
/// does first when it cannot rewrite the tasks' bodies in place for the
/// program's plan, then rewriting the step written out.
mlir::LogicalResult writeOutProgram(sched::ProgramOp program);

/// Splits the bodies of `tasks` by `keys`, one per entry of its table: the
/// entries that ran one body with different keys run copies of it, one per
/// key (the first key met keeps the body itself, the copies go at the end),
/// so that a pass can rewrite each copy for what its entries have in common
/// (their place in the step, their neighbours). The step the table stands
/// for is unchanged.
void splitTaskBodies(sched::TasksOp tasks, llvm::ArrayRef<int64_t> keys);

/// The suffix of a slot buffer (role of the buffer it stands for) that holds
/// a gradient whose reduction a later task completes
/// (sched-insert-collectives, sched-insert-casts).
inline constexpr llvm::StringLiteral reducingSuffix = ".reducing";

/// `alloc`'s name as the loop written out names what it holds: a
/// reducingSuffix slot buffer's without the suffix (its runs' copies are
/// the flat program's buffers), any other's as it is. Buffers made in a body
/// from one are named from this.
llvm::StringRef writtenOutName(sched::AllocOp alloc);

/// Fails, with sched::requireUnrolled's error at it, when `program` has a
/// sched.repeat (sched-roll-micro-batches' output, which the rewriting passes
/// before it do not take); a pass that rewrites a sched.tasks body by body
/// checks this instead of requireUnrolled.
mlir::LogicalResult requireNoRepeat(sched::ProgramOp program,
                                    llvm::StringRef who);

/// The rule that a slot holds one micro-batch at a time, for a walk of a
/// sched.tasks' runs in table order (sched-unroll-tasks,
/// sched-verify-schedule): which slot each value of the run being walked lies
/// in, and what holds each slot. A slot is known by its root allocation and
/// the element it starts at, so that the slot buffers that are views of one
/// allocation (sched-share-slot-buffers places them at its start) share
/// their slots; what holds one is a slot buffer's micro-batch. A picked slot
/// is known by the start of its pick, the whole of which its group's
/// micro-batch holds.
class RunSlots {
public:
  /// `value` is `slot` (of `source`, the walk's value of the slot's source)
  /// in the run of micro-batch `mb` that picks `pick` (its table's pick, or
  /// -1). Returns the element of `source` the slot starts at.
  int64_t place(mlir::Value value, sched::SlotOp slot, mlir::Value source,
                int64_t mb, int64_t pick);
  /// `op` (of the run of micro-batch `runMicroBatch`) as the walk meets it,
  /// its operands as they are there: a view of a value in a slot lies in
  /// it; any other op uses the slots of its operands, an error at `at` when
  /// another micro-batch, or another slot buffer, took one after this one
  /// had it (fewer slots than the micro-batches in flight, or slot buffers
  /// sharing an allocation whose uses overlap).
  mlir::LogicalResult visit(mlir::Operation *op, mlir::Operation *at,
                            int64_t runMicroBatch);

  /// What holds a slot: a slot buffer (its opaque pointer), the group of a
  /// picked slot (-1 for others) and a micro-batch.
  struct Holder {
    void *buffer = nullptr;
    int64_t group = -1, mb = 0;
    auto operator<=>(const Holder &) const = default;
  };
  /// Calls `f(root, start, now, before)` for each slot used so far (by its
  /// allocation and first element): what holds it and what held it before.
  template <typename F> void forEachHeld(F &&f) const {
    occupancy.forEach(std::forward<F>(f));
  }

private:
  struct InSlot {
    sched::AllocOp root;
    int64_t slot, start;
    Holder holder;
  };
  llvm::DenseMap<mlir::Value, InSlot> inSlot;
  rt::SlotOccupancy<mlir::Operation *, Holder> occupancy;
};

/// A walk of a sched.tasks' runs in table order (sched-verify-schedule,
/// sched-plan-workspace) that steps over the periods of the table's middle
/// once they repeat. The middle is the longest stretch of runs [begin, end)
/// in which run r + period runs run r's body for `microBatches` more
/// (1F1B's steady state). At each period's start in it the walk gives its
/// fingerprint: its state as the runs from there see it, micro-batches
/// counted from the run's, and nothing below the run's horizon (the least
/// micro-batch that it or a later run runs or names through a slot or slot
/// event), which no later run looks at. When two starts a period apart give
/// equal fingerprints, each later period would find what the last found, so
/// the walk steps to the middle's end and goes on with the runs after it as
/// if they were offset() micro-batches earlier.
class PeriodSteps {
public:
  /// Steps over `tasks`' middle, where it has one longer than three
  /// periods and no body without ops (whose runs a walk does not see
  /// start); with a null `tasks`, none.
  explicit PeriodSteps(sched::TasksOp tasks);
  /// At `cursor`'s op, the next the walk visits: counts the runs of the
  /// tasks as they start and, at a period's start in the middle, asks
  /// `fingerprint(base, horizon)` for the walk's state seen from the run of
  /// micro-batch `base`, without what lies below micro-batch `horizon`.
  /// Where it repeats the one a period before, moves `cursor` over the
  /// periods to the middle's end (to the first op of the run after them, or
  /// past the tasks) and returns true; the walk visits the op it is at next.
  ///
  /// A table with picks (picked slots) repeats up to a renaming of its
  /// slots: run r + period picks sigma(run r's pick) for one permutation
  /// sigma over the middle. The fingerprint at the i-th period's start then
  /// sees the picked slots renamed by `relabel()` (sigma^-i), so that equal
  /// fingerprints mean states one renaming apart; after a step of k
  /// periods, the walk sees each run's pick as `pick(p)` (sigma^-k of it),
  /// the slot it would be had the picks not moved on.
  bool stepOver(
      sched::StepCursor &cursor,
      llvm::function_ref<std::vector<int64_t>(int64_t, int64_t)> fingerprint);
  /// The renaming of picked slots a fingerprint applies (empty: none).
  llvm::ArrayRef<int64_t> relabel() const { return relabel_; }
  /// A run's pick as the walk sees it (-1 stays -1).
  int64_t pick(int64_t actual) const {
    return actual < 0 || seen.empty() ? actual
                                      : seen[static_cast<size_t>(actual)];
  }
  /// How many micro-batches behind the table's the walk's runs are after
  /// the step.
  int64_t offset() const { return offset_; }
  /// The runs stepped over, if any: `runs` from run `from` on, periods of
  /// `period`.
  struct Step {
    int64_t from, runs, period;
  };
  std::optional<Step> step() const { return taken; }
  /// Walks every run from here on.
  void stop() { stopped = true; }

private:
  bool stopped = true;
  int64_t begin = 0, end = 0, period = 0, microBatches = 0;
  /// Per run: its micro-batch and its horizon.
  std::vector<int64_t> microBatch, horizon;
  std::vector<int64_t> before; // the fingerprint a period before
  int64_t run = -1;            // the run of the tasks the walk is in
  int64_t unmatched = 0, offset_ = 0;
  std::optional<Step> taken;
  /// The middle's renaming of picks (sigma) and its inverse; sigma^-i at
  /// the walk's period i; after a step, the picks the walk sees.
  std::vector<int64_t> sigma, inverse, relabel_, seen;
};

/// A buffer of `slots` slots of `slotType`, allocated right before `tasks`
/// and freed right after it, for what one of its bodies leaves to another.
sched::AllocOp allocSlotBuffer(sched::TasksOp tasks, mlir::MemRefType slotType,
                               llvm::StringRef name, sched::BufferRole role,
                               int64_t slots = 1);

/// Registers every pass and the `plan-lower` pipeline with the command line.
void registerPlanCompilerPasses();

} // namespace plan

#endif // PLAN_PASSES_PASSES_H
