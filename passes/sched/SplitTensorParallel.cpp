//===- SplitTensorParallel.cpp - Tensor parallelism's activation collectives //
//
// On a program whose mesh has a tensor axis (T > 1), splits every forward,
// recompute and backward of a unit into the parts of its role
// (runtime/format/TensorParallelParts.h) and puts Megatron's activation
// collectives between them, on the `tensor` group, over explicit exchange
// buffers:
//
//   cut            forward                      backward
//   EnterColumns   -            (SP all_gather) all_reduce  (SP reduce_scatter)
//   LeaveRows      all_reduce   (SP reduce_scatter) -       (SP all_gather)
//   LossStatistics all_gather of each rank's statistics into the loss's `stats`
//
// Under sequence parallelism the parameters every tensor rank holds whole
// (norms, row-parallel biases, GPT-2's positions) see 1/T of the sequence,
// so their gradients are summed over the tensor group before anything
// reduces them over data-parallel ranks. Clipping's norm and fp16's overflow
// flag, each rank's of its slices, are reduced over the tensor group too.
// docs/sched.md ("sched-split-tensor-parallel") is the contract.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Twine.h"

#include <optional>
#include <string>

namespace plan {
#define GEN_PASS_DEF_SCHEDSPLITTENSORPARALLEL
#include "passes/Passes.h.inc"
} // namespace plan

using namespace mlir;
namespace tp = plan::rt::tp;

namespace {

/// A trainable parameter of a unit that every tensor rank holds whole: its
/// elements within the unit's stored elements.
struct WholeParam {
  int64_t offset, numel;
};

/// The buffer `buffer` is a view of (itself if none), and the view's offset
/// in it.
std::pair<Value, int64_t> rootOf(Value buffer) {
  int64_t offset = 0;
  while (auto view = buffer.getDefiningOp<sched::ViewOp>()) {
    offset += static_cast<int64_t>(view.getOffset());
    buffer = view.getSource();
  }
  return {buffer, offset};
}

class TensorParallelSplit {
public:
  explicit TensorParallelSplit(sched::ProgramOp program)
      : program(program), builder(program.getContext()),
        eventType(sched::EventType::get(program.getContext())) {}

  LogicalResult run();

private:
  Value alloc(Operation *before, const Twine &name, int64_t numel,
              Type elementType);
  /// The compute stream waits for `event` (at the insertion point).
  void waitFor(Value event) { sched::WaitOp::create(builder, loc, event); }
  /// `buffer` reduced in place over the tensor group, waited for.
  void reduceOverTensor(Value buffer,
                        sched::ReduceOp reduce = sched::ReduceOp::Sum);
  /// `src` reduce-scattered (summed) or all-gathered over the tensor group
  /// into a new exchange buffer of `numel` elements, waited for; `src` is
  /// freed.
  Value moveOverTensor(Value src, bool scatter, int64_t numel,
                       const std::string &name);
  /// Forward or recompute: the cut after a part, from what the part wrote
  /// (`out`) to what the next part reads; emitted at the insertion point.
  Value forwardCut(tp::Boundary cut, Value out, const std::string &name);
  /// Backward: the cut before part k, from what part k wrote (`in_grad`) to
  /// what part k - 1 reads (`out_grad`).
  Value backwardCut(tp::Boundary cut, Value inGrad, const std::string &name);

  LogicalResult splitForward(Operation *op, plan::UnitOp unit,
                             tp::UnitRole role);
  LogicalResult splitBackward(sched::BackwardOp op, plan::UnitOp unit,
                              tp::UnitRole role);
  void reduceWholeGradients();
  void reduceStepScalars();

  sched::ProgramOp program;
  OpBuilder builder;
  SymbolTableCollection symbolTables;
  Type eventType;
  Location loc = program.getLoc();
  tp::ExchangeShape exchange;
  Type statsType;
  // The loss of each micro-batch's head, which reads the statistics, by
  // block and micro-batch (a pipeline stage's sched.tasks has a head body
  // per variant, each written for one micro-batch).
  llvm::DenseMap<std::pair<Block *, int64_t>, sched::LossOp> losses;
  // Under SP: each unit's last backward part per gradient it adds into (a
  // buffer, from one zeroing of it to the next: a slot of a pipeline's
  // loop written out holds one micro-batch's gradient after another), and
  // the unit's parameters held whole.
  llvm::MapVector<std::tuple<Operation *, Value, int64_t>, sched::BackwardOp>
      lastBackward;
  // How many times the root of each backward's gradients was zeroed before
  // it.
  llvm::DenseMap<Operation *, int64_t> gradientEpoch;
  llvm::DenseMap<Operation *, SmallVector<WholeParam>> wholeParams;
};

Value TensorParallelSplit::alloc(Operation *before, const Twine &name,
                                 int64_t numel, Type elementType) {
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPoint(before);
  MemRefType type = sched::getBufferType(
      builder.getContext(), numel, elementType, sched::MemorySpace::Device);
  return sched::AllocOp::create(
      builder, loc, type, builder.getStringAttr(name),
      sched::BufferRoleAttr::get(builder.getContext(),
                                 sched::BufferRole::Exchange),
      UnitAttr(), IntegerAttr());
}

void TensorParallelSplit::reduceOverTensor(Value buffer,
                                           sched::ReduceOp reduce) {
  waitFor(sched::AllReduceOp::create(builder, loc, eventType, buffer,
                                     sched::Group::Tensor, reduce,
                                     ValueRange()));
}

Value TensorParallelSplit::moveOverTensor(Value src, bool scatter,
                                          int64_t numel,
                                          const std::string &name) {
  Type element = cast<MemRefType>(src.getType()).getElementType();
  Value dst = alloc(&*builder.getInsertionPoint(), name, numel, element);
  if (scatter)
    waitFor(sched::ReduceScatterOp::create(
        builder, loc, eventType, src, dst, sched::Group::Tensor,
        sched::ReduceOp::Sum, /*accumulate=*/false, ValueRange()));
  else
    waitFor(sched::AllGatherOp::create(builder, loc, eventType, src, dst,
                                       sched::Group::Tensor, ValueRange()));
  sched::FreeOp::create(builder, loc, src);
  return dst;
}

Value TensorParallelSplit::forwardCut(tp::Boundary cut, Value out,
                                      const std::string &name) {
  int64_t consumed = exchange.consumed(cut);
  switch (cut) {
  case tp::Boundary::EnterColumns:
    return exchange.sequenceParallel
               ? moveOverTensor(out, false, consumed, name)
               : out;
  case tp::Boundary::LeaveRows:
    if (exchange.sequenceParallel)
      return moveOverTensor(out, true, consumed, name);
    reduceOverTensor(out);
    return out;
  case tp::Boundary::LossStatistics:
    break;
  }
  return moveOverTensor(out, false, consumed, name);
}

Value TensorParallelSplit::backwardCut(tp::Boundary cut, Value inGrad,
                                       const std::string &name) {
  int64_t produced = exchange.produced(cut);
  if (cut == tp::Boundary::EnterColumns) {
    if (exchange.sequenceParallel)
      return moveOverTensor(inGrad, true, produced, name);
    reduceOverTensor(inGrad);
    return inGrad;
  }
  // LeaveRows (nothing flows back from the loss's statistics).
  return exchange.sequenceParallel
             ? moveOverTensor(inGrad, false, produced, name)
             : inGrad;
}

/// A forward or recompute becomes its parts, each but the last writing
/// what the cut after it exchanges.
LogicalResult TensorParallelSplit::splitForward(Operation *op,
                                                plan::UnitOp unit,
                                                tp::UnitRole role) {
  auto forward = dyn_cast<sched::ForwardOp>(op);
  auto recompute = dyn_cast<sched::RecomputeOp>(op);
  Value saves = forward ? forward.getSaves() : recompute.getSaves();
  Type working = cast<MemRefType>(saves.getType()).getElementType();
  int64_t mb = forward ? forward.getMicroBatch() : recompute.getMicroBatch();
  std::string base = (unit.getSymName() + (recompute ? ".recompute" : "") +
                      ".mb" + Twine(mb) + ".part")
                         .str();
  std::span<const tp::Boundary> cuts = tp::boundaries(role);
  const int64_t parts = tp::partCount(role);
  builder.setInsertionPoint(op);
  // A pipeline stage's input and output (sched-lower's, which frees them):
  // the residual stream into part 0 and out of the last part.
  Value stageIn = forward ? forward.getIn() : Value();
  Value stageOut = forward ? forward.getOut() : Value();
  Value in;
  for (int64_t part = 0; part < parts; ++part) {
    std::string name = base + std::to_string(part);
    Value out;
    std::optional<tp::Boundary> cut;
    if (part < static_cast<int64_t>(cuts.size())) {
      cut = cuts[part];
      bool stats = *cut == tp::Boundary::LossStatistics;
      out = alloc(op, name + ".out", exchange.produced(*cut),
                  stats ? statsType : working);
    }
    IntegerAttr partAttr = builder.getI64IntegerAttr(part);
    if (forward)
      sched::ForwardOp::create(builder, loc, forward.getUnit(),
                               forward.getMicroBatchAttr(), partAttr,
                               forward.getParams(), forward.getTied(),
                               forward.getFrozen(), part == 0 ? stageIn : in,
                               saves, out || part + 1 < parts ? out : stageOut);
    else
      sched::RecomputeOp::create(
          builder, loc, recompute.getUnit(), recompute.getMicroBatchAttr(),
          partAttr, recompute.getParams(), recompute.getTied(),
          recompute.getFrozen(), part == 0 ? recompute.getInput() : Value(), in,
          saves, out);
    if (in)
      sched::FreeOp::create(builder, loc, in);
    in = Value();
    if (!cut)
      continue;
    std::string nextName = base + std::to_string(part + 1) + ".in";
    if (*cut != tp::Boundary::LossStatistics) {
      in = forwardCut(*cut, out, nextName);
      continue;
    }
    // The loss reads every rank's statistics; only a forward has a loss.
    if (recompute)
      return op->emitOpError("recomputes a head: the loss's statistics are "
                             "exchanged once, in its forward");
    sched::LossOp loss = losses.lookup({op->getBlock(), mb});
    if (!loss || loss.getUnit() != forward.getUnit() ||
        !op->isBeforeInBlock(loss))
      return op->emitOpError("the head's forward has no sched.loss after it "
                             "for micro-batch ")
             << mb;
    Value stats = forwardCut(*cut, out,
                             unit.getSymName().str() + ".mb" +
                                 std::to_string(mb) + ".stats");
    loss.getStatsMutable().assign(stats);
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointAfter(loss);
    sched::FreeOp::create(builder, loc, stats);
  }
  op->erase();
  return success();
}

/// A backward becomes its parts in reverse, each but part 0 writing the
/// gradient of its input, which the cut before it exchanges.
LogicalResult TensorParallelSplit::splitBackward(sched::BackwardOp op,
                                                 plan::UnitOp unit,
                                                 tp::UnitRole role) {
  Type working =
      cast<MemRefType>(op.getActivations().getType()).getElementType();
  std::string base =
      (unit.getSymName() + ".mb" + Twine(op.getMicroBatch()) + ".part").str();
  std::span<const tp::Boundary> cuts = tp::boundaries(role);
  const int64_t parts = tp::partCount(role);
  builder.setInsertionPoint(op);
  // A pipeline stage's output gradient (received) seeds the last part; its
  // input gradient (sent back) is part 0's; sched-lower frees both.
  Value outGrad;
  sched::BackwardOp last;
  for (int64_t part = parts - 1; part >= 0; --part) {
    std::string name = base + std::to_string(part);
    Value inGrad;
    if (part > 0)
      inGrad = alloc(op, name + ".in_grad", exchange.consumed(cuts[part - 1]),
                     working);
    last = sched::BackwardOp::create(
        builder, loc, op.getUnit(), op.getMicroBatchAttr(),
        builder.getI64IntegerAttr(part), op.getParams(), op.getTied(),
        op.getFrozen(), op.getActivations(),
        outGrad || part + 1 < parts ? outGrad : op.getOutGrad(), op.getGrads(),
        op.getTiedGrads(), part == 0 ? op.getInGrad() : inGrad);
    if (outGrad)
      sched::FreeOp::create(builder, loc, outGrad);
    outGrad = inGrad
                  ? backwardCut(cuts[part - 1], inGrad,
                                base + std::to_string(part - 1) + ".out_grad")
                  : Value();
  }
  if (exchange.sequenceParallel && last.getGrads() &&
      !wholeParams[unit.getOperation()].empty())
    lastBackward[{unit.getOperation(), rootOf(last.getGrads()).first,
                  gradientEpoch.lookup(op)}] = last;
  op->erase();
  return success();
}

/// Under SP: after the last backward of each unit that adds into one
/// gradient buffer (each micro-batch's, or the one accumulated over them),
/// the gradients of its whole parameters are summed over the tensor group:
/// once per buffer, so that nothing is summed twice.
void TensorParallelSplit::reduceWholeGradients() {
  for (auto &[key, backward] : lastBackward) {
    Operation *unit = std::get<0>(key);
    auto [root, unitOffset] = rootOf(backward.getGrads());
    builder.setInsertionPointAfter(backward);
    for (const WholeParam &param : wholeParams[unit]) {
      MemRefType type = sched::getBufferType(
          builder.getContext(), param.numel,
          cast<MemRefType>(root.getType()).getElementType(),
          sched::getMemorySpace(cast<MemRefType>(root.getType())));
      Value view = sched::ViewOp::create(
          builder, loc, type, root,
          builder.getI64IntegerAttr(unitOffset + param.offset));
      reduceOverTensor(view);
    }
  }
}

/// The step's scalars are each rank's of its slices: the gradient norm
/// (whole parameters weighted 1/T, `tensor_replicas`) is summed over the
/// tensor group and fp16's overflow flag maximised, after what reduces them
/// over data-parallel ranks, before anything reads them.
void TensorParallelSplit::reduceStepScalars() {
  Block &body = program.getBody().front();
  // Each scalar's last writer, and how it combines over the ranks.
  llvm::MapVector<Value, std::pair<Operation *, sched::ReduceOp>> scalars;
  for (Operation &op : body) {
    if (auto norm = dyn_cast<sched::GradNormOp>(op)) {
      norm.setTensorReplicas(true);
      scalars[norm.getNorm()] = {&op, sched::ReduceOp::Sum};
    } else if (auto check = dyn_cast<sched::CheckFiniteOp>(op)) {
      scalars[check.getFoundInf()] = {&op, sched::ReduceOp::Max};
    }
  }
  // A data-parallel reduction of the scalar (and its wait) comes first.
  for (auto &[scalar, write] : scalars) {
    Operation *last = write.first;
    for (Operation *op = last->getNextNode(); op; op = op->getNextNode()) {
      auto reduce = dyn_cast<sched::AllReduceOp>(op);
      if (!reduce || reduce.getBuffer() != scalar)
        continue;
      last = op;
      for (Operation *user : reduce.getDone().getUsers())
        if (isa<sched::WaitOp>(user))
          last = user;
    }
    builder.setInsertionPointAfter(last);
    reduceOverTensor(scalar, write.second);
  }
}

LogicalResult TensorParallelSplit::run() {
  plan::PlanOp plan = program.getPlanOp();
  exchange = sched::getExchangeShape(program);
  if (exchange.tensor <= 1)
    return success();
  statsType = builder.getF32Type();

  SmallVector<Operation *> compute;
  // Each compute op is split where it stands, so a pipeline stage's
  // sched.tasks is split body by body, in the order of its bodies.
  llvm::DenseMap<Value, int64_t> zeroed;
  WalkResult walked = program.walk([&](Operation *op) {
    if (auto zero = dyn_cast<sched::ZeroOp>(op))
      ++zeroed[rootOf(zero.getBuffer()).first];
    if (auto backward = dyn_cast<sched::BackwardOp>(op);
        backward && backward.getGrads())
      gradientEpoch[op] = zeroed.lookup(rootOf(backward.getGrads()).first);
    if (auto loss = dyn_cast<sched::LossOp>(op))
      losses[{op->getBlock(), loss.getMicroBatch()}] = loss;
    else if (isa<sched::ForwardOp, sched::RecomputeOp, sched::BackwardOp>(op))
      compute.push_back(op);
    if (auto forward = dyn_cast<sched::ForwardOp>(op);
        forward &&
        (forward.getPart() != 0 || (forward.getOut() && !program.getStage()))) {
      op->emitOpError("is a part already: sched-split-tensor-parallel "
                      "splits whole units");
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (walked.wasInterrupted())
    return failure();

  // The parameters each unit holds whole, at their offsets among its
  // stored elements.
  for (plan::UnitOp unit : plan.getBody().getOps<plan::UnitOp>()) {
    SmallVector<WholeParam> &whole = wholeParams[unit.getOperation()];
    int64_t offset = 0;
    for (auto param : unit.getBody().getOps<plan::ParamOp>()) {
      if (param.getTiedTo() || param.getFrozen())
        continue;
      int64_t numel = param.getLocalNumel(exchange.tensor);
      if (!param.getSplitAttr())
        whole.push_back({offset, numel});
      offset += numel;
    }
  }

  for (Operation *op : compute) {
    auto ref = op->getAttrOfType<SymbolRefAttr>("unit");
    auto unit = dyn_cast_or_null<plan::UnitOp>(
        symbolTables.lookupNearestSymbolFrom(program->getParentOp(), ref));
    if (!unit)
      return op->emitOpError("'") << ref << "' does not name a plan.unit";
    std::optional<tp::UnitRole> role = sched::getTensorParallelRole(
        unit.getKind(), program.getModel().getFamily());
    if (!role)
      return op->emitOpError("unit '")
             << unit.getSymName() << "' is a "
             << plan::stringifyUnitKind(unit.getKind())
             << ", which has no tensor-parallel layout";
    if (auto backward = dyn_cast<sched::BackwardOp>(op)) {
      if (failed(splitBackward(backward, unit, *role)))
        return failure();
    } else if (failed(splitForward(op, unit, *role))) {
      return failure();
    }
  }
  if (exchange.sequenceParallel)
    reduceWholeGradients();
  reduceStepScalars();
  return success();
}

struct SchedSplitTensorParallelPass
    : plan::impl::SchedSplitTensorParallelBase<SchedSplitTensorParallelPass> {
  void runOnOperation() override {
    sched::ProgramOp program = getOperation();
    // A pipeline stage's sched.tasks is split body by body (under sequence
    // parallelism each body's gradient is its own from one zeroing to the
    // next, so its whole parameters' sum follows its own backward).
    if (failed(plan::requireNoRepeat(program, getArgument())) ||
        failed(TensorParallelSplit(program).run()))
      signalPassFailure();
  }
};

} // namespace
