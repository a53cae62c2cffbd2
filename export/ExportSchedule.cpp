//===- ExportSchedule.cpp - The lowered module as a schedule file ---------===//
//
// Walks each sched.program once, in order (a plan with a pipeline has one per
// stage, each its own program in the file). Every value that is a buffer
// gets the next buffer id of its program where it is defined and every event
// the next event id, so ids are dense and each op refers only to ids defined
// above it, which is what the runtime's validateSchedule checks. The ops are
// exported field by field from the runtime's op table (sched::visitTableOp),
// which plan-tblgen generates from the ops' ODS definitions: no op is listed
// here. Enumerations cross the boundary by keyword (the IR's and the file's
// spellings are the same), not by numeric value. A sched.repeat's body is
// written once, as a task of the program with the table of its runs, which
// the reader expands (runtime/format/ScheduleTasks.cpp): its buffers and
// events get ids after the program's.
//
//===----------------------------------------------------------------------===//

#include "export/ExportSchedule.h"

#include "ScheduleFile.h"
#include "dialects/plan/PlanDialect.h"
#include "dialects/sched/SchedOpTable.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Threading.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

#include <type_traits>

#ifndef PLAN_COMPILER_VERSION
#error "PLAN_COMPILER_VERSION is set by export/CMakeLists.txt"
#endif

using namespace mlir;

namespace plan {

std::string scheduleProducer() {
  return std::string("planc ") + PLAN_COMPILER_VERSION;
}

namespace {

/// What exportPlan makes and each program's export reads: the file's plan
/// fields, and the units' and groups' indices by name.
struct ExportedPlan {
  rt::Schedule schedule;
  llvm::StringMap<int64_t> unitIndex, groupIndex;
};

/// Exports the plan into `exported`, or one program at a time (each
/// program on an exporter of its own, so that programs export on threads of
/// their own).
class ScheduleExporter {
public:
  ScheduleExporter(PlanOp plan, ExportedPlan &exported)
      : plan(plan), schedule(exported.schedule), unitIndex(exported.unitIndex),
        groupIndex(exported.groupIndex) {}

  /// The plan's fields, and the micro-batches of `first`, the programs'.
  LogicalResult exportPlan(sched::ProgramOp first);
  LogicalResult exportProgram(sched::ProgramOp program, rt::Program &out);

private:
  LogicalResult exportOp(Operation &op);
  /// Fills `value`, the field `d` of the op table's struct for `op`.
  template <typename Concrete, typename Descriptor, typename Value>
  void exportField(Concrete op, Descriptor d, Value &value);
  LogicalResult defineAlloc(sched::AllocOp alloc);
  LogicalResult defineView(Operation *op, Value result, Value source,
                           rt::Buffer::Kind kind);

  /// The id of a buffer operand; -1 (after an error at `user`) if it was not
  /// defined above.
  int64_t buffer(Operation *user, Value value);
  int64_t optionalBuffer(Operation *user, Value value) {
    return value ? buffer(user, value) : -1;
  }
  int64_t event(Operation *user, Value value);
  std::vector<int64_t> events(Operation *user, ValueRange values);
  int64_t defineEvent(Value value) {
    // An event a sched.slot_signal gives a slot event instance is that
    // instance's.
    auto slot = slotSignals.find(value);
    int64_t id = slot != slotSignals.end() ? slot->second
                 : task                    ? kLocalId + task->numEvents++
                                           : current->numEvents++;
    eventIds[value] = id;
    return id;
  }
  /// The id of slot event instance (`family`, `shift`) of the task being
  /// exported (its `slotEvents` entry, added on first use).
  int64_t slotEvent(int64_t family, int64_t shift);
  /// A sched.repeat: its body once as a task of the program, run once per
  /// micro-batch of the repeat.
  LogicalResult exportRepeat(sched::RepeatOp repeat);
  /// A sched.tasks: each sched.task as a task of the program, run in the
  /// order of its table.
  LogicalResult exportTasks(sched::TasksOp tasks);
  LogicalResult exportTask(sched::TaskOp op, int64_t familyBase);
  /// The buffer of id `id` (the program's, or the task's being exported).
  const rt::Buffer &bufferById(int64_t id) const {
    return id >= kLocalId ? task->buffers[id - kLocalId] : current->buffers[id];
  }
  /// Appends `b` to the program's buffers (the task's, in one), its id.
  int64_t addBuffer(rt::Buffer b) {
    auto &table = task ? task->buffers : current->buffers;
    table.push_back(std::move(b));
    return static_cast<int64_t>(table.size()) - 1 + (task ? kLocalId : 0);
  }
  /// A task's own buffers and events get ids from kLocalId on while the
  /// program is exported, and the ids after the program's once it is; its
  /// slot events from kSlotEventId on, and the ids after its own events.
  static constexpr int64_t kLocalId = int64_t{1} << 40;
  static constexpr int64_t kSlotEventId = int64_t{1} << 41;
  int64_t unit(Operation *user, SymbolRefAttr ref);

  PlanOp plan;
  // exportPlan's, which a program's export only reads.
  rt::Schedule &schedule;
  llvm::StringMap<int64_t> &unitIndex, &groupIndex;
  rt::Program *current = nullptr; // the program being exported
  rt::Task *task = nullptr;       // the task being exported, if any
  llvm::DenseMap<Value, int64_t> bufferIds, eventIds;
  /// In the task being exported: the events its sched.slot_signal ops give
  /// a slot event instance, by id.
  llvm::DenseMap<Value, int64_t> slotSignals;
  bool hadError = false;
};

/// The line of the first file location inside `loc`; 0 when it has none.
uint32_t lineOf(Location loc) {
  if (auto file = loc->findInstanceOf<FileLineColLoc>())
    return file.getLine();
  return 0;
}

int64_t ScheduleExporter::buffer(Operation *user, Value value) {
  auto it = bufferIds.find(value);
  if (it != bufferIds.end())
    return it->second;
  user->emitError("the schedule exporter found a buffer operand that is not "
                  "defined by a sched.alloc, sched.view or sched.shard_view "
                  "above it in the program");
  hadError = true;
  return -1;
}

int64_t ScheduleExporter::event(Operation *user, Value value) {
  auto it = eventIds.find(value);
  if (it != eventIds.end())
    return it->second;
  user->emitError("the schedule exporter found an event operand that no "
                  "asynchronous op above it defines");
  hadError = true;
  return -1;
}

std::vector<int64_t> ScheduleExporter::events(Operation *user,
                                              ValueRange values) {
  std::vector<int64_t> ids;
  ids.reserve(values.size());
  for (Value v : values)
    ids.push_back(event(user, v));
  return ids;
}

int64_t ScheduleExporter::unit(Operation *user, SymbolRefAttr ref) {
  auto it = unitIndex.find(ref.getLeafReference().getValue());
  if (it != unitIndex.end())
    return it->second;
  user->emitError("unit ") << ref << " is not a unit of plan @"
                           << plan.getSymName();
  hadError = true;
  return -1;
}

LogicalResult ScheduleExporter::exportPlan(sched::ProgramOp first) {
  rt::Schedule &s = schedule;
  s.microBatches = static_cast<int64_t>(first.getMicroBatches());
  s.producer = scheduleProducer();
  s.planName = plan.getSymName().str();
  if (auto file = plan.getLoc()->findInstanceOf<FileLineColLoc>())
    s.sourceFile = file.getFilename().str();

  if (plan.getMeshSize(MeshAxis::Shard) < 1)
    return plan.emitError("the schedule file needs a mesh (pipeline, "
                          "replicate, shard, tensor)");
  s.pipeline = plan.getPipelineRanks();
  s.replicate = plan.getMeshSize(MeshAxis::Replicate);
  s.shard = plan.getMeshSize(MeshAxis::Shard);
  s.tensor = plan.getTensorRanks();
  s.sequenceParallel = plan.getParallel().getSequenceParallel();

  ModelAttr model = plan.getModel();
  rt::ModelConfig &m = s.model;
  m.family = sched::toRuntime(model.getFamily());
  m.preset = model.getPreset().str();
  m.vocab = model.getVocab();
  m.hidden = model.getHidden();
  m.intermediate = model.getIntermediate();
  m.layers = model.getLayers();
  m.heads = model.getHeads();
  m.kvHeads = model.getKvHeads();
  m.maxSeqLen = model.getMaxSeqLen();
  m.ropeTheta = model.getRopeTheta();
  if (RopeScalingAttr rope = model.getRopeScaling())
    m.ropeScaling =
        rt::RopeScaling{rope.getFactor(), rope.getLowFreqFactor(),
                        rope.getHighFreqFactor(), rope.getOriginalMaxSeqLen()};
  m.normEps = model.getNormEps();
  m.tieEmbeddings = model.getTieEmbeddings();
  m.typeVocab = model.getTypeVocab();
  m.bertHead = sched::toRuntime(model.getBertHead());
  m.numLabels = model.getNumLabels();
  if (LoraAttr lora = model.getLora()) {
    rt::LoraConfig l;
    l.rank = lora.getRank();
    l.alpha = lora.getAlpha();
    l.dropout = lora.getDropout();
    for (Attribute target : lora.getTargets())
      l.targets.push_back(cast<StringAttr>(target).getValue().str());
    m.lora = std::move(l);
  }

  ClusterAttr cluster = plan.getCluster();
  DeviceAttr device = cluster.getDevice();
  rt::ClusterConfig &c = s.cluster;
  c.nodes = cluster.getNodes();
  c.gpusPerNode = cluster.getGpusPerNode();
  c.device.name = device.getName().str();
  c.device.memory = device.getMemory();
  c.device.bf16Tflops = device.getBf16Tflops();
  c.device.fp16Tflops = device.getFp16Tflops();
  c.device.fp32Tflops = device.getFp32Tflops();
  c.device.hbmBandwidth = device.getHbmBandwidth();
  c.device.nvlinkBandwidth = device.getNvlinkBandwidth();
  c.device.pcieBandwidth = device.getPcieBandwidth();
  c.hostMemory = cluster.getHostMemory();
  c.interNodeBandwidth = cluster.getInterNodeBandwidth();

  TrainAttr train = plan.getTrain();
  rt::TrainConfig &t = s.train;
  OptimizerAttr optimizer = train.getOptimizer();
  t.optimizer.kind = sched::toRuntime(optimizer.getKind());
  t.optimizer.lr = optimizer.getLr();
  t.optimizer.beta1 = optimizer.getBeta1();
  t.optimizer.beta2 = optimizer.getBeta2();
  t.optimizer.eps = optimizer.getEps();
  t.optimizer.weightDecay = optimizer.getWeightDecay();
  t.optimizer.decay = sched::toRuntime(optimizer.getDecay());
  t.optimizer.momentum = optimizer.getMomentum();
  t.microBatch = train.getMicroBatch();
  t.seqLen = train.getSeqLen();
  t.gradAccum = train.getGradAccum();
  t.precision = sched::toRuntime(train.getPrecision());
  LossScaleAttr lossScale = train.getLossScale();
  t.lossScale.kind = sched::toRuntime(lossScale.getKind());
  t.lossScale.initial = lossScale.getInitial();
  t.lossScale.growthInterval = lossScale.getGrowthInterval();
  t.reduceDtype = sched::toRuntime(train.getReduceDtype());
  t.activationCheckpointing =
      sched::toRuntime(train.getActivationCheckpointing());
  t.gradClip = train.getGradClip();
  LRScheduleAttr lr = train.getLrSchedule();
  t.lrSchedule.kind = sched::toRuntime(lr.getKind());
  t.lrSchedule.warmup = lr.getWarmup();
  t.lrSchedule.minLrRatio = lr.getMinLrRatio();
  t.steps = train.getSteps();
  t.seed = train.getSeed();
  s.sharding = sched::toRuntime(plan.getParallel().getSharding());

  // Units: stored parameters are laid out in parameter order, the trainable
  // ones and a LoRA run's frozen base each in their own elements; a tied one
  // is stored in the unit that defines it and takes that parameter's offset
  // (its place inside the `tied` buffer the compute ops receive),
  // frozenness and storage.
  llvm::StringMap<rt::Param> stored;
  for (UnitOp unitOp : plan.getBody().getOps<UnitOp>()) {
    rt::Unit u;
    u.name = unitOp.getSymName().str();
    u.kind = sched::toRuntime(unitOp.getKind());
    u.stage = plan.getPipelineRankOfChunk(unitOp.getStage().value_or(0));
    for (ParamOp param : unitOp.getBody().getOps<ParamOp>()) {
      rt::Param p;
      p.name = param.getParamName().str();
      llvm::append_range(p.shape, param.getTensorType().getShape());
      if (TensorSplitAttr split = param.getSplitAttr())
        p.split = rt::TensorSplit{split.getDim(), split.getChunks()};
      if (std::optional<StringRef> tied = param.getTiedTo()) {
        p.tiedTo = tied->str();
      } else {
        p.frozen = param.getFrozen().has_value();
        if (p.frozen)
          p.base = sched::toRuntime(*param.getFrozen());
        int64_t &next = p.frozen ? u.frozenNumel : u.numel;
        p.offset = next;
        stored[p.name] = p;
        next += param.getLocalNumel(s.tensor);
      }
      u.params.push_back(std::move(p));
    }
    if (u.numel != unitOp.getStoredNumel() ||
        u.frozenNumel != unitOp.getFrozenNumel())
      return unitOp.emitError("stores ")
             << unitOp.getStoredNumel() << " trainable and "
             << unitOp.getFrozenNumel()
             << " frozen elements, the export counted " << u.numel << " and "
             << u.frozenNumel;
    unitIndex[u.name] = static_cast<int64_t>(s.units.size());
    s.units.push_back(std::move(u));
  }
  for (rt::Unit &u : s.units)
    for (rt::Param &p : u.params) {
      if (p.tiedTo.empty())
        continue;
      auto it = stored.find(p.tiedTo);
      if (it == stored.end())
        return plan.emitError("parameter '")
               << p.name << "' is tied to '" << p.tiedTo
               << "', which no unit stores";
      p.offset = it->second.offset;
      p.frozen = it->second.frozen;
      p.base = it->second.base;
    }

  for (GroupOp groupOp : plan.getBody().getOps<GroupOp>()) {
    rt::Group g;
    g.name = groupOp.getSymName().str();
    for (Attribute ref : groupOp.getUnits())
      g.units.push_back(cast<FlatSymbolRefAttr>(ref).getValue().str());
    if (!groupOp.getNumel() || !groupOp.getPaddedNumel() ||
        !groupOp.getShardNumel())
      return groupOp.emitError("has no numel / padded_numel / shard_numel: "
                               "run plan-assign-sharding before exporting");
    g.numel = groupOp.getNumel().value_or(0);
    g.paddedNumel = groupOp.getPaddedNumel().value_or(0);
    g.shardNumel = groupOp.getShardNumel().value_or(0);
    g.frozenNumel = groupOp.getFrozenNumel().value_or(0);
    g.frozenPaddedNumel = groupOp.getFrozenPaddedNumel().value_or(0);
    g.frozenShardNumel = groupOp.getFrozenShardNumel().value_or(0);
    groupIndex[g.name] = static_cast<int64_t>(s.groups.size());
    s.groups.push_back(std::move(g));
  }

  return success();
}

LogicalResult ScheduleExporter::exportProgram(sched::ProgramOp program,
                                              rt::Program &out) {
  current = &out;
  bufferIds.clear();
  eventIds.clear();
  for (auto [attrName, sizesOut] :
       {std::pair{"arena_bytes", &out.arenaBytes},
        std::pair{"persistent_bytes", &out.persistentBytes}}) {
    auto sizes = program->getAttrOfType<DictionaryAttr>(attrName);
    if (!sizes)
      return program.emitError("has no ")
             << attrName << ": run sched-plan-memory before exporting";
    for (NamedAttribute entry : sizes) {
      auto bytes = dyn_cast<IntegerAttr>(entry.getValue());
      std::optional<rt::Space> space =
          rt::parseKeyword<rt::Space>(entry.getName().getValue());
      if (!bytes || !space)
        return program.emitError("malformed ")
               << attrName << " entry '" << entry.getName().getValue() << "'";
      (*sizesOut)[*space] = bytes.getInt();
    }
  }
  auto workspace = program->getAttrOfType<IntegerAttr>("workspace_bytes");
  if (!workspace)
    return program.emitError(
        "has no workspace_bytes: run sched-plan-workspace before exporting");
  out.workspaceBytes = workspace.getInt();
  if (program->hasAttr(sched::kPartialMicroBatchesAttr))
    return program.emitError(
        "has only some of its micro-batches (sched-lower's "
        "roll-micro-batches): run sched-roll-micro-batches before exporting");
  for (Operation &op : program.getBody().front()) {
    LogicalResult exported = success();
    if (auto repeat = dyn_cast<sched::RepeatOp>(op))
      exported = exportRepeat(repeat);
    else if (auto tasks = dyn_cast<sched::TasksOp>(op))
      exported = exportTasks(tasks);
    else
      exported = exportOp(op);
    if (failed(exported))
      return failure();
  }
  // The tasks' own ids follow the program's.
  auto P = static_cast<int64_t>(out.buffers.size());
  int64_t E = out.numEvents;
  auto buffer = [&](int64_t id) {
    return id >= kLocalId ? id - kLocalId + P : id;
  };
  auto event = [&](int64_t id) {
    return id >= kLocalId ? id - kLocalId + E : id;
  };
  for (rt::Task &t : out.tasks) {
    auto taskEvent = [&](int64_t id) {
      return id >= kSlotEventId ? id - kSlotEventId + E + t.numEvents
                                : event(id);
    };
    for (rt::Buffer &b : t.buffers)
      if (b.kind != rt::Buffer::Kind::Alloc)
        b.source = buffer(b.source);
    for (rt::Op &op : t.ops)
      rt::remapOp(op, buffer, taskEvent, 0);
  }
  return success();
}

LogicalResult ScheduleExporter::exportRepeat(sched::RepeatOp repeat) {
  rt::TaskRuns runs;
  runs.at = static_cast<int64_t>(current->ops.size());
  runs.buffersBefore = static_cast<int64_t>(current->buffers.size());
  runs.eventsBefore = current->numEvents;
  rt::Task body;
  // Written for the first run's micro-batch, which the body's ops name.
  body.microBatch = sched::getBodyMicroBatch(repeat);
  task = &body;
  for (Operation &op : repeat.getBody().front())
    if (failed(exportOp(op))) {
      task = nullptr;
      return failure();
    }
  task = nullptr;
  auto index = static_cast<int64_t>(current->tasks.size());
  for (uint64_t run = 0; run < repeat.getCount(); ++run)
    runs.order.emplace_back(index, body.microBatch + static_cast<int64_t>(run));
  current->tasks.push_back(std::move(body));
  current->runs.push_back(std::move(runs));
  return success();
}

int64_t ScheduleExporter::slotEvent(int64_t family, int64_t shift) {
  auto &list = task->slotEvents;
  auto it = llvm::find(list, std::make_pair(family, shift));
  if (it == list.end())
    it = list.insert(list.end(), {family, shift});
  return kSlotEventId + (it - list.begin());
}

LogicalResult ScheduleExporter::exportTasks(sched::TasksOp tasks) {
  rt::TaskRuns runs;
  runs.at = static_cast<int64_t>(current->ops.size());
  runs.buffersBefore = static_cast<int64_t>(current->buffers.size());
  runs.eventsBefore = current->numEvents;
  // A program's slot event families are those of its sched.tasks ops, one
  // after the other.
  int64_t familyBase = current->slotEventFamilies;
  current->slotEventFamilies += static_cast<int64_t>(tasks.getEventFamilies());
  auto taskBase = static_cast<int64_t>(current->tasks.size());
  for (sched::TaskOp op : tasks.getTasks())
    if (failed(exportTask(op, familyBase)))
      return failure();
  ArrayRef<int64_t> order = tasks.getOrder();
  for (size_t i = 0; i + 1 < order.size(); i += 2)
    runs.order.emplace_back(taskBase + order[i], order[i + 1]);
  if (std::optional<ArrayRef<int64_t>> picks = tasks.getPicks())
    runs.picks.assign(picks->begin(), picks->end());
  current->runs.push_back(std::move(runs));
  return success();
}

LogicalResult ScheduleExporter::exportTask(sched::TaskOp op,
                                           int64_t familyBase) {
  rt::Task body;
  body.microBatch = static_cast<int64_t>(op.getMicroBatch());
  task = &body;
  slotSignals.clear();
  auto exportBody = [&]() -> LogicalResult {
    Block &block = op.getBody().front();
    for (auto signal : block.getOps<sched::SlotSignalOp>())
      slotSignals[signal.getEvent()] =
          slotEvent(familyBase + static_cast<int64_t>(signal.getFamily()),
                    static_cast<int64_t>(signal.getShift()));
    for (Operation &inner : block) {
      if (isa<sched::SlotSignalOp>(inner))
        continue;
      if (auto slot = dyn_cast<sched::SlotOp>(inner)) {
        int64_t source = buffer(slot, slot.getSource());
        if (source < 0)
          return failure();
        const rt::Buffer &of = bufferById(source);
        rt::Buffer b;
        b.kind = rt::Buffer::Kind::Slot;
        b.type = of.type;
        b.space = of.space;
        b.numel = slot.getType().getNumElements();
        b.source = source;
        b.slots = static_cast<int64_t>(slot.getSlots());
        b.shift = static_cast<int64_t>(slot.getShift());
        if (slot.isPicked()) {
          b.slotGroup = static_cast<int64_t>(*slot.getGroup());
          b.slotStride = static_cast<int64_t>(*slot.getStride());
          b.slotOffset = static_cast<int64_t>(*slot.getOffset());
        }
        bufferIds[slot.getResult()] = addBuffer(std::move(b));
        continue;
      }
      if (auto event = dyn_cast<sched::SlotEventOp>(inner)) {
        eventIds[event.getEvent()] =
            slotEvent(familyBase + static_cast<int64_t>(event.getFamily()),
                      static_cast<int64_t>(event.getShift()));
        continue;
      }
      if (failed(exportOp(inner)))
        return failure();
    }
    return success();
  };
  LogicalResult exported = exportBody();
  task = nullptr;
  slotSignals.clear();
  if (failed(exported))
    return failure();
  current->tasks.push_back(std::move(body));
  return success();
}

LogicalResult ScheduleExporter::defineAlloc(sched::AllocOp alloc) {
  MemRefType type = alloc.getType();
  rt::Buffer b;
  b.kind = rt::Buffer::Kind::Alloc;
  Type element = type.getElementType();
  if (element.isF32())
    b.type = rt::ElementType::F32;
  else if (element.isBF16())
    b.type = rt::ElementType::BF16;
  else if (element.isF16())
    b.type = rt::ElementType::F16;
  else if (element.isInteger(8))
    b.type = rt::ElementType::I8;
  else
    return alloc.emitError("the schedule file has no element type ") << element;
  b.space = sched::toRuntime(sched::getMemorySpace(type));
  b.role = sched::toRuntime(alloc.getRole());
  b.numel = type.getNumElements();
  b.name = alloc.getName().str();
  b.persistent = alloc.getPersistent();
  b.held = alloc.getHeld();
  std::optional<int64_t> offset = alloc.getOffset();
  if (!offset)
    return alloc.emitError("'")
           << b.name << "' has no arena offset: run sched-plan-memory "
           << "before exporting";
  b.offset = *offset;

  // Persistent state names the group whose flat vector it holds:
  // "<group>.<role>" (sched-lower's naming; groups contain dots, roles not).
  bool groupState =
      b.persistent &&
      (b.role == rt::BufferRole::Param || b.role == rt::BufferRole::Master ||
       b.role == rt::BufferRole::Grad || b.role == rt::BufferRole::ExpAvg ||
       b.role == rt::BufferRole::ExpAvgSq ||
       b.role == rt::BufferRole::Momentum || b.role == rt::BufferRole::Frozen);
  if (groupState) {
    std::string suffix = std::string(".") + rt::toString(b.role);
    StringRef name = alloc.getName();
    auto it = name.ends_with(suffix)
                  ? groupIndex.find(name.drop_back(suffix.size()))
                  : groupIndex.end();
    if (it == groupIndex.end())
      return alloc.emitError("persistent ")
             << rt::toString(b.role) << " buffer '" << name
             << "' is not named '<group>" << suffix
             << "' after a group of the plan";
    const rt::Group &group = schedule.groups[it->second];
    b.group = group.name;
    const bool frozen = b.role == rt::BufferRole::Frozen;
    int64_t shardNumel = frozen ? group.frozenShardNumel : group.shardNumel;
    int64_t paddedNumel = frozen ? group.frozenPaddedNumel : group.paddedNumel;
    if (schedule.shard > 1 && b.numel == shardNumel)
      b.sharded = true;
    else if (b.numel == paddedNumel)
      b.sharded = false;
    else
      return alloc.emitError("'")
             << name << "' has " << b.numel << " elements: neither group '"
             << group.name << "''s shard (" << shardNumel << ") nor all of it ("
             << paddedNumel << ")";
  }

  bufferIds[alloc.getResult()] = addBuffer(std::move(b));
  return success();
}

LogicalResult ScheduleExporter::defineView(Operation *op, Value result,
                                           Value source,
                                           rt::Buffer::Kind kind) {
  int64_t sourceId = buffer(op, source);
  if (sourceId < 0)
    return failure();
  const rt::Buffer &src = bufferById(sourceId);
  rt::Buffer b;
  b.kind = kind;
  b.type = src.type;
  b.space = src.space;
  b.numel = cast<MemRefType>(result.getType()).getNumElements();
  b.source = sourceId;
  if (auto view = dyn_cast<sched::ViewOp>(op))
    b.viewOffset = static_cast<int64_t>(view.getOffset());
  else
    b.axis = sched::toRuntime(cast<sched::ShardViewOp>(op).getGroup());
  bufferIds[result] = addBuffer(std::move(b));
  return success();
}

template <typename Concrete, typename Descriptor, typename Value>
void ScheduleExporter::exportField(Concrete op, Descriptor d, Value &value) {
  namespace field = rt::field;
  Operation *operation = op.getOperation();
  using D = Descriptor;
  if constexpr (std::is_same_v<D, field::Buffer>) {
    value = buffer(operation, op.getODSOperands(d.operand).front());
  } else if constexpr (std::is_same_v<D, field::OptionalBuffer>) {
    auto operands = op.getODSOperands(d.operand);
    value = operands.empty() ? -1 : buffer(operation, operands.front());
  } else if constexpr (std::is_same_v<D, field::Buffers>) {
    for (mlir::Value v : op.getODSOperands(d.operand))
      value.push_back(buffer(operation, v));
  } else if constexpr (std::is_same_v<D, field::DefinedBuffer>) {
    value = buffer(operation, op.getODSResults(d.result).front());
  } else if constexpr (std::is_same_v<D, field::Event>) {
    value = event(operation, op.getODSOperands(d.operand).front());
  } else if constexpr (std::is_same_v<D, field::Events>) {
    value = events(operation, op.getODSOperands(d.operand));
  } else if constexpr (std::is_same_v<D, field::SignalledEvent>) {
    value = defineEvent(op.getODSResults(d.result).front());
  } else if constexpr (std::is_same_v<D, field::Int>) {
    value = cast<IntegerAttr>(operation->getAttr(d.name)).getInt();
  } else if constexpr (std::is_same_v<D, field::MicroBatch>) {
    value = cast<IntegerAttr>(operation->getAttr(d.name)).getInt();
  } else if constexpr (std::is_same_v<D, field::Float>) {
    value = cast<FloatAttr>(operation->getAttr(d.name)).getValueAsDouble();
  } else if constexpr (std::is_same_v<D, field::Flag>) {
    value = operation->hasAttr(d.name);
  } else if constexpr (std::is_same_v<D, field::UnitRef>) {
    value = unit(operation, cast<SymbolRefAttr>(operation->getAttr(d.name)));
  } else if constexpr (std::is_same_v<D, field::GroupRef>) {
    auto ref = cast<SymbolRefAttr>(operation->getAttr(d.name));
    auto it = groupIndex.find(ref.getLeafReference().getValue());
    if (it == groupIndex.end()) {
      operation->emitError("group ")
          << ref << " is not a group of plan @" << plan.getSymName();
      hadError = true;
      return;
    }
    value = it->second;
  } else {
    // An enumeration: its attribute class, then the runtime's value.
    using Attr = typename sched::EnumAttrOf<Value>::type;
    value = sched::toRuntime(cast<Attr>(operation->getAttr(d.name)).getValue());
  }
}

LogicalResult ScheduleExporter::exportOp(Operation &operation) {
  Operation *op = &operation;
  // Buffer-defining ops fill the buffer table; an alloc is also an op (its
  // buffer's life starts there), views are not.
  if (auto view = dyn_cast<sched::ViewOp>(op))
    return defineView(op, view.getResult(), view.getSource(),
                      rt::Buffer::Kind::View);
  if (auto view = dyn_cast<sched::ShardViewOp>(op))
    return defineView(op, view.getResult(), view.getSource(),
                      rt::Buffer::Kind::ShardView);
  if (auto alloc = dyn_cast<sched::AllocOp>(op))
    if (failed(defineAlloc(alloc)))
      return failure();

  rt::Op out;
  out.line = lineOf(op->getLoc());
  bool inTable = sched::visitTableOp(op, [&](auto concrete, auto rtOp) {
    using T = decltype(rtOp);
    T::fields(rtOp, [&](auto descriptor, auto &value) {
      exportField(concrete, descriptor, value);
    });
    out.body = std::move(rtOp);
  });
  if (!inTable)
    return op->emitError("the schedule file has no op '")
           << op->getName() << "': the exporter would have to drop it";
  if (hadError)
    return failure();
  (task ? task->ops : current->ops).push_back(std::move(out));
  return success();
}

} // namespace

FailureOr<rt::Schedule> exportSchedule(ModuleOp module) {
  SmallVector<sched::ProgramOp> programs(module.getOps<sched::ProgramOp>());
  if (programs.empty())
    return module.emitError("no sched.program to export: lower the plan "
                            "first (buildPlanLowerPipeline, --plan-lower)");
  PlanOp plan = programs.front().getPlanOp();
  if (!plan)
    return programs.front().emitError("its plan ")
           << programs.front().getPlanAttr() << " is not in the module";
  // One program, or one per pipeline stage, in stage order.
  for (sched::ProgramOp program : programs)
    if (program.getPlanOp() != plan)
      return program.emitError("a schedule file holds the programs of one "
                               "plan; this one is of plan ")
             << program.getPlanAttr();
  int64_t stages = plan.getPipelineRanks();
  llvm::stable_sort(programs, [](sched::ProgramOp a, sched::ProgramOp b) {
    return a.getStage().value_or(0) < b.getStage().value_or(0);
  });
  for (auto [index, program] : llvm::enumerate(programs))
    if (static_cast<int64_t>(programs.size()) != stages ||
        (stages > 1 && program.getStage() != index))
      return program.emitError("a schedule file holds one program per "
                               "pipeline stage; plan ")
             << plan.getSymName() << " has " << stages
             << " stages and the module " << programs.size() << " programs";
  ExportedPlan exported;
  if (failed(ScheduleExporter(plan, exported).exportPlan(programs.front())))
    return failure();
  // The programs (a pipeline's stages) at once, each on an exporter of its
  // own; their errors in stage order.
  exported.schedule.programs.assign(programs.size(), rt::Program());
  MLIRContext *context = plan.getContext();
  ParallelDiagnosticHandler ordered(context);
  LogicalResult done =
      failableParallelForEachN(context, 0, programs.size(), [&](size_t index) {
        ordered.setOrderIDForThread(index);
        LogicalResult program =
            ScheduleExporter(plan, exported)
                .exportProgram(programs[index],
                               exported.schedule.programs[index]);
        ordered.eraseOrderIDForThread();
        return program;
      });
  if (failed(done))
    return failure();
  return std::move(exported.schedule);
}

} // namespace plan
