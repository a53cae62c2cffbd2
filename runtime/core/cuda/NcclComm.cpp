//===- NcclComm.cpp - NCCL process groups of the mesh ---------------------===//
//
// Comm::createNccl (Comm.h): one NCCL communicator for the world (its unique
// id goes through the rendezvous store) and the shard and replicate
// communicators split from it. Each is wrapped in an NcclBackend
// (c10d::Backend) that owns a communication stream: an op makes that stream
// wait for the caller's current stream, queues the NCCL call on it and
// returns a CudaEventWork. A watchdog thread follows the ops in flight: when
// one has not finished within the collective timeout of being queued (time
// it spends queued behind the compute stream counts), or NCCL reports an
// asynchronous error, it aborts every communicator of the rank (so that
// stuck kernels return) and prints one line; the next op on any group throws
// it.
//
//===----------------------------------------------------------------------===//

#include "Comm.h"
#include "CudaWork.h"

#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

namespace plan::rt {
namespace {

using Clock = std::chrono::steady_clock;

std::string oneLine(std::string s) {
  for (char &c : s)
    if (c == '\n' || c == '\r')
      c = ' ';
  while (!s.empty() && s.back() == ' ')
    s.pop_back();
  return s;
}

std::string ncclMessage(ncclResult_t result, ncclComm_t comm) {
  std::string message = ncclGetErrorString(result);
  const char *last = ncclGetLastError(comm);
  if (last && *last)
    message += std::string(" (") + last + ")";
  return oneLine(message);
}

/// A communicator, the ops in flight on it (for the watchdog) and its state
/// once aborted. Shared by the backend and the watchdog.
class NcclHandle {
public:
  NcclHandle(ncclComm_t comm, std::string name, int rank,
             std::chrono::milliseconds timeout)
      : comm_(comm), name_(std::move(name)), rank_(rank), timeout_(timeout) {}
  NcclHandle(const NcclHandle &) = delete;
  NcclHandle &operator=(const NcclHandle &) = delete;
  ~NcclHandle() {
    if (!aborted_.load())
      ncclCommDestroy(comm_);
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto &op : inFlight_)
      cudaEventDestroy(op.event);
    for (cudaEvent_t e : freeEvents_)
      cudaEventDestroy(e);
  }

  ncclComm_t comm() const { return comm_; }
  const std::string &name() const { return name_; }
  int rank() const { return rank_; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  /// Throws the reason once the communicator was aborted.
  void throwIfAborted() const {
    if (!aborted_.load())
      return;
    std::lock_guard<std::mutex> lock(mutex_);
    throw std::runtime_error(error_);
  }

  /// Follows an op just queued on `stream` (watchdog).
  void track(const char *op, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    cudaEvent_t event;
    if (!freeEvents_.empty()) {
      event = freeEvents_.back();
      freeEvents_.pop_back();
    } else if (cudaEventCreateWithFlags(&event, cudaEventDisableTiming) !=
               cudaSuccess) {
      throw std::runtime_error("rank " + std::to_string(rank_) +
                               ": cudaEventCreate failed for the " + name_);
    }
    if (cudaEventRecord(event, stream) != cudaSuccess) {
      freeEvents_.push_back(event);
      throw std::runtime_error("rank " + std::to_string(rank_) +
                               ": cudaEventRecord failed for the " + name_);
    }
    inFlight_.push_back({event, Clock::now(), op});
  }

  /// The watchdog's check: retires finished ops; returns the one-line error
  /// when the oldest op is past the timeout or NCCL reports an error.
  std::string check() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (abortStarted_)
      return {};
    ncclResult_t async = ncclSuccess;
    if (ncclCommGetAsyncError(comm_, &async) == ncclSuccess &&
        async != ncclSuccess && async != ncclInProgress)
      return "rank " + std::to_string(rank_) + ": NCCL error on the " + name_ +
             ": " + ncclMessage(async, comm_);
    while (!inFlight_.empty()) {
      InFlight &op = inFlight_.front();
      cudaError_t state = cudaEventQuery(op.event);
      if (state == cudaSuccess) {
        freeEvents_.push_back(op.event);
        inFlight_.pop_front();
        continue;
      }
      if (state != cudaErrorNotReady)
        return "rank " + std::to_string(rank_) + ": NCCL " + op.name +
               " on the " + name_ + " failed: " + cudaGetErrorString(state);
      if (Clock::now() - op.start > timeout_)
        return "rank " + std::to_string(rank_) + ": NCCL " + op.name +
               " on the " + name_ + " did not complete within " +
               std::to_string(timeout_.count()) +
               " ms (collective timeout); communicators aborted";
      break;
    }
    return {};
  }

  /// Aborts the communicator (once): its queued and running kernels return.
  /// The lock keeps check() off the communicator while it is torn down.
  void abort(const std::string &why) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (abortStarted_)
      return;
    abortStarted_ = true;
    error_ = why;
    ncclCommAbort(comm_);
    aborted_.store(true);
  }

private:
  struct InFlight {
    cudaEvent_t event;
    Clock::time_point start;
    const char *name;
  };

  ncclComm_t comm_;
  std::string name_;
  int rank_;
  std::chrono::milliseconds timeout_;
  std::atomic<bool> aborted_{false};
  mutable std::mutex mutex_;
  bool abortStarted_ = false; // under mutex_
  std::string error_;
  std::deque<InFlight> inFlight_;
  std::vector<cudaEvent_t> freeEvents_;
};

ncclDataType_t ncclType(const at::Tensor &t) {
  switch (t.scalar_type()) {
  case at::kFloat:
    return ncclFloat32;
  case at::kDouble:
    return ncclFloat64;
  case at::kHalf:
    return ncclFloat16;
  case at::kBFloat16:
    return ncclBfloat16;
  case at::kInt:
    return ncclInt32;
  case at::kLong:
    return ncclInt64;
  case at::kChar:
    return ncclInt8;
  case at::kByte:
  case at::kBool:
    return ncclUint8;
  default:
    throw std::runtime_error(std::string("NCCL backend: unsupported dtype ") +
                             c10::toString(t.scalar_type()));
  }
}

ncclRedOp_t ncclOp(const c10d::ReduceOp &op, const at::Tensor &t) {
  bool isBool = t.scalar_type() == at::kBool;
  switch (op.op_) {
  case c10d::ReduceOp::SUM:
    return isBool ? ncclMax : ncclSum; // logical or
  case c10d::ReduceOp::AVG:
    if (!at::isFloatingType(t.scalar_type()))
      throw std::runtime_error(
          "NCCL backend: AVG needs a floating-point tensor, got " +
          std::string(c10::toString(t.scalar_type())));
    return ncclAvg;
  case c10d::ReduceOp::MAX:
    return ncclMax;
  case c10d::ReduceOp::MIN:
    return ncclMin;
  case c10d::ReduceOp::PRODUCT:
    return isBool ? ncclMin : ncclProd; // logical and
  default:
    throw std::runtime_error("NCCL backend: unsupported reduce op " +
                             std::to_string(static_cast<int>(op.op_)));
  }
}

/// One group of the mesh on NCCL (see the file comment).
class NcclBackend final : public c10d::Backend {
public:
  NcclBackend(std::shared_ptr<NcclHandle> handle, int groupRank, int groupSize,
              at::Device device)
      : c10d::Backend(groupRank, groupSize), handle_(std::move(handle)),
        device_(device),
        stream_(c10::cuda::getStreamFromPool(true, device.index())) {}

  const std::string getBackendName() const override { return "plan_nccl"; }

  c10::intrusive_ptr<c10d::Work>
  _allgather_base(at::Tensor &output, at::Tensor &input,
                  const c10d::AllgatherOptions &options) override {
    checkSizes("all_gather", output, input, input.numel() * size_);
    return run(c10d::OpType::_ALLGATHER_BASE, "all_gather", {input}, {output},
               false, options.timeout,
               [&](const std::vector<at::Tensor> &in,
                   const std::vector<at::Tensor> &out, cudaStream_t stream) {
                 return ncclAllGather(in[0].data_ptr(), out[0].data_ptr(),
                                      in[0].numel(), ncclType(in[0]), comm(),
                                      stream);
               });
  }

  c10::intrusive_ptr<c10d::Work>
  _reduce_scatter_base(at::Tensor &output, at::Tensor &input,
                       const c10d::ReduceScatterOptions &options) override {
    checkSizes("reduce_scatter", input, output, output.numel() * size_);
    ncclRedOp_t op = ncclOp(options.reduceOp, input);
    return run(c10d::OpType::_REDUCE_SCATTER_BASE, "reduce_scatter", {input},
               {output}, false, options.timeout,
               [&](const std::vector<at::Tensor> &in,
                   const std::vector<at::Tensor> &out, cudaStream_t stream) {
                 return ncclReduceScatter(in[0].data_ptr(), out[0].data_ptr(),
                                          out[0].numel(), ncclType(in[0]), op,
                                          comm(), stream);
               });
  }

  c10::intrusive_ptr<c10d::Work>
  allreduce(std::vector<at::Tensor> &tensors,
            const c10d::AllreduceOptions &options) override {
    if (tensors.empty())
      throw std::runtime_error("NCCL all_reduce on the " + handle_->name() +
                               ": no tensors");
    std::vector<ncclRedOp_t> ops;
    for (const at::Tensor &t : tensors)
      ops.push_back(ncclOp(options.reduceOp, t));
    return run(c10d::OpType::ALLREDUCE, "all_reduce", tensors, tensors, true,
               options.timeout,
               [&](const std::vector<at::Tensor> &, // in place
                   const std::vector<at::Tensor> &out, cudaStream_t stream) {
                 ncclResult_t r = ncclGroupStart();
                 for (size_t i = 0; i < out.size() && r == ncclSuccess; ++i)
                   r = ncclAllReduce(out[i].data_ptr(), out[i].data_ptr(),
                                     out[i].numel(), ncclType(out[i]), ops[i],
                                     comm(), stream);
                 ncclResult_t end = ncclGroupEnd();
                 return r != ncclSuccess ? r : end;
               });
  }

  c10::intrusive_ptr<c10d::Work>
  broadcast(std::vector<at::Tensor> &tensors,
            const c10d::BroadcastOptions &options) override {
    if (tensors.size() != 1)
      throw std::runtime_error("NCCL broadcast on the " + handle_->name() +
                               ": expected one tensor, got " +
                               std::to_string(tensors.size()));
    if (options.rootRank < 0 || options.rootRank >= size_)
      throw std::runtime_error("NCCL broadcast on the " + handle_->name() +
                               ": root " + std::to_string(options.rootRank) +
                               " outside the group of " +
                               std::to_string(size_));
    int root = static_cast<int>(options.rootRank);
    return run(c10d::OpType::BROADCAST, "broadcast", tensors, tensors, true,
               options.timeout,
               [&](const std::vector<at::Tensor> &,
                   const std::vector<at::Tensor> &out, cudaStream_t stream) {
                 return ncclBroadcast(out[0].data_ptr(), out[0].data_ptr(),
                                      out[0].numel(), ncclType(out[0]), root,
                                      comm(), stream);
               });
  }

  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &tensors,
                                      int dstRank, int /*tag*/) override {
    return pointToPoint(c10d::OpType::SEND, "send", tensors, dstRank);
  }

  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &tensors,
                                      int srcRank, int /*tag*/) override {
    return pointToPoint(c10d::OpType::RECV, "recv", tensors, srcRank);
  }

private:
  ncclComm_t comm() const { return handle_->comm(); }

  /// A send to, or a receive from, group rank `peer` of one device tensor.
  c10::intrusive_ptr<c10d::Work> pointToPoint(c10d::OpType opType,
                                              const char *op,
                                              std::vector<at::Tensor> &tensors,
                                              int peer) {
    if (tensors.size() != 1 || tensors[0].is_cpu())
      throw std::runtime_error(std::string("NCCL ") + op + " on the " +
                               handle_->name() +
                               ": expected one device tensor");
    if (peer < 0 || peer >= size_ || peer == rank_)
      throw std::runtime_error(std::string("NCCL ") + op + " on the " +
                               handle_->name() + ": peer " +
                               std::to_string(peer) +
                               " is not another rank "
                               "of the group of " +
                               std::to_string(size_));
    bool sends = opType == c10d::OpType::SEND;
    return run(opType, op, sends ? tensors : std::vector<at::Tensor>{},
               sends ? std::vector<at::Tensor>{} : tensors, false,
               c10d::kUnsetTimeout,
               [&](const std::vector<at::Tensor> &in,
                   const std::vector<at::Tensor> &out, cudaStream_t stream) {
                 const at::Tensor &t = sends ? in[0] : out[0];
                 return sends ? ncclSend(t.data_ptr(), t.numel(), ncclType(t),
                                         peer, comm(), stream)
                              : ncclRecv(t.data_ptr(), t.numel(), ncclType(t),
                                         peer, comm(), stream);
               });
  }

  void checkSizes(const char *op, const at::Tensor &big,
                  const at::Tensor &small, int64_t expectedBig) const {
    if (big.scalar_type() != small.scalar_type())
      throw std::runtime_error(std::string("NCCL ") + op + " on the " +
                               handle_->name() + ": input and output dtypes " +
                               c10::toString(small.scalar_type()) + " and " +
                               c10::toString(big.scalar_type()) + " differ");
    if (big.numel() != expectedBig)
      throw std::runtime_error(
          std::string("NCCL ") + op + " on the " + handle_->name() + ": " +
          std::to_string(big.numel()) + " elements where the group of " +
          std::to_string(size_) + " needs " + std::to_string(expectedBig));
  }

  /// Issues `call` on the communication stream for `inputs` -> `outputs`
  /// (all on this backend's device, or all on the CPU: then staged through
  /// the device and completed before returning). `outputsHoldData`: the
  /// outputs are also read (in-place ops).
  template <typename Call>
  c10::intrusive_ptr<c10d::Work>
  run(c10d::OpType opType, const char *op,
      const std::vector<at::Tensor> &inputs,
      const std::vector<at::Tensor> &outputs, bool outputsHoldData,
      std::chrono::milliseconds timeout, Call &&call) {
    handle_->throwIfAborted();
    auto fail = [&](const std::string &what) {
      return std::runtime_error(std::string("NCCL ") + op + " on the " +
                                handle_->name() + ": " + what);
    };
    bool staged = !outputs.empty() && outputs[0].is_cpu();
    for (const auto *list : {&inputs, &outputs})
      for (const at::Tensor &t : *list) {
        if (t.is_cpu() != staged)
          throw fail("CPU and CUDA tensors mixed in one op");
        if (!staged && t.device() != device_)
          throw fail("tensor on " + t.device().str() + ", the group is on " +
                     device_.str());
        if (!t.is_contiguous())
          throw fail("tensor is not contiguous");
      }

    c10::cuda::CUDAGuard guard(device_);
    std::vector<at::Tensor> in = inputs, out = outputs;
    if (staged) {
      for (at::Tensor &t : in)
        t = t.to(device_);
      for (at::Tensor &t : out)
        t = outputsHoldData ? t.to(device_)
                            : at::empty(t.sizes(), t.options().device(device_));
      if (outputsHoldData) // in-place: one buffer
        in = out;
    }
    cuda::streamWaitStream(stream_,
                           c10::cuda::getCurrentCUDAStream(device_.index()));
    ncclResult_t result = call(in, out, stream_.stream());
    if (result != ncclSuccess && result != ncclInProgress)
      throw fail(ncclMessage(result, comm()));
    handle_->track(op, stream_.stream());
    std::vector<at::Tensor> keep = in;
    keep.insert(keep.end(), out.begin(), out.end());
    auto work = c10::make_intrusive<cuda::CudaEventWork>(stream_, opType,
                                                         nullptr, keep);
    if (!staged)
      return work;

    // Control values on the CPU: wait here, under the collective timeout.
    if (timeout == c10d::kUnsetTimeout || timeout == kNoTimeout)
      timeout = handle_->timeout();
    auto deadline = Clock::now() + timeout;
    while (!work->isCompleted()) {
      handle_->throwIfAborted();
      std::string error = handle_->check();
      if (error.empty() && Clock::now() > deadline)
        error = "rank " + std::to_string(handle_->rank()) + ": NCCL " + op +
                " on the " + handle_->name() + " did not complete within " +
                std::to_string(timeout.count()) + " ms; communicator aborted";
      if (!error.empty()) {
        handle_->abort(error);
        throw std::runtime_error(error);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    {
      c10::cuda::CUDAStreamGuard onStream(stream_);
      for (size_t i = 0; i < outputs.size(); ++i)
        outputs[i].copy_(out[i]);
    }
    return work;
  }

  std::shared_ptr<NcclHandle> handle_;
  at::Device device_;
  c10::cuda::CUDAStream stream_;
};

class NcclComm final : public Comm {
public:
  NcclComm(const c10::intrusive_ptr<c10d::Store> &store, int rank, int world,
           const Schedule &schedule, std::chrono::milliseconds timeout,
           at::Device device)
      : Comm(rank, schedule.replicate, schedule.shard, schedule.tensor,
             schedule.pipeline) {
    c10::cuda::CUDAGuard guard(device);

    ncclUniqueId id;
    const std::string key = "plan/nccl/world";
    if (rank == 0) {
      check(ncclGetUniqueId(&id), nullptr, "ncclGetUniqueId");
      const auto *bytes = reinterpret_cast<const uint8_t *>(&id);
      store->set(key, std::vector<uint8_t>(bytes, bytes + sizeof(id)));
    } else {
      std::vector<uint8_t> bytes = store->get(key);
      if (bytes.size() != sizeof(id))
        throw std::runtime_error("store key " + key + " holds " +
                                 std::to_string(bytes.size()) +
                                 " bytes, not an NCCL unique id");
      std::memcpy(&id, bytes.data(), sizeof(id));
    }
    ncclComm_t everyoneComm = nullptr;
    check(ncclCommInitRank(&everyoneComm, world, id, rank), nullptr,
          "ncclCommInitRank");
    auto everyone = std::make_shared<NcclHandle>(everyoneComm, "world group",
                                                 rank, timeout);
    handles_ = {everyone};
    // Collective over every rank: every rank splits in the same order. The
    // ranks of a color keep their order (key: the global rank).
    auto split = [&](GroupAxis axis, const char *name) {
      ncclComm_t comm = nullptr;
      check(ncclCommSplit(everyoneComm, groupColor(axis), rank, &comm, nullptr),
            everyoneComm,
            (std::string("ncclCommSplit (") + name + ")").c_str());
      handles_.push_back(
          std::make_shared<NcclHandle>(comm, name, rank, timeout));
      return c10::make_intrusive<NcclBackend>(handles_.back(), groupRank(axis),
                                              groupSize(axis), device);
    };
    everyoneGroup_ =
        c10::make_intrusive<NcclBackend>(everyone, rank, world, device);
    shardGroup_ = split(GroupAxis::Shard, "shard group");
    replicateGroup_ = split(GroupAxis::Replicate, "replicate group");
    // Without a tensor or pipeline axis the data-parallel ranks are every
    // rank, and no collective runs on a tensor or pipeline group of one.
    if (tensorSize_ * pipelineSize_ == 1)
      worldGroup_ = everyoneGroup_;
    else
      worldGroup_ = split(GroupAxis::World, "data-parallel group");
    if (tensorSize_ > 1)
      tensorGroup_ = split(GroupAxis::Tensor, "tensor group");
    // Each direction of a pipeline on its own communicator and stream: a
    // stage's sends to the next stage then never queue behind its receives
    // from it (docs/sched.md, sched-verify-pipeline).
    if (pipelineSize_ > 1) {
      pipelineGroup_ = split(GroupAxis::Pipeline, "pipeline group");
      towardsNext_ = split(GroupAxis::Pipeline, "pipeline's forward channel");
      towardsPrev_ = split(GroupAxis::Pipeline, "pipeline's backward channel");
      // Every rank takes part in the split; the stages between the first
      // and the last get no communicator.
      if (inEmbeddingGroup()) {
        embeddingGroup_ = split(GroupAxis::Embedding, "embedding group");
      } else {
        ncclComm_t none = nullptr;
        check(ncclCommSplit(everyoneComm, NCCL_SPLIT_NOCOLOR, rank, &none,
                            nullptr),
              everyoneComm, "ncclCommSplit (embedding group)");
      }
    }
    watchdog_ = std::thread([this, device] { watch(device); });
  }

  ~NcclComm() override {
    {
      std::lock_guard<std::mutex> lock(stopMutex_);
      stop_ = true;
    }
    stopCv_.notify_all();
    watchdog_.join();
    // Backends, then the communicators (the last handle reference).
    everyoneGroup_.reset();
    worldGroup_.reset();
    shardGroup_.reset();
    replicateGroup_.reset();
    tensorGroup_.reset();
    pipelineGroup_.reset();
    towardsNext_.reset();
    towardsPrev_.reset();
    embeddingGroup_.reset();
    // Split communicators before their parent (handles_[0]).
    while (!handles_.empty())
      handles_.pop_back();
  }

  static void check(ncclResult_t result, ncclComm_t comm, const char *what) {
    if (result != ncclSuccess)
      throw std::runtime_error(std::string(what) + ": " +
                               ncclMessage(result, comm));
  }

private:
  void watch(at::Device device) {
    c10::cuda::set_device(device.index());
    std::unique_lock<std::mutex> lock(stopMutex_);
    while (!stopCv_.wait_for(lock, std::chrono::milliseconds(100),
                             [this] { return stop_; })) {
      for (auto &handle : handles_) {
        std::string error = handle->check();
        if (error.empty())
          continue;
        // Peers in other groups may wait on this rank: abort them all.
        std::fprintf(stderr, "%s\n", error.c_str());
        for (auto &h : handles_)
          h->abort(error);
        return;
      }
    }
  }

  // World first: destroyed last (reverse order).
  std::vector<std::shared_ptr<NcclHandle>> handles_;
  std::thread watchdog_;
  std::mutex stopMutex_;
  std::condition_variable stopCv_;
  bool stop_ = false;
};

} // namespace

std::unique_ptr<Comm> Comm::createNccl(c10::intrusive_ptr<c10d::Store> store,
                                       int rank, int world,
                                       const Schedule &schedule,
                                       std::chrono::milliseconds timeout,
                                       at::Device device) {
  checkMesh(rank, world, schedule);
  if (!device.is_cuda())
    throw std::runtime_error("rank " + std::to_string(rank) +
                             ": the NCCL backend needs a CUDA device, got " +
                             device.str());
  int devices = c10::cuda::device_count();
  if (devices == 0)
    throw std::runtime_error("no CUDA device: rank " + std::to_string(rank) +
                             " cannot create the NCCL process groups");
  if (!device.has_index())
    device = at::Device(at::kCUDA, c10::cuda::current_device());
  if (device.index() >= devices)
    throw std::runtime_error("rank " + std::to_string(rank) + ": " +
                             device.str() + " does not exist (" +
                             std::to_string(devices) + " CUDA devices)");
  try {
    return std::make_unique<NcclComm>(store, rank, world, schedule, timeout,
                                      device);
  } catch (const std::exception &e) {
    throw std::runtime_error("rank " + std::to_string(rank) +
                             ": could not create the NCCL process groups: " +
                             oneLine(e.what()).substr(0, 400));
  }
}

} // namespace plan::rt
