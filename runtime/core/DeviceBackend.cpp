//===- DeviceBackend.cpp - The cpu backend, and what backends share -------===//

#include "DeviceBackend.h"
#include "HostMemory.h"

namespace plan::rt {

// Synchronous defaults: no stream, no copy the host could see half done.
bool DeviceBackend::copiesAsync(const at::Tensor &, const at::Tensor &) const {
  return false;
}

c10::intrusive_ptr<c10d::Work>
DeviceBackend::copyAsync(at::Tensor dst, at::Tensor src,
                         const std::vector<c10::intrusive_ptr<c10d::Work>> &) {
  dst.copy_(src);
  return nullptr;
}

bool DeviceBackend::streamWaitable(const c10d::Work &) const { return false; }

void DeviceBackend::waitedForHostCopy(c10::intrusive_ptr<c10d::Work>) {}
void DeviceBackend::syncHostCopies() {}
void DeviceBackend::dropHostCopies() {}

namespace {

/// Everything on the host, synchronous.
class CpuBackend final : public DeviceBackend {
public:
  // Before any arena is allocated, so that they are counted too.
  CpuBackend() { host_memory::install(); }

  at::Device device() const override { return at::Device(at::kCPU); }
  at::Tensor allocateArena(Space, int64_t bytes) override {
    return at::empty({bytes}, at::TensorOptions().dtype(at::kByte));
  }
  int64_t allocatedBytes() const override { return host_memory::current(); }
  int64_t peakAllocatedBytes() const override { return host_memory::peak(); }
  void resetPeak() override { host_memory::resetPeak(); }
  bool measuresHostArenas() const override { return true; }
  void beginStep() override {}
  void endStep() override {}
  void synchronize() override {}
};

} // namespace

std::unique_ptr<DeviceBackend> DeviceBackend::createCpu() {
  return std::make_unique<CpuBackend>();
}

std::unique_ptr<DeviceBackend> DeviceBackend::create(at::Device device) {
  if (device.is_cuda())
    return createCuda(device.has_index() ? device.index() : -1);
  return createCpu();
}

} // namespace plan::rt
