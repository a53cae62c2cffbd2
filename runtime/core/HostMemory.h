//===- HostMemory.h - Counts the bytes LibTorch allocates on the CPU -*- C++
//-*-===//
//
// LibTorch's CPU allocator keeps no statistics (the CUDA caching allocator
// does). install() puts a counting allocator in front of it, process-wide:
// every CPU tensor allocated afterwards is counted while it lives, from any
// thread. The cpu backend reports its measured peak from these counters, as
// the cuda backend reports the caching allocator's (Executor::runStep).
//
// Memory a tensor does not own (at::from_blob, mmap'ed files) and memory
// allocated before install() are not counted. Each allocation carries a
// 64-byte header holding its size, so the data stays 64-byte aligned and
// its DataPtr stays "simple" (context == data), as LibTorch's own.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_RUNTIME_CORE_HOSTMEMORY_H
#define PLAN_RUNTIME_CORE_HOSTMEMORY_H

#include <cstdint>

namespace plan::rt::host_memory {

/// Installs the counting allocator as LibTorch's CPU allocator; idempotent
/// and thread-safe.
void install();

/// Bytes of counted CPU tensors alive now (the sizes asked for, without
/// headers or the system allocator's overhead).
int64_t current();

/// The most bytes alive at once since install() or the last resetPeak().
int64_t peak();

/// Starts a new peak from what is alive now.
void resetPeak();

} // namespace plan::rt::host_memory

#endif // PLAN_RUNTIME_CORE_HOSTMEMORY_H
