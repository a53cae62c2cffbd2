//===- PlanWorkspace.cpp - Memory the runtime allocates outside the arena -===//
//
// docs/sched.md ("sched-plan-workspace"). The arena holds every buffer of
// the program; LibTorch still allocates while ops run: a unit's
// intermediates and gradients before they land in the arena
// (WorkspaceModel.h), a collective's staging copy until its wait, an
// optimizer step's fp32 gradient, the batch's token ids. This pass walks
// the program as the runtime executes it (a sched.repeat's or sched.tasks'
// bodies once per run) and records on each sched.program
// the most such bytes alive at once (`workspace_bytes`) and the op where
// that happens (`workspace_at`), in the memory the runtime measures: device
// memory on a GPU, all of the process's memory on a CPU device. The
// predicted peak is then the arenas plus the workspace.
//
//===----------------------------------------------------------------------===//

#include "analysis/ActivationModel.h"
#include "analysis/WorkspaceModel.h"
#include "passes/Passes.h"

#include "dialects/plan/PlanDialect.h"
#include "dialects/sched/SchedDialect.h"

#include "NF4Layout.h"
#include "Schedule.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

#include <map>

namespace plan {
#define GEN_PASS_DEF_SCHEDPLANWORKSPACE
#include "passes/Passes.h.inc"
} // namespace plan

using namespace mlir;
using namespace sched;

namespace {

constexpr int64_t kF32 = 4;

int64_t elementBytes(Value buffer) {
  return getElementBytes(cast<MemRefType>(buffer.getType()));
}
int64_t numel(Value buffer) {
  return cast<MemRefType>(buffer.getType()).getNumElements();
}
MemorySpace spaceOf(Value buffer) {
  return getMemorySpace(cast<MemRefType>(buffer.getType()));
}
Type elementType(Value buffer) {
  return cast<MemRefType>(buffer.getType()).getElementType();
}
bool isF32(Value buffer) { return elementType(buffer).isF32(); }

class WorkspaceWalk {
public:
  /// With `stepOverPeriods`, the walk steps over the periods of a table's
  /// middle once its state repeats (plan::PeriodSteps): each would hold
  /// what the last one held, so the most held and where are the same.
  WorkspaceWalk(ProgramOp program, bool stepOverPeriods)
      : program(program), plan(program.getPlanOp()), model(program.getModel()),
        stepOverPeriods(stepOverPeriods) {
    plan::TrainAttr train = program.getTrain();
    cpuDevice = program.getCluster().getDevice().isCpu();
    tokens = train.getMicroBatch() * train.getSeqLen();
    // The hidden states handed between units: under sequence parallelism
    // a tensor rank's 1/T of the positions.
    handedTokens = plan::streamTokens(tokens, plan::tensorShareOf(plan));
    shape.microBatch = train.getMicroBatch();
    shape.seqLen = train.getSeqLen();
    shape.workingBytes = plan::workingBytes(train);
    gradClip = train.getGradClip() > 0;
    sgdDecay = train.getOptimizer().getKind() == plan::OptimizerKind::SGD &&
               train.getOptimizer().getWeightDecay() != 0;
    for (plan::UnitOp unit : plan.getBody().getOps<plan::UnitOp>())
      units[unit.getSymName()] = {unit.getKind(),
                                  plan::workspaceShapeOf(unit, plan, shape)};
  }

  LogicalResult run() {
    // Alive over the whole step: each micro-batch's token ids (int64) and
    // targets (runtime/data/Data.cpp: a token's int64 target, or under a
    // sequence-classification head a sequence's label, int64, or fp32 for a
    // regression's single label), set before the program runs; Llama's rope
    // tables (cos and sin, seq_len x head_dim in the working type), cached
    // by the model; on a GPU, cuBLAS's workspaces.
    bool sequenceLabels =
        model.getFamily() == plan::ModelFamily::Bert &&
        model.getBertHead() == plan::BertHead::SequenceClassification;
    int64_t targetBytes =
        sequenceLabels ? shape.microBatch * (model.getNumLabels() == 1 ? 4 : 8)
                       : tokens * 8;
    int64_t resident = program.getMicroBatches() * (tokens * 8 + targetBytes);
    if (model.getFamily() == plan::ModelFamily::Llama)
      resident += 2 * shape.seqLen * (model.getHidden() / model.getHeads()) *
                  shape.workingBytes;
    if (!cpuDevice)
      resident += plan::gpuLibraryWorkspaceBytes(
          program.getCluster().getDevice().getName(), model.getFamily());

    int64_t most = 0;
    Operation *mostAt = nullptr;
    auto tasksOps = program.getBody().front().getOps<TasksOp>();
    plan::PeriodSteps steps(stepOverPeriods && llvm::hasSingleElement(tasksOps)
                                ? *tasksOps.begin()
                                : TasksOp());
    // As the step runs: a sched.repeat's or sched.tasks' bodies once per
    // run, in order.
    for (StepCursor cursor(program); !cursor.done(); cursor.advance()) {
      // After a step, on with the op it lands at, if any.
      if (steps.stepOver(cursor,
                         [&](int64_t base, int64_t horizon) {
                           return fingerprint(base, horizon);
                         }) &&
          cursor.done())
        break;
      Operation &op = *cursor;
      // After a step, the ops after it as if that many micro-batches
      // earlier, those after the sched.tasks too (what the runs left is
      // keyed so).
      iteration = cursor.iteration() - steps.offset();
      if (isa<SlotSignalOp, SlotEventOp>(op)) {
        handOverEvent(op);
        continue;
      }
      FailureOr<int64_t> own = opBytes(op);
      if (failed(own))
        return failure();
      int64_t alive =
          inFlight.sum() + slotInFlight.sum() + handover.sum() + *own;
      if (alive > most || !mostAt) {
        most = alive;
        mostAt = &op;
      }
      after(op);
    }
    Builder builder(program.getContext());
    program->setAttr("workspace_bytes",
                     builder.getI64IntegerAttr(resident + most));
    program->setAttr("workspace_at",
                     builder.getStringAttr(mostAt ? describeOp(mostAt) : ""));
    return success();
  }

private:
  struct UnitInfo {
    plan::UnitKind kind;
    plan::WorkspaceShape shape;
  };

  /// Whether the runtime's peak counts memory of `space`: the cuda backend
  /// measures device memory (its host arenas are added as planned), the
  /// cpu backend the whole process.
  bool counted(Value buffer) const {
    return cpuDevice || spaceOf(buffer) == MemorySpace::Device;
  }

  FailureOr<const UnitInfo *> unitOf(Operation &op, SymbolRefAttr ref) {
    auto it = units.find(ref.getLeafReference().getValue());
    if (it == units.end())
      return op.emitOpError("names unit ")
             << ref << ", which plan '" << plan.getSymName() << "' lacks";
    return &it->second;
  }

  /// The bytes `op` allocates while it runs (or, for an asynchronous op,
  /// until its wait: recorded in `inFlight`).
  FailureOr<int64_t> opBytes(Operation &op) {
    // A unit's forward (a recompute is one) or backward.
    // Under tensor parallelism, the part of it that runs.
    SymbolRefAttr unitRef;
    int64_t part = 0;
    if (auto forward = dyn_cast<ForwardOp>(op)) {
      unitRef = forward.getUnit();
      part = static_cast<int64_t>(forward.getPart());
    } else if (auto recompute = dyn_cast<RecomputeOp>(op)) {
      unitRef = recompute.getUnit();
      part = static_cast<int64_t>(recompute.getPart());
    } else if (auto backward = dyn_cast<BackwardOp>(op)) {
      unitRef = backward.getUnit();
      part = static_cast<int64_t>(backward.getPart());
    }
    if (unitRef) {
      // The same in every run of the op's body: computed once.
      auto cached = computeBytes.find(&op);
      if (cached != computeBytes.end())
        return cached->second;
      auto unit = unitOf(op, unitRef);
      if (failed(unit))
        return failure();
      const plan::WorkspaceShape &shape = (*unit)->shape;
      int64_t bytes =
          isa<BackwardOp>(op)
              ? plan::backwardWorkspaceBytes((*unit)->kind, model, shape, part)
              : plan::forwardWorkspaceBytes((*unit)->kind, model, shape, part);
      computeBytes[&op] = bytes;
      return bytes;
    }
    if (auto scatter = dyn_cast<ReduceScatterOp>(op)) {
      // Into a staging tensor of the source's type unless the result can
      // land in the destination directly; freed when the wait folds it in.
      Value src = scatter.getSrc(), dst = scatter.getDst();
      bool direct = !scatter.getAccumulate() &&
                    elementType(src) == elementType(dst) &&
                    getRootAlloc(src) != getRootAlloc(dst);
      int64_t held = 0;
      if (!direct && counted(src))
        held += numel(dst) * elementBytes(src);
      // The CPU backend all-reduces a flat copy of the source, made at the
      // issue and freed by the wait (runtime/core/Comm.cpp).
      if (cpuDevice && program.getGroupSize(scatter.getGroup()) > 1)
        held += numel(src) * elementBytes(src);
      if (held > 0)
        inFlight.set(scatter.getDone(), held);
      return int64_t{0};
    }
    if (auto gather = dyn_cast<AllGatherOp>(op)) {
      // An in-place gather (the local shard inside the destination) sends a
      // copy of the shard, kept until the gather completes.
      // Gloo (the CPU backend) gathers into a flat tensor of the
      // destination's size and copies it out when the collective ends, on
      // its worker thread: held until the wait, at the latest. NCCL writes
      // the destination in place; a group of one rank only copies.
      Value src = gather.getSrc(), dst = gather.getDst();
      int64_t held = 0;
      if (getRootAlloc(src) == getRootAlloc(dst) && counted(src))
        held += numel(src) * elementBytes(src);
      if (cpuDevice && program.getGroupSize(gather.getGroup()) > 1)
        held += numel(dst) * elementBytes(dst);
      if (held > 0)
        inFlight.set(gather.getDone(), held);
      return int64_t{0};
    }
    if (auto accumulate = dyn_cast<AccumulateOp>(op)) {
      // CPU kernels convert a source of another type first; CUDA kernels
      // convert as they read.
      Value src = accumulate.getSrc(), dst = accumulate.getDst();
      if (cpuDevice && elementType(src) != elementType(dst))
        return numel(src) * elementBytes(dst);
      return int64_t{0};
    }
    if (auto dequantize = dyn_cast<DequantizeOp>(op))
      return dequantizeBytes(dequantize);
    if (auto norm = dyn_cast<GradNormOp>(op)) {
      // The fp32 copy (unless already fp32) and its squares.
      Value grads = norm.getGrads();
      if (!counted(grads))
        return int64_t{0};
      return numel(grads) * kF32 * (isF32(grads) ? 1 : 2);
    }
    if (auto check = dyn_cast<CheckFiniteOp>(op)) {
      // isfinite's boolean per element.
      Value buffer = check.getBuffer();
      return counted(buffer) ? numel(buffer) : int64_t{0};
    }
    if (auto step = dyn_cast<OptimizerStepOp>(op))
      return optimizerBytes(step);
    return int64_t{0};
  }

  /// runtime/models/FrozenBase.cpp: a base of bytes is converted a
  /// parameter at a time, each through bounded temporaries (NF4Layout.h); a
  /// float one is copied across types directly.
  int64_t dequantizeBytes(DequantizeOp op) {
    Value src = op.getSrc();
    plan::UnitOp unit = op.getUnitOp(symbolTables);
    if (!unit || !counted(src) || !elementType(src).isInteger(8))
      return 0;
    int64_t most = 0;
    for (auto param : unit.getBody().getOps<plan::ParamOp>()) {
      std::optional<plan::BaseStorage> storage = param.getFrozen();
      if (!storage || param.getTiedTo())
        continue;
      int64_t n = param.getTensorType().getNumElements();
      most = std::max(most, *storage == plan::BaseStorage::NF4
                                ? plan::rt::nf4DequantWorkspaceBytes(n)
                                : plan::rt::denseDequantWorkspaceBytes(
                                      plan::storageBytes(*storage, n)));
    }
    return most;
  }

  /// runtime/core/Optimizer.cpp: the gradient as fp32 (a copy unless it is
  /// fp32 already and neither unscaled nor clipped); on the CPU, small
  /// AdamW steps' sqrt and division and SGD's weight decay.
  int64_t optimizerBytes(OptimizerStepOp step) {
    Value params = step.getParams(), grads = step.getGrads();
    if (!counted(params))
      return 0;
    int64_t n = numel(params), bytes = 0;
    if (!isF32(grads) || step.getLossScale() || gradClip)
      bytes += kF32 * n;
    bool onCpu = cpuDevice || spaceOf(params) != MemorySpace::Device;
    plan::OptimizerKind kind = program.getTrain().getOptimizer().getKind();
    if (onCpu && kind == plan::OptimizerKind::AdamW &&
        n <= plan::rt::kParallelAdamWMinNumel)
      bytes += 2 * kF32 * n;
    if (sgdDecay)
      bytes += kF32 * n;
    return bytes;
  }

  /// What an op leaves alive for later ones.
  /// What an asynchronous op holds until its wait goes with its event
  /// from the run that signals a slot event instance to the run that waits
  /// for it.
  void handOverEvent(Operation &op) {
    if (auto signal = dyn_cast<SlotSignalOp>(op)) {
      if (std::optional<int64_t> held = inFlight.take(signal.getEvent()))
        slotInFlight.set(getSlotEventInstance(op, iteration), *held);
      return;
    }
    auto event = cast<SlotEventOp>(op);
    if (std::optional<int64_t> held =
            slotInFlight.take(getSlotEventInstance(op, iteration)))
      inFlight.set(event.getEvent(), *held);
  }

  void after(Operation &op) {
    if (auto wait = dyn_cast<WaitOp>(op)) {
      inFlight.take(wait.getEvent());
      return;
    }
    auto backward = dyn_cast<BackwardOp>(op);
    if (!backward)
      return;
    // The gradient a unit's backward hands to the unit before it, kept
    // until that unit's backward (the first unit's is dropped, and a
    // pipeline chunk's first unit writes it into the buffer it sends: its
    // part 0's in_grad).
    int64_t mb = static_cast<int64_t>(backward.getMicroBatch()) + iteration;
    auto unit = units.find(backward.getUnit().getLeafReference().getValue());
    bool sendsIt = backward.getPart() == 0 && backward.getInGrad();
    if ((unit != units.end() &&
         unit->second.kind == plan::UnitKind::Embedding) ||
        sendsIt)
      handover.take(mb);
    else
      handover.set(mb, handedTokens * model.getHidden() * shape.workingBytes);
  }

  /// What the walk holds as the runs from the one of micro-batch `base` see
  /// it (plan::PeriodSteps): the sums, each asynchronous op's bytes by its
  /// event (a body's op issues its event afresh each run), and what a slot
  /// event instance or a micro-batch from `horizon` on holds.
  std::vector<int64_t> fingerprint(int64_t base, int64_t horizon) const {
    std::vector<int64_t> words = {inFlight.sum(), slotInFlight.sum(),
                                  handover.sum()};
    SmallVector<std::pair<intptr_t, int64_t>> events;
    inFlight.forEach([&](Value event, int64_t bytes) {
      events.emplace_back(
          reinterpret_cast<intptr_t>(event.getAsOpaquePointer()), bytes);
    });
    llvm::sort(events);
    for (auto [event, bytes] : events)
      words.insert(words.end(), {event, bytes});
    words.push_back(-1);
    slotInFlight.forEach(
        [&](const std::pair<int64_t, int64_t> &instance, int64_t bytes) {
          if (instance.second >= horizon)
            words.insert(words.end(),
                         {instance.first, instance.second - base, bytes});
        });
    words.push_back(-1);
    handover.forEach([&](int64_t mb, int64_t bytes) {
      if (mb >= horizon)
        words.insert(words.end(), {mb - base, bytes});
    });
    return words;
  }

  /// Bytes held by key, and their sum, kept as they change: summing the
  /// maps at every op of a pipeline's step cost more than the rest of the
  /// walk.
  template <typename Map> class Held {
    using Key = typename Map::key_type;

  public:
    void set(const Key &key, int64_t bytes) {
      int64_t &held = bytesOf[key];
      total += bytes - held;
      held = bytes;
    }
    /// The bytes `key` held, now released.
    std::optional<int64_t> take(const Key &key) {
      auto it = bytesOf.find(key);
      if (it == bytesOf.end())
        return std::nullopt;
      int64_t held = it->second;
      total -= held;
      bytesOf.erase(it);
      return held;
    }
    int64_t sum() const { return total; }
    template <typename F> void forEach(F &&f) const {
      for (const auto &[key, bytes] : bytesOf)
        f(key, bytes);
    }

  private:
    Map bytesOf;
    int64_t total = 0;
  };

  ProgramOp program;
  plan::PlanOp plan;
  SymbolTableCollection symbolTables;
  plan::ModelAttr model;
  bool cpuDevice = false;
  bool gradClip = false;
  bool sgdDecay = false;
  int64_t tokens = 0;
  int64_t handedTokens = 0;
  plan::WorkspaceShape shape;
  llvm::StringMap<UnitInfo> units;
  llvm::DenseMap<Operation *, int64_t> computeBytes; // by compute op
  Held<llvm::DenseMap<Value, int64_t>> inFlight;     // by the op's event
  // What a run hands to a later one through a slot event instance (family,
  // micro-batch).
  Held<std::map<std::pair<int64_t, int64_t>, int64_t>> slotInFlight;
  Held<std::map<int64_t, int64_t>> handover; // by micro-batch
  // What the run being walked adds to its body's micro-batch.
  int64_t iteration = 0;
  bool stepOverPeriods;
};

struct SchedPlanWorkspacePass
    : plan::impl::SchedPlanWorkspaceBase<SchedPlanWorkspacePass> {
  using SchedPlanWorkspaceBase::SchedPlanWorkspaceBase;
  void runOnOperation() override {
    if (failed(WorkspaceWalk(getOperation(), !everyRun).run()))
      return signalPassFailure();
  }
};

} // namespace
