//===- Report.h - Memory, communication and time of a schedule --*- C++ -*-===//
//
// `planc --report` (docs/report.md): an analysis of the lowered module (after
// the whole plan-lower pipeline, sched-plan-memory included) that says, per
// rank, what the schedule keeps in memory at its peak and in steady state,
// whether that fits the cluster, what it sends over which links, and how
// long a step should take. It reads the IR only; it changes nothing.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_REPORT_REPORT_H
#define PLAN_REPORT_REPORT_H

#include "analysis/CommModel.h"
#include "analysis/TimeModel.h"
#include "frontend/PlanSpec.h"
#include "runtime/support/Format.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <array>
#include <optional>
#include <string>
#include <vector>

namespace plan {

/// The memory report's categories; each sched.BufferRole belongs to one
/// (docs/report.md, "Memory").
enum class MemoryCategory {
  Params,      // param, gathered, frozen
  Grads,       // grad, unsharded_grad, bucket
  Optimizer,   // master, exp_avg, exp_avg_sq, momentum
  Activations, // activations
  CommBuffers, // staging
  Other,       // scalar, loss_scale (and, at the peak, the arena's slack)
};
constexpr int kNumMemoryCategories = 6;
// From the enums, so that a new role or space is counted.
constexpr int kNumBufferRoles = sched::getMaxEnumValForBufferRole() + 1;
constexpr int kNumMemorySpaces = sched::getMaxEnumValForMemorySpace() + 1;

/// "params", "grads", "optimizer", "activations", "comm_buffers", "other".
llvm::StringRef memoryCategoryName(MemoryCategory category);
MemoryCategory memoryCategoryOf(sched::BufferRole role);

/// What a GPU loses that neither the arena nor the workspace counts: the
/// CUDA context, NCCL's buffers and the caching allocator's fragmentation,
/// per GPU (none on a CPU device).
constexpr uint64_t kGpuRuntimeReserveBytes = 1ull << 30;

/// One memory space of one rank.
struct SpaceMemory {
  bool used = false;
  /// From sched-plan-memory: the arena the runtime allocates, and the end of
  /// its persistent block.
  uint64_t arenaBytes = 0;
  uint64_t persistentBytes = 0;
  /// The most bytes live at one program point, and the first op where it is
  /// reached. arenaBytes - livePeakBytes is what alignment and packing add.
  uint64_t livePeakBytes = 0;
  std::string peakAt;
  /// Bytes live at that point, by category and by role (index: the enum).
  std::array<uint64_t, kNumMemoryCategories> atPeak{};
  std::array<uint64_t, kNumBufferRoles> atPeakByRole{};
  /// Persistent bytes by category: the steady state between steps.
  std::array<uint64_t, kNumMemoryCategories> persistent{};
  /// The bytes live at each op of the program, in order, as the peak
  /// counts them: the memory curve of `--timeline` and `--trace` (one entry
  /// per op, as StepTime::opStart). `peakOp`: the index of `peakAt`.
  std::vector<uint64_t> liveAtOp;
  size_t peakOp = 0;
};

struct MemoryReport {
  /// Index: sched::MemorySpace (device, host, pinned_host).
  std::array<SpaceMemory, kNumMemorySpaces> spaces;
  const SpaceMemory &device() const { return spaces[0]; }
  /// From sched-plan-workspace: what LibTorch allocates outside the arenas
  /// at the step's worst point (device memory on a GPU), and that op.
  uint64_t workspaceBytes = 0;
  std::string workspaceAt;
  /// The predicted peak of the device: its arena plus the workspace.
  uint64_t devicePeakBytes() const {
    return device().arenaBytes + workspaceBytes;
  }
  /// Persistent params + grads + optimizer state in the device arena.
  uint64_t modelStatesBytes = 0;
  uint64_t deviceCapacityBytes = 0;
  uint64_t deviceReserveBytes = 0;
  bool deviceFits = true;
  /// One rank's host arenas (pageable + pinned), and all ranks of a node
  /// (with their device arenas too when the "device" is the CPU).
  uint64_t hostBytesPerRank = 0;
  uint64_t hostBytesPerNode = 0;
  uint64_t hostCapacityBytes = 0;
  bool hostFits = true;
  bool fits() const { return deviceFits && hostFits; }
  /// Mixed precision: what gradients are kept in between backward and the
  /// step ("fp32", or the working type; docs/language.md `grad_dtype`), and
  /// the device peak (arena + workspace) of the plan lowered again with the
  /// other layout, which planc fills in. Empty under fp32 training.
  std::string gradDtype;
  struct GradLayout {
    std::string gradDtype;
    uint64_t devicePeakBytes = 0;
  };
  std::optional<GradLayout> otherGradLayout;
  /// Whether planc chose the layout (the plan leaves grad_dtype open).
  bool gradDtypeChosen = false;
};

struct CommTotals {
  int64_t count = 0;
  uint64_t bytes = 0; // sent by this rank (ring convention)
};

struct CommReport {
  /// A pipeline stage's sends to its neighbours and receives from them
  /// (bytes: this rank's sent, and received).
  CommTotals sends, receives;
  /// Index: CollectiveKind.
  std::array<CommTotals, kNumCollectiveKinds> perKind{};
  /// Index: CollectiveKind, then sched::Group.
  std::array<std::array<CommTotals, kNumGroups>, kNumCollectiveKinds>
      perKindAndGroup{};
  /// Index: sched::Group.
  std::array<GroupPlacement, kNumGroups> groups{};
  uint64_t intraNodeBytes = 0;
  uint64_t interNodeBytes = 0;
  uint64_t totalBytes = 0;
};

/// One pipeline stage's program, analysed alone.
struct StageReport {
  int64_t stage = 0;
  /// Its units, in order, and the first and last of each of its model
  /// chunks (several under interleaving).
  std::vector<std::string> units;
  std::vector<std::pair<std::string, std::string>> chunks;
  MemoryReport memory;
  CommReport comm;
  /// Its step in the pipeline, its stages played together
  /// (simulatePipeline).
  StepTime time;
  /// Its step but for its waits for its neighbours: its own work.
  double aloneSeconds() const {
    return time.stepSeconds - time.pipelineWaitSeconds;
  }
};

struct ScheduleReport {
  std::string planName;
  std::string modelName;
  std::string deviceName;
  int64_t nodes = 1;
  int64_t gpusPerNode = 1;
  int64_t worldSize = 1;
  int64_t meshReplicate = 1;
  int64_t meshShard = 1;
  /// The tensor axis (tensor parallelism), and whether sequence parallelism
  /// divides the norms' tokens over it.
  int64_t meshTensor = 1;
  bool sequenceParallel = false;
  /// The pipeline's stages (the mesh's pipeline axis).
  int64_t meshPipeline = 1;
  /// Trainable parameters of the model (tied ones once), and the elements
  /// of them a tensor rank holds (its slice of each divided weight; equal
  /// without tensor parallelism).
  int64_t params = 0;
  int64_t paramsPerTensorRank = 0;
  /// Frozen ones (a LoRA base; tied ones once), and how they are stored.
  int64_t frozenParams = 0;
  std::string frozenStorage;
  /// The settings the fit check's alternatives change.
  Sharding sharding = Sharding::NoShard;
  Precision precision = Precision::FP32;
  MemorySpace offloadParams = MemorySpace::Device;
  MemorySpace offloadGrads = MemorySpace::Device;
  MemorySpace offloadOptimizer = MemorySpace::Device;
  Checkpointing checkpointing = Checkpointing::None;
  int64_t microBatch = 1;
  int64_t seqLen = 0;
  int64_t gradAccum = 1;

  MemoryReport memory;
  CommReport comm;
  StepTime time;

  /// Pipeline parallelism: the stages, their memory each alone and their
  /// steps played together; the report's `memory` is the stage of the
  /// highest device peak (`worstStage`), its `comm` and `time` those of the
  /// stage with the most work of its own (`slowestStage`), with
  /// `time.stepSeconds` the pipeline's (until its last stage ends). The
  /// bubble is what that adds to the slowest stage's own work
  /// (`bubbleSeconds`, `bubbleFraction` of the step); the textbook's
  /// (p - 1) / (m + p - 1), divided by v under interleaving, is
  /// `formulaBubbleFraction`. Empty without a pipeline.
  std::vector<StageReport> stages;
  PipelineSchedule pipelineSchedule = PipelineSchedule::OneFOneB;
  int64_t virtualStages = 1;
  double bubbleFraction = 0;
  double bubbleSeconds = 0;
  double formulaBubbleFraction = 0;
  size_t worstStage = 0, slowestStage = 0;
};

/// What analyzeSchedule works out besides memory and communication.
struct AnalysisOptions {
  /// The predicted step time: the time model plays each program.
  bool time = true;
  /// With the time, the timeline's named slices (`StepTime::slices`: planc
  /// --trace and --timeline).
  bool timeline = true;
};

/// Analyzes the module's sched.program (one per stage of a pipeline, the
/// stages in parallel on the context's threads). Fails, with an error at the
/// module or the op, when there is no planned program (run the plan-lower
/// pipeline first) or an op has no cost in the time model.
mlir::FailureOr<ScheduleReport> analyzeSchedule(mlir::ModuleOp module,
                                                AnalysisOptions options = {});

/// The readable table (`planc --report`).
void printReportTable(const ScheduleReport &report, llvm::raw_ostream &os);
/// Rank 0's predicted timeline as a Chrome trace (`planc --trace`), with
/// the memory curve of each space as a counter track.
void writeChromeTrace(const ScheduleReport &report, llvm::raw_ostream &os);
/// The same timeline as one SVG picture (`planc --timeline`, Timeline.cpp):
/// a lane per stream with a box per op, the exposed waits marked, and the
/// memory curve under it with the peak and what is live there.
void writeTimelineSvg(const ScheduleReport &report, llvm::raw_ostream &os);

/// "1.234 s", "5.58 ms", "12.0 us" (runtime/support/Format.h).
using rt::support::formatSeconds;

/// The states `offload` keeps on the CPU: "params+optimizer"; "" for none.
std::string offloadedStates(const OffloadSpec &offload);

/// A change to the plan that lowers its memory, as `--set` overrides.
struct FitAlternative {
  std::string what;
  std::vector<std::string> overrides;
};
/// The alternatives that apply to the report's plan: full sharding,
/// offloading each state still on the device, full activation
/// checkpointing, half the micro-batch (twice the accumulation, so the
/// global batch stays), and all of them together.
std::vector<FitAlternative> fitAlternatives(const ScheduleReport &report);

/// An alternative after re-lowering the plan with it; no report when the
/// plan with the overrides was rejected.
struct FitOutcome {
  FitAlternative alternative;
  std::optional<ScheduleReport> report;
};

/// The JSON object (`planc --report=json`); keys in docs/report.md. A plan
/// that does not fit carries its fit alternatives in
/// `memory.alternatives`.
llvm::json::Value reportToJson(const ScheduleReport &report,
                               llvm::ArrayRef<FitOutcome> alternatives = {});

/// The does-not-fit message: what exceeds which capacity, the largest
/// contributors at the device peak, and each alternative's peak.
void printFitFailure(const ScheduleReport &report,
                     llvm::ArrayRef<FitOutcome> outcomes,
                     llvm::raw_ostream &os);

} // namespace plan

#endif // PLAN_REPORT_REPORT_H
