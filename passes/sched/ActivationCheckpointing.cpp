//===- ActivationCheckpointing.cpp - Recompute blocks in backward ---------===//
//
// Full activation checkpointing on the single-rank program of sched-lower:
// each transformer block's forward saves only its input; right before the
// block's backward, its activations are allocated again and recomputed from
// that input (sched.recompute), and both are freed after the backward. The
// unit after a checkpointed block (the head, or a block's successor that is
// not a block) keeps its input itself, since the checkpointed block kept no
// copy of its output. docs/sched.md ("sched-activation-checkpointing") is the
// contract.
//
//===----------------------------------------------------------------------===//

#include "analysis/ActivationModel.h"
#include "passes/Passes.h"

#include "dialects/sched/SchedOpTable.h"

#include "mlir/IR/Builders.h"

namespace plan {
#define GEN_PASS_DEF_SCHEDACTIVATIONCHECKPOINTING
#include "passes/Passes.h.inc"
} // namespace plan

using namespace mlir;

namespace {

/// One forward's saves buffer with the ops sched-lower made around it: its
/// allocation, the unit's backward that reads it and the free after.
struct Saves {
  sched::AllocOp alloc;
  sched::BackwardOp backward;
  sched::FreeOp free;
};

/// The saves of `forward`, if they have the form sched-lower gives them.
FailureOr<Saves> savesOf(sched::ForwardOp forward) {
  Saves saves;
  saves.alloc = forward.getSaves().getDefiningOp<sched::AllocOp>();
  if (saves.alloc) {
    for (Operation *user : forward.getSaves().getUsers()) {
      if (auto backward = dyn_cast<sched::BackwardOp>(user);
          backward && backward.getActivations() == forward.getSaves() &&
          backward.getUnit() == forward.getUnit() &&
          backward.getMicroBatch() == forward.getMicroBatch())
        saves.backward = backward;
      else if (auto free = dyn_cast<sched::FreeOp>(user))
        saves.free = free;
    }
  }
  if (!saves.alloc || !saves.backward || !saves.free ||
      !saves.backward->isBeforeInBlock(saves.free))
    return forward.emitOpError(
        "saves are not a buffer of its own that its backward reads and a "
        "free ends: sched-activation-checkpointing expects the single-rank "
        "program of sched-lower");
  return saves;
}

sched::AllocOp allocLike(OpBuilder &builder, sched::AllocOp like,
                         const Twine &name, int64_t numel) {
  MemRefType type = like.getType();
  return sched::AllocOp::create(
      builder, like.getLoc(),
      sched::getBufferType(builder.getContext(), numel, type.getElementType(),
                           sched::getMemorySpace(type)),
      builder.getStringAttr(name), like.getRoleAttr(), UnitAttr(),
      IntegerAttr());
}

struct SchedActivationCheckpointingPass
    : plan::impl::SchedActivationCheckpointingBase<
          SchedActivationCheckpointingPass> {
  void runOnOperation() override {
    sched::ProgramOp program = getOperation();
    if (failed(sched::requireUnrolled(program, getArgument())))
      return signalPassFailure();
    plan::TrainAttr train = program.getTrain();
    if (train.getActivationCheckpointing() != plan::Checkpointing::Full)
      return;
    for (Operation &op : program.getBody().front())
      if ((sched::isCollective(&op) && !sched::isPipelineCollective(&op)) ||
          isa<sched::RecomputeOp>(op)) {
        op.emitOpError("is already in the program: "
                       "sched-activation-checkpointing expects the "
                       "single-rank program of sched-lower");
        return signalPassFailure();
      }

    // Every forward's saves are checked before the program changes (so
    // that the order of its ops is computed once, not after each insertion).
    struct Rewrite {
      sched::ForwardOp forward;
      plan::UnitOp unit;
      Saves saves;
      bool checkpointed;
    };
    SmallVector<Rewrite> rewrites;
    // The forward before, in program order: the previous unit of the same
    // micro-batch, whose output is this unit's input.
    bool lastCheckpointed = false;
    uint64_t lastMicroBatch = ~uint64_t{0};
    SymbolTableCollection symbolTables;
    for (sched::ForwardOp forward :
         program.getBody().getOps<sched::ForwardOp>()) {
      // A verified program's units resolve (ComputeOp verifiers).
      plan::UnitOp unit = forward.getUnitOp(symbolTables);
      bool checkpointed = plan::isBlockKind(unit.getKind());
      bool afterCheckpointed =
          lastCheckpointed && lastMicroBatch == forward.getMicroBatch();
      lastCheckpointed = checkpointed;
      lastMicroBatch = forward.getMicroBatch();
      if (!checkpointed && !afterCheckpointed)
        continue;
      FailureOr<Saves> saves = savesOf(forward);
      if (failed(saves))
        return signalPassFailure();
      rewrites.push_back({forward, unit, *saves, checkpointed});
    }

    OpBuilder builder(program.getContext());
    int64_t inputElements =
        plan::checkpointElements(program.getModel(), program.getTrain(),
                                 plan::tensorShareOf(program.getPlanOp()));
    for (Rewrite &rewrite : rewrites) {
      if (!rewrite.checkpointed) {
        keepOwnInput(builder, rewrite.unit, rewrite.saves);
        continue;
      }
      std::string suffix =
          (".mb" + Twine(rewrite.forward.getMicroBatch())).str();
      checkpoint(builder, rewrite.forward, rewrite.unit, rewrite.saves,
                 inputElements, suffix);
    }
  }

  /// The forward saves its input alone (`inputElements`); the backward's
  /// activations come from a recompute right before it.
  void checkpoint(OpBuilder &builder, sched::ForwardOp forward,
                  plan::UnitOp unit, Saves saves, int64_t inputElements,
                  const std::string &suffix) {
    builder.setInsertionPoint(saves.alloc);
    Value input =
        allocLike(builder, saves.alloc, unit.getSymName() + ".input" + suffix,
                  inputElements);
    forward.getSavesMutable().assign(input);
    // The saves buffer keeps its size (the recompute saves what the forward
    // did) and now lives from the recompute to the backward's free.
    saves.alloc->moveBefore(saves.backward);
    builder.setInsertionPoint(saves.backward);
    sched::RecomputeOp::create(
        builder, forward.getLoc(), forward.getUnit(),
        forward.getMicroBatchAttr(), /*part=*/IntegerAttr(),
        saves.backward.getParams(), saves.backward.getTied(),
        saves.backward.getFrozen(), input, /*in=*/Value(),
        saves.alloc.getBuffer(), /*out=*/Value());
    builder.setInsertionPointAfter(saves.free);
    sched::FreeOp::create(builder, saves.free.getLoc(), input);
  }

  /// The unit also saves its input, which the checkpointed block before it
  /// no longer keeps.
  void keepOwnInput(OpBuilder &builder, plan::UnitOp unit, Saves saves) {
    sched::ProgramOp program = getOperation();
    builder.setInsertionPoint(saves.alloc);
    sched::AllocOp larger =
        allocLike(builder, saves.alloc, saves.alloc.getName(),
                  plan::savesElements(unit, program.getModel(),
                                      program.getTrain(), /*ownInput=*/true));
    saves.alloc.getBuffer().replaceAllUsesWith(larger.getBuffer());
    saves.alloc->erase();
  }
};

} // namespace
