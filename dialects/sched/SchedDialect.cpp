//===- SchedDialect.cpp - The sched dialect -------------------------------===//

#include "dialects/sched/SchedDialect.h"
#include "dialects/sched/SchedOpTable.h"

#include "Schedule.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace sched;

#include "dialects/sched/SchedEnums.cpp.inc"

#include "dialects/sched/SchedDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/sched/SchedAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/sched/SchedTypes.cpp.inc"

void SchedDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/sched/SchedAttrs.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "dialects/sched/SchedTypes.cpp.inc"
      >();
  registerOps();
}

Type sched::getStorageElementType(MLIRContext *context,
                                  plan::BaseStorage storage) {
  switch (storage) {
  case plan::BaseStorage::NF4:
    return IntegerType::get(context, 8);
  case plan::BaseStorage::BF16:
    return BFloat16Type::get(context);
  case plan::BaseStorage::F16:
    return Float16Type::get(context);
  case plan::BaseStorage::F32:
    return Float32Type::get(context);
  }
  llvm_unreachable("unknown storage");
}

MemRefType sched::getBufferType(MLIRContext *context, int64_t numel,
                                Type elementType, MemorySpace space) {
  return MemRefType::get({numel}, elementType, MemRefLayoutAttrInterface(),
                         MemorySpaceAttr::get(context, space));
}

MemorySpace sched::getMemorySpace(MemRefType type) {
  return cast<MemorySpaceAttr>(type.getMemorySpace()).getValue();
}

FailureOr<WaitOp> sched::findWait(Operation *asyncOp) {
  WaitOp found;
  for (Operation *user : asyncOp->getResult(0).getUsers()) {
    auto wait = dyn_cast<WaitOp>(user);
    if (!wait)
      continue;
    if (found)
      return asyncOp->emitOpError("event is waited more than once");
    found = wait;
  }
  if (!found)
    return asyncOp->emitOpError("event is never waited");
  return found;
}

FailureOr<SmallVector<EventWait>> sched::findWaits(Operation *asyncOp) {
  SlotSignalOp signal;
  for (Operation *user : asyncOp->getResult(0).getUsers())
    if (auto found = dyn_cast<SlotSignalOp>(user))
      signal = found;
  if (!signal) {
    FailureOr<WaitOp> wait = findWait(asyncOp);
    if (failed(wait))
      return failure();
    return SmallVector<EventWait>{{*wait, 0}};
  }
  SmallVector<EventWait> waits;
  auto tasks = asyncOp->getParentOfType<TasksOp>();
  for (TaskOp task : tasks.getTasks())
    for (auto event : task.getBody().front().getOps<SlotEventOp>()) {
      if (event.getFamily() != signal.getFamily())
        continue;
      int64_t shift = static_cast<int64_t>(event.getShift()) -
                      static_cast<int64_t>(signal.getShift());
      for (Operation *user : event.getEvent().getUsers()) {
        auto wait = dyn_cast<WaitOp>(user);
        if (!wait)
          return asyncOp->emitOpError("event is named in a later task by a "
                                      "slot event that is not only waited");
        waits.push_back({wait, shift});
      }
    }
  if (waits.empty())
    return asyncOp->emitOpError("event is never waited");
  return waits;
}

LogicalResult sched::moveBelowAfterEvents(
    Operation *op,
    function_ref<Operation *(Operation *producer, WaitOp wait)> endOf) {
  SmallVector<Value> after = llvm::to_vector(llvm::make_filter_range(
      op->getOperands(), [](Value v) { return isa<EventType>(v.getType()); }));
  if (after.empty())
    return success();
  Operation *point = nullptr;
  for (Value event : after) {
    Operation *producer = event.getDefiningOp();
    if (!producer)
      return op->emitOpError("follows an event no op produces");
    FailureOr<WaitOp> wait = findWait(producer);
    if (failed(wait))
      return failure();
    Operation *end = endOf(producer, *wait);
    if (!point || point->isBeforeInBlock(end))
      point = end;
  }
  FailureOr<WaitOp> ownWait = findWait(op);
  if (failed(ownWait))
    return failure();
  if ((*ownWait)->isBeforeInBlock(point))
    return op->emitOpError("is waited for before the events it follows");
  op->moveAfter(point);
  if (std::optional<MutableOperandRange> events = getAfterMutable(op))
    events->clear();
  return success();
}

std::string sched::describeOp(Operation *op) {
  std::string name = op->getName().stripDialect().str();
  if (auto alloc = dyn_cast<AllocOp>(op))
    return name + " " + alloc.getName().str();
  // A compute op by its unit and micro-batch, an optimizer step by its group
  // (the op table's index fields); anything else by its first buffer.
  SymbolRefAttr unit, group;
  std::optional<int64_t> microBatch;
  visitTableOp(op, [&](auto, auto rtOp) {
    decltype(rtOp)::fields(rtOp, [&](auto d, auto &) {
      using D = decltype(d);
      namespace field = plan::rt::field;
      if constexpr (std::is_same_v<D, field::UnitRef>)
        unit = op->getAttrOfType<SymbolRefAttr>(d.name);
      else if constexpr (std::is_same_v<D, field::GroupRef>)
        group = op->getAttrOfType<SymbolRefAttr>(d.name);
      else if constexpr (std::is_same_v<D, field::MicroBatch>)
        microBatch = op->getAttrOfType<IntegerAttr>(d.name).getInt();
    });
  });
  if (unit && microBatch)
    return llvm::formatv("{0} @{1} mb {2}", name,
                         unit.getLeafReference().getValue(), *microBatch)
        .str();
  if (group)
    return name + " @" + group.getLeafReference().str();
  for (Value operand : op->getOperands())
    if (AllocOp alloc = getRootAlloc(operand))
      return name + " " + alloc.getName().str();
  return name;
}

AllocOp sched::getRootAlloc(Value buffer) {
  while (Operation *def = buffer.getDefiningOp()) {
    if (auto alloc = dyn_cast<AllocOp>(def))
      return alloc;
    if (auto view = dyn_cast<ViewOp>(def))
      buffer = view.getSource();
    else if (auto shard = dyn_cast<ShardViewOp>(def))
      buffer = shard.getSource();
    else if (auto slot = dyn_cast<SlotOp>(def))
      buffer = slot.getSource();
    else
      return {};
  }
  return {};
}

std::optional<plan::rt::tp::UnitRole>
sched::getTensorParallelRole(plan::UnitKind kind, plan::ModelFamily family) {
  return plan::rt::tp::roleOf(toRuntime(kind), toRuntime(family));
}

sched::StepCursor::StepCursor(ProgramOp program) {
  Block &body = program.getBody().front();
  at = body.begin();
  end = outerEnd = body.end();
  enter();
}

void sched::StepCursor::enter() {
  for (; at != end; ++at) {
    auto repeat = dyn_cast<RepeatOp>(*at);
    auto tasks = dyn_cast<TasksOp>(*at);
    if (!repeat && !tasks)
      return;
    bodies.clear();
    bodyMicroBatches.clear();
    order = picks = {};
    if (repeat) {
      bodies.push_back(&repeat.getBody().front());
      bodyMicroBatches.push_back(0);
      runs = static_cast<int64_t>(repeat.getCount());
    } else {
      for (TaskOp task : tasks.getTasks()) {
        bodies.push_back(&task.getBody().front());
        bodyMicroBatches.push_back(static_cast<int64_t>(task.getMicroBatch()));
      }
      order = tasks.getOrder();
      picks = tasks.getPicks().value_or(llvm::ArrayRef<int64_t>());
      runs = static_cast<int64_t>(order.size() / 2);
    }
    resume = std::next(at);
    run = 0;
    if (startRun()) {
      inLoop = true;
      return;
    }
  }
}

bool sched::StepCursor::startRun() {
  for (; run < runs; ++run) {
    // A repeat runs its body for micro-batches `run` on; a tasks' entry
    // runs its body for the entry's.
    size_t body = order.empty() ? 0 : static_cast<size_t>(order[2 * run]);
    Block *block = bodies[body];
    if (block->empty())
      continue;
    at = block->begin();
    end = block->end();
    iteration_ =
        order.empty() ? run : order[2 * run + 1] - bodyMicroBatches[body];
    pick_ = picks.empty() ? -1 : picks[run];
    return true;
  }
  return false;
}

void sched::StepCursor::advance() {
  ++at;
  if (!inLoop)
    return enter();
  if (at != end)
    return;
  skipRuns(1);
}

void sched::StepCursor::skipRuns(int64_t count) {
  assert(inLoop && count >= 1 && "skipRuns: not in a run");
  run += count;
  if (startRun())
    return;
  // Out of the loop: on with the program's ops after it.
  inLoop = false;
  iteration_ = 0;
  pick_ = -1;
  at = resume;
  end = outerEnd;
  enter();
}

LogicalResult sched::requireUnrolled(ProgramOp program, StringRef who) {
  for (Operation &op : program.getBody().front())
    if (failed(requireUnrolled(op, who)))
      return failure();
  return success();
}

LogicalResult sched::requireUnrolled(Operation &op, StringRef who) {
  if (!isa<RepeatOp, TasksOp>(op))
    return success();
  return op.emitOpError("is not for ")
         << who
         << ", which works on a program whose micro-batches are written "
            "out one after the other (docs/sched.md, \"The micro-batch "
            "loop\")";
}

std::pair<int64_t, int64_t> sched::getSlotEventInstance(Operation &op,
                                                        int64_t iteration) {
  auto signal = dyn_cast<SlotSignalOp>(op);
  uint64_t family =
      signal ? signal.getFamily() : cast<SlotEventOp>(op).getFamily();
  uint64_t shift =
      signal ? signal.getShift() : cast<SlotEventOp>(op).getShift();
  auto task = op.getParentOfType<TaskOp>();
  return {static_cast<int64_t>(family),
          static_cast<int64_t>(task.getMicroBatch()) + iteration +
              static_cast<int64_t>(shift)};
}

int64_t sched::getElementBytes(MemRefType type) {
  return (type.getElementTypeBitWidth() + 7) / 8;
}

uint64_t sched::getBufferBytes(MemRefType type) {
  return static_cast<uint64_t>(type.getNumElements()) *
         static_cast<uint64_t>(getElementBytes(type));
}

int64_t sched::getBodyMicroBatch(RepeatOp repeat) {
  for (Operation &op : repeat.getBody().front())
    if (auto mb = op.getAttrOfType<IntegerAttr>("micro_batch"))
      return mb.getInt();
  return 0;
}

std::string sched::RunNames::operator()(Value buffer, int64_t iteration) {
  AllocOp alloc = getRootAlloc(buffer);
  return alloc ? (*this)(alloc, iteration) : std::string("?");
}

std::string sched::RunNames::operator()(AllocOp alloc, int64_t iteration) {
  if (iteration == 0)
    return alloc.getName().str();
  if (auto task = dyn_cast<TaskOp>(alloc->getParentOp())) {
    auto microBatch = static_cast<int64_t>(task.getMicroBatch());
    return plan::rt::shiftMicroBatchInName(alloc.getName().str(), microBatch,
                                           microBatch + iteration);
  }
  auto repeat = dyn_cast<RepeatOp>(alloc->getParentOp());
  if (!repeat)
    return alloc.getName().str();
  auto [it, isNew] = bodyMicroBatch.try_emplace(repeat, 0);
  if (isNew)
    it->second = getBodyMicroBatch(repeat);
  return plan::rt::shiftMicroBatchInName(alloc.getName().str(), it->second,
                                         it->second + iteration);
}
