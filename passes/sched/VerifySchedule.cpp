//===- VerifySchedule.cpp - Reject racy or unsafe schedules ---------------===//
//
// Walks each sched.program once, in program order, as the compute stream
// would, and rejects what docs/sched.md ("sched-verify-schedule") lists:
// reads of unwritten elements, uses and frees of dead buffers, transient
// buffers never freed, events not waited exactly once, races with
// asynchronous ops still in flight, and collectives on groups the mesh does
// not have.
//
// Buffers are tracked per root sched.alloc: a sched.view is the element range
// [offset, offset + size) of its root, so a write through a view counts for
// that range only. A sched.shard_view's position depends on the rank: for
// races it stands for its whole source (some rank's slice overlaps), and a
// write through it fills only what a read through the same shard view reads.
// An asynchronous op is in flight from where it is issued until a sched.wait
// on its event, or on the event of an op that lists it (directly or through
// others) in `after`, since that op started only once it had finished.
//
// The walk is linear in the step: each op's operands are resolved through
// a map from buffer values to root ranges, written ranges are a sorted
// interval map per root, and completed asynchronous ops leave the in-flight
// lists as they are next scanned. A pipeline stage's sched.tasks is walked
// entry by entry of its table (sched::StepCursor), each run's ops mapped
// afresh as they are visited: a sched.slot is the view of the slot its
// micro-batch takes, a sched.slot_event the event the run that signalled
// that instance issued.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/sched/SchedOpTable.h"
#include "dialects/sched/SlotEvents.h"
#include "runtime/format/Schedule.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"

#include <map>
#include <optional>
#include <tuple>

namespace plan {
#define GEN_PASS_DEF_SCHEDVERIFYSCHEDULE
#include "passes/Passes.h.inc"
} // namespace plan

using namespace mlir;
using namespace sched;

namespace {

/// Elements [begin, end) of a root buffer.
struct ElementRange {
  int64_t begin = 0;
  int64_t end = 0;
  bool overlaps(const ElementRange &other) const {
    return begin < other.end && other.begin < end;
  }
};

/// The element ranges of a root buffer that hold data, disjoint and merged.
class WrittenRanges {
public:
  void add(ElementRange range) {
    int64_t begin = range.begin, end = range.end;
    auto it = ranges.upper_bound(begin);
    if (it != ranges.begin() && std::prev(it)->second >= begin)
      --it;
    while (it != ranges.end() && it->first <= end) {
      begin = std::min(begin, it->first);
      end = std::max(end, it->second);
      it = ranges.erase(it);
    }
    ranges.emplace(begin, end);
  }

  /// The first element of `range` nothing wrote, if any.
  std::optional<int64_t> firstUnwritten(ElementRange range) const {
    int64_t pos = range.begin;
    auto it = ranges.upper_bound(pos);
    if (it != ranges.begin() && std::prev(it)->second > pos)
      pos = std::prev(it)->second;
    if (pos >= range.end)
      return std::nullopt;
    return pos;
  }

private:
  std::map<int64_t, int64_t> ranges; // begin -> end
};

/// What an asynchronous op, not yet known to be complete, does to a root.
struct InFlightAccess {
  unsigned async;
  ElementRange range;
  bool writes;
};

/// A buffer created by sched.alloc, with everything that aliases it.
/// This rank's slice of a range, written through a sched.shard_view.
struct ShardWrite {
  ElementRange source;
  Group group;
};

struct Root {
  AllocOp alloc;
  Operation *freedBy = nullptr;
  WrittenRanges written;
  SmallVector<ShardWrite, 1> shardWrites;
  SmallVector<InFlightAccess, 2> inFlight;
};

/// A buffer operand resolved to its root.
struct BufferRef {
  unsigned root;
  ElementRange range;
  /// Set for a sched.shard_view: `range` is then its source's range.
  std::optional<Group> shard;
};

struct AsyncState {
  Operation *op;
  SmallVector<unsigned, 2> after; // indices of the ops it starts after
  Operation *waitedBy = nullptr;
  bool done = false;
};

/// One walk over one program.
class ScheduleChecker {
public:
  explicit ScheduleChecker(ProgramOp program)
      : program(program),
        working(getStorageElementType(
            program.getContext(),
            plan::workingStorage(program.getTrain().getPrecision()))),
        tensor(program.getGroupSize(Group::Tensor)) {}

  /// Checks the step's ops in the order it runs them. A sched.repeat is
  /// `who`'s error (sched::requireUnrolled).
  LogicalResult check(StringRef who) {
    for (Operation &op : program.getBody().front())
      if (isa<RepeatOp>(op))
        return sched::requireUnrolled(op, who);
    for (StepCursor cursor(program); !cursor.done(); cursor.advance())
      if (failed(visitInRun(&*cursor, cursor.iteration())))
        return failure();
    return checkEnd();
  }

private:
  /// `op` in the run `iteration` micro-batches on from the one its task is
  /// written for (0 outside a sched.tasks).
  LogicalResult visitInRun(Operation *op, int64_t iteration) {
    auto task = dyn_cast_or_null<TaskOp>(op->getParentOp());
    int64_t mb =
        task ? static_cast<int64_t>(task.getMicroBatch()) + iteration : 0;
    if (auto slot = dyn_cast<SlotOp>(op)) {
      auto shift = static_cast<int64_t>(slot.getShift());
      int64_t at =
          plan::rt::slotIndex(mb, shift, static_cast<int64_t>(slot.getSlots()));
      slots.place(slot.getResult(), getRootAlloc(slot.getSource()), at,
                  mb + shift);
      return visitView(slot.getResult(), slot.getSource(),
                       at * slot.getType().getNumElements(), std::nullopt);
    }
    if (auto named = dyn_cast<SlotEventOp>(op)) {
      FailureOr<unsigned> async = signalled.lookup(named, iteration);
      if (failed(async))
        return failure();
      asyncIndex[op] = *async;
      return success();
    }
    if (auto signal = dyn_cast<SlotSignalOp>(op)) {
      // The op verifier has the event an asynchronous op's of the same body,
      // visited before; a pass that built it otherwise gets this error.
      Operation *producer = signal.getEvent().getDefiningOp();
      auto async = producer ? asyncIndex.find(producer) : asyncIndex.end();
      if (async == asyncIndex.end())
        return op->emitOpError("signals an event no asynchronous op of its "
                               "task returns");
      return signalled.signal(signal, iteration, async->second);
    }
    // A slot holds one micro-batch at a time: a run that uses it for one
    // after another micro-batch took it found fewer slots than the
    // micro-batches in flight.
    if (failed(visit(op)))
      return failure();
    return slots.visit(op, op, mb);
  }

  LogicalResult visit(Operation *op) {
    if (auto alloc = dyn_cast<AllocOp>(op))
      return visitAlloc(alloc);
    if (auto view = dyn_cast<ViewOp>(op))
      return visitView(view.getResult(), view.getSource(), view.getOffset(),
                       std::nullopt);
    if (auto view = dyn_cast<ShardViewOp>(op))
      return visitView(view.getResult(), view.getSource(), 0, view.getGroup());
    if (auto free = dyn_cast<FreeOp>(op))
      return visitFree(free);
    if (auto wait = dyn_cast<WaitOp>(op))
      return visitWait(wait);
    FailureOr<const OpInfo *> info = infoOf(op);
    if (failed(info) || failed(checkParts(op)))
      return failure();
    std::optional<unsigned> async;
    if ((*info)->async) {
      async = asyncStates.size();
      AsyncState state{op, {}, nullptr, false};
      for (Value event : (*info)->async->after) {
        auto it = asyncIndex.find(event.getDefiningOp());
        if (it == asyncIndex.end())
          return op->emitOpError("starts after an event no asynchronous op "
                                 "of this program returns");
        state.after.push_back(it->second);
      }
      asyncIndex[op] = *async;
      asyncStates.push_back(std::move(state));
    }
    return visitAccesses(op, (*info)->accesses, async);
  }

  /// What an op reads and writes and the events it follows and signals,
  /// from the runtime's op table (SchedOpTable.h), and the checks of it
  /// that do not depend on the run: once per op, however many runs of its
  /// body the step has.
  struct OpInfo {
    SmallVector<BufferAccess, 4> accesses;
    std::optional<AsyncInfo> async;
  };
  FailureOr<const OpInfo *> infoOf(Operation *op) {
    auto it = opInfo.find(op);
    if (it != opInfo.end())
      return &it->second;
    if (failed(checkBaseType(op)))
      return failure();
    std::optional<SmallVector<BufferAccess, 4>> accesses =
        getBufferAccesses(op);
    if (!accesses)
      return op->emitOpError("is not a sched op the schedule verifier knows: "
                             "it cannot tell what it reads and writes");
    std::optional<AsyncInfo> async = getAsyncInfo(op);
    if (async && async->group && program.getGroupSize(*async->group) < 1)
      return op->emitOpError("runs on group '")
             << stringifyGroup(*async->group)
             << "', which the plan's mesh does not define";
    return &opInfo.try_emplace(op, OpInfo{std::move(*accesses), async})
                .first->second;
  }

  /// On a mesh with a tensor axis every unit is computed in the parts of its
  /// role (runtime/format/TensorParallelParts.h), a forward's and a
  /// recompute's in order, a backward's in reverse, each run of parts
  /// complete before that unit's next; the loss reads every rank's
  /// statistics and the gradient norm weighs tensor replicas.
  LogicalResult checkParts(Operation *op) {
    if (tensor <= 1)
      return success();
    if (auto loss = dyn_cast<LossOp>(op); loss && !loss.getStats())
      return op->emitOpError("has no `stats` on a mesh with a tensor axis: "
                             "the vocabulary is divided over the tensor "
                             "ranks (sched-split-tensor-parallel)");
    if (auto norm = dyn_cast<GradNormOp>(op); norm && !norm.getTensorReplicas())
      return op->emitOpError("on a mesh with a tensor axis needs "
                             "`tensor_replicas`: without it the tensor "
                             "group's sum counts whole parameters T times");
    int64_t part;
    bool whole, backward = false;
    SymbolRefAttr unit;
    int64_t microBatch;
    if (auto forward = dyn_cast<ForwardOp>(op)) {
      part = forward.getPart(), unit = forward.getUnit();
      microBatch = forward.getMicroBatch(), whole = !forward.getOut();
    } else if (auto recompute = dyn_cast<RecomputeOp>(op)) {
      part = recompute.getPart(), unit = recompute.getUnit();
      microBatch = recompute.getMicroBatch(), whole = !recompute.getOut();
    } else if (auto back = dyn_cast<BackwardOp>(op)) {
      part = back.getPart(), unit = back.getUnit(), backward = true;
      microBatch = back.getMicroBatch(), whole = !back.getOutGrad();
    } else {
      return success();
    }
    auto unitOp = dyn_cast_or_null<plan::UnitOp>(
        symbolTables.lookupNearestSymbolFrom(program->getParentOp(), unit));
    std::optional<plan::rt::tp::UnitRole> role =
        unitOp ? getTensorParallelRole(unitOp.getKind(),
                                       program.getModel().getFamily())
               : std::nullopt;
    if (!role)
      return success(); // the op's verifier reports it
    int64_t parts = plan::rt::tp::partCount(*role);
    if (part == 0 && whole)
      return op->emitOpError("computes unit '")
             << unitOp.getSymName()
             << "' whole on a mesh with a tensor axis: its parts and their "
                "activation collectives are missing "
                "(sched-split-tensor-parallel)";
    auto key = std::make_tuple(op->getName().getAsOpaquePointer(),
                               unitOp.getOperation(), microBatch);
    PartRun &run =
        runs.try_emplace(key, PartRun{backward ? parts - 1 : 0, nullptr, 0})
            .first->second;
    if (part != run.next)
      return op->emitOpError("is part ")
             << part << " of unit '" << unitOp.getSymName() << "' mb "
             << microBatch << ", but part " << run.next
             << " comes next: a unit's parts run "
             << (backward ? "from the last to 0" : "from 0 to the last")
             << ", each run complete";
    run = {part + (backward ? -1 : 1), op, part};
    if (run.next < 0 || run.next == parts)
      runs.erase(key);
    return success();
  }

  /// Compute reads a frozen base (`frozen`, a frozen `tied`) in the working
  /// type; one stored otherwise is converted first.
  LogicalResult checkBaseType(Operation *op) {
    SmallVector<std::pair<Value, StringRef>, 2> bases;
    if (auto forward = dyn_cast<ForwardOp>(op))
      bases = {{forward.getFrozen(), "frozen"}, {forward.getTied(), "tied"}};
    else if (auto recompute = dyn_cast<RecomputeOp>(op))
      bases = {{recompute.getFrozen(), "frozen"},
               {recompute.getTied(), "tied"}};
    else if (auto backward = dyn_cast<BackwardOp>(op))
      bases = {{backward.getFrozen(), "frozen"}, {backward.getTied(), "tied"}};
    for (auto [buffer, name] : bases)
      if (buffer &&
          cast<MemRefType>(buffer.getType()).getElementType() != working)
        return op->emitOpError("reads `")
               << name << "` as "
               << cast<MemRefType>(buffer.getType()).getElementType()
               << ", not the working type " << working
               << ": a base stored otherwise is converted by "
                  "sched.dequantize first (sched-dequantize-base)";
    return success();
  }

  LogicalResult visitAlloc(AllocOp alloc) {
    // A body's allocation in a later run takes the root its run before
    // freed, once nothing still accesses it: the step's roots are then as
    // many as its distinct allocations, not one per run.
    auto [it, added] = refs.try_emplace(alloc.getResult());
    BufferRef &ref = it->second;
    if (added || !roots[ref.root].freedBy ||
        !liveInFlight(roots[ref.root]).empty()) {
      ref.root = static_cast<unsigned>(roots.size());
      roots.emplace_back();
    }
    ref.range = {0, alloc.getType().getNumElements()};
    ref.shard = std::nullopt;
    roots[ref.root] = Root{alloc, nullptr, {}, {}, {}};
    // Persistent buffers hold last step's state.
    if (alloc.getPersistent())
      roots.back().written.add({0, alloc.getType().getNumElements()});
    return success();
  }

  /// A view at `offset`, or, with `shard`, this rank's shard of the source.
  LogicalResult visitView(Value result, Value source, int64_t offset,
                          std::optional<Group> shard) {
    FailureOr<BufferRef> ref = resolveLive(result.getDefiningOp(), source);
    if (failed(ref))
      return failure();
    BufferRef view = *ref;
    if (shard) {
      view.shard = shard;
    } else {
      view.range.begin += offset;
      view.range.end = view.range.begin +
                       cast<MemRefType>(result.getType()).getNumElements();
    }
    refs[result] = view;
    return success();
  }

  LogicalResult visitFree(FreeOp free) {
    FailureOr<BufferRef> ref = resolve(free, free.getBuffer());
    if (failed(ref))
      return failure();
    Root &root = roots[ref->root];
    if (root.freedBy) {
      InFlightDiagnostic diag = free.emitOpError("frees buffer '")
                                << root.alloc.getName() << "' twice";
      diag.attachNote(root.freedBy->getLoc()) << "first freed here";
      return diag;
    }
    if (root.alloc.getPersistent())
      return free.emitOpError("frees persistent buffer '")
             << root.alloc.getName() << "', which lives across steps";
    for (const InFlightAccess &access : liveInFlight(root)) {
      Operation *async = asyncStates[access.async].op;
      InFlightDiagnostic diag =
          free.emitOpError("frees buffer '")
          << root.alloc.getName() << "' while " << async->getName()
          << (access.writes ? " still writes it" : " still reads it");
      diag.attachNote(async->getLoc()) << "issued here; not waited yet";
      return diag;
    }
    root.freedBy = free;
    return success();
  }

  LogicalResult visitWait(WaitOp wait) {
    Operation *producer = wait.getEvent().getDefiningOp();
    auto it = producer ? asyncIndex.find(producer) : asyncIndex.end();
    if (it == asyncIndex.end())
      return wait.emitOpError(
          "waits for an event no asynchronous op of this program returns");
    AsyncState &state = asyncStates[it->second];
    if (state.waitedBy) {
      InFlightDiagnostic diag = wait.emitOpError("waits twice for ")
                                << describe(state.op);
      diag.attachNote(state.waitedBy->getLoc()) << "first waited here";
      return diag;
    }
    state.waitedBy = wait;
    complete(it->second);
    return success();
  }

  /// Marks an async op complete, and every op it started after.
  void complete(unsigned index) {
    SmallVector<unsigned, 4> worklist = {index};
    while (!worklist.empty()) {
      AsyncState &state = asyncStates[worklist.pop_back_val()];
      if (state.done)
        continue;
      state.done = true;
      llvm::append_range(worklist, state.after);
    }
  }

  /// Whether async op `later` starts only after `earlier` finished, through
  /// its `after` events.
  bool startsAfter(unsigned later, unsigned earlier) {
    SmallVector<unsigned, 4> worklist(asyncStates[later].after.begin(),
                                      asyncStates[later].after.end());
    llvm::SmallDenseSet<unsigned, 8> seen;
    while (!worklist.empty()) {
      unsigned index = worklist.pop_back_val();
      if (index == earlier)
        return true;
      if (seen.insert(index).second)
        llvm::append_range(worklist, asyncStates[index].after);
    }
    return false;
  }

  /// The in-flight accesses of `root` whose op is not complete; drops the
  /// others.
  ArrayRef<InFlightAccess> liveInFlight(Root &root) {
    llvm::erase_if(root.inFlight, [&](const InFlightAccess &access) {
      return asyncStates[access.async].done;
    });
    return root.inFlight;
  }

  LogicalResult visitAccesses(Operation *op, ArrayRef<BufferAccess> accesses,
                              std::optional<unsigned> async) {
    SmallVector<BufferRef, 4> refsOfOp;
    for (const BufferAccess &access : accesses) {
      FailureOr<BufferRef> ref = resolveLive(op, access.buffer());
      if (failed(ref))
        return failure();
      refsOfOp.push_back(*ref);
      Root &root = roots[ref->root];
      if (access.reads && !isShardWritten(root, *ref))
        if (std::optional<int64_t> element =
                root.written.firstUnwritten(ref->range)) {
          InFlightDiagnostic diag = op->emitOpError("reads buffer '")
                                    << root.alloc.getName() << "'";
          if (ref->range.begin != 0 ||
              ref->range.end != root.alloc.getType().getNumElements())
            diag << " (element " << *element << ")";
          diag << " before anything wrote it";
          diag.attachNote(root.alloc.getLoc()) << "allocated here";
          return diag;
        }
      for (const InFlightAccess &other : liveInFlight(root)) {
        if (!other.range.overlaps(ref->range) ||
            !(other.writes || access.writes))
          continue;
        if (async && startsAfter(*async, other.async))
          continue;
        Operation *otherOp = asyncStates[other.async].op;
        InFlightDiagnostic diag =
            op->emitOpError(access.writes ? "writes" : "reads")
            << " buffer '" << root.alloc.getName() << "' while "
            << otherOp->getName()
            << (other.writes ? " still writes it" : " still reads it");
        diag.attachNote(otherOp->getLoc()) << "issued here; not waited yet";
        return diag;
      }
    }
    for (auto [access, ref] : llvm::zip_equal(accesses, refsOfOp)) {
      Root &root = roots[ref.root];
      if (access.writes && ref.shard)
        root.shardWrites.push_back({ref.range, *ref.shard});
      else if (access.writes)
        root.written.add(ref.range);
      if (async)
        root.inFlight.push_back({*async, ref.range, access.writes});
    }
    return success();
  }

  /// Whether `ref` is a shard view whose slice a write through the same
  /// shard view of the same range filled. Which slice a rank holds is not
  /// known here, so that write counts for nothing else.
  static bool isShardWritten(const Root &root, const BufferRef &ref) {
    return ref.shard &&
           llvm::any_of(root.shardWrites, [&](const ShardWrite &write) {
             return write.group == *ref.shard &&
                    write.source.begin == ref.range.begin &&
                    write.source.end == ref.range.end;
           });
  }

  /// The root range of a buffer operand.
  FailureOr<BufferRef> resolve(Operation *user, Value buffer) {
    auto it = refs.find(buffer);
    if (it == refs.end())
      return user->emitOpError(
          "uses a buffer that is not a sched.alloc of this program, nor a "
          "view of one");
    return it->second;
  }

  /// As resolve, and the root must not be freed.
  FailureOr<BufferRef> resolveLive(Operation *user, Value buffer) {
    FailureOr<BufferRef> ref = resolve(user, buffer);
    if (failed(ref))
      return failure();
    Root &root = roots[ref->root];
    if (root.freedBy) {
      InFlightDiagnostic diag = user->emitOpError("uses buffer '")
                                << root.alloc.getName()
                                << "' after it was freed";
      diag.attachNote(root.freedBy->getLoc()) << "freed here";
      return diag;
    }
    return ref;
  }

  /// An async op by its buffers: "sched.all_gather of 'g.param' into
  /// 'g.gathered'", "sched.all_reduce of 'g.grad'".
  std::string describe(Operation *async) {
    std::string text = async->getName().getStringRef().str();
    bool first = true;
    for (Value operand : async->getOperands()) {
      auto it = refs.find(operand);
      if (it == refs.end())
        continue;
      text += first ? " of '" : " into '";
      text += roots[it->second.root].alloc.getName().str() + "'";
      first = false;
    }
    return text;
  }

  LogicalResult checkEnd() {
    for (auto &[key, run] : runs)
      return run.last->emitOpError("is not followed by the rest of its "
                                   "unit's parts: the run stops at part ")
             << run.lastPart;
    for (AsyncState &state : asyncStates)
      if (!state.waitedBy)
        return state.op->emitOpError("returns an event that is never waited: ")
               << describe(state.op) << " may still run when the step ends";
    for (Root &root : roots)
      if (!root.alloc.getPersistent() && !root.freedBy)
        return root.alloc.emitOpError("transient buffer '")
               << root.alloc.getName() << "' is never freed";
    return success();
  }

  ProgramOp program;
  Type working; // what compute reads a frozen base in
  int64_t tensor;
  SymbolTableCollection symbolTables;
  // Per (op name, unit, micro-batch) whose run of parts has begun and not
  // ended, in the order they began: the part that comes next, and the last
  // one seen.
  struct PartRun {
    int64_t next;
    Operation *last;
    int64_t lastPart;
  };
  using PartKey = std::tuple<void *, Operation *, int64_t>;
  llvm::MapVector<PartKey, PartRun> runs;
  llvm::DenseMap<Value, BufferRef> refs;
  llvm::DenseMap<Operation *, OpInfo> opInfo;
  SmallVector<Root> roots;
  llvm::DenseMap<Operation *, unsigned> asyncIndex;
  SmallVector<AsyncState> asyncStates;
  // A sched.tasks: the async op each slot event instance (family,
  // micro-batch) stands for, and the slots of the run's values.
  SlotEventInstances<unsigned> signalled;
  plan::RunSlots slots;
};

/// Checks `program` as the step it stands for, in one walk of the step: a
/// sched.tasks' runs in the order of its table, on the ops as they are
/// written, so an error points at the op of the body. A sched.repeat is
/// sched-roll-micro-batches', after this pass: `who`'s error.
LogicalResult checkStep(ProgramOp program, StringRef who) {
  return ScheduleChecker(program).check(who);
}

struct SchedVerifySchedulePass
    : plan::impl::SchedVerifyScheduleBase<SchedVerifySchedulePass> {
  void runOnOperation() override {
    if (failed(checkStep(getOperation(), getArgument())))
      signalPassFailure();
  }
};

} // namespace
