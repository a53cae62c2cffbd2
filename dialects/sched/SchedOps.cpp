//===- SchedOps.cpp - Operations of the sched dialect ---------------------===//

#include "dialects/sched/SchedDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

#include <cmath>
#include <optional>

using namespace mlir;
using namespace sched;

void SchedDialect::registerOps() {
  addOperations<
#define GET_OP_LIST
#include "dialects/sched/SchedOps.cpp.inc"
      >();
}

static int64_t numel(Value buffer) {
  return cast<MemRefType>(buffer.getType()).getNumElements();
}
static Type elementType(Value buffer) {
  return cast<MemRefType>(buffer.getType()).getElementType();
}
static MemorySpace space(Value buffer) {
  return getMemorySpace(cast<MemRefType>(buffer.getType()));
}

//===----------------------------------------------------------------------===//
// ProgramOp
//===----------------------------------------------------------------------===//

plan::PlanOp ProgramOp::getPlanOp() {
  return mlir::SymbolTable::lookupNearestSymbolFrom<plan::PlanOp>(
      (*this)->getParentOp(), getPlanAttr());
}

/// Ranks in `group` on the mesh `grid`; 0 if unknown.
static int64_t groupSizeOn(shard::GridOp grid, Group group) {
  auto size = [&](plan::MeshAxis axis) {
    return plan::PlanOp::getMeshSize(grid, axis);
  };
  switch (group) {
  case Group::Shard:
    return size(plan::MeshAxis::Shard);
  case Group::Replicate:
    return size(plan::MeshAxis::Replicate);
  case Group::World:
    return size(plan::MeshAxis::Replicate) * size(plan::MeshAxis::Shard);
  case Group::Tensor:
    return size(plan::MeshAxis::Tensor);
  case Group::Pipeline:
    return size(plan::MeshAxis::Pipeline);
  case Group::Embedding:
    return size(plan::MeshAxis::Pipeline) > 1 ? 2 : 1;
  }
  return 0;
}

int64_t ProgramOp::getGroupSize(Group group) {
  plan::PlanOp plan = getPlanOp();
  return plan ? groupSizeOn(plan.getGridOp(), group) : 0;
}

bool ProgramOp::runsUnit(plan::UnitOp unit) {
  std::optional<int64_t> stage = getStage();
  plan::PlanOp plan = getPlanOp();
  if (!stage || !plan)
    return true;
  return plan.getPipelineRankOfChunk(unit.getStage().value_or(0)) == *stage;
}

bool ProgramOp::holdsGroup(plan::GroupOp group) {
  plan::PlanOp plan = getPlanOp();
  auto units = group.getUnits().getAsRange<FlatSymbolRefAttr>();
  if (!plan || units.empty())
    return true;
  plan::UnitOp first = plan.lookupUnit((*units.begin()).getValue());
  if (!first || runsUnit(first))
    return true;
  // A replica of the group a unit it runs ties (sched-lower). Only a tied
  // parameter's unit is asked whether it runs here: runsUnit looks the plan
  // and its mesh up, and this is asked of every group.
  for (auto unit : plan.getBody().getOps<plan::UnitOp>())
    for (auto param : unit.getBody().getOps<plan::ParamOp>()) {
      if (!param.getTiedTo())
        continue;
      plan::UnitOp owner = plan.lookupTiedTo(param).first;
      if (owner && runsUnit(unit) &&
          llvm::any_of(units, [&](FlatSymbolRefAttr ref) {
            return ref.getValue() == owner.getSymName();
          }))
        return true;
    }
  return false;
}

/// `program`'s exchange shape on a mesh whose tensor axis has `tensor`
/// ranks.
static plan::rt::tp::ExchangeShape exchangeShape(ProgramOp program,
                                                 int64_t tensor) {
  plan::TrainAttr train = program.getTrain();
  return {train.getMicroBatch() * train.getSeqLen(),
          program.getModel().getHidden(), tensor,
          program.getParallel().getSequenceParallel()};
}

plan::rt::tp::ExchangeShape sched::getExchangeShape(ProgramOp program) {
  return exchangeShape(program, program.getGroupSize(Group::Tensor));
}

LogicalResult ProgramOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto plan = symbolTable.lookupNearestSymbolFrom<plan::PlanOp>(
      (*this)->getParentOp(), getPlanAttr());
  if (!plan)
    return emitOpError("'") << getPlan() << "' does not name a plan.plan";
  // The recipe is copied from the plan (sched-lower); the passes read it here.
  std::pair<StringRef, bool> copies[] = {
      {"model", getModel() == plan.getModel()},
      {"cluster", getCluster() == plan.getCluster()},
      {"train", getTrain() == plan.getTrain()},
      {"parallel", getParallel() == plan.getParallel()}};
  for (auto [name, same] : copies)
    if (!same)
      return emitOpError("its ")
             << name << " differs from plan '" << getPlan() << "''s";
  // A pipeline's stages each have a program; a plan without one, a single
  // program with no stage.
  int64_t stages = plan.getPipelineRanks();
  std::optional<uint64_t> stage = getStage();
  if (stages > 1 && (!stage || static_cast<int64_t>(*stage) >= stages))
    return emitOpError("is for plan '")
           << getPlan() << "', whose pipeline has " << stages
           << " stages: it needs a `stage` below " << stages;
  if (stages == 1 && stage)
    return emitOpError("has stage ")
           << *stage << ", but plan '" << getPlan() << "' has no pipeline";
  return success();
}

LogicalResult ProgramOp::verify() {
  // I64Attr getters are unsigned; a negative count reads back as a huge one.
  auto microBatches = static_cast<int64_t>(getMicroBatches());
  if (microBatches < 1)
    return emitOpError("micro_batches must be >= 1, got ") << microBatches;
  return success();
}

/// What a body that runs more than once (a sched.repeat's, a sched.task's)
/// must own: it frees what it allocates and waits for what it issues, and
/// frees and waits for nothing from outside. A task's body may instead give
/// an event to a slot event instance (sched.slot_signal), and wait for the
/// instance a sched.slot_event of the body names. `what` names the body's op.
static LogicalResult verifyBodyOwnsItsState(Block &body, StringRef what) {
  auto inBody = [&](Operation *op) { return op && op->getBlock() == &body; };
  for (Operation &op : body) {
    if (auto alloc = dyn_cast<AllocOp>(op)) {
      if (alloc.getPersistent())
        return alloc.emitOpError("is persistent, inside a ")
               << what << ", whose body runs several times";
      if (llvm::none_of(alloc->getUsers(), [&](Operation *user) {
            return isa<FreeOp>(user) && inBody(user);
          }))
        return alloc.emitOpError("'")
               << alloc.getName() << "' is not freed in the " << what
               << " that allocates it";
    }
    if (auto free = dyn_cast<FreeOp>(op))
      if (!inBody(free.getBuffer().getDefiningOp()))
        return free.emitOpError("frees a buffer from outside its ")
               << what << ", whose body runs several times";
    if (auto wait = dyn_cast<WaitOp>(op))
      if (!inBody(wait.getEvent().getDefiningOp()))
        return wait.emitOpError("waits for an event from outside its ")
               << what << ", whose body runs several times";
    if (isa<SlotEventOp>(op))
      continue;
    for (Value result : op.getResults())
      if (isa<EventType>(result.getType()) &&
          llvm::none_of(result.getUsers(), [](Operation *user) {
            return isa<WaitOp, SlotSignalOp>(user);
          }))
        return op.emitOpError("signals an event that nothing in its ")
               << what << " waits for"
               << (isa<TaskOp>(body.getParentOp())
                       ? " or gives a slot event instance (sched.slot_signal)"
                       : "");
  }
  return success();
}

LogicalResult RepeatOp::verify() {
  auto count = static_cast<int64_t>(getCount());
  if (count < 1)
    return emitOpError("count must be >= 1, got ") << count;
  return verifyBodyOwnsItsState(getBody().front(), "sched.repeat");
}

/// The micro-batches of the step `op` is in (0 outside a program).
static int64_t stepMicroBatches(Operation *op) {
  auto program = op->getParentOfType<ProgramOp>();
  return program ? static_cast<int64_t>(program.getMicroBatches()) : 0;
}

/// A slot's or a slot event's shift: at most the step's micro-batches.
static LogicalResult verifyShift(Operation *op, int64_t shift) {
  int64_t m = stepMicroBatches(op);
  if (shift < -m || shift > m)
    return op->emitOpError("shift ") << shift << " is outside [-" << m << ", "
                                     << m << "], the step's micro-batches";
  return success();
}

/// A slot event's family: one of its sched.tasks' families.
static LogicalResult verifyFamily(Operation *op, int64_t family) {
  auto tasks = op->getParentOfType<TasksOp>();
  auto families = tasks ? static_cast<int64_t>(tasks.getEventFamilies()) : 0;
  if (family < 0 || family >= families)
    return op->emitOpError("family ")
           << family << " is not one of the sched.tasks' " << families
           << " event families";
  return success();
}

SmallVector<TaskOp> TasksOp::getTasks() {
  return llvm::to_vector(getBody().front().getOps<TaskOp>());
}

LogicalResult TasksOp::verify() {
  auto families = static_cast<int64_t>(getEventFamilies());
  if (families < 0)
    return emitOpError("event_families must be >= 0, got ") << families;
  int64_t tasks = 0;
  for (Operation &op : getBody().front()) {
    if (!isa<TaskOp>(op))
      return op.emitOpError("is in a sched.tasks, which holds sched.task ops "
                            "only");
    ++tasks;
  }
  ArrayRef<int64_t> order = getOrder();
  if (order.size() % 2)
    return emitOpError("order must hold (task, micro-batch) pairs, got ")
           << order.size() << " integers";
  // Per task, the fewest slots of its picked slots' pools (0: it has none).
  SmallVector<int64_t> pickedSlots;
  for (TaskOp task : getTasks()) {
    int64_t fewest = 0;
    for (auto slot : task.getBody().front().getOps<SlotOp>())
      if (slot.isPicked()) {
        auto slots = static_cast<int64_t>(slot.getSlots());
        fewest = fewest ? std::min(fewest, slots) : slots;
      }
    pickedSlots.push_back(fewest);
  }
  std::optional<ArrayRef<int64_t>> picks = getPicks();
  if (picks && picks->size() != order.size() / 2)
    return emitOpError("picks must hold one slot per order entry (")
           << order.size() / 2 << "), got " << picks->size();
  int64_t microBatches = stepMicroBatches(*this);
  for (size_t i = 0; i < order.size(); i += 2) {
    if (order[i] < 0 || order[i] >= tasks)
      return emitOpError("order entry ")
             << i / 2 << " runs task " << order[i] << ", not one of its "
             << tasks << " sched.task ops";
    if (order[i + 1] < 0 || order[i + 1] >= microBatches)
      return emitOpError("order entry ")
             << i / 2 << " runs micro-batch " << order[i + 1]
             << ", not one of the step's " << microBatches;
    int64_t slots = pickedSlots[static_cast<size_t>(order[i])];
    if (slots && !picks)
      return emitOpError("task ")
             << order[i] << " has picked slots, so the table needs picks";
    if (!picks)
      continue;
    int64_t pick = (*picks)[i / 2];
    if (slots && (pick < 0 || pick >= slots))
      return emitOpError("order entry ")
             << i / 2 << " picks slot " << pick << ", not one of the " << slots
             << " of its task's picked slots";
    if (!slots && pick != -1)
      return emitOpError("order entry ")
             << i / 2 << " picks slot " << pick << ", but its task " << order[i]
             << " has no picked slot (-1)";
  }
  return success();
}

LogicalResult TaskOp::verify() {
  auto microBatch = static_cast<int64_t>(getMicroBatch());
  int64_t microBatches = stepMicroBatches(*this);
  if (microBatch < 0 || microBatch >= microBatches)
    return emitOpError("micro_batch ")
           << microBatch << " is not one of the step's " << microBatches;
  return verifyBodyOwnsItsState(getBody().front(), "sched.task");
}

LogicalResult SlotOp::verify() {
  auto tasks = (*this)->getParentOfType<TasksOp>();
  Operation *def = getSource().getDefiningOp();
  if (!def || !tasks || tasks->isAncestor(def))
    return emitOpError("the source of a slot must be a buffer of the "
                       "program, defined outside its sched.tasks");
  if (elementType(getSource()) != elementType(getResult()) ||
      space(getSource()) != space(getResult()))
    return emitOpError("slot must keep the element type and memory space");
  auto slots = static_cast<int64_t>(getSlots());
  int64_t n = numel(getResult());
  if (n < 1)
    return emitOpError("a slot of no elements");
  if (getGroup() || getStride() || getOffset()) {
    if (!getGroup() || !getStride() || !getOffset())
      return emitOpError("a picked slot needs group, stride and offset");
    auto group = static_cast<int64_t>(*getGroup());
    auto stride = static_cast<int64_t>(*getStride());
    auto offset = static_cast<int64_t>(*getOffset());
    if (group < 0)
      return emitOpError("group must be >= 0, got ") << group;
    if (offset < 0 || stride < 1 || offset > stride - n)
      return emitOpError("elements [")
             << offset << ", " << offset + n << ") are not in a slot of "
             << stride << " elements";
    if (slots < 1 || slots > numel(getSource()) / stride)
      return emitOpError() << slots << " slots of " << stride
                           << " elements are not in the " << numel(getSource())
                           << " elements of the source";
    if (getShift() != 0)
      return emitOpError("a picked slot is its run's own: shift must be 0, "
                         "got ")
             << static_cast<int64_t>(getShift());
    return success();
  }
  if (slots < 1 || slots > numel(getSource()) / n)
    return emitOpError() << slots << " slots of " << n
                         << " elements are not in the " << numel(getSource())
                         << " elements of the source";
  return verifyShift(*this, static_cast<int64_t>(getShift()));
}

int64_t SlotOp::slotStart(int64_t slot) {
  if (isPicked())
    return slot * static_cast<int64_t>(*getStride()) +
           static_cast<int64_t>(*getOffset());
  return slot * numel(getResult());
}

LogicalResult SlotEventOp::verify() {
  if (failed(verifyFamily(*this, static_cast<int64_t>(getFamily()))))
    return failure();
  return verifyShift(*this, static_cast<int64_t>(getShift()));
}

LogicalResult SlotSignalOp::verify() {
  Operation *def = getEvent().getDefiningOp();
  if (!def || def->getBlock() != (*this)->getBlock() || isa<SlotEventOp>(def))
    return emitOpError("names the event of an asynchronous op of its own "
                       "sched.task");
  // The second of two names the error.
  for (Operation *user : getEvent().getUsers())
    if (user != *this && isa<SlotSignalOp>(user) &&
        user->isBeforeInBlock(*this))
      return emitOpError("gives an event a second slot event instance");
  if (failed(verifyFamily(*this, static_cast<int64_t>(getFamily()))))
    return failure();
  return verifyShift(*this, static_cast<int64_t>(getShift()));
}

/// The program an op is in, for the group sizes of its mesh.
static ProgramOp programOf(Operation *op) {
  return op->getParentOfType<ProgramOp>();
}

/// The op `ref` names, if it is an `OpT` of the plan `program` runs: units
/// and groups nest in their plan (@plan::@unit), and one of another plan is
/// not this program's.
template <typename OpT>
static OpT lookupInPlan(ProgramOp program, SymbolRefAttr ref,
                        SymbolTableCollection &symbolTable) {
  if (!program || ref.getRootReference() != program.getPlanAttr().getAttr())
    return {};
  return dyn_cast_or_null<OpT>(
      symbolTable.lookupNearestSymbolFrom(program->getParentOp(), ref));
}

namespace {
/// What an op's checks against its plan read, resolved through the symbol
/// tables of one verification (`verifySymbolUses`): hash lookups, where
/// SymbolTable's static lookups scan the plan's units every time, and a
/// lowered step has hundreds of thousands of ops to check. `plan` is null
/// outside a program or when its plan does not resolve (ProgramOp's own
/// symbol check reports that).
struct ProgramSymbols {
  ProgramOp program;
  plan::PlanOp plan;
  shard::GridOp grid;
  SymbolTableCollection *tables = nullptr;

  int64_t groupSize(Group group) const { return groupSizeOn(grid, group); }
  int64_t meshSize(plan::MeshAxis axis) const {
    return plan::PlanOp::getMeshSize(grid, axis);
  }
  plan::rt::tp::ExchangeShape exchange() const {
    return exchangeShape(program, groupSize(Group::Tensor));
  }
  /// The op `ref` names, if it is an `OpT` of this program's plan: units
  /// and groups nest in their plan (@plan::@unit), and one of another plan
  /// is not this program's.
  template <typename OpT> OpT lookup(SymbolRefAttr ref) const {
    return plan ? lookupInPlan<OpT>(program, ref, *tables) : OpT();
  }
};
} // namespace

static ProgramSymbols resolveSymbols(Operation *op,
                                     SymbolTableCollection &tables) {
  ProgramSymbols symbols;
  symbols.tables = &tables;
  symbols.program = programOf(op);
  if (!symbols.program)
    return symbols;
  symbols.plan = tables.lookupNearestSymbolFrom<plan::PlanOp>(
      symbols.program->getParentOp(), symbols.program.getPlanAttr());
  if (symbols.plan)
    symbols.grid = tables.lookupNearestSymbolFrom<shard::GridOp>(
        symbols.plan->getParentOp(), symbols.plan.getMeshAttr());
  return symbols;
}

static int64_t groupSize(Operation *op, SymbolTableCollection &tables,
                         Group group) {
  return resolveSymbols(op, tables).groupSize(group);
}

//===----------------------------------------------------------------------===//
// Buffers
//===----------------------------------------------------------------------===//

LogicalResult AllocOp::verify() {
  if (getName().empty())
    return emitOpError("needs a name");
  if (getType().getNumElements() < 1)
    return emitOpError("buffer must hold at least one element");
  if (std::optional<int64_t> offset = getOffset(); offset && *offset < 0)
    return emitOpError("offset must be >= 0");
  if (!getHeld())
    return success();
  if (getPersistent())
    return emitOpError("a held buffer is transient, not persistent");
  // Only its free, its views and the one-slot sched.slots of them use it.
  SmallVector<Operation *> users(getResult().getUsers());
  while (!users.empty()) {
    Operation *user = users.pop_back_val();
    if (isa<FreeOp>(user))
      continue;
    if (isa<ViewOp>(user)) {
      llvm::append_range(users, user->getResult(0).getUsers());
      continue;
    }
    if (auto slot = dyn_cast<SlotOp>(user);
        slot && slot.getSlots() == 1 && !slot.isPicked())
      continue;
    return emitOpError("held buffer '")
           << getName() << "' is used by '" << user->getName()
           << "': only its free, its views and one-slot, unpicked "
              "sched.slots of it may use it";
  }
  return success();
}

LogicalResult FreeOp::verify() {
  auto alloc = getBuffer().getDefiningOp<AllocOp>();
  if (!alloc)
    return emitOpError("frees a buffer that sched.alloc did not create");
  if (alloc.getPersistent())
    return emitOpError("frees persistent buffer '")
           << alloc.getName() << "', which lives across steps";
  return success();
}

LogicalResult ViewOp::verify() {
  if (elementType(getSource()) != elementType(getResult()) ||
      space(getSource()) != space(getResult()))
    return emitOpError("view must keep the element type and memory space");
  auto offset = static_cast<int64_t>(getOffset());
  // Compared without `offset + size`, which overflows for huge offsets.
  if (offset < 0 || numel(getResult()) > numel(getSource()) ||
      offset > numel(getSource()) - numel(getResult()))
    return emitOpError() << numel(getResult()) << " elements at offset "
                         << offset << " are outside the " << numel(getSource())
                         << " elements of the source";
  return success();
}

LogicalResult ShardViewOp::verify() {
  if (elementType(getSource()) != elementType(getResult()) ||
      space(getSource()) != space(getResult()))
    return emitOpError("view must keep the element type and memory space");
  return success();
}

LogicalResult
ShardViewOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  int64_t n = groupSize(*this, symbolTable, getGroup());
  if (n > 0 && numel(getResult()) * n != numel(getSource()))
    return emitOpError("a shard of ")
           << numel(getSource()) << " elements over " << n << " ranks has "
           << numel(getSource()) / n << " elements, not " << numel(getResult());
  return success();
}

//===----------------------------------------------------------------------===//
// Asynchronous ops
//===----------------------------------------------------------------------===//

static LogicalResult verifySameElementType(Operation *op, Value a, Value b) {
  if (elementType(a) != elementType(b))
    return op->emitOpError("element types differ: ")
           << elementType(a) << " and " << elementType(b);
  return success();
}

LogicalResult AllGatherOp::verify() {
  return verifySameElementType(*this, getSrc(), getDst());
}

LogicalResult
AllGatherOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  int64_t n = groupSize(*this, symbolTable, getGroup());
  if (n > 0 && numel(getSrc()) * n != numel(getDst()))
    return emitOpError("gathering ")
           << numel(getSrc()) << " elements from each of " << n
           << " ranks needs " << numel(getSrc()) * n
           << " elements, the destination has " << numel(getDst());
  return success();
}

LogicalResult ReduceScatterOp::verify() {
  if (failed(verifySameElementType(*this, getSrc(), getDst())))
    return failure();
  if (getReduce() == ReduceOp::Max && getAccumulate())
    return emitOpError("cannot accumulate a max reduction");
  return success();
}

LogicalResult
ReduceScatterOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  int64_t n = groupSize(*this, symbolTable, getGroup());
  if (n > 0 && numel(getDst()) * n != numel(getSrc()))
    return emitOpError("scattering ")
           << numel(getSrc()) << " elements over " << n << " ranks gives "
           << numel(getSrc()) / n << " each, the destination has "
           << numel(getDst());
  return success();
}

LogicalResult AllReduceOp::verify() { return success(); }

LogicalResult
BroadcastOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  int64_t n = groupSize(*this, symbolTable, getGroup());
  // I64Attr getters are unsigned; a negative root reads back as a huge one.
  auto root = static_cast<int64_t>(getRoot());
  if (root < 0 || (n > 0 && root >= n))
    return emitOpError("root ") << root << " is not a rank of the "
                                << stringifyGroup(getGroup()) << " group";
  return success();
}

LogicalResult CopyOp::verify() {
  if (failed(verifySameElementType(*this, getSrc(), getDst())))
    return failure();
  if (numel(getSrc()) != numel(getDst()))
    return emitOpError("copies ")
           << numel(getSrc()) << " elements into " << numel(getDst());
  bool srcDevice = space(getSrc()) == MemorySpace::Device;
  bool dstDevice = space(getDst()) == MemorySpace::Device;
  if (srcDevice == dstDevice)
    return emitOpError("copies between host and device; both buffers are ")
           << (srcDevice ? "on the device" : "on the host");
  return success();
}

//===----------------------------------------------------------------------===//
// Element-wise ops
//===----------------------------------------------------------------------===//

/// Both buffers hold floats: bytes (an NF4 base) are read by
/// sched.dequantize alone.
static LogicalResult verifyFloats(Operation *op, Value src, Value dst) {
  if (!isa<FloatType>(elementType(src)) || !isa<FloatType>(elementType(dst)))
    return op->emitOpError("works on floats; a base stored in bytes (NF4) "
                           "is read by sched.dequantize");
  return success();
}

LogicalResult CastOp::verify() {
  if (failed(verifyFloats(*this, getSrc(), getDst())))
    return failure();
  if (numel(getSrc()) != numel(getDst()))
    return emitOpError("casts ")
           << numel(getSrc()) << " elements into " << numel(getDst());
  if (space(getSrc()) != space(getDst()))
    return emitOpError("casts within one memory space; sched.copy moves data");
  if (elementType(getSrc()) == elementType(getDst()))
    return emitOpError("casts to the same element type ")
           << elementType(getSrc());
  return success();
}

LogicalResult AccumulateOp::verify() {
  if (failed(verifyFloats(*this, getSrc(), getDst())))
    return failure();
  if (numel(getSrc()) != numel(getDst()))
    return emitOpError("adds ")
           << numel(getSrc()) << " elements into " << numel(getDst());
  if (space(getSrc()) != space(getDst()))
    return emitOpError("adds within one memory space; sched.copy moves data");
  return success();
}

//===----------------------------------------------------------------------===//
// Compute
//===----------------------------------------------------------------------===//

static plan::UnitOp lookupUnit(Operation *op, SymbolRefAttr unit,
                               SymbolTableCollection &symbolTable) {
  return lookupInPlan<plan::UnitOp>(programOf(op), unit, symbolTable);
}

/// Checks that `op` is in a program whose plan resolves, that `unitRef`
/// names a unit of that plan and that `microBatch` is one of its
/// micro-batches. An unresolved plan is left to ProgramOp's symbol check.
static LogicalResult verifyUnitAndMicroBatch(Operation *op,
                                             const ProgramSymbols &symbols,
                                             SymbolRefAttr unitRef,
                                             int64_t microBatch,
                                             plan::UnitOp &unit) {
  ProgramOp program = symbols.program;
  if (!program)
    return op->emitOpError("must be inside a sched.program");
  if (!symbols.plan)
    return success();
  unit = symbols.lookup<plan::UnitOp>(unitRef);
  if (!unit)
    return op->emitOpError("'")
           << unitRef << "' does not name a plan.unit of plan '"
           << program.getPlan() << "'";
  auto microBatches = static_cast<int64_t>(program.getMicroBatches());
  if (microBatch < 0 || microBatch >= microBatches)
    return op->emitOpError("micro-batch ")
           << microBatch << " is not in [0, " << microBatches << ")";
  return success();
}

/// Whether `unit` ties to a frozen parameter (then its tied buffer gets no
/// gradient).
static bool tiesFrozen(plan::UnitOp unit) {
  plan::ParamOp tied = unit.lookupTiedOwner().second;
  return tied && tied.getFrozen();
}

/// The elements of `owner`'s frozen base that `buffer` must have: its bytes
/// when `buffer` holds bytes (stored with an NF4 part, before
/// sched.dequantize), its elements otherwise.
static int64_t frozenSizeFor(Value buffer, plan::UnitOp owner) {
  return owner.getFrozenStorageSize(elementType(buffer).isInteger(8));
}

/// Checks a compute op's unit, micro-batch and parameter operands.
static LogicalResult verifyCompute(Operation *op, const ProgramSymbols &symbols,
                                   SymbolRefAttr unitRef, int64_t microBatch,
                                   Value params, Value tied, Value frozen,
                                   plan::UnitOp &unit) {
  if (failed(verifyUnitAndMicroBatch(op, symbols, unitRef, microBatch, unit)))
    return failure();
  if (!unit)
    return success();
  int64_t stored = unit.getStoredNumel(), frozenStored = unit.getFrozenNumel();
  if (bool(params) != (stored > 0))
    return op->emitOpError("unit '")
           << unit.getSymName() << "' stores " << stored
           << " elements that train: `params` is given exactly when it "
              "stores some";
  if (params && numel(params) != stored)
    return op->emitOpError("unit '")
           << unit.getSymName() << "' stores " << stored
           << " elements, its params buffer has " << numel(params);
  if (bool(frozen) != (frozenStored > 0))
    return op->emitOpError("unit '")
           << unit.getSymName() << "' stores " << frozenStored
           << " frozen elements: `frozen` is given exactly when it stores "
              "some";
  if (frozen && numel(frozen) != frozenSizeFor(frozen, unit))
    return op->emitOpError("unit '")
           << unit.getSymName() << "' stores " << frozenSizeFor(frozen, unit)
           << (elementType(frozen).isInteger(8) ? " frozen bytes"
                                                : " frozen elements")
           << ", its frozen buffer has " << numel(frozen);
  auto [owner, tiedParam] = unit.lookupTiedOwner();
  bool ownerFrozen = tiedParam && tiedParam.getFrozen();
  if (owner && !tied)
    return op->emitOpError("unit '")
           << unit.getSymName()
           << "' ties a parameter stored in another unit: it needs `tied`";
  if (!owner && tied)
    return op->emitOpError("unit '")
           << unit.getSymName() << "' ties no parameter, but `tied` is given";
  if (!tied)
    return success();
  int64_t tiedElements =
      ownerFrozen ? frozenSizeFor(tied, owner) : owner.getStoredNumel();
  if (numel(tied) != tiedElements)
    return op->emitOpError("the unit holding the tied parameter stores ")
           << tiedElements << " elements, `tied` has " << numel(tied);
  if (params && elementType(tied) != elementType(params) && !ownerFrozen)
    return op->emitOpError("`tied` and `params` must share an element type");
  return success();
}

/// Whether `unit` is the last of its pipeline chunk (the next unit of the
/// plan is in another one), and the first.
static bool endsChunk(plan::UnitOp unit) {
  auto next = dyn_cast_or_null<plan::UnitOp>(unit->getNextNode());
  return next && next.getStage() != unit.getStage();
}
static bool startsChunk(plan::UnitOp unit) {
  auto previous = dyn_cast_or_null<plan::UnitOp>(unit->getPrevNode());
  return previous && previous.getStage() != unit.getStage();
}

/// What a part's exchange operands must be, and which: `in` and `out` of a
/// forward or recompute, `in_grad` and `out_grad` of a backward. Absent
/// operands are null.
struct PartOperands {
  Value in, out;
  const char *inName, *outName;
  bool backward;
};

/// Checks `part` and the exchange buffers of a compute op of `unit`
/// against runtime/format/TensorParallelParts.h: without a tensor axis a
/// unit is one part with none; with one, each part of the unit's role has
/// exactly the buffers of the cuts around it, of their sizes (or the op is
/// still the whole unit: part 0 with none).
static LogicalResult verifyPart(Operation *op, const ProgramSymbols &symbols,
                                plan::UnitOp unit, int64_t part,
                                const PartOperands &operands) {
  ProgramOp program = symbols.program;
  int64_t tensor = symbols.meshSize(plan::MeshAxis::Tensor);
  plan::rt::tp::ExchangeShape exchange = symbols.exchange();
  bool pipelined = program.getStage().has_value();
  if (tensor <= 1 && !pipelined) {
    if (part != 0 || operands.in || operands.out)
      return op->emitOpError("`part`, `")
             << operands.inName << "` and `" << operands.outName
             << "` split a unit at its tensor-parallel collectives: they "
                "need a mesh with a tensor axis above 1";
    return success();
  }
  auto check = [&](Value buffer, const char *name,
                   std::optional<int64_t> expected) -> LogicalResult {
    if (bool(buffer) != expected.has_value())
      return op->emitOpError("part ")
             << part << " of unit '" << unit.getSymName() << "' "
             << (expected ? "needs" : "has no") << " `" << name << "`";
    if (buffer && numel(buffer) != *expected)
      return op->emitOpError("`")
             << name << "` of part " << part << " of unit '"
             << unit.getSymName() << "' has " << numel(buffer)
             << " elements, not " << *expected;
    return success();
  };
  // Under pipeline parallelism a chunk's first unit reads the stage's input
  // (in part 0, before which no cut is) and its last unit writes the stage's
  // output (in its last part, after which none is), one micro-batch's
  // residual stream; a recompute restarts from its saved input and exchanges
  // neither.
  bool staged = pipelined && !isa<RecomputeOp>(op);
  bool starts = staged && startsChunk(unit), ends = staged && endsChunk(unit);
  int64_t stream = exchange.stream();
  std::optional<int64_t> stageIn, stageOut;
  if (starts)
    stageIn = stream;
  if (ends)
    stageOut = stream;
  // The whole unit, as sched-lower emits it: without a tensor axis all
  // there is; with one, sched-split-tensor-parallel splits it
  // (sched-verify-schedule requires that it did).
  auto edge = [&](Value buffer, std::optional<int64_t> expected) {
    return bool(buffer) == expected.has_value() &&
           (!buffer || numel(buffer) == *expected);
  };
  if (tensor <= 1) {
    if (part != 0)
      return op->emitOpError("`part` splits a unit at its tensor-parallel "
                             "collectives: it needs a mesh with a tensor "
                             "axis above 1");
    if (failed(check(operands.in, operands.inName, stageIn)))
      return failure();
    return check(operands.out, operands.outName, stageOut);
  }
  if (part == 0 && edge(operands.in, stageIn) && edge(operands.out, stageOut))
    return success();
  std::optional<plan::rt::tp::UnitRole> role =
      getTensorParallelRole(unit.getKind(), program.getModel().getFamily());
  if (!role)
    return op->emitOpError("unit '") << unit.getSymName() << "' is a "
                                     << plan::stringifyUnitKind(unit.getKind())
                                     << ", which has no tensor-parallel parts";
  std::span<const plan::rt::tp::Boundary> cuts =
      plan::rt::tp::boundaries(*role);
  int64_t parts = plan::rt::tp::partCount(*role);
  if (part < 0 || part >= parts)
    return op->emitOpError("part ")
           << part << " is not in [0, " << parts << ") of unit '"
           << unit.getSymName() << "'";
  // Before part k: the cut k - 1, whose consumer it is; after it, cut k (a
  // backward has nothing to read back from the loss's statistics); the
  // stage's edges where no cut is.
  std::optional<int64_t> before = stageIn, after;
  if (part > 0)
    before = exchange.consumed(cuts[part - 1]);
  if (part < static_cast<int64_t>(cuts.size()) &&
      !(operands.backward &&
        cuts[part] == plan::rt::tp::Boundary::LossStatistics))
    after = exchange.produced(cuts[part]);
  else if (part + 1 == parts)
    after = stageOut;
  if (failed(check(operands.in, operands.inName, before)))
    return failure();
  return check(operands.out, operands.outName, after);
}

/// Checks a sched.send or sched.recv: in a pipeline stage's program, about
/// the output of `unit`, the last unit of a chunk, which this stage
/// produces (a send to `next`, a receive from `next` of its gradient) or
/// consumes (a receive from `prev`, a send to `prev` of its gradient).
static LogicalResult verifyPointToPoint(Operation *op,
                                        SymbolTableCollection &symbolTable,
                                        Value buffer, Peer peer,
                                        SymbolRefAttr unitRef,
                                        int64_t microBatch, bool sends) {
  ProgramSymbols symbols = resolveSymbols(op, symbolTable);
  plan::UnitOp unit;
  if (failed(verifyUnitAndMicroBatch(op, symbols, unitRef, microBatch, unit)))
    return failure();
  if (!unit)
    return success();
  ProgramOp program = symbols.program;
  plan::PlanOp plan = symbols.plan;
  int64_t ranks = plan.getPipelineRanks();
  std::optional<int64_t> stage = program.getStage();
  if (!stage || ranks <= 1)
    return op->emitOpError("connects pipeline stages: it needs a stage's "
                           "program, on a mesh with a pipeline axis above 1");
  if (!endsChunk(unit))
    return op->emitOpError("unit '")
           << unit.getSymName()
           << "' is not the last unit of a pipeline chunk: only those "
              "outputs cross to another stage";
  int64_t chunk = *unit.getStage();
  // The rank that computes the unit, and the one that reads its output.
  int64_t producer = plan.getPipelineRankOfChunk(chunk),
          consumer = plan.getPipelineRankOfChunk(chunk + 1);
  bool produces = peer == Peer::Next;
  int64_t expected = produces ? producer : consumer;
  if (*stage != expected) {
    // What travels: the output towards the next stage, its gradient back.
    bool output = sends == (peer == Peer::Next);
    return op->emitOpError("stage ")
           << *stage << " " << (sends ? "sends" : "receives")
           << (output ? " the output of" : " the gradient of the output of")
           << " unit '" << unit.getSymName() << "' (chunk " << chunk << ")"
           << (sends ? " to " : " from ") << stringifyPeer(peer)
           << ", which stage " << expected << " does";
  }
  int64_t stream = symbols.exchange().stream();
  if (numel(buffer) != stream)
    return op->emitOpError("buffer has ")
           << numel(buffer) << " elements, not the " << stream
           << " of one micro-batch's hidden states";
  return success();
}

LogicalResult SendOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyPointToPoint(*this, symbolTable, getBuffer(), getPeer(),
                            getUnit(), getMicroBatch(), /*sends=*/true);
}

LogicalResult RecvOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyPointToPoint(*this, symbolTable, getBuffer(), getPeer(),
                            getUnit(), getMicroBatch(), /*sends=*/false);
}

plan::UnitOp ForwardOp::getUnitOp(SymbolTableCollection &symbolTable) {
  return lookupUnit(*this, getUnit(), symbolTable);
}
plan::UnitOp RecomputeOp::getUnitOp(SymbolTableCollection &symbolTable) {
  return lookupUnit(*this, getUnit(), symbolTable);
}
plan::UnitOp BackwardOp::getUnitOp(SymbolTableCollection &symbolTable) {
  return lookupUnit(*this, getUnit(), symbolTable);
}

// A compute op's checks against its unit are symbol uses (the unit is
// looked up in the plan); its verify() checks what its operands alone say.

/// A forward's or a recompute's checks against its unit: the same operands.
template <typename OpT>
static LogicalResult verifyForwardSymbols(OpT op,
                                          SymbolTableCollection &symbolTable) {
  ProgramSymbols symbols = resolveSymbols(op, symbolTable);
  plan::UnitOp unit;
  if (failed(verifyCompute(op, symbols, op.getUnit(), op.getMicroBatch(),
                           op.getParams(), op.getTied(), op.getFrozen(), unit)))
    return failure();
  if (!unit)
    return success();
  return verifyPart(op, symbols, unit, op.getPart(),
                    {op.getIn(), op.getOut(), "in", "out", /*backward=*/false});
}

LogicalResult ForwardOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyForwardSymbols(*this, symbolTable);
}

LogicalResult RecomputeOp::verify() {
  // Part 0 starts again from the saved input; a later part from its `in`.
  if (bool(getInput()) != (getPart() == 0))
    return emitOpError("part ")
           << getPart()
           << (getPart() == 0 ? " needs `from`" : " reads `in`, not `from`");
  return success();
}

LogicalResult
RecomputeOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyForwardSymbols(*this, symbolTable);
}

LogicalResult BackwardOp::verify() {
  if (bool(getGrads()) != bool(getParams()))
    return emitOpError("`grads` goes with `params`");
  if (getGrads() && numel(getGrads()) != numel(getParams()))
    return emitOpError("grads must have the layout of params: ")
           << numel(getGrads()) << " elements, not " << numel(getParams());
  if (getTiedGrads() && !getTied())
    return emitOpError("`tied_grads` goes with `tied`");
  if (getTiedGrads() && numel(getTiedGrads()) != numel(getTied()))
    return emitOpError("`tied_grads` must have the layout of `tied`");
  return success();
}

LogicalResult BackwardOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  ProgramSymbols symbols = resolveSymbols(*this, symbolTable);
  plan::UnitOp unit;
  if (failed(verifyCompute(*this, symbols, getUnit(), getMicroBatch(),
                           getParams(), getTied(), getFrozen(), unit)))
    return failure();
  // A tied parameter that trains gets its gradient; a frozen one none.
  bool tiedTrains = getTied() && !(unit && tiesFrozen(unit));
  if (getTiedGrads() && getTied() && !tiedTrains)
    return emitOpError("`tied` is frozen: it gets no `tied_grads`");
  if (tiedTrains != bool(getTiedGrads()))
    return emitOpError("`tied_grads` goes with `tied`");
  if (!unit)
    return success();
  return verifyPart(*this, symbols, unit, getPart(),
                    {getInGrad(), getOutGrad(), "in_grad", "out_grad",
                     /*backward=*/true});
}

plan::UnitOp DequantizeOp::getUnitOp(SymbolTableCollection &symbolTable) {
  return lookupUnit(*this, getUnit(), symbolTable);
}

LogicalResult DequantizeOp::verify() {
  if (!isa<FloatType>(elementType(getDst())))
    return emitOpError("`dst` must hold floats: the frozen base in the "
                       "working type");
  if (space(getSrc()) != space(getDst()))
    return emitOpError("`src` and `dst` must be in one memory space");
  return success();
}

LogicalResult
DequantizeOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  ProgramSymbols symbols = resolveSymbols(*this, symbolTable);
  if (!symbols.program)
    return emitOpError("must be inside a sched.program");
  if (!symbols.plan)
    return success();
  auto unit = symbols.lookup<plan::UnitOp>(getUnit());
  if (!unit)
    return emitOpError("'") << getUnit() << "' does not name a plan.unit of "
                            << "plan '" << symbols.program.getPlan() << "'";
  if (unit.getFrozenNumel() == 0)
    return emitOpError("unit '")
           << unit.getSymName() << "' has no frozen parameters";
  bool bytes = elementType(getSrc()).isInteger(8);
  if (numel(getSrc()) != frozenSizeFor(getSrc(), unit))
    return emitOpError("unit '")
           << unit.getSymName() << "' stores " << frozenSizeFor(getSrc(), unit)
           << (bytes ? " frozen bytes" : " frozen elements") << ", `src` has "
           << numel(getSrc());
  if (!bytes && unit.hasQuantizedBase())
    return emitOpError("unit '")
           << unit.getSymName()
           << "' stores part of its base in NF4: `src` must hold bytes (i8)";
  if (numel(getDst()) != unit.getFrozenNumel())
    return emitOpError("unit '")
           << unit.getSymName() << "' has " << unit.getFrozenNumel()
           << " frozen elements, `dst` has " << numel(getDst());
  return success();
}

//===----------------------------------------------------------------------===//
// Optimizer
//===----------------------------------------------------------------------===//

LogicalResult GradNormOp::verify() {
  if (!programOf(*this))
    return emitOpError("must be inside a sched.program");
  return success();
}

LogicalResult GradNormOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  ProgramSymbols symbols = resolveSymbols(*this, symbolTable);
  if (getTensorReplicas() && symbols.plan &&
      symbols.meshSize(plan::MeshAxis::Tensor) <= 1)
    return emitOpError("`tensor_replicas` weighs what every tensor rank "
                       "holds: it needs a mesh with a tensor axis above 1");
  return success();
}

LogicalResult
OptimizerStepOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  ProgramSymbols symbols = resolveSymbols(*this, symbolTable);
  if (symbols.plan && !symbols.lookup<plan::GroupOp>(getGroup()))
    return emitOpError("'")
           << getGroup() << "' does not name a plan.group of plan '"
           << symbols.program.getPlan() << "'";
  return success();
}

LogicalResult OptimizerStepOp::verify() {
  ProgramOp program = programOf(*this);
  if (!program)
    return emitOpError("must be inside a sched.program");
  if (!elementType(getParams()).isF32())
    return emitOpError("steps fp32 parameters (the master copy), got ")
           << elementType(getParams());
  SmallVector<Value> all = {getParams(), getGrads()};
  llvm::append_range(all, getState());
  for (Value v : all) {
    if (numel(v) != numel(getParams()))
      return emitOpError("params, grads and state must have the same size");
    if (space(v) != space(getParams()))
      return emitOpError("params, grads and state must be in one memory "
                         "space: the step runs where they live");
  }
  for (Value v : getState())
    if (!elementType(v).isF32())
      return emitOpError("optimizer state must be fp32");
  if (!elementType(getGrads()).isF32())
    return emitOpError("steps with fp32 gradients, got ")
           << elementType(getGrads());
  // The program's copy of the recipe (ProgramOp keeps it the plan's).
  plan::OptimizerAttr optimizer = program.getTrain().getOptimizer();
  plan::OptimizerKind kind = optimizer.getKind();
  size_t expected = kind == plan::OptimizerKind::AdamW ? 2
                    : optimizer.getMomentum() != 0.0   ? 1
                                                       : 0;
  if (getState().size() != expected)
    return emitOpError(plan::stringifyOptimizerKind(kind))
           << " keeps " << expected << " state buffers, got "
           << getState().size();
  return success();
}

//===----------------------------------------------------------------------===//
// Loss
//===----------------------------------------------------------------------===//

LogicalResult LossOp::verify() {
  double scale = getScale().convertToDouble();
  if (!(scale > 0.0) || !std::isfinite(scale))
    return emitOpError("scale must be positive and finite, got ") << scale;
  return success();
}

LogicalResult LossOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  ProgramSymbols symbols = resolveSymbols(*this, symbolTable);
  plan::UnitOp unit;
  if (failed(verifyUnitAndMicroBatch(*this, symbols, getUnit(), getMicroBatch(),
                                     unit)))
    return failure();
  if (unit && !plan::isHeadKind(unit.getKind()))
    return emitOpError("the loss is of the model's head; '")
           << unit.getSymName() << "' is a "
           << plan::stringifyUnitKind(unit.getKind()) << " unit";
  if (!unit)
    return success();
  // A vocabulary divided over tensor ranks: the loss reads every rank's
  // statistics.
  int64_t tensor = symbols.meshSize(plan::MeshAxis::Tensor);
  // (Before sched-split-tensor-parallel a tensor-parallel loss has none
  // yet; sched-verify-schedule requires it.)
  if (getStats() && tensor <= 1)
    return emitOpError("has `stats`, but the mesh has no tensor axis");
  if (getStats()) {
    int64_t expected =
        symbols.exchange().consumed(plan::rt::tp::Boundary::LossStatistics);
    if (numel(getStats()) != expected)
      return emitOpError("`stats` has ")
             << numel(getStats()) << " elements, not " << expected;
    if (!elementType(getStats()).isF32())
      return emitOpError("`stats` must be fp32");
  }
  return success();
}

#define GET_OP_CLASSES
#include "dialects/sched/SchedOps.cpp.inc"
