//===- Report.cpp - Memory, communication and time of a schedule ----------===//
//
// docs/report.md. Memory comes from the planned allocations of the lowered
// program (the arena sizes sched-plan-memory set, and a walk of the program
// for what is live where the most is); communication from its collectives
// under the ring convention (CommModel.h); time from playing rank 0's
// streams (TimeModel.h).
//
//===----------------------------------------------------------------------===//

#include "report/Report.h"

#include "analysis/PipelineModel.h"
#include "dialects/sched/SchedOpTable.h"
#include "dialects/sched/SlotSpans.h"
#include "passes/Passes.h"

#include "Format.h"

#include "mlir/IR/Threading.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Sequence.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <map>

using namespace mlir;
using namespace plan;
using plan::rt::support::formatBytes;
using plan::rt::support::withThousands;

llvm::StringRef plan::memoryCategoryName(MemoryCategory category) {
  switch (category) {
  case MemoryCategory::Params:
    return "params";
  case MemoryCategory::Grads:
    return "grads";
  case MemoryCategory::Optimizer:
    return "optimizer";
  case MemoryCategory::Activations:
    return "activations";
  case MemoryCategory::CommBuffers:
    return "comm_buffers";
  case MemoryCategory::Other:
    return "other";
  }
  return "";
}

MemoryCategory plan::memoryCategoryOf(sched::BufferRole role) {
  switch (role) {
  // A LoRA run's frozen base is parameters too.
  case sched::BufferRole::Param:
  case sched::BufferRole::Gathered:
  case sched::BufferRole::Frozen:
    return MemoryCategory::Params;
  case sched::BufferRole::Grad:
  case sched::BufferRole::UnshardedGrad:
  case sched::BufferRole::Bucket:
    return MemoryCategory::Grads;
  case sched::BufferRole::Master:
  case sched::BufferRole::ExpAvg:
  case sched::BufferRole::ExpAvgSq:
  case sched::BufferRole::Momentum:
    return MemoryCategory::Optimizer;
  // What a tensor-parallel unit's parts exchange is activations too.
  case sched::BufferRole::Activations:
  case sched::BufferRole::Exchange:
    return MemoryCategory::Activations;
  case sched::BufferRole::Staging:
    return MemoryCategory::CommBuffers;
  case sched::BufferRole::Scalar:
  case sched::BufferRole::LossScale:
    return MemoryCategory::Other;
  }
  return MemoryCategory::Other;
}

namespace {

int spaceIndex(sched::AllocOp alloc) {
  return static_cast<int>(sched::getMemorySpace(alloc.getType()));
}

LogicalResult analyzeMemory(sched::ProgramOp program, PlanOp plan,
                            MemoryReport &memory) {
  auto arenas = program->getAttrOfType<DictionaryAttr>("arena_bytes");
  auto persistents = program->getAttrOfType<DictionaryAttr>("persistent_bytes");
  if (!arenas || !persistents)
    return program.emitError("has no memory plan: the report reads the "
                             "arena_bytes that sched-plan-memory sets");
  auto workspace = program->getAttrOfType<IntegerAttr>("workspace_bytes");
  if (!workspace)
    return program.emitError("has no workspace plan: the report reads the "
                             "workspace_bytes that sched-plan-workspace sets");
  memory.workspaceBytes = workspace.getValue().getZExtValue();
  if (auto at = program->getAttrOfType<StringAttr>("workspace_at"))
    memory.workspaceAt = at.getValue().str();
  for (int space = 0; space < kNumMemorySpaces; ++space) {
    StringRef name =
        sched::stringifyMemorySpace(static_cast<sched::MemorySpace>(space));
    SpaceMemory &usage = memory.spaces[space];
    if (auto bytes = arenas.getAs<IntegerAttr>(name)) {
      usage.used = true;
      usage.arenaBytes = bytes.getValue().getZExtValue();
    }
    if (auto bytes = persistents.getAs<IntegerAttr>(name))
      usage.persistentBytes = bytes.getValue().getZExtValue();
  }

  // Persistent buffers are live at every point; transient ones from their
  // alloc to their free, both included (as the planner counts them); a held
  // buffer wherever a micro-batch holds its slot (sched::findHeldSpans), not
  // from its alloc to its free.
  Block &body = program.getBody().front();
  std::array<std::array<uint64_t, kNumBufferRoles>, kNumMemorySpaces> live{};
  std::array<uint64_t, kNumMemorySpaces> liveTotal{};
  SmallVector<sched::AllocOp> held;
  for (auto alloc : body.getOps<sched::AllocOp>()) {
    if (alloc.getHeld())
      held.push_back(alloc);
    if (!alloc.getPersistent())
      continue;
    int space = spaceIndex(alloc);
    uint64_t bytes = sched::getBufferBytes(alloc.getType());
    live[space][static_cast<int>(alloc.getRole())] += bytes;
    liveTotal[space] += bytes;
    memory.spaces[space]
        .persistent[static_cast<int>(memoryCategoryOf(alloc.getRole()))] +=
        bytes;
  }
  // By sched.tasks, the held buffers each of its step positions takes
  // (before the op) and gives back (after it).
  struct HeldChanges {
    std::multimap<int64_t, sched::AllocOp> takes, gives;
  };
  llvm::DenseMap<Operation *, HeldChanges> heldChanges;
  if (!held.empty())
    for (auto tasks : body.getOps<sched::TasksOp>()) {
      FailureOr<SmallVector<sched::PositionRanges>> spans =
          sched::findHeldSpans(tasks, held);
      if (failed(spans))
        return failure();
      HeldChanges &changes = heldChanges[tasks];
      for (auto [alloc, ranges] : llvm::zip_equal(held, *spans))
        for (auto [first, last] : ranges) {
          changes.takes.insert({first, alloc});
          changes.gives.insert({last, alloc});
        }
    }
  auto change = [&](sched::AllocOp alloc, bool take) {
    int space = spaceIndex(alloc);
    uint64_t bytes = sched::getBufferBytes(alloc.getType());
    uint64_t &role = live[space][static_cast<int>(alloc.getRole())];
    role = take ? role + bytes : role - bytes;
    liveTotal[space] =
        take ? liveTotal[space] + bytes : liveTotal[space] - bytes;
  };
  // Where each space peaks (described once the walk is done).
  std::array<Operation *, kNumMemorySpaces> peakOps{};
  auto record = [&](int space, Operation &op) {
    SpaceMemory &usage = memory.spaces[space];
    if (liveTotal[space] <= usage.livePeakBytes && peakOps[space])
      return;
    usage.livePeakBytes = liveTotal[space];
    peakOps[space] = &op;
    usage.peakOp = usage.liveAtOp.size(); // this op's entry, pushed next
    usage.atPeakByRole = live[space];
  };
  // A sched.repeat's body once per run and a sched.tasks' bodies in the
  // order of its table, as the time model plays them; a slot event names
  // what one run hands a later one and is no op of the step. Positions in
  // a sched.tasks count every op of its runs, findSlotSpans' way.
  Operation *loop = nullptr;
  const HeldChanges *changes = nullptr;
  int64_t position = 0;
  for (sched::StepCursor cursor(program); !cursor.done(); cursor.advance()) {
    Operation &op = *cursor;
    Operation *parent = op.getParentOp();
    Operation *tasks =
        isa<sched::TaskOp>(parent) ? parent->getParentOp() : nullptr;
    if (tasks != loop) {
      loop = tasks;
      position = 0;
      auto it = heldChanges.find(tasks);
      changes = it == heldChanges.end() ? nullptr : &it->second;
    }
    int64_t at = position++;
    if (isa<sched::SlotSignalOp, sched::SlotEventOp>(op))
      continue;
    if (changes)
      for (auto [it, end] = changes->takes.equal_range(at); it != end; ++it)
        change(it->second, /*take=*/true);
    if (auto alloc = dyn_cast<sched::AllocOp>(op);
        alloc && !alloc.getPersistent() && !alloc.getHeld())
      change(alloc, /*take=*/true);
    for (int space = 0; space < kNumMemorySpaces; ++space)
      if (memory.spaces[space].used) {
        record(space, op);
        memory.spaces[space].liveAtOp.push_back(liveTotal[space]);
      }
    if (changes)
      for (auto [it, end] = changes->gives.equal_range(at); it != end; ++it)
        change(it->second, /*take=*/false);
    if (auto free = dyn_cast<sched::FreeOp>(op)) {
      sched::AllocOp alloc = free.getBuffer().getDefiningOp<sched::AllocOp>();
      if (!alloc)
        return free.emitError("frees a buffer that is not a sched.alloc");
      if (!alloc.getHeld())
        change(alloc, /*take=*/false);
    }
  }
  for (int space = 0; space < kNumMemorySpaces; ++space)
    if (peakOps[space])
      memory.spaces[space].peakAt = sched::describeOp(peakOps[space]);
  for (SpaceMemory &usage : memory.spaces) {
    for (int role = 0; role < kNumBufferRoles; ++role)
      usage.atPeak[static_cast<int>(memoryCategoryOf(
          static_cast<sched::BufferRole>(role)))] += usage.atPeakByRole[role];
    // The arena is what the runtime allocates: what packing and alignment
    // add on top of the live bytes is counted as "other".
    if (usage.arenaBytes > usage.livePeakBytes)
      usage.atPeak[static_cast<int>(MemoryCategory::Other)] +=
          usage.arenaBytes - usage.livePeakBytes;
  }

  const SpaceMemory &device = memory.device();
  memory.modelStatesBytes =
      device.persistent[static_cast<int>(MemoryCategory::Params)] +
      device.persistent[static_cast<int>(MemoryCategory::Grads)] +
      device.persistent[static_cast<int>(MemoryCategory::Optimizer)];

  ClusterAttr cluster = plan.getCluster();
  bool cpuDevice = cluster.getDevice().isCpu();
  memory.deviceCapacityBytes =
      static_cast<uint64_t>(cluster.getDevice().getMemory());
  memory.deviceReserveBytes = cpuDevice ? 0 : kGpuRuntimeReserveBytes;
  memory.deviceFits = memory.devicePeakBytes() + memory.deviceReserveBytes <=
                      memory.deviceCapacityBytes;
  auto perNode = static_cast<uint64_t>(cluster.getGpusPerNode());
  memory.hostBytesPerRank =
      memory.spaces[static_cast<int>(sched::MemorySpace::Host)].arenaBytes +
      memory.spaces[static_cast<int>(sched::MemorySpace::PinnedHost)]
          .arenaBytes;
  memory.hostBytesPerNode =
      (memory.hostBytesPerRank + (cpuDevice ? memory.devicePeakBytes() : 0)) *
      perNode;
  memory.hostCapacityBytes = static_cast<uint64_t>(cluster.getHostMemory());
  memory.hostFits = memory.hostBytesPerNode <= memory.hostCapacityBytes;
  return success();
}

void analyzeComm(sched::ProgramOp program, CommReport &comm) {
  comm.groups = placeGroups(program);
  auto add = [&](CollectiveKind kind, Value full, sched::Group group) {
    uint64_t fullBytes =
        sched::getBufferBytes(cast<MemRefType>(full.getType()));
    const GroupPlacement &placement = comm.groups[static_cast<int>(group)];
    uint64_t sent = ringSendBytes(kind, fullBytes, placement.size);
    for (CommTotals *totals : {&comm.perKind[static_cast<int>(kind)],
                               &comm.perKindAndGroup[static_cast<int>(
                                   kind)][static_cast<int>(group)]}) {
      ++totals->count;
      totals->bytes += sent;
    }
    (placement.intraNode ? comm.intraNodeBytes : comm.interNodeBytes) += sent;
    comm.totalBytes += sent;
  };
  auto pointToPoint = [&](CommTotals &totals, Value buffer, bool sent) {
    uint64_t bytes = sched::getBufferBytes(cast<MemRefType>(buffer.getType()));
    ++totals.count;
    totals.bytes += bytes;
    if (!sent)
      return;
    const GroupPlacement &placement =
        comm.groups[static_cast<int>(sched::Group::Pipeline)];
    (placement.intraNode ? comm.intraNodeBytes : comm.interNodeBytes) += bytes;
    comm.totalBytes += bytes;
  };
  for (sched::StepCursor cursor(program); !cursor.done(); cursor.advance()) {
    Operation &op = *cursor;
    if (auto send = dyn_cast<sched::SendOp>(op))
      pointToPoint(comm.sends, send.getBuffer(), /*sent=*/true);
    else if (auto recv = dyn_cast<sched::RecvOp>(op))
      pointToPoint(comm.receives, recv.getBuffer(), /*sent=*/false);
    else if (auto gather = dyn_cast<sched::AllGatherOp>(op))
      add(CollectiveKind::AllGather, gather.getDst(), gather.getGroup());
    else if (auto scatter = dyn_cast<sched::ReduceScatterOp>(op))
      add(CollectiveKind::ReduceScatter, scatter.getSrc(), scatter.getGroup());
    else if (auto reduce = dyn_cast<sched::AllReduceOp>(op))
      add(CollectiveKind::AllReduce, reduce.getBuffer(), reduce.getGroup());
    else if (auto broadcast = dyn_cast<sched::BroadcastOp>(op))
      add(CollectiveKind::Broadcast, broadcast.getBuffer(),
          broadcast.getGroup());
  }
}

} // namespace

FailureOr<ScheduleReport> plan::analyzeSchedule(ModuleOp module,
                                                AnalysisOptions options) {
  SmallVector<sched::ProgramOp> programs(module.getOps<sched::ProgramOp>());
  if (programs.empty())
    return module.emitError("the report needs a sched.program (run the "
                            "plan-lower pipeline first)");
  sched::ProgramOp program = programs.front();
  PlanOp plan = program.getPlanOp();
  if (!plan)
    return program.emitError("the report needs the program's plan.plan");
  int64_t stages = plan.getPipelineRanks();
  if (static_cast<int64_t>(programs.size()) != stages)
    return module.emitError("the report needs one sched.program per "
                            "pipeline stage of plan '")
           << plan.getSymName() << "' (" << stages << "), found "
           << programs.size();
  auto byStage = [](sched::ProgramOp a, sched::ProgramOp b) {
    return a.getStage().value_or(0) < b.getStage().value_or(0);
  };
  llvm::stable_sort(programs, byStage);

  ScheduleReport report;
  ModelAttr model = plan.getModel();
  ClusterAttr cluster = plan.getCluster();
  TrainAttr train = plan.getTrain();
  ParallelAttr parallel = plan.getParallel();
  report.planName = plan.getSymName().str();
  report.modelName = model.getPreset().empty()
                         ? stringifyModelFamily(model.getFamily()).str()
                         : model.getPreset().str();
  report.deviceName = cluster.getDevice().getName().str();
  report.nodes = cluster.getNodes();
  report.gpusPerNode = cluster.getGpusPerNode();
  report.worldSize = cluster.getWorldSize();
  report.meshReplicate = program.getGroupSize(sched::Group::Replicate);
  report.meshShard = program.getGroupSize(sched::Group::Shard);
  report.meshTensor = program.getGroupSize(sched::Group::Tensor);
  report.meshPipeline = stages;
  report.sequenceParallel = parallel.getSequenceParallel();
  for (UnitOp unit : plan.getBody().front().getOps<UnitOp>()) {
    report.paramsPerTensorRank += unit.getStoredNumel();
    report.frozenParams += unit.getFrozenNumel();
    for (auto param : unit.getBody().getOps<ParamOp>())
      if (!param.getTiedTo() && !param.getFrozen())
        report.params += param.getTensorType().getNumElements();
  }
  if (LoraAttr lora = plan.getModel().getLora())
    report.frozenStorage = stringifyBaseStorage(lora.getBase()).str();
  report.sharding = parallel.getSharding();
  report.precision = train.getPrecision();
  if (train.getPrecision() != Precision::FP32)
    report.memory.gradDtype = train.getGradDtype() == GradDType::F32 ? "fp32"
                              : train.getPrecision() == Precision::FP16Mixed
                                  ? "fp16"
                                  : "bf16";
  report.offloadParams = parallel.getOffload().getParams();
  report.offloadGrads = parallel.getOffload().getGrads();
  report.offloadOptimizer = parallel.getOffload().getOptimizer();
  report.checkpointing = train.getActivationCheckpointing();
  report.microBatch = train.getMicroBatch();
  report.seqLen = train.getSeqLen();
  report.gradAccum = train.getGradAccum();

  if (stages == 1) {
    if (failed(analyzeMemory(program, plan, report.memory)))
      return failure();
    analyzeComm(program, report.comm);
    if (!options.time)
      return report;
    FailureOr<StepTime> time = simulateStep(program, options.timeline);
    if (failed(time))
      return failure();
    report.time = std::move(*time);
    return report;
  }

  // A pipeline: each stage's memory and communication, then its stages'
  // steps played together.
  report.pipelineSchedule = parallel.getPipelineSchedule();
  report.virtualStages = parallel.getVirtualStages();
  for (sched::ProgramOp stageProgram : programs) {
    StageReport &stage = report.stages.emplace_back();
    stage.stage = static_cast<int64_t>(stageProgram.getStage().value_or(0));
    bool previousRuns = false;
    for (UnitOp unit : plan.getBody().front().getOps<UnitOp>()) {
      bool runs = stageProgram.runsUnit(unit);
      if (runs) {
        std::string name = unit.getSymName().str();
        if (!previousRuns)
          stage.chunks.push_back({name, name});
        stage.chunks.back().second = name;
        stage.units.push_back(std::move(name));
      }
      previousRuns = runs;
    }
  }
  // The stages only read the IR: each on a thread of its own.
  if (failed(failableParallelForEach(
          module.getContext(), llvm::seq<size_t>(0, programs.size()),
          [&](size_t i) {
            StageReport &stage = report.stages[i];
            if (failed(analyzeMemory(programs[i], plan, stage.memory)))
              return failure();
            analyzeComm(programs[i], stage.comm);
            return success();
          })))
    return failure();
  if (options.time) {
    // The play pairs the stages' transfers as it goes, a stage's
    // sched.tasks run by run in the order of its table.
    FailureOr<std::vector<StepTime>> times =
        simulatePipeline(programs, options.timeline);
    if (failed(times))
      return failure();
    for (auto [stage, time] : llvm::zip_equal(report.stages, *times))
      stage.time = std::move(time);
  }
  for (size_t i = 0; i < report.stages.size(); ++i) {
    const StageReport &s = report.stages[i];
    if (s.memory.devicePeakBytes() >
        report.stages[report.worstStage].memory.devicePeakBytes())
      report.worstStage = i;
    if (s.aloneSeconds() > report.stages[report.slowestStage].aloneSeconds())
      report.slowestStage = i;
  }
  report.memory = report.stages[report.worstStage].memory;
  // Every stage must fit: the report fits when the worst does, and its
  // host holds every stage's ranks.
  for (const StageReport &s : report.stages) {
    report.memory.deviceFits &= s.memory.deviceFits;
    report.memory.hostFits &= s.memory.hostFits;
  }
  report.comm = report.stages[report.slowestStage].comm;
  report.time = report.stages[report.slowestStage].time;
  report.formulaBubbleFraction =
      pipelineBubbleFraction(report.pipelineSchedule, stages,
                             train.getGradAccum(), report.virtualStages);
  // The pipeline's step: until its last stage ends; the bubble, what it
  // adds to the slowest stage's own work.
  StepTime &time = report.time;
  double alone = report.stages[report.slowestStage].aloneSeconds();
  for (const StageReport &s : report.stages)
    time.stepSeconds = std::max(time.stepSeconds, s.time.stepSeconds);
  report.bubbleSeconds = time.stepSeconds - alone;
  report.bubbleFraction =
      time.stepSeconds > 0 ? report.bubbleSeconds / time.stepSeconds : 0;
  // Every stage's ranks compute their own FLOPs in the same step.
  double modelFlops = 0, executedFlops = 0;
  for (const StageReport &s : report.stages) {
    modelFlops += s.time.modelFlops / static_cast<double>(stages);
    executedFlops += s.time.executedFlops / static_cast<double>(stages);
  }
  time.modelFlops = modelFlops;
  time.executedFlops = executedFlops;
  if (time.stepSeconds > 0) {
    time.tokensPerSecond =
        static_cast<double>(time.tokensPerStep) / time.stepSeconds;
    time.mfu = time.peakFlops > 0
                   ? modelFlops / (time.stepSeconds * time.peakFlops)
                   : 0;
  }
  return report;
}

//===----------------------------------------------------------------------===//
// The table
//===----------------------------------------------------------------------===//

std::string plan::offloadedStates(const OffloadSpec &offload) {
  SmallVector<StringRef> offloaded;
  if (offload.params == MemorySpace::Host)
    offloaded.push_back("params");
  if (offload.grads == MemorySpace::Host)
    offloaded.push_back("grads");
  if (offload.optimizer == MemorySpace::Host)
    offloaded.push_back("optimizer");
  return llvm::join(offloaded, "+");
}

namespace {

std::string offloadSummary(const ScheduleReport &r) {
  std::string states = offloadedStates(
      OffloadSpec{r.offloadParams, r.offloadGrads, r.offloadOptimizer});
  if (states.empty())
    return "";
  return ", offload " + states + " to cpu";
}

} // namespace

void plan::printReportTable(const ScheduleReport &r, llvm::raw_ostream &os) {
  const MemoryReport &memory = r.memory;
  const SpaceMemory &device = memory.device();
  std::string tensor =
      r.meshTensor > 1
          ? llvm::formatv(" x {0} tensor{1}", r.meshTensor,
                          r.sequenceParallel ? ", sequence parallel" : "")
                .str()
          : "";
  std::string pipeline =
      r.meshPipeline > 1
          ? llvm::formatv("{0} pipeline x ", r.meshPipeline).str()
          : "";
  os << llvm::formatv("{0}: {1}, {2} rank(s) = {3} node(s) x {4} {5}, mesh "
                      "({12}{6} replicate x {7} shard{8}), {9}, {10}{11}\n",
                      r.planName, r.modelName, r.worldSize, r.nodes,
                      r.gpusPerNode, r.deviceName, r.meshReplicate, r.meshShard,
                      tensor, stringifySharding(r.sharding),
                      stringifyPrecision(r.precision), offloadSummary(r),
                      pipeline);
  os << llvm::formatv("  parameters      {0} trainable",
                      withThousands(r.params));
  if (r.meshTensor > 1)
    os << llvm::formatv(" ({0} on each tensor rank)",
                        withThousands(r.paramsPerTensorRank));
  if (r.frozenParams)
    os << llvm::formatv(", {0} frozen in {1} (LoRA)",
                        withThousands(r.frozenParams), r.frozenStorage);
  os << "\n";
  // The ranks of a tensor group read the same tokens.
  os << llvm::formatv("  tokens/step     {0} = micro_batch {1} x seq_len {2} "
                      "x grad_accum {3} x {4} {5}rank(s); checkpointing {6}\n",
                      withThousands(r.time.tokensPerStep), r.microBatch,
                      r.seqLen, r.gradAccum,
                      r.worldSize / (r.meshTensor * r.meshPipeline),
                      r.meshTensor * r.meshPipeline > 1 ? "data-parallel " : "",
                      stringifyCheckpointing(r.checkpointing));

  if (!r.stages.empty()) {
    os << llvm::formatv(
        "\nPipeline: {0} stages, {1}{2}, {3} micro-batches; bubble {4:P1} "
        "of the step ({5}; the formula's {6:P1})\n",
        r.meshPipeline, stringifyPipelineSchedule(r.pipelineSchedule),
        r.virtualStages > 1
            ? llvm::formatv(" ({0} chunks per stage)", r.virtualStages).str()
            : "",
        r.gradAccum, r.bubbleFraction, formatSeconds(r.bubbleSeconds),
        r.formulaBubbleFraction);
    os << llvm::formatv("  {0,-5} {1,12} {2,-12} {3,12} {4,12}  {5}\n", "stage",
                        "device peak", "", "step alone", "p2p sent", "units");
    for (const StageReport &s : r.stages) {
      std::string units;
      for (const auto &[first, last] : s.chunks) {
        if (!units.empty())
          units += ", ";
        units += first;
        if (last != first) {
          units += "..";
          units += last;
        }
      }
      os << llvm::formatv("  {0,-5} {1,12} {2,-12} {3,12} {4,12}  {5}\n",
                          s.stage, formatBytes(s.memory.devicePeakBytes()),
                          s.memory.deviceFits ? "fits" : "DOES NOT FIT",
                          formatSeconds(s.aloneSeconds()),
                          formatBytes(s.comm.sends.bytes), units);
    }
    os << llvm::formatv("  worst memory: stage {0}; slowest: stage {1}; the "
                        "tables below are theirs\n",
                        r.stages[r.worstStage].stage,
                        r.stages[r.slowestStage].stage);
  }

  os << "\nMemory per rank (device)      at peak   steady state\n";
  for (int c = 0; c < kNumMemoryCategories; ++c)
    os << llvm::formatv("  {0,-22} {1,12} {2,14}\n",
                        memoryCategoryName(static_cast<MemoryCategory>(c)),
                        formatBytes(device.atPeak[c]),
                        formatBytes(device.persistent[c]));
  os << llvm::formatv("  {0,-22} {1,12} {2,14}\n", "total (planned arena)",
                      formatBytes(device.arenaBytes),
                      formatBytes(device.persistentBytes));
  os << llvm::formatv("  live peak {0} at `{1}`; model states {2}\n",
                      formatBytes(device.livePeakBytes), device.peakAt,
                      formatBytes(memory.modelStatesBytes));
  os << llvm::formatv("  workspace {0} outside the arena, most at `{1}`\n",
                      formatBytes(memory.workspaceBytes), memory.workspaceAt);
  if (!memory.gradDtype.empty()) {
    os << llvm::formatv("  gradients kept in {0} until the step, {1}",
                        memory.gradDtype,
                        memory.gradDtypeChosen ? "the layout of lower peak"
                                               : "as the plan says");
    if (const auto &other = memory.otherGradLayout) {
      int64_t delta = static_cast<int64_t>(other->devicePeakBytes) -
                      static_cast<int64_t>(memory.devicePeakBytes());
      os << llvm::formatv(
          "; grad_dtype = {0} would peak at {1} ({2}{3})", other->gradDtype,
          formatBytes(other->devicePeakBytes), delta < 0 ? "-" : "+",
          formatBytes(static_cast<uint64_t>(delta < 0 ? -delta : delta)));
    }
    os << "\n";
  }
  uint64_t need = memory.devicePeakBytes() + memory.deviceReserveBytes;
  os << llvm::formatv("  device: {0} arena + {1} workspace + {2} runtime "
                      "reserve = {3} of {4}: {5}\n",
                      formatBytes(device.arenaBytes),
                      formatBytes(memory.workspaceBytes),
                      formatBytes(memory.deviceReserveBytes), formatBytes(need),
                      formatBytes(memory.deviceCapacityBytes),
                      memory.deviceFits ? "fits" : "DOES NOT FIT");
  const SpaceMemory &host =
      memory.spaces[static_cast<int>(sched::MemorySpace::Host)];
  const SpaceMemory &pinned =
      memory.spaces[static_cast<int>(sched::MemorySpace::PinnedHost)];
  os << llvm::formatv(
      "  host: {0} per rank (pinned {1}, pageable {2}); {3} "
      "per node of {4}: {5}\n",
      formatBytes(memory.hostBytesPerRank), formatBytes(pinned.arenaBytes),
      formatBytes(host.arenaBytes), formatBytes(memory.hostBytesPerNode),
      formatBytes(memory.hostCapacityBytes),
      memory.hostFits ? "fits" : "DOES NOT FIT");
  if (pinned.used || host.used) {
    std::array<uint64_t, kNumMemoryCategories> hostPersistent{};
    for (const SpaceMemory *space : {&host, &pinned})
      for (int c = 0; c < kNumMemoryCategories; ++c)
        hostPersistent[c] += space->persistent[c];
    os << "  host steady state:";
    for (int c = 0; c < kNumMemoryCategories; ++c)
      if (hostPersistent[c])
        os << " " << memoryCategoryName(static_cast<MemoryCategory>(c)) << " "
           << formatBytes(hostPersistent[c]);
    os << "\n";
  }

  const CommReport &comm = r.comm;
  os << "\nCommunication per step, rank 0 (bytes sent, ring)\n";
  os << llvm::formatv("  {0,-15} {1,-10} {2,6} {3,-11} {4,7} {5,12}\n",
                      "collective", "group", "ranks", "link", "count", "bytes");
  bool any = false;
  for (int k = 0; k < kNumCollectiveKinds; ++k)
    for (int g = 0; g < kNumGroups; ++g) {
      const CommTotals &totals = comm.perKindAndGroup[k][g];
      if (!totals.count)
        continue;
      any = true;
      const GroupPlacement &placement = comm.groups[g];
      os << llvm::formatv("  {0,-15} {1,-10} {2,6} {3,-11} {4,7} {5,12}\n",
                          collectiveKindName(static_cast<CollectiveKind>(k)),
                          sched::stringifyGroup(static_cast<sched::Group>(g)),
                          placement.size,
                          placement.intraNode ? "intra-node" : "inter-node",
                          totals.count, formatBytes(totals.bytes));
    }
  if (comm.sends.count || comm.receives.count) {
    any = true;
    const GroupPlacement &placement =
        comm.groups[static_cast<int>(sched::Group::Pipeline)];
    for (auto [name, totals] : {std::pair{"send", &comm.sends},
                                std::pair{"recv (received)", &comm.receives}})
      os << llvm::formatv("  {0,-15} {1,-10} {2,6} {3,-11} {4,7} {5,12}\n",
                          name, "pipeline", 2,
                          placement.intraNode ? "intra-node" : "inter-node",
                          totals->count, formatBytes(totals->bytes));
  }
  if (!any)
    os << "  (none)\n";
  os << llvm::formatv("  total {0} (intra-node {1}, inter-node {2})\n",
                      formatBytes(comm.totalBytes),
                      formatBytes(comm.intraNodeBytes),
                      formatBytes(comm.interNodeBytes));

  const StepTime &time = r.time;
  auto busy = [&](Stream stream) {
    return time.busySeconds[static_cast<int>(stream)];
  };
  os << "\nTime per step, predicted (rank 0)\n";
  os << llvm::formatv(
      "  step            {0}{1}\n", formatSeconds(time.stepSeconds),
      r.stages.empty()
          ? std::string()
          : llvm::formatv(" = the slowest stage's {0} + the "
                          "bubble's {1}",
                          formatSeconds(time.stepSeconds - r.bubbleSeconds),
                          formatSeconds(r.bubbleSeconds))
                .str());
  os << llvm::formatv("  compute         {0} forward/backward/recompute at "
                      "{1:P0} of {2:F1} TFLOP/s, {3} element-wise/optimizer\n",
                      formatSeconds(time.computeSeconds), kComputeEfficiency,
                      time.peakFlops / 1e12,
                      formatSeconds(time.memoryBoundSeconds));
  os << llvm::formatv("  communication   {0} busy, {1} exposed\n",
                      formatSeconds(time.commBusySeconds()),
                      formatSeconds(time.exposedCommSeconds));
  // Per group, where more than one communicates: which traffic the step
  // waits for.
  // The waits for a pipeline's neighbours are its bubble, above.
  if (llvm::count_if(time.groupBusySeconds, [](double s) { return s > 0; }) > 1)
    for (int g = 0; g < kNumGroups; ++g)
      if (time.groupBusySeconds[g] > 0) {
        auto group = static_cast<sched::Group>(g);
        os << llvm::formatv(
            "    {0,-11} {1} busy, {2} ({3} ranks, {4})\n",
            sched::stringifyGroup(group),
            formatSeconds(time.groupBusySeconds[g]),
            sched::isAcrossStages(group) && !r.stages.empty()
                ? std::string("waited for in the bubble")
                : formatSeconds(time.groupExposedSeconds[g]) + " exposed",
            comm.groups[g].size,
            comm.groups[g].intraNode ? "intra-node" : "inter-node");
      }
  os << llvm::formatv("  host copies     {0} h2d, {1} d2h busy, {2} exposed\n",
                      formatSeconds(busy(Stream::HostToDevice)),
                      formatSeconds(busy(Stream::DeviceToHost)),
                      formatSeconds(time.exposedCopySeconds));
  os << llvm::formatv("  throughput      {0:F0} tokens/s, MFU {1:P1}\n",
                      time.tokensPerSecond, time.mfu);
  os << "\nFits: " << (memory.fits() ? "yes" : "NO") << "\n";
}

//===----------------------------------------------------------------------===//
// JSON and trace
//===----------------------------------------------------------------------===//

namespace {

llvm::json::Value bytesValue(uint64_t bytes) {
  return static_cast<int64_t>(bytes);
}

llvm::json::Object
categories(const std::array<uint64_t, kNumMemoryCategories> &bytes) {
  llvm::json::Object object;
  for (int c = 0; c < kNumMemoryCategories; ++c)
    object[memoryCategoryName(static_cast<MemoryCategory>(c))] =
        bytesValue(bytes[c]);
  return object;
}

llvm::json::Object spaceJson(const SpaceMemory &space) {
  llvm::json::Object roles;
  for (int role = 0; role < kNumBufferRoles; ++role)
    if (space.atPeakByRole[role])
      roles[sched::stringifyBufferRole(static_cast<sched::BufferRole>(role))] =
          bytesValue(space.atPeakByRole[role]);
  return llvm::json::Object{
      {"arena_bytes", bytesValue(space.arenaBytes)},
      {"persistent_bytes", bytesValue(space.persistentBytes)},
      {"live_peak_bytes", bytesValue(space.livePeakBytes)},
      {"peak_at", space.peakAt},
      {"at_peak", categories(space.atPeak)},
      {"at_peak_by_role", std::move(roles)},
      {"steady_state", categories(space.persistent)},
  };
}

} // namespace

llvm::json::Value plan::reportToJson(const ScheduleReport &r,
                                     llvm::ArrayRef<FitOutcome> alternatives) {
  const MemoryReport &memory = r.memory;
  const SpaceMemory &device = memory.device();
  llvm::json::Object deviceJson = spaceJson(device);
  deviceJson["workspace_bytes"] = bytesValue(memory.workspaceBytes);
  deviceJson["workspace_at"] = memory.workspaceAt;
  deviceJson["peak_bytes"] = bytesValue(memory.devicePeakBytes());
  deviceJson["model_states_bytes"] = bytesValue(memory.modelStatesBytes);
  deviceJson["capacity_bytes"] = bytesValue(memory.deviceCapacityBytes);
  deviceJson["reserve_bytes"] = bytesValue(memory.deviceReserveBytes);
  deviceJson["fits"] = memory.deviceFits;
  if (!memory.gradDtype.empty()) {
    deviceJson["grad_dtype"] = memory.gradDtype;
    deviceJson["grad_dtype_chosen"] = memory.gradDtypeChosen;
    if (const auto &other = memory.otherGradLayout)
      deviceJson["other_grad_dtype"] = llvm::json::Object{
          {"grad_dtype", other->gradDtype},
          {"peak_bytes", bytesValue(other->devicePeakBytes)}};
  }

  llvm::json::Object hostJson{
      {"peak_bytes", bytesValue(memory.hostBytesPerRank)},
      {"node_bytes", bytesValue(memory.hostBytesPerNode)},
      {"capacity_bytes", bytesValue(memory.hostCapacityBytes)},
      {"fits", memory.hostFits},
      {"pinned",
       spaceJson(
           memory.spaces[static_cast<int>(sched::MemorySpace::PinnedHost)])},
      {"pageable",
       spaceJson(memory.spaces[static_cast<int>(sched::MemorySpace::Host)])},
  };

  const CommReport &comm = r.comm;
  llvm::json::Object perStep;
  for (int k = 0; k < kNumCollectiveKinds; ++k) {
    llvm::json::Object byGroup;
    for (int g = 0; g < kNumGroups; ++g) {
      const CommTotals &totals = comm.perKindAndGroup[k][g];
      if (totals.count)
        byGroup[sched::stringifyGroup(static_cast<sched::Group>(g))] =
            llvm::json::Object{{"count", totals.count},
                               {"bytes", bytesValue(totals.bytes)}};
    }
    perStep[collectiveKindName(static_cast<CollectiveKind>(k))] =
        llvm::json::Object{{"count", comm.perKind[k].count},
                           {"bytes", bytesValue(comm.perKind[k].bytes)},
                           {"by_group", std::move(byGroup)}};
  }
  llvm::json::Object commByGroup;
  for (int g = 0; g < kNumGroups; ++g)
    if (r.time.groupBusySeconds[g] > 0)
      commByGroup[sched::stringifyGroup(static_cast<sched::Group>(g))] =
          llvm::json::Object{{"busy_s", r.time.groupBusySeconds[g]},
                             {"exposed_s", r.time.groupExposedSeconds[g]}};
  llvm::json::Object groups;
  for (int g = 0; g < kNumGroups; ++g) {
    const GroupPlacement &placement = comm.groups[g];
    groups[sched::stringifyGroup(static_cast<sched::Group>(g))] =
        llvm::json::Object{{"size", placement.size},
                           {"intra_node", placement.intraNode},
                           {"bandwidth_bytes_per_s", placement.bandwidth}};
  }

  const StepTime &time = r.time;
  auto busy = [&](Stream stream) {
    return time.busySeconds[static_cast<int>(stream)];
  };
  llvm::json::Array fitJson;
  for (const FitOutcome &outcome : alternatives) {
    llvm::json::Object alternative{
        {"what", outcome.alternative.what},
        {"overrides", llvm::json::Array(outcome.alternative.overrides)},
        {"accepted", outcome.report.has_value()}};
    if (outcome.report) {
      alternative["peak_bytes"] =
          bytesValue(outcome.report->memory.devicePeakBytes());
      alternative["fits"] = outcome.report->memory.fits();
    }
    fitJson.push_back(std::move(alternative));
  }
  llvm::json::Object result{
      {"plan", r.planName},
      {"model", r.modelName},
      {"device", r.deviceName},
      {"world_size", r.worldSize},
      {"nodes", r.nodes},
      {"gpus_per_node", r.gpusPerNode},
      {"mesh", llvm::json::Object{{"replicate", r.meshReplicate},
                                  {"shard", r.meshShard},
                                  {"tensor", r.meshTensor},
                                  {"sequence_parallel", r.sequenceParallel}}},
      {"sharding", stringifySharding(r.sharding)},
      {"precision", stringifyPrecision(r.precision)},
      {"params", r.params},
      {"params_per_tensor_rank", r.paramsPerTensorRank},
      {"frozen_params", r.frozenParams},
      {"memory", llvm::json::Object{{"device", std::move(deviceJson)},
                                    {"host", std::move(hostJson)},
                                    {"fits", memory.fits()},
                                    {"alternatives", std::move(fitJson)}}},
      {"comm",
       llvm::json::Object{{"per_step", std::move(perStep)},
                          {"groups", std::move(groups)},
                          {"intra_node_bytes", bytesValue(comm.intraNodeBytes)},
                          {"inter_node_bytes", bytesValue(comm.interNodeBytes)},
                          {"total_bytes", bytesValue(comm.totalBytes)}}},
      {"time",
       llvm::json::Object{{"step_s", time.stepSeconds},
                          {"compute_s", time.computeSeconds},
                          {"memory_bound_s", time.memoryBoundSeconds},
                          {"comm_busy_s", time.commBusySeconds()},
                          {"exposed_comm_s", time.exposedCommSeconds},
                          {"comm_by_group", std::move(commByGroup)},
                          {"h2d_busy_s", busy(Stream::HostToDevice)},
                          {"d2h_busy_s", busy(Stream::DeviceToHost)},
                          {"exposed_copy_s", time.exposedCopySeconds},
                          {"tokens_per_step", time.tokensPerStep},
                          {"tokens_per_s", time.tokensPerSecond},
                          {"model_flops_per_rank", time.modelFlops},
                          {"executed_flops_per_rank", time.executedFlops},
                          {"peak_flops", time.peakFlops},
                          {"mfu", time.mfu}}},
  };
  if (!r.stages.empty()) {
    llvm::json::Array stages;
    for (const StageReport &s : r.stages)
      stages.push_back(llvm::json::Object{
          {"stage", s.stage},
          {"units", llvm::json::Array(s.units)},
          {"chunks", llvm::json::Array(llvm::map_range(
                         s.chunks,
                         [](const std::pair<std::string, std::string> &chunk) {
                           return llvm::json::Value(
                               llvm::json::Array{chunk.first, chunk.second});
                         }))},
          {"device_peak_bytes", bytesValue(s.memory.devicePeakBytes())},
          {"device_fits", s.memory.deviceFits},
          {"host_peak_bytes", bytesValue(s.memory.hostBytesPerRank)},
          {"step_alone_s", s.aloneSeconds()},
          {"step_s", s.time.stepSeconds},
          {"sent_bytes", bytesValue(s.comm.sends.bytes)},
          {"received_bytes", bytesValue(s.comm.receives.bytes)},
          {"comm_bytes", bytesValue(s.comm.totalBytes)}});
    result["pipeline"] = llvm::json::Object{
        {"stages", std::move(stages)},
        {"schedule", stringifyPipelineSchedule(r.pipelineSchedule)},
        {"virtual_stages", r.virtualStages},
        {"bubble_fraction", r.bubbleFraction},
        {"bubble_s", r.bubbleSeconds},
        {"formula_bubble_fraction", r.formulaBubbleFraction},
        {"worst_memory_stage", r.stages[r.worstStage].stage},
        {"slowest_stage", r.stages[r.slowestStage].stage}};
  }
  if (auto *mesh = result.getObject("mesh"))
    (*mesh)["pipeline"] = r.meshPipeline;
  return result;
}

void plan::writeChromeTrace(const ScheduleReport &r, llvm::raw_ostream &os) {
  llvm::json::Array events;
  // One process per program: rank 0's, or under pipeline parallelism each
  // stage's, on one clock: the stages played together, each waiting for
  // its neighbours where it would.
  auto emit = [&](int pid, const std::string &name, const StepTime &time,
                  const MemoryReport &memory) {
    events.push_back(
        llvm::json::Object{{"name", "process_name"},
                           {"ph", "M"},
                           {"pid", pid},
                           {"args", llvm::json::Object{{"name", name}}}});
    for (int s = 0; s < kNumStreams; ++s)
      events.push_back(llvm::json::Object{
          {"name", "thread_name"},
          {"ph", "M"},
          {"pid", pid},
          {"tid", s},
          {"args",
           llvm::json::Object{{"name", streamName(static_cast<Stream>(s))}}}});
    for (const TimelineSlice &slice : time.slices)
      events.push_back(
          llvm::json::Object{{"name", slice.name},
                             {"ph", "X"},
                             {"pid", pid},
                             {"tid", static_cast<int>(slice.stream)},
                             {"ts", slice.start * 1e6},
                             {"dur", slice.duration * 1e6}});
    // The memory curve: a counter per space, where its live bytes change.
    for (int space = 0; space < kNumMemorySpaces; ++space) {
      const std::vector<uint64_t> &live = memory.spaces[space].liveAtOp;
      if (live.size() != time.opStart.size())
        continue;
      std::string counter =
          (sched::stringifyMemorySpace(static_cast<sched::MemorySpace>(space)) +
           " memory")
              .str();
      for (size_t i = 0; i < live.size(); ++i)
        if (i == 0 || live[i] != live[i - 1])
          events.push_back(llvm::json::Object{
              {"name", counter},
              {"ph", "C"},
              {"pid", pid},
              {"ts", time.opStart[i] * 1e6},
              {"args", llvm::json::Object{{"live_bytes", live[i]}}}});
    }
  };
  if (r.stages.empty())
    emit(0, r.planName + " rank 0", r.time, r.memory);
  for (const StageReport &stage : r.stages)
    emit(static_cast<int>(stage.stage),
         r.planName + " stage " + std::to_string(stage.stage), stage.time,
         stage.memory);
  os << llvm::formatv("{0:2}\n", llvm::json::Value(llvm::json::Object{
                                     {"traceEvents", std::move(events)},
                                     {"displayTimeUnit", "ms"}}));
}

//===----------------------------------------------------------------------===//
// The fit check
//===----------------------------------------------------------------------===//

std::vector<FitAlternative> plan::fitAlternatives(const ScheduleReport &r) {
  std::vector<FitAlternative> alternatives;
  bool sharded = r.sharding == Sharding::ShardGradOp ||
                 r.sharding == Sharding::FullShard ||
                 r.sharding == Sharding::HybridShard;
  if (r.sharding != Sharding::FullShard)
    alternatives.push_back({"shard parameters, gradients and optimizer state "
                            "over all ranks (full_shard, ZeRO-3)",
                            {"parallel.sharding=full_shard"}});
  if (r.offloadOptimizer == MemorySpace::Device)
    alternatives.push_back(
        {"keep the optimizer state and fp32 master weights on the CPU and "
         "step there",
         {"parallel.offload.optimizer=cpu"}});
  if (r.offloadGrads == MemorySpace::Device && sharded)
    alternatives.push_back({"move reduced gradient shards to the CPU",
                            {"parallel.offload.grads=cpu"}});
  if (r.offloadParams == MemorySpace::Device && sharded)
    alternatives.push_back(
        {"keep parameter shards on the CPU, copied in before each gather",
         {"parallel.offload.params=cpu"}});
  if (r.checkpointing == Checkpointing::None)
    alternatives.push_back({"checkpoint every block (recompute in backward)",
                            {"train.activation_checkpointing=full"}});
  if (r.microBatch > 1) {
    if (r.microBatch % 2 == 0)
      alternatives.push_back(
          {"halve the micro-batch, accumulate twice as many (same global "
           "batch)",
           {"train.micro_batch=" + std::to_string(r.microBatch / 2),
            "train.grad_accum=" + std::to_string(r.gradAccum * 2)}});
    else
      alternatives.push_back(
          {"halve the micro-batch (smaller global batch)",
           {"train.micro_batch=" + std::to_string(r.microBatch / 2)}});
  }

  // Everything at once: offloading parameters and gradients needs a
  // sharded strategy, which the first alternative provides.
  FitAlternative all{"all of the above", {}};
  if (r.sharding != Sharding::FullShard)
    all.overrides.push_back("parallel.sharding=full_shard");
  if (r.offloadOptimizer == MemorySpace::Device)
    all.overrides.push_back("parallel.offload.optimizer=cpu");
  if (r.offloadGrads == MemorySpace::Device)
    all.overrides.push_back("parallel.offload.grads=cpu");
  if (r.offloadParams == MemorySpace::Device)
    all.overrides.push_back("parallel.offload.params=cpu");
  if (r.checkpointing == Checkpointing::None)
    all.overrides.push_back("train.activation_checkpointing=full");
  if (r.microBatch > 1) {
    all.overrides.push_back("train.micro_batch=" +
                            std::to_string(r.microBatch / 2));
    if (r.microBatch % 2 == 0)
      all.overrides.push_back("train.grad_accum=" +
                              std::to_string(r.gradAccum * 2));
  }
  if (alternatives.size() > 1)
    alternatives.push_back(std::move(all));
  return alternatives;
}

void plan::printFitFailure(const ScheduleReport &r,
                           llvm::ArrayRef<FitOutcome> outcomes,
                           llvm::raw_ostream &os) {
  const MemoryReport &memory = r.memory;
  const SpaceMemory &device = memory.device();
  if (!memory.deviceFits)
    os << llvm::formatv(
        "planc: error: {0} does not fit: the device arena of {1} + {2} "
        "workspace + {3} runtime reserve exceeds the {4} of one {5}\n",
        r.planName, formatBytes(device.arenaBytes),
        formatBytes(memory.workspaceBytes),
        formatBytes(memory.deviceReserveBytes),
        formatBytes(memory.deviceCapacityBytes), r.deviceName);
  if (!memory.hostFits)
    os << llvm::formatv(
        "planc: error: {0} does not fit: the node's {1} ranks need {2} of "
        "host memory ({3} each), more than its host_memory of {4}\n",
        r.planName, r.gpusPerNode, formatBytes(memory.hostBytesPerNode),
        formatBytes(memory.hostBytesPerNode /
                    static_cast<uint64_t>(std::max<int64_t>(r.gpusPerNode, 1))),
        formatBytes(memory.hostCapacityBytes));

  // Largest contributors at the device peak, by category, with the roles
  // that make them up.
  SmallVector<int> order(kNumMemoryCategories);
  for (int c = 0; c < kNumMemoryCategories; ++c)
    order[c] = c;
  llvm::stable_sort(
      order, [&](int a, int b) { return device.atPeak[a] > device.atPeak[b]; });
  os << llvm::formatv("planc: note: largest at the device peak (at `{0}`):",
                      device.peakAt);
  int listed = 0;
  for (int c : order) {
    if (!device.atPeak[c] || listed == 3)
      break;
    os << (listed++ ? ", " : " ")
       << memoryCategoryName(static_cast<MemoryCategory>(c)) << " "
       << formatBytes(device.atPeak[c]);
    SmallVector<std::string> roles;
    for (int role = 0; role < kNumBufferRoles; ++role)
      if (device.atPeakByRole[role] &&
          static_cast<int>(
              memoryCategoryOf(static_cast<sched::BufferRole>(role))) == c)
        roles.push_back(
            sched::stringifyBufferRole(static_cast<sched::BufferRole>(role))
                .str());
    if (!roles.empty())
      os << " (" << llvm::join(roles, ", ") << ")";
  }
  os << "\n";

  if (outcomes.empty()) {
    os << "planc: note: no alternative applies to this plan\n";
    return;
  }
  os << "planc: note: alternatives (device arena + workspace per rank after "
        "the change):\n";
  for (const FitOutcome &outcome : outcomes) {
    std::string sets;
    for (const std::string &set : outcome.alternative.overrides)
      sets += (sets.empty() ? "--set " : " --set ") + set;
    os << "  " << sets << "\n      " << outcome.alternative.what << ": ";
    if (!outcome.report) {
      os << "not accepted for this plan\n";
      continue;
    }
    const MemoryReport &after = outcome.report->memory;
    os << formatBytes(after.devicePeakBytes());
    if (after.fits())
      os << ", fits\n";
    else if (!after.deviceFits)
      os << ", still does not fit\n";
    else
      os << ", but the host memory does not fit\n";
  }
}
