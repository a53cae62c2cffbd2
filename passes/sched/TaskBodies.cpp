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

int64_t plan::RunSlots::place(Value value, sched::SlotOp slot, Value source,
                              int64_t mb, int64_t pick) {
  auto shift = static_cast<int64_t>(slot.getShift());
  int64_t index =
      slot.isPicked()
          ? pick
          : rt::slotIndex(mb, shift, static_cast<int64_t>(slot.getSlots()));
  int64_t start = slot.slotStart(index);
  Value slotBuffer = source;
  int64_t offset = 0;
  while (auto view = source.getDefiningOp<sched::ViewOp>()) {
    offset += static_cast<int64_t>(view.getOffset());
    source = view.getSource();
  }
  // A picked slot is held whole by its group's micro-batch, whatever its
  // members' offsets in it.
  int64_t group = -1, held = start;
  if (slot.isPicked()) {
    group = static_cast<int64_t>(*slot.getGroup());
    held = index * static_cast<int64_t>(*slot.getStride());
  }
  inSlot[value] = {source.getDefiningOp<sched::AllocOp>(),
                   index,
                   offset + held,
                   {slotBuffer.getAsOpaquePointer(), group, mb + shift}};
  return start;
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
                              << " of '" << use.root.getName() << "' for ";
    if (use.holder.group >= 0)
      diag << "group " << use.holder.group << "'s ";
    diag << "micro-batch " << use.holder.mb << " after ";
    if (holder.buffer == use.holder.buffer && holder.group == use.holder.group)
      return diag << "micro-batch " << holder.mb
                  << " took it: its slots are fewer than the micro-batches "
                     "in flight";
    if (holder.buffer == use.holder.buffer)
      return diag << "group " << holder.group << " took it for micro-batch "
                  << holder.mb
                  << ": the table's picks give one slot to two micro-batches "
                     "in flight at once";
    return diag << "another slot buffer in it took it for micro-batch "
                << holder.mb
                << ": slot buffers that share an allocation must not be "
                   "in use at once";
  }
  return success();
}

plan::PeriodSteps::PeriodSteps(sched::TasksOp tasks) {
  if (!tasks)
    return;
  // Per body: the least shift from its run's micro-batch that it names (0:
  // the run's own; an op's `micro_batch` against its task's).
  SmallVector<int64_t> leastShift;
  for (sched::TaskOp task : tasks.getTasks()) {
    Block &body = task.getBody().front();
    if (body.empty())
      return;
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
  // The picks repeat with the period up to one renaming of the slots
  // (sigma: run r's pick to run r + period's), which a stretch keeps
  // consistent both ways.
  ArrayRef<int64_t> picks = tasks.getPicks().value_or(ArrayRef<int64_t>());
  auto pickOf = [&](int64_t run) { return picks.empty() ? -1 : picks[run]; };
  int64_t slots = 0;
  for (int64_t pick : picks)
    slots = std::max(slots, pick + 1);
  std::vector<int64_t> to(static_cast<size_t>(slots), -1),
      from(static_cast<size_t>(slots), -1);
  SmallVector<int64_t> touched;
  auto renames = [&](int64_t a, int64_t b) {
    if (a < 0 || b < 0)
      return a == b;
    auto &forward = to[static_cast<size_t>(a)];
    auto &backward = from[static_cast<size_t>(b)];
    if (forward < 0 && backward < 0) {
      forward = b;
      backward = a;
      touched.push_back(a);
      return true;
    }
    return forward == b && backward == a;
  };
  auto forget = [&] {
    for (int64_t a : touched) {
      from[static_cast<size_t>(to[static_cast<size_t>(a)])] = -1;
      to[static_cast<size_t>(a)] = -1;
    }
    touched.clear();
  };
  for (int64_t run = 0; run < runs; ++run)
    microBatch.push_back(order[2 * run + 1]);
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
      forget();
      while (last + length < runs && bodyOf(last + length) == bodyOf(last) &&
             microBatch[last + length] - microBatch[last] == shift &&
             renames(pickOf(last), pickOf(last + length)))
        ++last;
      // Runs [run, last + length) repeat with this period.
      int64_t gain = last + length - run - 3 * length;
      if (last > run && gain > bestGain) {
        bestGain = gain;
        begin = run;
        end = last + length;
        period = length;
        microBatches = shift;
        sigma = to;
      }
      run = std::max(last, run + 1);
    }
  }
  stopped = bestGain == 0;
  if (stopped || slots == 0) {
    sigma.clear();
    return;
  }
  // Sigma over every slot: the slots the middle never picks renamed among
  // themselves, in order.
  std::vector<bool> taken(static_cast<size_t>(slots), false);
  for (int64_t b : sigma)
    if (b >= 0)
      taken[static_cast<size_t>(b)] = true;
  int64_t free = 0;
  for (int64_t &b : sigma) {
    if (b >= 0)
      continue;
    while (taken[static_cast<size_t>(free)])
      ++free;
    b = free++;
  }
  inverse.assign(static_cast<size_t>(slots), 0);
  for (int64_t a = 0; a < slots; ++a)
    inverse[static_cast<size_t>(sigma[static_cast<size_t>(a)])] = a;
  // Before the middle's first period, no renaming.
  for (int64_t a = 0; a < slots; ++a)
    relabel_.push_back(a);
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
  // At period i > 0, sigma^-i: one more inverse than the period before.
  if (run > begin && !inverse.empty())
    for (int64_t &label : relabel_)
      label = inverse[static_cast<size_t>(label)];
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
  cursor.skipRuns(runs);
  // The runs from here pick sigma^periods of what the walk's would.
  if (!inverse.empty()) {
    for (int64_t a = 0; a < static_cast<int64_t>(inverse.size()); ++a)
      seen.push_back(a);
    for (int64_t p = 0; p < periods; ++p)
      for (int64_t &label : seen)
        label = inverse[static_cast<size_t>(label)];
  }
  stopped = true;
  offset_ = periods * microBatches;
  taken = Step{run, runs, period};
  run += runs - 1; // the cursor is at run `run + runs`'s start, if any
  return true;
}
