//===- ScheduleTasks.cpp - A program's tasks, expanded --------------------===//
//
// A file may hold a body of ops once with the table of its runs (a
// sched.repeat's body: gradient accumulation's middle micro-batches) instead
// of every run's ops. The reader expands it into the program the executor
// runs, the one the compiler's walk of the repeat gives: each run's
// buffers and events get the next ids where the run stands, its ops their
// micro-batch and its allocs their names for it, and everything defined
// after it moves up. A task's slot buffers become views of the slot its
// run's micro-batch takes, and its slot events the event of their instance.
// A held buffer's slot becomes a view of an alloc of its own per holder
// (slot buffer, micro-batch) at the held buffer's bytes, allocated before
// the holder's first use and freed after its last or after the wait that
// completes the last asynchronous op using it (placeHolders).
// docs/schedule-format.md ("Tasks") is the contract.
//
//===----------------------------------------------------------------------===//

#include "Parallel.h"
#include "ScheduleFile.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <type_traits>

namespace plan::rt {
namespace {

/// The most ops and buffers an expanded program may hold: a file of a few
/// kilobytes must not ask for gigabytes.
constexpr int64_t kMaxExpanded = int64_t{1} << 26;

class TaskExpander {
public:
  TaskExpander(Program &program, int64_t microBatches, std::string prefix)
      : p(program), microBatches(microBatches), prefix(std::move(prefix)) {}

  void run();

private:
  [[noreturn]] void fail(const std::string &what) const {
    throw ScheduleFileError(prefix + what);
  }
  void checkTables();
  void checkTask(size_t t) const;
  std::string shiftOutOfRange(int64_t shift) const {
    return "shift " + std::to_string(shift) + " is outside [-" +
           std::to_string(microBatches) + ", " + std::to_string(microBatches) +
           "], the step's micro-batches";
  }
  /// Where program buffer (event) `id` lands in the expanded program.
  int64_t programBuffer(int64_t id) const;
  int64_t programEvent(int64_t id) const;
  /// Appends the run of entry `entry` of run table `table`.
  void expandRun(size_t table, size_t entry);
  /// That run's op uses slot `slot` of program buffer `source` for
  /// micro-batch `mb` (of group `group`, a picked slot's, or -1): fails if
  /// another has used it since `mb` last did.
  void useSlot(int64_t source, int64_t slot, int64_t group, int64_t mb,
               size_t table, size_t entry);
  /// The held buffer each program buffer lies in (-1: none) and its first
  /// element there; fails on a held buffer that breaks the rules.
  void findHeld();
  /// Appends run table `table`'s holders' allocs (not their ops).
  void addHolders(size_t table);
  /// Gives each holder its alloc and free ops (after every table is
  /// expanded).
  void placeHolders();

  Program &p;
  int64_t microBatches;
  std::string prefix;
  // Per run table: where it stands, and the buffers and events its runs
  // add.
  std::vector<int64_t> buffersBefore, eventsBefore, addedBuffers, addedEvents;
  // The expanded event of each slot event instance (family, micro-batch).
  std::map<std::pair<int64_t, int64_t>, int64_t> instances;
  // What holds each slot (program buffer, slot): a picked slot's group
  // (-1 for others) and a micro-batch.
  SlotOccupancy<int64_t, std::pair<int64_t, int64_t>> occupancy;
  // Per program buffer: the held buffer it lies in (-1: none) and its first
  // element there; the run table whose slots use each held buffer.
  std::vector<int64_t> heldRoot, heldElement;
  std::map<int64_t, size_t> heldTable;
  // Per run table, its holders (slot buffer, micro-batch) in order of first
  // use, and their index; the expanded ids of every table's holders.
  std::vector<std::vector<std::pair<int64_t, int64_t>>> holders;
  std::vector<std::map<std::pair<int64_t, int64_t>, int64_t>> holderIndex;
  std::vector<int64_t> firstHolder, tableOps;
  std::vector<int64_t> holderIds;
  Program out;
};

/// Whether a shift of `shift` micro-batches stays within the step's.
bool shiftInRange(int64_t shift, int64_t microBatches) {
  return shift >= -microBatches && shift <= microBatches;
}

void TaskExpander::findHeld() {
  auto P = static_cast<int64_t>(p.buffers.size());
  heldRoot.assign(p.buffers.size(), -1);
  heldElement.assign(p.buffers.size(), 0);
  for (int64_t b = 0; b < P; ++b) {
    const Buffer &buffer = p.buffers[static_cast<size_t>(b)];
    std::string id = "buffer " + std::to_string(b);
    if (buffer.kind == Buffer::Kind::Alloc) {
      if (!buffer.held)
        continue;
      if (buffer.persistent)
        fail(id + " ('" + buffer.name +
             "') is held and persistent: only a transient buffer is held");
      heldRoot[static_cast<size_t>(b)] = b;
      continue;
    }
    if (buffer.source < 0 || buffer.source >= b)
      continue; // the expanded program's checks say what is wrong
    int64_t root = heldRoot[static_cast<size_t>(buffer.source)];
    if (root < 0)
      continue;
    if (buffer.kind != Buffer::Kind::View)
      fail(id + " is a shard view of held buffer " + std::to_string(root) +
           ": a held buffer's slots are its views");
    heldRoot[static_cast<size_t>(b)] = root;
    heldElement[static_cast<size_t>(b)] =
        heldElement[static_cast<size_t>(buffer.source)] + buffer.viewOffset;
  }
  for (size_t t = 0; t < p.tasks.size(); ++t)
    for (size_t b = 0; b < p.tasks[t].buffers.size(); ++b) {
      const Buffer &buffer = p.tasks[t].buffers[b];
      if (buffer.kind != Buffer::Kind::Slot || buffer.source < 0 ||
          buffer.source >= P ||
          heldRoot[static_cast<size_t>(buffer.source)] < 0)
        continue;
      if (buffer.slots != 1 || buffer.slotGroup != -1)
        fail("task " + std::to_string(t) + ": buffer " +
             std::to_string(P + int64_t(b)) + " is a slot of held buffer " +
             std::to_string(heldRoot[static_cast<size_t>(buffer.source)]) +
             ": a held buffer has one slot, not picked (slots 1, group -1)");
    }
}

void TaskExpander::checkTask(size_t t) const {
  auto P = static_cast<int64_t>(p.buffers.size());
  const Task &task = p.tasks[t];
  std::string at = "task " + std::to_string(t) + ": ";
  if (task.microBatch < 0 || task.microBatch >= microBatches)
    fail(at + "micro_batch " + std::to_string(task.microBatch) +
         " is not one of the step's " + std::to_string(microBatches));
  if (task.numEvents < 0 ||
      task.numEvents > static_cast<int64_t>(task.ops.size()))
    fail(at + "num_events " + std::to_string(task.numEvents) +
         " is negative or more than its ops");
  for (size_t b = 0; b < task.buffers.size(); ++b) {
    const Buffer &buffer = task.buffers[b];
    std::string id = "buffer " + std::to_string(P + int64_t(b));
    if (buffer.kind == Buffer::Kind::Alloc) {
      if (buffer.persistent)
        fail(at + id + " ('" + buffer.name +
             "') is persistent: a task's buffers live in one run");
      continue;
    }
    if (buffer.kind != Buffer::Kind::Slot) {
      if (buffer.source < 0 || buffer.source >= P + static_cast<int64_t>(b))
        fail(at + id + " is a view of " + std::to_string(buffer.source) +
             ", which is not an earlier buffer");
      continue;
    }
    if (buffer.source < 0 || buffer.source >= P)
      fail(at + id + " is a slot of " + std::to_string(buffer.source) +
           ", which is not a program buffer (0 to " + std::to_string(P - 1) +
           ")");
    int64_t sourceNumel = p.buffers[static_cast<size_t>(buffer.source)].numel;
    if (buffer.slotGroup < -1)
      fail(at + id + ": group " + std::to_string(buffer.slotGroup) +
           " is neither -1 (a slot of its micro-batch) nor a group (>= 0)");
    bool picked = buffer.slotGroup >= 0;
    if (!picked && (buffer.slotStride != 0 || buffer.slotOffset != 0))
      fail(at + id + ": a slot of group -1 has stride and offset 0");
    // A picked slot's elements, and its slot's.
    int64_t stride = picked ? buffer.slotStride : buffer.numel;
    if (picked && (buffer.numel < 1 || buffer.slotOffset < 0 ||
                   buffer.slotOffset > buffer.slotStride - buffer.numel))
      fail(at + id + ": elements [" + std::to_string(buffer.slotOffset) + ", " +
           std::to_string(buffer.slotOffset + buffer.numel) +
           ") are not in a slot of " + std::to_string(buffer.slotStride) +
           " elements");
    if (stride < 1 || buffer.slots < 1 || buffer.slots > sourceNumel / stride)
      fail(at + id + ": " + std::to_string(buffer.slots) + " slots of " +
           std::to_string(stride) + " elements are not in buffer " +
           std::to_string(buffer.source) + "'s " + std::to_string(sourceNumel));
    if (picked && buffer.shift != 0)
      fail(at + id + ": a picked slot is its run's own: shift must be 0, got " +
           std::to_string(buffer.shift));
    if (!shiftInRange(buffer.shift, microBatches))
      fail(at + id + ": " + shiftOutOfRange(buffer.shift));
  }
  for (size_t e = 0; e < task.slotEvents.size(); ++e) {
    auto [family, shift] = task.slotEvents[e];
    std::string id = "slot event " +
                     std::to_string(p.numEvents + task.numEvents + int64_t(e));
    if (family < 0 || family >= p.slotEventFamilies)
      fail(at + id + ": family " + std::to_string(family) +
           " is not one of the program's " +
           std::to_string(p.slotEventFamilies) + " slot event families");
    if (!shiftInRange(shift, microBatches))
      fail(at + id + ": " + shiftOutOfRange(shift));
  }
}

void TaskExpander::checkTables() {
  auto P = static_cast<int64_t>(p.buffers.size());
  int64_t ops = static_cast<int64_t>(p.ops.size());
  findHeld();
  // Per task, the fewest slots of its picked slot buffers (0: none), and
  // its slots of held buffers (source, shift).
  std::vector<int64_t> pickedSlots;
  std::vector<std::vector<std::pair<int64_t, int64_t>>> heldSlots(
      p.tasks.size());
  for (size_t t = 0; t < p.tasks.size(); ++t) {
    checkTask(t);
    int64_t fewest = 0;
    for (const Buffer &buffer : p.tasks[t].buffers) {
      if (buffer.kind == Buffer::Kind::Slot && buffer.slotGroup >= 0)
        fewest = fewest ? std::min(fewest, buffer.slots) : buffer.slots;
      if (buffer.kind == Buffer::Kind::Slot &&
          heldRoot[static_cast<size_t>(buffer.source)] >= 0)
        heldSlots[t].push_back({buffer.source, buffer.shift});
    }
    pickedSlots.push_back(fewest);
  }
  // The slot event instances the runs before have taken an event for
  // (expandRun numbers them in the same order).
  std::set<std::pair<int64_t, int64_t>> taken;
  int64_t lastAt = 0, lastBuffers = 0, lastEvents = 0;
  int64_t expandedOps = ops, expandedBuffers = P, expandedEvents = 0;
  for (size_t r = 0; r < p.runs.size(); ++r) {
    const TaskRuns &runs = p.runs[r];
    std::string at = "runs " + std::to_string(r) + ": ";
    if (runs.at < lastAt || runs.at > ops)
      fail(at + "at " + std::to_string(runs.at) +
           " is not an op index in program order (" + std::to_string(lastAt) +
           " to " + std::to_string(ops) + ")");
    if (runs.buffersBefore < lastBuffers || runs.buffersBefore > P)
      fail(at + "buffers_before " + std::to_string(runs.buffersBefore) +
           " is not in program order (" + std::to_string(lastBuffers) + " to " +
           std::to_string(P) + ")");
    if (runs.eventsBefore < lastEvents || runs.eventsBefore > p.numEvents)
      fail(at + "events_before " + std::to_string(runs.eventsBefore) +
           " is not in program order (" + std::to_string(lastEvents) + " to " +
           std::to_string(p.numEvents) + ")");
    lastAt = runs.at;
    lastBuffers = runs.buffersBefore;
    lastEvents = runs.eventsBefore;
    if (!runs.picks.empty() && runs.picks.size() != runs.order.size())
      fail(at + "picks must hold one slot per order entry (" +
           std::to_string(runs.order.size()) + "), got " +
           std::to_string(runs.picks.size()));
    int64_t buffers = 0, events = 0;
    auto &tableHolders = holders.emplace_back();
    auto &tableIndex = holderIndex.emplace_back();
    for (size_t entry = 0; entry < runs.order.size(); ++entry) {
      auto [task, mb] = runs.order[entry];
      if (task < 0 || task >= static_cast<int64_t>(p.tasks.size()))
        fail(at + "task " + std::to_string(task) + " is not one of the " +
             std::to_string(p.tasks.size()) + " tasks");
      if (mb < 0 || mb >= microBatches)
        fail(at + "micro-batch " + std::to_string(mb) +
             " is not one of the step's " + std::to_string(microBatches));
      const Task &body = p.tasks[task];
      int64_t slots = pickedSlots[static_cast<size_t>(task)];
      if (slots && runs.picks.empty())
        fail(at + "task " + std::to_string(task) +
             " has picked slots, so the table needs picks");
      int64_t pick = runs.picks.empty() ? -1 : runs.picks[entry];
      if (slots && (pick < 0 || pick >= slots))
        fail(at + "entry " + std::to_string(entry) + " picks slot " +
             std::to_string(pick) + ", not one of the " +
             std::to_string(slots) + " of its task's picked slots");
      if (!slots && pick != -1)
        fail(at + "entry " + std::to_string(entry) + " picks slot " +
             std::to_string(pick) + ", but its task " + std::to_string(task) +
             " has no picked slot (-1)");
      // Each (held slot buffer, micro-batch) is one holder, an alloc of
      // the table's, before its runs' buffers.
      for (auto [source, shift] : heldSlots[static_cast<size_t>(task)]) {
        int64_t root = heldRoot[static_cast<size_t>(source)];
        if (auto [it, added] = heldTable.try_emplace(root, r);
            !added && it->second != r)
          fail(at + "held buffer " + std::to_string(root) +
               " has slots in run tables " + std::to_string(it->second) +
               " and " + std::to_string(r) + ": a held buffer is one table's");
        if (tableIndex
                .try_emplace({source, mb + shift},
                             static_cast<int64_t>(tableHolders.size()))
                .second) {
          tableHolders.push_back({source, mb + shift});
          ++buffers;
          ++expandedBuffers;
          expandedOps += 2; // its alloc and free
        }
      }
      buffers += static_cast<int64_t>(body.buffers.size());
      events += body.numEvents;
      // A slot event instance is one event, taken where it first appears.
      for (auto [family, shift] : body.slotEvents)
        if (taken.insert({family, mb + shift}).second)
          ++events;
      expandedOps += static_cast<int64_t>(body.ops.size());
      expandedBuffers += static_cast<int64_t>(body.buffers.size());
      expandedEvents +=
          body.numEvents + static_cast<int64_t>(body.slotEvents.size());
      if (expandedOps > kMaxExpanded || expandedBuffers > kMaxExpanded ||
          expandedEvents > kMaxExpanded)
        fail(at + "expands the program past " + std::to_string(kMaxExpanded) +
             " ops, buffers or events");
    }
    buffersBefore.push_back(runs.buffersBefore);
    eventsBefore.push_back(runs.eventsBefore);
    addedBuffers.push_back(buffers);
    addedEvents.push_back(events);
  }
  // The expanded program's size, known now: no reallocation while the runs
  // are appended (millions of ops at hundreds of micro-batches).
  out.ops.reserve(static_cast<size_t>(expandedOps));
  out.buffers.reserve(static_cast<size_t>(expandedBuffers));
}

/// `id` after the runs that stand before it (`before[r]` <= id) added
/// theirs. An id past the program's (`count`) stays past the expanded
/// program's, and a negative one negative: the expanded program's checks
/// then say what is wrong with it.
int64_t shiftedId(int64_t id, int64_t count, const std::vector<int64_t> &before,
                  const std::vector<int64_t> &added) {
  if (id < 0)
    return id;
  int64_t shifted = id;
  for (size_t r = 0; r < added.size(); ++r)
    if (id >= count || before[r] <= id)
      shifted += added[r];
  return shifted;
}

int64_t TaskExpander::programBuffer(int64_t id) const {
  return shiftedId(id, static_cast<int64_t>(p.buffers.size()), buffersBefore,
                   addedBuffers);
}

int64_t TaskExpander::programEvent(int64_t id) const {
  return shiftedId(id, p.numEvents, eventsBefore, addedEvents);
}

void TaskExpander::useSlot(int64_t source, int64_t slot, int64_t group,
                           int64_t mb, size_t table, size_t entry) {
  std::pair<int64_t, int64_t> holder;
  if (occupancy.use(source, slot, {group, mb}, holder))
    return;
  const Buffer &b = p.buffers[static_cast<size_t>(source)];
  auto [task, runMb] = p.runs[table].order[entry];
  auto held = [](std::pair<int64_t, int64_t> h) {
    return (h.first >= 0 ? "group " + std::to_string(h.first) + "'s " : "") +
           "micro-batch " + std::to_string(h.second);
  };
  fail("runs " + std::to_string(table) + ": task " + std::to_string(task) +
       " for micro-batch " + std::to_string(runMb) + ": slot " +
       std::to_string(slot) + " of buffer " + std::to_string(source) +
       (b.kind == Buffer::Kind::Alloc ? " ('" + b.name + "')" : "") +
       " is used for " + held({group, mb}) + " after " + held(holder) +
       (group >= 0 ? " took it: the picks give one slot to two micro-batches "
                     "in flight at once"
                   : " took it: its slots are fewer than the micro-batches in "
                     "flight"));
}

void TaskExpander::expandRun(size_t table, size_t entry) {
  auto [taskId, mb] = p.runs[table].order[entry];
  const Task &task = p.tasks[static_cast<size_t>(taskId)];
  auto P = static_cast<int64_t>(p.buffers.size());
  int64_t E = p.numEvents;
  int64_t firstBuffer = static_cast<int64_t>(out.buffers.size());
  int64_t firstEvent = out.numEvents;
  auto localBuffers = static_cast<int64_t>(task.buffers.size());
  out.numEvents += task.numEvents;
  std::vector<int64_t> slotEvents;
  for (auto [family, shift] : task.slotEvents) {
    auto [it, added] = instances.try_emplace({family, mb + shift}, 0);
    if (added)
      it->second = out.numEvents++;
    slotEvents.push_back(it->second);
  }
  auto localEvents = task.numEvents + static_cast<int64_t>(slotEvents.size());
  // Each of the task's buffers that lies in a slot: (source, slot, the
  // micro-batch it holds).
  struct InSlot {
    int64_t source = -1, slot = 0, group = -1, mb = 0;
  };
  std::vector<InSlot> inSlot(task.buffers.size());
  auto local = [&](int64_t id) {
    if (id >= P && id < P + localBuffers)
      return id - P;
    if (id >= P)
      fail("task buffer id " + std::to_string(id) + " is out of range (" +
           std::to_string(P + localBuffers) + " ids)");
    return int64_t{-1};
  };
  auto buffer = [&](int64_t id) {
    int64_t i = local(id);
    return i >= 0 ? firstBuffer + i : programBuffer(id);
  };
  auto usedBuffer = [&](int64_t id) {
    int64_t i = local(id);
    if (i < 0)
      return programBuffer(id);
    if (const InSlot &s = inSlot[static_cast<size_t>(i)]; s.source >= 0)
      useSlot(s.source, s.slot, s.group, s.mb, table, entry);
    return firstBuffer + i;
  };
  auto event = [&](int64_t id) {
    if (id >= E && id < E + task.numEvents)
      return firstEvent + (id - E);
    if (id >= E && id < E + localEvents)
      return slotEvents[static_cast<size_t>(id - E - task.numEvents)];
    if (id >= E)
      fail("task event id " + std::to_string(id) + " is out of range (" +
           std::to_string(E + localEvents) + " ids)");
    return programEvent(id);
  };
  for (size_t i = 0; i < task.buffers.size(); ++i) {
    Buffer copy = task.buffers[i];
    switch (copy.kind) {
    case Buffer::Kind::Alloc:
      copy.name = shiftMicroBatchInName(copy.name, task.microBatch, mb);
      break;
    case Buffer::Kind::Slot: {
      bool picked = copy.slotGroup >= 0;
      int64_t slot = picked ? p.runs[table].picks[entry]
                            : slotIndex(mb, copy.shift, copy.slots);
      inSlot[i] = {copy.source, slot, copy.slotGroup, mb + copy.shift};
      copy.kind = Buffer::Kind::View;
      if (heldRoot[static_cast<size_t>(copy.source)] >= 0) {
        copy.source = firstHolder[table] +
                      holderIndex[table].at({copy.source, mb + copy.shift});
        copy.viewOffset = 0;
      } else {
        copy.source = programBuffer(copy.source);
        copy.viewOffset = picked ? slot * copy.slotStride + copy.slotOffset
                                 : slot * copy.numel;
      }
      copy.slots = copy.shift = 0;
      copy.slotGroup = -1;
      copy.slotStride = copy.slotOffset = 0;
      break;
    }
    case Buffer::Kind::View:
    case Buffer::Kind::ShardView:
      if (int64_t source = local(copy.source); source >= 0)
        inSlot[i] = inSlot[static_cast<size_t>(source)];
      copy.source = buffer(copy.source);
      break;
    }
    out.buffers.push_back(std::move(copy));
  }
  for (const Op &op : task.ops) {
    Op copy = op;
    remapOp(copy, usedBuffer, event, mb - task.microBatch);
    out.ops.push_back(std::move(copy));
  }
}

void TaskExpander::run() {
  checkTables();
  out.arenaBytes = p.arenaBytes;
  out.persistentBytes = p.persistentBytes;
  out.workspaceBytes = p.workspaceBytes;
  auto programBufferOf = [&](int64_t id) { return programBuffer(id); };
  auto programEventOf = [&](int64_t id) { return programEvent(id); };
  // In program order: the program's buffers and ops up to where a run table
  // stands, then its runs, each with its buffers, events and ops.
  size_t nextBuffer = 0, nextOp = 0;
  auto copyProgram = [&](size_t buffersUpTo, size_t opsUpTo) {
    for (; nextBuffer < buffersUpTo; ++nextBuffer) {
      Buffer copy = p.buffers[nextBuffer];
      if (copy.kind != Buffer::Kind::Alloc)
        copy.source = programBuffer(copy.source);
      out.buffers.push_back(std::move(copy));
    }
    for (; nextOp < opsUpTo; ++nextOp) {
      Op copy = p.ops[nextOp];
      remapOp(copy, programBufferOf, programEventOf, 0);
      out.ops.push_back(std::move(copy));
    }
  };
  int64_t eventsAdded = 0;
  for (size_t r = 0; r < p.runs.size(); ++r) {
    const TaskRuns &runs = p.runs[r];
    copyProgram(static_cast<size_t>(runs.buffersBefore),
                static_cast<size_t>(runs.at));
    out.numEvents = runs.eventsBefore + eventsAdded;
    addHolders(r);
    for (size_t entry = 0; entry < runs.order.size(); ++entry)
      expandRun(r, entry);
    eventsAdded += addedEvents[r];
  }
  copyProgram(p.buffers.size(), p.ops.size());
  out.numEvents = p.numEvents + eventsAdded;
  placeHolders();
  p = std::move(out);
}

void TaskExpander::addHolders(size_t table) {
  firstHolder.push_back(static_cast<int64_t>(out.buffers.size()));
  tableOps.push_back(static_cast<int64_t>(out.ops.size()));
  for (auto [source, mb] : holders[table]) {
    auto root = static_cast<size_t>(heldRoot[static_cast<size_t>(source)]);
    const Buffer &held = p.buffers[root];
    Buffer holder;
    holder.kind = Buffer::Kind::Alloc;
    holder.type = held.type;
    holder.space = held.space;
    holder.numel = p.buffers[static_cast<size_t>(source)].numel;
    holder.name =
        held.name +
        (source == static_cast<int64_t>(root) ? ""
                                              : ".b" + std::to_string(source)) +
        ".mb" + std::to_string(mb);
    holder.role = held.role;
    holder.offset =
        held.offset + heldElement[static_cast<size_t>(source)] *
                          static_cast<int64_t>(elementBytes(held.type));
    holderIds.push_back(static_cast<int64_t>(out.buffers.size()));
    out.buffers.push_back(std::move(holder));
  }
}

void TaskExpander::placeHolders() {
  if (holderIds.empty())
    return;
  // Each expanded buffer's holder (-1: none), through views.
  std::vector<int64_t> holderOf(out.buffers.size(), -1);
  for (size_t h = 0; h < holderIds.size(); ++h)
    holderOf[static_cast<size_t>(holderIds[h])] = static_cast<int64_t>(h);
  for (size_t b = 0; b < out.buffers.size(); ++b) {
    const Buffer &buffer = out.buffers[b];
    if (buffer.kind != Buffer::Kind::Alloc && buffer.source >= 0 &&
        buffer.source < static_cast<int64_t>(b))
      holderOf[b] = holderOf[static_cast<size_t>(buffer.source)];
  }
  // Each holder's first and last use (op indices), its asynchronous users'
  // completion included: the op an event's wait completes, and the ops it
  // started after (as the validator's in-flight ops).
  constexpr int64_t kNone = -1;
  std::vector<int64_t> first(holderIds.size(), kNone),
      last(holderIds.size(), kNone);
  // Per event, the asynchronous op that signals it, where that op uses a
  // holder or starts after another (the others complete nothing a holder
  // waits for).
  struct Async {
    std::vector<int64_t> holders, after;
    bool done = false;
  };
  std::map<int64_t, Async> asyncOfEvent;
  // An op's holders, the events it starts after and those it waits,
  // cleared per op.
  std::vector<int64_t> used, after, waited, work;
  for (size_t i = 0; i < out.ops.size(); ++i) {
    auto at = static_cast<int64_t>(i);
    used.clear();
    after.clear();
    waited.clear();
    std::optional<int64_t> signals;
    auto use = [&](int64_t b) {
      if (b < 0 || b >= static_cast<int64_t>(holderOf.size()))
        return;
      int64_t h = holderOf[static_cast<size_t>(b)];
      if (h < 0)
        return;
      auto hs = static_cast<size_t>(h);
      if (first[hs] == kNone)
        first[hs] = at;
      last[hs] = std::max(last[hs], at);
      used.push_back(h);
    };
    // A forward's graph keeps its `in`, and a recompute's its `input`, by
    // reference until the unit's backward, which does not name it: no
    // holder is one.
    auto kept = [&](int64_t id, const char *what) {
      if (id >= 0 && id < static_cast<int64_t>(holderOf.size()) &&
          holderOf[static_cast<size_t>(id)] >= 0)
        fail("op " + std::to_string(i) + " (" + toString(out.ops[i].kind()) +
             "): " + what + ", buffer " + std::to_string(id) +
             ", lies in a held buffer's slot, which the graph keeps until "
             "the unit's backward");
    };
    if (const auto *forward = out.ops[i].as<ops::Forward>())
      kept(forward->in, "in");
    if (const auto *recompute = out.ops[i].as<ops::Recompute>())
      kept(recompute->input, "input");
    std::visit(
        [&](const auto &o) {
          std::decay_t<decltype(o)>::fields(o, [&](auto d, const auto &value) {
            using D = decltype(d);
            if constexpr (std::is_same_v<D, field::Buffer>) {
              use(value);
            } else if constexpr (std::is_same_v<D, field::OptionalBuffer>) {
              use(value);
            } else if constexpr (std::is_same_v<D, field::Buffers>) {
              for (int64_t b : value)
                use(b);
            } else if constexpr (std::is_same_v<D, field::Event>) {
              waited.push_back(value);
            } else if constexpr (std::is_same_v<D, field::Events>) {
              for (int64_t e : value)
                after.push_back(e);
            } else if constexpr (std::is_same_v<D, field::SignalledEvent>) {
              signals = value;
            }
          });
        },
        out.ops[i].body);
    for (int64_t e : waited) {
      work.assign(1, e);
      while (!work.empty()) {
        auto it = asyncOfEvent.find(work.back());
        work.pop_back();
        if (it == asyncOfEvent.end() || it->second.done)
          continue;
        it->second.done = true;
        for (int64_t h : it->second.holders)
          last[static_cast<size_t>(h)] =
              std::max(last[static_cast<size_t>(h)], at);
        work.insert(work.end(), it->second.after.begin(),
                    it->second.after.end());
      }
    }
    if (signals && (!used.empty() || !after.empty()))
      asyncOfEvent[*signals] = {used, after, false};
  }
  // The ops with each holder's alloc before its first use and its free
  // after its last; one never used is allocated and freed where its table
  // starts.
  std::vector<std::vector<int64_t>> allocsAt(out.ops.size() + 1),
      freesAfter(out.ops.size() + 1);
  size_t table = 0;
  for (size_t h = 0; h < holderIds.size(); ++h) {
    while (table + 1 < firstHolder.size() &&
           holderIds[h] >= firstHolder[table + 1])
      ++table;
    int64_t at = first[h] == kNone ? tableOps[table] : first[h];
    allocsAt[static_cast<size_t>(at)].push_back(holderIds[h]);
    if (first[h] == kNone)
      allocsAt[static_cast<size_t>(at)].push_back(~holderIds[h]);
    else
      freesAfter[static_cast<size_t>(last[h])].push_back(holderIds[h]);
  }
  std::vector<Op> ops;
  ops.reserve(out.ops.size() + 2 * holderIds.size());
  for (size_t i = 0; i <= out.ops.size(); ++i) {
    for (int64_t b : allocsAt[i])
      ops.push_back(b >= 0 ? Op{ops::Alloc{.buffer = b}, 0}
                           : Op{ops::Free{.buffer = ~b}, 0});
    if (i == out.ops.size())
      break;
    ops.push_back(std::move(out.ops[i]));
    for (int64_t b : freesAfter[i])
      ops.push_back(Op{ops::Free{.buffer = b}, 0});
  }
  out.ops = std::move(ops);
}

} // namespace

void remapOp(Op &op, const std::function<int64_t(int64_t)> &buffer,
             const std::function<int64_t(int64_t)> &event,
             int64_t microBatchShift) {
  std::visit(
      [&](auto &o) {
        std::decay_t<decltype(o)>::fields(o, [&](auto d, auto &value) {
          using D = decltype(d);
          if constexpr (std::is_same_v<D, field::Buffer> ||
                        std::is_same_v<D, field::DefinedBuffer>) {
            value = buffer(value);
          } else if constexpr (std::is_same_v<D, field::OptionalBuffer>) {
            if (value >= 0)
              value = buffer(value);
          } else if constexpr (std::is_same_v<D, field::Buffers>) {
            for (int64_t &id : value)
              id = buffer(id);
          } else if constexpr (std::is_same_v<D, field::Event> ||
                               std::is_same_v<D, field::SignalledEvent>) {
            value = event(value);
          } else if constexpr (std::is_same_v<D, field::Events>) {
            for (int64_t &id : value)
              id = event(id);
          } else if constexpr (std::is_same_v<D, field::MicroBatch>) {
            value += microBatchShift;
          }
        });
      },
      op.body);
}

void expandTasks(Schedule &schedule, const std::string &name) {
  // Each stage's program on its own thread; the error is the first stage's
  // that has one.
  support::parallelFor(schedule.programs.size(), [&](size_t stage) {
    Program &program = schedule.programs[stage];
    std::string prefix = name + ": ";
    if (schedule.programs.size() > 1)
      prefix += "stage " + std::to_string(stage) + ": ";
    for (size_t b = 0; b < program.buffers.size(); ++b)
      if (program.buffers[b].kind == Buffer::Kind::Slot)
        throw ScheduleFileError(prefix + "buffer " + std::to_string(b) +
                                " is a slot: only a task's buffers are");
    if (program.slotEventFamilies < 0)
      throw ScheduleFileError(prefix + "slot_event_families is negative");
    if (program.tasks.empty() && program.runs.empty())
      return;
    TaskExpander(program, schedule.microBatches, prefix).run();
  });
}

} // namespace plan::rt
