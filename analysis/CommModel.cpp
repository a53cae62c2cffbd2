//===- CommModel.cpp - What a collective sends and how long it takes ------===//
//
// docs/report.md ("Communication"). The ring is what NCCL and Gloo use for
// large buffers, and the one whose per-rank volume is the familiar
// (n-1)/n: every rank sends and receives the same amount, so the busiest
// link's time is the collective's time.
//
//===----------------------------------------------------------------------===//

#include "analysis/CommModel.h"

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

GroupPlacement plan::placeGroup(ClusterAttr cluster, int64_t meshReplicate,
                                int64_t meshShard, sched::Group group) {
  GroupPlacement placement;
  int64_t perNode = std::max<int64_t>(cluster.getGpusPerNode(), 1);
  // The highest rank in rank 0's group decides whether it leaves node 0:
  // shard = ranks [0, S), replicate = {0, S, 2S, ...}, world = all.
  int64_t lastRank = 0;
  switch (group) {
  case sched::Group::Shard:
    placement.size = meshShard;
    lastRank = meshShard - 1;
    break;
  case sched::Group::Replicate:
    placement.size = meshReplicate;
    lastRank = (meshReplicate - 1) * meshShard;
    break;
  case sched::Group::World:
    placement.size = meshReplicate * meshShard;
    lastRank = placement.size - 1;
    break;
  }
  placement.intraNode = lastRank < perNode;
  DeviceAttr device = cluster.getDevice();
  if (placement.intraNode) {
    double nvlink = device.getNvlinkBandwidth().value;
    placement.bandwidth = nvlink > 0 ? nvlink : device.getPcieBandwidth().value;
    placement.stepLatency = device.getLinkLatency().value;
  } else {
    placement.bandwidth = cluster.getInterNodeBandwidth().value;
    placement.stepLatency = kInterNodeStepLatency;
  }
  return placement;
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
