//===- CommModel.h - Bytes and seconds of a collective ----------*- C++ -*-===//
//
// The communication half of `planc --report` (docs/report.md): the bytes a
// rank sends for one collective under the ring algorithm, where each of the
// mesh's process groups lies (inside one node or across nodes, as ranks are
// laid out), and the time a collective takes on that link.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_ANALYSIS_COMMMODEL_H
#define PLAN_ANALYSIS_COMMMODEL_H

#include "analysis/Efficiencies.h"
#include "dialects/plan/PlanDialect.h"
#include "dialects/sched/SchedDialect.h"

#include "llvm/ADT/StringRef.h"

#include <array>
#include <cstdint>

namespace plan {

enum class CollectiveKind { AllGather, ReduceScatter, AllReduce, Broadcast };
constexpr int kNumCollectiveKinds = 4;
// sched::Group: shard, replicate, world, tensor, pipeline.
constexpr int kNumGroups = sched::getMaxEnumValForGroup() + 1;

/// "all_gather", "reduce_scatter", "all_reduce", "broadcast".
llvm::StringRef collectiveKindName(CollectiveKind kind);

/// Bytes one rank sends for a collective on `n` ranks whose full buffer is
/// `fullBytes` (the gathered output, the scattered input, the reduced or
/// broadcast buffer), under the ring algorithm: all_gather and
/// reduce_scatter (n-1)/n of it, all_reduce 2(n-1)/n, broadcast the whole
/// buffer (every rank of the chain but the last forwards it). 0 for n <= 1.
uint64_t ringSendBytes(CollectiveKind kind, uint64_t fullBytes, int64_t n);

/// Sequential steps of the ring (each pays one link latency): n-1 for
/// all_gather, reduce_scatter and broadcast, 2(n-1) for all_reduce.
int64_t ringSteps(CollectiveKind kind, int64_t n);

/// Where rank 0's group of one mesh axis lies. Ranks are laid out
/// `rank = (replicate_index * S + shard_index) * T + tensor_index` and fill
/// nodes in order, so a group is inside one node when all its members
/// share rank 0's node.
struct GroupPlacement {
  int64_t size = 1;
  bool intraNode = true;
  /// Bytes/s per rank per direction on the slowest link the ring crosses:
  /// NVLink (or PCIe without it) inside a node, the NIC share across nodes.
  double bandwidth = 0;
  /// Seconds per ring step.
  double stepLatency = 0;
};

GroupPlacement placeGroup(ClusterAttr cluster, int64_t meshReplicate,
                          int64_t meshShard, int64_t meshTensor,
                          sched::Group group, int64_t meshPipeline = 1);

/// placeGroup for every group of `program`'s mesh (index: sched::Group).
std::array<GroupPlacement, kNumGroups> placeGroups(sched::ProgramOp program);

/// The links of a cluster as the placement reads them (from a ClusterAttr,
/// or from the frontend's ClusterSpec before there is IR).
struct ClusterLinks {
  int64_t gpusPerNode = 1;
  double nvlinkBandwidth = 0; // 0: no NVLink
  double pcieBandwidth = 0;
  double intraNodeStepLatency = 0;
  double interNodeBandwidth = 0;
  /// What two ranks of one node talk over: NVLink, or PCIe without it.
  double intraNodeBandwidth() const {
    return nvlinkBandwidth > 0 ? nvlinkBandwidth : pcieBandwidth;
  }
};

/// Where a ring of `size` ranks lies that holds rank 0 and whose highest
/// rank is `lastRank`: inside node 0 when `lastRank < gpusPerNode`.
GroupPlacement placeRing(const ClusterLinks &links, int64_t size,
                         int64_t lastRank);

/// Per ring step across nodes (seconds); inside a node it is the device's
/// `link_latency`.
constexpr double kInterNodeStepLatency = 10e-6;

/// Seconds one collective takes on `placement`: its ring steps' latency plus
/// what this rank sends at the achievable bandwidth; 0 on one rank.
double collectiveSeconds(CollectiveKind kind, uint64_t fullBytes,
                         const GroupPlacement &placement);

} // namespace plan

#endif // PLAN_ANALYSIS_COMMMODEL_H
