//===- TaskBodies.cpp - What a pass rewriting a sched.tasks' bodies needs
//--===//
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

LogicalResult plan::requireNoRepeat(sched::ProgramOp program, StringRef who) {
  for (Operation &op : program.getBody().front())
    if (isa<sched::RepeatOp>(op))
      return sched::requireUnrolled(op, who);
  return success();
}
