//===- CudaBackend.cpp - The cuda device backend --------------------------===//
//
// DeviceBackend::createCuda (DeviceBackend.h): compute on a stream of the
// backend's own (the current stream during a step), asynchronous copies
// between host and device memory on a host-to-device and a device-to-host
// stream, the pinned_host arena in page-locked memory, and the CUDA caching
// allocator's allocated bytes as the measured memory. Collectives run on the
// process groups' own streams (NcclComm.cpp). docs/runtime.md ("CUDA
// backend") describes the stream protocol.
//
//===----------------------------------------------------------------------===//

#include "CudaWork.h"
#include "DeviceBackend.h"

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>

#include <cuda_runtime_api.h>

#include <optional>
#include <stdexcept>
#include <string>

namespace plan::rt {
namespace {

class CudaBackend final : public DeviceBackend {
public:
  explicit CudaBackend(c10::DeviceIndex index)
      : index_(index), compute_(pool(index)), h2d_(pool(index)),
        d2h_(pool(index)) {}

  ~CudaBackend() override {
    // Work still queued on the streams reads arenas freed after this.
    try {
      synchronize();
    } catch (...) {
      // A destructor does not throw; a failed device reports elsewhere.
    }
  }

  at::Device device() const override { return at::Device(at::kCUDA, index_); }

  at::Tensor allocateArena(Space space, int64_t bytes) override {
    at::TensorOptions options = at::TensorOptions().dtype(at::kByte);
    if (space == Space::Device) {
      // The device arena belongs to the compute stream, on which it is freed.
      c10::cuda::CUDAStreamGuard onCompute(compute_);
      return at::empty({bytes}, options.device(device()));
    }
    if (space == Space::PinnedHost && bytes > 0)
      return allocatePinned(bytes);
    return at::empty({bytes}, options);
  }

  int64_t allocatedBytes() const override { return stat().current; }
  int64_t peakAllocatedBytes() const override { return stat().peak; }
  void resetPeak() override {
    c10::cuda::CUDACachingAllocator::resetPeakStats(index_);
  }
  bool measuresHostArenas() const override { return false; }

  void beginStep() override {
    caller_ = c10::cuda::getCurrentCUDAStream(index_);
    cuda::streamWaitStream(compute_, *caller_);
    onCompute_.emplace(compute_);
  }
  void endStep() override {
    hostFences_.clear();
    onCompute_.reset();
    if (caller_)
      cuda::streamWaitStream(*caller_, compute_);
    caller_.reset();
  }

  bool copiesAsync(const at::Tensor &dst,
                   const at::Tensor &src) const override {
    return dst.is_cuda() != src.is_cuda();
  }

  c10::intrusive_ptr<c10d::Work>
  copyAsync(at::Tensor dst, at::Tensor src,
            const std::vector<c10::intrusive_ptr<c10d::Work>> &after) override {
    // On the h2d or d2h stream, after everything queued so far on the
    // compute stream and after the events of `after`.
    c10::cuda::CUDAStream stream = dst.is_cuda() ? h2d_ : d2h_;
    cuda::streamWaitStream(stream, compute_);
    for (const auto &work : after)
      C10_CUDA_CHECK(cudaStreamWaitEvent(
          stream.stream(),
          static_cast<cuda::CudaEventWork &>(*work).event().event(), 0));
    {
      c10::cuda::CUDAStreamGuard onStream(stream);
      dst.copy_(src, /*non_blocking=*/true);
    }
    return c10::make_intrusive<cuda::CudaEventWork>(
        stream, c10d::OpType::UNKNOWN, "plan:copy",
        std::vector<at::Tensor>{src, dst});
  }

  bool streamWaitable(const c10d::Work &work) const override {
    return dynamic_cast<const cuda::CudaEventWork *>(&work) != nullptr;
  }

  void waitedForHostCopy(c10::intrusive_ptr<c10d::Work> work) override {
    hostFences_.push_back(std::move(work));
  }
  void syncHostCopies() override {
    for (auto &work : hostFences_)
      static_cast<cuda::CudaEventWork &>(*work).event().synchronize();
    hostFences_.clear();
  }
  void dropHostCopies() override { hostFences_.clear(); }

  void synchronize() override {
    compute_.synchronize();
    h2d_.synchronize();
    d2h_.synchronize();
  }

private:
  // Page-locked memory of exactly `bytes`, from cudaHostAlloc. Not LibTorch's
  // pinned_memory(true): its caching host allocator rounds every request up
  // to a power of two, so a 72 GiB arena asked for 128 GiB (and failed on a
  // 126 GiB node), and a smaller one held up to twice what the plan says.
  static at::Tensor allocatePinned(int64_t bytes) {
    void *ptr = nullptr;
    cudaError_t err =
        cudaHostAlloc(&ptr, static_cast<size_t>(bytes), cudaHostAllocDefault);
    if (err != cudaSuccess) {
      (void)cudaGetLastError(); // clear the sticky error for later calls
      throw std::runtime_error(std::string("cudaHostAlloc: ") +
                               cudaGetErrorString(err));
    }
    return at::from_blob(
        ptr, {bytes}, [](void *p) { (void)cudaFreeHost(p); },
        at::TensorOptions().dtype(at::kByte).device(at::kCPU));
  }

  static c10::cuda::CUDAStream pool(c10::DeviceIndex index) {
    c10::cuda::CUDAGuard onDevice(index);
    return c10::cuda::getStreamFromPool(false, index);
  }
  c10::CachingAllocator::Stat stat() const {
    return c10::cuda::CUDACachingAllocator::getDeviceStats(index_)
        .allocated_bytes[static_cast<size_t>(
            c10::CachingAllocator::StatType::AGGREGATE)];
  }

  c10::DeviceIndex index_;
  c10::cuda::CUDAStream compute_, h2d_, d2h_;
  std::optional<c10::cuda::CUDAStream> caller_;
  std::optional<c10::cuda::CUDAStreamGuard> onCompute_;
  // Copies to or from host memory that the compute stream has waited for
  // and the host has not yet.
  std::vector<c10::intrusive_ptr<c10d::Work>> hostFences_;
};

} // namespace

std::unique_ptr<DeviceBackend> DeviceBackend::createCuda(int index) {
  c10::DeviceIndex device = index >= 0 ? static_cast<c10::DeviceIndex>(index)
                                       : c10::cuda::current_device();
  return std::make_unique<CudaBackend>(device);
}

bool DeviceBackend::cudaBuilt() { return true; }

int DeviceBackend::cudaDeviceCount() { return c10::cuda::device_count(); }

} // namespace plan::rt
