//===- DeviceBackend.h - What the executor asks of the machine --*- C++ -*-===//
//
// The executor runs a schedule's ops in order; where their memory lives, how
// memory is measured and how work on other streams is ordered with the
// compute stream is the device backend's business, as collectives are the
// communicator's (Comm.h). Two backends:
//
//   - cpu (this file's createCpu): everything synchronous on the host; the
//     measured memory is every CPU tensor of the process (HostMemory.h);
//   - cuda (cuda/CudaBackend.cpp): compute on a stream of its own, host
//     <-> device copies on two more, pinned host memory for the pinned_host
//     arena, the CUDA caching allocator's statistics.
//
// docs/runtime.md ("Backends") says how each behaves.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_RUNTIME_CORE_DEVICEBACKEND_H
#define PLAN_RUNTIME_CORE_DEVICEBACKEND_H

#include "Schedule.h"

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <cstdint>
#include <memory>
#include <vector>

namespace plan::rt {

class DeviceBackend {
public:
  /// The host: synchronous, measured by HostMemory's counters.
  static std::unique_ptr<DeviceBackend> createCpu();
  /// CUDA device `index` (-1: the current device). Throws
  /// std::runtime_error (one line) in builds without the CUDA backend.
  static std::unique_ptr<DeviceBackend> createCuda(int index = -1);
  /// The backend for `device` (cpu or cuda).
  static std::unique_ptr<DeviceBackend> create(at::Device device);
  /// Whether this build has the CUDA backend, and the CUDA devices this
  /// process sees (0 without it).
  static bool cudaBuilt();
  static int cudaDeviceCount();

  virtual ~DeviceBackend() = default;

  /// The device compute runs on; tensors of the device arena live there.
  virtual at::Device device() const = 0;

  /// A `bytes`-long byte tensor for the arena of `space`.
  virtual at::Tensor allocateArena(Space space, int64_t bytes) = 0;

  /// Bytes allocated now, and the most allocated since resetPeak(), by the
  /// allocator this backend measures.
  virtual int64_t allocatedBytes() const = 0;
  virtual int64_t peakAllocatedBytes() const = 0;
  virtual void resetPeak() = 0;
  /// Whether that allocator sees the host arenas (else the executor adds
  /// their size to a step's measured peak).
  virtual bool measuresHostArenas() const = 0;

  /// Brackets a step: compute starts after what the caller has queued on
  /// its current stream and runs on the backend's compute stream; at the
  /// end, the caller's stream waits for the step.
  virtual void beginStep() = 0;
  virtual void endStep() = 0;

  /// Whether a copy from `src` to `dst` runs asynchronously (between host
  /// and device memory on the cuda backend); synchronous copies complete
  /// where they are issued.
  virtual bool copiesAsync(const at::Tensor &dst, const at::Tensor &src) const;
  /// Starts an asynchronous copy after everything queued on the compute
  /// stream and after `after` (works streamWaitable accepted); returns its
  /// work. Only for copies copiesAsync accepts.
  virtual c10::intrusive_ptr<c10d::Work>
  copyAsync(at::Tensor dst, at::Tensor src,
            const std::vector<c10::intrusive_ptr<c10d::Work>> &after);
  /// Whether a copy can start after `work` by waiting for it on the copy
  /// stream, without the compute stream waiting first.
  virtual bool streamWaitable(const c10d::Work &work) const;

  /// The compute stream has waited for asynchronous copy `work` that touched
  /// host memory; the host must too before it next touches host memory
  /// (syncHostCopies).
  virtual void waitedForHostCopy(c10::intrusive_ptr<c10d::Work> work);
  virtual void syncHostCopies();
  /// Forgets copies the host has not waited for (a failed step).
  virtual void dropHostCopies();

  /// Waits for everything queued on the backend's streams.
  virtual void synchronize() = 0;
};

} // namespace plan::rt

#endif // PLAN_RUNTIME_CORE_DEVICEBACKEND_H
