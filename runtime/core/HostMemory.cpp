//===- HostMemory.cpp - Counts the bytes LibTorch allocates on the CPU ----===//

#include "HostMemory.h"

#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <cstring>
#include <mutex>

namespace plan::rt::host_memory {
namespace {

// The header in front of each allocation: keeps the data at the alignment
// LibTorch's CPU allocator gives (64 bytes).
constexpr size_t kHeader = 64;

std::atomic<int64_t> liveBytes{0};
std::atomic<int64_t> peakBytes{0};
// The allocator the counting one allocates from (LibTorch's default).
at::Allocator *inner = nullptr;

void raisePeak(int64_t now) {
  int64_t seen = peakBytes.load(std::memory_order_relaxed);
  while (now > seen &&
         !peakBytes.compare_exchange_weak(seen, now, std::memory_order_relaxed))
    ;
}

void release(void *data) {
  if (!data)
    return;
  char *base = static_cast<char *>(data) - kHeader;
  size_t n;
  std::memcpy(&n, base, sizeof n);
  liveBytes.fetch_sub(static_cast<int64_t>(n), std::memory_order_relaxed);
  inner->raw_deallocate(base);
}

class CountingAllocator final : public at::Allocator {
public:
  at::DataPtr allocate(size_t n) override {
    if (n == 0) // nothing to count, and release() ignores null
      return {nullptr, nullptr, &release, at::Device(at::kCPU)};
    char *base = static_cast<char *>(inner->raw_allocate(n + kHeader));
    std::memcpy(base, &n, sizeof n);
    raisePeak(liveBytes.fetch_add(static_cast<int64_t>(n),
                                  std::memory_order_relaxed) +
              static_cast<int64_t>(n));
    void *data = base + kHeader;
    return {data, data, &release, at::Device(at::kCPU)};
  }
  at::DeleterFnPtr raw_deleter() const override { return &release; }
  void copy_data(void *dest, const void *src, size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

CountingAllocator counting;

} // namespace

void install() {
  static std::once_flag once;
  std::call_once(once, [] {
    inner = c10::GetDefaultCPUAllocator();
    // Above the default's priority (0), so a later registration of the
    // default does not undo it.
    c10::SetCPUAllocator(&counting, /*priority=*/1);
  });
}

int64_t current() { return liveBytes.load(std::memory_order_relaxed); }

int64_t peak() { return peakBytes.load(std::memory_order_relaxed); }

void resetPeak() {
  peakBytes.store(liveBytes.load(std::memory_order_relaxed),
                  std::memory_order_relaxed);
}

} // namespace plan::rt::host_memory
