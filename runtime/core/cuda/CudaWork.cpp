//===- CudaWork.cpp - c10d::Work that completes with a CUDA event ---------===//

#include "CudaWork.h"

#include <c10/cuda/CUDACachingAllocator.h>

#include <stdexcept>
#include <thread>

namespace plan::rt::cuda {

void streamWaitStream(c10::cuda::CUDAStream waiter,
                      c10::cuda::CUDAStream producer) {
  if (waiter == producer)
    return;
  at::cuda::CUDAEvent event;
  event.record(producer);
  event.block(waiter);
}

CudaEventWork::CudaEventWork(c10::cuda::CUDAStream stream, c10d::OpType opType,
                             const char *profilingTitle,
                             const std::vector<at::Tensor> &keepAlive)
    : c10d::Work(-1, opType, profilingTitle), stream_(stream) {
  // The caching allocator does not hand these blocks out again before the
  // work queued on `stream` so far has run (tensors of other allocators,
  // e.g. pinned host memory, are left alone by recordStream).
  for (const at::Tensor &t : keepAlive)
    if (t.defined() && t.is_cuda())
      c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(),
                                                    stream_);
  event_.record(stream_);
}

bool CudaEventWork::wait(std::chrono::milliseconds timeout) {
  event_.block(c10::cuda::getCurrentCUDAStream(stream_.device_index()));
  if (timeout == kNoTimeout)
    return true;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!event_.query()) {
    if (std::chrono::steady_clock::now() >= deadline)
      throw std::runtime_error(
          c10d::opTypeToString(retrieveOpType()) + " on CUDA stream " +
          std::to_string(stream_.id()) + " did not complete within " +
          std::to_string(timeout.count()) + " ms");
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return true;
}

bool CudaEventWork::isCompleted() { return event_.query(); }

bool CudaEventWork::isSuccess() const { return true; }

void CudaEventWork::synchronize() {
  event_.block(c10::cuda::getCurrentCUDAStream(stream_.device_index()));
}

} // namespace plan::rt::cuda
