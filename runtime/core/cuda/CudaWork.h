//===- CudaWork.h - c10d::Work that completes with a CUDA event --*- C++
//-*-===//
//
// The CUDA backend's asynchronous ops (NCCL collectives on a communication
// stream, host<->device copies on copy streams) finish by recording a CUDA
// event on their stream. The executor holds the op as a c10d::Work, as it
// does Gloo's: wait() makes the *current* stream (the compute stream) wait
// for the event, without blocking the host, which is how a schedule's
// `sched.wait` orders streams. Built only with PLAN_HAVE_CUDA.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_RUNTIME_CORE_CUDA_CUDAWORK_H
#define PLAN_RUNTIME_CORE_CUDA_CUDAWORK_H

#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <string>
#include <vector>

namespace plan::rt::cuda {

/// Makes `waiter` wait (on the device) for all work queued so far on
/// `producer`. No-op when they are the same stream.
void streamWaitStream(c10::cuda::CUDAStream waiter,
                      c10::cuda::CUDAStream producer);

/// An op queued on `stream`: construct it right after queueing the op.
/// `keepAlive` are tensors the op reads or writes that must not be freed or
/// reused before it completes (recorded on `stream` with the caching
/// allocator's recordStream).
class CudaEventWork : public c10d::Work {
public:
  CudaEventWork(c10::cuda::CUDAStream stream, c10d::OpType opType,
                const char *profilingTitle,
                const std::vector<at::Tensor> &keepAlive = {});

  /// The current stream of the event's device waits for the event; returns
  /// at once (true). With a timeout other than kNoTimeout the host also
  /// blocks until the event has completed, and throws std::runtime_error
  /// ("... did not complete within N ms") when it has not by then.
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  bool isCompleted() override;
  bool isSuccess() const override;
  void synchronize() override;

  /// Non-const too: c10's CUDAEvent::event() (the cudaEvent_t) is non-const.
  at::cuda::CUDAEvent &event() { return event_; }
  const at::cuda::CUDAEvent &event() const { return event_; }
  c10::cuda::CUDAStream stream() const { return stream_; }

private:
  c10::cuda::CUDAStream stream_;
  at::cuda::CUDAEvent event_;
};

} // namespace plan::rt::cuda

#endif // PLAN_RUNTIME_CORE_CUDA_CUDAWORK_H
