//===- InsertCasts.cpp - Mixed precision: working copies and master weights
//===//
//
// `sched-insert-casts` (docs/sched.md): with bf16_mixed / fp16_mixed the
// optimizer keeps stepping fp32 master weights while everything else (the
// parameters the model reads, gathered parameters, activations, gradients)
// moves to the working type; reductions run in the plan's reduce_dtype and
// fp16 adds dynamic or static loss scaling.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace plan {
#define GEN_PASS_DEF_SCHEDINSERTCASTS
#include "passes/Passes.h.inc"
} // namespace plan

using namespace mlir;

namespace {

MemRefType bufferType(Value buffer) {
  return cast<MemRefType>(buffer.getType());
}

Type elementTypeOf(Value buffer) { return bufferType(buffer).getElementType(); }

/// Gives `buffer` and every view and slot of it (transitively) the element
/// type `elementType`. Only views and slots derive their result type from a
/// buffer; every other sched op takes its buffer operands as they are, so
/// updating the values in place keeps all users consistent.
void retypeBuffer(Value buffer, Type elementType) {
  buffer.setType(
      MemRefType::Builder(bufferType(buffer)).setElementType(elementType));
  for (Operation *user : buffer.getUsers())
    if (isa<sched::ViewOp, sched::ShardViewOp, sched::SlotOp>(user))
      retypeBuffer(user->getResult(0), elementType);
}

/// Every op of `program` of type `OpT`, in a sched.tasks' bodies too.
template <typename OpT> SmallVector<OpT> opsOf(sched::ProgramOp program) {
  SmallVector<OpT> ops;
  program.walk([&](OpT op) { ops.push_back(op); });
  return ops;
}

/// A buffer shaped and placed like `like`, with another element type.
MemRefType withElementType(Value like, Type elementType) {
  return MemRefType::Builder(bufferType(like)).setElementType(elementType);
}

/// "layers.0.param" -> "layers.0.master"; any other name gets ".master".
std::string masterName(StringRef paramName) {
  paramName.consume_back(".param");
  return (paramName + ".master").str();
}

Type floatType(MLIRContext *context, plan::DType dtype) {
  switch (dtype) {
  case plan::DType::F32:
    return Float32Type::get(context);
  case plan::DType::BF16:
    return BFloat16Type::get(context);
  case plan::DType::F16:
    return Float16Type::get(context);
  }
  llvm_unreachable("unknown dtype");
}

/// Rewrites one program for the plan's mixed precision.
class MixedPrecisionRewrite {
public:
  explicit MixedPrecisionRewrite(sched::ProgramOp program)
      : program(program), builder(program.getContext()) {
    MLIRContext *context = program.getContext();
    plan::TrainAttr train = program.getTrain();
    working = train.getPrecision() == plan::Precision::FP16Mixed
                  ? Type(Float16Type::get(context))
                  : Type(BFloat16Type::get(context));
    reduce = floatType(context, train.getReduceDtype());
    f32 = Float32Type::get(context);
    gradType =
        train.getGradDtype() == plan::GradDType::F32 ? Type(f32) : working;
  }

  LogicalResult run() {
    if (failed(findTasks()))
      return failure();
    for (Operation &op : program.getBody().front())
      if (auto step = dyn_cast<sched::OptimizerStepOp>(op))
        steps.push_back(step);
    if (failed(checkInputIsFp32()) || failed(addMasters()))
      return failure();
    retypeWorkingBuffers();
    if (failed(reduceInReduceType()))
      return failure();
    // Loss scaling checks the gradients as they are, before their casts.
    if (train().getPrecision() == plan::Precision::FP16Mixed &&
        train().getLossScale().getKind() != plan::LossScaleKind::None &&
        failed(scaleLoss()))
      return failure();
    castStepGradients();
    return success();
  }

private:
  plan::TrainAttr train() { return program.getTrain(); }
  Block &body() { return program.getBody().front(); }

  /// A pipeline stage's sched.tasks (docs/sched.md, "The micro-batch
  /// loop"): its bodies are rewritten as the flat step's micro-batches, and
  /// a reduction that a later body completes keeps its staging copies in
  /// slots. A reduction that follows another's event (hybrid_shard's replica
  /// all-reduce) moves below that one's wait: where that wait lies in
  /// another body the loop is written out first.
  LogicalResult findTasks() {
    for (Operation &op : body()) {
      if (isa<sched::RepeatOp>(op) || (tasks && isa<sched::TasksOp>(op)))
        return sched::requireUnrolled(op, "sched-insert-casts");
      if (auto found = dyn_cast<sched::TasksOp>(op))
        tasks = found;
    }
    if (!tasks)
      return success();
    // A reduction whose producers' events are waited only in its own body
    // (hybrid_shard's replica all-reduce in the last micro-batch's
    // backward, which no forward follows) moves below those waits there.
    WalkResult follows = tasks.walk([](Operation *op) {
      if (!isa<sched::AllReduceOp, sched::ReduceScatterOp>(op))
        return WalkResult::advance();
      for (Value event : op->getOperands()) {
        if (!isa<sched::EventType>(event.getType()))
          continue;
        Operation *producer = event.getDefiningOp();
        bool waitedHere =
            producer && llvm::all_of(event.getUsers(), [&](Operation *user) {
              return user == op || (isa<sched::WaitOp>(user) &&
                                    user->getBlock() == op->getBlock());
            });
        if (!waitedHere)
          return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (!follows.wasInterrupted())
      return success();
    if (failed(plan::unrollTasks(tasks)))
      return failure();
    tasks = {};
    return success();
  }

  /// A staging copy of `like` in the reduce type for the reduction `op`,
  /// made right before it: its own allocation, or, when later bodies
  /// complete the reduction, one slot of a buffer of the program.
  Value stagingFor(Operation *op, Value like, StringRef suffix, bool inSlot) {
    builder.setInsertionPoint(op);
    if (!inSlot)
      return allocLike(like, reduce, nameOf(like, suffix));
    // A slot of its own, named for the slot buffer it copies (already
    // ".reducing") or, for a persistent gradient, as one.
    sched::AllocOp root = sched::getRootAlloc(like);
    StringRef rootName = root ? root.getName() : StringRef("buffer");
    std::string name = (rootName + suffix).str();
    if (!rootName.ends_with(plan::reducingSuffix))
      name += plan::reducingSuffix;
    MemRefType type = withElementType(like, reduce);
    sched::AllocOp &source = slotBuffers[name];
    if (!source)
      source =
          plan::allocSlotBuffer(tasks, type, name, sched::BufferRole::Staging);
    return sched::SlotOp::create(builder, op->getLoc(), type, source,
                                 builder.getI64IntegerAttr(0),
                                 builder.getI64IntegerAttr(1));
  }

  /// `buffer`, used in a body, where `wait` (of an op of that body) is:
  /// itself in the same body or outside the sched.tasks, else the slot it
  /// is, `wait.shift` micro-batches on.
  FailureOr<Value> at(Value buffer, const sched::EventWait &wait) {
    Operation *def = buffer.getDefiningOp();
    if (!def || !tasks || !tasks->isProperAncestor(def) ||
        def->getBlock() == wait.wait->getBlock())
      return buffer;
    auto slot = dyn_cast<sched::SlotOp>(def);
    if (!slot)
      return def->emitOpError("is read by a reduction that a later task "
                              "completes, and is not a slot");
    return sched::SlotOp::create(
               builder, slot.getLoc(), slot.getType(), slot.getSource(),
               builder.getI64IntegerAttr(static_cast<int64_t>(slot.getShift()) +
                                         wait.shift),
               slot.getSlotsAttr())
        .getResult();
  }

  /// The pass runs once, on sched-insert-collectives' fp32 program (a
  /// frozen base is stored as the plan says from the start, and its gathered
  /// copies alike).
  LogicalResult checkInputIsFp32() {
    for (auto alloc : opsOf<sched::AllocOp>(program))
      if (!alloc.getType().getElementType().isF32() && !holdsFrozenBase(alloc))
        return alloc.emitOpError("expected an fp32 buffer before "
                                 "sched-insert-casts, got ")
               << alloc.getType().getElementType();
    return success();
  }

  /// The fp32 buffer each step updates becomes a master copy of its own;
  /// the parameters keep their place for everything else and, once in the
  /// working type, are refreshed from the master after the step.
  LogicalResult addMasters() {
    for (sched::OptimizerStepOp step : steps) {
      Value updated = step.getParams();
      sched::AllocOp root = sched::getRootAlloc(updated);
      if (!root || root.getRole() != sched::BufferRole::Param)
        return step.emitOpError("expected to step the group's parameters "
                                "(a buffer of role param)");
      builder.setInsertionPointAfter(root);
      auto master = sched::AllocOp::create(
          builder, root.getLoc(), bufferType(updated),
          masterName(root.getName()), sched::BufferRole::Master,
          /*persistent=*/true, /*offset=*/nullptr);
      step.getParamsMutable().assign(master);
      builder.setInsertionPointAfter(step);
      sched::CastOp::create(builder, step.getLoc(), master, updated);
    }
    return success();
  }

  /// A frozen base (a LoRA run's), or a gathered copy of one: stored as the
  /// plan says, never retyped; compute reads it in the working type after
  /// sched-dequantize-base converts what is stored otherwise.
  static bool holdsFrozenBase(sched::AllocOp alloc) {
    if (alloc.getRole() == sched::BufferRole::Frozen)
      return true;
    for (Operation *user : alloc.getResult().getUsers())
      if (auto gather = dyn_cast<sched::AllGatherOp>(user))
        if (gather.getDst() == alloc.getResult())
          if (sched::AllocOp src = sched::getRootAlloc(gather.getSrc()))
            return src.getRole() == sched::BufferRole::Frozen;
    return false;
  }

  /// A transient buffer that a reduce-scatter overwrites (zero1's gradient
  /// shard) holds a reduction's result, so it takes the reduce type and
  /// feeds the step without a round trip through the working type.
  static bool isReductionResult(sched::AllocOp alloc) {
    if (alloc.getPersistent())
      return false;
    for (Operation *user : alloc.getResult().getUsers())
      if (auto scatter = dyn_cast<sched::ReduceScatterOp>(user))
        if (scatter.getDst() == alloc.getResult() && !scatter.getAccumulate())
          return true;
    return false;
  }

  void retypeWorkingBuffers() {
    for (auto alloc : opsOf<sched::AllocOp>(program)) {
      switch (alloc.getRole()) {
      case sched::BufferRole::Gathered:
        // A gathered frozen base keeps its storage type.
        if (holdsFrozenBase(alloc))
          break;
        [[fallthrough]];
      case sched::BufferRole::Param:
      case sched::BufferRole::Activations:
      // A pipeline stage's input and output and their gradients, made by
      // sched-lower (tensor parallelism's are made later, in their type).
      case sched::BufferRole::Exchange:
        retypeBuffer(alloc.getResult(), working);
        break;
      case sched::BufferRole::UnshardedGrad:
      case sched::BufferRole::Grad:
      case sched::BufferRole::Bucket:
        retypeBuffer(alloc.getResult(),
                     isReductionResult(alloc) ? reduce : gradType);
        break;
      default:
        break;
      }
    }
  }

  sched::AllocOp allocLike(Value like, Type elementType, StringRef name) {
    return sched::AllocOp::create(builder, like.getLoc(),
                                  withElementType(like, elementType), name,
                                  sched::BufferRole::Staging,
                                  /*persistent=*/false, /*offset=*/nullptr);
  }

  /// `buffer`'s alloc's name with `suffix`; a gradient left to a later task
  /// in a slot (".reducing", sched-insert-collectives) and written out is
  /// named as the gradient it holds.
  std::string nameOf(Value buffer, StringRef suffix) {
    sched::AllocOp root = sched::getRootAlloc(buffer);
    StringRef name = root ? plan::writtenOutName(root) : StringRef("buffer");
    return (name + suffix).str();
  }

  static bool isGradient(Value buffer) {
    sched::AllocOp root = sched::getRootAlloc(buffer);
    if (!root)
      return false;
    switch (root.getRole()) {
    case sched::BufferRole::UnshardedGrad:
    case sched::BufferRole::Grad:
    case sched::BufferRole::Bucket:
      return true;
    default:
      return false;
    }
  }

  /// Gradient reductions of another type than the reduce type instead run
  /// on a copy in the reduce type, converted back once the reduction is
  /// waited for.
  LogicalResult reduceInReduceType() {
    SmallVector<Operation *> reductions;
    program.walk([&](Operation *op) {
      if (isa<sched::AllReduceOp, sched::ReduceScatterOp>(op))
        reductions.push_back(op);
    });
    for (Operation *op : reductions) {
      Value input = isa<sched::AllReduceOp>(op)
                        ? cast<sched::AllReduceOp>(op).getBuffer()
                        : cast<sched::ReduceScatterOp>(op).getSrc();
      if (elementTypeOf(input) == reduce || !isGradient(input))
        continue;
      if (failed(settleAfterEvents(op)))
        return failure();
      FailureOr<SmallVector<sched::EventWait>> waits = sched::findWaits(op);
      if (failed(waits))
        return failure();
      // Completed in later bodies of a sched.tasks, which find the staging
      // copies in slots, freed with their buffers after the loop.
      bool later = waits->front().wait->getBlock() != op->getBlock();
      Location loc = op->getLoc();
      // After each wait: `convert` the copy back into what the reduction
      // made, then free what is not a slot.
      auto complete =
          [&](ArrayRef<Value> frees,
              function_ref<LogicalResult(const sched::EventWait &)> convert)
          -> LogicalResult {
        for (const sched::EventWait &wait : *waits) {
          // Two bodies of one chunk's backward (sched-lower keys them by the
          // sends they finish) issue the same reduction into the same
          // slots: the wait of its slot event completes either's.
          if (later && !completedWaits.insert(wait.wait).second)
            continue;
          builder.setInsertionPointAfter(wait.wait);
          if (failed(convert(wait)))
            return failure();
          if (later)
            continue;
          for (Value buffer : frees)
            settled[op] = sched::FreeOp::create(builder, loc, buffer);
        }
        return success();
      };
      if (auto allReduce = dyn_cast<sched::AllReduceOp>(op)) {
        Value buffer = allReduce.getBuffer();
        Value copy = stagingFor(op, buffer, ".reduce", later);
        sched::CastOp::create(builder, loc, buffer, copy);
        allReduce.getBufferMutable().assign(copy);
        if (failed(complete({copy}, [&](const sched::EventWait &wait) {
              FailureOr<Value> from = at(copy, wait), to = at(buffer, wait);
              if (failed(from) || failed(to))
                return failure();
              sched::CastOp::create(builder, loc, *from, *to);
              return success();
            })))
          return failure();
        continue;
      }
      auto scatter = cast<sched::ReduceScatterOp>(op);
      Value src = scatter.getSrc(), dst = scatter.getDst();
      Value srcCopy = stagingFor(op, src, ".reduce", later);
      sched::CastOp::create(builder, loc, src, srcCopy);
      scatter.getSrcMutable().assign(srcCopy);
      Value dstCopy;
      if (elementTypeOf(dst) != reduce) {
        dstCopy = stagingFor(op, dst, ".reduce", later);
        scatter.getDstMutable().assign(dstCopy);
      }
      bool accumulate = scatter.getAccumulate();
      if (dstCopy)
        scatter.setAccumulate(false);
      SmallVector<Value> frees;
      if (dstCopy)
        frees.push_back(dstCopy);
      frees.push_back(srcCopy);
      if (failed(complete(frees, [&](const sched::EventWait &wait) {
            if (!dstCopy)
              return success();
            FailureOr<Value> from = at(dstCopy, wait), to = at(dst, wait);
            if (failed(from) || failed(to))
              return failure();
            if (accumulate)
              sched::AccumulateOp::create(builder, loc, *from, *to);
            else
              sched::CastOp::create(builder, loc, *from, *to);
            return success();
          })))
        return failure();
    }
    return success();
  }

  /// A reduction that follows other async ops (`after`) reads what they
  /// write; its cast into the reduce type runs on the compute stream, so the
  /// reduction moves to where those ops are waited for (and their results
  /// converted back), which makes the `after` edges redundant.
  LogicalResult settleAfterEvents(Operation *op) {
    // A producer this pass already converted ends where its conversion does.
    return sched::moveBelowAfterEvents(
        op, [&](Operation *producer, sched::WaitOp wait) -> Operation * {
          Operation *end = settled.lookup(producer);
          return end ? end : wait.getOperation();
        });
  }

  /// The steps read fp32 gradients: each gradient not already fp32 is cast
  /// into a transient fp32 buffer right before its step and freed after it,
  /// so one group's fp32 copy is alive at a time, not every group's (the
  /// norm and the finite check read the gradients as they are).
  void castStepGradients() {
    for (sched::OptimizerStepOp step : steps) {
      Value grads = step.getGrads();
      if (elementTypeOf(grads) == f32)
        continue;
      builder.setInsertionPoint(step);
      auto fp32 = allocLike(grads, f32, nameOf(grads, ".fp32"));
      sched::CastOp::create(builder, step.getLoc(), grads, fp32);
      step.getGradsMutable().assign(fp32);
      // After the master -> parameter cast that follows the step.
      builder.setInsertionPointAfter(step->getNextNode());
      sched::FreeOp::create(builder, step.getLoc(), fp32);
    }
  }

  /// fp16: the loss is scaled up before backward and every step unscales,
  /// skipping the update (on every rank alike) when any rank's gradients
  /// overflowed; dynamic scaling then adapts the scale.
  LogicalResult scaleLoss() {
    if (steps.empty())
      return program.emitOpError("fp16 loss scaling needs an optimizer step");
    Location loc = program.getLoc();
    auto scalarType = sched::getBufferType(program.getContext(), 1, f32,
                                           sched::MemorySpace::Device);
    builder.setInsertionPointToStart(&body());
    auto lossScale = sched::AllocOp::create(
        builder, loc, scalarType, "loss_scale", sched::BufferRole::LossScale,
        /*persistent=*/true, /*offset=*/nullptr);
    for (auto loss : opsOf<sched::LossOp>(program))
      loss.getLossScaleMutable().assign(lossScale);

    builder.setInsertionPoint(steps.front());
    auto foundInf = sched::AllocOp::create(
        builder, loc, scalarType, "found_inf", sched::BufferRole::Scalar,
        /*persistent=*/false, /*offset=*/nullptr);
    sched::ZeroOp::create(builder, loc, foundInf);
    for (sched::OptimizerStepOp step : steps)
      sched::CheckFiniteOp::create(builder, step.getLoc(), step.getGrads(),
                                   foundInf);
    auto anyInf = sched::AllReduceOp::create(
        builder, loc, sched::EventType::get(program.getContext()), foundInf,
        sched::Group::World, sched::ReduceOp::Max, ValueRange());
    sched::WaitOp::create(builder, loc, anyInf);
    // Each pipeline stage checks its own gradients; all skip together.
    if (program.getGroupSize(sched::Group::Pipeline) > 1)
      sched::WaitOp::create(builder, loc,
                            sched::AllReduceOp::create(
                                builder, loc,
                                sched::EventType::get(program.getContext()),
                                foundInf, sched::Group::Pipeline,
                                sched::ReduceOp::Max, ValueRange()));

    Operation *afterSteps = nullptr;
    for (sched::OptimizerStepOp step : steps) {
      step.getFoundInfMutable().assign(foundInf);
      step.getLossScaleMutable().assign(lossScale);
      afterSteps = step;
      // The master -> parameter cast that follows the step.
      while (afterSteps->getNextNode() &&
             isa<sched::CastOp, sched::FreeOp>(afterSteps->getNextNode()) &&
             (afterSteps->getNextNode()->getOperand(0) == step.getParams() ||
              afterSteps->getNextNode()->getOperand(0) == step.getGrads()))
        afterSteps = afterSteps->getNextNode();
    }
    builder.setInsertionPointAfter(afterSteps);
    if (train().getLossScale().getKind() == plan::LossScaleKind::Dynamic)
      sched::UpdateLossScaleOp::create(builder, loc, lossScale, foundInf);
    sched::FreeOp::create(builder, loc, foundInf);
    return success();
  }

  sched::ProgramOp program;
  OpBuilder builder;
  /// What gradient buffers hold: the working type, or fp32 main gradients
  /// that backward adds into and reductions run on in place.
  Type working, reduce, f32, gradType;
  SmallVector<sched::OptimizerStepOp> steps;
  sched::TasksOp tasks;
  /// The slot buffers of staging copies, by name: each reduction a later
  /// body completes has one, whichever body of its backward issues it.
  llvm::StringMap<sched::AllocOp> slotBuffers;
  /// The waits in later bodies that complete a rewritten reduction already.
  llvm::DenseSet<Operation *> completedWaits;
  /// For each rewritten reduction, the last op of its conversion back.
  llvm::DenseMap<Operation *, Operation *> settled;
};

struct SchedInsertCastsPass
    : plan::impl::SchedInsertCastsBase<SchedInsertCastsPass> {
  void runOnOperation() override {
    sched::ProgramOp program = getOperation();
    if (program.getTrain().getPrecision() == plan::Precision::FP32)
      return;
    if (failed(MixedPrecisionRewrite(program).run()))
      return signalPassFailure();
  }
};

} // namespace
