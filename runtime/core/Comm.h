//===- Comm.h - Process groups of the mesh ----------------------*- C++ -*-===//
//
// The schedule names collectives by mesh axis (shard, replicate, world,
// tensor). The mesh is replicate x shard x tensor with rank = (replicateIndex
// * shard + shardIndex) * tensor + tensorIndex (docs/schedule-format.md): a
// tensor group is consecutive ranks (one node's GPUs), and `world` is the
// data-parallel ranks that share this rank's tensor index (every rank when
// tensor is 1). Comm builds one c10d backend per group this rank belongs to
// (Gloo for the cpu backend, NCCL for the cuda one), each with the
// collective timeout, over one rendezvous store, and one over every rank for
// what the ranks agree on outside the schedule (metrics, stop signals).
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_RUNTIME_CORE_COMM_H
#define PLAN_RUNTIME_CORE_COMM_H

#include "Schedule.h"

#include <c10/core/Device.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <memory>

namespace plan::rt {

class Comm {
public:
  /// Collective groups for `rank` of `world` over `store`. Throws
  /// std::runtime_error (one line) when world != schedule.worldSize().
  static std::unique_ptr<Comm> createGloo(c10::intrusive_ptr<c10d::Store> store,
                                          int rank, int world,
                                          const Schedule &schedule,
                                          std::chrono::milliseconds timeout);
  /// NCCL communicators on CUDA `device` (the cuda backend): a communicator
  /// of every rank (its unique id goes through `store`) and the shard,
  /// replicate and (with a tensor axis) tensor and data-parallel groups
  /// split from it. Each group is a c10d::Backend with its
  /// own communication stream that first waits for the current stream; its
  /// ops return a Work whose wait() orders the current stream after them.
  /// CPU tensors (small control all-reduces) are staged through the device
  /// and complete synchronously. A collective that has not finished within
  /// `timeout` of being queued makes a watchdog abort the rank's
  /// communicators; the next op throws (one line). Throws std::runtime_error
  /// (one line) for a bad mesh or rank, when there is no CUDA device, and in
  /// builds without the CUDA backend (PLAN_HAVE_CUDA undefined).
  static std::unique_ptr<Comm> createNccl(c10::intrusive_ptr<c10d::Store> store,
                                          int rank, int world,
                                          const Schedule &schedule,
                                          std::chrono::milliseconds timeout,
                                          at::Device device);
  virtual ~Comm() = default;

  int rank() const { return rank_; }
  int world() const { return world_; }
  /// This rank's index and the size of its group along `axis` (World: the
  /// data-parallel ranks, replicate x shard).
  int groupRank(GroupAxis axis) const;
  int groupSize(GroupAxis axis) const;
  /// The process group along `axis`: the backend's groups set up by its
  /// constructor; a test double overrides it.
  virtual c10d::Backend &group(GroupAxis axis);
  /// Every rank of the mesh (the `world` group when tensor is 1).
  virtual c10d::Backend &everyone();

protected:
  /// Throws std::runtime_error (one line) unless the schedule's mesh is valid,
  /// has `world` ranks, and 0 <= rank < world.
  static void checkMesh(int rank, int world, const Schedule &schedule);
  /// Records this rank's place in a replicate x shard x tensor mesh (checked
  /// first by checkMesh).
  Comm(int rank, int64_t replicate, int64_t shard, int64_t tensor = 1)
      : rank_(rank), world_(static_cast<int>(replicate * shard * tensor)),
        shardSize_(static_cast<int>(shard)),
        replicateSize_(static_cast<int>(replicate)),
        tensorSize_(static_cast<int>(tensor)) {}

  int rank_ = 0, world_ = 1;
  int shardSize_ = 1, replicateSize_ = 1, tensorSize_ = 1;
  // The backend's groups, which group() and everyone() hand out: every
  // rank, the data-parallel ranks (the same backend as everyone's when
  // tensor is 1), and the shard, replicate and tensor groups.
  c10::intrusive_ptr<c10d::Backend> everyoneGroup_, worldGroup_, shardGroup_,
      replicateGroup_, tensorGroup_;
};

} // namespace plan::rt

#endif // PLAN_RUNTIME_CORE_COMM_H
