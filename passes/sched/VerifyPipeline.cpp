//===- VerifyPipeline.cpp - Prove a pipeline's stages fit together --------===//
//
// A plan with a pipeline has one sched.program per pipeline rank. Each is
// verified alone (sched-verify-schedule); this pass checks them together,
// as docs/sched.md ("sched-verify-pipeline") says:
//
// - every sched.send has its sched.recv on the neighbour at the same
//   position: the k-th send on a channel (a stage and a direction) meets the
//   k-th receive at the other end, and they name the same unit and
//   micro-batch, with buffers of one size and element type;
// - every collective on the pipeline group is issued by every stage, in the
//   same order, of the same kind and size; every collective on the
//   embedding group likewise by the first and the last stage, and by no
//   other;
// - the stages cannot deadlock. The programs are played together: each
//   stage's compute stream runs in order and stops at a sched.wait whose
//   event has not completed; a send and its receive complete together once
//   both stages have reached them (and everything before them on their
//   channel has completed), which is what NCCL's point-to-point calls do; a
//   collective between stages completes once every stage of its group has
//   reached it. The play
//   must end with every stage at its program's end.
//
// Each round of the play moves some stage or completes some transfer, so it
// takes at most (the programs' ops) rounds of (stages) steps each. A stage
// with a sched.tasks is played in the order of its table (sched::StepCursor):
// its bodies' ops and events are told apart by the run they belong to, and a
// wait for a slot event waits for the event of the run that signalled it.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/sched/SchedOpTable.h"
#include "dialects/sched/SlotEvents.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"

#include <deque>
#include <map>

namespace plan {
#define GEN_PASS_DEF_SCHEDVERIFYPIPELINE
#include "passes/Passes.h.inc"
} // namespace plan

using namespace mlir;
using namespace sched;

namespace {

/// An event in the step: the value an op returns, and the run of the
/// sched.tasks body that op ran in (-1 outside a sched.tasks).
using EventKey = std::pair<Value, int64_t>;

/// An op of a stage's step: the op, and the event it issues or, for a
/// sched.wait, waits for.
struct Step {
  Operation *op;
  EventKey event;
};

/// One stage's program as the play walks it: the ops that involve another
/// stage (`isBetweenStages`) and the waits for them. Every other op completes
/// on its own, so the play skips it.
struct Stage {
  int64_t rank = 0;
  SmallVector<Step> ops;
  size_t next = 0; // the op its compute stream reaches next
  bool done() const { return next == ops.size(); }
  /// Each run's micro-batch shift from its body's (StepCursor::iteration()),
  /// by the run index events are keyed by.
  SmallVector<int64_t> runIterations;
  /// What the run of `event` adds to the micro-batch its body is written
  /// for (0 outside a sched.tasks).
  int64_t iterationOf(EventKey event) const {
    return event.second >= 0 ? runIterations[event.second] : 0;
  }
};

/// A send or a receive on a channel, in the order its stage issued it.
struct PointToPoint {
  Operation *op;
  EventKey event;
  SymbolRefAttr unit;
  int64_t microBatch;
  MemRefType type;
};

/// The collectives on one group between stages (pipeline, embedding): its
/// member stages and what each has issued, in order.
struct StageCollectives {
  Group group;
  SmallVector<int64_t> members;          // pipeline ranks
  SmallVector<SmallVector<Step>> issued; // by member
  size_t done = 0;                       // collectives completed so far
};

/// Who issues a group's collectives, as its messages say.
const char *whoIssues(Group group) {
  return group == Group::Pipeline ? "every stage issues"
                                  : "the first and the last stage issue";
}

/// What a stage sends in one direction, and what its neighbour receives
/// from it, matched in order.
struct Channel {
  std::deque<PointToPoint> sends, recvs;
  size_t matched = 0; // pairs completed so far
};

class PipelinePlay {
public:
  PipelinePlay(plan::PlanOp plan, SmallVector<Stage> stages)
      : plan(plan), stages(std::move(stages)) {}

  LogicalResult run();

private:
  /// Channel from pipeline rank `rank` towards `peer`.
  Channel &channel(int64_t rank, Peer peer) {
    return channels[{rank, static_cast<unsigned>(peer)}];
  }
  int64_t neighbour(int64_t rank, Peer peer) const {
    int64_t ranks = stages.size();
    return (rank + (peer == Peer::Next ? 1 : ranks - 1)) % ranks;
  }
  /// Runs a stage's compute stream until it waits for an event that has
  /// not completed; whether it moved.
  bool advance(Stage &stage);
  /// Completes what can complete; whether anything did, or failure on a
  /// mismatch.
  FailureOr<bool> complete();
  LogicalResult matchPair(const PointToPoint &send, const PointToPoint &recv,
                          int64_t sender, Peer peer);
  LogicalResult reportDeadlock();
  LogicalResult reportUnmatched();
  /// `op`, in the run of its stage `stage` that `event` (its event) names.
  std::string describe(const Stage &stage, EventKey event);
  /// What `group` (the pipeline or the embedding group) has issued.
  StageCollectives &collectivesOn(Group group) {
    return collectives[group == Group::Pipeline ? 0 : 1];
  }

  plan::PlanOp plan;
  SmallVector<Stage> stages;
  std::map<std::pair<int64_t, unsigned>, Channel> channels;
  // The pipeline group's collectives, then the embedding group's.
  SmallVector<StageCollectives, 2> collectives;
  DenseSet<EventKey> completed;
  bool misplaced = false; // a collective on a group its stage is not in
};

std::string PipelinePlay::describe(const Stage &stage, EventKey event) {
  Operation *op = event.first.getDefiningOp();
  // A body's send or receive is for the micro-batch of its run.
  int64_t iteration = stage.iterationOf(event);
  std::string text;
  llvm::raw_string_ostream os(text);
  if (auto send = dyn_cast<SendOp>(op))
    os << "its send to " << stringifyPeer(send.getPeer()) << " for "
       << send.getUnit() << " mb "
       << static_cast<int64_t>(send.getMicroBatch()) + iteration;
  else if (auto recv = dyn_cast<RecvOp>(op))
    os << "its receive from " << stringifyPeer(recv.getPeer()) << " for "
       << recv.getUnit() << " mb "
       << static_cast<int64_t>(recv.getMicroBatch()) + iteration;
  else
    os << "its '" << op->getName() << "' on the "
       << stringifyGroup(*getAsyncInfo(op)->group) << " group";
  return text;
}

bool PipelinePlay::advance(Stage &stage) {
  bool moved = false;
  while (!stage.done()) {
    const Step &step = stage.ops[stage.next];
    Operation *op = step.op;
    if (isa<WaitOp>(op)) {
      if (!completed.contains(step.event))
        return moved;
    } else if (auto send = dyn_cast<SendOp>(op)) {
      channel(stage.rank, send.getPeer())
          .sends.push_back({op, step.event, send.getUnit(),
                            static_cast<int64_t>(send.getMicroBatch()) +
                                stage.iterationOf(step.event),
                            cast<MemRefType>(send.getBuffer().getType())});
    } else if (auto recv = dyn_cast<RecvOp>(op)) {
      // A receive from `prev` reads the channel of the stage before
      // towards `next`, and the other way round.
      Peer towards = recv.getPeer() == Peer::Prev ? Peer::Next : Peer::Prev;
      channel(neighbour(stage.rank, recv.getPeer()), towards)
          .recvs.push_back({op, step.event, recv.getUnit(),
                            static_cast<int64_t>(recv.getMicroBatch()) +
                                stage.iterationOf(step.event),
                            cast<MemRefType>(recv.getBuffer().getType())});
    } else if (isPipelineCollective(op)) {
      Group group = *getAsyncInfo(op)->group;
      StageCollectives &on = collectivesOn(group);
      auto member = llvm::find(on.members, stage.rank);
      if (member == on.members.end()) {
        op->emitError("stage ")
            << stage.rank << " issues a collective on the "
            << stringifyGroup(group)
            << " group, which only the pipeline's first and last stages "
               "are in";
        misplaced = true;
        return moved;
      }
      on.issued[member - on.members.begin()].push_back(step);
    }
    ++stage.next;
    moved = true;
  }
  return moved;
}

LogicalResult PipelinePlay::matchPair(const PointToPoint &send,
                                      const PointToPoint &recv, int64_t sender,
                                      Peer peer) {
  if (send.unit == recv.unit && send.microBatch == recv.microBatch &&
      send.type.getNumElements() == recv.type.getNumElements() &&
      send.type.getElementType() == recv.type.getElementType())
    return success();
  auto shape = [](MemRefType type) {
    std::string text;
    llvm::raw_string_ostream os(text);
    os << type.getNumElements() << " x " << type.getElementType();
    return text;
  };
  InFlightDiagnostic diag =
      send.op->emitError("stage ")
      << sender << "'s send to " << stringifyPeer(peer) << " for " << send.unit
      << " mb " << send.microBatch << " (" << shape(send.type)
      << ") meets stage " << neighbour(sender, peer) << "'s receive for "
      << recv.unit << " mb " << recv.microBatch << " (" << shape(recv.type)
      << "): sends and receives between two stages pair up in program order";
  diag.attachNote(recv.op->getLoc()) << "the receive";
  return diag;
}

FailureOr<bool> PipelinePlay::complete() {
  bool any = false;
  for (auto &[key, ch] : channels) {
    while (ch.matched < ch.sends.size() && ch.matched < ch.recvs.size()) {
      const PointToPoint &send = ch.sends[ch.matched];
      const PointToPoint &recv = ch.recvs[ch.matched];
      if (failed(
              matchPair(send, recv, key.first, static_cast<Peer>(key.second))))
        return failure();
      completed.insert(send.event);
      completed.insert(recv.event);
      ++ch.matched;
      any = true;
    }
  }
  // The n-th collective of a group completes once every member has issued
  // it.
  for (StageCollectives &on : collectives) {
    while (llvm::all_of(on.issued, [&](const SmallVector<Step> &ops) {
      return ops.size() > on.done;
    })) {
      Operation *first = on.issued.front()[on.done].op;
      for (auto [member, ops] : llvm::enumerate(on.issued)) {
        Operation *op = ops[on.done].op;
        if (op->getName() != first->getName() ||
            op->getAttrDictionary() != first->getAttrDictionary() ||
            op->getOperandTypes() != first->getOperandTypes()) {
          InFlightDiagnostic diag =
              op->emitError("stage ")
              << on.members[member] << "'s " << stringifyGroup(on.group)
              << " collective #" << on.done << " differs from stage "
              << on.members.front() << "'s: " << whoIssues(on.group)
              << " the same collectives on the " << stringifyGroup(on.group)
              << " group, in the same order";
          diag.attachNote(first->getLoc())
              << "stage " << on.members.front() << "'s";
          return failure();
        }
        completed.insert(ops[on.done].event);
      }
      ++on.done;
      any = true;
    }
  }
  return any;
}

LogicalResult PipelinePlay::reportDeadlock() {
  // A stage waiting for a neighbour that has ended: a send or receive
  // without a partner, a collective the other never issues.
  for (Stage &stage : stages) {
    if (stage.done())
      continue;
    EventKey awaitedEvent = stage.ops[stage.next].event;
    Operation *awaited = awaitedEvent.first.getDefiningOp();
    std::optional<Peer> peer;
    if (auto send = dyn_cast<SendOp>(awaited))
      peer = send.getPeer();
    else if (auto recv = dyn_cast<RecvOp>(awaited))
      peer = recv.getPeer();
    // A collective's partners are its group's other members.
    const StageCollectives *on = nullptr;
    if (!peer)
      on = &collectivesOn(*getAsyncInfo(awaited)->group);
    for (Stage &other : stages) {
      if (!other.done() ||
          (peer && other.rank != neighbour(stage.rank, *peer)) ||
          (on && !llvm::is_contained(on->members, other.rank)))
        continue;
      return awaited->emitError("stage ")
             << stage.rank << " waits for " << describe(stage, awaitedEvent)
             << ", but stage " << other.rank << " ends its program without "
             << (peer ? (isa<SendOp>(awaited) ? "receiving it" : "sending it")
                      : "issuing it")
             << ": it has no partner";
    }
  }
  InFlightDiagnostic diag = plan.emitError("the pipeline stages of plan '")
                            << plan.getSymName()
                            << "' deadlock: each waits for another";
  for (Stage &stage : stages) {
    if (stage.done())
      continue;
    const Step &wait = stage.ops[stage.next];
    diag.attachNote(wait.op->getLoc())
        << "stage " << stage.rank << " waits for "
        << describe(stage, wait.event)
        << ", which its neighbour has not reached";
  }
  return diag;
}

LogicalResult PipelinePlay::reportUnmatched() {
  for (auto &[key, ch] : channels) {
    if (ch.sends.size() == ch.recvs.size())
      continue;
    Peer peer = static_cast<Peer>(key.second);
    bool moreSends = ch.sends.size() > ch.recvs.size();
    Operation *extra =
        moreSends ? ch.sends[ch.recvs.size()].op : ch.recvs[ch.sends.size()].op;
    return extra->emitError("stage ")
           << key.first << " sends " << ch.sends.size() << " buffers to "
           << stringifyPeer(peer) << " but stage " << neighbour(key.first, peer)
           << " receives " << ch.recvs.size() << ": this "
           << (moreSends ? "send" : "receive") << " has no partner";
  }
  for (StageCollectives &on : collectives) {
    size_t fewest = on.issued.front().size();
    for (auto &ops : on.issued)
      fewest = std::min(fewest, ops.size());
    for (auto [member, ops] : llvm::enumerate(on.issued))
      if (ops.size() != fewest)
        return ops[fewest].op->emitError("stage ")
               << on.members[member] << " issues " << ops.size()
               << " collectives on the " << stringifyGroup(on.group)
               << " group, another stage " << fewest << ": "
               << whoIssues(on.group) << " the same ones";
  }
  return success();
}

LogicalResult PipelinePlay::run() {
  auto ranks = static_cast<int64_t>(stages.size());
  collectives.push_back({Group::Pipeline,
                         llvm::to_vector(llvm::seq<int64_t>(0, ranks)),
                         SmallVector<SmallVector<Step>>(ranks)});
  collectives.push_back(
      {Group::Embedding, {0, ranks - 1}, SmallVector<SmallVector<Step>>(2)});
  while (true) {
    bool moved = false;
    for (Stage &stage : stages) {
      moved |= advance(stage);
      if (misplaced)
        return failure();
    }
    FailureOr<bool> completedAny = complete();
    if (failed(completedAny))
      return failure();
    if (llvm::all_of(stages, [](const Stage &s) { return s.done(); }))
      return reportUnmatched();
    if (!moved && !*completedAny)
      return reportDeadlock();
  }
}

struct SchedVerifyPipelinePass
    : plan::impl::SchedVerifyPipelineBase<SchedVerifyPipelinePass> {
  /// Each plan's stages, with the ops of each that the play pairs, in one
  /// walk of each program's step; fails at a sched.repeat.
  LogicalResult collectStages(ModuleOp module,
                              llvm::StringMap<SmallVector<Stage>> &byPlan) {
    for (ProgramOp program : module.getOps<ProgramOp>()) {
      std::optional<uint64_t> stage = program.getStage();
      if (!stage)
        continue;
      if (failed(plan::requireNoRepeat(program, getArgument())))
        return failure();
      Stage s{static_cast<int64_t>(*stage), {}, 0};
      // The event each slot event instance (family, micro-batch) stands for.
      SlotEventInstances<EventKey> signalled;
      // Whether each async op (and each one a wait names) is between
      // stages, asked of the op table once per op, not once per run.
      llvm::DenseMap<Operation *, bool> betweenStages;
      auto isBetween = [&](Operation *async) {
        auto [known, added] = betweenStages.try_emplace(async, false);
        if (added)
          known->second = isBetweenStages(async);
        return known->second;
      };
      // `op` of the run `run` (-1 outside a sched.tasks) that adds
      // `iteration` to its body's micro-batch (StepCursor::iteration()).
      auto visit = [&](Operation &op, int64_t run,
                       int64_t iteration) -> LogicalResult {
        // A value of the program, or of the run's own body.
        auto keyOf = [&](Value event) -> EventKey {
          Operation *def = event.getDefiningOp();
          return {event,
                  def && isa<TaskOp>(def->getParentOp()) ? run : int64_t{-1}};
        };
        if (auto signal = dyn_cast<SlotSignalOp>(op))
          return signalled.signal(signal, iteration, keyOf(signal.getEvent()));
        if (auto wait = dyn_cast<WaitOp>(op)) {
          EventKey awaited = keyOf(wait.getEvent());
          if (auto slot = wait.getEvent().getDefiningOp<SlotEventOp>()) {
            FailureOr<EventKey> signalledEvent =
                signalled.lookup(slot, iteration);
            if (failed(signalledEvent))
              return failure();
            awaited = *signalledEvent;
          }
          if (isBetween(awaited.first.getDefiningOp()))
            s.ops.push_back({&op, awaited});
          return success();
        }
        // Only an asynchronous op (one that returns an event) is between
        // stages; the op table is asked about those only.
        if (op.getNumResults() == 1 &&
            isa<EventType>(op.getResult(0).getType()) && isBetween(&op))
          s.ops.push_back({&op, {op.getResult(0), run}});
        return success();
      };
      // The step as sched::StepCursor walks it, but each run of a body
      // visits only the ops of it that the play or the slot event rule
      // looks at (its slot signals, its waits, its asynchronous ops
      // between stages), found once per body; the cursor moves over the
      // others.
      DenseMap<Block *, SmallVector<Operation *>> seenOf;
      auto seen = [&](Block &body) -> ArrayRef<Operation *> {
        auto [it, added] = seenOf.try_emplace(&body);
        if (added)
          for (Operation &op : body)
            if (isa<SlotSignalOp, WaitOp>(op) ||
                (op.getNumResults() == 1 &&
                 isa<EventType>(op.getResult(0).getType()) && isBetween(&op)))
              it->second.push_back(&op);
        return it->second;
      };
      int64_t runs = 0;
      for (StepCursor cursor(program); !cursor.done();) {
        Operation &op = *cursor;
        if (!isa<TaskOp>(op.getParentOp())) {
          if (failed(visit(op, -1, 0)))
            return failure();
          cursor.advance();
          continue;
        }
        // The first op of a run: the run's ops, then on to the next.
        int64_t run = runs++;
        s.runIterations.push_back(cursor.iteration());
        Block &body = *op.getBlock();
        for (Operation *bodyOp : seen(body))
          if (failed(visit(*bodyOp, run, cursor.iteration())))
            return failure();
        cursor.skipRuns(1);
      }
      byPlan[program.getPlan()].push_back(std::move(s));
    }
    return success();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    llvm::StringMap<SmallVector<Stage>> byPlan;
    if (failed(collectStages(module, byPlan)))
      return signalPassFailure();
    bool failedAny = false;
    for (plan::PlanOp plan : module.getOps<plan::PlanOp>()) {
      auto it = byPlan.find(plan.getSymName());
      if (it == byPlan.end())
        continue;
      SmallVector<Stage> &stages = it->second;
      int64_t ranks = plan.getPipelineRanks();
      llvm::sort(stages, [](const Stage &a, const Stage &b) {
        return a.rank < b.rank;
      });
      bool complete = static_cast<int64_t>(stages.size()) == ranks;
      for (auto [index, stage] : llvm::enumerate(stages))
        complete &= stage.rank == static_cast<int64_t>(index);
      if (!complete) {
        plan.emitError("plan '")
            << plan.getSymName() << "' has a pipeline of " << ranks
            << " stages, but its programs are for stages other than 0 to "
            << ranks - 1 << ", one each";
        failedAny = true;
        continue;
      }
      if (failed(PipelinePlay(plan, std::move(stages)).run()))
        failedAny = true;
    }
    if (failedAny)
      signalPassFailure();
  }
};

} // namespace
