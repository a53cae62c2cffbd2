//===- Comm.h - Process groups of the mesh ----------------------*- C++ -*-===//
//
// The schedule names collectives by mesh axis (shard, replicate, world,
// tensor, pipeline). The mesh is pipeline x replicate x shard x tensor with
// rank = ((stage * replicate + replicateIndex) * shard + shardIndex) *
// tensor + tensorIndex (docs/schedule-format.md): a tensor group is
// consecutive ranks (one node's GPUs), `world` is the data-parallel ranks of
// this rank's stage that share its tensor index (every rank when tensor and
// pipeline are 1), and a pipeline group the stages of one pipeline. Comm
// builds one c10d backend per group this rank belongs to (Gloo for the cpu
// backend, NCCL for the cuda one), each with the collective timeout, over
// one rendezvous store, and one over every rank for what the ranks agree on
// outside the schedule (metrics, stop signals). A pipeline's sends and
// receives go over two more backends, one per direction, so that each
// direction's transfers pair up in order whatever the other's do.
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
  /// Every rank of the mesh (the `world` group when tensor and pipeline are
  /// 1).
  virtual c10d::Backend &everyone();
  /// The backend that carries a pipeline's data towards `direction`: a send
  /// to the next stage and a receive from the previous one use
  /// channel(Peer::Next). Group ranks are pipeline stages.
  virtual c10d::Backend &channel(Peer direction);
  /// Which group of `axis` this rank is in, numbered over the mesh: the
  /// name (Gloo) or colour (NCCL) of the group each backend connects; -1
  /// for the embedding group of a stage between the first and the last.
  int groupColor(GroupAxis axis) const;
  /// Whether this rank is in an embedding group: its pipeline's first or
  /// last stage, when there is a pipeline.
  bool inEmbeddingGroup() const {
    const int stage = rank_ / stageSize();
    return pipelineSize_ > 1 && (stage == 0 || stage == pipelineSize_ - 1);
  }
  /// Called after `work`'s wait(): returns once the backend's own threads
  /// hold no reference to it. A Gloo work owns the flat tensors of an
  /// all-gather or reduce-scatter, and the worker thread that completes it
  /// drops its references only after that (ProcessGroupGloo::runLoop), so
  /// possibly after wait() has returned; the memory the plan
  /// frees at the wait (sched-plan-workspace) would otherwise outlive it
  /// into the next op by however long that thread is descheduled. Gives up
  /// after a second (the memory is then freed when the thread lets go).
  /// NCCL's works own no staging tensors: nothing to wait for.
  virtual void awaitRelease(const c10::intrusive_ptr<c10d::Work> &) {}

protected:
  /// Throws std::runtime_error (one line) unless the schedule's mesh is valid,
  /// has `world` ranks, and 0 <= rank < world.
  static void checkMesh(int rank, int world, const Schedule &schedule);
  /// Records this rank's place in a pipeline x replicate x shard x tensor
  /// mesh (checked first by checkMesh).
  Comm(int rank, int64_t replicate, int64_t shard, int64_t tensor = 1,
       int64_t pipeline = 1)
      : rank_(rank),
        world_(static_cast<int>(pipeline * replicate * shard * tensor)),
        shardSize_(static_cast<int>(shard)),
        replicateSize_(static_cast<int>(replicate)),
        tensorSize_(static_cast<int>(tensor)),
        pipelineSize_(static_cast<int>(pipeline)) {}

  /// The ranks of one pipeline stage.
  int stageSize() const { return world_ / pipelineSize_; }

  int rank_ = 0, world_ = 1;
  int shardSize_ = 1, replicateSize_ = 1, tensorSize_ = 1, pipelineSize_ = 1;
  // The backend's groups, which group(), everyone() and channel() hand out:
  // every rank, the data-parallel ranks (the same backend as everyone's
  // when tensor and pipeline are 1), the shard, replicate, tensor and
  // pipeline groups, the pipeline's two directions, and its first and last
  // stages' (on those stages).
  c10::intrusive_ptr<c10d::Backend> everyoneGroup_, worldGroup_, shardGroup_,
      replicateGroup_, tensorGroup_, pipelineGroup_, towardsNext_, towardsPrev_,
      embeddingGroup_;
};

} // namespace plan::rt

#endif // PLAN_RUNTIME_CORE_COMM_H
