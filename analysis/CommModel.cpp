//===- CommModel.cpp - What a collective sends and how long it takes ------===//
//
// docs/report.md ("Communication"). The ring is what NCCL and Gloo use for
// large buffers, and the one whose per-rank volume is the familiar
// (n-1)/n: every rank sends and receives the same amount, so the busiest
// link's time is the collective's time.
//
//===----------------------------------------------------------------------===//

#include "analysis/CommModel.h"

#include "llvm/Support/ErrorHandling.h"

#include <algorithm>

using namespace plan;

llvm::StringRef plan::collectiveKindName(CollectiveKind kind) {
  switch (kind) {
  case CollectiveKind::AllGather:
    return "all_gather";
  case CollectiveKind::ReduceScatter:
    return "reduce_scatter";
  case CollectiveKind::AllReduce:
    return "all_reduce";
  case CollectiveKind::Broadcast:
    return "broadcast";
  }
  return "";
}

uint64_t plan::ringSendBytes(CollectiveKind kind, uint64_t fullBytes,
                             int64_t n) {
  if (n <= 1)
    return 0;
  auto ranks = static_cast<uint64_t>(n);
  switch (kind) {
  case CollectiveKind::AllGather:
  case CollectiveKind::ReduceScatter:
    return fullBytes * (ranks - 1) / ranks;
  case CollectiveKind::AllReduce:
    return 2 * fullBytes * (ranks - 1) / ranks;
  case CollectiveKind::Broadcast:
    return fullBytes;
  }
  return 0;
}

int64_t plan::ringSteps(CollectiveKind kind, int64_t n) {
  if (n <= 1)
    return 0;
  return kind == CollectiveKind::AllReduce ? 2 * (n - 1) : n - 1;
}

GroupPlacement plan::placeRing(const ClusterLinks &links, int64_t size,
                               int64_t lastRank) {
  GroupPlacement placement;
  placement.size = size;
  placement.intraNode = lastRank < std::max<int64_t>(links.gpusPerNode, 1);
  if (placement.intraNode) {
    placement.bandwidth = links.intraNodeBandwidth();
    placement.stepLatency = links.intraNodeStepLatency;
  } else {
    placement.bandwidth = links.interNodeBandwidth;
    placement.stepLatency = kInterNodeStepLatency;
  }
  return placement;
}

GroupPlacement plan::placeGroup(ClusterAttr cluster, int64_t meshReplicate,
                                int64_t meshShard, int64_t meshTensor,
                                sched::Group group, int64_t meshPipeline) {
  DeviceAttr device = cluster.getDevice();
  ClusterLinks links{
      cluster.getGpusPerNode(), device.getNvlinkBandwidth().value,
      device.getPcieBandwidth().value, device.getLinkLatency().value,
      cluster.getInterNodeBandwidth().value};
  // The highest rank in rank 0's group decides whether it leaves node 0:
  // tensor = ranks [0, T), shard = {0, T, ..., (S-1)T}, replicate = {0, ST,
  // 2ST, ...}, world = the data-parallel ranks {0, T, ..., (RS-1)T},
  // pipeline = {0, RST, ..., (P-1)RST}, embedding = {0, (P-1)RST}.
  int64_t t = std::max<int64_t>(meshTensor, 1);
  switch (group) {
  case sched::Group::Shard:
    return placeRing(links, meshShard, (meshShard - 1) * t);
  case sched::Group::Replicate:
    return placeRing(links, meshReplicate, (meshReplicate - 1) * meshShard * t);
  case sched::Group::World:
    return placeRing(links, meshReplicate * meshShard,
                     (meshReplicate * meshShard - 1) * t);
  case sched::Group::Tensor:
    return placeRing(links, t, t - 1);
  case sched::Group::Pipeline:
    return placeRing(links, std::max<int64_t>(meshPipeline, 1),
                     (std::max<int64_t>(meshPipeline, 1) - 1) * meshReplicate *
                         meshShard * t);
  case sched::Group::Embedding:
    // {0, (P-1)RST}: the pipeline group's ends.
    return placeRing(links, meshPipeline > 1 ? 2 : 1,
                     (std::max<int64_t>(meshPipeline, 1) - 1) * meshReplicate *
                         meshShard * t);
  }
  llvm_unreachable("unknown group");
}

std::array<GroupPlacement, kNumGroups>
plan::placeGroups(sched::ProgramOp program) {
  std::array<GroupPlacement, kNumGroups> groups;
  for (int g = 0; g < kNumGroups; ++g)
    groups[g] = placeGroup(program.getCluster(),
                           program.getGroupSize(sched::Group::Replicate),
                           program.getGroupSize(sched::Group::Shard),
                           program.getGroupSize(sched::Group::Tensor),
                           static_cast<sched::Group>(g),
                           program.getGroupSize(sched::Group::Pipeline));
  return groups;
}

double plan::collectiveSeconds(CollectiveKind kind, uint64_t fullBytes,
                               const GroupPlacement &placement) {
  if (placement.size <= 1)
    return 0;
  double seconds = static_cast<double>(ringSteps(kind, placement.size)) *
                   placement.stepLatency;
  if (placement.bandwidth > 0)
    seconds +=
        static_cast<double>(ringSendBytes(kind, fullBytes, placement.size)) /
        (placement.bandwidth * kBandwidthEfficiency);
  return seconds;
}
