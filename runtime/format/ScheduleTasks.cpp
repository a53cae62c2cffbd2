//===- ScheduleTasks.cpp - A program's tasks, expanded --------------------===//
//
// A file may hold a body of ops once with the table of its runs (a
// sched.repeat's body: gradient accumulation's middle micro-batches) instead
// of every run's ops. The reader expands it into the program the executor
// runs, the one the compiler's walk of the repeat gives: each run's
// buffers and events get the next ids where the run stands, its ops their
// micro-batch and its allocs their names for it, and everything defined
// after it moves up. docs/schedule-format.md ("Tasks") is the contract.
//
//===----------------------------------------------------------------------===//

#include "ScheduleFile.h"

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
  /// Where program buffer (event) `id` lands in the expanded program.
  int64_t programBuffer(int64_t id) const;
  int64_t programEvent(int64_t id) const;
  /// Appends one run of `task` for micro-batch `mb`.
  void expandRun(const Task &task, int64_t mb);

  Program &p;
  int64_t microBatches;
  std::string prefix;
  // Per run table: where it stands, and the buffers and events its runs
  // add.
  std::vector<int64_t> buffersBefore, eventsBefore, addedBuffers, addedEvents;
  Program out;
};

void TaskExpander::checkTables() {
  auto P = static_cast<int64_t>(p.buffers.size());
  int64_t ops = static_cast<int64_t>(p.ops.size());
  for (size_t t = 0; t < p.tasks.size(); ++t) {
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
      if (buffer.kind != Buffer::Kind::Alloc &&
          (buffer.source < 0 || buffer.source >= P + static_cast<int64_t>(b)))
        fail(at + "buffer " + std::to_string(P + int64_t(b)) +
             " is a view of " + std::to_string(buffer.source) +
             ", which is not an earlier buffer");
      if (buffer.kind == Buffer::Kind::Alloc && buffer.persistent)
        fail(at + "buffer " + std::to_string(P + int64_t(b)) + " ('" +
             buffer.name +
             "') is persistent: a task's buffers live in one run");
    }
  }
  int64_t lastAt = 0, lastBuffers = 0, lastEvents = 0;
  int64_t expandedOps = ops, expandedBuffers = P;
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
    int64_t buffers = 0, events = 0;
    for (auto [task, mb] : runs.order) {
      if (task < 0 || task >= static_cast<int64_t>(p.tasks.size()))
        fail(at + "task " + std::to_string(task) + " is not one of the " +
             std::to_string(p.tasks.size()) + " tasks");
      if (mb < 0 || mb >= microBatches)
        fail(at + "micro-batch " + std::to_string(mb) +
             " is not one of the step's " + std::to_string(microBatches));
      const Task &body = p.tasks[task];
      buffers += static_cast<int64_t>(body.buffers.size());
      events += body.numEvents;
      expandedOps += static_cast<int64_t>(body.ops.size());
      expandedBuffers += static_cast<int64_t>(body.buffers.size());
      if (expandedOps > kMaxExpanded || expandedBuffers > kMaxExpanded)
        fail(at + "expands the program past " + std::to_string(kMaxExpanded) +
             " ops or buffers");
    }
    buffersBefore.push_back(runs.buffersBefore);
    eventsBefore.push_back(runs.eventsBefore);
    addedBuffers.push_back(buffers);
    addedEvents.push_back(events);
  }
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

void TaskExpander::expandRun(const Task &task, int64_t mb) {
  auto P = static_cast<int64_t>(p.buffers.size());
  int64_t E = p.numEvents;
  int64_t firstBuffer = static_cast<int64_t>(out.buffers.size());
  int64_t firstEvent = out.numEvents;
  auto localBuffers = static_cast<int64_t>(task.buffers.size());
  auto buffer = [&](int64_t id) {
    if (id >= P && id < P + localBuffers)
      return firstBuffer + (id - P);
    if (id >= P)
      fail("task buffer id " + std::to_string(id) + " is out of range (" +
           std::to_string(P + localBuffers) + " ids)");
    return programBuffer(id);
  };
  auto event = [&](int64_t id) {
    if (id >= E && id < E + task.numEvents)
      return firstEvent + (id - E);
    if (id >= E)
      fail("task event id " + std::to_string(id) + " is out of range (" +
           std::to_string(E + task.numEvents) + " ids)");
    return programEvent(id);
  };
  for (const Buffer &b : task.buffers) {
    Buffer copy = b;
    if (copy.kind == Buffer::Kind::Alloc)
      copy.name = shiftMicroBatchInName(copy.name, task.microBatch, mb);
    else
      copy.source = buffer(copy.source);
    out.buffers.push_back(std::move(copy));
  }
  out.numEvents += task.numEvents;
  for (const Op &op : task.ops) {
    Op copy = op;
    remapOp(copy, buffer, event, mb - task.microBatch);
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
    for (auto [task, mb] : runs.order)
      expandRun(p.tasks[static_cast<size_t>(task)], mb);
    eventsAdded += addedEvents[r];
  }
  copyProgram(p.buffers.size(), p.ops.size());
  out.numEvents = p.numEvents + eventsAdded;
  p = std::move(out);
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
  for (size_t stage = 0; stage < schedule.programs.size(); ++stage) {
    Program &program = schedule.programs[stage];
    if (program.tasks.empty() && program.runs.empty())
      continue;
    std::string prefix = name + ": ";
    if (schedule.programs.size() > 1)
      prefix += "stage " + std::to_string(stage) + ": ";
    TaskExpander(program, schedule.microBatches, prefix).run();
  }
}

} // namespace plan::rt
