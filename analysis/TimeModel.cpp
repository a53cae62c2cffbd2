//===- TimeModel.cpp - Predicted step time of a schedule ------------------===//
//
// docs/report.md ("Time"). Rank 0's program is played once, in program
// order: a synchronous op starts when the compute stream is free; an
// asynchronous op is issued when the compute stream reaches it and starts
// once its stream is free and every event in its `after` list has fired (a
// collective's stream is the link its group lies on: the node's, or the
// network between nodes);
// `sched.wait` holds the compute stream until its event fires. The time the
// compute stream spends held is the exposed communication (or copy) time.
//
// A pipeline's stage programs are played together (simulatePipeline): each
// stage runs as far as it can, and stops at a wait for a transfer between
// stages that has not started; a transfer starts once every side of it has
// issued it (PipelinePlay), which lets the stages stopped on it go on. What
// a stage spends held by such waits is its share of the bubble.
//
//===----------------------------------------------------------------------===//

#include "analysis/TimeModel.h"
#include "analysis/CommModel.h"
#include "dialects/sched/SchedOpTable.h"
#include "dialects/sched/SlotEvents.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <deque>
#include <map>
#include <memory>

using namespace mlir;
using namespace plan;

llvm::StringRef plan::streamName(Stream stream) {
  switch (stream) {
  case Stream::Compute:
    return "compute";
  case Stream::Comm:
    return "comm";
  case Stream::HostToDevice:
    return "h2d";
  case Stream::DeviceToHost:
    return "d2h";
  case Stream::Network:
    return "net";
  }
  return "";
}

/// The part of a tensor-parallel unit of `kind` that computes with
/// parameter `name` (TensorParallelParts.h): a block's input norm (part 0),
/// attention (1), second norm (2) or MLP (3); the head's final norm (0) or
/// logits (1); the embedding's lookup (0).
static int64_t partOf(UnitKind kind, StringRef name) {
  bool norm = name.contains("norm") || name.contains(".ln_");
  if (isHeadKind(kind))
    return norm ? 0 : 1;
  if (!isBlockKind(kind))
    return 0;
  if (name.contains(".mlp."))
    return 3;
  if (name.contains("attn."))
    return 1;
  return name.contains("post_attention") || name.contains(".ln_2.") ? 2 : 0;
}

UnitFlops plan::unitForwardFlops(UnitOp unit, ModelAttr model,
                                 int64_t microBatch, int64_t seqLen,
                                 std::optional<int64_t> part) {
  UnitFlops flops;
  UnitKind kind = unit.getKind();
  if (kind == UnitKind::Embedding)
    return flops;
  auto plan = unit->getParentOfType<PlanOp>();
  int64_t tensor = plan.getTensorRanks();
  // The matmul parameters this rank (and part) multiplies by: its slice of
  // each, a tied one's as its owner divides it; and which of them are frozen
  // (a LoRA base, tied ones included: a LoRA head reads the frozen
  // embedding).
  double params = 0, frozen = 0;
  for (auto param : unit.getBody().getOps<ParamOp>()) {
    if (part && partOf(kind, param.getParamName()) != *part)
      continue;
    ParamOp stored =
        param.getTiedTo() ? plan.lookupTiedTo(param).second : param;
    double numel =
        static_cast<double>(stored ? stored.getLocalNumel(tensor)
                                   : param.getTensorType().getNumElements());
    params += numel;
    if (stored && stored.getFrozen())
      frozen += numel;
  }
  double b = static_cast<double>(microBatch), s = static_cast<double>(seqLen);
  double rows = b * s;
  if (kind == UnitKind::BertHead &&
      model.getBertHead() == BertHead::SequenceClassification)
    rows = b; // the pooler and classifier read the first token only
  flops.model = flops.executed = 2 * params * rows;
  flops.frozen = 2 * frozen * rows;
  if (isBlockKind(kind) && (!part || *part == 1)) {
    // QK^T and AV: 2 FLOPs per multiply-add, s x s per head dimension, over
    // this rank's heads.
    double width = static_cast<double>(model.getHeads() *
                                       (model.getHidden() / model.getHeads())) /
                   static_cast<double>(tensor);
    // Causal attention (Llama, GPT-2): flash attention skips the masked
    // half of the scores, and MFU counts what the kernels do (PaLM's and
    // Megatron's formula counts the full s x s, which puts a causal model's
    // MFU above the efficiency its matmuls run at).
    double attention = 4 * b * s * s * width;
    double run = kind == UnitKind::BertBlock ? attention : attention / 2;
    flops.model += run;
    flops.executed += run;
  }
  return flops;
}

namespace {

uint64_t bufferBytes(Value buffer) {
  return sched::getBufferBytes(cast<MemRefType>(buffer.getType()));
}

bool onDevice(Value buffer) {
  return sched::getMemorySpace(cast<MemRefType>(buffer.getType())) ==
         sched::MemorySpace::Device;
}

/// One element-wise op's traffic: bytes it streams where it runs (`local`)
/// and bytes of operands in the other memory space, which cross the bus.
struct Traffic {
  bool onHost = false;
  double local = 0;
  double crossing = 0;
};

/// `written` decides where the op runs (docs/sched.md: next to the data it
/// writes); each operand's bytes count `passes` times (read, or read and
/// written).
Traffic elementwiseTraffic(Value written,
                           ArrayRef<std::pair<Value, int>> operands) {
  Traffic traffic;
  traffic.onHost = !onDevice(written);
  for (auto [buffer, passes] : operands) {
    double bytes = static_cast<double>(bufferBytes(buffer)) * passes;
    traffic.local += bytes;
    if (onDevice(buffer) == traffic.onHost)
      traffic.crossing += static_cast<double>(bufferBytes(buffer));
  }
  return traffic;
}

/// An op's name on the timeline, made only when the timeline is kept.
using SliceName = llvm::function_ref<std::string()>;

class PipelinePlay;

class StepSimulation {
public:
  /// `play`: the pipeline this program is stage `stage` of, which starts
  /// its transfers between stages (none: they start when issued).
  StepSimulation(sched::ProgramOp program, bool timeline,
                 PipelinePlay *play = nullptr, int64_t stage = 0)
      : program(program), timeline(timeline), play(play), stage(stage) {}
  void attach(PipelinePlay *pipeline) { play = pipeline; }

  /// The program alone, from its first op to its last.
  FailureOr<StepTime> run();

  /// Reads the plan and the cluster; before advance().
  LogicalResult start();
  /// Plays ops until the program ends (true) or its next op waits for a
  /// transfer between stages that has not started (false: the play starts
  /// it once the neighbours reach theirs).
  FailureOr<bool> advance();
  /// Whether the last advance() played an op.
  bool moved() const { return movedLast; }
  /// The step, once advance() returned true.
  StepTime finish();
  /// A transfer between stages that this program issued (`op`, in the run
  /// `iteration` micro-batches on from its body's, 0 outside a loop) runs
  /// from `start` to `end`: its event fires at `end`.
  void transferred(Operation *op, int64_t iteration, double start, double end,
                   std::string name);

private:
  /// An event as the run being played has it: a value of a loop body is
  /// each run's own, told apart by the run's shift (StepCursor::iteration).
  using EventKey = std::pair<Value, int64_t>;
  EventKey keyOf(Value event) const {
    Operation *def = event.getDefiningOp();
    bool inLoop = def && !isa<sched::ProgramOp>(def->getParentOp());
    return {event, inLoop && next ? next->iteration() : 0};
  }
  double secondsOfTraffic(const Traffic &traffic) const {
    double bandwidth = traffic.onHost ? hostBandwidth : deviceBandwidth;
    double seconds = bandwidth > 0 ? traffic.local / bandwidth : 0;
    double pcie = device.getPcieBandwidth().value * kBandwidthEfficiency;
    if (pcie > 0)
      seconds += traffic.crossing / pcie;
    return seconds;
  }
  double secondsOfFlops(double flops) const {
    double rate = time.peakFlops * kComputeEfficiency;
    return rate > 0 ? flops / rate : 0;
  }
  void compute(SliceName name, double seconds, bool isMath) {
    if (seconds <= 0)
      return;
    if (timeline)
      time.slices.push_back({name(), Stream::Compute, now, seconds});
    now += seconds;
    time.busySeconds[static_cast<int>(Stream::Compute)] += seconds;
    (isMath ? time.computeSeconds : time.memoryBoundSeconds) += seconds;
  }
  LogicalResult issue(Operation *op, Stream stream, SliceName name,
                      double seconds, ValueRange after);
  LogicalResult wait(sched::WaitOp wait);
  LogicalResult collective(Operation *op, CollectiveKind kind, Value full,
                           sched::Group group, ValueRange after);
  /// The stream of the link `group` lies on.
  Stream linkOf(sched::Group group) const {
    return groups[static_cast<int>(group)].intraNode ? Stream::Comm
                                                     : Stream::Network;
  }
  /// Issues a collective of `group` on its link's stream.
  LogicalResult onLink(Operation *op, sched::Group group, SliceName name,
                       double seconds, ValueRange after);
  /// A send or receive: one hop to the neighbouring stage on the pipeline
  /// group's links.
  LogicalResult pointToPoint(Operation *op, StringRef what, Value buffer,
                             sched::Peer peer, ValueRange after);
  /// A transfer between stages: issued at once alone, handed to the play
  /// in a pipeline.
  LogicalResult acrossStages(Operation *op, sched::Group group, SliceName name,
                             double seconds, ValueRange after);
  /// The event `event` names in the run being played: a sched.slot_event's
  /// is the one its instance's signal named, in the run that signalled it.
  EventKey resolve(Value event) const {
    EventKey key = keyOf(event);
    auto it = slotEvents.find(key);
    return it == slotEvents.end() ? key : it->second;
  }
  /// Whether `event` is a transfer between stages the play has not started.
  bool pending(Value event) const {
    EventKey key = resolve(event);
    return play && !events.count(key) &&
           sched::isBetweenStages(key.first.getDefiningOp());
  }
  LogicalResult playOp(Operation &op);
  /// Runs one forward (`passes` 1, also recompute) or backward (2) of a
  /// unit on the compute stream; the forward counts its model FLOPs.
  LogicalResult runUnit(Operation *op, StringRef what, SymbolRefAttr unit,
                        int64_t microBatch, int64_t part, int passes,
                        bool countModel);

  sched::ProgramOp program;
  /// Whether to keep the slices (`StepTime::slices`).
  bool timeline;
  PipelinePlay *play;
  int64_t stage;
  /// The next op to play (a sched.repeat's body once per run), and whether
  /// advance() played any.
  std::optional<sched::StepCursor> next;
  bool movedLast = false;
  /// The name of the buffer `buffer` is rooted in, in the run being played.
  std::string bufferName(Value buffer) {
    return runNames(buffer, next ? next->iteration() : 0);
  }
  sched::RunNames runNames;
  /// When the last transfer between stages ends.
  double lastTransferEnd = 0;
  PlanOp plan;
  SymbolTableCollection symbolTables;
  /// Whether units run in tensor-parallel parts (a tensor axis above 1).
  bool inParts = false;
  DeviceAttr device;
  /// Achievable bytes/s of this rank's device memory and of its host work.
  double deviceBandwidth = 0;
  double hostBandwidth = 0;
  std::array<GroupPlacement, kNumGroups> groups;
  StepTime time;
  double now = 0;
  std::array<double, kNumStreams> streamFree{};
  /// When each event fires and its stream; a step's events (every run's
  /// at 256 micro-batches) are many, so what fired each is kept apart, on a
  /// kept timeline only.
  struct Event {
    double end;
    Stream stream;
  };
  /// The collectives, in issue order: when each runs, on which link and
  /// for which group (what a wait on that link waits for).
  struct CommInterval {
    double start, end;
    Stream stream;
    sched::Group group;
  };
  std::vector<CommInterval> commIntervals;
  llvm::DenseMap<EventKey, Event> events;
  llvm::DenseMap<EventKey, std::string> eventNames;
  /// Each slot event instance (family, micro-batch) a run signalled: the
  /// event of that run, which a transfer between stages may fire later.
  sched::SlotEventInstances<EventKey> slotInstances;
  /// What each sched.slot_event of a run played names.
  llvm::DenseMap<EventKey, EventKey> slotEvents;
  /// Plays a sched.slot_signal and a sched.slot_event: what one run hands
  /// to a later one, no op of the step written out (sched-unroll-tasks).
  LogicalResult playSlotEvent(Operation &op);
  /// unitForwardFlops of each (unit, part) met so far: every micro-batch
  /// runs the same ones.
  llvm::DenseMap<std::pair<Operation *, int64_t>, UnitFlops> unitFlops;
};

/// The transfers between a pipeline's stages, paired as
/// sched-verify-pipeline pairs them: the k-th send of a stage towards a
/// neighbour with the k-th receive there, the k-th collective on the
/// pipeline group of every stage, and the k-th on the embedding group of
/// the first and the last stage. A pair (or the collective) runs once each
/// side has issued it and is ready (its `after` events fired): from the
/// later of those times, for the longer of their durations.
class PipelinePlay {
public:
  explicit PipelinePlay(std::vector<StepSimulation *> stages)
      : stages(std::move(stages)), collectives(this->stages.size()),
        embeddingCollectives(2) {}

  /// Stage `stage` issued `op` (a send, a receive or a pipeline
  /// collective), ready at `ready`, taking `seconds`.
  void issued(int64_t stage, Operation *op, int64_t iteration, double ready,
              double seconds, std::string name);

private:
  struct Issued {
    int64_t stage;
    Operation *op;
    int64_t iteration;
    double ready, seconds;
    std::string name;
  };
  int64_t neighbour(int64_t stage, sched::Peer peer) const {
    auto n = static_cast<int64_t>(stages.size());
    return (stage + (peer == sched::Peer::Next ? 1 : n - 1)) % n;
  }
  void run(ArrayRef<Issued *> together);

  std::vector<StepSimulation *> stages;
  /// By (sending stage, direction): its sends and the receives of them.
  std::map<std::pair<int64_t, unsigned>,
           std::pair<std::deque<Issued>, std::deque<Issued>>>
      channels;
  std::vector<std::deque<Issued>> collectives;
  // The first stage's and the last's on the embedding group.
  std::vector<std::deque<Issued>> embeddingCollectives;
};

void PipelinePlay::issued(int64_t stage, Operation *op, int64_t iteration,
                          double ready, double seconds, std::string name) {
  Issued entry{stage, op, iteration, ready, seconds, std::move(name)};
  if (sched::isPipelineCollective(op)) {
    bool embedding = sched::getAsyncInfo(op)->group == sched::Group::Embedding;
    auto &queues = embedding ? embeddingCollectives : collectives;
    queues[embedding ? (stage == 0 ? 0 : 1) : stage].push_back(
        std::move(entry));
    if (llvm::any_of(queues, [](auto &q) { return q.empty(); }))
      return;
    SmallVector<Issued *> all;
    for (auto &q : queues)
      all.push_back(&q.front());
    run(all);
    for (auto &q : queues)
      q.pop_front();
    return;
  }
  std::pair<int64_t, unsigned> key;
  bool send = isa<sched::SendOp>(op);
  if (auto s = dyn_cast<sched::SendOp>(op)) {
    key = {stage, static_cast<unsigned>(s.getPeer())};
  } else {
    // A receive from `prev` is on the channel of the stage before towards
    // `next`, and the other way round.
    sched::Peer from = cast<sched::RecvOp>(op).getPeer();
    sched::Peer towards =
        from == sched::Peer::Prev ? sched::Peer::Next : sched::Peer::Prev;
    key = {neighbour(stage, from), static_cast<unsigned>(towards)};
  }
  auto &[sends, recvs] = channels[key];
  (send ? sends : recvs).push_back(std::move(entry));
  if (sends.empty() || recvs.empty())
    return;
  Issued *pair[] = {&sends.front(), &recvs.front()};
  run(pair);
  sends.pop_front();
  recvs.pop_front();
}

void PipelinePlay::run(ArrayRef<Issued *> together) {
  double start = 0, seconds = 0;
  for (Issued *i : together) {
    start = std::max(start, i->ready);
    seconds = std::max(seconds, i->seconds);
  }
  for (Issued *i : together)
    stages[i->stage]->transferred(i->op, i->iteration, start, start + seconds,
                                  std::move(i->name));
}

LogicalResult StepSimulation::runUnit(Operation *op, StringRef what,
                                      SymbolRefAttr ref, int64_t microBatch,
                                      int64_t part, int passes,
                                      bool countModel) {
  auto unit = symbolTables.lookupSymbolIn<UnitOp>(plan, ref.getLeafReference());
  if (!unit)
    return op->emitError("the time model found no plan.unit ") << ref;
  TrainAttr train = plan.getTrain();
  auto [cached, isNew] = unitFlops.try_emplace({unit, part});
  if (isNew)
    cached->second = unitForwardFlops(
        unit, plan.getModel(), train.getMicroBatch(), train.getSeqLen(),
        inParts ? std::optional<int64_t>(part) : std::nullopt);
  UnitFlops flops = cached->second;
  // A forward and its backward (which skips a frozen base's weight
  // gradients).
  if (countModel)
    time.modelFlops += 3 * flops.model - flops.frozen;
  double executed = passes == 2 ? flops.backward() : flops.executed;
  time.executedFlops += executed;
  double seconds = secondsOfFlops(executed);
  if (unit.getKind() == UnitKind::Embedding && part == 0) {
    // No matmul: a gather of one row per token (forward) or a scatter-add
    // into the gradient (backward), each reading and writing T x hidden
    // elements of the working type.
    double elementBytes = train.getPrecision() == Precision::FP32 ? 4 : 2;
    double bytes = 2.0 * static_cast<double>(train.getMicroBatch()) *
                   static_cast<double>(train.getSeqLen()) *
                   static_cast<double>(plan.getModel().getHidden()) *
                   elementBytes * passes;
    if (deviceBandwidth > 0)
      seconds += bytes / deviceBandwidth;
  }
  compute(
      [&] {
        std::string name =
            llvm::formatv("{0} @{1} mb {2}", what,
                          ref.getLeafReference().getValue(), microBatch);
        if (inParts)
          name += llvm::formatv(" part {0}", part).str();
        return name;
      },
      seconds, true);
  return success();
}

LogicalResult StepSimulation::issue(Operation *op, Stream stream,
                                    SliceName name, double seconds,
                                    ValueRange after) {
  double start = std::max(now, streamFree[static_cast<int>(stream)]);
  for (Value event : after) {
    auto it = events.find(resolve(event));
    if (it == events.end())
      return op->emitError("the time model found no op before it that "
                           "fires an event it follows");
    start = std::max(start, it->second.end);
  }
  double end = start + seconds;
  streamFree[static_cast<int>(stream)] = end;
  time.busySeconds[static_cast<int>(stream)] += seconds;
  EventKey key = keyOf(op->getResult(0));
  events[key] = {end, stream};
  if (timeline) {
    std::string &named = eventNames[key] = name();
    if (seconds > 0)
      time.slices.push_back({named, stream, start, seconds});
  }
  return success();
}

LogicalResult StepSimulation::wait(sched::WaitOp wait) {
  EventKey key = resolve(wait.getEvent());
  auto it = events.find(key);
  if (it == events.end())
    return wait.emitError("the time model found no op before it that fires "
                          "the event it waits for");
  const Event &event = it->second;
  if (event.end <= now)
    return success();
  double stall = event.end - now;
  if (timeline)
    time.slices.push_back({"wait " + eventNames.lookup(key), Stream::Compute,
                           now, stall,
                           /*exposed=*/true});
  // In a pipeline, what a stage waits for its neighbours: the bubble, and
  // the transfers it does not hide.
  if (play && sched::isBetweenStages(key.first.getDefiningOp())) {
    time.pipelineWaitSeconds += stall;
    now = event.end;
    return success();
  }
  bool comm = isCommStream(event.stream);
  (comm ? time.exposedCommSeconds : time.exposedCopySeconds) += stall;
  // The stall is the collectives its link runs meanwhile, each group's
  // share its own (latest first: a link runs them in issue order).
  if (comm)
    for (const CommInterval &c : llvm::reverse(commIntervals)) {
      if (c.stream != event.stream)
        continue;
      if (c.end <= now)
        break;
      double overlap = std::min(c.end, event.end) - std::max(c.start, now);
      if (overlap > 0)
        time.groupExposedSeconds[static_cast<int>(c.group)] += overlap;
    }
  now = event.end;
  return success();
}

LogicalResult StepSimulation::start() {
  plan = program.getPlanOp();
  if (!plan)
    return program.emitError("the time model needs the program's plan.plan");
  // A tensor-parallel unit runs in parts, each its share of the FLOPs.
  inParts = plan.getMeshSize(MeshAxis::Tensor) > 1;
  ClusterAttr cluster = plan.getCluster();
  device = cluster.getDevice();
  // A node's host is shared by its ranks: each gets its part of the memory
  // bandwidth, and streams at most as fast as its part of the cores can. A
  // CPU "device" is that host: its figures are one core's, and a rank
  // computes with its part of the cores (docs/language.md, "Devices").
  double nodeBandwidth = cluster.getHostBandwidth().value;
  double ranksPerNode = static_cast<double>(cluster.getGpusPerNode());
  bool hostKnown = nodeBandwidth > 0 && cluster.getHostCores() > 0;
  double coresPerRank =
      hostKnown ? static_cast<double>(cluster.getHostCores()) / ranksPerNode
                : 1.0;
  auto shareOfHost = [&](double perCore) {
    return std::min(nodeBandwidth * kBandwidthEfficiency / ranksPerNode,
                    coresPerRank * perCore);
  };
  bool cpu = device.isCpu();
  double flopsScale = cpu ? coresPerRank : 1.0;
  if (cpu) {
    double perCore = device.getHbmBandwidth().value * kBandwidthEfficiency;
    deviceBandwidth = hostBandwidth =
        hostKnown ? shareOfHost(perCore) : perCore;
  } else {
    deviceBandwidth = device.getHbmBandwidth().value * kBandwidthEfficiency;
    hostBandwidth =
        hostKnown ? shareOfHost(kHostBandwidthPerCore) : kHostBandwidthPerRank;
  }
  groups = placeGroups(program);

  TrainAttr train = plan.getTrain();
  switch (train.getPrecision()) {
  case Precision::FP32:
    time.peakFlops = device.getFp32Tflops().value * 1e12;
    break;
  case Precision::BF16Mixed:
    time.peakFlops = device.getBf16Tflops().value * 1e12;
    break;
  case Precision::FP16Mixed:
    time.peakFlops = device.getFp16Tflops().value * 1e12;
    break;
  }
  time.peakFlops *= flopsScale;
  // The ranks of a tensor group compute the same tokens: the step's tokens
  // are the data-parallel ranks'.
  time.tokensPerStep = train.getMicroBatch() * train.getSeqLen() *
                       program.getMicroBatches() *
                       program.getGroupSize(sched::Group::World);
  next.emplace(program);
  return success();
}

LogicalResult StepSimulation::collective(Operation *op, CollectiveKind kind,
                                         Value full, sched::Group group,
                                         ValueRange after) {
  const GroupPlacement &placement = groups[static_cast<int>(group)];
  auto name = [&] {
    return llvm::formatv("{0} {1} ({2})", collectiveKindName(kind),
                         bufferName(full), sched::stringifyGroup(group))
        .str();
  };
  double seconds = collectiveSeconds(kind, bufferBytes(full), placement);
  time.groupBusySeconds[static_cast<int>(group)] += seconds;
  if (sched::isAcrossStages(group))
    return acrossStages(op, group, name, seconds, after);
  return onLink(op, group, name, seconds, after);
}

LogicalResult StepSimulation::onLink(Operation *op, sched::Group group,
                                     SliceName name, double seconds,
                                     ValueRange after) {
  Stream stream = linkOf(group);
  if (failed(issue(op, stream, name, seconds, after)))
    return failure();
  double end = events[keyOf(op->getResult(0))].end;
  commIntervals.push_back({end - seconds, end, stream, group});
  return success();
}

LogicalResult StepSimulation::pointToPoint(Operation *op, StringRef what,
                                           Value buffer, sched::Peer peer,
                                           ValueRange after) {
  const GroupPlacement &placement =
      groups[static_cast<int>(sched::Group::Pipeline)];
  double seconds = placement.stepLatency;
  if (placement.bandwidth > 0)
    seconds += static_cast<double>(bufferBytes(buffer)) /
               (placement.bandwidth * kBandwidthEfficiency);
  auto name = [&] {
    return llvm::formatv("{0} {1} ({2})", what, bufferName(buffer),
                         sched::stringifyPeer(peer))
        .str();
  };
  time.groupBusySeconds[static_cast<int>(sched::Group::Pipeline)] += seconds;
  return acrossStages(op, sched::Group::Pipeline, name, seconds, after);
}

LogicalResult StepSimulation::acrossStages(Operation *op, sched::Group group,
                                           SliceName name, double seconds,
                                           ValueRange after) {
  if (!play)
    return onLink(op, group, name, seconds, after);
  double ready = now;
  for (Value event : after) {
    auto it = events.find(resolve(event));
    if (it == events.end())
      return op->emitError("the time model found no op before it that "
                           "fires an event it follows");
    ready = std::max(ready, it->second.end);
  }
  time.busySeconds[static_cast<int>(linkOf(group))] += seconds;
  play->issued(stage, op, keyOf(op->getResult(0)).second, ready, seconds,
               timeline ? name() : std::string());
  return success();
}

void StepSimulation::transferred(Operation *op, int64_t iteration, double start,
                                 double end, std::string name) {
  Stream stream = linkOf(sched::Group::Pipeline);
  if (timeline && end > start)
    time.slices.push_back({name, stream, start, end - start});
  events[{op->getResult(0), iteration}] = {end, stream};
  if (timeline)
    eventNames[{op->getResult(0), iteration}] = std::move(name);
  lastTransferEnd = std::max(lastTransferEnd, end);
}

LogicalResult StepSimulation::playSlotEvent(Operation &op) {
  if (auto signal = dyn_cast<sched::SlotSignalOp>(op)) {
    EventKey key = resolve(signal.getEvent());
    if (!events.count(key) && !pending(signal.getEvent()))
      return signal.emitError("the time model found no op before it that "
                              "fires the event it names");
    return slotInstances.signal(signal, next->iteration(), key);
  }
  auto event = cast<sched::SlotEventOp>(op);
  FailureOr<EventKey> signalled =
      slotInstances.lookup(event, next->iteration());
  if (failed(signalled))
    return failure();
  slotEvents[keyOf(event.getEvent())] = *signalled;
  return success();
}

LogicalResult StepSimulation::playOp(Operation &op) {
  return llvm::TypeSwitch<Operation *, LogicalResult>(&op)
      .Case<sched::AllocOp, sched::FreeOp, sched::ViewOp, sched::ShardViewOp,
            sched::SlotOp, sched::LossOp, sched::UpdateLossScaleOp>(
          [](Operation *) { return success(); })
      .Case([&](sched::WaitOp op) { return wait(op); })
      .Case([&](sched::AllGatherOp op) {
        return collective(op, CollectiveKind::AllGather, op.getDst(),
                          op.getGroup(), op.getAfter());
      })
      .Case([&](sched::ReduceScatterOp op) {
        return collective(op, CollectiveKind::ReduceScatter, op.getSrc(),
                          op.getGroup(), op.getAfter());
      })
      .Case([&](sched::AllReduceOp op) {
        return collective(op, CollectiveKind::AllReduce, op.getBuffer(),
                          op.getGroup(), op.getAfter());
      })
      .Case([&](sched::BroadcastOp op) {
        return collective(op, CollectiveKind::Broadcast, op.getBuffer(),
                          op.getGroup(), op.getAfter());
      })
      .Case([&](sched::SendOp op) {
        return pointToPoint(op, "send", op.getBuffer(), op.getPeer(),
                            op.getAfter());
      })
      .Case([&](sched::RecvOp op) {
        return pointToPoint(op, "recv", op.getBuffer(), op.getPeer(),
                            op.getAfter());
      })
      .Case([&](sched::CopyOp op) {
        bool toDevice = onDevice(op.getDst());
        double pcie = device.getPcieBandwidth().value * kBandwidthEfficiency;
        double seconds =
            pcie > 0 ? static_cast<double>(bufferBytes(op.getSrc())) / pcie : 0;
        return issue(
            op, toDevice ? Stream::HostToDevice : Stream::DeviceToHost,
            [&] {
              return "copy " + bufferName(op.getSrc()) + " into " +
                     bufferName(op.getDst());
            },
            seconds, op.getAfter());
      })
      .Case([&](sched::ForwardOp op) {
        return runUnit(op, "forward", op.getUnit(),
                       op.getMicroBatch() + next->iteration(), op.getPart(), 1,
                       true);
      })
      .Case([&](sched::RecomputeOp op) {
        return runUnit(op, "recompute", op.getUnit(),
                       op.getMicroBatch() + next->iteration(), op.getPart(), 1,
                       false);
      })
      .Case([&](sched::BackwardOp op) {
        return runUnit(op, "backward", op.getUnit(),
                       op.getMicroBatch() + next->iteration(), op.getPart(), 2,
                       false);
      })
      .Case([&](sched::OptimizerStepOp op) {
        // Parameters and state are read and written, gradients read.
        SmallVector<std::pair<Value, int>> operands = {{op.getParams(), 2},
                                                       {op.getGrads(), 1}};
        for (Value state : op.getState())
          operands.push_back({state, 2});
        compute(
            [&] {
              return "optimizer_step @" +
                     op.getGroup().getLeafReference().str();
            },
            secondsOfTraffic(elementwiseTraffic(op.getParams(), operands)),
            false);
        return success();
      })
      .Case([&](sched::CastOp op) {
        compute(
            [&] {
              return "cast " + bufferName(op.getSrc()) + " into " +
                     bufferName(op.getDst());
            },
            secondsOfTraffic(elementwiseTraffic(
                op.getDst(), {{op.getSrc(), 1}, {op.getDst(), 1}})),
            false);
        return success();
      })
      .Case([&](sched::DequantizeOp op) {
        // Reads what is stored (NF4 bytes: half a byte an element and
        // the constants), writes the working type.
        compute(
            [&] {
              return "dequantize " + bufferName(op.getSrc()) + " into " +
                     bufferName(op.getDst());
            },
            secondsOfTraffic(elementwiseTraffic(
                op.getDst(), {{op.getSrc(), 1}, {op.getDst(), 1}})),
            false);
        return success();
      })
      .Case([&](sched::ZeroOp op) {
        compute([&] { return "zero " + bufferName(op.getBuffer()); },
                secondsOfTraffic(
                    elementwiseTraffic(op.getBuffer(), {{op.getBuffer(), 1}})),
                false);
        return success();
      })
      .Case([&](sched::AccumulateOp op) {
        compute(
            [&] {
              return "accumulate " + bufferName(op.getSrc()) + " into " +
                     bufferName(op.getDst());
            },
            secondsOfTraffic(elementwiseTraffic(
                op.getDst(), {{op.getSrc(), 1}, {op.getDst(), 2}})),
            false);
        return success();
      })
      .Case([&](sched::GradNormOp op) {
        compute([&] { return "grad_norm " + bufferName(op.getGrads()); },
                secondsOfTraffic(
                    elementwiseTraffic(op.getGrads(), {{op.getGrads(), 1}})),
                false);
        return success();
      })
      .Case([&](sched::CheckFiniteOp op) {
        compute([&] { return "check_finite " + bufferName(op.getBuffer()); },
                secondsOfTraffic(
                    elementwiseTraffic(op.getBuffer(), {{op.getBuffer(), 1}})),
                false);
        return success();
      })
      .Default([](Operation *op) {
        return op->emitError("the time model has no cost for this op");
      });
}

FailureOr<bool> StepSimulation::advance() {
  movedLast = false;
  for (; !next->done(); next->advance()) {
    Operation &op = **next;
    // A transfer between stages that has not started holds the compute
    // stream at its wait, and an op that starts after it.
    if (play) {
      if (auto wait = dyn_cast<sched::WaitOp>(op);
          wait && pending(wait.getEvent()))
        return false;
      if (std::optional<sched::AsyncInfo> async = sched::getAsyncInfo(&op))
        if (llvm::any_of(async->after, [&](Value e) { return pending(e); }))
          return false;
    }
    if (isa<sched::SlotSignalOp, sched::SlotEventOp>(op)) {
      if (failed(playSlotEvent(op)))
        return failure();
      continue;
    }
    time.opStart.push_back(now);
    if (failed(playOp(op)))
      return failure();
    movedLast = true;
  }
  return true;
}

StepTime StepSimulation::finish() {
  time.stepSeconds = std::max(now, lastTransferEnd);
  for (double free : streamFree)
    time.stepSeconds = std::max(time.stepSeconds, free);
  if (time.stepSeconds > 0) {
    time.tokensPerSecond =
        static_cast<double>(time.tokensPerStep) / time.stepSeconds;
    if (time.peakFlops > 0)
      time.mfu = time.modelFlops / (time.stepSeconds * time.peakFlops);
  }
  return std::move(time);
}

FailureOr<StepTime> StepSimulation::run() {
  if (failed(start()))
    return failure();
  FailureOr<bool> done = advance();
  if (failed(done))
    return failure();
  if (!*done)
    return program.emitError("the time model found a wait for a transfer "
                             "between stages in a program played alone");
  return finish();
}

} // namespace

FailureOr<StepTime> plan::simulateStep(sched::ProgramOp program,
                                       bool timeline) {
  return StepSimulation(program, timeline).run();
}

FailureOr<std::vector<StepTime>>
plan::simulatePipeline(ArrayRef<sched::ProgramOp> stages, bool timeline) {
  std::vector<std::unique_ptr<StepSimulation>> owned;
  std::vector<StepSimulation *> sims;
  for (auto [index, program] : llvm::enumerate(stages)) {
    owned.push_back(std::make_unique<StepSimulation>(
        program, timeline, nullptr, static_cast<int64_t>(index)));
    sims.push_back(owned.back().get());
  }
  PipelinePlay play(sims);
  for (StepSimulation *sim : sims) {
    sim->attach(&play);
    if (failed(sim->start()))
      return failure();
  }
  // Each round plays every stage as far as it goes; sched-verify-pipeline
  // proved that the stages do not deadlock, so a round without progress
  // means a program it did not see.
  std::vector<bool> done(sims.size(), false);
  while (llvm::is_contained(done, false)) {
    bool moved = false;
    for (auto [index, sim] : llvm::enumerate(sims)) {
      if (done[index])
        continue;
      FailureOr<bool> ended = sim->advance();
      if (failed(ended))
        return failure();
      done[index] = *ended;
      moved |= sim->moved() || *ended;
    }
    if (!moved)
      return stages.front()->emitError(
          "the time model's play of the pipeline stages stalls: every stage "
          "waits for a transfer its neighbour never issues (run "
          "sched-verify-pipeline)");
  }
  std::vector<StepTime> times;
  for (StepSimulation *sim : sims)
    times.push_back(sim->finish());
  return times;
}
