//===- ScheduleValidation.cpp - What a reader checks of a schedule --------===//
//
// docs/schedule-format.md ("Consistency") lists the checks. Each names the
// offending item, so that a hand-edited or foreign file can be fixed from
// the message alone. The ops are checked field by field from the generated
// op table: every buffer id in range and alive (allocated, not freed) where
// it is used, every event signalled once before it is waited for once, no
// op racing with an asynchronous op still in flight, every unit, group and
// micro-batch in range, and the relations each op's ODS
// definition lists (`fileChecks`, OpChecker below). Once a schedule passes,
// the executor indexes with its ids without checking them again.
//
//===----------------------------------------------------------------------===//

#include "Format.h"
#include "Parallel.h"
#include "ScheduleFile.h"
#include "TensorParallelParts.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>

namespace plan::rt {
namespace {

// Bounds that keep every size computation inside 64 bits; far above any
// real schedule (2^60 elements is 4 EiB of fp32).
constexpr int64_t kMaxElements = int64_t(1) << 60;
constexpr int64_t kMaxRanks = int64_t(1) << 24;

/// The asynchronous ops in flight where the compute stream reaches each op,
/// the rule the compiler's sched-verify-schedule enforces on the IR
/// (docs/sched.md): an asynchronous op is in flight from its issue until a
/// `wait` for its event, or for the event of an op that starts after it
/// (directly or through others), since that op started only once it had
/// finished. An op that writes elements an in-flight op reads or writes, or
/// reads elements one writes, races with it, unless it is itself
/// asynchronous and starts after that op.
class InFlightOps {
public:
  /// Elements [begin, end) of the allocation `root`.
  struct Access {
    int64_t root, begin, end;
    bool writes;
  };
  /// The op an access races with, and the event that would have ordered it.
  struct Race {
    int64_t op, event;
    bool writes;
  };

  explicit InFlightOps(size_t buffers, int64_t events)
      : inFlight(buffers), asyncOfEvent(events, -1) {}

  /// An async op that signals `event` and starts after the ops that signal
  /// `after` (each signalled earlier: the caller checked); returns its index.
  size_t issue(int64_t op, int64_t event, const std::vector<int64_t> &after) {
    Async a{op, event, {}, false};
    for (int64_t e : after)
      a.after.push_back(asyncOfEvent[e]);
    asyncOfEvent[event] = static_cast<int64_t>(asyncs.size());
    asyncs.push_back(std::move(a));
    return asyncs.size() - 1;
  }

  /// What `access` races with, by the op that makes it (`async`: its index
  /// when it is asynchronous itself).
  std::optional<Race> race(const Access &access, std::optional<size_t> async) {
    for (const Held &h : live(access.root)) {
      if (h.begin >= access.end || access.begin >= h.end ||
          !(h.writes || access.writes))
        continue;
      if (async && startsAfter(*async, h.async))
        continue;
      return Race{asyncs[h.async].op, asyncs[h.async].event, h.writes};
    }
    return std::nullopt;
  }

  /// An in-flight op that still uses allocation `root`, if any.
  std::optional<Race> user(int64_t root) {
    const std::vector<Held> &held = live(root);
    if (held.empty())
      return std::nullopt;
    const Async &a = asyncs[held.front().async];
    return Race{a.op, a.event, held.front().writes};
  }

  /// Records what async op `async` uses while it runs.
  void hold(size_t async, const Access &access) {
    inFlight[access.root].push_back(
        {async, access.begin, access.end, access.writes});
  }

  /// The compute stream waited for `event`: its op is complete, and so is
  /// every op it started after.
  void wait(int64_t event) {
    std::vector<size_t> work = {static_cast<size_t>(asyncOfEvent[event])};
    while (!work.empty()) {
      Async &a = asyncs[work.back()];
      work.pop_back();
      if (a.done)
        continue;
      a.done = true;
      work.insert(work.end(), a.after.begin(), a.after.end());
    }
  }

private:
  struct Async {
    int64_t op, event;
    std::vector<size_t> after;
    bool done;
  };
  struct Held {
    size_t async;
    int64_t begin, end;
    bool writes;
  };

  /// `root`'s holds by ops not complete; drops the others.
  const std::vector<Held> &live(int64_t root) {
    std::vector<Held> &held = inFlight[root];
    std::erase_if(held, [&](const Held &h) { return asyncs[h.async].done; });
    return held;
  }

  /// Whether async op `later` starts only after `earlier` finished.
  bool startsAfter(size_t later, size_t earlier) const {
    std::vector<size_t> work = asyncs[later].after;
    std::unordered_set<size_t> seen;
    while (!work.empty()) {
      size_t a = work.back();
      work.pop_back();
      if (a == earlier)
        return true;
      if (seen.insert(a).second)
        work.insert(work.end(), asyncs[a].after.begin(), asyncs[a].after.end());
    }
    return false;
  }

  std::vector<std::vector<Held>> inFlight; // per allocation
  std::vector<int64_t> asyncOfEvent;       // -1 until signalled
  std::vector<Async> asyncs;
};

template <typename> inline constexpr bool isEnumField = false;
template <typename E> inline constexpr bool isEnumField<field::Enum<E>> = true;

class ScheduleValidator {
public:
  ScheduleValidator(const Schedule &s, const std::string &name)
      : s(s), name(name) {}

  void run() {
    checkHeaderFields();
    checkUnits();
    checkGroups();
    if (static_cast<int64_t>(s.programs.size()) != s.pipeline)
      error("the schedule has " + std::to_string(s.programs.size()) +
            " programs for a pipeline of " + std::to_string(s.pipeline) +
            " stages: one per stage");
    // Each stage's program on a validator of its own, on threads; the
    // error is the first stage's that has one.
    support::parallelFor(s.programs.size(), [&](size_t stage) {
      ScheduleValidator v(*this);
      v.program = &s.programs[stage];
      v.programIndex = static_cast<int64_t>(stage);
      v.stagePrefix = s.pipeline > 1 ? "stage " + std::to_string(stage) + ": "
                                     : std::string();
      v.checkArenas();
      v.checkBuffers();
      v.checkOps();
    });
  }

  [[noreturn]] void error(const std::string &what) const {
    throw ScheduleFileError(name + ": " + stagePrefix + what);
  }

  /// The program being checked: each pipeline stage's in turn.
  const Program &prog() const { return *program; }
  /// The sizes a micro-batch's activations have on one rank.
  tp::ExchangeShape exchangeShape() const {
    return {s.train.microBatch * s.train.seqLen, s.model.hidden, s.tensor,
            s.sequenceParallel};
  }

  // What the op checks (OpChecker) need.
  const Schedule &s;
  const std::string &name;
  const Program *program = nullptr;
  int64_t programIndex = 0; // its pipeline stage
  std::string stagePrefix;
  std::vector<int64_t> tiedUnit; // per unit: the unit it ties, or -1
  // Per unit: whether that tie is to a frozen parameter.
  std::vector<bool> tiedFrozen;
  std::vector<int64_t> root; // per buffer: its allocation
  // Per buffer: the elements of its allocation it stands for (a shard view
  // stands for its whole source: some rank's slice is anywhere in it).
  std::vector<std::pair<int64_t, int64_t>> rootRange;

  int64_t axisSize(GroupAxis axis) const {
    switch (axis) {
    case GroupAxis::Shard:
      return s.shard;
    case GroupAxis::Replicate:
      return s.replicate;
    case GroupAxis::World:
      return s.replicate * s.shard;
    case GroupAxis::Tensor:
      return s.tensor;
    case GroupAxis::Pipeline:
      return s.pipeline;
    case GroupAxis::Embedding:
      return s.pipeline > 1 ? 2 : 1;
    }
    return 0;
  }

  /// "op N (kind)": where op `i` of the program stands, for its errors.
  std::string opPlace(size_t i) const {
    return "op " + std::to_string(i) + " (" + toString(prog().ops[i].kind()) +
           ")";
  }

  std::string bufferName(int64_t id) const {
    const Buffer &b = prog().buffers[id];
    if (b.kind == Buffer::Kind::Alloc)
      return "buffer " + std::to_string(id) + " ('" + b.name + "')";
    return "buffer " + std::to_string(id) + " (" + toString(b.kind) + " of '" +
           prog().buffers[root[id]].name + "')";
  }

private:
  void finite(double value, const char *field) const {
    if (!std::isfinite(value))
      error(std::string(field) + " is not a finite number");
  }

  /// A finite value in [min, max] (`(min` when minOpen, `max)` when maxOpen):
  /// what the plan's checker allows, so that an edited file cannot run a
  /// recipe no plan can state.
  void inRange(double value, const char *field, double min, bool minOpen,
               double max, bool maxOpen) const {
    finite(value, field);
    bool low = minOpen ? value > min : value >= min;
    bool high = maxOpen ? value < max : value <= max;
    if (!low || !high) {
      char text[160];
      std::snprintf(text, sizeof text, "%s is %g, outside %s%g, %g%s", field,
                    value, minOpen ? "(" : "[", min, max, maxOpen ? ")" : "]");
      error(text);
    }
  }

  /// A schedule built in memory can hold any value of an enumeration's
  /// underlying type; a file only the keywords.
  template <typename E> static bool isKnown(E value) {
    return static_cast<size_t>(value) < EnumKeywords<E>::keywords.size();
  }
  template <typename E> void known(E value, const std::string &field) const {
    if (!isKnown(value))
      error(field + " holds no value of its enumeration (" +
            std::to_string(static_cast<int>(value)) + ")");
  }

  void checkHeaderFields() {
    known(s.sharding, "sharding");
    known(s.model.family, "model.family");
    known(s.model.bertHead, "model.bert_head");
    known(s.train.optimizer.kind, "train.optimizer.kind");
    known(s.train.optimizer.decay, "train.optimizer.decay");
    known(s.train.precision, "train.precision");
    known(s.train.lossScale.kind, "train.loss_scale.kind");
    known(s.train.reduceDtype, "train.reduce_dtype");
    known(s.train.activationCheckpointing, "train.activation_checkpointing");
    known(s.train.lrSchedule.kind, "train.lr_schedule.kind");
    if (s.version != kScheduleFormatVersion)
      error("schedule version " + std::to_string(s.version) +
            " is not this reader's " + std::to_string(kScheduleFormatVersion));
    std::string mesh = "mesh ";
    if (s.pipeline != 1) {
      mesh += std::to_string(s.pipeline);
      mesh += " x ";
    }
    mesh += std::to_string(s.replicate);
    mesh += " x ";
    mesh += std::to_string(s.shard);
    mesh += " x ";
    mesh += std::to_string(s.tensor);
    if (s.pipeline < 1 || s.replicate < 1 || s.shard < 1 || s.tensor < 1)
      error(mesh +
            ": pipeline, replicate, shard and tensor must be at least 1");
    if (s.cluster.nodes < 1 || s.cluster.gpusPerNode < 1)
      error("cluster: nodes and gpus_per_node must be at least 1");
    if (__int128(s.pipeline) * s.replicate * s.shard * s.tensor > kMaxRanks)
      error(mesh + " has more than " + std::to_string(kMaxRanks) + " ranks");
    __int128 world = __int128(s.pipeline) * s.replicate * s.shard * s.tensor;
    if (world != __int128(s.cluster.nodes) * s.cluster.gpusPerNode)
      error(mesh + " is not the cluster's " + std::to_string(s.cluster.nodes) +
            " x " + std::to_string(s.cluster.gpusPerNode) + " ranks");
    if (s.sequenceParallel && s.tensor == 1)
      error("mesh: sequence_parallel without a tensor axis (tensor is 1)");
    if (s.microBatches < 1)
      error("micro_batches must be at least 1");
    if (s.microBatches != s.train.gradAccum)
      error("micro_batches " + std::to_string(s.microBatches) +
            " is not train.grad_accum " + std::to_string(s.train.gradAccum));
    if (s.train.microBatch < 1 || s.train.seqLen < 1)
      error("train: micro_batch and seq_len must be at least 1");
    const ModelConfig &m = s.model;
    finite(m.ropeTheta, "model.rope_theta");
    finite(m.normEps, "model.norm_eps");
    if (m.ropeScaling) {
      finite(m.ropeScaling->factor, "model.rope_scaling.factor");
      finite(m.ropeScaling->lowFreqFactor,
             "model.rope_scaling.low_freq_factor");
      finite(m.ropeScaling->highFreqFactor,
             "model.rope_scaling.high_freq_factor");
    }
    const DeviceConfig &d = s.cluster.device;
    finite(d.bf16Tflops, "cluster.device.bf16_tflops");
    finite(d.fp16Tflops, "cluster.device.fp16_tflops");
    finite(d.fp32Tflops, "cluster.device.fp32_tflops");
    finite(d.hbmBandwidth, "cluster.device.hbm_bandwidth");
    finite(d.nvlinkBandwidth, "cluster.device.nvlink_bandwidth");
    finite(d.pcieBandwidth, "cluster.device.pcie_bandwidth");
    finite(s.cluster.interNodeBandwidth, "cluster.inter_node_bandwidth");
    const TrainConfig &t = s.train;
    constexpr double inf = std::numeric_limits<double>::infinity();
    inRange(t.optimizer.lr, "train.optimizer.lr", 0, true, inf, true);
    inRange(t.optimizer.beta1, "train.optimizer.beta1", 0, false, 1, true);
    inRange(t.optimizer.beta2, "train.optimizer.beta2", 0, false, 1, true);
    inRange(t.optimizer.eps, "train.optimizer.eps", 0, true, inf, true);
    inRange(t.optimizer.weightDecay, "train.optimizer.weight_decay", 0, false,
            inf, true);
    inRange(t.optimizer.momentum, "train.optimizer.momentum", 0, false, 1,
            true);
    if (t.lossScale.kind != LossScaleKind::None) {
      inRange(t.lossScale.initial, "train.loss_scale.initial", 0, true, inf,
              true);
      if (t.lossScale.growthInterval < 1)
        error("train.loss_scale.growth_interval must be at least 1");
    }
    inRange(t.gradClip, "train.grad_clip", 0, false, inf, true);
    inRange(t.lrSchedule.minLrRatio, "train.lr_schedule.min_lr_ratio", 0, false,
            1, false);
    if (t.lrSchedule.warmup < 0)
      error("train.lr_schedule.warmup is negative");
    if (t.steps < 0)
      error("train.steps is negative");
    // The model: sizes that make a model, and the numbers its math takes.
    // (A program without units is a test's fragment of one: nothing runs a
    // model there.)
    if (s.units.empty())
      return;
    if (m.vocab < 1 || m.hidden < 1 || m.intermediate < 1 || m.layers < 1 ||
        m.heads < 1 || m.kvHeads < 1 || m.maxSeqLen < 1)
      error("model: vocab, hidden, intermediate, layers, heads, kv_heads and "
            "max_seq_len must be at least 1");
    if (m.hidden % m.heads != 0 || m.heads % m.kvHeads != 0)
      error("model: hidden " + std::to_string(m.hidden) + ", heads " +
            std::to_string(m.heads) + " and kv_heads " +
            std::to_string(m.kvHeads) +
            " do not divide (hidden by heads, heads by kv_heads)");
    if (t.seqLen > m.maxSeqLen)
      error("train.seq_len " + std::to_string(t.seqLen) +
            " exceeds model.max_seq_len " + std::to_string(m.maxSeqLen));
    // What the parts of a tensor-parallel unit divide (docs/language.md,
    // "Tensor parallelism"; the plan's checker says it first).
    if (s.tensor > 1) {
      if (!tp::roleOf(UnitKind::Embedding, m.family))
        error(std::string("mesh: tensor parallelism splits Llama and GPT-2 "
                          "units, not ") +
              toString(m.family) + "'s");
      if (m.heads % s.tensor != 0 || m.kvHeads % s.tensor != 0)
        error("model: heads " + std::to_string(m.heads) + " and kv_heads " +
              std::to_string(m.kvHeads) + " are not multiples of tensor " +
              std::to_string(s.tensor));
      if (s.sequenceParallel && t.seqLen % s.tensor != 0)
        error("train.seq_len " + std::to_string(t.seqLen) +
              " is not a multiple of tensor " + std::to_string(s.tensor) +
              " (sequence parallelism divides the sequence)");
    }
    inRange(m.normEps, "model.norm_eps", 0, true, 1, true);
    if (m.family == ModelFamily::Llama)
      inRange(m.ropeTheta, "model.rope_theta", 1, false, inf, true);
  }

  void checkUnits() {
    // Stored parameters first: a tied parameter may name one in a later unit.
    struct Stored {
      int64_t unit, offset;
      bool frozen = false;
    };
    std::unordered_map<std::string, Stored> stored;
    std::unordered_set<std::string> paramNames;
    std::unordered_map<std::string, int64_t> paramNumel;
    for (size_t u = 0; u < s.units.size(); ++u) {
      const Unit &unit = s.units[u];
      std::string where = "unit '" + unit.name + "'";
      known(unit.kind, where + " kind");
      if (!unitIndex.emplace(unit.name, u).second)
        error("units: duplicate unit '" + unit.name + "'");
      if (unit.numel < 0 || unit.numel > kMaxElements)
        error(where + ": numel " + std::to_string(unit.numel) +
              " out of range");
      if (unit.frozenNumel < 0 || unit.frozenNumel > kMaxElements)
        error(where + ": frozen_numel " + std::to_string(unit.frozenNumel) +
              " out of range");
      if (unit.frozenNumel > 0 && !s.model.lora)
        error(where + ": frozen parameters, but the model has no lora");
      if (unit.stage < 0 || unit.stage >= s.pipeline)
        error(where + ": stage " + std::to_string(unit.stage) +
              " is not one of the pipeline's " + std::to_string(s.pipeline));
      int64_t next = 0, nextFrozen = 0;
      for (const Param &p : unit.params) {
        if (!paramNames.insert(p.name).second)
          error(where + ": duplicate parameter '" + p.name + "'");
        if (p.shape.empty())
          error(where + ": parameter '" + p.name + "' has no shape");
        __int128 numel = 1;
        for (int64_t d : p.shape) {
          if (d < 1)
            error(where + ": parameter '" + p.name +
                  "' has a dimension below 1");
          numel *= d;
          if (numel > kMaxElements)
            error(where + ": parameter '" + p.name + "' is too large");
        }
        if (p.split) {
          if (!p.tiedTo.empty())
            error(where + ": tied parameter '" + p.name +
                  "' is split as the parameter it ties to is, not by itself");
          if (p.split->dim < 0 ||
              p.split->dim >= static_cast<int64_t>(p.shape.size()) ||
              p.split->chunks < 1 ||
              p.shape[p.split->dim] % p.split->chunks != 0)
            error(where + ": parameter '" + p.name + "' has split dim " +
                  std::to_string(p.split->dim) + " in " +
                  std::to_string(p.split->chunks) + " parts, which its shape " +
                  support::shapeString(p.shape) + " does not have");
        }
        // A tie compares whole parameters; what one tensor rank stores is
        // its slice (all of it without a tensor axis).
        paramNumel[p.name] = static_cast<int64_t>(numel);
        numel = p.localNumel(s.tensor);
        if (!p.tiedTo.empty())
          continue;
        if (p.frozen) {
          // The frozen base: contiguous, in order, in the frozen elements.
          if (p.offset != nextFrozen)
            error(where + ": frozen parameter '" + p.name + "' is at offset " +
                  std::to_string(p.offset) + ", expected " +
                  std::to_string(nextFrozen));
          stored.emplace(p.name, Stored{int64_t(u), p.offset, true});
          nextFrozen += static_cast<int64_t>(numel);
          if (nextFrozen > unit.frozenNumel)
            error(where + ": frozen parameter '" + p.name +
                  "' ends past the unit's frozen_numel " +
                  std::to_string(unit.frozenNumel));
          continue;
        }
        if (p.offset != next)
          error(where + ": parameter '" + p.name + "' is at offset " +
                std::to_string(p.offset) + ", expected " +
                std::to_string(next) +
                " (stored parameters are contiguous, in order)");
        stored.emplace(p.name, Stored{int64_t(u), p.offset, false});
        next += static_cast<int64_t>(numel);
        if (next > unit.numel)
          error(where + ": parameter '" + p.name +
                "' ends past the unit's numel " + std::to_string(unit.numel));
      }
      if (next != unit.numel)
        error(where + ": numel " + std::to_string(unit.numel) + " is not the " +
              std::to_string(next) + " elements its parameters store");
      if (nextFrozen != unit.frozenNumel)
        error(where + ": frozen_numel " + std::to_string(unit.frozenNumel) +
              " is not the " + std::to_string(nextFrozen) +
              " elements its frozen parameters store");
    }
    if (s.units.empty())
      return;
    auto blocks =
        std::count_if(s.units.begin(), s.units.end(),
                      [](const Unit &unit) { return isBlockKind(unit.kind); });
    if (blocks != s.model.layers)
      error("model.layers is " + std::to_string(s.model.layers) +
            ", but the units hold " + std::to_string(blocks) + " layers");
    tiedUnit.assign(s.units.size(), -1);
    tiedFrozen.assign(s.units.size(), false);
    for (size_t u = 0; u < s.units.size(); ++u) {
      for (const Param &p : s.units[u].params) {
        if (p.tiedTo.empty())
          continue;
        std::string where = "unit '" + s.units[u].name + "'";
        auto it = stored.find(p.tiedTo);
        if (it == stored.end())
          error(where + ": parameter '" + p.name + "' is tied to '" + p.tiedTo +
                "', which is no stored parameter");
        if (it->second.unit == int64_t(u))
          error(where + ": parameter '" + p.name +
                "' is tied to a parameter of its own unit");
        if (tiedUnit[u] >= 0 && tiedUnit[u] != it->second.unit)
          error(where + " ties parameters of two units");
        if (paramNumel[p.name] != paramNumel[p.tiedTo])
          error(where + ": parameter '" + p.name + "' has another size than '" +
                p.tiedTo + "'");
        if (p.frozen != it->second.frozen)
          error(where + ": tied parameter '" + p.name + "' is " +
                (p.frozen ? "" : "not ") + "frozen, '" + p.tiedTo + "' is " +
                (it->second.frozen ? "" : "not"));
        if (p.offset != it->second.offset)
          error(where + ": tied parameter '" + p.name + "' has offset " +
                std::to_string(p.offset) + ", but '" + p.tiedTo + "' is at " +
                std::to_string(it->second.offset));
        tiedUnit[u] = it->second.unit;
        tiedFrozen[u] = it->second.frozen;
      }
    }
    bool tied = std::any_of(tiedUnit.begin(), tiedUnit.end(),
                            [](int64_t t) { return t >= 0; });
    // BERT's classification head has no decoder to tie.
    bool tiesSomething =
        s.model.tieEmbeddings &&
        !(s.model.family == ModelFamily::Bert &&
          s.model.bertHead == BertHead::SequenceClassification);
    if (tied != tiesSomething)
      error(std::string("model.tie_embeddings is ") +
            (s.model.tieEmbeddings ? "true" : "false") + ", but " +
            (tied ? "a parameter is tied" : "no parameter is tied"));
  }

  void checkGroups() {
    std::vector<int> unitGroups(s.units.size(), 0);
    for (size_t g = 0; g < s.groups.size(); ++g) {
      const Group &group = s.groups[g];
      std::string where = "group '" + group.name + "'";
      if (!groupIndex.emplace(group.name, g).second)
        error("groups: duplicate group '" + group.name + "'");
      if (group.units.empty())
        error(where + " has no units");
      // Each unit holds at most kMaxElements; a sum over many needs more
      // than 64 bits.
      __int128 numel = 0, frozenNumel = 0;
      const bool frozenBytes = storesFrozenAsBytes(group);
      const ElementType frozenType =
          frozenBytes ? ElementType::I8 : ElementType::F32;
      for (const std::string &unit : group.units) {
        auto it = unitIndex.find(unit);
        if (it == unitIndex.end())
          error(where + ": unknown unit '" + unit + "'");
        ++unitGroups[it->second];
        numel += s.units[it->second].numel;
        frozenNumel += s.units[it->second].frozenSizeIn(frozenType);
      }
      groupFrozenBytes.push_back(frozenBytes);
      checkFlatLayout(where, "", numel, group.numel, group.paddedNumel,
                      group.shardNumel);
      checkFlatLayout(where, "frozen_", frozenNumel, group.frozenNumel,
                      group.frozenPaddedNumel, group.frozenShardNumel);
    }
    for (size_t u = 0; u < s.units.size(); ++u)
      if (unitGroups[u] != 1)
        error("unit '" + s.units[u].name + "' is in " +
              std::to_string(unitGroups[u]) + " groups, not one");
  }

  /// Whether a group's frozen base is bytes: a unit stores part of its base
  /// in NF4.
  bool storesFrozenAsBytes(const Group &group) const {
    return std::any_of(group.units.begin(), group.units.end(),
                       [&](const std::string &unit) {
                         auto it = unitIndex.find(unit);
                         return it != unitIndex.end() &&
                                s.units[it->second].hasQuantizedBase();
                       });
  }

  /// A group's flat vector (its trainable elements, or with `prefix`
  /// "frozen_" its frozen base): `numel` is what its units store, padded to
  /// the next multiple of the shard axis, split evenly into shards.
  void checkFlatLayout(const std::string &where, const std::string &prefix,
                       __int128 unitsNumel, int64_t numel, int64_t paddedNumel,
                       int64_t shardNumel) {
    if (unitsNumel > kMaxElements)
      error(where + " holds more than 2^60 " + prefix + "elements");
    if (numel != unitsNumel)
      error(where + ": " + prefix + "numel " + std::to_string(numel) +
            " is not the " + std::to_string(static_cast<int64_t>(unitsNumel)) +
            " elements its units store");
    if (paddedNumel < numel || paddedNumel % s.shard != 0)
      error(where + ": " + prefix + "padded_numel " +
            std::to_string(paddedNumel) + " is not " + prefix +
            "numel rounded up to a multiple of the shard axis " +
            std::to_string(s.shard));
    if (paddedNumel - numel >= s.shard)
      error(where + ": " + prefix + "padded_numel " +
            std::to_string(paddedNumel) +
            " pads more than the shard axis needs");
    if (__int128(shardNumel) * s.shard != paddedNumel)
      error(where + ": " + prefix + "shard_numel " +
            std::to_string(shardNumel) + " x shard " + std::to_string(s.shard) +
            " is not " + prefix + "padded_numel " +
            std::to_string(paddedNumel));
  }

  void checkArenas() {
    for (const auto *sizes : {&prog().arenaBytes, &prog().persistentBytes})
      for (const auto &[space, bytes] : *sizes)
        known(space, "arena_bytes");
    if (prog().numEvents < 0)
      error("num_events is negative");
    for (const auto *sizes : {&prog().arenaBytes, &prog().persistentBytes})
      for (const auto &[space, bytes] : *sizes)
        if (bytes < 0)
          error(std::string("arena of ") + toString(space) +
                " has a negative size");
    for (const auto &[space, bytes] : prog().persistentBytes)
      if (!prog().arenaBytes.count(space) || bytes > prog().arenaSize(space))
        error(std::string("persistent_bytes of ") + toString(space) +
              " exceed its arena_bytes");
    if (prog().workspaceBytes < 0)
      error("workspace_bytes is negative");
  }

  void checkBuffers() {
    root.resize(prog().buffers.size());
    rootRange.resize(prog().buffers.size());
    for (size_t i = 0; i < prog().buffers.size(); ++i) {
      const Buffer &b = prog().buffers[i];
      // "buffer N", and an allocation's name once its kind is known to be
      // one: built only for an error, as a file has millions of buffers.
      bool named = false;
      auto where = [&] {
        std::string w = "buffer " + std::to_string(i);
        return named ? w + " ('" + b.name + "')" : w;
      };
      auto knownField = [&](auto value, const char *field) {
        if (!isKnown(value))
          known(value, where() + " " + field);
      };
      knownField(b.kind, "kind");
      knownField(b.type, "type");
      knownField(b.space, "space");
      knownField(b.role, "role");
      knownField(b.axis, "axis");
      if (b.numel < 1 || b.numel > kMaxElements)
        error(where() + ": numel " + std::to_string(b.numel) + " out of range");
      if (b.kind == Buffer::Kind::Alloc) {
        root[i] = static_cast<int64_t>(i);
        rootRange[i] = {0, b.numel};
        named = true;
        auto arena = prog().arenaBytes.find(b.space);
        if (arena == prog().arenaBytes.end())
          error(where() + ": no arena for memory space " + toString(b.space));
        __int128 end =
            __int128(b.offset) + __int128(b.numel) * elementBytes(b.type);
        if (b.offset < 0 || end > arena->second)
          error(where() + ": bytes [" + std::to_string(b.offset) + ", " +
                std::to_string(static_cast<int64_t>(end)) +
                ") lie outside the " + toString(b.space) + " arena of " +
                std::to_string(arena->second) + " bytes");
        if (b.offset % static_cast<int64_t>(elementBytes(b.type)) != 0)
          error(where() + ": offset " + std::to_string(b.offset) +
                " is not a multiple of its " + toString(b.type) +
                " elements' size");
        if (b.held && b.persistent)
          error(where() + ": held and persistent: only a transient buffer is "
                          "held");
        if (b.persistent) {
          auto block = prog().persistentBytes.find(b.space);
          if (block == prog().persistentBytes.end() || end > block->second)
            error(where() +
                  ": persistent, but outside the persistent block of the " +
                  std::string(toString(b.space)) + " arena");
        }
        if (!b.group.empty()) {
          auto g = groupIndex.find(b.group);
          if (g == groupIndex.end())
            error(where() + ": unknown group '" + b.group + "'");
          const Group &group = s.groups[g->second];
          bool frozen = b.role == BufferRole::Frozen;
          if (frozen &&
              (b.type == ElementType::I8) != groupFrozenBytes[g->second])
            error(where() + ": group '" + b.group +
                  "' stores its frozen base " +
                  (b.type == ElementType::I8 ? "in elements, not bytes"
                                             : "in bytes (NF4), not elements"));
          if (!frozen && b.type == ElementType::I8)
            error(where() + ": only a frozen base is stored in bytes (i8)");
          int64_t expected =
              b.sharded
                  ? (frozen ? group.frozenShardNumel : group.shardNumel)
                  : (frozen ? group.frozenPaddedNumel : group.paddedNumel);
          if (b.numel != expected)
            error(where() + ": " + (b.sharded ? "a shard" : "all") +
                  " of group '" + b.group + "' must have " +
                  std::to_string(expected) + " elements, not " +
                  std::to_string(b.numel));
        } else if (b.sharded) {
          error(where() + ": sharded, but of no group");
        }
        continue;
      }
      if (b.source < 0 || b.source >= int64_t(i))
        error(where() + ": source " + std::to_string(b.source) +
              " is not an earlier buffer");
      root[i] = root[b.source];
      const Buffer &src = prog().buffers[b.source];
      if (src.type != b.type || src.space != b.space)
        error(where() + ": type or memory space differs from its source " +
              std::to_string(b.source));
      if (b.kind == Buffer::Kind::View) {
        if (b.viewOffset < 0 || b.viewOffset > src.numel - b.numel)
          error(where() + ": elements [" + std::to_string(b.viewOffset) + ", " +
                std::to_string(b.viewOffset + b.numel) +
                ") lie outside its source's " + std::to_string(src.numel));
        rootRange[i] = {rootRange[b.source].first + b.viewOffset,
                        rootRange[b.source].first + b.viewOffset + b.numel};
      } else if (__int128(b.numel) * axisSize(b.axis) != src.numel) {
        error(where() + ": shard of " + std::to_string(b.numel) + " x " +
              std::to_string(axisSize(b.axis)) + " ranks is not its source's " +
              std::to_string(src.numel) + " elements");
      }
      if (b.kind == Buffer::Kind::ShardView)
        rootRange[i] = rootRange[b.source];
    }
  }

  enum class Life : uint8_t { NotYet, Live, Freed };
  enum class EventState : uint8_t { NotYet, Signalled, Waited };

  void checkOps();

public:
  std::unordered_map<std::string, size_t> unitIndex, groupIndex;
  /// By group: whether its frozen base is bytes.
  std::vector<bool> groupFrozenBytes;
};

/// The relations an op's ODS definition lists (SchedContract.td,
/// `fileChecks`), called by the generated `check` of each op struct once its
/// ids are known to be in range. An absent optional operand is -1 and takes
/// no part.
class OpChecker {
public:
  /// Checks op `op` of the program.
  OpChecker(const ScheduleValidator &v, size_t op) : v(v), op(op) {}

  void sameElementType(std::initializer_list<field::NamedIds> operands) {
    allAlike(operands, "element types",
             [&](int64_t id) { return std::string(toString(type(id))); });
  }

  void elementTypeF32(std::initializer_list<field::NamedIds> operands) {
    for (const field::NamedIds &o : operands)
      for (int64_t id : o.ids)
        if (id >= 0 && type(id) != ElementType::F32)
          fail(std::string(o.name) + " " + v.bufferName(id) + " is " +
               toString(type(id)) + ", not f32");
  }

  void sameNumel(std::initializer_list<field::NamedIds> operands) {
    allAlike(operands, "sizes",
             [&](int64_t id) { return std::to_string(numel(id)); });
  }

  void numelTimesGroup(GroupAxis group, field::NamedIds whole,
                       field::NamedIds part) {
    int64_t k = v.axisSize(group);
    int64_t w = numel(whole.ids[0]), p = numel(part.ids[0]);
    if (__int128(p) * k != w)
      fail(std::string(whole.name) + " has " + std::to_string(w) +
           " elements, not " + std::to_string(k) + " (the " + toString(group) +
           " group's size) times " + part.name + "'s " + std::to_string(p));
  }

  void rankOfGroup(GroupAxis group, const char *name, int64_t rank) {
    if (rank < 0 || rank >= v.axisSize(group))
      fail(std::string(name) + " " + std::to_string(rank) +
           " is not a rank of the " + toString(group) + " group (" +
           std::to_string(v.axisSize(group)) + " ranks)");
  }

  void unitStorage(int64_t unit, field::NamedIds params, field::NamedIds tied,
                   field::NamedIds frozen) {
    const Unit &u = v.s.units[unit];
    int64_t p = params.ids[0], t = tied.ids[0], f = frozen.ids[0];
    // Compute reads a frozen base in the working type, the parameters'.
    for (auto [o, id] : {std::pair(frozen, f), std::pair(tied, t)})
      if (id >= 0 &&
          (type(id) == ElementType::I8 || (p >= 0 && type(id) != type(p))))
        fail(std::string(o.name) + " " + v.bufferName(id) + " is " +
             toString(type(id)) +
             (p >= 0 ? ", not the parameters' " + std::string(toString(type(p)))
                     : std::string(", bytes")) +
             ": a base stored otherwise is converted by dequantize first");
    // The trainable elements, and a LoRA run's frozen base: each given
    // exactly when the unit stores some.
    flatOperand(u, params, p, u.numel, "");
    flatOperand(u, frozen, f, u.frozenNumel, "frozen_");
    int64_t tiedTo = v.tiedUnit[unit];
    if ((t >= 0) != (tiedTo >= 0))
      fail("unit '" + u.name + "' " +
           (tiedTo >= 0
                ? "ties parameters but has no " + std::string(tied.name)
                : "ties no parameter but has " + std::string(tied.name)));
    if (t >= 0) {
      const Unit &to = v.s.units[tiedTo];
      bool toFrozen = v.tiedFrozen[unit];
      if (numel(t) != (toFrozen ? to.frozenNumel : to.numel))
        fail(std::string(tied.name) + " " + v.bufferName(t) + " is not the " +
             (toFrozen ? "frozen" : "stored") + " elements of unit '" +
             to.name + "'");
    }
  }

  /// `stored` holds `unit`'s frozen base as stored (its bytes in an i8
  /// buffer, its elements otherwise, in the unit's part of a group's frozen
  /// buffer when a view of one); `working` its frozen elements in a float
  /// type.
  void frozenStorage(int64_t unit, field::NamedIds stored,
                     field::NamedIds working) {
    const Unit &u = v.s.units[unit];
    int64_t src = stored.ids[0], dst = working.ids[0];
    if (u.frozenNumel == 0)
      fail("unit '" + u.name + "' has no frozen parameters");
    if (type(src) != ElementType::I8 && u.hasQuantizedBase())
      fail(std::string(stored.name) + " " + v.bufferName(src) + " is " +
           toString(type(src)) + ", but unit '" + u.name +
           "' stores part of its base in NF4 (bytes, i8)");
    flatOperand(u, stored, src, u.frozenSizeIn(type(src)), "frozen_");
    if (type(dst) == ElementType::I8)
      fail(std::string(working.name) + " " + v.bufferName(dst) +
           " holds bytes, not the working type");
    if (numel(dst) != u.frozenNumel)
      fail(std::string(working.name) + " " + v.bufferName(dst) + " has " +
           std::to_string(numel(dst)) + " elements, unit '" + u.name +
           "' has " + std::to_string(u.frozenNumel) + " frozen elements");
  }

  /// `id` (operand `o`): given iff the unit stores elements of this kind
  /// (`unitNumel` > 0), of that size, and when it is a view into a group's
  /// whole persistent vector, the unit's own elements (another unit's of
  /// the same size would train, or compute with, the wrong weights).
  void flatOperand(const Unit &u, field::NamedIds o, int64_t id,
                   int64_t unitNumel, const char *prefix) {
    std::string name = std::string(o.name);
    if (unitNumel == 0) {
      if (id >= 0)
        fail(name + " " + v.bufferName(id) + " given, but unit '" + u.name +
             "' stores no " + prefix + "elements");
      return;
    }
    if (id < 0) {
      fail("unit '" + u.name + "' has no " + name);
      return;
    }
    if (numel(id) != unitNumel)
      fail(name + " " + v.bufferName(id) + " has " + std::to_string(numel(id)) +
           " elements, unit '" + u.name + "' stores " +
           std::to_string(unitNumel) + " " + prefix + "elements");
    int64_t offset = 0, b = id;
    while (v.prog().buffers[b].kind == Buffer::Kind::View) {
      offset += v.prog().buffers[b].viewOffset;
      b = v.prog().buffers[b].source;
    }
    const Buffer &root = v.prog().buffers[b];
    if (root.kind == Buffer::Kind::Alloc && !root.group.empty() &&
        !root.sharded) {
      const Group &g = v.s.groups[v.groupIndex.at(root.group)];
      const bool frozenBase = root.role == BufferRole::Frozen;
      int64_t start = 0;
      bool found = false;
      for (const std::string &member : g.units) {
        if (member == u.name) {
          found = true;
          break;
        }
        const Unit &before = v.s.units[v.unitIndex.at(member)];
        start += frozenBase ? before.frozenSizeIn(root.type) : before.numel;
      }
      if (!found || offset != start)
        fail(name + " " + v.bufferName(id) + " are elements [" +
             std::to_string(offset) + ", " +
             std::to_string(offset + numel(id)) + ") of group '" + g.name +
             "', not unit '" + u.name + "'s");
    }
  }

  void roles(std::initializer_list<field::NamedIds> operands,
             std::initializer_list<std::string_view> allowed) {
    for (const field::NamedIds &o : operands)
      for (int64_t id : o.ids) {
        if (id < 0)
          continue;
        std::string_view role = toString(v.prog().buffers[v.root[id]].role);
        if (std::find(allowed.begin(), allowed.end(), role) != allowed.end())
          continue;
        std::string expected;
        for (std::string_view r : allowed)
          expected += (expected.empty() ? "" : " or ") + std::string(r);
        fail(std::string(o.name) + " " + v.bufferName(id) + " is " +
             std::string(role) + " memory, not " + expected);
      }
  }

  void optimizerState(field::NamedIds state) {
    const OptimizerConfig &optimizer = v.s.train.optimizer;
    int64_t expected = optimizerStateCount(optimizer);
    if (int64_t(state.ids.size()) != expected)
      fail(std::string(toString(optimizer.kind)) +
           (optimizer.kind == OptimizerKind::SGD && expected ? " with momentum"
                                                             : "") +
           " keeps " + std::to_string(expected) + " " + state.name +
           " buffers, not " + std::to_string(state.ids.size()));
  }

  void tiedGrads(int64_t unit, field::NamedIds tied, field::NamedIds grads) {
    bool trains = tied.ids[0] >= 0 && !v.tiedFrozen[unit];
    if ((grads.ids[0] >= 0) != trains)
      fail(std::string(grads.name) + " must be given exactly when " +
           tied.name + " is and the tied parameters train" +
           (tied.ids[0] >= 0
                ? " (these are " + std::string(v.tiedFrozen[unit]
                                                   ? "a frozen base)"
                                                   : "trained)")
                : ""));
  }

  /// Whether unit `u` is the first (last) of its pipeline chunk: the unit
  /// before (after) it is computed by another stage. Chunks follow the
  /// units' order, and two neighbouring chunks are on neighbouring stages.
  bool startsChunk(int64_t u) const {
    return u > 0 && v.s.units[u - 1].stage != v.s.units[u].stage;
  }
  bool endsChunk(int64_t u) const {
    return u + 1 < static_cast<int64_t>(v.s.units.size()) &&
           v.s.units[u + 1].stage != v.s.units[u].stage;
  }

  /// What a pipeline stage's program may do: compute only its own units;
  /// exchange hidden states (`in`, `out`, `out_grad`, `in_grad`) only where
  /// a unit's chunk meets another, and send and receive them only there,
  /// with the neighbour that computes the other side; collectives on the
  /// pipeline group only with one, on the embedding group only on its first
  /// and last stage.
  template <typename T> void pipelineStage(const T &op) {
    const Schedule &s = v.s;
    const int64_t stage = v.programIndex;
    if constexpr (requires { op.group; }) {
      if constexpr (std::is_same_v<std::decay_t<decltype(op.group)>,
                                   GroupAxis>) {
        bool acrossStages =
            op.group == GroupAxis::Pipeline || op.group == GroupAxis::Embedding;
        if (acrossStages && s.pipeline == 1)
          fail(std::string("group ") + toString(op.group) +
               " on a mesh without a pipeline axis");
        else if (op.group == GroupAxis::Embedding && stage != 0 &&
                 stage != s.pipeline - 1)
          fail("group embedding on stage " + std::to_string(stage) +
               ": only the pipeline's first and last stages are in it");
      }
    }
    if constexpr (std::is_same_v<T, ops::Send> ||
                  std::is_same_v<T, ops::Recv>) {
      if (s.pipeline == 1)
        fail("a pipeline program's op, which this schedule's mesh (no "
             "pipeline axis) cannot run");
      const Unit &unit = s.units[op.unit];
      if (!endsChunk(op.unit))
        fail("unit '" + unit.name +
             "' is not the last of a pipeline chunk: only those outputs "
             "cross to another stage");
      // A send to next and a receive from next are the producer's side.
      bool producer = op.peer == Peer::Next;
      int64_t expected = producer ? unit.stage : s.units[op.unit + 1].stage;
      if (expected != stage)
        fail("the output of unit '" + unit.name + "' is exchanged with " +
             toString(op.peer) + " by stage " + std::to_string(expected) +
             ", not this one");
      int64_t hidden = v.exchangeShape().stream();
      if (numel(op.buffer) != hidden)
        fail("buffer has " + std::to_string(numel(op.buffer)) +
             " elements, not one micro-batch's " + std::to_string(hidden) +
             " hidden states");
      return;
    }
    if constexpr (requires { op.unit; }) {
      if (s.units[op.unit].stage != stage)
        fail("unit '" + s.units[op.unit].name + "' is computed by stage " +
             std::to_string(s.units[op.unit].stage) + ", not this one");
      if (s.pipeline == 1 || s.tensor != 1)
        return;
      // A stage's compute op is one part (tensorParallelism), with hidden
      // states at its chunk's edges (a recompute exchanges none).
      int64_t hidden = v.exchangeShape().stream();
      constexpr bool recompute = std::is_same_v<T, ops::Recompute>;
      if constexpr (requires { op.in; }) {
        exchange("in", op.in, !recompute && startsChunk(op.unit), hidden, 0,
                 op.unit);
        exchange("out", op.out, !recompute && endsChunk(op.unit), hidden, 0,
                 op.unit);
      }
      if constexpr (requires { op.inGrad; }) {
        exchange("in_grad", op.inGrad, startsChunk(op.unit), hidden, 0,
                 op.unit);
        exchange("out_grad", op.outGrad, endsChunk(op.unit), hidden, 0,
                 op.unit);
      }
    }
  }

  /// The fields of a tensor-parallel program (TensorParallelParts.h). On a
  /// mesh without a tensor axis, none: the tensor group, a unit computed in
  /// parts, the buffers its parts exchange, the loss's statistics, a norm
  /// weighing tensor replicas. On one with: every compute op is a part of
  /// its unit's role, with the exchange buffers of its place between the
  /// cuts, each of the size the cut gives it (what the model reads and
  /// writes), and the loss reads every rank's statistics. Recompute's
  /// `from` is part 0's alone.
  template <typename T> void tensorParallelism(const T &op) {
    const Schedule &s = v.s;
    if (s.tensor == 1) {
      auto refuse = [&](const char *what) {
        fail(std::string(what) +
             ": a tensor-parallel program, which this schedule's mesh (no "
             "tensor axis) cannot run");
      };
      if constexpr (requires { op.group; }) {
        if constexpr (std::is_same_v<std::decay_t<decltype(op.group)>,
                                     GroupAxis>)
          if (op.group == GroupAxis::Tensor)
            refuse("group tensor");
      }
      if constexpr (requires { op.part; })
        if (op.part != 0)
          refuse("part above 0");
      // A pipeline stage's edges are pipelineStage's.
      if constexpr (requires { op.in; })
        if (s.pipeline == 1 && (op.in >= 0 || op.out >= 0))
          refuse("in/out");
      if constexpr (requires { op.inGrad; })
        if (s.pipeline == 1 && (op.inGrad >= 0 || op.outGrad >= 0))
          refuse("in_grad/out_grad");
      if constexpr (requires { op.stats; })
        if (op.stats >= 0)
          refuse("stats");
      if constexpr (requires { op.tensorReplicas; })
        if (op.tensorReplicas)
          refuse("tensor_replicas");
      if constexpr (std::is_same_v<T, ops::Recompute>)
        if (op.input < 0)
          fail("from is missing: a recompute starts from the saved input");
      return;
    }
    const tp::ExchangeShape shape = v.exchangeShape();
    if constexpr (std::is_same_v<T, ops::Loss>) {
      int64_t want = shape.consumed(tp::Boundary::LossStatistics);
      if (op.stats < 0)
        fail("stats are missing: a tensor-parallel loss reads every rank's "
             "statistics");
      if (numel(op.stats) != want)
        fail("stats " + v.bufferName(op.stats) + " has " +
             std::to_string(numel(op.stats)) + " elements, not " +
             std::to_string(want));
    }
    if constexpr (requires { op.part; }) {
      std::optional<tp::UnitRole> role =
          tp::roleOf(s.units[op.unit].kind, s.model.family);
      if (!role)
        fail("unit '" + s.units[op.unit].name +
             "' has no tensor-parallel parts");
      auto cuts = tp::boundaries(*role);
      int64_t parts = tp::partCount(*role);
      if (op.part < 0 || op.part >= parts)
        fail("part " + std::to_string(op.part) + " is not one of the " +
             std::to_string(parts) + " parts of unit '" +
             s.units[op.unit].name + "'");
      const bool first = op.part == 0;
      const bool hasCut = op.part < static_cast<int64_t>(cuts.size());
      // A pipeline stage's input into part 0 of a chunk's first unit, its
      // output out of the last part of a chunk's last unit (a recompute
      // neither): the residual stream, where no cut is.
      constexpr bool recompute = std::is_same_v<T, ops::Recompute>;
      const bool starts = !recompute && first && startsChunk(op.unit);
      const bool ends =
          !recompute && op.part + 1 == parts && endsChunk(op.unit);
      int64_t consumed =
          first ? shape.stream() : shape.consumed(cuts[op.part - 1]);
      int64_t produced =
          hasCut ? shape.produced(cuts[op.part]) : shape.stream();
      if constexpr (requires { op.in; }) {
        exchange("in", op.in, !first || starts, consumed, op.part, op.unit);
        exchange("out", op.out, hasCut || ends, produced, op.part, op.unit);
      }
      if constexpr (requires { op.inGrad; }) {
        bool seeded = hasCut && cuts[op.part] != tp::Boundary::LossStatistics;
        exchange("in_grad", op.inGrad, !first || starts, consumed, op.part,
                 op.unit);
        exchange("out_grad", op.outGrad, seeded || ends, produced, op.part,
                 op.unit);
      }
      if constexpr (std::is_same_v<T, ops::Recompute>)
        if ((op.input >= 0) != first)
          fail(first ? "from is missing: a recompute starts from the saved "
                       "input"
                     : "from is given for a later part, which starts from "
                       "its in");
    }
  }

  void givenTogether(field::NamedIds a, field::NamedIds b) {
    if ((a.ids[0] >= 0) != (b.ids[0] >= 0))
      fail(std::string(a.name) + " and " + b.name +
           " must be given together or not at all");
  }

private:
  [[noreturn]] void fail(const std::string &what) const {
    v.error(v.opPlace(op) + ": " + what);
  }
  /// Exchange buffer `name` (`id`, -1 when absent) of part `part` of unit
  /// `unit`: present where the part's place says, of the size its cut (or
  /// a pipeline stage's edge) gives.
  void exchange(const char *name, int64_t id, bool present, int64_t elements,
                int64_t part, int64_t unit) const {
    if ((id >= 0) != present)
      fail(std::string(name) + (present ? " is missing" : " is given") +
           " for part " + std::to_string(part) + " of unit '" +
           v.s.units[unit].name + "'");
    if (present && numel(id) != elements)
      fail(std::string(name) + " " + v.bufferName(id) + " has " +
           std::to_string(numel(id)) + " elements, not " +
           std::to_string(elements));
  }
  /// Fails unless every given buffer of `operands` has the first one's
  /// `property` (an element type's or a size's spelling).
  template <typename Property>
  void allAlike(std::initializer_list<field::NamedIds> operands,
                const char *what, Property property) const {
    const field::NamedIds *first = nullptr;
    std::string firstValue;
    for (const field::NamedIds &o : operands)
      for (int64_t id : o.ids) {
        if (id < 0)
          continue;
        if (!first) {
          first = &o, firstValue = property(id);
          continue;
        }
        if (std::string value = property(id); value != firstValue)
          fail(std::string(first->name) + " and " + o.name +
               " have different " + what + " (" + firstValue + " and " + value +
               ")");
      }
  }
  ElementType type(int64_t id) const { return v.prog().buffers[id].type; }
  int64_t numel(int64_t id) const { return v.prog().buffers[id].numel; }

  const ScheduleValidator &v;
  size_t op;
};

void ScheduleValidator::checkOps() {
  // Each event is signalled by one op: more events than ops is a lie, and
  // must not size an allocation.
  if (prog().numEvents > int64_t(prog().ops.size()))
    error("num_events " + std::to_string(prog().numEvents) + " exceeds the " +
          std::to_string(prog().ops.size()) + " ops that could signal them");
  std::vector<Life> life(prog().buffers.size(), Life::NotYet);
  std::vector<EventState> events(prog().numEvents, EventState::NotYet);
  std::vector<int64_t> stepsOfGroup(s.groups.size(), 0);
  // The allocations alive at each point, per memory space: their bytes in
  // the arena must not overlap (start -> end, buffer).
  std::map<Space, std::map<int64_t, std::pair<int64_t, int64_t>>> liveBytes;
  auto place = [&](int64_t id, size_t op) {
    const Buffer &b = prog().buffers[id];
    // A held buffer's bytes are its holders' (expandTasks), placed as they
    // are allocated.
    if (b.held)
      return;
    int64_t end =
        b.offset + b.numel * static_cast<int64_t>(elementBytes(b.type));
    auto &live = liveBytes[b.space];
    auto next = live.lower_bound(b.offset);
    std::optional<int64_t> clash;
    if (next != live.end() && next->first < end)
      clash = next->second.second;
    if (next != live.begin() && std::prev(next)->second.first > b.offset)
      clash = std::prev(next)->second.second;
    if (clash)
      error(opPlace(op) + ": " + bufferName(id) + " at bytes [" +
            std::to_string(b.offset) + ", " + std::to_string(end) +
            ") of the " + toString(b.space) + " arena overlaps " +
            bufferName(*clash) + ", which is alive");
    live[b.offset] = {end, id};
  };

  InFlightOps inFlight(prog().buffers.size(), prog().numEvents);
  // What an op uses, for the races checked once its fields are, and the
  // events it starts after: cleared for each op, allocated once.
  struct Use {
    const char *field;
    int64_t buffer;
    field::Access access;
  };
  std::vector<Use> uses;
  std::vector<int64_t> after;
  for (size_t i = 0; i < prog().ops.size(); ++i) {
    const Op &op = prog().ops[i];
    uses.clear();
    after.clear();
    std::optional<int64_t> signals, waits;
    // Messages are built only on failure: millions of ops pass.
    auto fail = [&](const std::string &what) {
      error(opPlace(i) + ": " + what);
    };
    // A field's name and its value: "src 7", "after event 3" (the noun
    // only where the name is not one).
    auto named = [](const char *field, const char *noun) {
      std::string f = field;
      return f == noun ? f : f + " " + noun;
    };
    auto inRange = [&](int64_t b, const char *field) {
      if (b < 0 || b >= int64_t(prog().buffers.size()))
        fail(std::string(field) + " " + std::to_string(b) + " is no buffer");
    };
    auto allocation = [&](int64_t b, const char *field) {
      inRange(b, field);
      if (prog().buffers[b].kind != Buffer::Kind::Alloc)
        fail(std::string(field) + " " + bufferName(b) +
             " is a view, not an allocation");
    };
    // bufferName says "buffer N (...)": the field names its role.
    auto asField = [&](int64_t b, const char *field) {
      return std::string(field) == "buffer"
                 ? bufferName(b)
                 : std::string(field) + ", " + bufferName(b) + ",";
    };
    auto alive = [&](int64_t b, const char *field) {
      inRange(b, field);
      Life l = life[root[b]];
      if (l == Life::NotYet)
        fail(asField(b, field) + " is used before its allocation");
      if (l == Life::Freed)
        fail(asField(b, field) + " is used after its free");
    };
    auto useBuffer = [&](const field::Buffer &d, int64_t b) {
      uses.push_back({d.name, b, d.access});
      if (d.access == field::Access::Free) {
        allocation(b, d.name);
        alive(b, d.name);
        if (prog().buffers[b].persistent)
          fail(bufferName(b) + " is persistent and is never freed");
        life[b] = Life::Freed;
        if (!prog().buffers[b].held) // placed by its holders, not itself
          liveBytes[prog().buffers[b].space].erase(prog().buffers[b].offset);
        return;
      }
      alive(b, d.name);
      if (prog().buffers[root[b]].held)
        fail(asField(b, d.name) +
             " lies in a held buffer, which only its tasks' slots use");
      if (d.scalar && (prog().buffers[b].numel != 1 ||
                       prog().buffers[b].type != ElementType::F32))
        fail(std::string(d.name) + " " + bufferName(b) +
             " is not a one-element f32 scalar");
    };
    auto eventId = [&](int64_t e, const char *field) {
      if (e < 0 || e >= prog().numEvents)
        fail(named(field, "event") + " " + std::to_string(e) +
             " out of range (num_events " + std::to_string(prog().numEvents) +
             ")");
    };

    std::visit(
        [&](const auto &o) {
          using T = std::decay_t<decltype(o)>;
          T::fields(o, [&](auto d, const auto &value) {
            using D = decltype(d);
            if constexpr (std::is_same_v<D, field::Buffer>) {
              useBuffer(d, value);
            } else if constexpr (std::is_same_v<D, field::OptionalBuffer>) {
              if (value != -1)
                useBuffer(d, value);
            } else if constexpr (std::is_same_v<D, field::Buffers>) {
              for (int64_t b : value)
                useBuffer(d, b);
            } else if constexpr (std::is_same_v<D, field::DefinedBuffer>) {
              allocation(value, d.name);
              if (life[value] != Life::NotYet)
                fail(bufferName(value) + " is allocated twice");
              life[value] = Life::Live;
              place(value, i);
            } else if constexpr (std::is_same_v<D, field::Event>) {
              eventId(value, d.name);
              if (events[value] == EventState::NotYet)
                fail("event " + std::to_string(value) +
                     " is waited before any op signals it");
              if (events[value] == EventState::Waited)
                fail("event " + std::to_string(value) + " is waited twice");
              events[value] = EventState::Waited;
              waits = value;
            } else if constexpr (std::is_same_v<D, field::Events>) {
              for (int64_t e : value) {
                eventId(e, d.name);
                if (events[e] == EventState::NotYet)
                  fail(std::string(d.name) + " event " + std::to_string(e) +
                       " that no earlier op signals");
                after.push_back(e);
              }
            } else if constexpr (std::is_same_v<D, field::SignalledEvent>) {
              eventId(value, d.name);
              if (events[value] != EventState::NotYet)
                fail("event " + std::to_string(value) + " is signalled twice");
              events[value] = EventState::Signalled;
              signals = value;
            } else if constexpr (std::is_same_v<D, field::Float>) {
              if (!std::isfinite(value))
                fail(std::string(d.name) + " is not finite");
            } else if constexpr (std::is_same_v<D, field::UnitRef>) {
              if (value < 0 || value >= int64_t(s.units.size()))
                fail(std::string(d.name) + " " + std::to_string(value) +
                     " is no unit");
            } else if constexpr (std::is_same_v<D, field::GroupRef>) {
              if (value < 0 || value >= int64_t(s.groups.size()))
                fail(std::string(d.name) + " " + std::to_string(value) +
                     " is no group");
            } else if constexpr (std::is_same_v<D, field::MicroBatch>) {
              if (value < 0 || value >= s.microBatches)
                fail(std::string(d.name) + " " + std::to_string(value) +
                     " is not in [0, " + std::to_string(s.microBatches) + ")");
            } else if constexpr (isEnumField<D>) {
              using E = std::decay_t<decltype(value)>;
              if (static_cast<size_t>(value) >=
                  EnumKeywords<E>::keywords.size())
                fail(std::string(d.name) + " is no known value");
            } else {
              // Int and Flag: any value; an op's relations check what matters.
              static_assert(std::is_same_v<D, field::Int> ||
                            std::is_same_v<D, field::Flag>);
            }
          });
          OpChecker checker(*this, i);
          checker.pipelineStage(o);
          checker.tensorParallelism(o);
          T::check(o, checker);
          if constexpr (std::is_same_v<T, ops::OptimizerStep>)
            ++stepsOfGroup[o.group];
        },
        op.body);

    // Races with asynchronous ops still in flight (InFlightOps): a dropped
    // `after` or `wait` let a collective read a copy's staging buffer
    // before the copy had filled it.
    std::optional<size_t> async;
    if (signals)
      async = inFlight.issue(int64_t(i), *signals, after);
    auto racer = [&](const InFlightOps::Race &r) {
      return "op " + std::to_string(r.op) + " (" +
             toString(prog().ops[r.op].kind()) + ") still " +
             (r.writes ? "writes" : "reads") + " it (its event " +
             std::to_string(r.event) +
             (async ? " is neither waited for nor in this op's after)"
                    : " is not waited for yet)");
    };
    for (const Use &u : uses) {
      if (u.access == field::Access::Free) {
        if (auto r = inFlight.user(u.buffer))
          fail(bufferName(u.buffer) + " is freed while " + racer(*r));
        continue;
      }
      InFlightOps::Access a{root[u.buffer], rootRange[u.buffer].first,
                            rootRange[u.buffer].second,
                            field::writes(u.access)};
      if (auto r = inFlight.race(a, async))
        fail(std::string(u.field) + ", " + bufferName(u.buffer) + ", is " +
             (a.writes ? "written" : "read") + " while " + racer(*r));
    }
    if (async)
      for (const Use &u : uses)
        inFlight.hold(*async,
                      {root[u.buffer], rootRange[u.buffer].first,
                       rootRange[u.buffer].second, field::writes(u.access)});
    if (waits)
      inFlight.wait(*waits);
  }

  // One step of every group's parameters per program: a second one would
  // apply the update twice, a missing one leave the group untrained. (A
  // program that steps no group at all is a test's fragment.) A group of
  // only frozen elements (a LoRA base) has nothing to step.
  bool steps = std::any_of(stepsOfGroup.begin(), stepsOfGroup.end(),
                           [](int64_t n) { return n > 0; });
  // Under pipeline parallelism a stage steps the groups of its units.
  for (size_t g = 0; g < s.groups.size(); ++g)
    if (stepsOfGroup[g] > 1 ||
        (steps && stepsOfGroup[g] == 0 && s.groups[g].numel > 0 &&
         s.stageOf(s.groups[g]) == programIndex) ||
        (stepsOfGroup[g] > 0 && s.groups[g].numel == 0))
      error("group '" + s.groups[g].name + "' has " +
            std::to_string(stepsOfGroup[g]) + " optimizer_step ops, not one");

  for (int64_t e = 0; e < prog().numEvents; ++e)
    if (events[e] != EventState::Waited)
      error("event " + std::to_string(e) +
            (events[e] == EventState::NotYet ? " is never signalled"
                                             : " is never waited"));
  for (size_t b = 0; b < prog().buffers.size(); ++b) {
    if (prog().buffers[b].kind != Buffer::Kind::Alloc)
      continue;
    if (life[b] == Life::NotYet)
      error(bufferName(int64_t(b)) + " is never allocated");
    if (!prog().buffers[b].persistent && life[b] != Life::Freed)
      error(bufferName(int64_t(b)) + " is transient but never freed");
  }
}

} // namespace

ValidSchedule validateSchedule(Schedule schedule, const std::string &name) {
  // What holds a held buffer is a run of its program's tasks.
  for (size_t stage = 0; stage < schedule.programs.size(); ++stage) {
    const Program &p = schedule.programs[stage];
    if (!p.tasks.empty() || !p.runs.empty())
      continue;
    for (size_t b = 0; b < p.buffers.size(); ++b)
      if (p.buffers[b].kind == Buffer::Kind::Alloc && p.buffers[b].held)
        throw ScheduleFileError(name + ": " +
                                (schedule.programs.size() > 1
                                     ? "stage " + std::to_string(stage) + ": "
                                     : std::string()) +
                                "buffer " + std::to_string(b) + " ('" +
                                p.buffers[b].name +
                                "') is held, but its program has no tasks");
  }
  std::optional<Schedule> compact;
  if (std::any_of(schedule.programs.begin(), schedule.programs.end(),
                  [](const Program &p) {
                    return !p.tasks.empty() || !p.runs.empty();
                  })) {
    compact = schedule;
    expandTasks(schedule, name);
  }
  ScheduleValidator(schedule, name).run();
  return ValidSchedule(std::move(schedule), std::move(compact));
}

} // namespace plan::rt
