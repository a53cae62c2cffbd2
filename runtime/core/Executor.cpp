//===- Executor.cpp - Runs a schedule, one training step at a time --------===//
//
// docs/runtime.md describes the behaviour op by op. The executor is an
// interpreter over precomputed buffer views: Alloc and Free cost nothing at
// run time because every buffer's place was fixed by sched-plan-memory.
//
//===----------------------------------------------------------------------===//

#include "Executor.h"
#include "HostMemory.h"
#include "LRSchedule.h"
#include "Optimizer.h"

#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#ifdef PLAN_HAVE_CUDA
#include "cuda/CudaWork.h"

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#endif

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

namespace plan::rt {
namespace {

std::string firstLine(const char *what) {
  std::string s = what;
  size_t nl = s.find('\n');
  return nl == std::string::npos ? s : s.substr(0, nl);
}

at::ScalarType scalarType(ElementType type) {
  switch (type) {
  case ElementType::F32:
    return at::kFloat;
  case ElementType::BF16:
    return at::kBFloat16;
  case ElementType::F16:
    return at::kHalf;
  }
  return at::kFloat;
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
  // cuda backend: an async copy to or from host memory, which the host
  // must also wait for before it next touches host memory.
  bool hostCopy = false;
};

#ifdef PLAN_HAVE_CUDA
// The cuda backend's streams (docs/runtime.md, "CUDA backend"): compute ops
// run on `compute` (the current stream during a step), async copies on `h2d`
// and `d2h`; collectives on the process groups' own streams.
struct CudaStreams {
  c10::cuda::CUDAStream compute, h2d, d2h;
};
#endif

} // namespace

struct Executor::Impl {
  Impl(const Schedule &schedule, Model &model, Comm &comm, at::Device device)
      : schedule(schedule), model(model), comm(comm), device(device) {}

  Schedule schedule;
  Model &model;
  Comm &comm;
  at::Device device;

  std::array<at::Tensor, 3> arenas; // by Space
  std::vector<at::Tensor> buffers;  // by buffer id, all views
  std::vector<bool> keepGraph;      // by op index (Forward only)
  // By op index: the op reads or writes host memory on the host (the cuda
  // backend first waits for the async copies that touched host memory).
  std::vector<bool> hostSide;
  std::vector<int64_t> stepsTaken; // non-skipped steps by group
  std::vector<Event> events;
  int64_t totalSteps = 0;
  bool traceMemory = false;
  int64_t lossScaleBuffer = -1;
  DynamicLossScale dynamicLossScale;

  // Per step.
  std::vector<at::Tensor> losses; // 0-dim fp32, read once after the program
  std::optional<double> gradNorm;
  bool skipped = false;
  double lr = 0;

#ifdef PLAN_HAVE_CUDA
  std::optional<CudaStreams> streams;
  // Copies to or from host memory that the compute stream has waited for
  // and the host has not yet.
  std::vector<c10::intrusive_ptr<c10d::Work>> hostFences;
#endif

  // The allocator peakBytes measures: the CUDA caching allocator on the cuda
  // backend, the host counters (HostMemory.h) on the cpu backend.
  int64_t allocatedBytes(bool peak) const {
#ifdef PLAN_HAVE_CUDA
    if (streams) {
      auto stats =
          c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
      const c10::CachingAllocator::Stat &stat =
          stats.allocated_bytes[static_cast<size_t>(
              c10::CachingAllocator::StatType::AGGREGATE)];
      return peak ? stat.peak : stat.current;
    }
#endif
    return peak ? host_memory::peak() : host_memory::current();
  }
  void resetAllocatorPeak() {
#ifdef PLAN_HAVE_CUDA
    if (streams) {
      c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
      return;
    }
#endif
    host_memory::resetPeak();
  }

  void syncHostFences() {
#ifdef PLAN_HAVE_CUDA
    for (auto &work : hostFences)
      static_cast<cuda::CudaEventWork &>(*work).event().synchronize();
    hostFences.clear();
#endif
  }
  // After the compute stream waited for `e`'s work.
  void waited(Event &e) {
#ifdef PLAN_HAVE_CUDA
    if (e.hostCopy && e.work)
      hostFences.push_back(e.work);
#else
    (void)e;
#endif
  }

  void allocate();
  void validateOps();
  void fillState(const std::function<void(int64_t, at::Tensor)> &fillUnit);

  std::string describe(size_t index) const {
    const Op &op = schedule.ops[index];
    std::string s =
        std::string(toString(op.kind)) + " (op " + std::to_string(index);
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
    for (int64_t id : {op.buffer, op.dst, op.scalar})
      if (id >= 0)
        stepScalars.erase(id);
  }
  double stepScalar(int64_t id) {
    auto it = stepScalars.find(id);
    if (it == stepScalars.end())
      it = stepScalars.emplace(id, scalarValue(id)).first;
    return it->second;
  }

  void execute(size_t index);
  void issue(size_t index, c10::intrusive_ptr<c10d::Work> work,
             std::function<void()> finish);
  void complete(int64_t event);
  void allGather(size_t index);
  void reduceScatter(size_t index);
  void allReduce(size_t index);
  void broadcast(size_t index);
  void optimizerStep(const Op &op);
  void copy(size_t index);
  bool hostCopy(size_t index) const {
    const Op &op = schedule.ops[index];
    if (!device.is_cuda() || op.kind != OpKind::Copy)
      return false;
    return (schedule.buffers[op.src].space == Space::Device) !=
           (schedule.buffers[op.dst].space == Space::Device);
  }
};

void Executor::Impl::allocate() {
  // Before the arenas, so that the host ones are counted too.
  host_memory::install();
#ifdef PLAN_HAVE_CUDA
  // The device arena belongs to the compute stream, on which it is freed.
  std::optional<c10::cuda::CUDAStreamGuard> onCompute;
  if (streams)
    onCompute.emplace(streams->compute);
#endif
  auto arenaBytes = [&](Space space) -> int64_t {
    auto it = schedule.arenaBytes.find(toString(space));
    return it == schedule.arenaBytes.end() ? 0 : it->second;
  };
  for (Space space : {Space::Device, Space::Host, Space::PinnedHost}) {
    at::TensorOptions options = at::TensorOptions().dtype(at::kByte);
    if (space == Space::Device)
      options = options.device(device);
    else if (space == Space::PinnedHost && device.is_cuda())
      options = options.pinned_memory(true);
    arenas[static_cast<size_t>(space)] =
        at::empty({arenaBytes(space)}, options);
  }

  buffers.resize(schedule.buffers.size());
  for (size_t id = 0; id < schedule.buffers.size(); ++id) {
    const Buffer &b = schedule.buffers[id];
    std::string name = "buffer " + std::to_string(id);
    if (b.numel < 0)
      throw ExecutionError(name + " has a negative size");
    if (b.kind == Buffer::Kind::Alloc) {
      name += " \"" + b.name + "\"";
      int64_t bytes = b.numel * static_cast<int64_t>(elementBytes(b.type));
      int64_t arena = arenaBytes(b.space);
      size_t align = elementBytes(b.type);
      if (b.offset < 0 || b.offset + bytes > arena ||
          b.offset % static_cast<int64_t>(align) != 0)
        throw ExecutionError(name + " (" + std::to_string(bytes) +
                             " bytes at offset " + std::to_string(b.offset) +
                             ") does not fit the " + toString(b.space) +
                             " arena of " + std::to_string(arena) + " bytes");
      buffers[id] = arenas[static_cast<size_t>(b.space)]
                        .narrow(0, b.offset, bytes)
                        .view(scalarType(b.type));
      continue;
    }
    if (b.source < 0 || static_cast<size_t>(b.source) >= id)
      throw ExecutionError(name + " is a view of an undefined buffer");
    const at::Tensor &source = buffers[b.source];
    const Buffer &src = schedule.buffers[b.source];
    if (src.type != b.type || src.space != b.space)
      throw ExecutionError(name + " is a view with another element type or "
                                  "memory space than its source");
    if (b.kind == Buffer::Kind::View) {
      if (b.viewOffset < 0 || b.viewOffset + b.numel > source.numel())
        throw ExecutionError(
            name + " views elements [" + std::to_string(b.viewOffset) + ", " +
            std::to_string(b.viewOffset + b.numel) + ") of a buffer of " +
            std::to_string(source.numel()));
      buffers[id] = source.narrow(0, b.viewOffset, b.numel);
      continue;
    }
    int64_t size = comm.groupSize(b.axis);
    if (source.numel() % size != 0 || source.numel() / size != b.numel)
      throw ExecutionError(
          name + " is a " + std::to_string(b.numel) + "-element shard of a " +
          std::to_string(source.numel()) + "-element buffer over a group of " +
          std::to_string(size));
    buffers[id] = source.narrow(0, comm.groupRank(b.axis) * b.numel, b.numel);
  }
}

void Executor::Impl::validateOps() {
  int64_t numBuffers = static_cast<int64_t>(schedule.buffers.size());
  keepGraph.assign(schedule.ops.size(), true);
  std::set<std::pair<int64_t, int64_t>> recomputed;
  for (size_t i = schedule.ops.size(); i-- > 0;) {
    const Op &op = schedule.ops[i];
    for (int64_t id : {op.buffer, op.src, op.dst, op.params, op.tied, op.saves,
                       op.input, op.activations, op.grads, op.tiedGrads,
                       op.scalar, op.norm, op.foundInf, op.lossScale})
      if (id < -1 || id >= numBuffers)
        throw ExecutionError(describe(i) + " names buffer " +
                             std::to_string(id) + ", which does not exist");
    for (int64_t id : op.state)
      if (id < 0 || id >= numBuffers)
        throw ExecutionError(describe(i) + " names buffer " +
                             std::to_string(id) + ", which does not exist");
    for (int64_t e : op.after)
      if (e < 0 || e >= schedule.numEvents)
        throw ExecutionError(describe(i) + " waits for event " +
                             std::to_string(e) + ", which does not exist");
    if (op.event >= schedule.numEvents || op.waitEvent >= schedule.numEvents)
      throw ExecutionError(describe(i) + " names an event beyond the " +
                           std::to_string(schedule.numEvents) +
                           " of the schedule");
    auto require = [&](int64_t id, const char *what) {
      if (id < 0)
        throw ExecutionError(describe(i) + " has no " + what + " operand");
    };
    switch (op.kind) {
    case OpKind::Alloc:
    case OpKind::Free:
    case OpKind::AllReduce:
    case OpKind::Broadcast:
    case OpKind::Zero:
      require(op.buffer, "buffer");
      break;
    case OpKind::CheckFinite:
      require(op.buffer, "buffer");
      require(op.scalar, "flag");
      break;
    case OpKind::AllGather:
    case OpKind::ReduceScatter:
    case OpKind::Copy:
    case OpKind::Cast:
    case OpKind::Accumulate:
      require(op.src, "source");
      require(op.dst, "destination");
      break;
    case OpKind::GradNorm:
      require(op.src, "gradient");
      require(op.scalar, "norm");
      break;
    case OpKind::Forward:
    case OpKind::Recompute:
      require(op.params, "params");
      break;
    case OpKind::Backward:
    case OpKind::OptimizerStep:
      require(op.params, "params");
      require(op.grads, "grads");
      break;
    case OpKind::UpdateLossScale:
      require(op.scalar, "loss scale");
      break;
    case OpKind::Wait:
      if (op.waitEvent < 0)
        throw ExecutionError(describe(i) + " names no event");
      break;
    case OpKind::Loss:
      break;
    }
    bool computes = op.kind == OpKind::Forward ||
                    op.kind == OpKind::Recompute || op.kind == OpKind::Loss ||
                    op.kind == OpKind::Backward;
    if (computes &&
        (op.unit < 0 || op.unit >= static_cast<int64_t>(schedule.units.size())))
      throw ExecutionError(describe(i) + " names a unit that does not exist");
    if (op.kind == OpKind::OptimizerStep &&
        (op.group < 0 ||
         op.group >= static_cast<int64_t>(schedule.groups.size())))
      throw ExecutionError(describe(i) + " names a group that does not exist");
    // A forward that a later recompute rebuilds keeps no autograd graph.
    if (op.kind == OpKind::Recompute)
      recomputed.insert({op.unit, op.microBatch});
    if (op.kind == OpKind::Forward)
      keepGraph[i] = !recomputed.count({op.unit, op.microBatch});
  }
  // Ops that touch host memory from the host: every op with an operand
  // outside device memory, except an async copy between the two sides.
  hostSide.assign(schedule.ops.size(), false);
  for (size_t i = 0; i < schedule.ops.size(); ++i) {
    const Op &op = schedule.ops[i];
    if (op.kind == OpKind::Alloc || op.kind == OpKind::Free ||
        op.kind == OpKind::Wait)
      continue;
    auto onHost = [&](int64_t id) {
      return id >= 0 && schedule.buffers[id].space != Space::Device;
    };
    if (op.kind == OpKind::Copy) {
      hostSide[i] = onHost(op.src) && onHost(op.dst);
      continue;
    }
    bool host = false;
    for (int64_t id : {op.buffer, op.src, op.dst, op.params, op.tied, op.saves,
                       op.input, op.activations, op.grads, op.tiedGrads,
                       op.scalar, op.norm, op.foundInf, op.lossScale})
      host = host || onHost(id);
    for (int64_t id : op.state)
      host = host || onHost(id);
    hostSide[i] = host;
  }
  // The loss scale the first op reading it sees is the step's scale.
  for (const Op &op : schedule.ops)
    if (op.lossScale >= 0) {
      lossScaleBuffer = op.lossScale;
      break;
    }
}

void Executor::Impl::fillState(
    const std::function<void(int64_t, at::Tensor)> &fillUnit) {
  std::map<std::string, int64_t> unitIndex, groupIndex;
  for (size_t u = 0; u < schedule.units.size(); ++u)
    unitIndex[schedule.units[u].name] = static_cast<int64_t>(u);
  for (size_t g = 0; g < schedule.groups.size(); ++g)
    groupIndex[schedule.groups[g].name] = static_cast<int64_t>(g);

  std::map<std::string, at::Tensor> fullGroups;
  auto fullGroup = [&](const Group &group) -> at::Tensor {
    auto it = fullGroups.find(group.name);
    if (it != fullGroups.end())
      return it->second;
    at::Tensor flat = at::zeros({group.paddedNumel}, at::kFloat);
    int64_t offset = 0;
    for (const std::string &name : group.units) {
      auto u = unitIndex.find(name);
      if (u == unitIndex.end())
        throw ExecutionError("group '" + group.name + "' names unit '" + name +
                             "', which the schedule does not have");
      int64_t numel = schedule.units[u->second].numel;
      if (offset + numel > group.paddedNumel)
        throw ExecutionError("group '" + group.name + "' holds more than its " +
                             std::to_string(group.paddedNumel) + " elements");
      fillUnit(u->second, flat.narrow(0, offset, numel));
      offset += numel;
    }
    return fullGroups[group.name] = flat;
  };

  for (size_t id = 0; id < schedule.buffers.size(); ++id) {
    const Buffer &b = schedule.buffers[id];
    if (b.kind != Buffer::Kind::Alloc || !b.persistent)
      continue;
    at::Tensor &t = buffers[id];
    bool holdsWeights =
        b.role == BufferRole::Param || b.role == BufferRole::Master;
    if (!b.group.empty() && holdsWeights) {
      auto g = groupIndex.find(b.group);
      if (g == groupIndex.end())
        throw ExecutionError("buffer \"" + b.name + "\" belongs to group '" +
                             b.group + "', which the schedule does not have");
      const Group &group = schedule.groups[g->second];
      at::Tensor flat = fullGroup(group);
      if (b.sharded) {
        int64_t i = comm.groupRank(GroupAxis::Shard);
        if (b.numel != group.shardNumel ||
            (i + 1) * group.shardNumel > group.paddedNumel)
          throw ExecutionError(
              "buffer \"" + b.name + "\" has " + std::to_string(b.numel) +
              " elements, but shard " + std::to_string(i) + " of group '" +
              group.name + "' has " + std::to_string(group.shardNumel));
        flat = flat.narrow(0, i * group.shardNumel, group.shardNumel);
      } else if (b.numel != group.paddedNumel) {
        throw ExecutionError("buffer \"" + b.name + "\" has " +
                             std::to_string(b.numel) +
                             " elements, but group '" + group.name + "' has " +
                             std::to_string(group.paddedNumel));
      }
      t.copy_(flat);
    } else if (b.role == BufferRole::Scalar && b.name == "loss_scale") {
      t.fill_(schedule.train.lossScale.initial);
    } else {
      t.zero_();
    }
  }
  stepsTaken.assign(schedule.groups.size(), 0);
  dynamicLossScale =
      DynamicLossScale{schedule.train.lossScale.growthInterval, 0};
}

void Executor::Impl::issue(size_t index, c10::intrusive_ptr<c10d::Work> work,
                           std::function<void()> finish) {
  const Op &op = schedule.ops[index];
  if (op.event < 0) {
    // Nobody waits for it: complete it in place, as if waited right away.
    if (work) {
      work->wait();
      Event e{Event::State::Done, work, nullptr, index, hostCopy(index)};
      waited(e);
    }
    if (finish)
      finish();
    return;
  }
  Event &e = events[op.event];
  if (e.state != Event::State::Unissued)
    throw ExecutionError(describe(index) + " signals event " +
                         std::to_string(op.event) +
                         ", which an earlier op of this step signalled");
  e = Event{Event::State::InFlight, std::move(work), std::move(finish), index,
            hostCopy(index)};
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

void Executor::Impl::allGather(size_t index) {
  const Op &op = schedule.ops[index];
  at::Tensor src = buffers[op.src], dst = buffers[op.dst];
  int size = comm.groupSize(op.axis);
  if (dst.numel() != src.numel() * size ||
      dst.scalar_type() != src.scalar_type())
    throw ExecutionError(describe(index) + ": the destination must be " +
                         std::to_string(size) + " times the source, same type");
  if (size == 1) {
    if (!overlaps(src, dst))
      dst.copy_(src);
    issue(index, nullptr, nullptr);
    return;
  }
  // zero1 gathers a shard view into its own full buffer; Gloo's copy of the
  // local chunk must not read what it writes.
  if (overlaps(src, dst))
    src = src.clone();
  issue(index, comm.group(op.axis)._allgather_base(dst, src), nullptr);
}

void Executor::Impl::reduceScatter(size_t index) {
  const Op &op = schedule.ops[index];
  at::Tensor src = buffers[op.src], dst = buffers[op.dst];
  int size = comm.groupSize(op.axis);
  if (src.numel() != dst.numel() * size)
    throw ExecutionError(describe(index) + ": the source must be " +
                         std::to_string(size) + " times the destination");
  bool direct = !op.accumulate && dst.scalar_type() == src.scalar_type() &&
                !overlaps(src, dst);
  at::Tensor out = direct ? dst : at::empty({dst.numel()}, src.options());
  c10::intrusive_ptr<c10d::Work> work;
  if (size == 1) {
    out.copy_(src);
  } else {
    c10d::ReduceScatterOptions options;
    options.reduceOp = reduceOp(op.reduce);
    work = comm.group(op.axis)._reduce_scatter_base(out, src, options);
  }
  bool average = op.reduce == ReduceKind::Avg && size > 1;
  bool accumulate = op.accumulate;
  issue(index, std::move(work), [=]() mutable {
    if (average)
      out.div_(size);
    if (accumulate)
      dst.add_(out);
    else if (!direct)
      dst.copy_(out);
  });
}

void Executor::Impl::allReduce(size_t index) {
  const Op &op = schedule.ops[index];
  at::Tensor buffer = buffers[op.buffer];
  int size = comm.groupSize(op.axis);
  if (size == 1) {
    issue(index, nullptr, nullptr);
    return;
  }
  std::vector<at::Tensor> tensors{buffer};
  c10d::AllreduceOptions options;
  options.reduceOp = reduceOp(op.reduce);
  auto work = comm.group(op.axis).allreduce(tensors, options);
  bool average = op.reduce == ReduceKind::Avg;
  issue(index, std::move(work), [=]() mutable {
    if (average)
      buffer.div_(size);
  });
}

void Executor::Impl::broadcast(size_t index) {
  const Op &op = schedule.ops[index];
  int size = comm.groupSize(op.axis);
  if (op.root < 0 || op.root >= size)
    throw ExecutionError(describe(index) + ": root " + std::to_string(op.root) +
                         " is not a rank of a group of " +
                         std::to_string(size));
  if (size == 1) {
    issue(index, nullptr, nullptr);
    return;
  }
  std::vector<at::Tensor> tensors{buffers[op.buffer]};
  c10d::BroadcastOptions options;
  options.rootRank = op.root;
  options.rootTensor = 0;
  issue(index, comm.group(op.axis).broadcast(tensors, options), nullptr);
}

void Executor::Impl::optimizerStep(const Op &op) {
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
  const at::Tensor &grads = buffers[op.grads];
  std::vector<at::Tensor> state;
  for (int64_t id : op.state)
    state.push_back(buffers[id]);
  if (params.scalar_type() != at::kFloat)
    throw ExecutionError(
        "the step updates fp32 parameters, the schedule "
        "gives " +
        std::string(toString(schedule.buffers[op.params].type)));
  for (const at::Tensor &s : state)
    if (s.scalar_type() != at::kFloat || s.numel() != params.numel())
      throw ExecutionError("optimizer state must be fp32 and as large as the "
                           "parameters");
  if (grads.numel() != params.numel())
    throw ExecutionError("the gradients (" + std::to_string(grads.numel()) +
                         ") and parameters (" + std::to_string(params.numel()) +
                         ") differ in size");
  // GradScaler.unscale_ multiplies by the fp32 reciprocal of the scale.
  double invLossScale =
      lossScale == 1.0 ? 1.0 : static_cast<float>(1.0 / lossScale);
  double clip =
      train.gradClip > 0 ? clipCoefficient(totalNorm, train.gradClip) : 1.0;
  at::Tensor grad = stepGradient(grads, invLossScale, clip);
  int64_t t = ++stepsTaken[op.group];
  optimizerUpdate(train.optimizer, params, grad, state, lr, t);
}

void Executor::Impl::copy(size_t index) {
  const Op &op = schedule.ops[index];
  at::Tensor src = buffers[op.src], dst = buffers[op.dst];
  if (src.numel() != dst.numel())
    throw ExecutionError("copy between buffers of different sizes");
#ifdef PLAN_HAVE_CUDA
  if (hostCopy(index)) {
    // On the h2d or d2h stream, after everything queued so far on the
    // compute stream and after the `after` events.
    c10::cuda::CUDAStream stream = dst.is_cuda() ? streams->h2d : streams->d2h;
    cuda::streamWaitStream(stream, streams->compute);
    for (int64_t id : op.after) {
      Event &e = events[id];
      auto *work = dynamic_cast<cuda::CudaEventWork *>(e.work.get());
      if (e.state == Event::State::InFlight && work && !e.finish)
        // The event stays in flight for its own `wait`.
        C10_CUDA_CHECK(
            cudaStreamWaitEvent(stream.stream(), work->event().event(), 0));
      else {
        complete(id);
        cuda::streamWaitStream(stream, streams->compute);
      }
    }
    {
      c10::cuda::CUDAStreamGuard onStream(stream);
      dst.copy_(src, /*non_blocking=*/true);
    }
    issue(index,
          c10::make_intrusive<cuda::CudaEventWork>(
              stream, c10d::OpType::UNKNOWN, "plan:copy",
              std::vector<at::Tensor>{src, dst}),
          nullptr);
    return;
  }
#endif
  // Synchronous on the cpu backend (and between two host buffers or two
  // device buffers on the cuda one): the event is complete when issued.
  for (int64_t e : op.after)
    complete(e);
  dst.copy_(src);
  issue(index, nullptr, nullptr);
}

void Executor::Impl::execute(size_t index) {
  const Op &op = schedule.ops[index];
  if (op.kind != OpKind::Copy)
    for (int64_t e : op.after)
      complete(e);
  if (hostSide[index])
    syncHostFences();
  switch (op.kind) {
  case OpKind::Alloc:
  case OpKind::Free:
    // Places are static: an alloc is a view made at construction.
    return;
  case OpKind::Wait:
    if (op.waitEvent < 0)
      throw ExecutionError(describe(index) + " names no event");
    complete(op.waitEvent);
    return;
  case OpKind::AllGather:
    return allGather(index);
  case OpKind::ReduceScatter:
    return reduceScatter(index);
  case OpKind::AllReduce:
    return allReduce(index);
  case OpKind::Broadcast:
    return broadcast(index);
  case OpKind::Copy:
    return copy(index);
  case OpKind::Cast:
  case OpKind::Accumulate: {
    at::Tensor src = buffers[op.src], dst = buffers[op.dst];
    if (src.numel() != dst.numel())
      throw ExecutionError("operands of different sizes");
    if (op.kind == OpKind::Cast)
      dst.copy_(src);
    else
      dst.add_(src.to(dst.device()));
    return;
  }
  case OpKind::Zero:
    buffers[op.buffer].zero_();
    return;
  case OpKind::GradNorm:
    buffers[op.scalar].add_(buffers[op.src].to(at::kFloat).square().sum());
    return;
  case OpKind::CheckFinite:
    // On the device, without reading the result: the host learns it once,
    // at the first op that needs found_inf (stepScalar).
    buffers[op.scalar].masked_fill_(
        at::isfinite(buffers[op.buffer]).all().logical_not(), 1);
    return;
  case OpKind::Forward:
    model.forward(op.unit, op.microBatch, operand(op.params), operand(op.tied),
                  operand(op.saves), keepGraph[index]);
    return;
  case OpKind::Recompute:
    model.recompute(op.unit, op.microBatch, operand(op.params),
                    operand(op.tied), operand(op.input), operand(op.saves));
    return;
  case OpKind::Loss: {
    double lossScale = op.lossScale >= 0 ? stepScalar(op.lossScale) : 1.0;
    losses.push_back(model.loss(op.unit, op.microBatch, op.scale, lossScale));
    return;
  }
  case OpKind::Backward:
    model.backward(op.unit, op.microBatch, operand(op.params), operand(op.tied),
                   operand(op.activations), operand(op.grads),
                   operand(op.tiedGrads));
    return;
  case OpKind::OptimizerStep:
    return optimizerStep(op);
  case OpKind::UpdateLossScale: {
    at::Tensor scale = buffers[op.scalar];
    bool foundInf = op.foundInf >= 0 && stepScalar(op.foundInf) > 0;
    if (schedule.train.lossScale.kind == "dynamic")
      scale.fill_(dynamicLossScale.update(stepScalar(op.scalar), foundInf));
    return;
  }
  }
  throw ExecutionError(describe(index) + ": unknown op kind");
}

Executor::Executor(const Schedule &schedule, Model &model, Comm &comm,
                   at::Device device)
    : impl_(new Impl(schedule, model, comm, device)) {
  try {
    if (comm.world() != schedule.worldSize())
      throw ExecutionError("schedule is for " +
                           std::to_string(schedule.worldSize()) +
                           " ranks, but the process groups have " +
                           std::to_string(comm.world()));
    if (device.is_cuda()) {
#ifdef PLAN_HAVE_CUDA
      at::DeviceIndex index =
          device.has_index() ? device.index() : c10::cuda::current_device();
      impl_->device = at::Device(at::kCUDA, index);
      c10::cuda::CUDAGuard onDevice(index);
      impl_->streams = CudaStreams{c10::cuda::getStreamFromPool(false, index),
                                   c10::cuda::getStreamFromPool(false, index),
                                   c10::cuda::getStreamFromPool(false, index)};
#else
      throw ExecutionError("this build has no CUDA backend (configure with "
                           "-DPLAN_ENABLE_CUDA=ON)");
#endif
    }
    impl_->allocate();
    impl_->validateOps();
    impl_->events.resize(std::max<int64_t>(0, schedule.numEvents));
    impl_->stepsTaken.assign(schedule.groups.size(), 0);
    impl_->dynamicLossScale.growthInterval =
        schedule.train.lossScale.growthInterval;
  } catch (...) {
    delete impl_;
    throw;
  }
}

Executor::~Executor() {
#ifdef PLAN_HAVE_CUDA
  // Work still queued on the streams reads the arenas freed here.
  if (impl_->streams) {
    try {
      impl_->streams->compute.synchronize();
      impl_->streams->h2d.synchronize();
      impl_->streams->d2h.synchronize();
    } catch (...) {
      // A destructor does not throw; a failed device reports elsewhere.
    }
  }
#endif
  delete impl_;
}

void Executor::setTotalSteps(int64_t steps) { impl_->totalSteps = steps; }

void Executor::setMemoryTrace(bool on) { impl_->traceMemory = on; }

void Executor::initState(uint64_t seed) {
  impl_->fillState([&](int64_t unit, at::Tensor out) {
    impl_->model.initUnit(unit, seed, out);
  });
}

void Executor::loadState(const TensorSource &source) {
  impl_->fillState([&](int64_t unit, at::Tensor out) {
    impl_->model.loadUnit(unit, source, out);
  });
}

void Executor::clearState() {
  Impl &s = *impl_;
  for (size_t id = 0; id < s.schedule.buffers.size(); ++id) {
    const Buffer &b = s.schedule.buffers[id];
    if (b.kind != Buffer::Kind::Alloc || !b.persistent)
      continue;
    if (b.role == BufferRole::Scalar && b.name == "loss_scale")
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
  for (size_t g = 0; g < s.stepsTaken.size(); ++g) {
    if (g > 0 && s.stepsTaken[g] != c.optimizerSteps)
      throw ExecutionError("group '" + s.schedule.groups[g].name + "' took " +
                           std::to_string(s.stepsTaken[g]) +
                           " optimizer steps, but group '" +
                           s.schedule.groups[0].name + "' took " +
                           std::to_string(c.optimizerSteps));
    c.optimizerSteps = s.stepsTaken[g];
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
  if (total <= 0 && schedule.train.lrSchedule.kind != "constant")
    throw ExecutionError("the " + schedule.train.lrSchedule.kind +
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
  s.resetAllocatorPeak();

#ifdef PLAN_HAVE_CUDA
  // The step runs on the compute stream, after what the caller queued (the
  // batches' copies); the caller's stream waits for the step at the end.
  std::optional<c10::cuda::CUDAStreamGuard> onCompute;
  std::optional<c10::cuda::CUDAStream> caller;
  if (s.streams) {
    caller = c10::cuda::getCurrentCUDAStream(s.device.index());
    cuda::streamWaitStream(s.streams->compute, *caller);
    onCompute.emplace(s.streams->compute);
  }
  auto release = [&]() {
    s.hostFences.clear();
    if (caller)
      cuda::streamWaitStream(*caller, s.streams->compute);
  };
#else
  auto release = []() {};
#endif

  int64_t tokens = 0;
  int64_t tracedPeak = 0; // the ops' peaks so far, with the memory trace
  try {
    for (size_t mb = 0; mb < batches.size(); ++mb) {
      tokens += batches[mb].tokens.numel();
      s.model.setMicroBatch(static_cast<int64_t>(mb), batches[mb]);
    }
    for (size_t i = 0; i < schedule.ops.size(); ++i) {
      OpMemory memory;
      if (s.traceMemory) {
        tracedPeak = std::max(tracedPeak, s.allocatedBytes(/*peak=*/true));
        memory.op = static_cast<int64_t>(i);
        memory.liveBefore = s.allocatedBytes(/*peak=*/false);
        s.resetAllocatorPeak();
      }
      try {
        s.execute(i);
        s.forgetWritten(schedule.ops[i]);
      } catch (const ExecutionError &) {
        throw;
      } catch (const std::exception &e) {
        throw ExecutionError(s.describe(i) + ": " + firstLine(e.what()));
      }
      if (s.traceMemory) {
        memory.peak = s.allocatedBytes(/*peak=*/true);
        memory.liveAfter = s.allocatedBytes(/*peak=*/false);
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
    s.syncHostFences();
  } catch (...) {
    s.model.takeUnplannedSaveBytes();
    s.model.reset();
    release();
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
  // the global batch.
  if (s.comm.world() > 1) {
    std::vector<at::Tensor> value{at::full({1}, loss, at::kDouble)};
    try {
      s.comm.group(GroupAxis::World).allreduce(value)->wait();
    } catch (const std::exception &e) {
      release();
      throw ExecutionError("the loss all_reduce for metrics failed: " +
                           firstLine(e.what()));
    }
    loss = value[0].item<double>() / s.comm.world();
  }
  result.loss = loss;
  result.gradNorm = s.gradNorm.value_or(0.0);
  result.skipped = s.skipped;
  result.tokens = tokens * s.comm.world();
  result.plannedBytes = schedule.workspaceBytes;
  for (const auto &[space, bytes] : schedule.arenaBytes)
    result.plannedBytes += bytes;
  release();
  // The allocator's peak since the step started (with the memory trace,
  // since the last op, and the ops' peaks before it). The cpu backend's
  // counts every CPU tensor of the process, the arenas included; the
  // caching allocator's includes the device arena, and the host arenas are
  // added to it.
  result.peakBytes = std::max(tracedPeak, s.allocatedBytes(/*peak=*/true));
#ifdef PLAN_HAVE_CUDA
  if (s.streams)
    result.peakBytes +=
        s.arenas[static_cast<size_t>(Space::Host)].nbytes() +
        s.arenas[static_cast<size_t>(Space::PinnedHost)].nbytes();
#endif
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
