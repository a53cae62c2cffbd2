//===- DequantizeBase.cpp - A frozen base in the working type for compute -===//
//
// `sched-dequantize-base` (docs/sched.md): a LoRA run's frozen base is
// stored as the plan says (`model.base`): NF4 bytes for QLoRA, or another
// float type than the working one (bf16 under fp32). Every earlier pass
// moves it as stored (gathered, offloaded, prefetched in its own bytes); this
// one, last before verification, converts it where compute reads it: a
// transient working-type buffer, filled by sched.dequantize right before the
// forward, recompute or backward, and freed right after. A recompute and the
// backward of the same unit and micro-batch that follows it share one.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace plan {
#define GEN_PASS_DEF_SCHEDDEQUANTIZEBASE
#include "passes/Passes.h.inc"
} // namespace plan

using namespace mlir;

namespace {

MemRefType bufferType(Value buffer) {
  return cast<MemRefType>(buffer.getType());
}

/// A converted base: the buffer compute reads, and the op after which it is
/// freed.
struct Converted {
  Value working;
  sched::FreeOp free;
};

class BaseConversion {
public:
  explicit BaseConversion(sched::ProgramOp program)
      : program(program), builder(program.getContext()),
        working(sched::getStorageElementType(
            program.getContext(),
            plan::workingStorage(program.getTrain().getPrecision()))) {}

  void run() {
    // Without a frozen parameter there is no base to convert.
    plan::PlanOp plan = program.getPlanOp();
    if (!plan || llvm::none_of(plan.getBody().getOps<plan::UnitOp>(),
                               [](plan::UnitOp unit) {
                                 return unit.getFrozenNumel() > 0;
                               }))
      return;
    // Each compute op's conversion is its own, so a pipeline stage's
    // sched.tasks is rewritten body by body.
    SmallVector<Operation *> computes;
    program.walk([&](Operation *op) {
      if (isa<sched::ForwardOp, sched::RecomputeOp, sched::BackwardOp>(op))
        computes.push_back(op);
    });
    for (Operation *op : computes)
      convertOperands(op);
  }

private:
  /// The operands of `op` that hold a frozen base, with the unit that
  /// stores it: `frozen` (its own) and `tied` when the tie is to a frozen
  /// parameter.
  SmallVector<std::pair<OpOperand *, plan::UnitOp>>
  baseOperands(Operation *op) {
    SmallVector<std::pair<OpOperand *, plan::UnitOp>> operands;
    auto collect = [&](auto compute) {
      plan::UnitOp unit = compute.getUnitOp(symbolTables);
      if (!unit)
        return;
      if (!compute.getFrozenMutable().empty())
        operands.push_back({&compute.getFrozenMutable()[0], unit});
      if (compute.getTiedMutable().empty())
        return;
      if (auto [owner, tied] = unit.lookupTiedOwner(); tied && tied.getFrozen())
        operands.push_back({&compute.getTiedMutable()[0], owner});
    };
    if (auto forward = dyn_cast<sched::ForwardOp>(op))
      collect(forward);
    else if (auto recompute = dyn_cast<sched::RecomputeOp>(op))
      collect(recompute);
    else
      collect(cast<sched::BackwardOp>(op));
    return operands;
  }

  void convertOperands(Operation *op) {
    for (auto [operand, owner] : baseOperands(op)) {
      Value stored = operand->get();
      if (bufferType(stored).getElementType() == working)
        continue;
      // The backward right after its recompute reads the base the
      // recompute converted.
      auto shared = converted.find(stored);
      if (shared != converted.end() && isa<sched::BackwardOp>(op) &&
          shared->second.free->getPrevNode() &&
          isa<sched::RecomputeOp>(shared->second.free->getPrevNode()) &&
          shared->second.free->getNextNode() == op) {
        operand->set(shared->second.working);
        shared->second.free->moveAfter(op);
        converted.erase(shared);
        continue;
      }
      Location loc = op->getLoc();
      builder.setInsertionPoint(op);
      MemRefType type = sched::getBufferType(
          program.getContext(), owner.getFrozenNumel(), working,
          sched::getMemorySpace(bufferType(stored)));
      auto base = sched::AllocOp::create(
          builder, loc, type, (owner.getSymName() + ".base").str(),
          sched::BufferRole::Staging, /*persistent=*/false,
          /*offset=*/nullptr);
      sched::DequantizeOp::create(
          builder, loc,
          SymbolRefAttr::get(program.getPlanAttr().getAttr(),
                             {FlatSymbolRefAttr::get(owner.getSymNameAttr())}),
          stored, base);
      operand->set(base);
      builder.setInsertionPointAfter(op);
      auto free = sched::FreeOp::create(builder, loc, base);
      if (isa<sched::RecomputeOp>(op))
        converted[stored] = {base, free};
    }
  }

  sched::ProgramOp program;
  OpBuilder builder;
  Type working;
  SymbolTableCollection symbolTables;
  llvm::DenseMap<Value, Converted> converted;
};

struct SchedDequantizeBasePass
    : plan::impl::SchedDequantizeBaseBase<SchedDequantizeBasePass> {
  void runOnOperation() override {
    if (failed(plan::requireNoRepeat(getOperation(), getArgument())))
      return signalPassFailure();
    BaseConversion(getOperation()).run();
  }
};

} // namespace
