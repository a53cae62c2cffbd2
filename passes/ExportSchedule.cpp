//===- ExportSchedule.cpp - The lowered module as a schedule file ---------===//
//
// Walks the sched.program once, in order. Every value that is a buffer gets
// the next buffer id where it is defined and every event the next event id,
// so ids are dense and each op refers only to ids defined above it, which is
// what the runtime's validateSchedule checks. Enumerations cross the
// boundary by keyword (the IR's and the file's spellings are the same), not
// by numeric value, so the two enum definitions cannot drift apart silently.
//
//===----------------------------------------------------------------------===//

#include "passes/ExportSchedule.h"

#include "ScheduleFile.h"
#include "dialects/plan/PlanDialect.h"
#include "dialects/sched/SchedDialect.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"

#include <nlohmann/json.hpp>

#ifndef PLAN_COMPILER_VERSION
#error "PLAN_COMPILER_VERSION is set by passes/CMakeLists.txt"
#endif

using namespace mlir;

namespace plan {

std::string scheduleProducer() {
  return std::string("planc ") + PLAN_COMPILER_VERSION;
}

namespace {

class ScheduleExporter {
public:
  ScheduleExporter(sched::ProgramOp program, PlanOp plan)
      : program(program), plan(plan) {}

  FailureOr<rt::Schedule> run();

private:
  LogicalResult exportPlan();
  LogicalResult exportOp(Operation &op);
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
    int64_t id = schedule.numEvents++;
    eventIds[value] = id;
    return id;
  }
  int64_t unit(Operation *user, SymbolRefAttr ref);

  template <typename Keyword, typename RtEnum>
  FailureOr<RtEnum> convert(Operation *op, Keyword value,
                            std::optional<RtEnum> (*parse)(std::string_view),
                            const char *what) {
    llvm::StringRef keyword = sched::stringifyEnum(value);
    if (std::optional<RtEnum> converted = parse(keyword))
      return *converted;
    return op->emitError("the schedule file has no ")
           << what << " '" << keyword << "'";
  }

  sched::ProgramOp program;
  PlanOp plan;
  rt::Schedule schedule;
  llvm::DenseMap<Value, int64_t> bufferIds, eventIds;
  llvm::StringMap<int64_t> unitIndex, groupIndex;
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

LogicalResult ScheduleExporter::exportPlan() {
  rt::Schedule &s = schedule;
  s.producer = scheduleProducer();
  s.planName = plan.getSymName().str();
  if (auto file = plan.getLoc()->findInstanceOf<FileLineColLoc>())
    s.sourceFile = file.getFilename().str();

  shard::GridOp grid = plan.getGridOp();
  if (!grid || grid.getShape().size() != 2)
    return plan.emitError("the schedule file needs a 2-D mesh "
                          "(replicate x shard)");
  s.replicate = grid.getShape()[0];
  s.shard = grid.getShape()[1];

  ModelAttr model = plan.getModel();
  rt::ModelConfig &m = s.model;
  m.family = stringifyModelFamily(model.getFamily()).str();
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
  m.bertHead = stringifyBertHead(model.getBertHead()).str();
  m.numLabels = model.getNumLabels();

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
  t.optimizer.kind = stringifyOptimizerKind(optimizer.getKind()).str();
  t.optimizer.lr = optimizer.getLr();
  t.optimizer.beta1 = optimizer.getBeta1();
  t.optimizer.beta2 = optimizer.getBeta2();
  t.optimizer.eps = optimizer.getEps();
  t.optimizer.weightDecay = optimizer.getWeightDecay();
  t.optimizer.momentum = optimizer.getMomentum();
  t.microBatch = train.getMicroBatch();
  t.seqLen = train.getSeqLen();
  t.gradAccum = train.getGradAccum();
  t.precision = stringifyPrecision(train.getPrecision()).str();
  LossScaleAttr lossScale = train.getLossScale();
  t.lossScale.kind = stringifyLossScaleKind(lossScale.getKind()).str();
  t.lossScale.initial = lossScale.getInitial();
  t.lossScale.growthInterval = lossScale.getGrowthInterval();
  t.reduceDtype = stringifyDType(train.getReduceDtype()).str();
  t.activationCheckpointing =
      stringifyCheckpointing(train.getActivationCheckpointing()).str();
  t.gradClip = train.getGradClip();
  LRScheduleAttr lr = train.getLrSchedule();
  t.lrSchedule.kind = stringifyLRScheduleKind(lr.getKind()).str();
  t.lrSchedule.warmup = lr.getWarmup();
  t.lrSchedule.minLrRatio = lr.getMinLrRatio();
  t.steps = train.getSteps();
  t.seed = train.getSeed();
  s.sharding = stringifySharding(plan.getParallel().getSharding()).str();

  // Units: stored parameters are laid out in parameter order; a tied one is
  // stored in the unit that defines it and takes that parameter's offset
  // (its place inside the `tied` buffer the compute ops receive).
  llvm::StringMap<int64_t> storedOffset;
  for (UnitOp unitOp : plan.getBody().getOps<UnitOp>()) {
    rt::Unit u;
    u.name = unitOp.getSymName().str();
    u.kind = stringifyUnitKind(unitOp.getKind()).str();
    for (ParamOp param : unitOp.getBody().getOps<ParamOp>()) {
      rt::Param p;
      p.name = param.getParamName().str();
      llvm::append_range(p.shape, param.getTensorType().getShape());
      if (std::optional<StringRef> tied = param.getTiedTo()) {
        p.tiedTo = tied->str();
      } else {
        p.offset = u.numel;
        storedOffset[p.name] = p.offset;
        u.numel += param.getTensorType().getNumElements();
      }
      u.params.push_back(std::move(p));
    }
    if (u.numel != unitOp.getStoredNumel())
      return unitOp.emitError("stores ")
             << unitOp.getStoredNumel() << " elements, the export counted "
             << u.numel;
    unitIndex[u.name] = static_cast<int64_t>(s.units.size());
    s.units.push_back(std::move(u));
  }
  for (rt::Unit &u : s.units)
    for (rt::Param &p : u.params) {
      if (p.tiedTo.empty())
        continue;
      auto it = storedOffset.find(p.tiedTo);
      if (it == storedOffset.end())
        return plan.emitError("parameter '")
               << p.name << "' is tied to '" << p.tiedTo
               << "', which no unit stores";
      p.offset = it->second;
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
    groupIndex[g.name] = static_cast<int64_t>(s.groups.size());
    s.groups.push_back(std::move(g));
  }

  for (auto [attrName, out] :
       {std::pair{"arena_bytes", &s.arenaBytes},
        std::pair{"persistent_bytes", &s.persistentBytes}}) {
    auto sizes = program->getAttrOfType<DictionaryAttr>(attrName);
    if (!sizes)
      return program.emitError("has no ")
             << attrName << ": run sched-plan-memory before exporting";
    for (NamedAttribute entry : sizes) {
      auto bytes = dyn_cast<IntegerAttr>(entry.getValue());
      if (!bytes || !rt::parseSpace(entry.getName().getValue()))
        return program.emitError("malformed ")
               << attrName << " entry '" << entry.getName().getValue() << "'";
      (*out)[entry.getName().getValue().str()] = bytes.getInt();
    }
  }
  auto workspace = program->getAttrOfType<IntegerAttr>("workspace_bytes");
  if (!workspace)
    return program.emitError(
        "has no workspace_bytes: run sched-plan-workspace before exporting");
  s.workspaceBytes = workspace.getInt();
  s.microBatches = static_cast<int64_t>(program.getMicroBatches());
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
  else
    return alloc.emitError("the schedule file has no element type ") << element;
  FailureOr<rt::Space> space = convert(alloc, sched::getMemorySpace(type),
                                       rt::parseSpace, "memory space");
  FailureOr<rt::BufferRole> role =
      convert(alloc, alloc.getRole(), rt::parseBufferRole, "buffer role");
  if (failed(space) || failed(role))
    return failure();
  b.space = *space;
  b.role = *role;
  b.numel = type.getNumElements();
  b.name = alloc.getName().str();
  b.persistent = alloc.getPersistent();
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
       b.role == rt::BufferRole::Momentum);
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
    if (schedule.shard > 1 && b.numel == group.shardNumel)
      b.sharded = true;
    else if (b.numel == group.paddedNumel)
      b.sharded = false;
    else
      return alloc.emitError("'")
             << name << "' has " << b.numel << " elements: neither group '"
             << group.name << "''s shard (" << group.shardNumel
             << ") nor all of it (" << group.paddedNumel << ")";
  }

  int64_t id = static_cast<int64_t>(schedule.buffers.size());
  bufferIds[alloc.getResult()] = id;
  schedule.buffers.push_back(std::move(b));
  rt::Op op;
  op.kind = rt::OpKind::Alloc;
  op.buffer = id;
  op.line = lineOf(alloc.getLoc());
  schedule.ops.push_back(std::move(op));
  return success();
}

LogicalResult ScheduleExporter::defineView(Operation *op, Value result,
                                           Value source,
                                           rt::Buffer::Kind kind) {
  int64_t sourceId = buffer(op, source);
  if (sourceId < 0)
    return failure();
  const rt::Buffer &src = schedule.buffers[sourceId];
  rt::Buffer b;
  b.kind = kind;
  b.type = src.type;
  b.space = src.space;
  b.numel = cast<MemRefType>(result.getType()).getNumElements();
  b.source = sourceId;
  if (auto view = dyn_cast<sched::ViewOp>(op)) {
    b.viewOffset = static_cast<int64_t>(view.getOffset());
  } else {
    FailureOr<rt::GroupAxis> axis =
        convert(op, cast<sched::ShardViewOp>(op).getGroup(), rt::parseGroupAxis,
                "process group");
    if (failed(axis))
      return failure();
    b.axis = *axis;
  }
  bufferIds[result] = static_cast<int64_t>(schedule.buffers.size());
  schedule.buffers.push_back(std::move(b));
  return success();
}

LogicalResult ScheduleExporter::exportOp(Operation &operation) {
  Operation *opPtr = &operation;
  rt::Op op;
  op.line = lineOf(operation.getLoc());
  auto axisOf = [&](sched::Group group) {
    FailureOr<rt::GroupAxis> axis =
        convert(opPtr, group, rt::parseGroupAxis, "process group");
    if (succeeded(axis))
      op.axis = *axis;
    return axis;
  };
  auto reduceOf = [&](sched::ReduceOp reduce) {
    FailureOr<rt::ReduceKind> kind =
        convert(opPtr, reduce, rt::parseReduceKind, "reduction");
    if (succeeded(kind))
      op.reduce = *kind;
    return kind;
  };
  auto computeOf = [&](SymbolRefAttr unitRef, uint64_t microBatch) {
    op.unit = unit(opPtr, unitRef);
    op.microBatch = static_cast<int64_t>(microBatch);
  };

  LogicalResult result =
      llvm::TypeSwitch<Operation *, LogicalResult>(opPtr)
          .Case([&](sched::AllocOp alloc) { return defineAlloc(alloc); })
          .Case([&](sched::ViewOp view) {
            return defineView(view, view.getResult(), view.getSource(),
                              rt::Buffer::Kind::View);
          })
          .Case([&](sched::ShardViewOp view) {
            return defineView(view, view.getResult(), view.getSource(),
                              rt::Buffer::Kind::ShardView);
          })
          .Case([&](sched::FreeOp free) {
            op.kind = rt::OpKind::Free;
            op.buffer = buffer(opPtr, free.getBuffer());
            return success();
          })
          .Case([&](sched::WaitOp wait) {
            op.kind = rt::OpKind::Wait;
            op.waitEvent = event(opPtr, wait.getEvent());
            return success();
          })
          .Case([&](sched::AllGatherOp gather) {
            op.kind = rt::OpKind::AllGather;
            op.src = buffer(opPtr, gather.getSrc());
            op.dst = buffer(opPtr, gather.getDst());
            op.after = events(opPtr, gather.getAfter());
            op.event = defineEvent(gather.getDone());
            return LogicalResult(axisOf(gather.getGroup()));
          })
          .Case([&](sched::ReduceScatterOp scatter) {
            op.kind = rt::OpKind::ReduceScatter;
            op.src = buffer(opPtr, scatter.getSrc());
            op.dst = buffer(opPtr, scatter.getDst());
            op.accumulate = scatter.getAccumulate();
            op.after = events(opPtr, scatter.getAfter());
            op.event = defineEvent(scatter.getDone());
            return success(succeeded(axisOf(scatter.getGroup())) &&
                           succeeded(reduceOf(scatter.getReduce())));
          })
          .Case([&](sched::AllReduceOp reduce) {
            op.kind = rt::OpKind::AllReduce;
            op.buffer = buffer(opPtr, reduce.getBuffer());
            op.after = events(opPtr, reduce.getAfter());
            op.event = defineEvent(reduce.getDone());
            return success(succeeded(axisOf(reduce.getGroup())) &&
                           succeeded(reduceOf(reduce.getReduce())));
          })
          .Case([&](sched::BroadcastOp broadcast) {
            op.kind = rt::OpKind::Broadcast;
            op.buffer = buffer(opPtr, broadcast.getBuffer());
            op.root = static_cast<int64_t>(broadcast.getRoot());
            op.after = events(opPtr, broadcast.getAfter());
            op.event = defineEvent(broadcast.getDone());
            return LogicalResult(axisOf(broadcast.getGroup()));
          })
          .Case([&](sched::CopyOp copy) {
            op.kind = rt::OpKind::Copy;
            op.src = buffer(opPtr, copy.getSrc());
            op.dst = buffer(opPtr, copy.getDst());
            op.after = events(opPtr, copy.getAfter());
            op.event = defineEvent(copy.getDone());
            return success();
          })
          .Case([&](sched::CastOp cast) {
            op.kind = rt::OpKind::Cast;
            op.src = buffer(opPtr, cast.getSrc());
            op.dst = buffer(opPtr, cast.getDst());
            return success();
          })
          .Case([&](sched::ZeroOp zero) {
            op.kind = rt::OpKind::Zero;
            op.buffer = buffer(opPtr, zero.getBuffer());
            return success();
          })
          .Case([&](sched::AccumulateOp accumulate) {
            op.kind = rt::OpKind::Accumulate;
            op.src = buffer(opPtr, accumulate.getSrc());
            op.dst = buffer(opPtr, accumulate.getDst());
            return success();
          })
          .Case([&](sched::ForwardOp forward) {
            op.kind = rt::OpKind::Forward;
            computeOf(forward.getUnit(), forward.getMicroBatch());
            op.params = buffer(opPtr, forward.getParams());
            op.tied = optionalBuffer(opPtr, forward.getTied());
            op.saves = buffer(opPtr, forward.getSaves());
            return success();
          })
          .Case([&](sched::RecomputeOp recompute) {
            op.kind = rt::OpKind::Recompute;
            computeOf(recompute.getUnit(), recompute.getMicroBatch());
            op.params = buffer(opPtr, recompute.getParams());
            op.tied = optionalBuffer(opPtr, recompute.getTied());
            op.input = buffer(opPtr, recompute.getInput());
            op.saves = buffer(opPtr, recompute.getSaves());
            return success();
          })
          .Case([&](sched::LossOp loss) {
            op.kind = rt::OpKind::Loss;
            computeOf(loss.getUnit(), loss.getMicroBatch());
            op.scale = loss.getScaleAttr().getValueAsDouble();
            op.lossScale = optionalBuffer(opPtr, loss.getLossScale());
            return success();
          })
          .Case([&](sched::BackwardOp backward) {
            op.kind = rt::OpKind::Backward;
            computeOf(backward.getUnit(), backward.getMicroBatch());
            op.params = buffer(opPtr, backward.getParams());
            op.tied = optionalBuffer(opPtr, backward.getTied());
            op.activations = buffer(opPtr, backward.getActivations());
            op.grads = buffer(opPtr, backward.getGrads());
            op.tiedGrads = optionalBuffer(opPtr, backward.getTiedGrads());
            return success();
          })
          .Case([&](sched::GradNormOp norm) {
            op.kind = rt::OpKind::GradNorm;
            op.src = buffer(opPtr, norm.getGrads());
            op.scalar = buffer(opPtr, norm.getNorm());
            return success();
          })
          .Case([&](sched::CheckFiniteOp check) {
            op.kind = rt::OpKind::CheckFinite;
            op.buffer = buffer(opPtr, check.getBuffer());
            op.scalar = buffer(opPtr, check.getFoundInf());
            return success();
          })
          .Case([&](sched::OptimizerStepOp step) {
            op.kind = rt::OpKind::OptimizerStep;
            auto it =
                groupIndex.find(step.getGroup().getLeafReference().getValue());
            if (it == groupIndex.end())
              return LogicalResult(step.emitError("group ")
                                   << step.getGroup()
                                   << " is not a group of plan @"
                                   << plan.getSymName());
            op.group = it->second;
            op.params = buffer(opPtr, step.getParams());
            op.grads = buffer(opPtr, step.getGrads());
            for (Value state : step.getState())
              op.state.push_back(buffer(opPtr, state));
            op.norm = optionalBuffer(opPtr, step.getNorm());
            op.foundInf = optionalBuffer(opPtr, step.getFoundInf());
            op.lossScale = optionalBuffer(opPtr, step.getLossScale());
            return success();
          })
          .Case([&](sched::UpdateLossScaleOp update) {
            op.kind = rt::OpKind::UpdateLossScale;
            op.scalar = buffer(opPtr, update.getLossScale());
            op.foundInf = buffer(opPtr, update.getFoundInf());
            return success();
          })
          .Default([&](Operation *unknown) {
            return unknown->emitError("the schedule file has no op '")
                   << unknown->getName()
                   << "': the exporter would have to drop it";
          });
  if (failed(result) || hadError)
    return failure();
  // Allocations and views were recorded by their define* functions.
  if (!isa<sched::AllocOp, sched::ViewOp, sched::ShardViewOp>(opPtr))
    schedule.ops.push_back(std::move(op));
  return success();
}

FailureOr<rt::Schedule> ScheduleExporter::run() {
  if (failed(exportPlan()))
    return failure();
  for (Operation &op : program.getBody().front())
    if (failed(exportOp(op)))
      return failure();
  return std::move(schedule);
}

} // namespace

FailureOr<rt::Schedule> exportSchedule(ModuleOp module) {
  SmallVector<sched::ProgramOp> programs(module.getOps<sched::ProgramOp>());
  if (programs.empty())
    return module.emitError("no sched.program to export: lower the plan "
                            "first (buildPlanLowerPipeline, --plan-lower)");
  if (programs.size() > 1)
    return programs[1].emitError("a schedule file holds one program; the "
                                 "module has ")
           << programs.size();
  sched::ProgramOp program = programs.front();
  PlanOp plan = program.getPlanOp();
  if (!plan)
    return program.emitError("its plan ")
           << program.getPlanAttr() << " is not in the module";
  return ScheduleExporter(program, plan).run();
}

void printScheduleJson(const rt::Schedule &schedule, llvm::raw_ostream &os) {
  // Re-parsing the file's body keeps one definition of the JSON layout (the
  // writer's) and shows exactly what the file holds.
  std::string bytes = rt::serializeSchedule(schedule);
  constexpr size_t kHeaderBytes = 32;
  nlohmann::ordered_json body =
      nlohmann::ordered_json::parse(bytes.begin() + kHeaderBytes, bytes.end());
  os << body.dump(2) << "\n";
}

} // namespace plan
