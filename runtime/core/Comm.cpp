//===- Comm.cpp - Gloo process groups of the mesh -------------------------===//

#include "Comm.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <stdexcept>
#include <string>

namespace plan::rt {
namespace {

class GlooComm : public Comm {
public:
  GlooComm(const c10::intrusive_ptr<c10d::Store> &store, int rank, int world,
           const Schedule &schedule, std::chrono::milliseconds timeout)
      : Comm(rank, schedule.replicate, schedule.shard) {
    auto options = makeOptions(timeout);
    // Each axis gets its own store namespace so that the groups' rendezvous
    // keys never collide; the group name says which replica / shard it is.
    worldGroup_ = c10::make_intrusive<c10d::ProcessGroupGloo>(
        c10::make_intrusive<c10d::PrefixStore>("world", store), rank, world,
        options);
    int replicaIndex = rank / shardSize_, shardIndex = rank % shardSize_;
    shardGroup_ = c10::make_intrusive<c10d::ProcessGroupGloo>(
        c10::make_intrusive<c10d::PrefixStore>(
            "shard/" + std::to_string(replicaIndex), store),
        shardIndex, shardSize_, options);
    replicateGroup_ = c10::make_intrusive<c10d::ProcessGroupGloo>(
        c10::make_intrusive<c10d::PrefixStore>(
            "replicate/" + std::to_string(shardIndex), store),
        replicaIndex, replicateSize_, options);
    // Gloo's connectFullMesh can return on one side of a pair while the
    // other is still reading its handshake: a rank that then exited at once
    // (an error found on opening a checkpoint, say) failed its peer's
    // connect with "Connection closed by peer". A barrier over the world
    // group returns only once every rank has connected every group.
    worldGroup_->barrier()->wait();
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
  case GroupAxis::World:
  case GroupAxis::Tensor: // not in a valid schedule (its mesh has no such
                          // axis)
    break;
  }
  return *worldGroup_;
}

int Comm::groupRank(GroupAxis axis) const {
  switch (axis) {
  case GroupAxis::Shard:
    return rank_ % shardSize_;
  case GroupAxis::Replicate:
    return rank_ / shardSize_;
  case GroupAxis::World:
  case GroupAxis::Tensor: // not in a valid schedule
    return rank_;
  }
  return rank_;
}

int Comm::groupSize(GroupAxis axis) const {
  switch (axis) {
  case GroupAxis::Shard:
    return shardSize_;
  case GroupAxis::Replicate:
    return replicateSize_;
  case GroupAxis::World:
  case GroupAxis::Tensor: // not in a valid schedule
    return world_;
  }
  return world_;
}

void Comm::checkMesh(int rank, int world, const Schedule &schedule) {
  if (schedule.replicate < 1 || schedule.shard < 1)
    throw std::runtime_error("schedule has an invalid mesh (" +
                             std::to_string(schedule.replicate) + "x" +
                             std::to_string(schedule.shard) + ")");
  if (world != schedule.worldSize())
    throw std::runtime_error("schedule is for " +
                             std::to_string(schedule.worldSize()) + " ranks (" +
                             std::to_string(schedule.replicate) + "x" +
                             std::to_string(schedule.shard) + "), but " +
                             std::to_string(world) + " were launched");
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
