//===- Executor.cpp - Runs a schedule, one training step at a time --------===//
//
// docs/runtime.md describes the behaviour op by op. The executor is an
// interpreter over precomputed buffer views: Alloc and Free cost nothing at
// run time because every buffer's place was fixed by sched-plan-memory
// (unless the run poisons transient buffers, setPoison). Each
// op kind has one `run` overload below; the op's fields, their ids and the
// relations between its operands were checked by validateSchedule, so none
// of that is checked here again. Streams, copies and memory statistics are
// the device backend's (DeviceBackend.h).
//
//===----------------------------------------------------------------------===//

#include "Executor.h"

#include "DTypes.h"
#include "Format.h"
#include "FrozenBase.h"
#include "LRSchedule.h"
#include "Optimizer.h"

#include <ATen/record_function.h>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

namespace plan::rt {
namespace {

namespace field = rt::field;

std::string firstLine(const char *what) {
  std::string s = what;
  size_t nl = s.find('\n');
  return nl == std::string::npos ? s : s.substr(0, nl);
}

c10d::ReduceOp reduceOp(ReduceKind kind) {
  // Gloo has no AVG: the sum is divided by the group size on completion.
  return kind == ReduceKind::Max ? c10d::ReduceOp(c10d::ReduceOp::MAX)
                                 : c10d::ReduceOp(c10d::ReduceOp::SUM);
}

// Whether two tensors share any byte of memory.
bool overlaps(const at::Tensor &a, const at::Tensor &b) {
  if (!a.defined() || !b.defined() || !a.storage().is_alias_of(b.storage()))
    return false;
  auto begin = [](const at::Tensor &t) {
    return static_cast<const char *>(t.data_ptr());
  };
  auto end = [&](const at::Tensor &t) { return begin(t) + t.nbytes(); };
  return begin(a) < end(b) && begin(b) < end(a);
}

// An asynchronous op between its issue and its schedule `wait`: the c10d
// work (null for ops that completed when issued) and what has to run on the
// compute stream once it is done (AVG's division, accumulation).
struct Event {
  enum class State : uint8_t {
    Unissued,
    InFlight,
    Done
  } state = State::Unissued;
  c10::intrusive_ptr<c10d::Work> work;
  std::function<void()> finish;
  size_t op = 0;
  // An asynchronous copy to or from host memory, which the host must also
  // wait for before it next touches host memory.
  bool hostCopy = false;
};

/// Calls `fn(descriptor, value)` for each field of `op`.
template <typename Fn> void forEachField(const Op &op, Fn &&fn) {
  std::visit([&](const auto &o) { std::decay_t<decltype(o)>::fields(o, fn); },
             op.body);
}

/// Calls `fn(id, access)` for each buffer operand of `op`.
template <typename Fn> void forEachBuffer(const Op &op, Fn &&fn) {
  forEachField(op, [&](auto d, const auto &value) {
    using D = decltype(d);
    if constexpr (std::is_same_v<D, field::Buffers>) {
      for (int64_t id : value)
        fn(id, d.access);
    } else if constexpr (std::is_base_of_v<field::Buffer, D>) {
      if (value >= 0)
        fn(value, d.access);
    }
  });
}

} // namespace

struct Executor::Impl {
  Impl(const ValidSchedule &schedule, Model &model, Comm &comm,
       DeviceBackend &backend)
      : schedule(schedule.get()),
        program(this->schedule.programs.at(
            static_cast<size_t>(comm.groupRank(GroupAxis::Pipeline)))),
        model(model), comm(comm), backend(backend) {}

  Schedule schedule;
  // The program of this rank's pipeline stage (the step's without one).
  const Program &program;
  Model &model;
  Comm &comm;
  DeviceBackend &backend;

  std::array<at::Tensor, 3> arenas; // by Space
  std::vector<at::Tensor> buffers;  // by buffer id, all views
  std::vector<bool> keepGraph;      // by op index (Forward only)
  // By op index: the op reads or writes host memory on the host (the backend
  // first waits for the asynchronous copies that touched host memory).
  std::vector<bool> hostSide;
  std::vector<int64_t> stepsTaken;         // non-skipped steps by group
  std::map<int64_t, DecayMask> decayMasks; // by group, made at its 1st step
  std::vector<Event> events;
  int64_t totalSteps = 0;
  bool traceMemory = false;
  bool poison = false;
  int64_t lossScaleBuffer = -1;
  DynamicLossScale dynamicLossScale;

  // Per step.
  std::vector<at::Tensor> losses; // 0-dim fp32, read once after the program
  std::optional<double> gradNorm;
  bool skipped = false;
  double lr = 0;
  size_t current = 0; // the op being run

  void allocate();
  void prepare();
  void fillState(
      const std::function<void(int64_t, at::Tensor, at::Tensor)> &fillUnit);

  std::string describe(size_t index) const {
    const Op &op = program.ops[index];
    std::string s =
        std::string(toString(op.kind())) + " (op " + std::to_string(index);
    if (op.line)
      s += ", line " + std::to_string(op.line);
    return s + ")";
  }
  at::Tensor operand(int64_t id) const {
    return id < 0 ? at::Tensor() : buffers[id];
  }
  double scalarValue(int64_t id) const {
    return buffers[id].to(at::kDouble).item<double>();
  }
  // The step's host reads of the norm, found_inf and loss-scale buffers
  // (each read synchronises the host with the compute stream on the cuda
  // backend). planc's schedules write each before any op reads it, so one
  // read serves every group's optimizer_step and every micro-batch's loss;
  // an op that writes one of them drops its entry (forgetWritten), so any
  // other order reads the new value.
  std::map<int64_t, double> stepScalars;
  void forgetWritten(const Op &op) {
    if (stepScalars.empty())
      return;
    forEachBuffer(op, [&](int64_t id, field::Access access) {
      if (field::writes(access))
        stepScalars.erase(id);
    });
  }
  double stepScalar(int64_t id) {
    auto it = stepScalars.find(id);
    if (it == stepScalars.end())
      it = stepScalars.emplace(id, scalarValue(id)).first;
    return it->second;
  }

  void execute(size_t index);
  /// The profiler range of an op: "plan::<kind>[ <unit kind> <unit>]".
  std::string profileRange(const Op &op) const;
  void issue(c10::intrusive_ptr<c10d::Work> work, std::function<void()> finish,
             int64_t event, bool hostCopy = false);
  void complete(int64_t event);
  void waited(Event &e) {
    if (e.hostCopy && e.work)
      backend.waitedForHostCopy(e.work);
  }

  // One per op kind of the op table (generated/ScheduleOps.h).
  // With setPoison, a transient buffer's bytes are all ones from its alloc
  // and again from its free: a NaN in every floating type. A held buffer's
  // own alloc and free are not its bytes' (its holders' are). Host memory
  // is filled from the host, once the asynchronous copies that may still
  // touch it are done (a free is no host-side op otherwise).
  void poisonBuffer(int64_t id) {
    const Buffer &b = program.buffers[static_cast<size_t>(id)];
    if (!poison || b.persistent || b.held)
      return;
    if (b.space != Space::Device)
      backend.syncHostCopies();
    buffers[id].view(at::kByte).fill_(0xFF);
  }
  void run(const ops::Alloc &op) { poisonBuffer(op.buffer); }
  void run(const ops::Free &op) { poisonBuffer(op.buffer); }
  void run(const ops::Wait &op) { complete(op.event); }
  void run(const ops::AllGather &op);
  void run(const ops::ReduceScatter &op);
  void run(const ops::AllReduce &op);
  void run(const ops::Broadcast &op);
  void run(const ops::Copy &op);
  void run(const ops::Send &op);
  void run(const ops::Recv &op);
  void run(const ops::Cast &op) { buffers[op.dst].copy_(buffers[op.src]); }
  void run(const ops::Dequantize &op) {
    loadFrozenBase(schedule.units[op.unit], buffers[op.src], buffers[op.dst]);
  }
  void run(const ops::Zero &op) { buffers[op.buffer].zero_(); }
  void run(const ops::Accumulate &op) {
    accumulateInto(buffers[op.dst],
                   buffers[op.src].to(buffers[op.dst].device()));
  }
  void run(const ops::Forward &op) {
    model.forward(op.unit, op.microBatch, weights(op), operand(op.saves),
                  keepGraph[current],
                  UnitPart{op.part, operand(op.in), operand(op.out), {}, {}});
  }
  void run(const ops::Recompute &op) {
    model.recompute(op.unit, op.microBatch, weights(op), operand(op.input),
                    operand(op.saves),
                    UnitPart{op.part, operand(op.in), operand(op.out), {}, {}});
  }
  template <typename ComputeOp> UnitWeights weights(const ComputeOp &op) {
    return UnitWeights{operand(op.params), operand(op.tied),
                       operand(op.frozen)};
  }
  void run(const ops::Loss &op) {
    double lossScale = op.lossScale >= 0 ? stepScalar(op.lossScale) : 1.0;
    losses.push_back(model.loss(op.unit, op.microBatch, op.scale, lossScale,
                                operand(op.stats)));
  }
  void run(const ops::Backward &op) {
    model.backward(
        op.unit, op.microBatch, weights(op), operand(op.activations),
        operand(op.grads), operand(op.tiedGrads),
        UnitPart{op.part, {}, {}, operand(op.outGrad), operand(op.inGrad)});
  }
  void run(const ops::GradNorm &op);
  // By op index: the elements of a tensor_replicas norm's gradients that
  // every tensor rank holds whole (replicaRanges).
  std::map<size_t, std::vector<std::pair<int64_t, int64_t>>> wholeRanges;
  std::vector<std::pair<int64_t, int64_t>> replicaRanges(int64_t id) const;
  void run(const ops::CheckFinite &op) {
    // On the device, without reading the result: the host learns it once,
    // at the first op that needs found_inf (stepScalar).
    buffers[op.foundInf].masked_fill_(
        at::isfinite(buffers[op.buffer]).all().logical_not(), 1);
  }
  void run(const ops::OptimizerStep &op);
  void run(const ops::UpdateLossScale &op) {
    bool foundInf = stepScalar(op.foundInf) > 0;
    if (schedule.train.lossScale.kind == LossScaleKind::Dynamic)
      buffers[op.lossScale].fill_(
          dynamicLossScale.update(stepScalar(op.lossScale), foundInf));
  }
};

void Executor::Impl::allocate() {
  for (Space space : {Space::Device, Space::Host, Space::PinnedHost}) {
    int64_t bytes = program.arenaSize(space);
    try {
      arenas[static_cast<size_t>(space)] = backend.allocateArena(space, bytes);
    } catch (const std::exception &e) {
      // The allocator's own message can be several lines of its internals
      // (c10's "[enforce fail at alloc_cpu.cpp...]"): its first line says why.
      std::string why = e.what();
      why = why.substr(0, why.find('\n'));
      throw ExecutionError(
          "cannot allocate the " + std::to_string(bytes) + "-byte " +
          toString(space) + " arena the schedule plans (" +
          support::formatBytes(bytes) +
          "): not enough memory on this machine (" + why + ")");
    }
  }
  buffers.resize(program.buffers.size());
  for (size_t id = 0; id < program.buffers.size(); ++id) {
    const Buffer &b = program.buffers[id];
    switch (b.kind) {
    case Buffer::Kind::Alloc:
      buffers[id] =
          arenas[static_cast<size_t>(b.space)]
              .narrow(0, b.offset,
                      b.numel * static_cast<int64_t>(elementBytes(b.type)))
              .view(support::scalarType(b.type));
      break;
    case Buffer::Kind::View:
      buffers[id] = buffers[b.source].narrow(0, b.viewOffset, b.numel);
      break;
    case Buffer::Kind::ShardView:
      buffers[id] = buffers[b.source].narrow(
          0, comm.groupRank(b.axis) * b.numel, b.numel);
      break;
    case Buffer::Kind::Slot:
      // The reader expands every slot into a view (expandTasks).
      throw std::logic_error("a slot buffer in an expanded program");
    }
  }
}

/// What the executor derives once from the program: which forwards keep
/// their graph, which ops touch host memory from the host, and which buffer
/// holds the loss scale.
void Executor::Impl::prepare() {
  // A forward that a later recompute rebuilds keeps no autograd graph.
  keepGraph.assign(program.ops.size(), true);
  std::set<std::pair<int64_t, int64_t>> recomputed;
  for (size_t i = program.ops.size(); i-- > 0;) {
    const Op &op = program.ops[i];
    if (const auto *recompute = op.as<ops::Recompute>())
      recomputed.insert({recompute->unit, recompute->microBatch});
    if (const auto *forward = op.as<ops::Forward>())
      keepGraph[i] = !recomputed.count({forward->unit, forward->microBatch});
  }
  // Ops that touch host memory from the host: every op with an operand
  // outside device memory, except an asynchronous copy between the sides.
  hostSide.assign(program.ops.size(), false);
  auto onHost = [&](int64_t id) {
    return program.buffers[id].space != Space::Device;
  };
  for (size_t i = 0; i < program.ops.size(); ++i) {
    const Op &op = program.ops[i];
    if (const auto *copy = op.as<ops::Copy>()) {
      hostSide[i] = onHost(copy->src) && onHost(copy->dst);
      continue;
    }
    bool host = false;
    forEachBuffer(op, [&](int64_t id, field::Access access) {
      host |= access != field::Access::Free && onHost(id);
    });
    hostSide[i] = host;
  }
  for (size_t id = 0; id < program.buffers.size(); ++id)
    if (program.buffers[id].kind == Buffer::Kind::Alloc &&
        program.buffers[id].role == BufferRole::LossScale)
      lossScaleBuffer = static_cast<int64_t>(id);
}

void Executor::Impl::fillState(
    const std::function<void(int64_t, at::Tensor, at::Tensor)> &fillUnit) {
  std::map<std::string, int64_t> unitIndex, groupIndex;
  for (size_t u = 0; u < schedule.units.size(); ++u)
    unitIndex[schedule.units[u].name] = static_cast<int64_t>(u);
  for (size_t g = 0; g < schedule.groups.size(); ++g)
    groupIndex[schedule.groups[g].name] = static_cast<int64_t>(g);

  // A group's full flat vectors: its trainable elements, and a LoRA run's
  // frozen base, stored as its buffer holds it.
  std::map<std::string, ElementType> frozenTypes;
  for (const Buffer &b : program.buffers)
    if (b.kind == Buffer::Kind::Alloc && b.role == BufferRole::Frozen &&
        !b.group.empty())
      frozenTypes[b.group] = b.type;
  std::map<std::string, std::pair<at::Tensor, at::Tensor>> fullGroups;
  auto fullGroup = [&](const Group &group) {
    auto it = fullGroups.find(group.name);
    if (it != fullGroups.end())
      return it->second;
    auto type = frozenTypes.find(group.name);
    ElementType frozenType =
        type == frozenTypes.end() ? ElementType::F32 : type->second;
    at::Tensor flat = at::zeros({group.paddedNumel}, at::kFloat);
    at::Tensor frozen =
        at::zeros({group.frozenPaddedNumel}, support::scalarType(frozenType));
    int64_t offset = 0, frozenOffset = 0;
    for (const std::string &name : group.units) {
      int64_t unit = unitIndex.at(name);
      const Unit &u = schedule.units[unit];
      at::Tensor values = at::empty({u.frozenNumel}, at::kFloat);
      fillUnit(unit, flat.narrow(0, offset, u.numel), values);
      int64_t frozenSize = u.frozenSizeIn(frozenType);
      if (frozenSize)
        storeFrozenBase(u, values, frozen.narrow(0, frozenOffset, frozenSize));
      offset += u.numel;
      frozenOffset += frozenSize;
    }
    return fullGroups[group.name] = {flat, frozen};
  };

  for (size_t id = 0; id < program.buffers.size(); ++id) {
    const Buffer &b = program.buffers[id];
    if (b.kind != Buffer::Kind::Alloc || !b.persistent)
      continue;
    at::Tensor &t = buffers[id];
    bool holdsWeights = isTrainingState(b) && (b.role == BufferRole::Param ||
                                               b.role == BufferRole::Master);
    bool frozenBase = b.role == BufferRole::Frozen && !b.group.empty();
    if (holdsWeights || frozenBase) {
      const Group &group = schedule.groups[groupIndex.at(b.group)];
      at::Tensor flat =
          frozenBase ? fullGroup(group).second : fullGroup(group).first;
      int64_t shardNumel =
          frozenBase ? group.frozenShardNumel : group.shardNumel;
      if (b.sharded)
        flat = flat.narrow(0, comm.groupRank(GroupAxis::Shard) * shardNumel,
                           shardNumel);
      t.copy_(flat);
    } else if (b.role == BufferRole::LossScale) {
      t.fill_(schedule.train.lossScale.initial);
    } else {
      t.zero_();
    }
  }
  stepsTaken.assign(schedule.groups.size(), 0);
  dynamicLossScale =
      DynamicLossScale{schedule.train.lossScale.growthInterval, 0};
}

void Executor::Impl::issue(c10::intrusive_ptr<c10d::Work> work,
                           std::function<void()> finish, int64_t event,
                           bool hostCopy) {
  Event &e = events[event];
  if (e.state != Event::State::Unissued)
    throw ExecutionError(describe(current) + " signals event " +
                         std::to_string(event) +
                         ", which an earlier op of this step signalled");
  e = Event{Event::State::InFlight, std::move(work), std::move(finish), current,
            hostCopy};
}

void Executor::Impl::complete(int64_t event) {
  Event &e = events[event];
  if (e.state == Event::State::Done)
    return;
  if (e.state == Event::State::Unissued)
    throw ExecutionError("event " + std::to_string(event) +
                         " is waited for before any op signalled it");
  e.state = Event::State::Done;
  try {
    if (e.work) {
      e.work->wait();
      comm.awaitRelease(e.work);
      waited(e);
    }
    if (e.finish)
      e.finish();
  } catch (const ExecutionError &) {
    throw;
  } catch (const std::exception &err) {
    throw ExecutionError(describe(e.op) + " failed: " + firstLine(err.what()));
  }
  e.work.reset();
  e.finish = nullptr;
}

void Executor::Impl::run(const ops::AllGather &op) {
  at::Tensor src = buffers[op.src], dst = buffers[op.dst];
  if (comm.groupSize(op.group) == 1) {
    if (!overlaps(src, dst))
      dst.copy_(src);
    return issue(nullptr, nullptr, op.done);
  }
  // zero1 gathers a shard view into its own full buffer; Gloo's copy of the
  // local chunk must not read what it writes.
  if (overlaps(src, dst))
    src = src.clone();
  issue(comm.group(op.group)._allgather_base(dst, src), nullptr, op.done);
}

void Executor::Impl::run(const ops::ReduceScatter &op) {
  at::Tensor src = buffers[op.src], dst = buffers[op.dst];
  int size = comm.groupSize(op.group);
  bool direct = !op.accumulate && dst.scalar_type() == src.scalar_type() &&
                !overlaps(src, dst);
  at::Tensor out = direct ? dst : at::empty({dst.numel()}, src.options());
  c10::intrusive_ptr<c10d::Work> work;
  if (size == 1) {
    out.copy_(src);
  } else {
    c10d::ReduceScatterOptions options;
    options.reduceOp = reduceOp(op.reduce);
    work = comm.group(op.group)._reduce_scatter_base(out, src, options);
  }
  bool average = op.reduce == ReduceKind::Avg && size > 1;
  bool accumulate = op.accumulate;
  issue(
      std::move(work),
      [=]() mutable {
        if (average)
          out.div_(size);
        if (accumulate)
          dst.add_(out);
        else if (!direct)
          dst.copy_(out);
      },
      op.done);
}

void Executor::Impl::run(const ops::AllReduce &op) {
  at::Tensor buffer = buffers[op.buffer];
  int size = comm.groupSize(op.group);
  if (size == 1)
    return issue(nullptr, nullptr, op.done);
  std::vector<at::Tensor> tensors{buffer};
  c10d::AllreduceOptions options;
  options.reduceOp = reduceOp(op.reduce);
  auto work = comm.group(op.group).allreduce(tensors, options);
  bool average = op.reduce == ReduceKind::Avg;
  issue(
      std::move(work),
      [=]() mutable {
        if (average)
          buffer.div_(size);
      },
      op.done);
}

void Executor::Impl::run(const ops::Broadcast &op) {
  if (comm.groupSize(op.group) == 1)
    return issue(nullptr, nullptr, op.done);
  std::vector<at::Tensor> tensors{buffers[op.buffer]};
  c10d::BroadcastOptions options;
  options.rootRank = op.root;
  options.rootTensor = 0;
  issue(comm.group(op.group).broadcast(tensors, options), nullptr, op.done);
}

/// The pipeline stage `peer` is: the next one or the previous one, the
/// last stage's next being the first (the interleaved schedule's chunks
/// wrap around).
static int pipelinePeer(const Comm &comm, Peer peer) {
  int stages = comm.groupSize(GroupAxis::Pipeline);
  int stage = comm.groupRank(GroupAxis::Pipeline);
  return (stage + (peer == Peer::Next ? 1 : stages - 1)) % stages;
}

void Executor::Impl::run(const ops::Send &op) {
  std::vector<at::Tensor> tensors{buffers[op.buffer]};
  issue(comm.channel(op.peer).send(tensors, pipelinePeer(comm, op.peer), 0),
        nullptr, op.done);
}

void Executor::Impl::run(const ops::Recv &op) {
  // What comes from the previous stage travels towards the next one.
  Peer direction = op.peer == Peer::Prev ? Peer::Next : Peer::Prev;
  std::vector<at::Tensor> tensors{buffers[op.buffer]};
  issue(comm.channel(direction).recv(tensors, pipelinePeer(comm, op.peer), 0),
        nullptr, op.done);
}

void Executor::Impl::run(const ops::Copy &op) {
  at::Tensor src = buffers[op.src], dst = buffers[op.dst];
  if (!backend.copiesAsync(dst, src)) {
    // Synchronous: the event is complete when issued.
    for (int64_t e : op.after)
      complete(e);
    dst.copy_(src);
    return issue(nullptr, nullptr, op.done);
  }
  // The copy stream waits for an event still in flight itself (it stays in
  // flight for its own `wait`); any other is completed first, which orders
  // the compute stream, and the copy follows the compute stream.
  std::vector<c10::intrusive_ptr<c10d::Work>> after;
  for (int64_t id : op.after) {
    Event &e = events[id];
    if (e.state == Event::State::InFlight && e.work && !e.finish &&
        backend.streamWaitable(*e.work))
      after.push_back(e.work);
    else
      complete(id);
  }
  issue(backend.copyAsync(dst, src, after), nullptr, op.done,
        /*hostCopy=*/true);
}

/// The elements of buffer `id` that belong to parameters every tensor rank
/// holds whole (no split). `id` holds groups' gradients, or is a view into
/// them: one group's (its allocation names the group; all of its flat
/// vector or this rank's shard), or a bucket of several, where the
/// optimizer steps that read views of it say which group's lie where.
std::vector<std::pair<int64_t, int64_t>>
Executor::Impl::replicaRanges(int64_t id) const {
  // The allocation a buffer lies in and its first element there.
  auto rootOf = [&](int64_t b) {
    int64_t offset = 0;
    while (program.buffers[b].kind != Buffer::Kind::Alloc) {
      const Buffer &v = program.buffers[b];
      offset += v.kind == Buffer::Kind::View ? v.viewOffset
                                             : comm.groupRank(v.axis) * v.numel;
      b = v.source;
    }
    return std::pair{b, offset};
  };
  auto [root, begin] = rootOf(id);
  const int64_t end = begin + program.buffers[id].numel;
  auto ofGroup = [&](const Group &group, bool whole, int64_t offset,
                     int64_t numel) {
    int64_t first =
        (whole ? 0 : comm.groupRank(GroupAxis::Shard) * group.shardNumel) +
        offset;
    return parameterRanges(schedule, group, first, numel,
                           [](const Param &p) { return !p.split; });
  };
  const Buffer &alloc = program.buffers[root];
  if (!alloc.group.empty())
    for (const Group &group : schedule.groups)
      if (group.name == alloc.group)
        return ofGroup(group, !alloc.sharded, begin, end - begin);
  std::vector<std::pair<int64_t, int64_t>> ranges;
  bool covered = false;
  for (const Op &op : program.ops) {
    const auto *step = op.as<ops::OptimizerStep>();
    if (!step)
      continue;
    auto [stepRoot, stepBegin] = rootOf(step->grads);
    const int64_t numel = program.buffers[step->grads].numel;
    const int64_t lo = std::max(begin, stepBegin);
    const int64_t hi = std::min(end, stepBegin + numel);
    if (stepRoot != root || lo >= hi)
      continue;
    covered = true;
    // The group's whole flat vector, or this rank's shard of it.
    const Group &group = schedule.groups[step->group];
    for (auto [b, e] :
         ofGroup(group, numel == group.paddedNumel, lo - stepBegin, hi - lo))
      ranges.emplace_back(lo - begin + b, lo - begin + e);
  }
  if (!covered)
    throw ExecutionError(
        describe(current) + ": a norm over tensor replicas of buffer " +
        std::to_string(id) + ", which holds no optimizer step's gradients");
  std::sort(ranges.begin(), ranges.end());
  return ranges;
}

void Executor::Impl::run(const ops::GradNorm &op) {
  at::Tensor squares = buffers[op.grads].to(at::kFloat).square();
  at::Tensor sum = squares.sum();
  const int64_t tensor = comm.groupSize(GroupAxis::Tensor);
  if (op.tensorReplicas && tensor > 1) {
    // Every tensor rank holds the whole parameters' gradients: each counts
    // 1/T of them, so that the sum over the tensor group counts them once.
    auto it = wholeRanges.find(current);
    if (it == wholeRanges.end())
      it = wholeRanges.emplace(current, replicaRanges(op.grads)).first;
    for (auto [begin, end] : it->second)
      sum -= squares.narrow(0, begin, end - begin).sum() *
             (1.0 - 1.0 / static_cast<double>(tensor));
  }
  buffers[op.norm].add_(sum);
}

void Executor::Impl::run(const ops::OptimizerStep &op) {
  const TrainConfig &train = schedule.train;
  double lossScale = op.lossScale >= 0 ? stepScalar(op.lossScale) : 1.0;
  double totalNorm = 0;
  if (op.norm >= 0) {
    totalNorm = std::sqrt(stepScalar(op.norm)) / lossScale;
    if (!gradNorm)
      gradNorm = totalNorm;
  }
  if (op.foundInf >= 0 && stepScalar(op.foundInf) > 0) {
    skipped = true;
    return;
  }
  if (train.gradClip > 0 && op.norm < 0)
    throw ExecutionError("the plan clips gradients, but the step has no norm");
  at::Tensor params = buffers[op.params];
  std::vector<at::Tensor> state;
  for (int64_t id : op.state)
    state.push_back(buffers[id]);
  // GradScaler.unscale_ multiplies by the fp32 reciprocal of the scale.
  double invLossScale =
      lossScale == 1.0 ? 1.0 : static_cast<float>(1.0 / lossScale);
  double clip =
      train.gradClip > 0 ? clipCoefficient(totalNorm, train.gradClip) : 1.0;
  at::Tensor grad = stepGradient(buffers[op.grads], invLossScale, clip);
  int64_t t = ++stepsTaken[op.group];
  auto mask = decayMasks.find(op.group);
  if (mask == decayMasks.end()) {
    // The step updates the group's whole flat vector or this rank's shard
    // of it (the reader checked the sizes).
    const Group &group = schedule.groups[op.group];
    int64_t first = params.numel() == group.paddedNumel
                        ? 0
                        : comm.groupRank(GroupAxis::Shard) * group.shardNumel;
    mask =
        decayMasks
            .emplace(op.group, decayMask(schedule, group, first, params.numel(),
                                         train.optimizer.decay))
            .first;
  }
  optimizerUpdate(train.optimizer, params, grad, state, lr, t, mask->second);
}

void Executor::Impl::execute(size_t index) {
  current = index;
  const Op &op = program.ops[index];
  // An op starts after its `after` events; a copy orders itself (run(Copy)).
  if (!op.as<ops::Copy>())
    forEachField(op, [&](auto d, const auto &value) {
      if constexpr (std::is_same_v<decltype(d), field::Events>)
        for (int64_t e : value)
          complete(e);
    });
  if (hostSide[index])
    backend.syncHostCopies();
  // One profiler range per op (only built while a profiler records: plan-run
  // --profile), so a trace ties every kernel to the op that launched it.
  RECORD_USER_SCOPE(profileRange(op));
  std::visit([&](const auto &o) { run(o); }, op.body);
}

std::string Executor::Impl::profileRange(const Op &op) const {
  std::string name = "plan::";
  name += toString(op.kind());
  std::visit(
      [&](const auto &o) {
        std::decay_t<decltype(o)>::fields(o, [&](auto d, const auto &value) {
          if constexpr (std::is_same_v<decltype(d), field::UnitRef>) {
            const Unit &unit = schedule.units[static_cast<size_t>(value)];
            name += ' ';
            name += toString(unit.kind);
            name += ' ';
            name += unit.name;
          }
        });
      },
      op.body);
  return name;
}

Executor::Executor(const ValidSchedule &schedule, Model &model, Comm &comm,
                   DeviceBackend &backend)
    : impl_(new Impl(schedule, model, comm, backend)) {
  try {
    if (comm.world() != schedule->worldSize())
      throw ExecutionError("schedule is for " +
                           std::to_string(schedule->worldSize()) +
                           " ranks, but the process groups have " +
                           std::to_string(comm.world()));
    impl_->allocate();
    impl_->prepare();
    impl_->events.resize(static_cast<size_t>(impl_->program.numEvents));
    impl_->stepsTaken.assign(schedule->groups.size(), 0);
    impl_->dynamicLossScale.growthInterval =
        schedule->train.lossScale.growthInterval;
  } catch (...) {
    delete impl_;
    throw;
  }
}

Executor::~Executor() {
  // Work still queued on the backend's streams reads the arenas freed here.
  try {
    impl_->backend.synchronize();
  } catch (...) {
    // A destructor does not throw; a failed device reports elsewhere.
  }
  delete impl_;
}

void Executor::setTotalSteps(int64_t steps) { impl_->totalSteps = steps; }

void Executor::setMemoryTrace(bool on) { impl_->traceMemory = on; }

void Executor::setPoison(bool on) { impl_->poison = on; }

void Executor::initState(uint64_t seed) {
  impl_->fillState([&](int64_t unit, at::Tensor out, at::Tensor frozen) {
    impl_->model.initUnit(unit, seed, out, frozen);
  });
}

void Executor::loadState(const TensorSource &source, uint64_t seed) {
  impl_->fillState([&](int64_t unit, at::Tensor out, at::Tensor frozen) {
    impl_->model.loadUnit(unit, source, seed, out, frozen);
  });
}

void Executor::clearState() {
  Impl &s = *impl_;
  for (size_t id = 0; id < s.program.buffers.size(); ++id) {
    const Buffer &b = s.program.buffers[id];
    // A LoRA run's frozen base is no training state: it stays.
    if (b.kind != Buffer::Kind::Alloc || !b.persistent ||
        b.role == BufferRole::Frozen)
      continue;
    if (b.role == BufferRole::LossScale)
      s.buffers[id].fill_(s.schedule.train.lossScale.initial);
    else
      s.buffers[id].zero_();
  }
  s.stepsTaken.assign(s.schedule.groups.size(), 0);
  s.dynamicLossScale =
      DynamicLossScale{s.schedule.train.lossScale.growthInterval, 0};
}

ExecutorCounters Executor::counters() const {
  const Impl &s = *impl_;
  ExecutorCounters c;
  bool first = true;
  for (size_t g = 0; g < s.stepsTaken.size(); ++g) {
    // A LoRA base's group (nothing of it steps), or another pipeline
    // stage's.
    if (s.schedule.groups[g].numel == 0 ||
        s.schedule.stageOf(s.schedule.groups[g]) !=
            s.comm.groupRank(GroupAxis::Pipeline))
      continue;
    if (!first && s.stepsTaken[g] != c.optimizerSteps)
      throw ExecutionError("group '" + s.schedule.groups[g].name + "' took " +
                           std::to_string(s.stepsTaken[g]) +
                           " optimizer steps, but an earlier group took " +
                           std::to_string(c.optimizerSteps));
    c.optimizerSteps = s.stepsTaken[g];
    first = false;
  }
  if (s.lossScaleBuffer >= 0)
    c.lossScale = s.scalarValue(s.lossScaleBuffer);
  c.growthTracker = s.dynamicLossScale.growthTracker;
  return c;
}

void Executor::setCounters(const ExecutorCounters &counters) {
  Impl &s = *impl_;
  if (counters.optimizerSteps < 0 || counters.growthTracker < 0)
    throw ExecutionError("negative optimizer step or growth counter");
  s.stepsTaken.assign(s.schedule.groups.size(), counters.optimizerSteps);
  s.dynamicLossScale.growthTracker = counters.growthTracker;
  if (counters.lossScale) {
    if (s.lossScaleBuffer < 0)
      throw ExecutionError("a loss scale was given, but the schedule has none");
    s.buffers[s.lossScaleBuffer].fill_(*counters.lossScale);
  }
}

StepResult Executor::runStep(int64_t step,
                             const std::vector<MicroBatch> &batches) {
  Impl &s = *impl_;
  const Schedule &schedule = s.schedule;
  if (static_cast<int64_t>(batches.size()) != schedule.microBatches)
    throw ExecutionError("the schedule runs " +
                         std::to_string(schedule.microBatches) +
                         " micro-batches per step, but " +
                         std::to_string(batches.size()) + " were given");
  StepResult result;
  result.step = step;
  int64_t total =
      schedule.train.steps > 0 ? schedule.train.steps : s.totalSteps;
  if (total <= 0 && schedule.train.lrSchedule.kind != LRScheduleKind::Constant)
    throw ExecutionError(std::string("the ") +
                         toString(schedule.train.lrSchedule.kind) +
                         " learning-rate schedule needs the run's length: the "
                         "plan sets no train.steps and the run gave none");
  s.lr = schedule.train.optimizer.lr *
         lrFactor(schedule.train.lrSchedule, step - 1, total);
  result.lr = s.lr;
  result.lossScale =
      s.lossScaleBuffer >= 0 ? s.scalarValue(s.lossScaleBuffer) : 1.0;
  s.losses.clear();
  s.stepScalars.clear();
  s.gradNorm.reset();
  s.skipped = false;
  for (Event &e : s.events)
    e = Event{};
  s.backend.resetPeak();
  // The step runs on the backend's compute stream, after what the caller
  // queued (the batches' copies); the caller's stream waits for it at the end.
  s.backend.beginStep();

  int64_t tokens = 0;
  int64_t tracedPeak = 0; // the ops' peaks so far, with the memory trace
  try {
    for (size_t mb = 0; mb < batches.size(); ++mb) {
      tokens += batches[mb].tokens.numel();
      s.model.setMicroBatch(static_cast<int64_t>(mb), batches[mb]);
    }
    for (size_t i = 0; i < s.program.ops.size(); ++i) {
      OpMemory memory;
      std::chrono::steady_clock::time_point start;
      if (s.traceMemory) {
        tracedPeak = std::max(tracedPeak, s.backend.peakAllocatedBytes());
        memory.op = static_cast<int64_t>(i);
        memory.liveBefore = s.backend.allocatedBytes();
        s.backend.resetPeak();
        start = std::chrono::steady_clock::now();
      }
      try {
        s.execute(i);
        s.forgetWritten(s.program.ops[i]);
      } catch (const ExecutionError &) {
        throw;
      } catch (const std::exception &e) {
        throw ExecutionError(s.describe(i) + ": " + firstLine(e.what()));
      }
      if (s.traceMemory) {
        memory.seconds = std::chrono::duration<double>(
                             std::chrono::steady_clock::now() - start)
                             .count();
        memory.peak = s.backend.peakAllocatedBytes();
        memory.liveAfter = s.backend.allocatedBytes();
        result.opMemory.push_back(memory);
      }
    }
    for (size_t e = 0; e < s.events.size(); ++e)
      if (s.events[e].state == Event::State::InFlight) {
        size_t op = s.events[e].op;
        s.complete(static_cast<int64_t>(e));
        throw ExecutionError("event " + std::to_string(e) + " of " +
                             s.describe(op) + " is never waited for");
      }
    s.backend.syncHostCopies();
  } catch (...) {
    s.model.takeUnplannedSaveBytes();
    s.model.reset();
    s.backend.dropHostCopies();
    s.backend.endStep();
    throw;
  }
  s.model.reset();
  result.unplannedSaveBytes = s.model.takeUnplannedSaveBytes();

  // The micro-batches' losses in one host read, after the whole program was
  // queued (reading each at its loss op would stall the host there).
  double loss = 0;
  if (!s.losses.empty()) {
    at::Tensor all = at::stack(s.losses).to(at::kCPU, at::kDouble);
    auto values = all.accessor<double, 1>();
    for (int64_t i = 0; i < values.size(0); ++i)
      loss += values[i];
    loss /= static_cast<double>(s.losses.size());
  }
  // Metrics only, not part of the schedule: every rank reports the loss of
  // the global batch, the mean over the ranks that compute one (a
  // pipeline's last stage).
  if (s.comm.world() > 1) {
    bool computes = !s.losses.empty();
    std::vector<at::Tensor> value{
        at::tensor({computes ? loss : 0.0, computes ? 1.0 : 0.0}, at::kDouble)};
    try {
      s.comm.everyone().allreduce(value)->wait();
    } catch (const std::exception &e) {
      s.backend.endStep();
      throw ExecutionError("the loss all_reduce for metrics failed: " +
                           firstLine(e.what()));
    }
    double ranks = value[0][1].item<double>();
    loss = ranks > 0 ? value[0][0].item<double>() / ranks : 0.0;
  }
  result.loss = loss;
  result.gradNorm = s.gradNorm;
  result.skipped = s.skipped;
  result.tokens = tokens * s.comm.groupSize(GroupAxis::World);
  result.plannedBytes = s.program.workspaceBytes;
  for (const auto &[space, bytes] : s.program.arenaBytes)
    result.plannedBytes += bytes;
  s.backend.endStep();
  // The allocator's peak since the step started (with the memory trace,
  // since the last op, and the ops' peaks before it), and the host arenas
  // where the backend's allocator does not see them.
  result.peakBytes = std::max(tracedPeak, s.backend.peakAllocatedBytes());
  if (!s.backend.measuresHostArenas())
    result.peakBytes +=
        s.arenas[static_cast<size_t>(Space::Host)].nbytes() +
        s.arenas[static_cast<size_t>(Space::PinnedHost)].nbytes();
  return result;
}

at::Tensor Executor::arena(Space space) const {
  return impl_->arenas[static_cast<size_t>(space)];
}

at::Tensor Executor::buffer(int64_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= impl_->buffers.size())
    throw ExecutionError("buffer " + std::to_string(id) + " does not exist");
  return impl_->buffers[id];
}

} // namespace plan::rt
