//===- SchedDialect.h - The sched dialect -----------------------*- C++ -*-===//

#ifndef PLAN_DIALECTS_SCHED_SCHEDDIALECT_H
#define PLAN_DIALECTS_SCHED_SCHEDDIALECT_H

#include "dialects/plan/PlanDialect.h"

#include "TensorParallelParts.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseMap.h"

#include <optional>

#include "dialects/sched/SchedEnums.h.inc"

namespace sched {
using plan::parseEnumKeyword;
using plan::printEnumKeyword;
} // namespace sched

#include "dialects/sched/SchedDialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/sched/SchedAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/sched/SchedTypes.h.inc"

#define GET_OP_CLASSES
#include "dialects/sched/SchedOps.h.inc"

namespace sched {

/// A flat buffer type: memref<numel x elementType, #sched.space<space>>.
mlir::MemRefType getBufferType(mlir::MLIRContext *context, int64_t numel,
                               mlir::Type elementType, MemorySpace space);

/// The element type a frozen base stored as `storage` takes in a buffer:
/// i8 (bytes) for NF4, the float type otherwise.
mlir::Type getStorageElementType(mlir::MLIRContext *context,
                                 plan::BaseStorage storage);

/// The parts a unit of `kind` of a `family` model is computed in under
/// tensor parallelism (runtime/format/TensorParallelParts.h); none for a
/// model without a tensor-parallel layout (BERT).
std::optional<plan::rt::tp::UnitRole>
getTensorParallelRole(plan::UnitKind kind, plan::ModelFamily family);

/// What `program`'s tensor-parallel exchanges are sized by: its
/// micro-batch's tokens, the model's hidden size, the mesh's tensor axis
/// and sequence parallelism.
plan::rt::tp::ExchangeShape getExchangeShape(ProgramOp program);

/// The memory space of a buffer type.
MemorySpace getMemorySpace(mlir::MemRefType type);

/// The sched.alloc a buffer comes from, looking through views, shard views
/// and slots; null when the buffer is not rooted in an alloc.
AllocOp getRootAlloc(mlir::Value buffer);

/// How `op` reads in the schedule, short, for reports and diagnostics:
/// "backward @layers.3 mb 0", "all_gather fsdp.layers.3.gathered" (the
/// alloc of its first buffer operand), "alloc layers.3.saves.mb0".
std::string describeOp(mlir::Operation *op);

/// The one sched.wait of an asynchronous op's event; an error at the op when
/// the event is never waited or waited more than once.
mlir::FailureOr<WaitOp> findWait(mlir::Operation *asyncOp);

/// A wait of an asynchronous op's event. `shift` is 0 for its own
/// sched.wait; for a wait in a later body of a sched.tasks, of the slot
/// event instance the op's sched.slot_signal gives, it is the micro-batch of
/// the op's run less that of the wait's (so a slot `[s]` of the op's body is
/// the slot `[s + shift]` there).
struct EventWait {
  WaitOp wait;
  int64_t shift = 0;
};

/// Every wait of an asynchronous op's event: its one sched.wait, or the
/// waits of the slot events that name the instance its sched.slot_signal
/// gives, in the bodies of its sched.tasks. An error at the op when the
/// event is never waited, waited twice in its body, or named by a slot
/// event other than a wait uses.
mlir::FailureOr<llvm::SmallVector<EventWait>>
findWaits(mlir::Operation *asyncOp);

/// Moves the asynchronous op `op` to right after the latest of
/// `endOf(producer, wait)` over the async ops its `after` events come from
/// (`wait` is the producer's one sched.wait; `endOf` returns it or an op
/// after it that belongs with it), then clears `after`: program order now
/// implies it. A pass uses this when it moves what a producer's readers
/// depend on onto the compute stream after the producer's wait. Errors at
/// `op` when an event has no producer or `op`'s own wait would come first.
mlir::LogicalResult moveBelowAfterEvents(
    mlir::Operation *op,
    llvm::function_ref<mlir::Operation *(mlir::Operation *producer,
                                         WaitOp wait)>
        endOf);

/// The discardable attribute sched-lower's `roll-micro-batches` puts on a
/// program of which it lowered micro-batches 0, 1, 2 and the last only;
/// sched-roll-micro-batches completes the program (a sched.repeat) and
/// removes it.
inline constexpr llvm::StringLiteral kPartialMicroBatchesAttr =
    "partial_micro_batches";

/// Fails, with an error at its first sched.repeat or sched.tasks, when
/// `program` has one: `who` (a pass, the report) works on a program whose
/// micro-batches are written out one after the other.
mlir::LogicalResult requireUnrolled(ProgramOp program, llvm::StringRef who);
/// The same for one op of a program, for a pass that walks the program's
/// ops anyway: fails, with that error, when `op` is a sched.repeat or a
/// sched.tasks.
mlir::LogicalResult requireUnrolled(mlir::Operation &op, llvm::StringRef who);

/// The slot event instance (family, micro-batch) that the
/// sched.slot_signal or sched.slot_event `op` names in the run `iteration`
/// micro-batches on from the one its task is written for
/// (StepCursor::iteration()).
std::pair<int64_t, int64_t> getSlotEventInstance(mlir::Operation &op,
                                                 int64_t iteration);

/// The bytes of one element of a buffer of `type` (f32 4, bf16 and f16 2,
/// i8 1), and of the whole buffer.
int64_t getElementBytes(mlir::MemRefType type);
uint64_t getBufferBytes(mlir::MemRefType type);

/// The micro-batch a sched.repeat's body names (its first run's): that of
/// the first op with a `micro_batch`, 0 when none has one.
int64_t getBodyMicroBatch(RepeatOp repeat);

/// Buffer names as each run of a sched.repeat or a sched.task has them: a
/// buffer allocated in a body is named for the body's micro-batch (a
/// repeat's first run's, a task's), and a run `iteration` micro-batches on
/// is that micro-batch plus `iteration`. Remembers each repeat's
/// micro-batch, so that naming is O(1) after a repeat's first.
class RunNames {
public:
  /// The name of the buffer `buffer` is rooted in ("?" when none) in run
  /// `iteration` of the repeat its alloc is in (the name itself outside
  /// one).
  std::string operator()(mlir::Value buffer, int64_t iteration);
  std::string operator()(AllocOp alloc, int64_t iteration);

private:
  llvm::DenseMap<mlir::Operation *, int64_t> bodyMicroBatch;
};

/// A program's ops in the order its step runs them: a sched.repeat's body
/// `count` times over, a sched.tasks' bodies in the order of its table,
/// every other op once. `iteration()` is what the run being walked adds to
/// the micro-batch its body is written for (0 outside a repeat or tasks).
class StepCursor {
public:
  explicit StepCursor(ProgramOp program);
  bool done() const { return at == end; }
  mlir::Operation &operator*() const { return *at; }
  int64_t iteration() const { return iteration_; }
  /// The slot the run being walked picks (its sched.tasks' `picks`; -1
  /// outside a table, or when it has none).
  int64_t pick() const { return pick_; }
  void advance();
  /// From an op of a sched.repeat's or sched.tasks' run, moves to the first
  /// op of the run `count` (at least 1) runs on, or past the loop when there
  /// is none: where advancing over the ops between would arrive, in O(1).
  void skipRuns(int64_t count);

private:
  /// Steps into a sched.repeat or sched.tasks at `at` (one without a run
  /// of a non-empty body is skipped).
  void enter();
  /// Moves to the first op of run `run` or the first non-empty run after
  /// it; false when there is none.
  bool startRun();
  mlir::Block::iterator at, end;
  /// The program's op after the loop being run, and the program's end.
  mlir::Block::iterator resume, outerEnd;
  /// The loop being run: a repeat's one body, or a tasks' bodies with the
  /// micro-batch each is written for and the table of (body, micro-batch).
  bool inLoop = false;
  llvm::SmallVector<mlir::Block *, 4> bodies;
  llvm::SmallVector<int64_t, 4> bodyMicroBatches;
  llvm::ArrayRef<int64_t> order, picks;
  int64_t runs = 0, run = 0, iteration_ = 0, pick_ = -1;
};

} // namespace sched

#endif // PLAN_DIALECTS_SCHED_SCHEDDIALECT_H
