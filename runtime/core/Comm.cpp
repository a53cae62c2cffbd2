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

/// Returns once the caller's reference to `work` is its last. The worker
/// thread of ProcessGroupGloo that completes a work resets its own reference
/// only after that (runLoop, after finishWorkGloo), so possibly after wait()
/// has returned. Gives up after a second (what the work holds is then freed
/// when that thread lets go).
void awaitLastReference(const c10::intrusive_ptr<c10d::Work> &work) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (work.use_count() > 1 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
}

/// A reduce-scatter as ProcessGroupGloo runs one (an all-reduce of a copy
/// of the source, then this rank's chunk of it copied out at the wait), but
/// with the copy freed by the time wait() returns. ProcessGroupGloo's own
/// work leaves the copy in the all-reduce, which its worker thread may still
/// hold when the wait returns: the memory the plan frees at the wait
/// outlived it into the next ops (CollectivesTest,
/// NothingAllocatedOutlivesTheWait).
class ReduceScatterWork final : public c10d::Work {
public:
  ReduceScatterWork(c10::intrusive_ptr<c10d::Work> allReduce, at::Tensor copy,
                    at::Tensor out, int rank, int size)
      : c10d::Work(rank, c10d::OpType::_REDUCE_SCATTER_BASE),
        allReduce_(std::move(allReduce)), copy_(std::move(copy)),
        out_(std::move(out)), chunk_(rank), chunks_(size) {}

  bool wait(std::chrono::milliseconds timeout) override {
    if (!allReduce_)
      return true;
    allReduce_->wait(timeout);
    awaitLastReference(allReduce_);
    allReduce_.reset();
    out_.copy_(copy_.chunk(chunks_)[chunk_].view(out_.sizes()));
    copy_.reset();
    out_.reset();
    return true;
  }
  bool isCompleted() override { return !allReduce_; }

private:
  c10::intrusive_ptr<c10d::Work> allReduce_;
  at::Tensor copy_, out_;
  int chunk_, chunks_;
};

/// ProcessGroupGloo with the reduce-scatter above.
class GlooGroup final : public c10d::ProcessGroupGloo {
public:
  using c10d::ProcessGroupGloo::ProcessGroupGloo;

  c10::intrusive_ptr<c10d::Work>
  _reduce_scatter_base(at::Tensor &out, at::Tensor &src,
                       const c10d::ReduceScatterOptions &opts) override {
    if (src.numel() != out.numel() * getSize() ||
        src.scalar_type() != out.scalar_type())
      throw std::invalid_argument(
          "reduce-scatter of " + std::to_string(src.numel()) +
          " elements into " + std::to_string(out.numel()) + " on " +
          std::to_string(getSize()) + " ranks, or across element types");
    std::vector<at::Tensor> copy{
        src.clone(at::MemoryFormat::Contiguous).view({-1})};
    c10d::AllreduceOptions allReduce;
    allReduce.reduceOp = opts.reduceOp;
    allReduce.timeout = opts.timeout;
    auto work = allreduce(copy, allReduce);
    return c10::make_intrusive<ReduceScatterWork>(
        std::move(work), std::move(copy.front()), out, getRank(), getSize());
  }
};

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
      return c10::make_intrusive<GlooGroup>(
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
    awaitLastReference(work);
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
