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
// The walk is linear in the step: what does not change from run to run (an
// op's op table entry, the ids of the values it names, the ops whose events
// it names) is taken once per op and found by the op's position in its body,
// a value's root range is a vector indexed by its id, written ranges are a
// small sorted vector per root, and completed asynchronous ops leave the
// in-flight lists as they are next scanned. A pipeline stage's sched.tasks is
// walked entry by entry of its table (sched::StepCursor), each run's ops mapped
// afresh as they are visited: a sched.slot is the view of the slot its
// micro-batch takes, a sched.slot_event the event the run that signalled
// that instance issued.
//
// The middle of a table repeats a period of runs, each time for micro-batches
// further on (1F1B's steady state). At each period's start the walk takes a
// fingerprint of its state as the runs after it can see it: micro-batches
// counted from the run's, a slot buffer's slots from the one the run takes,
// asynchronous ops and roots numbered in the order the fingerprint meets
// them, and nothing the runs left can no longer name (instances and holders
// of micro-batches below the table's horizon, values a run defines afresh).
// The walk is the same function of that state and of the runs after it
// whatever micro-batch they start at, so once two periods start from equal
// fingerprints the periods after them would too, to the middle's end: the
// walk steps over them and goes on with the runs after the middle as if
// they were that many micro-batches earlier. An error found after such a
// step is found again by a walk of every run, for its message to name the
// run's own micro-batch.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/sched/SchedOpTable.h"
#include "dialects/sched/SlotEvents.h"
#include "runtime/format/Schedule.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/Threading.h"

#include <deque>
#include <limits>
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

/// The element ranges of a root buffer that hold data, disjoint, merged and
/// in order (a buffer is mostly written whole, or in a few views).
class WrittenRanges {
public:
  void add(ElementRange range) {
    int64_t begin = range.begin, end = range.end;
    // The first range that ends at or after `begin`: it and those after it
    // that start at or before `end` merge with the new one.
    auto first = llvm::partition_point(
        ranges, [&](const ElementRange &r) { return r.end < begin; });
    auto last = first;
    for (; last != ranges.end() && last->begin <= end; ++last) {
      begin = std::min(begin, last->begin);
      end = std::max(end, last->end);
    }
    first = ranges.erase(first, last);
    ranges.insert(first, ElementRange{begin, end});
  }

  /// The first element of `range` nothing wrote, if any.
  std::optional<int64_t> firstUnwritten(ElementRange range) const {
    int64_t pos = range.begin;
    // The range that holds `pos`, if any, is the first that ends after it.
    auto it = llvm::partition_point(
        ranges, [&](const ElementRange &r) { return r.end <= pos; });
    if (it != ranges.end() && it->begin <= pos)
      pos = it->end;
    if (pos >= range.end)
      return std::nullopt;
    return pos;
  }

  ArrayRef<ElementRange> all() const { return ranges; }

private:
  SmallVector<ElementRange, 2> ranges;
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

/// The slot buffers of more than one slot of `tasks`' bodies, by
/// allocation: their slots and slot size. The walk's state is seen from the
/// slot the run takes, so none may be used but through its slots (a fixed
/// view would not move with them); none when one is.
std::optional<DenseMap<Operation *, std::pair<int64_t, int64_t>>>
slottedBuffers(TasksOp tasks, DenseMap<Operation *, int64_t> &picked) {
  DenseMap<Operation *, std::pair<int64_t, int64_t>> shapes, slotted;
  for (TaskOp task : tasks.getTasks())
    for (auto slot : task.getBody().front().getOps<SlotOp>()) {
      // A picked slot is the run's own pick, which repeats with the
      // period up to a renaming of the pool's slots (of its stride).
      if (slot.isPicked()) {
        auto pool = slot.getSource().getDefiningOp<AllocOp>();
        auto stride = static_cast<int64_t>(*slot.getStride());
        if (!pool)
          return std::nullopt;
        auto [it, added] = picked.try_emplace(pool, stride);
        if (it->second != stride)
          return std::nullopt;
        continue;
      }
      auto shape =
          std::make_pair(static_cast<int64_t>(slot.getSlots()),
                         static_cast<int64_t>(slot.getType().getNumElements()));
      auto alloc = slot.getSource().getDefiningOp<AllocOp>();
      if (!alloc) {
        // A slot of a view (a shared pool's member) has one slot.
        if (shape.first != 1)
          return std::nullopt;
        continue;
      }
      auto [it, added] = shapes.try_emplace(alloc, shape);
      if (it->second != shape)
        return std::nullopt;
    }
  for (auto [alloc, shape] : shapes) {
    if (picked.contains(alloc))
      return std::nullopt; // a pool seen two ways
    if (shape.first == 1)
      continue;
    if (cast<AllocOp>(alloc).getType().getNumElements() !=
            shape.first * shape.second ||
        !llvm::all_of(alloc->getUsers(), [](Operation *user) {
          return isa<SlotOp, FreeOp>(user);
        }))
      return std::nullopt;
    slotted[alloc] = shape;
  }
  return slotted;
}

/// The slot `slot` of a buffer of `slots` as seen from the run of
/// micro-batch `base`.
int64_t relativeSlot(int64_t slot, int64_t base, int64_t slots) {
  return ((slot - base) % slots + slots) % slots;
}

/// One walk over one program.
class ScheduleChecker {
public:
  /// With `stepOverPeriods`, the walk steps over the periods of a table's
  /// middle that would repeat the one before.
  ScheduleChecker(ProgramOp program, bool stepOverPeriods)
      : program(program),
        working(getStorageElementType(
            program.getContext(),
            plan::workingStorage(program.getTrain().getPrecision()))),
        tensor(program.getGroupSize(Group::Tensor)),
        stepOverPeriods(stepOverPeriods) {}

  /// Checks the step's ops in the order it runs them. A sched.repeat is
  /// `who`'s error (sched::requireUnrolled).
  LogicalResult check(StringRef who) {
    if (failed(plan::requireNoRepeat(program, who)))
      return failure();
    // The micro-batches are those of one sched.tasks: the walk steps over
    // a middle only where it has no other.
    auto tasksOps = program.getBody().front().getOps<TasksOp>();
    TasksOp only;
    if (stepOverPeriods && llvm::hasSingleElement(tasksOps))
      only = *tasksOps.begin();
    plan::PeriodSteps steps(only);
    std::optional<DenseMap<Operation *, std::pair<int64_t, int64_t>>> buffers =
        only ? slottedBuffers(only, pickedPools) : std::nullopt;
    if (buffers)
      slotted = std::move(*buffers);
    else
      steps.stop();
    // A body's ops are visited in order in each of its runs: their
    // OpInfos, made in its first run, are found by position.
    SmallVector<OpInfo *> *bodyInfos = nullptr;
    size_t position = 0;
    StepCursor cursor(program);
    while (!cursor.done()) {
      if (steps.stepOver(cursor, [&](int64_t base, int64_t horizon) {
            return fingerprint(base, horizon, steps.relabel());
          })) {
        stepped = steps.step();
        quiet.emplace(program.getContext(),
                      [thread = llvm::get_threadid()](Diagnostic &) {
                        return success(llvm::get_threadid() == thread);
                      });
        continue;
      }
      Operation *op = &*cursor;
      OpInfo *info;
      bool inBody = isa<TaskOp>(op->getParentOp());
      if (inBody) {
        if (op == &op->getBlock()->front()) {
          bodyInfos = &infosOfBody[op->getBlock()];
          position = 0;
        }
        if (position == bodyInfos->size())
          bodyInfos->push_back(&makeInfo(op));
        info = (*bodyInfos)[position++];
      } else {
        info = &makeInfo(op); // visited once
      }
      // After a step, the ops after it as if that many micro-batches
      // earlier (outside the tasks, no op's checks depend on it).
      if (failed(visitInRun(op, *info, cursor.iteration() - steps.offset(),
                            steps.pick(cursor.pick()))))
        return failure();
      cursor.advance();
    }
    return checkEnd();
  }

  /// The runs the walk stepped over, if any. Its diagnostics after the
  /// step are dropped: an error there is for a walk of every run to report.
  std::optional<plan::PeriodSteps::Step> steppedOver() const { return stepped; }

private:
  struct OpInfo;

  /// The walk's state as the runs from one starting at micro-batch `base`
  /// can see it, with nothing below micro-batch `horizon` that they cannot
  /// name: equal for two runs a period apart when the period repeats.
  std::vector<int64_t> fingerprint(int64_t base, int64_t horizon,
                                   ArrayRef<int64_t> relabel) {
    std::vector<int64_t> words;
    DenseMap<unsigned, int64_t> rootIds, asyncIds;
    SmallVector<unsigned> rootOrder, asyncOrder;
    auto word = [&](auto value) {
      if constexpr (std::is_pointer_v<decltype(value)>)
        words.push_back(reinterpret_cast<intptr_t>(value));
      else
        words.push_back(static_cast<int64_t>(value));
    };
    auto asyncId = [&](unsigned index) {
      auto [it, added] = asyncIds.try_emplace(index, asyncIds.size());
      if (added)
        asyncOrder.push_back(index);
      word(it->second);
    };
    auto rootId = [&](unsigned index) {
      auto [it, added] = rootIds.try_emplace(index, rootIds.size());
      if (added)
        rootOrder.push_back(index);
      word(it->second);
    };
    // Where `slot` of `root` (of `slots` slots) is seen from: the run's
    // slot of a slot buffer, a picked pool's slot renamed.
    auto seenSlot = [&](Operation *root, int64_t slot, int64_t slots) {
      if (pickedPools.contains(root))
        return slot < static_cast<int64_t>(relabel.size())
                   ? relabel[static_cast<size_t>(slot)]
                   : slot;
      return relativeSlot(slot, base, slots);
    };
    // The slot shape of `root`: (slots, elements a slot), or none.
    auto shapeOf =
        [&](Operation *root) -> std::optional<std::pair<int64_t, int64_t>> {
      if (auto it = slotted.find(root); it != slotted.end())
        return it->second;
      if (auto it = pickedPools.find(root);
          it != pickedPools.end() && !relabel.empty())
        return std::make_pair(int64_t{0}, it->second);
      return std::nullopt;
    };
    // A root's element ranges, a slot buffer's from the run's slot.
    auto ranges = [&](Root &root, ArrayRef<ElementRange> in) {
      std::optional<std::pair<int64_t, int64_t>> shape =
          shapeOf(root.alloc.getOperation());
      SmallVector<ElementRange, 4> out;
      if (!shape) {
        out.assign(in.begin(), in.end());
      } else {
        auto [slots, size] = *shape;
        for (ElementRange range : in)
          for (int64_t slot = range.begin / size; slot * size < range.end;
               ++slot) {
            int64_t moved =
                seenSlot(root.alloc.getOperation(), slot, slots) * size -
                slot * size;
            out.push_back({std::max(range.begin, slot * size) + moved,
                           std::min(range.end, (slot + 1) * size) + moved});
          }
        llvm::sort(out, [](const ElementRange &a, const ElementRange &b) {
          return a.begin < b.begin;
        });
        WrittenRanges merged;
        for (ElementRange range : out)
          merged.add(range);
        out.assign(merged.all().begin(), merged.all().end());
      }
      word(out.size());
      for (ElementRange range : out) {
        word(range.begin);
        word(range.end);
      }
    };

    // What the runs ahead can reach: the events of the ops outside the
    // tasks, the buffers of values a run does not define afresh before it
    // reads them, the roots not freed and the events not waited (which the
    // step's end looks at), the units' runs of parts, the slot events and
    // the slots' holders from the horizon on.
    for (const OpInfo &info : infoStore)
      if (!info.inBody) {
        if (info.asyncIndex)
          asyncId(*info.asyncIndex);
        else
          word(-1);
      }
    for (auto [id, ref] : llvm::enumerate(refs)) {
      if (!seenAcrossRuns[id])
        continue;
      if (!ref) {
        word(-1);
        continue;
      }
      rootId(ref->root);
      ranges(roots[ref->root], {ref->range});
      word(ref->shard ? static_cast<int64_t>(*ref->shard) : -1);
    }
    // Each section after the first with its length first, so that no two
    // states run together into the same words.
    auto section = [&](auto &&fill) {
      size_t at = words.size();
      words.push_back(0);
      fill();
      words[at] = static_cast<int64_t>(words.size() - at - 1);
    };
    section([&] {
      for (auto [index, root] : llvm::enumerate(roots))
        if (!root.freedBy)
          rootId(index);
    });
    llvm::erase_if(unwaited,
                   [&](unsigned index) { return asyncStates[index].waitedBy; });
    section([&] {
      for (unsigned index : unwaited)
        asyncId(index);
    });
    words.push_back(static_cast<int64_t>(runs.size()));
    for (auto &[key, partRun] : runs) {
      word(std::get<0>(key));
      word(std::get<1>(key));
      word(std::get<2>(key));
      word(partRun.next);
      word(partRun.last);
      word(partRun.lastPart);
    }
    section([&] {
      signalled.forEach([&](int64_t family, int64_t instance, unsigned event) {
        if (instance < horizon)
          return;
        word(family);
        word(instance - base);
        asyncId(event);
      });
    });
    // A holder below the horizon never holds a slot again.
    using Holder = plan::RunSlots::Holder;
    auto holder = [&](Holder held) {
      held.mb = held.mb < horizon ? std::numeric_limits<int64_t>::min()
                                  : held.mb - base;
      return held;
    };
    SmallVector<std::tuple<Operation *, int64_t, Holder, SmallVector<Holder>>>
        held;
    slots.forEachHeld([&](Operation *root, int64_t start, const Holder &now,
                          const auto &earlier) {
      if (std::optional<std::pair<int64_t, int64_t>> shape = shapeOf(root)) {
        auto [count, size] = *shape;
        start = seenSlot(root, start / size, count) * size + start % size;
      }
      SmallVector<Holder> kept;
      for (const Holder &was : earlier)
        if (was.mb >= horizon)
          kept.push_back(holder(was));
      held.emplace_back(root, start, holder(now), std::move(kept));
    });
    llvm::sort(held, [](const auto &a, const auto &b) {
      return std::make_pair(std::get<0>(a), std::get<1>(a)) <
             std::make_pair(std::get<0>(b), std::get<1>(b));
    });
    word(held.size());
    for (auto &[root, start, now, kept] : held) {
      word(root);
      word(start);
      word(now.buffer);
      word(now.group);
      word(now.mb);
      word(kept.size());
      for (const Holder &was : kept) {
        word(was.buffer);
        word(was.group);
        word(was.mb);
      }
    }

    // The roots and events met, in the order met (each may meet more).
    for (size_t r = 0, a = 0; r < rootOrder.size() || a < asyncOrder.size();) {
      if (r < rootOrder.size()) {
        Root &root = roots[rootOrder[r++]];
        word(root.alloc.getOperation());
        word(root.freedBy);
        ranges(root, root.written.all());
        for (const ShardWrite &write : root.shardWrites) {
          ranges(root, {write.source});
          word(static_cast<int64_t>(write.group));
        }
        word(-1);
        for (const InFlightAccess &access : liveInFlight(root)) {
          asyncId(access.async);
          ranges(root, {access.range});
          word(access.writes);
        }
        word(-1);
        continue;
      }
      const AsyncState &state = asyncStates[asyncOrder[a++]];
      word(state.op);
      word(state.waitedBy);
      word(state.done);
      // What a done op started after is done: only the rest can order it.
      if (!state.done)
        for (unsigned after : state.after)
          if (!asyncStates[after].done)
            asyncId(after);
      word(-1);
    }
    return words;
  }

  /// `op` in the run `iteration` micro-batches on from the one its task is
  /// written for (0 outside a sched.tasks).
  LogicalResult visitInRun(Operation *op, OpInfo &info, int64_t iteration,
                           int64_t pick) {
    int64_t mb = info.bodyMicroBatch + iteration;
    if (auto slot = dyn_cast<SlotOp>(op)) {
      int64_t start =
          slots.place(slot.getResult(), slot, slot.getSource(), mb, pick);
      return visitView(op, info, start, std::nullopt);
    }
    if (auto named = dyn_cast<SlotEventOp>(op)) {
      FailureOr<unsigned> async = signalled.lookup(named, iteration);
      if (failed(async))
        return failure();
      info.asyncIndex = *async;
      return success();
    }
    if (auto signal = dyn_cast<SlotSignalOp>(op)) {
      // The op verifier has the event an asynchronous op's of the same body,
      // visited before; a pass that built it otherwise gets this error.
      const OpInfo *producer = info.eventProducers[0];
      if (!producer || !producer->asyncIndex)
        return op->emitOpError("signals an event no asynchronous op of its "
                               "task returns");
      return signalled.signal(signal, iteration, *producer->asyncIndex);
    }
    // A slot holds one micro-batch at a time: a run that uses it for one
    // after another micro-batch took it found fewer slots than the
    // micro-batches in flight.
    if (failed(visit(op, info)))
      return failure();
    return info.usesSlots ? slots.visit(op, op, mb) : success();
  }

  LogicalResult visit(Operation *op, OpInfo &info) {
    if (auto alloc = dyn_cast<AllocOp>(op))
      return visitAlloc(alloc, info.result);
    if (auto view = dyn_cast<ViewOp>(op))
      return visitView(op, info, view.getOffset(), std::nullopt);
    if (auto view = dyn_cast<ShardViewOp>(op))
      return visitView(op, info, 0, view.getGroup());
    if (auto free = dyn_cast<FreeOp>(op))
      return visitFree(free, info.operands[0]);
    if (auto wait = dyn_cast<WaitOp>(op))
      return visitWait(wait, info);
    if (failed(tableInfo(op, info)) || failed(checkParts(op)))
      return failure();
    std::optional<unsigned> async;
    if (info.async) {
      async = asyncStates.size();
      AsyncState state{op, {}, nullptr, false};
      // Its event operands are its `after` list.
      for (const OpInfo *producer : info.eventProducers) {
        if (!producer || !producer->asyncIndex)
          return op->emitOpError("starts after an event no asynchronous op "
                                 "of this program returns");
        state.after.push_back(*producer->asyncIndex);
      }
      info.asyncIndex = *async;
      asyncStates.push_back(std::move(state));
      unwaited.push_back(*async);
    }
    return visitAccesses(op, info, async);
  }

  /// What does not depend on the run: once per op, however many runs of its
  /// body the step has.
  struct OpInfo {
    /// Whether it is a sched.task's, and the micro-batch that task is
    /// written for (0 outside one).
    bool inBody = false;
    int64_t bodyMicroBatch = 0;
    /// Whether an operand is a sched.slot's result or a view of one: what
    /// plan::RunSlots has to see.
    bool usesSlots = false;
    /// The ids (idFor) of its operands and of its buffer result, if any.
    SmallVector<unsigned, 4> operands;
    unsigned result = 0;
    /// The infos of the ops that define its event operands (a wait's, a
    /// slot signal's, an asynchronous op's `after`), null where no op
    /// visited before it does.
    SmallVector<OpInfo *, 1> eventProducers;
    /// For an asynchronous op, the index (asyncStates) of its state in the
    /// latest run that issued it; for a sched.slot_event, the state of the
    /// op its instance stands for.
    std::optional<unsigned> asyncIndex;
    /// Set by tableInfo: what it reads and writes and the events it follows
    /// and signals, from the runtime's op table (SchedOpTable.h).
    bool inTable = false;
    SmallVector<BufferAccess, 4> accesses;
    std::optional<AsyncInfo> async;
  };
  OpInfo &makeInfo(Operation *op) {
    OpInfo &info = infoStore.emplace_back();
    infoOfOp[op] = &info;
    for (Value operand : op->getOperands())
      if (isa<EventType>(operand.getType())) {
        Operation *def = operand.getDefiningOp();
        info.eventProducers.push_back(def ? infoOfOp.lookup(def) : nullptr);
      }
    if (auto task = dyn_cast<TaskOp>(op->getParentOp())) {
      info.inBody = true;
      info.bodyMicroBatch = static_cast<int64_t>(task.getMicroBatch());
    }
    for (Value operand : op->getOperands())
      info.operands.push_back(idFor(operand));
    if (op->getNumResults() == 1 && isa<MemRefType>(op->getResultTypes()[0]))
      info.result = idFor(op->getResult(0));
    info.usesSlots = llvm::any_of(op->getOperands(), [](Value operand) {
      while (Operation *def = operand.getDefiningOp()) {
        if (isa<SlotOp>(def))
          return true;
        if (!isa<ViewOp, ShardViewOp>(def))
          return false;
        operand = def->getOperand(0);
      }
      return false;
    });
    return info;
  }
  /// Fills `info`'s op table part, and checks what does not depend on the
  /// run, the first time.
  LogicalResult tableInfo(Operation *op, OpInfo &info) {
    if (info.inTable)
      return success();
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
    info.accesses = std::move(*accesses);
    info.async = async;
    info.inTable = true;
    return success();
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
    // A unit's parts, looked up once per unit.
    auto [known, added] = partsOf.try_emplace(unit);
    if (added) {
      auto unitOp = dyn_cast_or_null<plan::UnitOp>(
          symbolTables.lookupNearestSymbolFrom(program->getParentOp(), unit));
      std::optional<plan::rt::tp::UnitRole> role =
          unitOp ? getTensorParallelRole(unitOp.getKind(),
                                         program.getModel().getFamily())
                 : std::nullopt;
      known->second = {unitOp, role ? plan::rt::tp::partCount(*role) : 0};
    }
    auto [unitOp, parts] = known->second;
    if (parts == 0)
      return success(); // the op's verifier reports it
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

  /// `alloc`, whose result has id `id`.
  LogicalResult visitAlloc(AllocOp alloc, unsigned id) {
    // A body's allocation in a later run takes the root its run before
    // freed, once nothing still accesses it: the step's roots are then as
    // many as its distinct allocations, not one per run.
    std::optional<BufferRef> &ref = refs[id];
    if (!ref || !roots[ref->root].freedBy ||
        !liveInFlight(roots[ref->root]).empty()) {
      ref = BufferRef{static_cast<unsigned>(roots.size()), {}, std::nullopt};
      roots.emplace_back();
    }
    ref->range = {0, alloc.getType().getNumElements()};
    ref->shard = std::nullopt;
    Root &root = roots[ref->root];
    root = Root{alloc, nullptr, {}, {}, {}};
    // Persistent buffers hold last step's state.
    if (alloc.getPersistent())
      root.written.add({0, alloc.getType().getNumElements()});
    return success();
  }

  /// The view `op` (a sched.view, sched.shard_view or sched.slot, its source
  /// its first operand) at `offset`, or, with `shard`, this rank's shard of
  /// the source.
  LogicalResult visitView(Operation *op, const OpInfo &info, int64_t offset,
                          std::optional<Group> shard) {
    FailureOr<BufferRef> ref = resolveLive(op, info.operands[0]);
    if (failed(ref))
      return failure();
    BufferRef view = *ref;
    if (shard) {
      view.shard = shard;
    } else {
      view.range.begin += offset;
      view.range.end =
          view.range.begin +
          cast<MemRefType>(op->getResultTypes()[0]).getNumElements();
    }
    refs[info.result] = view;
    return success();
  }

  /// `free`, whose buffer has id `id`.
  LogicalResult visitFree(FreeOp free, unsigned id) {
    FailureOr<BufferRef> ref = resolve(free, id);
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

  LogicalResult visitWait(WaitOp wait, const OpInfo &info) {
    const OpInfo *producer = info.eventProducers[0];
    if (!producer || !producer->asyncIndex)
      return wait.emitOpError(
          "waits for an event no asynchronous op of this program returns");
    unsigned index = *producer->asyncIndex;
    AsyncState &state = asyncStates[index];
    if (state.waitedBy) {
      InFlightDiagnostic diag = wait.emitOpError("waits twice for ")
                                << describe(state.op);
      diag.attachNote(state.waitedBy->getLoc()) << "first waited here";
      return diag;
    }
    state.waitedBy = wait;
    complete(index);
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

  LogicalResult visitAccesses(Operation *op, const OpInfo &info,
                              std::optional<unsigned> async) {
    ArrayRef<BufferAccess> accesses = info.accesses;
    SmallVector<BufferRef, 4> refsOfOp;
    for (const BufferAccess &access : accesses) {
      FailureOr<BufferRef> ref =
          resolveLive(op, info.operands[access.operand->getOperandNumber()]);
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

  /// The root range of the buffer operand of id `id`.
  FailureOr<BufferRef> resolve(Operation *user, unsigned id) {
    if (!refs[id])
      return user->emitOpError(
          "uses a buffer that is not a sched.alloc of this program, nor a "
          "view of one");
    return *refs[id];
  }

  /// As resolve, and the root must not be freed.
  FailureOr<BufferRef> resolveLive(Operation *user, unsigned id) {
    FailureOr<BufferRef> ref = resolve(user, id);
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
      auto it = idOf.find(operand);
      if (it == idOf.end() || !refs[it->second])
        continue;
      text += first ? " of '" : " into '";
      text += roots[refs[it->second]->root].alloc.getName().str() + "'";
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
  // Each unit a compute op names, and its parts (0: none, or no unit).
  llvm::DenseMap<Attribute, std::pair<plan::UnitOp, int64_t>> partsOf;
  /// Each value a visited op names gets an id, taken once per op (makeInfo),
  /// and a buffer its root range: the runs index a vector, not a hash map.
  unsigned idFor(Value value) {
    auto [it, added] = idOf.try_emplace(value, refs.size());
    if (added) {
      refs.emplace_back();
      // A run defines its body's values afresh before it reads them, but
      // for an allocation, whose root the run before may hand on.
      Operation *def = value.getDefiningOp();
      seenAcrossRuns.push_back(!def || !isa<TaskOp>(def->getParentOp()) ||
                               isa<AllocOp>(def));
    }
    return it->second;
  }
  llvm::DenseMap<Value, unsigned> idOf;
  SmallVector<std::optional<BufferRef>> refs;
  std::vector<bool> seenAcrossRuns; // by id, for fingerprint
  std::deque<OpInfo> infoStore;     // each op's, in the order first visited
  llvm::DenseMap<Block *, SmallVector<OpInfo *>> infosOfBody;
  SmallVector<Root> roots;
  llvm::DenseMap<Operation *, OpInfo *> infoOfOp; // for makeInfo
  SmallVector<AsyncState> asyncStates;
  // The asynchronous ops not waited yet, and some waited since (dropped by
  // fingerprint).
  std::vector<unsigned> unwaited;
  // A sched.tasks: the async op each slot event instance (family,
  // micro-batch) stands for, and the slots of the run's values.
  SlotEventInstances<unsigned> signalled;
  plan::RunSlots slots;
  bool stepOverPeriods;
  std::optional<plan::PeriodSteps::Step> stepped;
  // The slot buffers of more than one slot (slottedBuffers), for
  // fingerprint.
  DenseMap<Operation *, std::pair<int64_t, int64_t>> slotted;
  // The pools of picked slots, with the elements of a slot.
  DenseMap<Operation *, int64_t> pickedPools;
  // Set once the walk steps over runs: drops this thread's diagnostics.
  std::optional<ScopedDiagnosticHandler> quiet;
};

/// Checks `program` as the step it stands for, in one walk of the step: a
/// sched.tasks' runs in the order of its table, on the ops as they are
/// written, so an error points at the op of the body. A sched.repeat is
/// sched-roll-micro-batches', after this pass: `who`'s error.
/// Without `everyRun` the walk steps over the periods of a table's middle
/// that repeat the one before; an error after the step is found again by a
/// walk of every run, whose diagnostics name the run's own micro-batch.
/// With `remark`, a remark at each sched.tasks of a step that verifies says
/// what the walk took.
LogicalResult checkStep(ProgramOp program, StringRef who, bool everyRun,
                        bool remark) {
  std::optional<plan::PeriodSteps::Step> stepped;
  LogicalResult result = failure();
  {
    ScheduleChecker checker(program, !everyRun);
    result = checker.check(who);
    stepped = checker.steppedOver();
  } // and its diagnostics with it
  if (failed(result) && stepped)
    return ScheduleChecker(program, false).check(who);
  if (succeeded(result) && remark)
    for (TasksOp tasks : program.getBody().front().getOps<TasksOp>()) {
      auto runs = static_cast<int64_t>(tasks.getOrder().size() / 2);
      if (!stepped) {
        tasks.emitRemark("walked all ") << runs << " runs";
        continue;
      }
      tasks.emitRemark("walked ")
          << runs - stepped->runs << " of " << runs
          << " runs: stepped over runs " << stepped->from << " to "
          << stepped->from + stepped->runs - 1 << ", "
          << stepped->runs / stepped->period << " periods of "
          << stepped->period << " runs that repeat the one before";
    }
  return result;
}

struct SchedVerifySchedulePass
    : plan::impl::SchedVerifyScheduleBase<SchedVerifySchedulePass> {
  using SchedVerifyScheduleBase::SchedVerifyScheduleBase;
  void runOnOperation() override {
    if (failed(checkStep(getOperation(), getArgument(), everyRun, remarkRuns)))
      signalPassFailure();
  }
};

} // namespace
