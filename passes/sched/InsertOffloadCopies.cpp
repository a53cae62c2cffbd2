//===- InsertOffloadCopies.cpp - Offloaded state and its staging copies ---===//
//
// `sched-insert-offload-copies` (docs/sched.md): the plan's offloaded state
// moves to pinned host memory, the optimizer step runs where the plan says,
// and every op that touches a buffer in the other memory space gets a
// transient staging buffer on its own side with the sched.copy that fills it
// (host-to-device, right before the use) or drains it (device-to-host, right
// after the write).
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/sched/SchedOpTable.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/TypeSwitch.h"

namespace plan {
#define GEN_PASS_DEF_SCHEDINSERTOFFLOADCOPIES
#include "passes/Passes.h.inc"
} // namespace plan

using namespace mlir;

namespace {

MemRefType bufferType(Value buffer) {
  return cast<MemRefType>(buffer.getType());
}

sched::MemorySpace spaceOf(Value buffer) {
  return sched::getMemorySpace(bufferType(buffer));
}

bool onDevice(sched::MemorySpace space) {
  return space == sched::MemorySpace::Device;
}

/// Moves `buffer` and every view of it (transitively) to `space`. Only views
/// derive their result type from a buffer; every other sched op takes its
/// buffer operands as they are.
void moveBuffer(Value buffer, sched::MemorySpace space) {
  MemRefType type = bufferType(buffer);
  buffer.setType(MemRefType::Builder(type).setMemorySpace(
      sched::MemorySpaceAttr::get(buffer.getContext(), space)));
  for (Operation *user : buffer.getUsers())
    if (isa<sched::ViewOp, sched::ShardViewOp>(user))
      moveBuffer(user->getResult(0), space);
}

enum class Access { Read, Write, ReadWrite };

bool reads(Access access) { return access != Access::Write; }
bool writes(Access access) { return access != Access::Read; }

struct BufferUse {
  unsigned operandIndex;
  Access access;
};

/// How `op` accesses each of its buffer operands, from the runtime's op
/// table (sched::getBufferAccesses); nullopt for an op outside it. Ops that
/// move or name memory rather than compute on it (views, slots, copies,
/// frees) or name a task's slot events have no uses to stage.
std::optional<SmallVector<BufferUse>> tableUses(Operation *op) {
  SmallVector<BufferUse> uses;
  if (isa<sched::ViewOp, sched::ShardViewOp, sched::SlotOp, sched::CopyOp,
          sched::FreeOp, sched::SlotEventOp, sched::SlotSignalOp>(op))
    return uses;
  std::optional<SmallVector<sched::BufferAccess, 4>> accesses =
      sched::getBufferAccesses(op);
  if (!accesses)
    return std::nullopt;
  for (const sched::BufferAccess &access : *accesses)
    uses.push_back({access.operand->getOperandNumber(),
                    access.reads && access.writes ? Access::ReadWrite
                    : access.writes               ? Access::Write
                                                  : Access::Read});
  return uses;
}

/// tableUses, or an error for an op outside the table.
FailureOr<SmallVector<BufferUse>> bufferUses(Operation *op) {
  std::optional<SmallVector<BufferUse>> uses = tableUses(op);
  if (!uses)
    return op->emitOpError("sched-insert-offload-copies does not know how "
                           "this op accesses its buffers");
  return *uses;
}

/// Where an op runs. Compute and collectives run on the device; the step
/// where the plan puts it; element-wise ops next to their data: a cast where
/// its wider side lives (so the narrower type crosses the bus), an
/// accumulation where its destination lives, a norm or finiteness check
/// where the gradient lives.
sched::MemorySpace placeOf(Operation *op, sched::MemorySpace stepSpace) {
  return llvm::TypeSwitch<Operation *, sched::MemorySpace>(op)
      .Case([&](sched::OptimizerStepOp) { return stepSpace; })
      .Case([](sched::CastOp o) {
        unsigned srcWidth = bufferType(o.getSrc()).getElementTypeBitWidth();
        unsigned dstWidth = bufferType(o.getDst()).getElementTypeBitWidth();
        return spaceOf(dstWidth > srcWidth ? o.getDst() : o.getSrc());
      })
      .Case([](sched::AccumulateOp o) { return spaceOf(o.getDst()); })
      .Case([](sched::ZeroOp o) { return spaceOf(o.getBuffer()); })
      .Case([](sched::GradNormOp o) { return spaceOf(o.getGrads()); })
      .Case([](sched::CheckFiniteOp o) { return spaceOf(o.getBuffer()); })
      .Case(
          [](sched::UpdateLossScaleOp o) { return spaceOf(o.getLossScale()); })
      .Default([](Operation *) { return sched::MemorySpace::Device; });
}

using sched::isCollective;

void appendAfter(Operation *collective, Value event) {
  sched::getAfterMutable(collective)->append(event);
}

/// Places one program's buffers per the plan's offload and stages every
/// use across the host/device boundary.
class OffloadRewrite {
public:
  explicit OffloadRewrite(sched::ProgramOp program)
      : program(program), builder(program.getContext()) {
    builder.setListener(&created);
    plan::ParallelAttr parallel = program.getParallel();
    plan::OffloadAttr offload = parallel.getOffload();
    paramsOnHost = offload.getParams() == plan::MemorySpace::Host;
    gradsOnHost = offload.getGrads() == plan::MemorySpace::Host;
    optimizerOnHost = offload.getOptimizer() == plan::MemorySpace::Host;
    stepSpace = parallel.getOptimizerStep() == plan::MemorySpace::Host
                    ? hostSpace
                    : sched::MemorySpace::Device;
    sharded = parallel.getSharding() != plan::Sharding::NoShard &&
              parallel.getSharding() != plan::Sharding::Zero1;
  }

  /// Whether the plan puts anything on the host: without, the pass has
  /// nothing to place or stage.
  bool offloads() const {
    return paramsOnHost || gradsOnHost || optimizerOnHost ||
           !onDevice(stepSpace);
  }

  LogicalResult run() {
    // A pipeline stage's sched.tasks (docs/sched.md, "The micro-batch
    // loop") is staged body by body where every staging copy stays within
    // its body, or is a reduce-scatter into a host gradient shard that a
    // later task completes (reduced into a slot, added into the shard
    // there); where one cannot be, the loop is written out first.
    if (failed(plan::requireNoRepeat(program, "sched-insert-offload-copies")))
      return failure();
    if (!offloads())
      return success();
    auto loops = llvm::to_vector(body().getOps<sched::TasksOp>());
    placeBuffers();
    if (llvm::any_of(loops, [&](sched::TasksOp tasks) {
          return !stagesInPlace(tasks);
        })) {
      if (failed(plan::writeOutProgram(program)))
        return failure();
    }
    for (sched::TasksOp tasks : body().getOps<sched::TasksOp>())
      if (failed(completeScattersLater(tasks)))
        return failure();
    for (Operation *op :
         llvm::to_vector(llvm::make_pointer_range(program.getBody().front())))
      if (failed(isa<sched::TasksOp>(op) ? stageTasks(cast<sched::TasksOp>(op))
                                         : stage(op)))
        return failure();
    return success();
  }

private:
  static constexpr sched::MemorySpace hostSpace =
      sched::MemorySpace::PinnedHost;

  Block &body() { return program.getBody().front(); }

  void placeBuffers() {
    for (auto alloc : body().getOps<sched::AllocOp>()) {
      bool toHost = false;
      switch (alloc.getRole()) {
      // A LoRA run's frozen base is offloaded with the parameters.
      case sched::BufferRole::Param:
      case sched::BufferRole::Frozen:
        toHost = alloc.getPersistent() && paramsOnHost;
        break;
      // no_shard and zero1 accumulate full gradients that backward adds
      // into; only their reduced form, which the step reads, leaves the
      // device (and the step then runs on the host).
      case sched::BufferRole::Grad:
        toHost = alloc.getPersistent() && gradsOnHost && sharded;
        break;
      case sched::BufferRole::Master:
      case sched::BufferRole::ExpAvg:
      case sched::BufferRole::ExpAvgSq:
      case sched::BufferRole::Momentum:
        toHost = alloc.getPersistent() && optimizerOnHost;
        break;
      default:
        break;
      }
      if (toHost)
        moveBuffer(alloc.getResult(), hostSpace);
    }
    // The fp32 gradient sched-insert-casts makes for a step lives with the
    // step, so the cast that fills it runs there too.
    if (onDevice(stepSpace))
      return;
    for (auto step : body().getOps<sched::OptimizerStepOp>()) {
      sched::AllocOp grads = sched::getRootAlloc(step.getGrads());
      if (grads && !grads.getPersistent() &&
          grads.getRole() == sched::BufferRole::Staging &&
          onDevice(spaceOf(grads.getResult())))
        moveBuffer(grads.getResult(), hostSpace);
    }
  }

  /// "<buffer>.staging"; a staging buffer's own staging keeps its name. A
  /// slot buffer's is named as the loop written out names its runs' buffers
  /// (plan::writtenOutName).
  std::string stagingName(Value buffer) {
    sched::AllocOp root = sched::getRootAlloc(buffer);
    if (!root)
      return "staging";
    StringRef name = plan::writtenOutName(root);
    if (root.getRole() == sched::BufferRole::Staging)
      return name.str();
    return (name + ".staging").str();
  }

  sched::AllocOp allocStaging(Value like, sched::MemorySpace space) {
    MemRefType type = MemRefType::Builder(bufferType(like))
                          .setMemorySpace(sched::MemorySpaceAttr::get(
                              like.getContext(), space));
    return sched::AllocOp::create(builder, like.getLoc(), type,
                                  stagingName(like), sched::BufferRole::Staging,
                                  /*persistent=*/false, /*offset=*/nullptr);
  }

  Value copy(Location loc, Value src, Value dst) {
    return sched::CopyOp::create(builder, loc,
                                 sched::EventType::get(src.getContext()), src,
                                 dst, ValueRange())
        .getDone();
  }

  /// A device-to-host (or host-to-device) copy into `dst` is waited for,
  /// and its staging source freed, only before the next op that touches
  /// `dst`'s buffer, or at the end of the program (a task body's drains
  /// have a next use in the body: drainsPastBlock).
  void waitBeforeNextUse(Operation *copyOp, Value dst, Value staging) {
    sched::AllocOp root = sched::getRootAlloc(dst);
    Operation *next = copyOp->getNextNode();
    for (; next; next = next->getNextNode())
      if (llvm::any_of(next->getOperands(),
                       [&](Value v) { return sched::getRootAlloc(v) == root; }))
        break;
    if (next)
      builder.setInsertionPoint(next);
    else
      builder.setInsertionPointToEnd(copyOp->getBlock());
    sched::WaitOp::create(builder, copyOp->getLoc(), copyOp->getResult(0));
    sched::FreeOp::create(builder, copyOp->getLoc(), staging);
  }

  /// Whether `op` uses a buffer in the memory space it does not run in.
  bool needsStaging(Operation *op) {
    std::optional<SmallVector<BufferUse>> uses = tableUses(op);
    if (!uses)
      return false; // stage() reports it
    sched::MemorySpace place = placeOf(op, stepSpace);
    return llvm::any_of(*uses, [&](BufferUse use) {
      return spaceOf(op->getOperand(use.operandIndex)) != place;
    });
  }

  /// Whether an asynchronous op's event is waited once, in its own block,
  /// and not given to a later task as a slot event (sched::findWait, which
  /// the staging of a collective relies on, finds its wait there).
  static bool waitedInBlock(Operation *async) {
    std::optional<sched::AsyncInfo> info = sched::getAsyncInfo(async);
    if (!info)
      return false;
    int64_t waits = 0;
    for (Operation *user : info->done.getUsers()) {
      if (isa<sched::SlotSignalOp>(user))
        return false;
      if (isa<sched::WaitOp>(user) && user->getBlock() == async->getBlock())
        ++waits;
    }
    return waits == 1;
  }

  /// Whether `op` is a reduce-scatter of a task's body that accumulates
  /// into a gradient shard of the program on the host, from the device,
  /// after nothing, and that later tasks complete (its event a slot event).
  bool isScatterCompletedLater(Operation *op) {
    auto scatter = dyn_cast<sched::ReduceScatterOp>(op);
    if (!scatter || !scatter.getAccumulate() || !scatter.getAfter().empty() ||
        !onDevice(spaceOf(scatter.getSrc())) ||
        onDevice(spaceOf(scatter.getDst())))
      return false;
    Operation *dst = scatter.getDst().getDefiningOp();
    auto tasks = scatter->getParentOfType<sched::TasksOp>();
    return dst && tasks && !tasks->isAncestor(dst) &&
           !scatter.getDone().use_empty() &&
           llvm::all_of(scatter.getDone().getUsers(), [](Operation *user) {
             return isa<sched::SlotSignalOp>(user);
           });
  }

  /// Whether staging `op` drains a buffer that no later op of its block
  /// touches: the flat program waits for that drain right before the
  /// buffer's next use (waitBeforeNextUse), in a later task or after the
  /// loop, where a body would have to wait for it at its end.
  bool drainsPastBlock(Operation *op) {
    std::optional<SmallVector<BufferUse>> uses = tableUses(op);
    if (!uses)
      return false;
    sched::MemorySpace place = placeOf(op, stepSpace);
    // Added into its destination where that lives instead
    // (stageAccumulatingScatter).
    if (auto scatter = dyn_cast<sched::ReduceScatterOp>(op);
        scatter && scatter.getAccumulate() &&
        spaceOf(scatter.getDst()) != place)
      return false;
    for (BufferUse use : *uses) {
      Value buffer = op->getOperand(use.operandIndex);
      if (!writes(use.access) || spaceOf(buffer) == place)
        continue;
      sched::AllocOp root = sched::getRootAlloc(buffer);
      if (!root)
        continue; // stage() reports it
      bool usedLater = false;
      for (Operation *next = op->getNextNode(); next && !usedLater;
           next = next->getNextNode())
        usedLater = llvm::any_of(next->getOperands(), [&](Value v) {
          return sched::getRootAlloc(v) == root;
        });
      if (!usedLater)
        return true;
    }
    return false;
  }

  /// Whether every staging copy of `tasks`' bodies stays within its body,
  /// as the flat program places it: a collective that touches the other
  /// memory space, and the producers of the events it follows, are waited
  /// in the body that issues them (but for a reduce-scatter that
  /// completeScattersLater rewrites), and no drain outlasts its body.
  bool stagesInPlace(sched::TasksOp tasks) {
    for (sched::TaskOp task : tasks.getTasks())
      for (Operation &op : task.getBody().front()) {
        if (drainsPastBlock(&op))
          return false;
        if (!isCollective(&op) || !needsStaging(&op) ||
            isScatterCompletedLater(&op))
          continue;
        if (!waitedInBlock(&op))
          return false;
        OperandRange after = sched::getAsyncInfo(&op)->after;
        for (Value event : after) {
          Operation *producer = event.getDefiningOp();
          if (!producer || producer->getBlock() != op.getBlock() ||
              !waitedInBlock(producer))
            return false;
        }
      }
    return true;
  }

  /// A reduce-scatter into a host gradient shard that later tasks complete
  /// (isScatterCompletedLater) reduces into a slot of a device buffer of
  /// the program instead, and after each wait of its slot event that slot
  /// is added into the shard (which stageTasks then stages): the flat
  /// program's stageAccumulatingScatter, its device buffer in a slot. The
  /// slot buffer is named as that buffer, with plan::reducingSuffix.
  LogicalResult completeScattersLater(sched::TasksOp tasks) {
    llvm::StringMap<sched::AllocOp> slotBuffers;
    llvm::DenseSet<Operation *> completedWaits;
    for (sched::TaskOp task : tasks.getTasks())
      for (Operation &op : task.getBody().front()) {
        if (!isScatterCompletedLater(&op))
          continue;
        auto scatter = cast<sched::ReduceScatterOp>(op);
        FailureOr<SmallVector<sched::EventWait>> waits =
            sched::findWaits(scatter);
        if (failed(waits))
          return failure();
        Value dst = scatter.getDst();
        MemRefType type =
            MemRefType::Builder(bufferType(dst))
                .setMemorySpace(sched::MemorySpaceAttr::get(
                    dst.getContext(), sched::MemorySpace::Device));
        std::string name = stagingName(dst) + plan::reducingSuffix.str();
        sched::AllocOp &source = slotBuffers[name];
        if (!source)
          source = plan::allocSlotBuffer(tasks, type, name,
                                         sched::BufferRole::Staging);
        auto slotOf = [&](int64_t shift) {
          return sched::SlotOp::create(builder, scatter.getLoc(), type, source,
                                       builder.getI64IntegerAttr(shift),
                                       builder.getI64IntegerAttr(1))
              .getResult();
        };
        builder.setInsertionPoint(scatter);
        scatter.getDstMutable().assign(slotOf(0));
        scatter.setAccumulate(false);
        for (const sched::EventWait &wait : *waits) {
          // Bodies of one chunk's backward that differ in what they send
          // reduce into the same slot: one wait completes either's.
          if (!completedWaits.insert(wait.wait).second)
            continue;
          builder.setInsertionPointAfter(wait.wait);
          sched::AccumulateOp::create(builder, scatter.getLoc(),
                                      slotOf(wait.shift), dst);
        }
      }
    return success();
  }

  /// Stages each op of each body of `tasks`, within the body.
  LogicalResult stageTasks(sched::TasksOp tasks) {
    for (sched::TaskOp task : tasks.getTasks())
      for (Operation *op :
           llvm::to_vector(llvm::make_pointer_range(task.getBody().front())))
        if (failed(stage(op)))
          return failure();
    return success();
  }

  LogicalResult stage(Operation *op) {
    FailureOr<SmallVector<BufferUse>> uses = bufferUses(op);
    if (failed(uses))
      return failure();
    sched::MemorySpace place = placeOf(op, stepSpace);
    if (auto scatter = dyn_cast<sched::ReduceScatterOp>(op);
        scatter && scatter.getAccumulate() &&
        spaceOf(scatter.getDst()) != place)
      return stageAccumulatingScatter(scatter);
    bool staged = false;
    for (BufferUse use : *uses) {
      Value buffer = op->getOperand(use.operandIndex);
      if (spaceOf(buffer) == place)
        continue;
      // Copies are ordered against later uses of the buffer they fill.
      if (!sched::getRootAlloc(buffer))
        return op->emitOpError("uses a buffer that no sched.alloc creates");
      staged = true;
    }
    if (staged && isCollective(op) && failed(settleAfterEvents(op)))
      return failure();
    for (BufferUse use : *uses) {
      Value buffer = op->getOperand(use.operandIndex);
      if (spaceOf(buffer) == place)
        continue;
      if (isCollective(op)) {
        if (failed(stageCollectiveOperand(op, use)))
          return failure();
        continue;
      }
      Location loc = op->getLoc();
      builder.setInsertionPoint(op);
      auto staging = allocStaging(buffer, place);
      if (reads(use.access)) {
        Value filled = copy(loc, buffer, staging);
        sched::WaitOp::create(builder, loc, filled);
      }
      op->setOperand(use.operandIndex, staging);
      builder.setInsertionPointAfter(op);
      if (!writes(use.access)) {
        sched::FreeOp::create(builder, loc, staging);
        continue;
      }
      Value drained = copy(loc, staging, buffer);
      waitBeforeNextUse(drained.getDefiningOp(), buffer, staging);
    }
    return success();
  }

  /// A collective that follows other async ops (`after`) reads what they
  /// write, and this pass may have moved those writes to the compute stream
  /// after their waits (a host gradient shard is accumulated there). Its
  /// staging copy runs on the compute stream's order too, so the collective
  /// moves to right after those waits and what this pass put after them,
  /// which makes its `after` edges redundant.
  LogicalResult settleAfterEvents(Operation *op) {
    // A producer's wait ends with what this pass put right after it.
    return sched::moveBelowAfterEvents(
        op, [&](Operation *, sched::WaitOp wait) -> Operation * {
          Operation *end = wait;
          while (end->getNextNode() && created.ops.contains(end->getNextNode()))
            end = end->getNextNode();
          return end;
        });
  }

  /// A collective runs on the device: a host input is copied in on the
  /// host-to-device stream and the collective follows that copy (`after`);
  /// a host output is filled from the staging buffer once the collective is
  /// waited for.
  LogicalResult stageCollectiveOperand(Operation *op, BufferUse use) {
    FailureOr<sched::WaitOp> wait = sched::findWait(op);
    if (failed(wait))
      return failure();
    Location loc = op->getLoc();
    Value buffer = op->getOperand(use.operandIndex);
    builder.setInsertionPoint(op);
    auto staging = allocStaging(buffer, sched::MemorySpace::Device);
    if (reads(use.access)) {
      Value filled = copy(loc, buffer, staging);
      appendAfter(op, filled);
      // Its one wait; the collective's own wait implies it already.
      builder.setInsertionPoint(*wait);
      sched::WaitOp::create(builder, loc, filled);
    }
    op->setOperand(use.operandIndex, staging);
    builder.setInsertionPointAfter(*wait);
    if (!writes(use.access)) {
      sched::FreeOp::create(builder, loc, staging);
      return success();
    }
    Value drained = copy(loc, staging, buffer);
    waitBeforeNextUse(drained.getDefiningOp(), buffer, staging);
    return success();
  }

  /// Reduce-scattering onto a gradient shard that lives on the host: the
  /// shard is reduced into a device buffer and, once that completes, added
  /// into the host shard (which stages the device result to the host).
  LogicalResult stageAccumulatingScatter(sched::ReduceScatterOp scatter) {
    FailureOr<sched::WaitOp> wait = sched::findWait(scatter);
    if (failed(wait))
      return failure();
    Location loc = scatter.getLoc();
    Value dst = scatter.getDst();
    if (!onDevice(spaceOf(scatter.getSrc())))
      return scatter.emitOpError("reduces a buffer that is not on the device");
    builder.setInsertionPoint(scatter);
    auto reduced = allocStaging(dst, sched::MemorySpace::Device);
    scatter.getDstMutable().assign(reduced);
    scatter.setAccumulate(false);
    builder.setInsertionPointAfter(*wait);
    auto add = sched::AccumulateOp::create(builder, loc, reduced, dst);
    sched::FreeOp::create(builder, loc, reduced);
    return stage(add);
  }

  /// Ops this pass inserted, to tell them from the input's.
  struct CreatedOps : OpBuilder::Listener {
    void notifyOperationInserted(Operation *op,
                                 OpBuilder::InsertPoint) override {
      ops.insert(op);
    }
    llvm::DenseSet<Operation *> ops;
  };

  sched::ProgramOp program;
  CreatedOps created;
  OpBuilder builder;
  bool paramsOnHost = false, gradsOnHost = false, optimizerOnHost = false;
  bool sharded = false;
  sched::MemorySpace stepSpace = sched::MemorySpace::Device;
};

struct SchedInsertOffloadCopiesPass
    : plan::impl::SchedInsertOffloadCopiesBase<SchedInsertOffloadCopiesPass> {
  void runOnOperation() override {
    if (failed(OffloadRewrite(getOperation()).run()))
      return signalPassFailure();
  }
};

} // namespace
