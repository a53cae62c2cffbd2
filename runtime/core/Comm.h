//===- Comm.h - Process groups of the mesh ----------------------*- C++ -*-===//
//
// The schedule names collectives by mesh axis (shard, replicate, world). The
// mesh is replicate x shard with rank = replicateIndex * shard + shardIndex
// (docs/schedule-format.md). Comm builds one c10d backend per axis this rank
// belongs to (Gloo for the cpu backend; NCCL with issue 7), each with the
// collective timeout, over one rendezvous store.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_RUNTIME_CORE_COMM_H
#define PLAN_RUNTIME_CORE_COMM_H

#include "Schedule.h"

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
  virtual ~Comm() = default;

  int rank() const { return rank_; }
  int world() const { return world_; }
  /// This rank's index and the size of its group along `axis`.
  virtual int groupRank(GroupAxis axis) const = 0;
  virtual int groupSize(GroupAxis axis) const = 0;
  virtual c10d::Backend &group(GroupAxis axis) = 0;

protected:
  int rank_ = 0, world_ = 1;
};

} // namespace plan::rt

#endif // PLAN_RUNTIME_CORE_COMM_H
