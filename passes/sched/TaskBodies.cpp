//===- TaskBodies.cpp - Helpers for passes that rewrite task bodies -------===//
//
// What the rewriting passes add around a body depends on where its runs
// stand in the step (a chunk's last micro-batch, the task that follows), so
// a pass that runs on a sched.tasks first gives each such kind of run a body
// of its own; what one body leaves to a later one lies in slot buffers of
// the program (docs/sched.md, "The micro-batch loop").
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

#include <map>

using namespace mlir;

void plan::splitTaskBodies(sched::TasksOp tasks, ArrayRef<int64_t> keys) {
  SmallVector<sched::TaskOp> bodies = tasks.getTasks();
  SmallVector<int64_t> table(tasks.getOrder());
  assert(keys.size() * 2 == table.size() && "a key per entry");
  Block &block = tasks.getBody().front();
  OpBuilder builder = OpBuilder::atBlockEnd(&block);
  SmallVector<bool> kept(bodies.size(), false);
  auto next = static_cast<int64_t>(bodies.size());
  std::map<std::pair<int64_t, int64_t>, int64_t> variants;
  for (auto [entry, key] : llvm::enumerate(keys)) {
    int64_t &body = table[2 * entry];
    auto [it, added] = variants.try_emplace({body, key}, body);
    if (added && kept[static_cast<size_t>(body)]) {
      builder.clone(*bodies[static_cast<size_t>(body)]);
      it->second = next++;
    }
    kept[static_cast<size_t>(body)] = true;
    body = it->second;
  }
  tasks.setOrder(table);
}

sched::AllocOp plan::allocSlotBuffer(sched::TasksOp tasks, MemRefType slotType,
                                     StringRef name, sched::BufferRole role,
                                     int64_t slots) {
  OpBuilder builder(tasks);
  Location loc = tasks.getLoc();
  auto buffer = sched::AllocOp::create(
      builder, loc,
      sched::getBufferType(
          builder.getContext(), slots * slotType.getNumElements(),
          slotType.getElementType(), sched::getMemorySpace(slotType)),
      name, role, /*persistent=*/false, /*offset=*/IntegerAttr());
  builder.setInsertionPointAfter(tasks);
  sched::FreeOp::create(builder, loc, buffer);
  return buffer;
}

StringRef plan::writtenOutName(sched::AllocOp alloc) {
  StringRef name = alloc.getName();
  name.consume_back(reducingSuffix);
  return name;
}

LogicalResult plan::requireNoRepeat(sched::ProgramOp program, StringRef who) {
  for (Operation &op : program.getBody().front())
    if (isa<sched::RepeatOp>(op))
      return sched::requireUnrolled(op, who);
  return success();
}

void plan::RunSlots::place(Value value, Value source, int64_t slot,
                           int64_t slotElements, int64_t mb) {
  Value slotBuffer = source;
  int64_t offset = 0;
  while (auto view = source.getDefiningOp<sched::ViewOp>()) {
    offset += static_cast<int64_t>(view.getOffset());
    source = view.getSource();
  }
  inSlot[value] = {source.getDefiningOp<sched::AllocOp>(),
                   slot,
                   offset + slot * slotElements,
                   {slotBuffer.getAsOpaquePointer(), mb}};
}

LogicalResult plan::RunSlots::visit(Operation *op, Operation *at,
                                    int64_t runMicroBatch) {
  if (isa<sched::ViewOp, sched::ShardViewOp>(op)) {
    auto it = inSlot.find(op->getOperand(0));
    if (it != inSlot.end()) {
      InSlot view = it->second; // before the map may grow
      inSlot[op->getResult(0)] = view;
    }
    return success();
  }
  for (Value operand : op->getOperands()) {
    auto it = inSlot.find(operand);
    if (it == inSlot.end() || !it->second.root)
      continue;
    InSlot use = it->second;
    Holder holder;
    if (occupancy.use(use.root.getOperation(), use.start, use.holder, holder))
      continue;
    InFlightDiagnostic diag = at->emitOpError("in the run of micro-batch ")
                              << runMicroBatch << " uses slot " << use.slot
                              << " of '" << use.root.getName()
                              << "' for micro-batch " << use.holder.second
                              << " after ";
    if (holder.first == use.holder.first)
      return diag << "micro-batch " << holder.second
                  << " took it: its slots are fewer than the micro-batches "
                     "in flight";
    return diag << "another slot buffer in it took it for micro-batch "
                << holder.second
                << ": slot buffers that share an allocation must not be "
                   "in use at once";
  }
  return success();
}
