//===- TimeModel.h - Predicted step time of a schedule ----------*- C++ -*-===//
//
// The time half of `planc --report` (docs/report.md, "Time"): rank 0's
// schedule played on five streams (compute, communication inside the node
// and between nodes, host-to-device, device-to-host) with a cost per op from
// the cluster's peak compute and bandwidths, ordered as the schedule orders
// it (issue order, `after` events, `sched.wait`). The result is the
// predicted step time, how much of the communication the compute stream
// waits for, and the timeline itself (`planc --trace`). A pipeline's stages
// are played together, each waiting for its neighbours' transfers
// (simulatePipeline).
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_ANALYSIS_TIMEMODEL_H
#define PLAN_ANALYSIS_TIMEMODEL_H

#include "analysis/CommModel.h"
#include "analysis/Efficiencies.h"
#include "dialects/plan/PlanDialect.h"
#include "dialects/sched/SchedDialect.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <array>
#include <optional>
#include <string>
#include <vector>

namespace plan {

/// Where an op runs. Collectives run on the link their group lies on
/// (CommModel's placement): `Comm` the node's (NVLink, or PCIe), `Network`
/// the NICs between nodes. As the runtime gives each process group a
/// communication stream of its own, a group inside a node (tensor
/// parallelism's) and one across nodes (FSDP's) run at the same time; two
/// groups on the same link share it, which the model plays as one queue.
enum class Stream { Compute, Comm, HostToDevice, DeviceToHost, Network };
constexpr int kNumStreams = 5;

/// "compute", "comm", "h2d", "d2h", "net".
llvm::StringRef streamName(Stream stream);

/// Whether `stream` carries collectives (Comm or Network).
inline bool isCommStream(Stream stream) {
  return stream == Stream::Comm || stream == Stream::Network;
}

/// Bytes/s one CPU core streams through host memory. A GPU rank's host work
/// (element-wise ops and optimizer steps on offloaded state) gets its share
/// of the node's host bandwidth (`cluster.host_bandwidth`, shared by the
/// node's ranks) and at most this per core of its share of the node's cores.
constexpr double kHostBandwidthPerCore = 10e9;
/// A GPU rank's host bandwidth when the plan gives none (IR written without
/// `host_bandwidth`).
constexpr double kHostBandwidthPerRank = 25e9;

/// FLOPs of one unit's forward for one micro-batch.
struct UnitFlops {
  /// What the kernels execute: causal attention (Llama, GPT-2) computes half
  /// of the s x s scores.
  double executed = 0;
  /// What MFU counts: 2 x matmul parameters per token plus the attention
  /// the kernels compute (half of 4 b s^2 h per causal block). The same as
  /// `executed` for one forward; the step's totals differ by recompute.
  double model = 0;
  /// The part of both that multiplies by frozen weights (a LoRA base):
  /// backward computes only the input's gradient for it, one pass, where
  /// the rest takes two.
  double frozen = 0;

  /// Backward's FLOPs: twice the forward's, less the weight gradients a
  /// frozen base does not have.
  double backward() const { return 2 * executed - frozen; }
};

/// Forward FLOPs of `unit` for `microBatch` sequences of `seqLen` tokens:
/// 2 per matmul parameter per token (the embedding's lookups are free; a
/// sequence-classification head's matmuls run once per sequence), plus the
/// attention scores and their weighted sum in a block. Backward is twice
/// the forward, recompute once more.
///
/// On a mesh with a tensor axis (the plan's) a rank multiplies by its slice
/// of each divided weight and computes its heads' attention; with `part`,
/// only what that part of the unit computes with (TensorParallelParts.h):
/// a block's input norm in part 0, attention (its `attn` parameters and the
/// scores) in 1, second norm in 2, MLP (`mlp`) in 3; the head's norm in 0
/// and logits in 1. The parts add up to the unit.
UnitFlops unitForwardFlops(UnitOp unit, ModelAttr model, int64_t microBatch,
                           int64_t seqLen,
                           std::optional<int64_t> part = std::nullopt);

/// One op on one stream of the predicted timeline (seconds from the step's
/// start), named as in the schedule.
struct TimelineSlice {
  std::string name;
  Stream stream = Stream::Compute;
  double start = 0;
  double duration = 0;
  /// A compute-stream wait for another stream: exposed communication or
  /// copy time.
  bool exposed = false;
};

struct StepTime {
  double stepSeconds = 0;
  /// Seconds each stream is busy (index: Stream).
  std::array<double, kNumStreams> busySeconds{};
  /// Seconds the collectives take, on both links.
  double commBusySeconds() const {
    return busySeconds[static_cast<int>(Stream::Comm)] +
           busySeconds[static_cast<int>(Stream::Network)];
  }
  /// Compute-stream time of forward, backward and recompute.
  double computeSeconds = 0;
  /// Compute-stream time of optimizer steps and element-wise ops.
  double memoryBoundSeconds = 0;
  /// Compute-stream time spent waiting for collectives / for copies.
  double exposedCommSeconds = 0;
  double exposedCopySeconds = 0;
  /// Under a pipeline played together (simulatePipeline): compute-stream
  /// time spent waiting for the neighbouring stages' sends, receives and
  /// pipeline collectives: the bubble, and the transfers it does not hide.
  double pipelineWaitSeconds = 0;
  /// The collectives' busy seconds per group (index: sched::Group), and the
  /// compute stream's waits for them: a wait counts for the groups of the
  /// collectives its link runs while it waits.
  std::array<double, kNumGroups> groupBusySeconds{};
  std::array<double, kNumGroups> groupExposedSeconds{};
  /// Per rank per step: model FLOPs (each forward's and backward's once, no
  /// recompute) and executed FLOPs (recompute included).
  double modelFlops = 0;
  double executedFlops = 0;
  /// The device's dense peak for the plan's precision (FLOP/s).
  double peakFlops = 0;
  /// Tokens all ranks train on in one step.
  int64_t tokensPerStep = 0;
  double tokensPerSecond = 0;
  double mfu = 0;
  /// The ops that take time, in the order they start on each stream (empty
  /// when simulated without the timeline).
  std::vector<TimelineSlice> slices;
  /// When the compute stream reaches each op of the program, in order
  /// (seconds from the step's start): where the memory curve of the
  /// timeline (SpaceMemory::liveAtOp) is drawn.
  std::vector<double> opStart;
};

/// Plays rank 0's step. Fails (with an error at the op) on an op it has no
/// cost for, or an event that no earlier op defines. `timeline`: keep the
/// named slices (`StepTime::slices`); without it only the totals, which
/// spares a name per op.
mlir::FailureOr<StepTime> simulateStep(sched::ProgramOp program,
                                       bool timeline = true);

/// Plays a pipeline's programs (`stages`, in stage order) together: each
/// as simulateStep plays it, except that a send and the receive it meets
/// (the k-th on a channel, as sched-verify-pipeline pairs them), and the
/// k-th collective on the pipeline group of every stage, start once every
/// side has issued it and it is ready, so that a stage waits for its
/// neighbours where it would (`StepTime::pipelineWaitSeconds`). Transfers
/// between stages occupy neither stage's link (no queue). One
/// StepTime per stage; fails as simulateStep does, or when the stages
/// stall (a pipeline sched-verify-pipeline rejects).
mlir::FailureOr<std::vector<StepTime>>
simulatePipeline(llvm::ArrayRef<sched::ProgramOp> stages, bool timeline = true);

} // namespace plan

#endif // PLAN_ANALYSIS_TIMEMODEL_H
