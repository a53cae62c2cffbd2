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

plan::PeriodSteps::PeriodSteps(sched::TasksOp tasks) {
  if (!tasks)
    return;
  // Per body: its ops, and the least shift from its run's micro-batch that
  // it names (0: the run's own; an op's `micro_batch` against its task's).
  SmallVector<int64_t> opsOfBody, leastShift;
  for (sched::TaskOp task : tasks.getTasks()) {
    Block &body = task.getBody().front();
    if (body.empty())
      return;
    opsOfBody.push_back(static_cast<int64_t>(body.getOperations().size()));
    int64_t least = 0;
    auto written = static_cast<int64_t>(task.getMicroBatch());
    for (Operation &op : body) {
      if (auto mb = op.getAttrOfType<IntegerAttr>("micro_batch"))
        least = std::min(least, mb.getInt() - written);
      if (auto slot = dyn_cast<sched::SlotOp>(op))
        least = std::min(least, static_cast<int64_t>(slot.getShift()));
      else if (auto named = dyn_cast<sched::SlotEventOp>(op))
        least = std::min(least, static_cast<int64_t>(named.getShift()));
      else if (auto signal = dyn_cast<sched::SlotSignalOp>(op))
        least = std::min(least, static_cast<int64_t>(signal.getShift()));
    }
    leastShift.push_back(least);
  }

  ArrayRef<int64_t> order = tasks.getOrder();
  auto runs = static_cast<int64_t>(order.size() / 2);
  auto bodyOf = [&](int64_t run) { return order[2 * run]; };
  for (int64_t run = 0; run < runs; ++run) {
    microBatch.push_back(order[2 * run + 1]);
    bodyOps.push_back(opsOfBody[bodyOf(run)]);
  }
  horizon.assign(runs, 0);
  for (int64_t run = runs - 1; run >= 0; --run) {
    horizon[run] = microBatch[run] + leastShift[bodyOf(run)];
    if (run + 1 < runs)
      horizon[run] = std::min(horizon[run], horizon[run + 1]);
  }

  // The period whose stretch leaves the most runs to step over (two periods
  // walked before a step, one after it).
  int64_t bestGain = 0;
  for (int64_t length = 1; length <= std::min<int64_t>(runs / 4, 512);
       ++length) {
    for (int64_t run = 0; run + length < runs;) {
      int64_t last = run;
      int64_t shift = microBatch[run + length] - microBatch[run];
      while (last + length < runs && bodyOf(last + length) == bodyOf(last) &&
             microBatch[last + length] - microBatch[last] == shift)
        ++last;
      // Runs [run, last + length) repeat with this period.
      int64_t gain = last + length - run - 3 * length;
      if (last > run && gain > bestGain) {
        bestGain = gain;
        begin = run;
        end = last + length;
        period = length;
        microBatches = shift;
      }
      run = std::max(last, run + 1);
    }
  }
  stopped = bestGain == 0;
}

bool plan::PeriodSteps::stepOver(
    sched::StepCursor &cursor,
    llvm::function_ref<std::vector<int64_t>(int64_t, int64_t)> fingerprint) {
  Operation &op = *cursor;
  if (!isa<sched::TaskOp>(op.getParentOp()) || &op != &op.getBlock()->front())
    return false;
  ++run;
  if (stopped || run < begin || (run - begin) % period != 0 ||
      run + period > end)
    return false;
  std::vector<int64_t> now = fingerprint(microBatch[run], horizon[run]);
  bool same = !before.empty() && now == before;
  before = std::move(now);
  if (!same) {
    if (++unmatched > 16)
      stopped = true; // the walk's state does not settle
    return false;
  }
  // What the fingerprints leave out lies below the horizon: it must move on
  // with the micro-batches over the periods compared and stepped over.
  auto moves = [&](int64_t r) {
    if (r >= static_cast<int64_t>(horizon.size()))
      return true; // the table's end: no run is left to name anything
    return horizon[r] - horizon[r - period] == microBatches;
  };
  if (!moves(run))
    return false;
  int64_t periods = 0;
  while (run + (periods + 1) * period <= end &&
         moves(run + (periods + 1) * period))
    ++periods;
  if (periods == 0)
    return false;
  int64_t runs = periods * period;
  for (int64_t r = run; r < run + runs; ++r)
    for (int64_t ops = bodyOps[r]; ops > 0; --ops)
      cursor.advance();
  stopped = true;
  offset_ = periods * microBatches;
  taken = Step{run, runs, period};
  run += runs - 1; // the cursor is at run `run + runs`'s start, if any
  return true;
}
