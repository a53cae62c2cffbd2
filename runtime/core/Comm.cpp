//===- Comm.cpp - Gloo process groups of the mesh -------------------------===//

#include "Comm.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

namespace plan::rt {
namespace {

class GlooComm : public Comm {
public:
  GlooComm(const c10::intrusive_ptr<c10d::Store> &store, int rank, int world,
           const Schedule &schedule, std::chrono::milliseconds timeout)
      : Comm(rank, schedule.replicate, schedule.shard, schedule.tensor,
             schedule.pipeline) {
    auto options = makeOptions(timeout);
    // Each group gets its own store namespace so that the groups'
    // rendezvous keys never collide; the name says which one it is.
    auto group = [&](const std::string &name, int index,
                     int size) -> c10::intrusive_ptr<c10d::Backend> {
      return c10::make_intrusive<c10d::ProcessGroupGloo>(
          c10::make_intrusive<c10d::PrefixStore>(name, store), index, size,
          options);
    };
    everyoneGroup_ = group("world", rank, world);
    auto groupOf = [&](GroupAxis axis, const char *name) {
      return group(name + std::string("/") + std::to_string(groupColor(axis)),
                   groupRank(axis), groupSize(axis));
    };
    worldGroup_ = tensorSize_ * pipelineSize_ == 1
                      ? everyoneGroup_
                      : groupOf(GroupAxis::World, "data");
    shardGroup_ = groupOf(GroupAxis::Shard, "shard");
    replicateGroup_ = groupOf(GroupAxis::Replicate, "replicate");
    // No collective runs on a tensor or pipeline group of one (Executor.cpp).
    if (tensorSize_ > 1)
      tensorGroup_ = groupOf(GroupAxis::Tensor, "tensor");
    if (pipelineSize_ > 1) {
      pipelineGroup_ = groupOf(GroupAxis::Pipeline, "pipeline");
      towardsNext_ = groupOf(GroupAxis::Pipeline, "pipeline-next");
      towardsPrev_ = groupOf(GroupAxis::Pipeline, "pipeline-prev");
      if (inEmbeddingGroup())
        embeddingGroup_ = groupOf(GroupAxis::Embedding, "embedding");
    }
    // Gloo's connectFullMesh can return on one side of a pair while the
    // other is still reading its handshake: a rank that then exited at once
    // (an error found on opening a checkpoint, say) failed its peer's
    // connect with "Connection closed by peer". A barrier over the world
    // group returns only once every rank has connected every group.
    everyoneGroup_->barrier()->wait();
  }

  void awaitRelease(const c10::intrusive_ptr<c10d::Work> &work) override {
    // The caller's reference is the last once ProcessGroupGloo's worker has
    // reset its own (runLoop, after finishWorkGloo completed the work).
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (work.use_count() > 1 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
  }

private:
  static c10::intrusive_ptr<c10d::ProcessGroupGloo::Options>
  makeOptions(std::chrono::milliseconds timeout) {
    using Gloo = c10d::ProcessGroupGloo;
    try {
      // The default device binds to this host's resolved address (or
      // GLOO_SOCKET_IFNAME), which is what multi-node runs need.
      return Gloo::Options::create_default(timeout);
    } catch (const std::exception &) {
      // Hosts whose name does not resolve: loopback is all one machine has.
      auto options = Gloo::Options::create(timeout);
      options->devices.push_back(Gloo::createDeviceForHostname("127.0.0.1"));
      return options;
    }
  }
};

} // namespace

c10d::Backend &Comm::group(GroupAxis axis) {
  switch (axis) {
  case GroupAxis::Shard:
    return *shardGroup_;
  case GroupAxis::Replicate:
    return *replicateGroup_;
  case GroupAxis::Tensor:
    if (!tensorGroup_)
      throw std::runtime_error("the mesh has no tensor axis: no collective "
                               "runs on its tensor group");
    return *tensorGroup_;
  case GroupAxis::Pipeline:
    if (!pipelineGroup_)
      throw std::runtime_error("the mesh has no pipeline axis: no "
                               "collective runs on its pipeline group");
    return *pipelineGroup_;
  case GroupAxis::Embedding:
    if (!embeddingGroup_)
      throw std::runtime_error(
          "pipeline stage " + std::to_string(groupRank(GroupAxis::Pipeline)) +
          " is not the first or the last: it is in no embedding group");
    return *embeddingGroup_;
  case GroupAxis::World:
    break;
  }
  return *worldGroup_;
}

c10d::Backend &Comm::everyone() { return *everyoneGroup_; }

c10d::Backend &Comm::channel(Peer direction) {
  const auto &backend = direction == Peer::Next ? towardsNext_ : towardsPrev_;
  if (!backend)
    throw std::runtime_error("the mesh has no pipeline axis: nothing is sent "
                             "between stages");
  return *backend;
}

int Comm::groupRank(GroupAxis axis) const {
  const int inStage = rank_ % stageSize();
  const int dataRank = inStage / tensorSize_;
  switch (axis) {
  case GroupAxis::Shard:
    return dataRank % shardSize_;
  case GroupAxis::Replicate:
    return dataRank / shardSize_;
  case GroupAxis::Tensor:
    return rank_ % tensorSize_;
  case GroupAxis::Pipeline:
    return rank_ / stageSize();
  case GroupAxis::Embedding:
    return rank_ / stageSize() == 0 ? 0 : 1;
  case GroupAxis::World:
    break;
  }
  return dataRank;
}

int Comm::groupSize(GroupAxis axis) const {
  switch (axis) {
  case GroupAxis::Shard:
    return shardSize_;
  case GroupAxis::Replicate:
    return replicateSize_;
  case GroupAxis::Tensor:
    return tensorSize_;
  case GroupAxis::Pipeline:
    return pipelineSize_;
  case GroupAxis::Embedding:
    return pipelineSize_ > 1 ? 2 : 1;
  case GroupAxis::World:
    break;
  }
  return shardSize_ * replicateSize_;
}

int Comm::groupColor(GroupAxis axis) const {
  const int stage = groupRank(GroupAxis::Pipeline);
  const int t = groupRank(GroupAxis::Tensor);
  switch (axis) {
  case GroupAxis::Shard:
    return (stage * replicateSize_ + groupRank(GroupAxis::Replicate)) *
               tensorSize_ +
           t;
  case GroupAxis::Replicate:
    return (stage * shardSize_ + groupRank(GroupAxis::Shard)) * tensorSize_ + t;
  case GroupAxis::Tensor:
    return rank_ / tensorSize_;
  case GroupAxis::Pipeline:
    return rank_ % stageSize();
  case GroupAxis::Embedding:
    return inEmbeddingGroup() ? rank_ % stageSize() : -1;
  case GroupAxis::World:
    break;
  }
  return stage * tensorSize_ + t;
}

void Comm::checkMesh(int rank, int world, const Schedule &schedule) {
  const std::string mesh = meshString(schedule);
  if (schedule.pipeline < 1 || schedule.replicate < 1 || schedule.shard < 1 ||
      schedule.tensor < 1)
    throw std::runtime_error("schedule has an invalid mesh (" + mesh + ")");
  if (world != schedule.worldSize())
    throw std::runtime_error(
        "schedule is for " + std::to_string(schedule.worldSize()) + " ranks (" +
        mesh + "), but " + std::to_string(world) + " were launched");
  if (rank < 0 || rank >= world)
    throw std::runtime_error("rank " + std::to_string(rank) +
                             " is outside the world of " +
                             std::to_string(world) + " ranks");
}

std::unique_ptr<Comm> Comm::createGloo(c10::intrusive_ptr<c10d::Store> store,
                                       int rank, int world,
                                       const Schedule &schedule,
                                       std::chrono::milliseconds timeout) {
  checkMesh(rank, world, schedule);
  try {
    return std::make_unique<GlooComm>(store, rank, world, schedule, timeout);
  } catch (const std::exception &e) {
    std::string what = e.what();
    what = what.substr(0, what.find('\n'));
    throw std::runtime_error(
        "rank " + std::to_string(rank) +
        ": could not connect the Gloo process groups: " + what);
  }
}

} // namespace plan::rt
