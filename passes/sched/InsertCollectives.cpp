//===- InsertCollectives.cpp - Distribute the program per strategy --------===//
//
// Turns sched-lower's single-rank program into the SPMD program of the plan's
// data-parallel strategy (docs/sched.md, "sched-insert-collectives"): shards
// the persistent state, gathers parameters around the spans of compute that
// read them, reduces gradients after the spans that write them, and makes the
// gradient norm global when gradients are sharded.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/sched/SchedOpTable.h"

#include "mlir/IR/Builders.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/SmallVectorExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/CommandLine.h"

#include <limits>
#include <map>
#include <optional>
#include <string>
#include <tuple>

namespace plan {
#define GEN_PASS_DEF_SCHEDINSERTCOLLECTIVES
#include "passes/Passes.h.inc"
} // namespace plan

using namespace mlir;

namespace {

/// Tests only (test/e2e/verify.test): reduces gradients with a sum instead of
/// the mean over the ranks, a lowering bug `plan-run --verify` must catch.
llvm::cl::opt<bool> testSumGradients(
    "plan-test-sum-gradients",
    llvm::cl::desc("Tests only: reduce gradients without averaging (a bug "
                   "plan-run --verify must catch)"),
    llvm::cl::Hidden, llvm::cl::init(false));

/// How the gradient collectives combine the ranks' gradients: their mean.
sched::ReduceOp gradientReduction() {
  return testSumGradients ? sched::ReduceOp::Sum : sched::ReduceOp::Avg;
}

/// A group's persistent state as sched-lower allocates it: what trains
/// (`param`, `grad`, `step`; none when nothing of the group does) and the
/// frozen base of a LoRA run (`frozen`), which is gathered like the
/// parameters and never reduced.
struct GroupState {
  plan::GroupOp group;
  std::string name;
  int64_t paddedNumel = 0;
  int64_t shardNumel = 0;
  int64_t frozenPaddedNumel = 0;
  int64_t frozenShardNumel = 0;
  sched::AllocOp param;
  sched::AllocOp grad;
  sched::AllocOp frozen;
  sched::OptimizerStepOp step;
  // Its units' pipeline chunk (0 without a pipeline); for a replica of
  // another stage's group, the chunk of the units that tie it.
  int64_t chunk = 0;
  bool trains() const { return paddedNumel > 0; }
};

enum class BufferKind { Param, Grad, Frozen };

/// What a compute operand reads or writes: elements [offset, offset + numel)
/// of a group's parameter or gradient buffer.
struct BufferRef {
  unsigned group;
  BufferKind kind;
  int64_t offset;
  int64_t numel;
};

/// The compute ops of one group in one micro-batch and phase, first to last
/// in program order.
struct Span {
  Operation *first = nullptr;
  Operation *last = nullptr;
};

/// A transient buffer of a group (a gathered copy of its parameters, a full
/// gradient) that the compute ops of `spans` use: made ready before `first`
/// and done with after `last`; a gradient's reduction is completed where
/// the work of `site` ends. `ofTheLoop`:
/// a buffer of the program that a pipeline stage's sched.tasks keeps,
/// allocated before the loop and freed after it.
struct BufferSpan {
  Operation *first, *last;
  SmallVector<Span> spans;
  int64_t site;
  bool ofTheLoop = false;
};

/// Where an asynchronous op ends: right before `anchor`, else at the end of
/// `block` (a body of a sched.tasks), else at the end of the program; or,
/// `deferred`, in the body that runs after each run of `site`'s (a body of a
/// sched.tasks), through a slot event.
struct Place {
  Place(Operation *anchor = nullptr) : anchor(anchor) {}
  Operation *anchor;
  Block *block = nullptr;
  bool deferred = false;
  // The body of the op's sched.tasks whose async op this ends; -1 when the
  // program is written out, or for an op of the program itself.
  int64_t site = -1;
  bool operator==(const Place &other) const {
    return anchor == other.anchor && block == other.block &&
           deferred == other.deferred && site == other.site;
  }
};

/// The end of an asynchronous op, placed `at`: wait for `event`, then
/// optionally add `accumulate` into `accumulateInto`, then free `frees`.
struct Completion {
  Place at;
  Value event;
  Value accumulate;
  Value accumulateInto;
  SmallVector<Value> frees;
};

bool isCompute(Operation *op) {
  return isa<sched::ForwardOp, sched::RecomputeOp, sched::BackwardOp>(op);
}

/// sched-lower's sum of a tied weight's gradients over the embedding group
/// (the first pipeline stage's and the last's replica): like the norm and
/// the step, it reads the gradient as the data-parallel ranks reduced it.
bool isTiedGradientSum(Operation *op) {
  auto sum = dyn_cast<sched::AllReduceOp>(op);
  return sum && sum.getGroup() == sched::Group::Embedding;
}

int64_t numelOf(Value buffer) {
  return cast<MemRefType>(buffer.getType()).getNumElements();
}

MemRefType withNumel(Value buffer, int64_t numel) {
  auto type = cast<MemRefType>(buffer.getType());
  return sched::getBufferType(type.getContext(), numel, type.getElementType(),
                              sched::getMemorySpace(type));
}

int64_t microBatchOf(Operation *op) {
  if (auto forward = dyn_cast<sched::ForwardOp>(op))
    return forward.getMicroBatch();
  if (auto recompute = dyn_cast<sched::RecomputeOp>(op))
    return recompute.getMicroBatch();
  return cast<sched::BackwardOp>(op).getMicroBatch();
}

/// An operand of a compute op: the unit's parameters, frozen base or
/// gradients (a view of a group's state of that kind) or activations
/// (`state` empty). `tied` may be either parameters or a frozen base.
struct ComputeOperand {
  Value value;
  StringRef name;
  std::optional<BufferKind> state;
  bool orFrozen = false;
};

SmallVector<ComputeOperand> computeOperands(Operation *op) {
  using Operands = SmallVector<ComputeOperand>;
  return TypeSwitch<Operation *, Operands>(op)
      .Case([](sched::ForwardOp forward) {
        return Operands{{forward.getParams(), "params", BufferKind::Param},
                        {forward.getTied(), "tied", BufferKind::Param, true},
                        {forward.getFrozen(), "frozen", BufferKind::Frozen},
                        {forward.getSaves(), "saves", std::nullopt}};
      })
      .Case([](sched::RecomputeOp recompute) {
        return Operands{{recompute.getParams(), "params", BufferKind::Param},
                        {recompute.getTied(), "tied", BufferKind::Param, true},
                        {recompute.getFrozen(), "frozen", BufferKind::Frozen},
                        {recompute.getInput(), "from", std::nullopt},
                        {recompute.getSaves(), "saves", std::nullopt}};
      })
      .Case([](sched::BackwardOp backward) {
        return Operands{
            {backward.getParams(), "params", BufferKind::Param},
            {backward.getTied(), "tied", BufferKind::Param, true},
            {backward.getFrozen(), "frozen", BufferKind::Frozen},
            {backward.getActivations(), "activations", std::nullopt},
            {backward.getGrads(), "grads", BufferKind::Grad},
            {backward.getTiedGrads(), "tied_grads", BufferKind::Grad}};
      })
      .Default([](Operation *) { return Operands{}; });
}

bool isOptimizerStateRole(sched::BufferRole role) {
  return role == sched::BufferRole::ExpAvg ||
         role == sched::BufferRole::ExpAvgSq ||
         role == sched::BufferRole::Momentum;
}

/// Distributes one sched.program. `analyze` checks that the program is in
/// sched-lower form and finds the state, the spans and the anchors; one
/// `distribute*` function per strategy then rewrites it.
///
/// The spans are per site: a micro-batch of a program written out, or a body
/// of a pipeline stage's sched.tasks (docs/sched.md, "The micro-batch
/// loop"), whose bodies are first split so that all the runs of one are
/// rewritten alike: by whether the next task is a forward (which completes
/// the body's last reductions after its first compute op, through slot
/// events and slots), by the backward whose reductions a forward completes,
/// and for hybrid_shard and grad_sync = last_micro_batch by the step's last
/// micro-batch (whose gradients are also, or only, reduced), and by the
/// step's first micro-batch for shard_grad_op (whose forward gathers the
/// parameters) and for a sharded gradient reduced once a step (whose
/// backward zeroes the full gradient). What lives over the loop (those
/// gathered parameters, that full gradient, zero1's gradient shard that the
/// step reads) is a buffer of the program, allocated before the sched.tasks
/// and freed after it, which the bodies use directly.
class ProgramDistribution {
public:
  explicit ProgramDistribution(sched::ProgramOp program)
      : program(program), builder(program.getContext()),
        eventType(sched::EventType::get(program.getContext())) {}

  LogicalResult analyze();
  LogicalResult run();
  /// The program's sched.tasks, if any: the pass refuses more than one.
  LogicalResult findTasks();

private:
  // Strategies.
  void distributeNoShard();
  void distributeZero1();
  void distributeSharded(bool gatherPerSpan, bool reduceOverReplicas);
  void reduceGradNormOverShards();

  // Building blocks.
  /// Extends the spans of the groups the compute op `op` reads or writes at
  /// `site` (a forward's, else a backward's) to it.
  void addToSpans(Operation *op, int64_t site) {
    bool forward = isa<sched::ForwardOp>(op);
    for (Value operand : op->getOperands()) {
      auto it = refs.find(operand);
      if (it == refs.end())
        continue;
      Span &span =
          (forward ? forwardSpans : backwardSpans)[it->second.group][site];
      if (!span.first)
        span.first = op;
      span.last = op;
    }
  }
  Value viewOf(Value base, int64_t offset, int64_t numel, Operation *before);
  void redirect(unsigned group, BufferKind kind, Operation *first,
                Operation *last, Value base, Operation *viewsBefore);
  void resizeStateToShards(GroupState &state, bool paramsAndGrads);
  Operation *nextUse(Value buffer, Operation *after);
  void emitCompletions();

  // Tasks.
  LogicalResult prepareTasks();
  void splitBodiesForCompletions();
  LogicalResult analyzeSites();
  void defer(const Completion &completion);
  sched::AllocOp moveToSlot(Value buffer);
  void emitDeferred();
  /// Micro-batches, or bodies of the sched.tasks.
  int64_t numSites() const {
    return tasks ? static_cast<int64_t>(sites.size()) : microBatches;
  }
  /// The micro-batch of the site's ops (a body's written one).
  int64_t siteMicroBatch(int64_t site) const {
    return tasks ? sites[site].microBatch : site;
  }
  /// Whether the site is (every run of it is in) the step's last
  /// micro-batch.
  bool isLastSite(int64_t site) const {
    return tasks ? sites[site].last : site == microBatches - 1;
  }
  /// Whether the site is (every run of it is in) the step's first
  /// micro-batch.
  bool isFirstSite(int64_t site) const {
    return tasks ? sites[site].first : site == 0;
  }
  /// shard_grad_op: the parameters are gathered once a step, before their
  /// first forward, and kept until their last backward.
  bool gathersOncePerStep() const {
    return parallel.getSharding() == plan::Sharding::ShardGradOp;
  }
  /// A sharded strategy other than zero1, with grad_sync =
  /// last_micro_batch: its full gradient is zeroed before the step's first
  /// backward and reduce-scattered after its last.
  bool zeroesOncePerStep() const {
    plan::Sharding sharding = parallel.getSharding();
    return !syncsEveryMicroBatch() && sharding != plan::Sharding::NoShard &&
           sharding != plan::Sharding::Zero1;
  }
  /// The site of the step's first (or last) micro-batch where `spans` (a
  /// group's, per site) has ops: in a program written out, that
  /// micro-batch; on a sched.tasks, the body that only it runs
  /// (splitBodiesForCompletions).
  std::optional<int64_t> findEdgeSite(ArrayRef<Span> spans, bool last) const {
    if (!tasks)
      return last ? microBatches - 1 : 0;
    for (int64_t site = 0; site < numSites(); ++site)
      if ((last ? isLastSite(site) : isFirstSite(site)) && spans[site].first)
        return site;
    return std::nullopt;
  }
  /// findEdgeSite where analyzeSites checked that there is one.
  int64_t edgeSite(ArrayRef<Span> spans, bool last) const {
    return *findEdgeSite(spans, last);
  }
  LogicalResult eraseLoweredViews(bool mustBeUnused);

  bool syncsEveryMicroBatch() const {
    return microBatches == 1 ||
           parallel.getGradSync() == plan::GradSync::EveryMicroBatch;
  }

  sched::ProgramOp program;
  OpBuilder builder;
  Type eventType;
  plan::PlanOp plan;
  plan::ParallelAttr parallel;
  int64_t microBatches = 1;
  // Which micro-batches the program has: all, unless sched-lower left the
  // middle ones after micro-batch 2 to sched-roll-micro-batches.
  SmallVector<bool> lowered;
  SmallVector<GroupState> groups;
  DenseMap<Value, BufferRef> refs;
  SmallVector<sched::ViewOp> loweredViews;
  // [group][micro-batch]
  SmallVector<SmallVector<Span>> forwardSpans, backwardSpans;
  // Per micro-batch: where work that must finish before the next micro-batch
  // (or, for the last one, before the optimizer section) is placed.
  // Per (pipeline chunk, micro-batch): the op after the chunk's last
  // backward of the micro-batch (without a pipeline, of the micro-batch's
  // last backward), where its groups' gradient reductions complete. A
  // pipeline stage runs one chunk's backwards of a micro-batch together, but
  // its other chunks' may come between two micro-batches of one chunk.
  DenseMap<std::pair<int64_t, int64_t>, Operation *> afterBackward;
  Place afterBackwardOf(const GroupState &state, int64_t site) {
    if (tasks)
      return sites[site].afterBackward;
    return afterBackward.lookup({state.chunk, site});
  }

  sched::TasksOp tasks;
  /// A body of the sched.tasks.
  struct Site {
    sched::TaskOp task;
    int64_t microBatch = 0;
    bool first = false, last = false;
    // Where its backward's reductions complete.
    Place afterBackward;
    // The body whose last reductions a run of this one completes, and the
    // micro-batch of that body's run less this one's; -1 when none.
    int64_t completes = -1, shift = 0;
    // Where they complete: after its first compute op.
    Place afterFirstCompute;
  };
  SmallVector<Site> sites;
  /// A deferred completion: the slot event family its event signals, and
  /// the slot buffer of what it accumulates.
  struct Deferred {
    int64_t family;
    Value accumulate;
    Value accumulateInto;
  };
  DenseMap<int64_t, SmallVector<Deferred>> deferred;
  int64_t families = 0;
  llvm::StringMap<int64_t> familyOf;
  llvm::StringMap<sched::AllocOp> slotBuffers;
  DenseMap<std::tuple<Value, int64_t, int64_t>, Value> views;
  SmallVector<Completion> completions;
};

LogicalResult ProgramDistribution::analyze() {
  // A verified program names its plan (ProgramOp::verifySymbolUses).
  plan = program.getPlanOp();
  parallel = program.getParallel();
  microBatches = program.getMicroBatches();
  Block &body = program.getBody().front();

  // sched-lower's own: a pipeline's sum of its stages' gradient norms.
  // The compute ops, in program order (a sched.tasks' body by body).
  SmallVector<Operation *> computeOps;
  WalkResult walked = body.walk([&](Operation *op) {
    if (sched::isCollective(op) && !sched::isPipelineCollective(op)) {
      op->emitOpError("program already has collectives: "
                      "sched-insert-collectives expects the "
                      "single-rank program of sched-lower");
      return WalkResult::interrupt();
    }
    if (isCompute(op))
      computeOps.push_back(op);
    return WalkResult::advance();
  });
  if (walked.wasInterrupted())
    return failure();

  // The group's state, found by name and role: a pipeline stage's program
  // holds its chunks' groups.
  for (plan::GroupOp group : plan.getBody().getOps<plan::GroupOp>()) {
    if (!program.holdsGroup(group))
      continue;
    GroupState state;
    state.group = group;
    state.name = group.getSymName().str();
    if (!group.getPaddedNumel() || !group.getShardNumel())
      return group.emitOpError("has no padded_numel / shard_numel: run "
                               "plan-assign-sharding first");
    state.paddedNumel = *group.getPaddedNumel();
    state.shardNumel = *group.getShardNumel();
    state.frozenPaddedNumel = group.getFrozenPaddedNumel().value_or(0);
    state.frozenShardNumel = group.getFrozenShardNumel().value_or(0);
    if (auto units = group.getUnits().getAsRange<FlatSymbolRefAttr>();
        !units.empty())
      if (plan::UnitOp unit = plan.lookupUnit((*units.begin()).getValue()))
        state.chunk = static_cast<int64_t>(unit.getStage().value_or(0));
    groups.push_back(state);
  }
  if (groups.empty())
    return program.emitOpError("plan '")
           << plan.getSymName() << "' has no plan.group: run plan-wrap-units";

  bool sharded = parallel.getSharding() != plan::Sharding::NoShard;
  int64_t shards = program.getGroupSize(sched::Group::Shard);
  for (GroupState &state : groups) {
    if (sharded && state.shardNumel * shards != state.paddedNumel)
      return state.group.emitOpError("shard_numel ")
             << state.shardNumel << " times the " << shards
             << " ranks of the shard group is not padded_numel "
             << state.paddedNumel;
    if (sharded && state.frozenShardNumel * shards != state.frozenPaddedNumel)
      return state.group.emitOpError("frozen_shard_numel ")
             << state.frozenShardNumel << " times the " << shards
             << " ranks of the shard group is not frozen_padded_numel "
             << state.frozenPaddedNumel;
  }

  llvm::StringMap<sched::AllocOp> allocsByName;
  for (auto alloc : body.getOps<sched::AllocOp>())
    allocsByName.try_emplace(alloc.getName(), alloc);
  auto findState = [&](GroupState &state, StringRef suffix,
                       sched::BufferRole role) -> sched::AllocOp {
    std::string name = state.name + suffix.str();
    sched::AllocOp alloc = allocsByName.lookup(name);
    if (alloc && (alloc.getRole() != role || !alloc.getPersistent())) {
      alloc.emitOpError("'") << name << "' must be a persistent buffer of role "
                             << sched::stringifyBufferRole(role);
      return {};
    }
    bool frozen = role == sched::BufferRole::Frozen;
    int64_t padded = frozen ? state.frozenPaddedNumel : state.paddedNumel;
    if (alloc && numelOf(alloc) != padded) {
      alloc.emitOpError("'")
          << name << "' has " << numelOf(alloc) << " elements, the group's "
          << (frozen ? "frozen_padded_numel" : "padded_numel") << " is "
          << padded;
      return {};
    }
    if (alloc)
      return alloc;
    program.emitOpError("has no persistent '")
        << name << "' buffer (role " << sched::stringifyBufferRole(role)
        << "): not the single-rank program of sched-lower";
    return {};
  };
  for (GroupState &state : groups) {
    if (state.frozenPaddedNumel) {
      state.frozen = findState(state, ".frozen", sched::BufferRole::Frozen);
      if (!state.frozen)
        return failure();
    }
    if (!state.trains())
      continue;
    state.param = findState(state, ".param", sched::BufferRole::Param);
    if (!state.param)
      return failure();
    state.grad = findState(state, ".grad", sched::BufferRole::Grad);
    if (!state.grad)
      return failure();
  }

  // One optimizer step per group, on the group's own state.
  for (auto step : body.getOps<sched::OptimizerStepOp>()) {
    StringRef groupName = step.getGroup().getLeafReference().getValue();
    auto *state = llvm::find_if(
        groups, [&](GroupState &s) { return s.name == groupName; });
    if (state == groups.end())
      return step.emitOpError("steps '")
             << groupName << "', which is not a group of the plan";
    if (state->step)
      return step.emitOpError("is the second step of group '")
             << groupName << "'";
    if (!state->trains())
      return step.emitOpError("steps group '")
             << groupName << "', which has nothing that trains";
    if (step.getParams() != state->param.getResult() ||
        step.getGrads() != state->grad.getResult())
      return step.emitOpError("must step '")
             << groupName << ".param' with '" << groupName << ".grad'";
    for (Value s : step.getState()) {
      auto alloc = s.getDefiningOp<sched::AllocOp>();
      if (!alloc || !alloc.getPersistent() ||
          !isOptimizerStateRole(alloc.getRole()))
        return step.emitOpError("optimizer state must be persistent buffers "
                                "of role exp_avg, exp_avg_sq or momentum");
      for (Operation *user : s.getUsers())
        if (user != step)
          return user->emitOpError("uses optimizer state of group '")
                 << groupName << "' outside its optimizer_step";
    }
    state->step = step;
  }
  for (GroupState &state : groups)
    if (state.trains() && !state.step)
      return program.emitOpError("has no sched.optimizer_step for group '")
             << state.name << "'";

  // The per-unit views of the state, and what else may touch the state.
  for (auto [index, state] : llvm::enumerate(groups)) {
    for (auto [alloc, kind] : {std::pair(state.param, BufferKind::Param),
                               std::pair(state.grad, BufferKind::Grad),
                               std::pair(state.frozen, BufferKind::Frozen)}) {
      if (!alloc)
        continue;
      refs[alloc] = {unsigned(index), kind, 0, numelOf(alloc)};
      for (Operation *user : alloc->getUsers()) {
        if (auto view = dyn_cast<sched::ViewOp>(user)) {
          refs[view] = {unsigned(index), kind, int64_t(view.getOffset()),
                        numelOf(view)};
          loweredViews.push_back(view);
          for (Operation *viewUser : view->getUsers())
            if (!isCompute(viewUser))
              return viewUser->emitOpError("uses a unit view of '")
                     << alloc.getName()
                     << "'; only forward, recompute and backward may";
          continue;
        }
        if (isCompute(user) || isa<sched::ZeroOp, sched::OptimizerStepOp>(user))
          continue;
        if (kind == BufferKind::Grad &&
            (isa<sched::GradNormOp>(user) || isTiedGradientSum(user)))
          continue;
        return user->emitOpError("uses '")
               << alloc.getName()
               << "' in a way sched-insert-collectives cannot distribute";
      }
    }
  }

  // Compute reads parameters only through the groups' parameter buffers and
  // writes gradients only into their gradient buffers, so redirecting those
  // operands moves every access.
  for (Operation *computeOp : computeOps) {
    Operation &op = *computeOp;
    for (const ComputeOperand &operand : computeOperands(&op)) {
      if (!operand.value)
        continue;
      auto it = refs.find(operand.value);
      if (!operand.state && it != refs.end())
        return op.emitOpError("'")
               << operand.name
               << "' must be an activation buffer, not a group's state";
      auto suffixOf = [](BufferKind kind) {
        return kind == BufferKind::Param  ? ".param"
               : kind == BufferKind::Grad ? ".grad"
                                          : ".frozen";
      };
      if (operand.state &&
          (it == refs.end() ||
           (it->second.kind != *operand.state &&
            !(operand.orFrozen && it->second.kind == BufferKind::Frozen))))
        return op.emitOpError("'")
               << operand.name << "' must be a unit view of a group's '"
               << suffixOf(*operand.state)
               << (operand.orFrozen ? "' or '.frozen" : "")
               << "' buffer, as sched-lower makes it";
    }
  }

  if (tasks && failed(prepareTasks()))
    return failure();
  if (tasks)
    return analyzeSites();

  // Spans: the compute ops of each group per micro-batch and phase.
  forwardSpans.assign(groups.size(), SmallVector<Span>(microBatches));
  backwardSpans.assign(groups.size(), SmallVector<Span>(microBatches));
  SmallVector<Operation *> lastBackward(microBatches, nullptr);
  DenseMap<std::pair<int64_t, int64_t>, Operation *> lastChunkBackward;
  SymbolTableCollection symbolTables;
  for (Operation &op : body) {
    if (!isCompute(&op))
      continue;
    int64_t mb = microBatchOf(&op);
    if (mb < 0 || mb >= microBatches)
      return op.emitOpError("micro-batch ") << mb << " is out of range";
    if (auto backward = dyn_cast<sched::BackwardOp>(op)) {
      lastBackward[mb] = &op;
      plan::UnitOp unit = backward.getUnitOp(symbolTables);
      int64_t chunk =
          unit ? static_cast<int64_t>(unit.getStage().value_or(0)) : 0;
      lastChunkBackward[{chunk, mb}] = &op;
    }
    addToSpans(&op, mb);
  }
  // A replica of another stage's group (a tied input embedding's, on the
  // last stage) is in the chunk of the units that read it.
  for (auto [index, state] : llvm::enumerate(groups)) {
    auto units = state.group.getUnits().getAsRange<FlatSymbolRefAttr>();
    plan::UnitOp first = units.empty()
                             ? plan::UnitOp()
                             : plan.lookupUnit((*units.begin()).getValue());
    Operation *reader = backwardSpans[index].front().first;
    if (!first || program.runsUnit(first) || !reader)
      continue;
    if (plan::UnitOp unit =
            cast<sched::BackwardOp>(reader).getUnitOp(symbolTables))
      state.chunk = static_cast<int64_t>(unit.getStage().value_or(0));
  }
  bool partial = program->hasAttr(sched::kPartialMicroBatchesAttr);
  lowered.assign(microBatches, true);
  for (int64_t mb = 0; mb < microBatches; ++mb) {
    if (!lastBackward[mb] && partial) {
      lowered[mb] = false;
      continue;
    }
    if (!lastBackward[mb])
      return program.emitOpError("has no backward for micro-batch ") << mb;
    for (GroupState &state : groups) {
      unsigned index = &state - groups.begin();
      if (!forwardSpans[index][mb].first || !backwardSpans[index][mb].first)
        return program.emitOpError("group '")
               << state.name
               << "' has no forward or no backward in micro-batch " << mb;
    }
  }
  // The reduced gradients are made after the last backward; what reads them
  // must come later.
  Operation *finalBackward = lastBackward[microBatches - 1];
  for (Operation &op : body)
    if ((isa<sched::GradNormOp, sched::OptimizerStepOp>(op) ||
         isTiedGradientSum(&op)) &&
        op.isBeforeInBlock(finalBackward))
      return op.emitOpError("must follow the last backward of the step");
  for (auto [key, last] : lastChunkBackward) {
    Operation *anchor = last->getNextNode();
    while (anchor && isa<sched::FreeOp>(anchor))
      anchor = anchor->getNextNode();
    // A pipeline stage goes on with another task. When that is a forward
    // (of another micro-batch or chunk), which reduces no gradient, the
    // reductions complete after its first compute op, which they overlap,
    // instead of holding the stage at the task's end. A backward next (the
    // cool-down's, or GPipe's) may reduce into the same gradients: their
    // reductions must not overlap, so they complete here.
    if (program.getStage())
      for (Operation *op = anchor; op; op = op->getNextNode())
        if (isCompute(op)) {
          if (isa<sched::ForwardOp>(op))
            anchor = op->getNextNode();
          break;
        }
    afterBackward[key] = anchor;
  }
  return success();
}

LogicalResult ProgramDistribution::run() {
  switch (parallel.getSharding()) {
  case plan::Sharding::NoShard:
    distributeNoShard();
    break;
  case plan::Sharding::Zero1:
    distributeZero1();
    reduceGradNormOverShards();
    break;
  case plan::Sharding::ShardGradOp:
    distributeSharded(/*gatherPerSpan=*/false, /*reduceOverReplicas=*/false);
    reduceGradNormOverShards();
    break;
  case plan::Sharding::FullShard:
    distributeSharded(/*gatherPerSpan=*/true, /*reduceOverReplicas=*/false);
    reduceGradNormOverShards();
    break;
  case plan::Sharding::HybridShard:
    distributeSharded(/*gatherPerSpan=*/true, /*reduceOverReplicas=*/true);
    reduceGradNormOverShards();
    break;
  }
  emitCompletions();
  bool viewsReplaced = parallel.getSharding() != plan::Sharding::NoShard &&
                       parallel.getSharding() != plan::Sharding::Zero1;
  return eraseLoweredViews(viewsReplaced);
}

//===----------------------------------------------------------------------===//
// Strategies
//===----------------------------------------------------------------------===//

// DDP: full state everywhere; gradients all-reduced over every rank, once
// after the last micro-batch (no_sync) or once per micro-batch through a
// transient buffer accumulated into the persistent gradient.
void ProgramDistribution::distributeNoShard() {
  Location loc = program.getLoc();
  for (auto [index, state] : llvm::enumerate(groups)) {
    if (!state.trains())
      continue;
    if (syncsEveryMicroBatch() && microBatches > 1) {
      for (int64_t mb = 0; mb < numSites(); ++mb) {
        Span span = backwardSpans[index][mb];
        // A body of another chunk or a forward one.
        if (!lowered[mb] || !span.first)
          continue;
        builder.setInsertionPoint(span.first);
        Value microBatchGrad = sched::AllocOp::create(
            builder, loc, state.grad.getType(),
            (state.name + ".grad.mb" + Twine(siteMicroBatch(mb))).str(),
            sched::BufferRole::UnshardedGrad, /*persistent=*/false,
            /*offset=*/IntegerAttr());
        sched::ZeroOp::create(builder, loc, microBatchGrad);
        redirect(index, BufferKind::Grad, span.first, span.last, microBatchGrad,
                 span.first);
        builder.setInsertionPointAfter(span.last);
        Value done = sched::AllReduceOp::create(
            builder, loc, eventType, microBatchGrad, sched::Group::World,
            gradientReduction(), ValueRange());
        completions.push_back({afterBackwardOf(state, mb),
                               done,
                               microBatchGrad,
                               state.grad,
                               {microBatchGrad}});
      }
      continue;
    }
    // After the group's backward of the last micro-batch: a site of its
    // own (a body the last micro-batch alone runs, splitBodiesForCompletions).
    for (int64_t site = 0; site < numSites(); ++site) {
      Span span = backwardSpans[index][site];
      if (!lowered[site] || !span.first || !isLastSite(site))
        continue;
      builder.setInsertionPointAfter(span.last);
      Value done = sched::AllReduceOp::create(
          builder, loc, eventType, state.grad, sched::Group::World,
          gradientReduction(), ValueRange());
      completions.push_back(
          {afterBackwardOf(state, site), done, Value(), Value(), {}});
    }
  }
}

// ZeRO-1/2 (DeepSpeed's stages 1 and 2): full parameters, sharded optimizer
// state. Each rank steps its shard of the parameters and the updated shards
// are all-gathered back into the full parameters. Gradients follow
// grad_sync: with every_micro_batch (also with one micro-batch) each
// micro-batch's gradient goes through a transient full buffer that is
// reduce-scattered into the persistent gradient, which is then a shard
// (stage 2); with last_micro_batch the full gradient accumulates locally
// over the micro-batches and is reduce-scattered once (stage 1: more memory,
// less traffic).
void ProgramDistribution::distributeZero1() {
  Location loc = program.getLoc();
  bool shardedAccumulation = syncsEveryMicroBatch();
  for (auto [index, state] : llvm::enumerate(groups)) {
    if (!state.trains())
      continue;
    resizeStateToShards(state, /*paramsAndGrads=*/false);
    Value gradShard;
    if (shardedAccumulation) {
      state.grad.getResult().setType(withNumel(state.grad, state.shardNumel));
      gradShard = state.grad;
      for (int64_t mb = 0; mb < numSites(); ++mb) {
        Span span = backwardSpans[index][mb];
        if (!lowered[mb] || !span.first)
          continue;
        builder.setInsertionPoint(span.first);
        Value fullGrad = sched::AllocOp::create(
            builder, loc, withNumel(state.grad, state.paddedNumel),
            (state.name + ".grad.mb" + Twine(siteMicroBatch(mb))).str(),
            sched::BufferRole::UnshardedGrad, /*persistent=*/false,
            /*offset=*/IntegerAttr());
        sched::ZeroOp::create(builder, loc, fullGrad);
        redirect(index, BufferKind::Grad, span.first, span.last, fullGrad,
                 span.first);
        builder.setInsertionPointAfter(span.last);
        Value scattered = sched::ReduceScatterOp::create(
            builder, loc, eventType, fullGrad, state.grad, sched::Group::Shard,
            gradientReduction(), /*accumulate=*/true, ValueRange());
        completions.push_back({afterBackwardOf(state, mb),
                               scattered,
                               Value(),
                               Value(),
                               {fullGrad}});
      }
    } else {
      // On a sched.tasks the shard, which the step reads, is a buffer of the
      // program allocated before the loop.
      int64_t site = edgeSite(backwardSpans[index], /*last=*/true);
      Operation *last = backwardSpans[index][site].last;
      if (tasks)
        builder.setInsertionPoint(tasks);
      else
        builder.setInsertionPointAfter(last);
      gradShard = sched::AllocOp::create(
          builder, loc, withNumel(state.grad, state.shardNumel),
          state.name + ".grad.shard", sched::BufferRole::Grad,
          /*persistent=*/false, /*offset=*/IntegerAttr());
      if (tasks)
        builder.setInsertionPointAfter(last);
      Value reduced = sched::ReduceScatterOp::create(
          builder, loc, eventType, state.grad, gradShard, sched::Group::Shard,
          gradientReduction(), /*accumulate=*/false, ValueRange());
      completions.push_back(
          {afterBackwardOf(state, site), reduced, Value(), Value(), {}});
      for (Operation *user :
           llvm::make_early_inc_range(state.grad->getUsers())) {
        if (auto norm = dyn_cast<sched::GradNormOp>(user))
          norm.getGradsMutable().assign(gradShard);
        if (isTiedGradientSum(user))
          cast<sched::AllReduceOp>(user).getBufferMutable().assign(gradShard);
      }
    }

    builder.setInsertionPoint(state.step);
    Value paramShard = sched::ShardViewOp::create(
        builder, loc, withNumel(state.param, state.shardNumel), state.param,
        sched::Group::Shard);
    state.step.getParamsMutable().assign(paramShard);
    state.step.getGradsMutable().assign(gradShard);

    builder.setInsertionPointAfter(state.step);
    if (!shardedAccumulation)
      sched::FreeOp::create(builder, loc, gradShard);
    Value gathered = sched::AllGatherOp::create(
        builder, loc, eventType, paramShard, state.param, sched::Group::Shard,
        ValueRange());
    completions.push_back({nullptr, gathered, Value(), Value(), {}});
  }
}

// ZeRO-2 / ZeRO-3 / HSDP: parameters, gradients and optimizer state are
// shards. Parameters are all-gathered into a transient buffer for the whole
// step (shard_grad_op) or for each forward and backward span (full_shard,
// hybrid_shard); each gradient span adds into a transient full gradient that
// is reduce-scattered into the persistent shard.
void ProgramDistribution::distributeSharded(bool gatherPerSpan,
                                            bool reduceOverReplicas) {
  Location loc = program.getLoc();
  for (auto [index, state] : llvm::enumerate(groups)) {
    resizeStateToShards(state, /*paramsAndGrads=*/true);

    // Gradients first, so that a span's gathered parameters are freed before
    // its gradients are reduced (FSDP reshards, then reduce-scatters).
    // A full gradient: zeroed before `first`, added into by the compute ops
    // of `spans`, reduce-scattered after `last`, whose site completes it.
    // Reduced once a step on a sched.tasks, it is a buffer of the program
    // that the loop keeps.
    SmallVector<BufferSpan> gradSpans;
    ArrayRef<Span> backward = backwardSpans[index];
    if (!state.trains()) {
      // A frozen base alone: nothing to reduce.
    } else if (syncsEveryMicroBatch()) {
      for (int64_t mb = 0; mb < numSites(); ++mb)
        if (lowered[mb] && backward[mb].first)
          gradSpans.push_back(
              {backward[mb].first, backward[mb].last, {backward[mb]}, mb});
    } else if (!tasks) {
      gradSpans.push_back(
          {backward[0].first,
           backward[microBatches - 1].last,
           {{backward[0].first, backward[microBatches - 1].last}},
           microBatches - 1});
    } else {
      int64_t first = edgeSite(backward, /*last=*/false);
      int64_t last = edgeSite(backward, /*last=*/true);
      BufferSpan &whole = gradSpans.emplace_back(BufferSpan{
          backward[first].first, backward[last].last, {}, last, true});
      for (const Span &span : backward)
        if (span.first)
          whole.spans.push_back(span);
    }
    for (const BufferSpan &grad : gradSpans) {
      Operation *viewsBefore = grad.ofTheLoop ? tasks : grad.first;
      builder.setInsertionPoint(viewsBefore);
      Value fullGrad = sched::AllocOp::create(
          builder, loc, withNumel(state.grad, state.paddedNumel),
          state.name + ".grad.full", sched::BufferRole::UnshardedGrad,
          /*persistent=*/false,
          /*offset=*/IntegerAttr());
      builder.setInsertionPoint(grad.first);
      sched::ZeroOp::create(builder, loc, fullGrad);
      for (const Span &span : grad.spans)
        redirect(index, BufferKind::Grad, span.first, span.last, fullGrad,
                 viewsBefore);
      builder.setInsertionPointAfter(grad.last);
      Value scattered = sched::ReduceScatterOp::create(
          builder, loc, eventType, fullGrad, state.grad, sched::Group::Shard,
          gradientReduction(), /*accumulate=*/true, ValueRange());
      completions.push_back(
          {afterBackwardOf(state, grad.site), scattered, Value(), Value(), {}});
      if (!grad.ofTheLoop)
        completions.back().frees.push_back(fullGrad);
      if (reduceOverReplicas && isLastSite(grad.site)) {
        Value replicated = sched::AllReduceOp::create(
            builder, loc, eventType, state.grad, sched::Group::Replicate,
            gradientReduction(), ValueRange{scattered});
        completions.push_back({afterBackwardOf(state, grad.site),
                               replicated,
                               Value(),
                               Value(),
                               {}});
      }
      if (grad.ofTheLoop) {
        builder.setInsertionPointAfter(tasks);
        sched::FreeOp::create(builder, loc, fullGrad);
      }
    }

    // Gathered parameters: gathered before `first` for the compute ops of
    // `spans`, freed after `last`. shard_grad_op's, gathered once a step, are
    // on a sched.tasks a buffer of the program that the loop keeps, gathered
    // by the body that only the step's first micro-batch runs.
    SmallVector<BufferSpan> paramSpans;
    ArrayRef<Span> forward = forwardSpans[index];
    if (gatherPerSpan) {
      for (int64_t mb = 0; mb < numSites(); ++mb) {
        if (!lowered[mb])
          continue;
        for (const Span &span : {forward[mb], backward[mb]})
          if (span.first)
            paramSpans.push_back({span.first, span.last, {span}, mb});
      }
    } else if (!tasks) {
      Span step{forward[0].first, backward[microBatches - 1].last};
      paramSpans.push_back({step.first, step.last, {step}, 0});
    } else {
      int64_t first = edgeSite(forward, /*last=*/false);
      BufferSpan &whole = paramSpans.emplace_back(
          BufferSpan{forward[first].first, nullptr, {}, first, true});
      for (ArrayRef<Span> spans : {forward, backward})
        for (const Span &span : spans)
          if (span.first)
            whole.spans.push_back(span);
    }
    // The frozen base is gathered alongside, in its own buffer, and never
    // reduced.
    for (const BufferSpan &params : paramSpans) {
      for (auto [shard, padded, kind, suffix] :
           {std::tuple(state.param, state.paddedNumel, BufferKind::Param,
                       ".gathered"),
            std::tuple(state.frozen, state.frozenPaddedNumel,
                       BufferKind::Frozen, ".frozen.gathered")}) {
        if (!shard)
          continue;
        builder.setInsertionPoint(params.ofTheLoop ? tasks : params.first);
        Value gathered = sched::AllocOp::create(
            builder, loc, withNumel(shard, padded), state.name + suffix,
            sched::BufferRole::Gathered,
            /*persistent=*/false, /*offset=*/IntegerAttr());
        builder.setInsertionPoint(params.first);
        Value done =
            sched::AllGatherOp::create(builder, loc, eventType, shard, gathered,
                                       sched::Group::Shard, ValueRange());
        auto wait = sched::WaitOp::create(builder, loc, done);
        for (const Span &span : params.spans)
          redirect(index, kind, span.first, span.last, gathered,
                   params.ofTheLoop ? tasks.getOperation() : wait);
        if (params.ofTheLoop)
          builder.setInsertionPointAfter(tasks);
        else
          builder.setInsertionPointAfter(params.last);
        sched::FreeOp::create(builder, loc, gathered);
      }
    }
  }
}

// With sharded gradients each rank's grad_norm covers its shard; the global
// sum of squares is the sum over the shard group.
void ProgramDistribution::reduceGradNormOverShards() {
  Location loc = program.getLoc();
  Block &body = program.getBody().front();
  SmallVector<Value> norms;
  DenseMap<Value, sched::GradNormOp> lastNorm;
  for (auto gradNorm : body.getOps<sched::GradNormOp>()) {
    Value norm = gradNorm.getNorm();
    if (!lastNorm.count(norm))
      norms.push_back(norm);
    lastNorm[norm] = gradNorm;
  }
  for (Value norm : norms) {
    builder.setInsertionPointAfter(lastNorm[norm]);
    Value reduced = sched::AllReduceOp::create(
        builder, loc, eventType, norm, sched::Group::Shard,
        sched::ReduceOp::Sum, ValueRange());
    completions.push_back({nextUse(norm, reduced.getDefiningOp()),
                           reduced,
                           Value(),
                           Value(),
                           {}});
  }
}

//===----------------------------------------------------------------------===//
// Building blocks
//===----------------------------------------------------------------------===//

Value ProgramDistribution::viewOf(Value base, int64_t offset, int64_t numel,
                                  Operation *before) {
  auto key = std::make_tuple(base, offset, numel);
  if (Value existing = views.lookup(key))
    return existing;
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPoint(before);
  Value view =
      sched::ViewOp::create(builder, base.getLoc(), withNumel(base, numel),
                            base, builder.getI64IntegerAttr(offset));
  views[key] = view;
  return view;
}

/// Makes the compute ops from `first` to `last` read (or write) `base`
/// instead of the group's persistent buffer of `kind`, through views of the
/// same offsets created right before `viewsBefore`.
void ProgramDistribution::redirect(unsigned group, BufferKind kind,
                                   Operation *first, Operation *last,
                                   Value base, Operation *viewsBefore) {
  for (Operation *op = first;; op = op->getNextNode()) {
    if (isCompute(op)) {
      for (OpOperand &operand : op->getOpOperands()) {
        auto it = refs.find(operand.get());
        if (it == refs.end() || it->second.group != group ||
            it->second.kind != kind)
          continue;
        operand.set(
            viewOf(base, it->second.offset, it->second.numel, viewsBefore));
      }
    }
    if (op == last)
      break;
  }
}

void ProgramDistribution::resizeStateToShards(GroupState &state,
                                              bool paramsAndGrads) {
  if (paramsAndGrads && state.frozen)
    state.frozen.getResult().setType(
        withNumel(state.frozen, state.frozenShardNumel));
  if (!state.trains())
    return;
  SmallVector<Value> buffers(state.step.getState());
  if (paramsAndGrads) {
    buffers.push_back(state.param);
    buffers.push_back(state.grad);
  }
  for (Value buffer : buffers)
    buffer.setType(withNumel(buffer, state.shardNumel));
}

/// The first op after `after` that uses `buffer`; null if none does.
Operation *ProgramDistribution::nextUse(Value buffer, Operation *after) {
  for (Operation *op = after->getNextNode(); op; op = op->getNextNode())
    if (llvm::is_contained(op->getOperands(), buffer))
      return op;
  return nullptr;
}

/// Places the waits (and what follows them) in the order their async ops
/// were issued, so the compute stream waits for the oldest first.
void ProgramDistribution::emitCompletions() {
  // In issue order; a body's before another's, and both before the
  // program's own (after the sched.tasks).
  auto siteOrder = [](const Completion &c) {
    return c.at.site < 0 ? std::numeric_limits<int64_t>::max() : c.at.site;
  };
  llvm::stable_sort(completions, [&](const Completion &a, const Completion &b) {
    Operation *x = a.event.getDefiningOp(), *y = b.event.getDefiningOp();
    if (x->getBlock() == y->getBlock())
      return x->isBeforeInBlock(y);
    return siteOrder(a) < siteOrder(b);
  });
  Block &body = program.getBody().front();
  Location loc = program.getLoc();
  for (auto [index, completion] : llvm::enumerate(completions)) {
    // A sharded reduction issued during backward is waited (and its
    // transient buffers freed: the full gradient, and the fp32 staging copy
    // sched-insert-casts adds around it) right before the next reduction of
    // the same stretch is issued: it overlaps the next group's backward
    // compute, and one group's reduction is in flight instead of every
    // group's until the end of the micro-batch. The next reduction is the
    // next one that does not wait for this one (hybrid_shard's replica
    // all-reduce follows its reduce-scatter). DDP keeps its all-reduces in
    // flight together: its gradients are persistent, and its buckets are
    // sized to be reduced concurrently.
    Operation *next = nullptr;
    for (size_t later = index + 1;
         later < completions.size() && completions[later].at == completion.at &&
         !next;
         ++later) {
      Operation *op = completions[later].event.getDefiningOp();
      if (!llvm::is_contained(op->getOperands(), completion.event))
        next = op;
    }
    const Place &at = completion.at;
    if ((at.anchor || at.block || at.deferred) && next &&
        parallel.getSharding() != plan::Sharding::NoShard) {
      builder.setInsertionPoint(next);
    } else if (at.deferred) {
      defer(completion);
      continue;
    } else if (at.anchor) {
      builder.setInsertionPoint(at.anchor);
    } else {
      builder.setInsertionPointToEnd(at.block ? at.block : &body);
    }
    sched::WaitOp::create(builder, loc, completion.event);
    if (completion.accumulate)
      sched::AccumulateOp::create(builder, loc, completion.accumulate,
                                  completion.accumulateInto);
    for (Value buffer : completion.frees)
      sched::FreeOp::create(builder, loc, buffer);
  }
  if (tasks)
    emitDeferred();
}

//===----------------------------------------------------------------------===//
// Tasks
//===----------------------------------------------------------------------===//

LogicalResult ProgramDistribution::findTasks() {
  for (Operation &op : program.getBody().front()) {
    if (isa<sched::RepeatOp>(op) || (tasks && isa<sched::TasksOp>(op)))
      return sched::requireUnrolled(op, "sched-insert-collectives");
    if (auto found = dyn_cast<sched::TasksOp>(op))
      tasks = found;
  }
  return success();
}

LogicalResult ProgramDistribution::prepareTasks() {
  Block &body = program.getBody().front();
  for (Operation &op : body) {
    if (isCompute(&op))
      return op.emitOpError(
          "is outside the program's sched.tasks, which runs its micro-batches");
    if ((isa<sched::GradNormOp, sched::OptimizerStepOp>(op) ||
         isTiedGradientSum(&op)) &&
        op.isBeforeInBlock(tasks))
      return op.emitOpError("must follow the last backward of the step");
  }
  // One micro-batch runs no loop: it is written out.
  if (microBatches == 1) {
    if (failed(plan::unrollTasks(tasks)))
      return failure();
    tasks = {};
    return success();
  }
  splitBodiesForCompletions();
  return success();
}

static bool isBackwardBody(sched::TaskOp task) {
  return llvm::any_of(task.getBody().front(),
                      [](Operation &op) { return isa<sched::BackwardOp>(op); });
}

void ProgramDistribution::splitBodiesForCompletions() {
  auto entries = static_cast<int64_t>(tasks.getOrder().size() / 2);
  auto bodyOf = [&](int64_t entry) { return tasks.getOrder()[2 * entry]; };
  auto microBatchOf = [&](int64_t entry) {
    return tasks.getOrder()[2 * entry + 1];
  };
  auto backwardBodies = [&] {
    return llvm::map_to_vector(tasks.getTasks(), isBackwardBody);
  };
  // A backward whose next task is a forward leaves its last reductions (if
  // it has any: with grad_sync = last_micro_batch only the last micro-batch
  // reduces) to it; hybrid_shard's last micro-batch also reduces over the
  // replicas.
  SmallVector<bool> backward = backwardBodies();
  auto defers = [&](int64_t entry) {
    return backward[bodyOf(entry)] && entry + 1 < entries &&
           !backward[bodyOf(entry + 1)] &&
           (syncsEveryMicroBatch() || microBatchOf(entry) == microBatches - 1);
  };
  bool lastApart = parallel.getSharding() == plan::Sharding::HybridShard ||
                   !syncsEveryMicroBatch();
  SmallVector<int64_t> keys(entries, 0);
  for (int64_t entry = 0; entry < entries; ++entry) {
    if (backward[bodyOf(entry)])
      keys[entry] =
          int64_t(defers(entry)) |
          int64_t(lastApart && microBatchOf(entry) == microBatches - 1) << 1;
    else if (gathersOncePerStep() && microBatchOf(entry) == 0)
      keys[entry] = 1; // the forward that gathers its chunk's parameters
    // The backward that zeroes a full gradient reduced once a step.
    if (backward[bodyOf(entry)] && zeroesOncePerStep() &&
        microBatchOf(entry) == 0)
      keys[entry] |= 4;
  }
  plan::splitTaskBodies(tasks, keys);
  // Each forward by the reductions it completes, and how many micro-batches
  // on the run that issued them is (a backward's bodies stay). Two bodies of
  // one chunk's backward (which sched-lower keys by the sends they finish)
  // defer the same reductions, a slot event family each, so which of them
  // came before does not matter: the chunk does, named by the body's first
  // backward's unit, and for hybrid_shard and last_micro_batch the step's
  // last micro-batch.
  backward = backwardBodies();
  SmallVector<std::pair<StringRef, bool>> deferrals;
  for (sched::TaskOp task : tasks.getTasks()) {
    auto first = task.getBody().front().getOps<sched::BackwardOp>();
    deferrals.push_back(
        {first.empty()
             ? StringRef()
             : (*first.begin()).getUnitAttr().getLeafReference().getValue(),
         false});
  }
  for (int64_t entry = 0; entry < entries; ++entry)
    if (backward[bodyOf(entry)] && lastApart &&
        microBatchOf(entry) == microBatches - 1)
      deferrals[bodyOf(entry)].second = true;
  std::map<std::tuple<StringRef, bool, int64_t>, int64_t> completed;
  for (int64_t entry = 0; entry < entries; ++entry) {
    keys[entry] = 0;
    if (entry > 0 && defers(entry - 1)) {
      auto [unit, last] = deferrals[bodyOf(entry - 1)];
      keys[entry] =
          completed
              .try_emplace(
                  {unit, last, microBatchOf(entry - 1) - microBatchOf(entry)},
                  static_cast<int64_t>(completed.size()) + 1)
              .first->second;
    }
  }
  plan::splitTaskBodies(tasks, keys);

  SmallVector<sched::TaskOp> bodies = tasks.getTasks();
  backward = backwardBodies();
  sites.assign(bodies.size(), Site());
  SmallVector<bool> seen(bodies.size(), false);
  for (auto [index, task] : llvm::enumerate(bodies)) {
    sites[index].task = task;
    sites[index].microBatch = static_cast<int64_t>(task.getMicroBatch());
    sites[index].first = sites[index].last = true;
  }
  for (int64_t entry = 0; entry < entries; ++entry) {
    Site &site = sites[bodyOf(entry)];
    seen[bodyOf(entry)] = true;
    site.first &= microBatchOf(entry) == 0;
    site.last &= microBatchOf(entry) == microBatches - 1;
    if (defers(entry)) {
      site.afterBackward.deferred = true;
      site.afterBackward.site = bodyOf(entry);
    }
    if (entry > 0 && defers(entry - 1)) {
      site.completes = bodyOf(entry - 1);
      site.shift = microBatchOf(entry - 1) - microBatchOf(entry);
    }
  }
  for (auto [index, site] : llvm::enumerate(sites)) {
    site.first &= seen[index];
    site.last &= seen[index];
  }
}

LogicalResult ProgramDistribution::analyzeSites() {
  int64_t count = numSites();
  forwardSpans.assign(groups.size(), SmallVector<Span>(count));
  backwardSpans.assign(groups.size(), SmallVector<Span>(count));
  lowered.assign(count, true);
  for (auto [index, site] : llvm::enumerate(sites)) {
    Block &block = site.task.getBody().front();
    Operation *lastBackward = nullptr, *firstCompute = nullptr;
    for (Operation &op : block) {
      if (!isCompute(&op))
        continue;
      if (!firstCompute)
        firstCompute = &op;
      if (!isa<sched::ForwardOp>(op))
        lastBackward = &op;
      addToSpans(&op, static_cast<int64_t>(index));
    }
    // A backward's reductions complete where its flat step would: after its
    // last backward and the frees that follow it (at the body's end when
    // nothing else does), or in the next body.
    if (lastBackward && !site.afterBackward.deferred) {
      Operation *anchor = lastBackward->getNextNode();
      while (anchor && isa<sched::FreeOp>(anchor))
        anchor = anchor->getNextNode();
      site.afterBackward.anchor = anchor;
      site.afterBackward.block = &block;
      site.afterBackward.site = static_cast<int64_t>(index);
    }
    if (site.completes >= 0) {
      if (!firstCompute)
        return site.task.emitOpError(
            "follows a backward and has no compute op to overlap its "
            "reductions with");
      site.afterFirstCompute.anchor = firstCompute->getNextNode();
      site.afterFirstCompute.block = &block;
    }
  }
  for (auto [index, state] : llvm::enumerate(groups)) {
    auto runs = [&](ArrayRef<Span> spans) {
      return llvm::any_of(spans, [](const Span &span) { return span.first; });
    };
    if (!runs(forwardSpans[index]) || !runs(backwardSpans[index]))
      return program.emitOpError("group '")
             << state.name << "' has no forward or no backward in its tasks";
    // What runs once a step (shard_grad_op's gather, a gradient zeroed and
    // reduced once) is placed in the bodies that the step's first or last
    // micro-batch runs alone (splitBodiesForCompletions).
    bool reducedOnce = !syncsEveryMicroBatch() &&
                       parallel.getSharding() != plan::Sharding::NoShard &&
                       state.trains();
    if ((gathersOncePerStep() &&
         !findEdgeSite(forwardSpans[index], /*last=*/false)) ||
        (reducedOnce && !findEdgeSite(backwardSpans[index], /*last=*/true)) ||
        (reducedOnce && zeroesOncePerStep() &&
         !findEdgeSite(backwardSpans[index], /*last=*/false)))
      return program.emitOpError("group '")
             << state.name
             << "' is not in a body that only the step's first or last "
                "micro-batch runs";
  }
  families = static_cast<int64_t>(tasks.getEventFamilies());
  return success();
}

/// Drops a `.mbN` suffix: a slot buffer holds every micro-batch's.
static std::string withoutMicroBatch(StringRef name) {
  size_t dot = name.rfind(".mb");
  if (dot != StringRef::npos && dot + 3 < name.size() &&
      llvm::all_of(name.drop_front(dot + 3), llvm::isDigit))
    return name.take_front(dot).str();
  return name.str();
}

sched::AllocOp ProgramDistribution::moveToSlot(Value buffer) {
  auto alloc = buffer.getDefiningOp<sched::AllocOp>();
  std::string name =
      withoutMicroBatch(alloc.getName()) + plan::reducingSuffix.str();
  sched::AllocOp &shared = slotBuffers[name];
  if (!shared)
    shared =
        plan::allocSlotBuffer(tasks, alloc.getType(), name, alloc.getRole());
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPoint(alloc);
  auto slot = sched::SlotOp::create(builder, alloc.getLoc(), alloc.getType(),
                                    shared, builder.getI64IntegerAttr(0),
                                    builder.getI64IntegerAttr(1));
  alloc.getResult().replaceAllUsesWith(slot.getResult());
  alloc->erase();
  return shared;
}

/// A completion that a later body places: the async op signals a slot event
/// family of its own, and what it frees moves into a slot, which that body
/// reads (the slot buffer is freed after the loop instead).
void ProgramDistribution::defer(const Completion &completion) {
  Location loc = program.getLoc();
  // A family per reduction of a chunk's backward: the op and what it
  // reduces, whichever body of that backward issues it.
  Operation *issue = completion.event.getDefiningOp();
  std::string signature = issue->getName().getStringRef().str();
  if (sched::AllocOp reduced = sched::getRootAlloc(issue->getOperand(0))) {
    signature.push_back(' ');
    signature.append(withoutMicroBatch(reduced.getName()));
  }
  auto [family, added] = familyOf.try_emplace(signature, families);
  if (added)
    ++families;
  Deferred out{family->second, {}, completion.accumulateInto};
  {
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointAfter(completion.event.getDefiningOp());
    sched::SlotSignalOp::create(builder, loc, completion.event,
                                builder.getI64IntegerAttr(out.family),
                                builder.getI64IntegerAttr(0));
  }
  // What it accumulates is one of them.
  for (Value buffer : completion.frees) {
    sched::AllocOp source = moveToSlot(buffer);
    if (buffer == completion.accumulate)
      out.accumulate = source.getBuffer();
  }
  assert(!completion.accumulate == !out.accumulate);
  deferred[completion.at.site].push_back(out);
}

void ProgramDistribution::emitDeferred() {
  Location loc = program.getLoc();
  for (Site &site : sites) {
    if (site.completes < 0)
      continue;
    const Place &at = site.afterFirstCompute;
    if (at.anchor)
      builder.setInsertionPoint(at.anchor);
    else
      builder.setInsertionPointToEnd(at.block);
    for (const Deferred &out : deferred.lookup(site.completes)) {
      Value event = sched::SlotEventOp::create(
          builder, loc, eventType, builder.getI64IntegerAttr(out.family),
          builder.getI64IntegerAttr(site.shift));
      sched::WaitOp::create(builder, loc, event);
      if (!out.accumulate)
        continue;
      auto type = cast<MemRefType>(out.accumulate.getType());
      Value slot = sched::SlotOp::create(builder, loc, type, out.accumulate,
                                         builder.getI64IntegerAttr(site.shift),
                                         builder.getI64IntegerAttr(1));
      sched::AccumulateOp::create(builder, loc, slot, out.accumulateInto);
    }
  }
  tasks.setEventFamilies(families);
}

LogicalResult ProgramDistribution::eraseLoweredViews(bool mustBeUnused) {
  for (sched::ViewOp view : loweredViews) {
    if (view->use_empty()) {
      view->erase();
      continue;
    }
    if (mustBeUnused)
      return view.emitOpError("is still used after its group was sharded");
  }
  return success();
}

struct SchedInsertCollectivesPass
    : plan::impl::SchedInsertCollectivesBase<SchedInsertCollectivesPass> {
  void runOnOperation() override {
    ProgramDistribution distribution(getOperation());
    if (failed(distribution.findTasks()) || failed(distribution.analyze()) ||
        failed(distribution.run()))
      return signalPassFailure();
  }
};

} // namespace
