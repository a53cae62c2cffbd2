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
#include "llvm/ADT/MapVector.h"

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
    // A pipeline stage's loop as a sched.tasks is rewritten body by body;
    // a sched.repeat comes later and is an error.
    SmallVector<sched::TasksOp> loops;
    Operation *flatForward = nullptr;
    for (Operation &op : program.getBody().front()) {
      if (auto tasks = dyn_cast<sched::TasksOp>(op))
        loops.push_back(tasks);
      else if (failed(sched::requireUnrolled(op, getArgument())))
        return signalPassFailure();
      else if (!flatForward && isa<sched::ForwardOp>(op))
        flatForward = &op;
    }
    plan::TrainAttr train = program.getTrain();
    if (train.getActivationCheckpointing() != plan::Checkpointing::Full)
      return;
    if (!loops.empty() && flatForward) {
      flatForward->emitOpError(
          "is outside the program's sched.tasks: "
          "sched-activation-checkpointing expects the tasks of sched-lower, "
          "which hold every forward");
      return signalPassFailure();
    }
    WalkResult walked = program.walk([&](Operation *op) {
      if ((sched::isCollective(op) && !sched::isPipelineCollective(op)) ||
          isa<sched::RecomputeOp>(op)) {
        op->emitOpError("is already in the program: "
                        "sched-activation-checkpointing expects the "
                        "single-rank program of sched-lower");
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (walked.wasInterrupted())
      return signalPassFailure();
    int64_t inputElements =
        plan::checkpointElements(program.getModel(), program.getTrain(),
                                 plan::tensorShareOf(program.getPlanOp()));
    if (!loops.empty()) {
      for (sched::TasksOp tasks : loops)
        if (failed(checkpointTasks(tasks, inputElements)))
          return signalPassFailure();
      return;
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

  /// The same on a pipeline stage's sched.tasks (docs/sched.md, "The
  /// micro-batch loop"), where a unit's saves are a slot of a buffer of the
  /// program in each body that runs its forward or its backward: a block's
  /// buffer holds its input instead, in as many slots, and each backward
  /// recomputes into saves of its own task; the unit after one keeps its
  /// own input in larger slots.
  LogicalResult checkpointTasks(sched::TasksOp tasks, int64_t inputElements) {
    sched::ProgramOp program = getOperation();
    struct Slotted {
      plan::UnitOp unit;
      bool checkpointed;
    };
    llvm::MapVector<sched::AllocOp, Slotted> buffers;
    SymbolTableCollection symbolTables;
    for (sched::TaskOp task : tasks.getTasks()) {
      // A body runs one chunk's forwards of one micro-batch in order.
      bool lastCheckpointed = false;
      for (auto forward : task.getBody().getOps<sched::ForwardOp>()) {
        plan::UnitOp unit = forward.getUnitOp(symbolTables);
        bool checkpointed = plan::isBlockKind(unit.getKind());
        bool afterCheckpointed = lastCheckpointed;
        lastCheckpointed = checkpointed;
        if (!checkpointed && !afterCheckpointed)
          continue;
        auto slot = forward.getSaves().getDefiningOp<sched::SlotOp>();
        auto buffer =
            slot ? slot.getSource().getDefiningOp<sched::AllocOp>() : nullptr;
        if (!buffer)
          return forward.emitOpError(
              "saves are not a slot of a buffer of the program: "
              "sched-activation-checkpointing expects the tasks of "
              "sched-lower");
        auto [it, added] =
            buffers.try_emplace(buffer, Slotted{unit, checkpointed});
        if (!added && it->second.unit != unit)
          return forward.emitOpError("saves into the slots of '")
                 << it->second.unit.getSymName() << "'";
      }
    }

    OpBuilder builder(program.getContext());
    for (auto &[buffer, slotted] : buffers) {
      SmallVector<sched::SlotOp> slots;
      for (Operation *user : buffer->getUsers())
        if (auto slot = dyn_cast<sched::SlotOp>(user))
          slots.push_back(slot);
      int64_t count = static_cast<int64_t>(slots.front().getSlots());
      builder.setInsertionPoint(buffer);
      // What each slot holds now.
      int64_t holds =
          slotted.checkpointed
              ? inputElements
              : plan::savesElements(slotted.unit, program.getModel(),
                                    program.getTrain(), /*ownInput=*/true);
      sched::AllocOp replaced =
          allocLike(builder, buffer,
                    slotted.checkpointed ? slotted.unit.getSymName() + ".input"
                                         : Twine(buffer.getName()),
                    count * holds);
      MemRefType slotType = sched::getBufferType(
          builder.getContext(), holds, replaced.getType().getElementType(),
          sched::getMemorySpace(replaced.getType()));
      for (sched::SlotOp slot : slots) {
        builder.setInsertionPoint(slot);
        auto moved = sched::SlotOp::create(
            builder, slot.getLoc(), slotType, replaced.getBuffer(),
            slot.getShiftAttr(), slot.getSlotsAttr());
        if (!slotted.checkpointed) {
          slot.getResult().replaceAllUsesWith(moved.getResult());
          slot.erase();
          continue;
        }
        // The forward saves its input in the slot; the backward reads saves
        // of its own that a recompute from that input fills right before
        // it, freed right after it.
        for (OpOperand &use : llvm::make_early_inc_range(slot->getUses())) {
          if (auto forward = dyn_cast<sched::ForwardOp>(use.getOwner())) {
            use.set(moved.getResult());
            continue;
          }
          auto backward = dyn_cast<sched::BackwardOp>(use.getOwner());
          if (!backward || use.get() != backward.getActivations())
            return use.getOwner()->emitOpError(
                "uses the saves of a checkpointed block: "
                "sched-activation-checkpointing expects the tasks of "
                "sched-lower");
          builder.setInsertionPoint(backward);
          sched::AllocOp saves =
              allocLike(builder, buffer,
                        slotted.unit.getSymName() + ".saves.mb" +
                            Twine(backward.getMicroBatch()),
                        slot.getType().getNumElements());
          moved->moveBefore(backward);
          sched::RecomputeOp::create(
              builder, backward.getLoc(), backward.getUnit(),
              backward.getMicroBatchAttr(), /*part=*/IntegerAttr(),
              backward.getParams(), backward.getTied(), backward.getFrozen(),
              moved.getResult(), /*in=*/Value(), saves.getBuffer(),
              /*out=*/Value());
          use.set(saves.getBuffer());
          builder.setInsertionPointAfter(backward);
          sched::FreeOp::create(builder, backward.getLoc(), saves.getBuffer());
        }
        slot.erase();
      }
      buffer.getBuffer().replaceAllUsesWith(replaced.getBuffer());
      buffer.erase();
    }
    return success();
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
