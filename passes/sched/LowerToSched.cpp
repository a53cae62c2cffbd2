//===- LowerToSched.cpp - The single-rank program of one step -------------===//
//
// Builds `sched.program @<plan>.step` from a plan whose units are grouped and
// sized: the persistent per-group state, each unit's views into it, the
// forward and backward of every micro-batch with its transient activations,
// the loss, clipping and one optimizer step per group. The program is what
// one rank would run alone; sched-insert-collectives distributes it.
// Under pipeline parallelism there is one program per pipeline rank, with
// the units of its model chunks in the schedule's order of forwards and
// backwards, and the sched.send / sched.recv between neighbouring stages.
// A unit tied to a parameter of another stage (a head tied to the input
// embedding) reads a replica of the owner's group on its own stage, whose
// gradient the two stages add on the embedding group before the step.
// docs/sched.md ("sched-lower") is the contract.
//
//===----------------------------------------------------------------------===//

#include "analysis/ActivationModel.h"
#include "analysis/PipelineModel.h"
#include "frontend/Models.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/Twine.h"

#include <map>
#include <optional>

namespace plan {
#define GEN_PASS_DEF_SCHEDLOWER
#include "passes/Passes.h.inc"
} // namespace plan

using namespace mlir;

namespace {

constexpr unsigned kNone = ~0u;

/// One unit as the program uses it, resolved once so that building the
/// program never searches the plan.
struct UnitSlot {
  plan::UnitOp op;
  plan::UnitKind kind;
  SymbolRefAttr ref; // @plan::@unit
  int64_t storedNumel = 0;
  // Its frozen base in its group's frozen buffer: bytes when that holds
  // bytes (an NF4 base), elements otherwise.
  int64_t frozenSize = 0;
  unsigned group = kNone;
  int64_t offset = 0, frozenOffset = 0; // in its group's flat buffers
  int64_t chunk = 0;          // its pipeline model chunk (0 without one)
  unsigned tiedOwner = kNone; // the unit storing the parameter this one ties
  bool tiesFrozen = false;    // ... which is frozen (a LoRA base)
  Value params, grads;        // views of the group's buffers; null when the
  Value frozen;               // unit stores none of that kind
};

/// A group's persistent buffers: those of what trains (none when nothing
/// does), and the frozen base (none outside a LoRA run), stored as its
/// parameters say: i8 bytes when one is NF4, their float type otherwise.
struct GroupSlot {
  plan::GroupOp op;
  SymbolRefAttr ref;           // @plan::@group
  SmallVector<unsigned> units; // in layout order
  Type frozenType;
  Value param, grad, frozen;
  SmallVector<Value, 2> state;
  // Under pipeline parallelism: a unit of another stage ties one of its
  // parameters (it is the input embedding of a tied head), and whether this
  // program holds it as that unit's replica rather than as its own.
  bool tiedAcrossStages = false;
  bool replica = false;
};

/// Resolves the plan's units and groups into slots, or explains which pass
/// the plan still needs.
LogicalResult resolvePlan(plan::PlanOp planOp, SmallVectorImpl<UnitSlot> &units,
                          SmallVectorImpl<GroupSlot> &groups) {
  MLIRContext *context = planOp.getContext();
  StringAttr planName = planOp.getSymNameAttr();
  llvm::StringMap<unsigned> unitIndex;
  // Parameter name -> the unit that stores it (tied parameters excluded).
  llvm::StringMap<unsigned> storedIn;
  llvm::StringSet<> frozenParams;
  for (auto unit : planOp.getBody().getOps<plan::UnitOp>()) {
    UnitSlot slot;
    slot.op = unit;
    slot.kind = unit.getKind();
    slot.ref = SymbolRefAttr::get(
        planName, {FlatSymbolRefAttr::get(unit.getSymNameAttr())});
    // A tensor-parallel rank stores its slice of each divided weight.
    slot.storedNumel = unit.getStoredNumel();
    slot.chunk = unit.getStage().value_or(0);
    for (auto param : unit.getBody().getOps<plan::ParamOp>()) {
      if (param.getTiedTo())
        continue;
      storedIn[param.getParamName()] = units.size();
      if (param.getFrozen())
        frozenParams.insert(param.getParamName());
    }
    unitIndex[unit.getSymName()] = units.size();
    units.push_back(slot);
  }
  if (units.empty())
    return planOp.emitError("plan '")
           << planOp.getSymName()
           << "' has no plan.unit: run plan-expand-presets first";

  for (auto group : planOp.getBody().getOps<plan::GroupOp>()) {
    if (!group.getPaddedNumel())
      return group.emitError("group '")
             << group.getSymName()
             << "' has no padded_numel: run plan-assign-sharding first";
    unsigned index = groups.size();
    GroupSlot slot;
    int64_t offset = 0, frozenOffset = 0;
    bool frozenBytes = group.storesFrozenAsBytes();
    std::optional<plan::BaseStorage> storage =
        frozenBytes ? plan::BaseStorage::NF4 : group.getFrozenElementStorage();
    if (storage)
      slot.frozenType = sched::getStorageElementType(context, *storage);
    for (auto ref : group.getUnits().getAsRange<FlatSymbolRefAttr>()) {
      auto it = unitIndex.find(ref.getValue());
      if (it == unitIndex.end())
        return group.emitError("'") << ref.getValue() << "' is not a plan.unit";
      UnitSlot &unit = units[it->second];
      slot.units.push_back(it->second);
      unit.group = index;
      unit.offset = offset;
      unit.frozenOffset = frozenOffset;
      unit.frozenSize = unit.op.getFrozenStorageSize(frozenBytes);
      offset += unit.storedNumel;
      frozenOffset += unit.frozenSize;
    }
    if (offset > static_cast<int64_t>(*group.getPaddedNumel()))
      return group.emitError("group '")
             << group.getSymName() << "' stores " << offset
             << " elements, more than its padded_numel "
             << *group.getPaddedNumel();
    if (frozenOffset >
        static_cast<int64_t>(group.getFrozenPaddedNumel().value_or(0)))
      return group.emitError("group '")
             << group.getSymName() << "' stores " << frozenOffset
             << (frozenBytes ? " frozen bytes" : " frozen elements")
             << ", more than its frozen_padded_numel "
             << group.getFrozenPaddedNumel().value_or(0)
             << ": run plan-assign-sharding";
    slot.op = group;
    slot.ref = SymbolRefAttr::get(
        planName, {FlatSymbolRefAttr::get(context, group.getSymName())});
    groups.push_back(slot);
  }
  if (groups.empty())
    return planOp.emitError("plan '")
           << planOp.getSymName()
           << "' has no plan.group: run plan-wrap-units and "
              "plan-assign-sharding first";

  for (auto [index, unit] : llvm::enumerate(units)) {
    if (unit.group == kNone)
      return unit.op.emitError("unit '")
             << unit.op.getSymName()
             << "' is in no plan.group: its parameters have no storage";
    for (auto param : unit.op.getBody().getOps<plan::ParamOp>()) {
      std::optional<StringRef> tied = param.getTiedTo();
      if (!tied)
        continue;
      auto owner = storedIn.find(*tied);
      // A compute op takes one `tied` buffer: the whole unit that stores the
      // parameters this one shares.
      if (owner == storedIn.end())
        return param.emitError("parameter '")
               << param.getParamName() << "' is tied to '" << *tied
               << "', which is itself tied: tie it to the stored parameter";
      if (owner->second == index)
        return param.emitError("parameter '")
               << param.getParamName() << "' is tied to '" << *tied
               << "' of its own unit";
      if (unit.tiedOwner != kNone && unit.tiedOwner != owner->second)
        return param.emitError("unit '")
               << unit.op.getSymName()
               << "' ties parameters of two other units; a unit may tie "
                  "parameters of one";
      unit.tiedOwner = owner->second;
      unit.tiesFrozen = frozenParams.contains(*tied);
      // Across pipeline ranks the tie's stage holds a replica of the
      // owner's group, kept equal over the embedding group: the first
      // stage's and the last's.
      int64_t ownerRank =
          planOp.getPipelineRankOfChunk(units[owner->second].chunk);
      int64_t rank = planOp.getPipelineRankOfChunk(unit.chunk);
      if (ownerRank == rank)
        continue;
      int64_t last = planOp.getPipelineRanks() - 1;
      if (!(ownerRank == 0 && rank == last))
        return param.emitError("parameter '")
               << param.getParamName() << "' of pipeline stage " << rank
               << " is tied to '" << *tied << "' of stage " << ownerRank
               << ": a tie across stages must go from the last stage to the "
                  "first (the head to the input embedding), whose ranks "
                  "share the embedding group";
    }
  }
  for (UnitSlot &unit : units)
    if (unit.tiedOwner != kNone &&
        planOp.getPipelineRankOfChunk(units[unit.tiedOwner].chunk) !=
            planOp.getPipelineRankOfChunk(unit.chunk))
      groups[units[unit.tiedOwner].group].tiedAcrossStages = true;

  plan::UnitOp last = units.back().op;
  if (!plan::isHeadKind(last.getKind()))
    return last.emitError("the last unit '")
           << last.getSymName() << "' is a "
           << plan::stringifyUnitKind(last.getKind())
           << ", not a head: the loss needs the head's logits";
  return success();
}

/// Emits the program's ops, all at the plan's location, in program order.
class StepBuilder {
public:
  StepBuilder(plan::PlanOp planOp, OpBuilder &builder)
      : planOp(planOp), b(builder), loc(planOp.getLoc()),
        f32(builder.getF32Type()) {}

  /// The program of a plan without a pipeline. With `partial`, of more
  /// than 4 micro-batches only 0, 1, 2 and the last (whether it did is
  /// returned): sched-roll-micro-batches makes the ones between copies of
  /// micro-batch 1.
  bool build(MutableArrayRef<UnitSlot> units, MutableArrayRef<GroupSlot> groups,
             bool partial);
  /// Pipeline rank `rank`'s program: the groups of its chunks, its
  /// forwards and backwards in the schedule's order, and the sends and
  /// receives between them.
  /// With `asTasks`, its micro-batch loop is a sched.tasks: each distinct
  /// forward and backward once, the order as its table, what crosses
  /// tasks in slots (docs/sched.md, "The micro-batch loop").
  void buildStage(MutableArrayRef<UnitSlot> units,
                  MutableArrayRef<GroupSlot> groups, int64_t rank,
                  bool asTasks);

private:
  /// An fp32 buffer (sched-insert-casts retypes it for mixed precision),
  /// or one of `elementType` (a frozen base, stored as it says).
  Value alloc(const Twine &name, sched::BufferRole role, int64_t numel,
              bool persistent, Type elementType = {}) {
    MemRefType type = sched::getBufferType(b.getContext(), numel,
                                           elementType ? elementType : f32,
                                           sched::MemorySpace::Device);
    return sched::AllocOp::create(
        b, loc, type, b.getStringAttr(name),
        sched::BufferRoleAttr::get(b.getContext(), role),
        persistent ? b.getUnitAttr() : UnitAttr(), IntegerAttr());
  }

  Value view(Value source, int64_t offset, int64_t numel) {
    MemRefType type = sched::getBufferType(
        b.getContext(), numel,
        cast<MemRefType>(source.getType()).getElementType(),
        sched::MemorySpace::Device);
    return sched::ViewOp::create(b, loc, type, source,
                                 b.getI64IntegerAttr(offset));
  }

  void buildState(MutableArrayRef<UnitSlot> units,
                  MutableArrayRef<GroupSlot> groups);
  void buildMicroBatch(MutableArrayRef<UnitSlot> units, int64_t microBatch);
  void buildStep(MutableArrayRef<GroupSlot> groups);

  /// A saves buffer of `unit` for micro-batch `microBatch`.
  Value allocSaves(const UnitSlot &unit, StringRef suffix);
  /// A buffer of one micro-batch's hidden states, exchanged between
  /// stages.
  Value allocHidden(const Twine &name);
  /// The elements of one micro-batch's hidden states on this rank.
  int64_t streamElements();
  /// The tied buffer a compute op of `unit` passes as `params` or `grads`.
  Value tiedOf(ArrayRef<UnitSlot> units, const UnitSlot &unit,
               Value UnitSlot::*view);
  void forwardChunk(MutableArrayRef<UnitSlot> units, ArrayRef<unsigned> chunk,
                    int64_t chunkIndex, int64_t microBatch);
  void backwardChunk(MutableArrayRef<UnitSlot> units, ArrayRef<unsigned> chunk,
                     int64_t chunkIndex, int64_t microBatch);
  /// Issues a send on the channel to `peer`, first finishing the one
  /// before it there (its wait, and its buffer's free).
  void send(Value buffer, sched::Peer peer, const UnitSlot &boundary,
            int64_t microBatch);
  void finishSend(sched::Peer peer);
  /// The loss of the head's micro-batch, seeding backward with 1 /
  /// micro-batches.
  void addLoss(const UnitSlot &head, IntegerAttr microBatch) {
    double scale = 1.0 / static_cast<double>(planOp.getTrain().getGradAccum());
    sched::LossOp::create(b, loc, head.ref, microBatch,
                          b.getF64FloatAttr(scale), /*loss_scale=*/Value(),
                          /*stats=*/Value());
  }
  /// Receives into `buffer` from `peer` and waits for it (what is received
  /// is read right after).
  void receive(Value buffer, sched::Peer peer, const UnitSlot &boundary,
               IntegerAttr microBatch);

  /// Under pipeline parallelism: the last model chunk (the head's); the
  /// saves and the stage input of each (chunk, micro-batch) between its
  /// forward and backward; the send in flight towards each neighbour.
  int64_t lastChunk = 0;
  llvm::DenseMap<std::pair<int64_t, int64_t>, SmallVector<Value>> chunkSaves;
  llvm::DenseMap<std::pair<int64_t, int64_t>, Value> chunkInput;
  std::pair<Value, Value> inFlight[2]; // (event, buffer) per sched::Peer

  /// Under `asTasks`, the stage's loop as tasks: the slot buffers of what
  /// crosses tasks, per model chunk (one per unit for the saves), and what
  /// the body being built waits for around its send.
  struct ChunkSlots {
    int64_t depth = 0; // micro-batches between its forward and backward
    SmallVector<Value> saves;
    Value input, output, inGrad;
  };
  /// A send in flight: the slot event instance (family, shift from the
  /// body's micro-batch) that names it, or the body's own send.
  struct Pending {
    int64_t family = 0, shift = 0;
    bool own = false;
  };
  bool inTasks = false;
  llvm::DenseMap<int64_t, ChunkSlots> slots;
  /// The slot event family of each (chunk, peer) that sends.
  std::map<std::pair<int64_t, unsigned>, int64_t> families;
  /// What the body's send finishes first, per peer.
  std::optional<Pending> sendAfter[2];
  /// Whether the body is the step's last, which waits for its own send.
  bool lastBody = false;
  int64_t currentChunk = 0;
  /// The event of the body's own send, for its tail.
  Value ownSend;

  Value slotOf(Value source, int64_t slotCount) {
    auto type = cast<MemRefType>(source.getType());
    MemRefType slotType =
        sched::getBufferType(b.getContext(), type.getNumElements() / slotCount,
                             type.getElementType(), sched::MemorySpace::Device);
    return sched::SlotOp::create(b, loc, slotType, source,
                                 b.getI64IntegerAttr(0),
                                 b.getI64IntegerAttr(slotCount));
  }
  void waitPending(const Pending &pending) {
    if (pending.own) {
      sched::WaitOp::create(b, loc, ownSend);
      return;
    }
    sched::WaitOp::create(b, loc,
                          sched::SlotEventOp::create(
                              b, loc, sched::EventType::get(b.getContext()),
                              b.getI64IntegerAttr(pending.family),
                              b.getI64IntegerAttr(pending.shift)));
  }
  /// Whether a chunk that starts with `first` frees its received input
  /// right after its forward: a block checkpointed without a graph copies
  /// its input into its saves; one with a graph keeps it where it is until
  /// its backward.
  bool copiesInput(const UnitSlot &first) {
    return planOp.getTrain().getActivationCheckpointing() ==
               plan::Checkpointing::Full &&
           plan::isBlockKind(first.kind);
  }
  void buildTasks(MutableArrayRef<UnitSlot> units,
                  ArrayRef<SmallVector<unsigned>> chunkUnits,
                  ArrayRef<plan::PipelineTask> order);

  plan::PlanOp planOp;
  OpBuilder &b;
  Location loc;
  Type f32;
};

bool StepBuilder::build(MutableArrayRef<UnitSlot> units,
                        MutableArrayRef<GroupSlot> groups, bool partial) {
  buildState(units, groups);
  for (GroupSlot &group : groups)
    if (group.grad)
      sched::ZeroOp::create(b, loc, group.grad);
  int64_t microBatches = planOp.getTrain().getGradAccum();
  partial = partial && microBatches > 4;
  for (int64_t i = 0; i < microBatches; ++i) {
    if (partial && i == 3)
      i = microBatches - 1;
    buildMicroBatch(units, i);
  }
  buildStep(groups);
  return partial;
}

void StepBuilder::buildState(MutableArrayRef<UnitSlot> units,
                             MutableArrayRef<GroupSlot> groups) {
  plan::OptimizerAttr optimizer = planOp.getTrain().getOptimizer();
  for (GroupSlot &group : groups) {
    StringRef name = group.op.getSymName();
    // The frozen base: read by compute, never reduced or stepped.
    if (int64_t frozen = group.op.getFrozenPaddedNumel().value_or(0)) {
      group.frozen = alloc(name + ".frozen", sched::BufferRole::Frozen, frozen,
                           /*persistent=*/true, group.frozenType);
      for (unsigned member : group.units) {
        UnitSlot &unit = units[member];
        if (unit.frozenSize)
          unit.frozen = view(group.frozen, unit.frozenOffset, unit.frozenSize);
      }
    }
    int64_t numel = static_cast<int64_t>(*group.op.getPaddedNumel());
    if (numel == 0)
      continue;
    group.param = alloc(name + ".param", sched::BufferRole::Param, numel,
                        /*persistent=*/true);
    group.grad = alloc(name + ".grad", sched::BufferRole::Grad, numel,
                       /*persistent=*/true);
    if (optimizer.getKind() == plan::OptimizerKind::AdamW) {
      group.state.push_back(alloc(name + ".exp_avg", sched::BufferRole::ExpAvg,
                                  numel, /*persistent=*/true));
      group.state.push_back(alloc(name + ".exp_avg_sq",
                                  sched::BufferRole::ExpAvgSq, numel,
                                  /*persistent=*/true));
    } else if (optimizer.getMomentum() != 0.0) {
      group.state.push_back(alloc(name + ".momentum",
                                  sched::BufferRole::Momentum, numel,
                                  /*persistent=*/true));
    }
    for (unsigned member : group.units) {
      UnitSlot &unit = units[member];
      if (!unit.storedNumel)
        continue;
      unit.params = view(group.param, unit.offset, unit.storedNumel);
      unit.grads = view(group.grad, unit.offset, unit.storedNumel);
    }
  }
}

Value StepBuilder::allocSaves(const UnitSlot &unit, StringRef suffix) {
  plan::UnitOp op = unit.op;
  return alloc(op.getSymName() + ".saves" + suffix,
               sched::BufferRole::Activations,
               plan::savesElements(op, planOp.getModel(), planOp.getTrain()),
               /*persistent=*/false);
}

Value StepBuilder::allocHidden(const Twine &name) {
  return alloc(name, sched::BufferRole::Exchange, streamElements(),
               /*persistent=*/false);
}

int64_t StepBuilder::streamElements() {
  // The program being built, or the one of the task being built.
  Operation *parent = b.getInsertionBlock()->getParentOp();
  auto program = dyn_cast<sched::ProgramOp>(parent);
  if (!program)
    program = parent->getParentOfType<sched::ProgramOp>();
  return sched::getExchangeShape(program).stream();
}

Value StepBuilder::tiedOf(ArrayRef<UnitSlot> units, const UnitSlot &unit,
                          Value UnitSlot::*view) {
  // A tie to a frozen parameter reads the owner's frozen base and gets no
  // gradient.
  if (unit.tiedOwner == kNone)
    return Value();
  if (unit.tiesFrozen)
    return view == &UnitSlot::params ? units[unit.tiedOwner].frozen : Value();
  return units[unit.tiedOwner].*view;
}

void StepBuilder::finishSend(sched::Peer peer) {
  // In a task the send before is a slot event, its buffer a slot.
  if (inTasks) {
    if (const std::optional<Pending> &before =
            sendAfter[static_cast<unsigned>(peer)])
      waitPending(*before);
    return;
  }
  auto &[event, buffer] = inFlight[static_cast<unsigned>(peer)];
  if (!event)
    return;
  sched::WaitOp::create(b, loc, event);
  sched::FreeOp::create(b, loc, buffer);
  event = buffer = Value();
}

void StepBuilder::send(Value buffer, sched::Peer peer, const UnitSlot &boundary,
                       int64_t microBatch) {
  finishSend(peer);
  Value event = sched::SendOp::create(
      b, loc, sched::EventType::get(b.getContext()), buffer,
      sched::PeerAttr::get(b.getContext(), peer), boundary.ref,
      b.getI64IntegerAttr(microBatch), ValueRange());
  if (!inTasks) {
    inFlight[static_cast<unsigned>(peer)] = {event, buffer};
    return;
  }
  // A later body waits for it through its slot event; the step's last
  // waits for it itself.
  if (lastBody) {
    ownSend = event;
    return;
  }
  sched::SlotSignalOp::create(b, loc, event,
                              b.getI64IntegerAttr(families.at(
                                  {currentChunk, static_cast<unsigned>(peer)})),
                              b.getI64IntegerAttr(0));
}

void StepBuilder::receive(Value buffer, sched::Peer peer,
                          const UnitSlot &boundary, IntegerAttr microBatch) {
  sched::WaitOp::create(
      b, loc,
      sched::RecvOp::create(b, loc, sched::EventType::get(b.getContext()),
                            buffer, sched::PeerAttr::get(b.getContext(), peer),
                            boundary.ref, microBatch, ValueRange()));
}

void StepBuilder::forwardChunk(MutableArrayRef<UnitSlot> units,
                               ArrayRef<unsigned> chunk, int64_t chunkIndex,
                               int64_t microBatch) {
  IntegerAttr mb = b.getI64IntegerAttr(microBatch);
  std::string suffix = (".mb" + Twine(microBatch)).str();
  currentChunk = chunkIndex;
  ChunkSlots *inSlots = inTasks ? &slots[chunkIndex] : nullptr;
  bool inputCopied = copiesInput(units[chunk.front()]);
  // The stage's input: the previous chunk's last unit's output.
  Value input;
  if (chunkIndex > 0) {
    plan::UnitOp first = units[chunk.front()].op;
    input = inSlots && !inputCopied
                ? slotOf(inSlots->input, inSlots->depth)
                : allocHidden(first.getSymName() + ".input" + suffix);
    receive(input, sched::Peer::Prev, units[chunk.front() - 1], mb);
  }
  SmallVector<Value> &saves = chunkSaves[{chunkIndex, microBatch}];
  Value output;
  for (auto [position, index] : llvm::enumerate(chunk)) {
    UnitSlot &unit = units[index];
    saves.push_back(inSlots ? slotOf(inSlots->saves[position], inSlots->depth)
                            : allocSaves(unit, suffix));
    bool last = index == chunk.back() && chunkIndex < lastChunk;
    if (last)
      output = inSlots ? slotOf(inSlots->output, 2)
                       : allocHidden(unit.op.getSymName() + ".output" + suffix);
    sched::ForwardOp::create(
        b, loc, unit.ref, mb, /*part=*/IntegerAttr(), unit.params,
        tiedOf(units, unit, &UnitSlot::params), unit.frozen,
        index == chunk.front() ? input : Value(), saves.back(), output);
  }
  if (input && inputCopied)
    sched::FreeOp::create(b, loc, input);
  else if (input && !inSlots)
    chunkInput[{chunkIndex, microBatch}] = input;
  if (inSlots)
    chunkSaves.erase({chunkIndex, microBatch});
  if (output)
    send(output, sched::Peer::Next, units[chunk.back()], microBatch);
  else
    addLoss(units[chunk.back()], mb);
}

void StepBuilder::backwardChunk(MutableArrayRef<UnitSlot> units,
                                ArrayRef<unsigned> chunk, int64_t chunkIndex,
                                int64_t microBatch) {
  IntegerAttr mb = b.getI64IntegerAttr(microBatch);
  std::string suffix = (".mb" + Twine(microBatch)).str();
  currentChunk = chunkIndex;
  ChunkSlots *inSlots = inTasks ? &slots[chunkIndex] : nullptr;
  // The gradient of this chunk's output, from the next chunk.
  Value outGrad;
  if (chunkIndex < lastChunk) {
    UnitSlot &last = units[chunk.back()];
    outGrad = allocHidden(last.op.getSymName() + ".output_grad" + suffix);
    receive(outGrad, sched::Peer::Next, last, mb);
  }
  // The gradient of its input, for the chunk before.
  Value inGrad;
  if (chunkIndex > 0)
    inGrad = inSlots ? slotOf(inSlots->inGrad, 2)
                     : allocHidden(units[chunk.front() - 1].op.getSymName() +
                                   ".output_grad" + suffix);
  // Its forward's saves: the same slots in a task.
  SmallVector<Value> saves;
  if (inSlots)
    for (Value source : inSlots->saves)
      saves.push_back(slotOf(source, inSlots->depth));
  else
    saves = chunkSaves.lookup({chunkIndex, microBatch});
  chunkSaves.erase({chunkIndex, microBatch});
  for (int64_t position = chunk.size() - 1; position >= 0; --position) {
    unsigned index = chunk[position];
    UnitSlot &unit = units[index];
    sched::BackwardOp::create(
        b, loc, unit.ref, mb, /*part=*/IntegerAttr(), unit.params,
        tiedOf(units, unit, &UnitSlot::params), unit.frozen, saves[position],
        index == chunk.back() ? outGrad : Value(), unit.grads,
        tiedOf(units, unit, &UnitSlot::grads),
        position == 0 ? inGrad : Value());
    if (!inSlots)
      sched::FreeOp::create(b, loc, saves[position]);
    if (index == chunk.back() && outGrad)
      sched::FreeOp::create(b, loc, outGrad);
  }
  if (Value input = chunkInput.lookup({chunkIndex, microBatch})) {
    sched::FreeOp::create(b, loc, input);
    chunkInput.erase({chunkIndex, microBatch});
  }
  if (inGrad)
    send(inGrad, sched::Peer::Prev, units[chunk.front() - 1], microBatch);
}

void StepBuilder::buildStage(MutableArrayRef<UnitSlot> units,
                             MutableArrayRef<GroupSlot> groups, int64_t rank,
                             bool asTasks) {
  int64_t ranks = planOp.getPipelineRanks();
  int64_t chunks = planOp.getPipelineChunks();
  lastChunk = chunks - 1;
  // The chunks' units, in order; the rank's groups.
  SmallVector<SmallVector<unsigned>> chunkUnits(chunks);
  for (auto [index, unit] : llvm::enumerate(units))
    chunkUnits[unit.chunk].push_back(index);
  // The groups of its chunks, and a replica of each group of another rank
  // that one of its units ties.
  SmallVector<GroupSlot> mine;
  for (auto [index, group] : llvm::enumerate(groups)) {
    bool own =
        planOp.getPipelineRankOfChunk(units[group.units.front()].chunk) == rank;
    bool tiedHere = llvm::any_of(units, [&](const UnitSlot &unit) {
      return unit.tiedOwner != kNone && units[unit.tiedOwner].group == index &&
             planOp.getPipelineRankOfChunk(unit.chunk) == rank;
    });
    if (!own && !(group.tiedAcrossStages && tiedHere))
      continue;
    mine.push_back(group);
    mine.back().replica = !own;
  }
  buildState(units, mine);
  for (GroupSlot &group : mine)
    if (group.grad)
      sched::ZeroOp::create(b, loc, group.grad);
  plan::ParallelAttr parallel = planOp.getParallel();
  std::vector<plan::PipelineTask> order = plan::pipelineTasks(
      parallel.getPipelineSchedule(), ranks, parallel.getVirtualStages(),
      planOp.getTrain().getGradAccum(), rank);
  if (asTasks) {
    buildTasks(units, chunkUnits, order);
  } else {
    for (const plan::PipelineTask &task : order) {
      if (task.backward)
        backwardChunk(units, chunkUnits[task.chunk], task.chunk,
                      task.microBatch);
      else
        forwardChunk(units, chunkUnits[task.chunk], task.chunk,
                     task.microBatch);
    }
    finishSend(sched::Peer::Next);
    finishSend(sched::Peer::Prev);
  }
  buildStep(mine);
}

void StepBuilder::buildTasks(MutableArrayRef<UnitSlot> units,
                             ArrayRef<SmallVector<unsigned>> chunkUnits,
                             ArrayRef<plan::PipelineTask> order) {
  auto sends = [&](const plan::PipelineTask &task) {
    return task.backward ? task.chunk > 0 : task.chunk < lastChunk;
  };
  auto peerOf = [](const plan::PipelineTask &task) {
    return static_cast<unsigned>(task.backward ? sched::Peer::Prev
                                               : sched::Peer::Next);
  };
  // Each chunk's depth (its most micro-batches forwarded and not yet
  // backwarded: those in flight hold distinct slots, as each chunk runs
  // its forwards and its backwards in micro-batch order), and a slot event
  // family for each (chunk, peer) that sends.
  SmallVector<int64_t> chunksInOrder;
  llvm::DenseMap<int64_t, int64_t> inFlightNow;
  for (const plan::PipelineTask &task : order) {
    auto [it, added] = slots.try_emplace(task.chunk);
    if (added)
      chunksInOrder.push_back(task.chunk);
    int64_t &now = inFlightNow[task.chunk];
    now += task.backward ? -1 : 1;
    it->second.depth = std::max(it->second.depth, now);
    if (sends(task) && !families.count({task.chunk, peerOf(task)})) {
      int64_t family = static_cast<int64_t>(families.size());
      families[{task.chunk, peerOf(task)}] = family;
    }
  }

  // The slot buffers, for the whole loop: per unit its saves and per chunk
  // its kept input, in `depth` slots; its output and its input's gradient
  // in 2, one being sent while the next is written (a send is finished by
  // the next one towards the same peer, before the chunk's next but one).
  int64_t stream = streamElements();
  SmallVector<Value> slotBuffers;
  auto slotBuffer = [&](const Twine &name, sched::BufferRole role,
                        int64_t numel) {
    slotBuffers.push_back(alloc(name, role, numel, /*persistent=*/false));
    return slotBuffers.back();
  };
  for (int64_t chunkIndex : chunksInOrder) {
    ChunkSlots &chunk = slots[chunkIndex];
    ArrayRef<unsigned> members = chunkUnits[chunkIndex];
    for (unsigned index : members) {
      plan::UnitOp op = units[index].op;
      chunk.saves.push_back(
          slotBuffer(op.getSymName() + ".saves", sched::BufferRole::Activations,
                     chunk.depth * plan::savesElements(op, planOp.getModel(),
                                                       planOp.getTrain())));
    }
    UnitSlot &first = units[members.front()];
    if (chunkIndex > 0 && !copiesInput(first))
      chunk.input =
          slotBuffer(first.op.getSymName() + ".input",
                     sched::BufferRole::Exchange, chunk.depth * stream);
    if (chunkIndex < lastChunk)
      chunk.output =
          slotBuffer(units[members.back()].op.getSymName() + ".output",
                     sched::BufferRole::Exchange, 2 * stream);
    if (chunkIndex > 0)
      chunk.inGrad = slotBuffer(units[members.front() - 1].op.getSymName() +
                                    ".output_grad",
                                sched::BufferRole::Exchange, 2 * stream);
  }

  // Each entry's body is keyed by its chunk and direction, the send in
  // flight its own send finishes first (another chunk's under
  // interleaving, at a shift that varies with the entry's place), and for
  // the step's last entry the sends it finishes at its end.
  using PendingKey = std::tuple<bool, bool, int64_t, int64_t>;
  auto keyOf = [](const std::optional<Pending> &pending) {
    return pending
               ? PendingKey(true, pending->own, pending->family, pending->shift)
               : PendingKey(false, false, 0, 0);
  };
  std::optional<std::pair<int64_t, int64_t>> lastSend[2]; // (chunk, mb)
  auto pendingFrom = [&](unsigned peer, int64_t microBatch) {
    std::optional<Pending> pending;
    if (const auto &send = lastSend[peer])
      pending = Pending{families.at({send->first, peer}),
                        send->second - microBatch, false};
    return pending;
  };
  const unsigned next = static_cast<unsigned>(sched::Peer::Next);
  const unsigned prev = static_cast<unsigned>(sched::Peer::Prev);
  struct Body {
    std::optional<Pending> after, tailNext, tailPrev;
  };
  std::map<std::tuple<int64_t, bool, PendingKey, PendingKey, PendingKey>,
           int64_t>
      bodyOf;
  SmallVector<int64_t> table;
  auto tasks = sched::TasksOp::create(
      b, loc, b.getI64IntegerAttr(static_cast<int64_t>(families.size())),
      b.getDenseI64ArrayAttr({}));
  Block &bodies = tasks.getBody().emplaceBlock();
  inTasks = true;
  for (auto [entry, task] : llvm::enumerate(order)) {
    Body body;
    unsigned peer = peerOf(task);
    if (sends(task)) {
      body.after = pendingFrom(peer, task.microBatch);
      lastSend[peer] = {task.chunk, task.microBatch};
    }
    bool last = entry + 1 == order.size();
    if (last) {
      body.tailNext = pendingFrom(next, task.microBatch);
      body.tailPrev = pendingFrom(prev, task.microBatch);
      // Its own send is the last towards its peer: it waits for it itself.
      if (sends(task))
        (peer == next ? body.tailNext : body.tailPrev)->own = true;
    }
    auto [it, added] = bodyOf.try_emplace(
        std::make_tuple(task.chunk, task.backward, keyOf(body.after),
                        keyOf(body.tailNext), keyOf(body.tailPrev)),
        static_cast<int64_t>(bodyOf.size()));
    table.append({it->second, task.microBatch});
    if (!added)
      continue;
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(&bodies);
    auto taskOp =
        sched::TaskOp::create(b, loc, b.getI64IntegerAttr(task.microBatch));
    b.setInsertionPointToStart(&taskOp.getBody().emplaceBlock());
    sendAfter[next] = sendAfter[prev] = std::nullopt;
    sendAfter[peer] = body.after;
    lastBody = last;
    ownSend = Value();
    if (task.backward)
      backwardChunk(units, chunkUnits[task.chunk], task.chunk, task.microBatch);
    else
      forwardChunk(units, chunkUnits[task.chunk], task.chunk, task.microBatch);
    // What the flat step finishes after its loop: the send towards the
    // next stage, then towards the previous one.
    for (const std::optional<Pending> &tail : {body.tailNext, body.tailPrev})
      if (tail)
        waitPending(*tail);
  }
  inTasks = false;
  tasks.setOrder(table);
  for (Value buffer : llvm::reverse(slotBuffers))
    sched::FreeOp::create(b, loc, buffer);
}

void StepBuilder::buildMicroBatch(MutableArrayRef<UnitSlot> units,
                                  int64_t microBatch) {
  IntegerAttr mb = b.getI64IntegerAttr(microBatch);
  std::string suffix = (".mb" + Twine(microBatch)).str();
  // What each unit's forward saves for its backward, in the working type
  // (sched-insert-casts retypes the buffers). sched-activation-checkpointing
  // turns a block's into its input alone.
  SmallVector<Value> saved(units.size());
  for (auto [index, unit] : llvm::enumerate(units)) {
    saved[index] = allocSaves(unit, suffix);
    sched::ForwardOp::create(b, loc, unit.ref, mb, /*part=*/IntegerAttr(),
                             unit.params,
                             tiedOf(units, unit, &UnitSlot::params),
                             unit.frozen, /*in=*/Value(), saved[index],
                             /*out=*/Value());
  }

  addLoss(units.back(), mb);

  for (int64_t index = units.size() - 1; index >= 0; --index) {
    UnitSlot &unit = units[index];
    sched::BackwardOp::create(
        b, loc, unit.ref, mb, /*part=*/IntegerAttr(), unit.params,
        tiedOf(units, unit, &UnitSlot::params), unit.frozen, saved[index],
        /*out_grad=*/Value(), unit.grads, tiedOf(units, unit, &UnitSlot::grads),
        /*in_grad=*/Value());
    sched::FreeOp::create(b, loc, saved[index]);
  }
}

void StepBuilder::buildStep(MutableArrayRef<GroupSlot> groups) {
  // A tied weight's two copies, the first stage's and the last's replica,
  // each hold what their own stage's units added: the sum is its gradient,
  // with which both take the same step.
  auto eventType = sched::EventType::get(b.getContext());
  SmallVector<Value> tiedSums;
  for (GroupSlot &group : groups)
    if (group.tiedAcrossStages && group.grad)
      tiedSums.push_back(sched::AllReduceOp::create(
          b, loc, eventType, group.grad, sched::Group::Embedding,
          sched::ReduceOp::Sum, ValueRange()));
  for (Value sum : tiedSums)
    sched::WaitOp::create(b, loc, sum);
  Value norm;
  if (planOp.getTrain().getGradClip() > 0.0) {
    norm = alloc("grad_norm", sched::BufferRole::Scalar, 1,
                 /*persistent=*/false);
    sched::ZeroOp::create(b, loc, norm);
    // A replica's gradient is its owner's, counted on the first stage.
    for (GroupSlot &group : groups)
      if (group.grad && !group.replica)
        sched::GradNormOp::create(b, loc, group.grad, norm);
    // Each stage's groups add their squares; the norm is the pipeline's.
    if (planOp.getPipelineRanks() > 1)
      sched::WaitOp::create(b, loc,
                            sched::AllReduceOp::create(
                                b, loc, eventType, norm, sched::Group::Pipeline,
                                sched::ReduceOp::Sum, ValueRange()));
  }
  for (GroupSlot &group : groups)
    if (group.param)
      sched::OptimizerStepOp::create(b, loc, group.ref, group.param, group.grad,
                                     group.state, norm, /*found_inf=*/Value(),
                                     /*loss_scale=*/Value());
  if (norm)
    sched::FreeOp::create(b, loc, norm);
}

struct SchedLowerPass : plan::impl::SchedLowerBase<SchedLowerPass> {
  using SchedLowerBase::SchedLowerBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    llvm::StringMap<sched::ProgramOp> programs;
    for (auto program : module.getOps<sched::ProgramOp>())
      programs.try_emplace(program.getPlan(), program);

    // Every plan is lowered or reported, so one run shows all the problems.
    bool anyFailed = false;
    for (auto planOp :
         llvm::make_early_inc_range(module.getOps<plan::PlanOp>()))
      if (failed(lowerPlan(planOp, symbols, programs)))
        anyFailed = true;
    if (anyFailed)
      signalPassFailure();
  }

  LogicalResult lowerPlan(plan::PlanOp planOp, SymbolTable &symbols,
                          const llvm::StringMap<sched::ProgramOp> &programs) {
    if (auto existing = programs.lookup(planOp.getSymName())) {
      InFlightDiagnostic diag = planOp.emitError("plan '")
                                << planOp.getSymName()
                                << "' is already lowered";
      diag.attachNote(existing.getLoc()) << "its program";
      return diag;
    }
    int64_t ranks = planOp.getPipelineRanks();
    SmallVector<std::string> names;
    if (ranks == 1)
      names.push_back((planOp.getSymName() + ".step").str());
    for (int64_t rank = 0; ranks > 1 && rank < ranks; ++rank)
      names.push_back((planOp.getSymName() + ".stage" + Twine(rank)).str());
    for (const std::string &name : names)
      if (Operation *clash = symbols.lookup(name)) {
        InFlightDiagnostic diag = planOp.emitError("the program of plan '")
                                  << planOp.getSymName() << "' would be named '"
                                  << name << "', which is taken";
        diag.attachNote(clash->getLoc()) << "by this symbol";
        return diag;
      }

    SmallVector<UnitSlot> units;
    SmallVector<GroupSlot> groups;
    if (failed(resolvePlan(planOp, units, groups)))
      return failure();
    if (ranks > 1 &&
        llvm::any_of(units, [](UnitSlot &unit) { return !unit.op.getStage(); }))
      return planOp.emitError("plan '")
             << planOp.getSymName()
             << "' has a pipeline but units without a stage: run "
                "plan-assign-stages first";

    OpBuilder builder(planOp.getContext());
    builder.setInsertionPointAfter(planOp);
    for (auto [rank, name] : llvm::enumerate(names)) {
      auto program = sched::ProgramOp::create(
          builder, planOp.getLoc(), builder.getStringAttr(name),
          FlatSymbolRefAttr::get(planOp.getSymNameAttr()),
          ranks > 1 ? builder.getI64IntegerAttr(rank) : IntegerAttr(),
          builder.getI64IntegerAttr(planOp.getTrain().getGradAccum()),
          planOp.getModel(), planOp.getCluster(), planOp.getTrain(),
          planOp.getParallel());
      OpBuilder body(planOp.getContext());
      body.setInsertionPointToStart(&program.getBody().emplaceBlock());
      // Each program gets its own views of the state.
      SmallVector<UnitSlot> programUnits(units);
      SmallVector<GroupSlot> programGroups(groups);
      StepBuilder stepBuilder(planOp, body);
      if (ranks > 1)
        stepBuilder.buildStage(programUnits, programGroups, rank,
                               pipelineTasks);
      else if (stepBuilder.build(programUnits, programGroups, rollMicroBatches))
        program->setAttr(sched::kPartialMicroBatchesAttr,
                         builder.getUnitAttr());
      builder.setInsertionPointAfter(program);
      symbols.insert(program);
    }
    return success();
  }
};

} // namespace
