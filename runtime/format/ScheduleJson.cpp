//===- ScheduleJson.cpp - The JSON forms of a schedule's parts ------------===//
//
// docs/schedule-format.md is the specification of everything but the ops;
// the ops are written and read field by field from the generated op table
// (generated/ScheduleOps.h, docs/generated/schedule-ops.md), so an op's
// JSON form is its ODS definition's.
//
//===----------------------------------------------------------------------===//

#include "ScheduleJson.h"

#include "Parallel.h"

#include <charconv>
#include <type_traits>
#include <utility>

namespace plan::rt {
namespace {

template <typename> inline constexpr bool isEnumField = false;
template <typename E> inline constexpr bool isEnumField<field::Enum<E>> = true;

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

/// The default-constructed op of kind `index` (the alternatives of OpBody are
/// the OpKinds in order).
template <size_t... I>
OpBody makeBody(size_t index, std::index_sequence<I...>) {
  static constexpr OpBody (*make[])() = {
      []() -> OpBody { return std::variant_alternative_t<I, OpBody>{}; }...};
  return make[index]();
}

} // namespace

namespace {

void appendInt(std::string &out, int64_t value) {
  char digits[24];
  auto [end, ec] = std::to_chars(digits, digits + sizeof(digits), value);
  out.append(digits, end);
}

/// `[a,b,...]`.
void appendInts(std::string &out, const std::vector<int64_t> &values) {
  out += '[';
  for (size_t i = 0; i < values.size(); ++i) {
    if (i)
      out += ',';
    appendInt(out, values[i]);
  }
  out += ']';
}

/// `"name":`; names and keywords are identifiers (the op table's), which
/// need no escaping.
void appendKey(std::string &out, const char *name) {
  out += '"';
  out += name;
  out += "\":";
}

} // namespace

void appendOpJson(const Op &op, std::string &out) {
  std::visit(
      [&](const auto &o) {
        using T = std::decay_t<decltype(o)>;
        out += "{\"op\":\"";
        out += toString(T::kind);
        out += '"';
        T::fields(o, [&](auto descriptor, const auto &value) {
          using V = std::decay_t<decltype(value)>;
          out += ',';
          appendKey(out, descriptor.name);
          if constexpr (isEnumField<decltype(descriptor)>) {
            out += '"';
            out += toString(value);
            out += '"';
          } else if constexpr (std::is_same_v<V, std::vector<int64_t>>) {
            appendInts(out, value);
          } else if constexpr (std::is_same_v<V, bool>) {
            out += value ? "true" : "false";
          } else if constexpr (std::is_same_v<V, double>) {
            out += Json(value).dump(); // JSON's own number form
          } else {
            appendInt(out, value);
          }
        });
      },
      op.body);
  out += ',';
  appendKey(out, "line");
  appendInt(out, op.line);
  out += '}';
}

Json opToJson(const Op &op) {
  std::string text;
  appendOpJson(op, text);
  return Json::parse(text);
}

Op opFromJson(const JsonReader &r, const Json &j, const JsonPath &at) {
  Op op;
  OpKind kind = r.getKeyword<OpKind>(j, at, "op");
  op.body = makeBody(static_cast<size_t>(kind),
                     std::make_index_sequence<std::variant_size_v<OpBody>>());
  size_t keys = 2; // "op" and "line"
  std::visit(
      [&](auto &o) {
        using T = std::decay_t<decltype(o)>;
        T::fields(o, [&](auto descriptor, auto &value) {
          using D = decltype(descriptor);
          using V = std::decay_t<decltype(value)>;
          ++keys;
          if constexpr (isEnumField<D>)
            value = r.getKeyword<V>(j, at, descriptor.name);
          else if constexpr (std::is_same_v<V, std::vector<int64_t>>)
            value = r.getInts(j, at, descriptor.name);
          else if constexpr (std::is_same_v<V, double>)
            value = r.getNumber(j, at, descriptor.name);
          else if constexpr (std::is_same_v<V, bool>)
            value = r.getBool(j, at, descriptor.name);
          else
            value = r.getInt(j, at, descriptor.name);
        });
      },
      op.body);
  if (j.size() != keys)
    for (auto it = j.begin(); it != j.end(); ++it) {
      bool known = it.key() == "op" || it.key() == "line";
      std::visit(
          [&](auto &o) {
            std::decay_t<decltype(o)>::fields(o, [&](auto descriptor, auto &) {
              known |= it.key() == descriptor.name;
            });
          },
          op.body);
      if (!known)
        r.fail(at, "unknown field '" + it.key() + "' of " + toString(kind) +
                       " (docs/generated/schedule-ops.md "
                       "lists its fields)");
    }
  int64_t line = r.getInt(j, at, "line");
  if (line < 0 || line > int64_t(UINT32_MAX))
    r.fail(at.member("line"), "line number out of range");
  op.line = static_cast<uint32_t>(line);
  return op;
}

//===----------------------------------------------------------------------===//
// Model, cluster, training recipe
//===----------------------------------------------------------------------===//

Json modelToJson(const ModelConfig &m) {
  Json j;
  j["family"] = toString(m.family);
  j["preset"] = m.preset;
  j["vocab"] = m.vocab;
  j["hidden"] = m.hidden;
  j["intermediate"] = m.intermediate;
  j["layers"] = m.layers;
  j["heads"] = m.heads;
  j["kv_heads"] = m.kvHeads;
  j["max_seq_len"] = m.maxSeqLen;
  j["rope_theta"] = m.ropeTheta;
  if (m.ropeScaling) {
    Json r;
    r["factor"] = m.ropeScaling->factor;
    r["low_freq_factor"] = m.ropeScaling->lowFreqFactor;
    r["high_freq_factor"] = m.ropeScaling->highFreqFactor;
    r["original_max_seq_len"] = m.ropeScaling->originalMaxSeqLen;
    j["rope_scaling"] = std::move(r);
  } else {
    j["rope_scaling"] = nullptr;
  }
  j["norm_eps"] = m.normEps;
  j["tie_embeddings"] = m.tieEmbeddings;
  j["type_vocab"] = m.typeVocab;
  j["bert_head"] = toString(m.bertHead);
  j["num_labels"] = m.numLabels;
  if (m.lora)
    j["lora"] = Json{{"rank", m.lora->rank},
                     {"alpha", m.lora->alpha},
                     {"dropout", m.lora->dropout},
                     {"targets", m.lora->targets}};
  else
    j["lora"] = nullptr;
  return j;
}

ModelConfig modelFromJson(const JsonReader &r, const Json &j,
                          const JsonPath &at) {
  ModelConfig m;
  m.family = r.getKeyword<ModelFamily>(j, at, "family");
  m.preset = r.getString(j, at, "preset");
  m.vocab = r.getInt(j, at, "vocab");
  m.hidden = r.getInt(j, at, "hidden");
  m.intermediate = r.getInt(j, at, "intermediate");
  m.layers = r.getInt(j, at, "layers");
  m.heads = r.getInt(j, at, "heads");
  m.kvHeads = r.getInt(j, at, "kv_heads");
  m.maxSeqLen = r.getInt(j, at, "max_seq_len");
  m.ropeTheta = r.getNumber(j, at, "rope_theta");
  const Json &rope = r.member(j, at, "rope_scaling");
  if (!rope.is_null()) {
    JsonPath p = at.member("rope_scaling");
    RopeScaling s;
    s.factor = r.getNumber(rope, p, "factor");
    s.lowFreqFactor = r.getNumber(rope, p, "low_freq_factor");
    s.highFreqFactor = r.getNumber(rope, p, "high_freq_factor");
    s.originalMaxSeqLen = r.getInt(rope, p, "original_max_seq_len");
    m.ropeScaling = s;
  }
  m.normEps = r.getNumber(j, at, "norm_eps");
  m.tieEmbeddings = r.getBool(j, at, "tie_embeddings");
  m.typeVocab = r.getInt(j, at, "type_vocab");
  m.bertHead = r.getKeyword<BertHead>(j, at, "bert_head");
  m.numLabels = r.getInt(j, at, "num_labels");
  const Json &lora = r.member(j, at, "lora");
  if (!lora.is_null()) {
    JsonPath p = at.member("lora");
    LoraConfig l;
    l.rank = r.getInt(lora, p, "rank");
    l.alpha = r.getNumber(lora, p, "alpha");
    l.dropout = r.getNumber(lora, p, "dropout");
    l.targets = r.getStrings(lora, p, "targets");
    m.lora = std::move(l);
  }
  return m;
}

namespace {

Json clusterToJson(const ClusterConfig &c) {
  Json d;
  d["name"] = c.device.name;
  d["memory"] = c.device.memory;
  d["bf16_tflops"] = c.device.bf16Tflops;
  d["fp16_tflops"] = c.device.fp16Tflops;
  d["fp32_tflops"] = c.device.fp32Tflops;
  d["hbm_bandwidth"] = c.device.hbmBandwidth;
  d["nvlink_bandwidth"] = c.device.nvlinkBandwidth;
  d["pcie_bandwidth"] = c.device.pcieBandwidth;
  Json j;
  j["nodes"] = c.nodes;
  j["gpus_per_node"] = c.gpusPerNode;
  j["device"] = std::move(d);
  j["host_memory"] = c.hostMemory;
  j["inter_node_bandwidth"] = c.interNodeBandwidth;
  return j;
}

ClusterConfig clusterFromJson(const JsonReader &r, const Json &j,
                              const JsonPath &at) {
  ClusterConfig c;
  c.nodes = r.getInt(j, at, "nodes");
  c.gpusPerNode = r.getInt(j, at, "gpus_per_node");
  JsonPath dp = at.member("device");
  const Json &d = r.getObject(j, at, "device");
  c.device.name = r.getString(d, dp, "name");
  c.device.memory = r.getInt(d, dp, "memory");
  c.device.bf16Tflops = r.getNumber(d, dp, "bf16_tflops");
  c.device.fp16Tflops = r.getNumber(d, dp, "fp16_tflops");
  c.device.fp32Tflops = r.getNumber(d, dp, "fp32_tflops");
  c.device.hbmBandwidth = r.getNumber(d, dp, "hbm_bandwidth");
  c.device.nvlinkBandwidth = r.getNumber(d, dp, "nvlink_bandwidth");
  c.device.pcieBandwidth = r.getNumber(d, dp, "pcie_bandwidth");
  c.hostMemory = r.getInt(j, at, "host_memory");
  c.interNodeBandwidth = r.getNumber(j, at, "inter_node_bandwidth");
  return c;
}

Json trainToJson(const TrainConfig &t) {
  Json o;
  o["kind"] = toString(t.optimizer.kind);
  o["lr"] = t.optimizer.lr;
  o["beta1"] = t.optimizer.beta1;
  o["beta2"] = t.optimizer.beta2;
  o["eps"] = t.optimizer.eps;
  o["weight_decay"] = t.optimizer.weightDecay;
  o["decay"] = toString(t.optimizer.decay);
  o["momentum"] = t.optimizer.momentum;
  Json ls;
  ls["kind"] = toString(t.lossScale.kind);
  ls["initial"] = t.lossScale.initial;
  ls["growth_interval"] = t.lossScale.growthInterval;
  Json lr;
  lr["kind"] = toString(t.lrSchedule.kind);
  lr["warmup"] = t.lrSchedule.warmup;
  lr["min_lr_ratio"] = t.lrSchedule.minLrRatio;
  Json j;
  j["optimizer"] = std::move(o);
  j["micro_batch"] = t.microBatch;
  j["seq_len"] = t.seqLen;
  j["grad_accum"] = t.gradAccum;
  j["precision"] = toString(t.precision);
  j["loss_scale"] = std::move(ls);
  j["reduce_dtype"] = toString(t.reduceDtype);
  j["activation_checkpointing"] = toString(t.activationCheckpointing);
  j["grad_clip"] = t.gradClip;
  j["lr_schedule"] = std::move(lr);
  j["steps"] = t.steps;
  j["seed"] = t.seed;
  return j;
}

TrainConfig trainFromJson(const JsonReader &r, const Json &j,
                          const JsonPath &at) {
  TrainConfig t;
  JsonPath op = at.member("optimizer");
  const Json &o = r.getObject(j, at, "optimizer");
  t.optimizer.kind = r.getKeyword<OptimizerKind>(o, op, "kind");
  t.optimizer.lr = r.getNumber(o, op, "lr");
  t.optimizer.beta1 = r.getNumber(o, op, "beta1");
  t.optimizer.beta2 = r.getNumber(o, op, "beta2");
  t.optimizer.eps = r.getNumber(o, op, "eps");
  t.optimizer.weightDecay = r.getNumber(o, op, "weight_decay");
  t.optimizer.decay = r.getKeyword<WeightDecayScope>(o, op, "decay");
  t.optimizer.momentum = r.getNumber(o, op, "momentum");
  t.microBatch = r.getInt(j, at, "micro_batch");
  t.seqLen = r.getInt(j, at, "seq_len");
  t.gradAccum = r.getInt(j, at, "grad_accum");
  t.precision = r.getKeyword<Precision>(j, at, "precision");
  JsonPath lsp = at.member("loss_scale");
  const Json &ls = r.getObject(j, at, "loss_scale");
  t.lossScale.kind = r.getKeyword<LossScaleKind>(ls, lsp, "kind");
  t.lossScale.initial = r.getNumber(ls, lsp, "initial");
  t.lossScale.growthInterval = r.getInt(ls, lsp, "growth_interval");
  t.reduceDtype = r.getKeyword<DType>(j, at, "reduce_dtype");
  t.activationCheckpointing =
      r.getKeyword<Checkpointing>(j, at, "activation_checkpointing");
  t.gradClip = r.getNumber(j, at, "grad_clip");
  JsonPath lrp = at.member("lr_schedule");
  const Json &lr = r.getObject(j, at, "lr_schedule");
  t.lrSchedule.kind = r.getKeyword<LRScheduleKind>(lr, lrp, "kind");
  t.lrSchedule.warmup = r.getInt(lr, lrp, "warmup");
  t.lrSchedule.minLrRatio = r.getNumber(lr, lrp, "min_lr_ratio");
  t.steps = r.getInt(j, at, "steps");
  t.seed = r.getInt(j, at, "seed");
  return t;
}

void appendBufferJson(const Buffer &b, std::string &out) {
  auto keyword = [&](const char *name, const char *value, bool first = false) {
    if (!first)
      out += ',';
    appendKey(out, name);
    out += '"';
    out += value;
    out += '"';
  };
  auto integer = [&](const char *name, int64_t value) {
    out += ',';
    appendKey(out, name);
    appendInt(out, value);
  };
  auto flag = [&](const char *name, bool value) {
    out += ',';
    appendKey(out, name);
    out += value ? "true" : "false";
  };
  // Names come from the model's: JSON's escaping.
  auto string = [&](const char *name, const std::string &value) {
    out += ',';
    appendKey(out, name);
    out += Json(value).dump();
  };
  out += '{';
  keyword("kind", toString(b.kind), /*first=*/true);
  keyword("type", toString(b.type));
  keyword("space", toString(b.space));
  integer("numel", b.numel);
  switch (b.kind) {
  case Buffer::Kind::Alloc:
    string("name", b.name);
    keyword("role", toString(b.role));
    flag("persistent", b.persistent);
    flag("held", b.held);
    integer("offset", b.offset);
    string("group", b.group);
    flag("sharded", b.sharded);
    break;
  case Buffer::Kind::View:
    integer("source", b.source);
    integer("offset", b.viewOffset);
    break;
  case Buffer::Kind::ShardView:
    integer("source", b.source);
    keyword("axis", toString(b.axis));
    break;
  case Buffer::Kind::Slot:
    integer("source", b.source);
    integer("slots", b.slots);
    integer("shift", b.shift);
    integer("group", b.slotGroup);
    integer("stride", b.slotStride);
    integer("offset", b.slotOffset);
    break;
  }
  out += '}';
}

Buffer bufferFromJson(const JsonReader &r, const Json &j, const JsonPath &at) {
  Buffer b;
  b.kind = r.getKeyword<Buffer::Kind>(j, at, "kind");
  b.type = r.getKeyword<ElementType>(j, at, "type");
  b.space = r.getKeyword<Space>(j, at, "space");
  b.numel = r.getInt(j, at, "numel");
  switch (b.kind) {
  case Buffer::Kind::Alloc:
    b.name = r.getString(j, at, "name");
    b.role = r.getKeyword<BufferRole>(j, at, "role");
    b.persistent = r.getBool(j, at, "persistent");
    b.held = r.getBool(j, at, "held");
    b.offset = r.getInt(j, at, "offset");
    b.group = r.getString(j, at, "group");
    b.sharded = r.getBool(j, at, "sharded");
    break;
  case Buffer::Kind::View:
    b.source = r.getInt(j, at, "source");
    b.viewOffset = r.getInt(j, at, "offset");
    break;
  case Buffer::Kind::ShardView:
    b.source = r.getInt(j, at, "source");
    b.axis = r.getKeyword<GroupAxis>(j, at, "axis");
    break;
  case Buffer::Kind::Slot:
    b.source = r.getInt(j, at, "source");
    b.slots = r.getInt(j, at, "slots");
    b.shift = r.getInt(j, at, "shift");
    b.slotGroup = r.getInt(j, at, "group");
    b.slotStride = r.getInt(j, at, "stride");
    b.slotOffset = r.getInt(j, at, "offset");
    break;
  }
  return b;
}

Json arenaToJson(const std::map<Space, int64_t> &sizes) {
  Json j = Json::object();
  for (const auto &[space, bytes] : sizes)
    j[toString(space)] = bytes;
  return j;
}

std::map<Space, int64_t> arenaFromJson(const JsonReader &r, const Json &j,
                                       const JsonPath &at) {
  std::map<Space, int64_t> sizes;
  r.object(j, at);
  for (auto it = j.begin(); it != j.end(); ++it) {
    std::optional<Space> space = parseKeyword<Space>(it.key());
    if (!space)
      r.fail(at, "unknown memory space '" + it.key() + "' (expected one of " +
                     keywordList<Space>() + ")");
    sizes[*space] = r.integer(it.value(), at.member(it.key()));
  }
  return sizes;
}

} // namespace

//===----------------------------------------------------------------------===//
// Units and groups
//===----------------------------------------------------------------------===//

Json unitsToJson(const std::vector<Unit> &units) {
  Json out = Json::array();
  for (const Unit &u : units) {
    Json params = Json::array();
    for (const Param &p : u.params) {
      Json param{{"name", p.name},
                 {"shape", p.shape},
                 {"offset", p.offset},
                 {"tied_to", p.tiedTo},
                 {"frozen", p.frozen}};
      if (p.frozen)
        param["base"] = toString(p.base);
      if (p.split)
        param["split"] =
            Json{{"dim", p.split->dim}, {"chunks", p.split->chunks}};
      params.push_back(std::move(param));
    }
    out.push_back(Json{{"name", u.name},
                       {"kind", toString(u.kind)},
                       {"numel", u.numel},
                       {"frozen_numel", u.frozenNumel},
                       {"stage", u.stage},
                       {"params", std::move(params)}});
  }
  return out;
}

std::vector<Unit> unitsFromJson(const JsonReader &r, const Json &j,
                                const JsonPath &at) {
  r.array(j, at);
  std::vector<Unit> units;
  units.reserve(j.size());
  for (size_t i = 0; i < j.size(); ++i) {
    JsonPath p = at.element(i);
    Unit u;
    u.name = r.getString(j[i], p, "name");
    u.kind = r.getKeyword<UnitKind>(j[i], p, "kind");
    u.numel = r.getInt(j[i], p, "numel");
    u.frozenNumel = r.getInt(j[i], p, "frozen_numel");
    u.stage = r.getInt(j[i], p, "stage");
    JsonPath pp = p.member("params");
    const Json &params = r.getArray(j[i], p, "params");
    for (size_t k = 0; k < params.size(); ++k) {
      JsonPath q = pp.element(k);
      Param param;
      param.name = r.getString(params[k], q, "name");
      param.shape = r.getInts(params[k], q, "shape");
      param.offset = r.getInt(params[k], q, "offset");
      param.tiedTo = r.getString(params[k], q, "tied_to");
      param.frozen = r.getBool(params[k], q, "frozen");
      if (param.frozen)
        param.base = r.getKeyword<BaseStorage>(params[k], q, "base");
      if (params[k].is_object() && params[k].contains("split")) {
        JsonPath sp = q.member("split");
        const Json &split = r.getObject(params[k], q, "split");
        param.split = TensorSplit{r.getInt(split, sp, "dim"),
                                  r.getInt(split, sp, "chunks")};
      }
      u.params.push_back(std::move(param));
    }
    units.push_back(std::move(u));
  }
  return units;
}

Json groupsToJson(const std::vector<Group> &groups) {
  Json out = Json::array();
  for (const Group &g : groups)
    out.push_back(Json{{"name", g.name},
                       {"units", g.units},
                       {"numel", g.numel},
                       {"padded_numel", g.paddedNumel},
                       {"shard_numel", g.shardNumel},
                       {"frozen_numel", g.frozenNumel},
                       {"frozen_padded_numel", g.frozenPaddedNumel},
                       {"frozen_shard_numel", g.frozenShardNumel}});
  return out;
}

std::vector<Group> groupsFromJson(const JsonReader &r, const Json &j,
                                  const JsonPath &at) {
  r.array(j, at);
  std::vector<Group> groups;
  for (size_t i = 0; i < j.size(); ++i) {
    JsonPath p = at.element(i);
    Group g;
    g.name = r.getString(j[i], p, "name");
    g.units = r.getStrings(j[i], p, "units");
    g.numel = r.getInt(j[i], p, "numel");
    g.paddedNumel = r.getInt(j[i], p, "padded_numel");
    g.shardNumel = r.getInt(j[i], p, "shard_numel");
    g.frozenNumel = r.getInt(j[i], p, "frozen_numel");
    g.frozenPaddedNumel = r.getInt(j[i], p, "frozen_padded_numel");
    g.frozenShardNumel = r.getInt(j[i], p, "frozen_shard_numel");
    groups.push_back(std::move(g));
  }
  return groups;
}

//===----------------------------------------------------------------------===//
// The body
//===----------------------------------------------------------------------===//

/// `[e0,e1,...]`, each element written by `append(element, out)`.
template <typename T>
static void appendArrayJson(const std::vector<T> &elements,
                            void (*append)(const T &, std::string &),
                            std::string &out) {
  out += '[';
  for (size_t i = 0; i < elements.size(); ++i) {
    if (i)
      out += ',';
    append(elements[i], out);
  }
  out += ']';
}

/// `"name":value`.
static void appendIntMember(std::string &out, const char *name, int64_t value) {
  appendKey(out, name);
  appendInt(out, value);
}

/// `[[a,b],...]`: a run table's order, a task's slot events.
static void appendPairs(const std::vector<std::pair<int64_t, int64_t>> &pairs,
                        std::string &out) {
  out += '[';
  for (size_t i = 0; i < pairs.size(); ++i) {
    out += i ? ",[" : "[";
    appendInt(out, pairs[i].first);
    out += ',';
    appendInt(out, pairs[i].second);
    out += ']';
  }
  out += ']';
}

/// `"num_events":...,"buffers":[...],"ops":[...]`: what a program and a task
/// each define.
static void appendOpsAndIds(int64_t numEvents,
                            const std::vector<Buffer> &buffers,
                            const std::vector<Op> &ops, std::string &out) {
  appendIntMember(out, "num_events", numEvents);
  out += ',';
  appendKey(out, "buffers");
  appendArrayJson(buffers, appendBufferJson, out);
  out += ',';
  appendKey(out, "ops");
  appendArrayJson(ops, appendOpJson, out);
}

/// A program's fields (`"arena_bytes":...,"runs":[...]`), at the top level
/// of the body without a pipeline and in each element of `stages` with one.
/// Written as text as they go: the buffers and ops are most of a large
/// schedule's bytes, and a tree of them costs more than the text.
static void appendProgramFields(const Program &p, std::string &out) {
  appendKey(out, "arena_bytes");
  out += arenaToJson(p.arenaBytes).dump();
  out += ',';
  appendKey(out, "persistent_bytes");
  out += arenaToJson(p.persistentBytes).dump();
  out += ',';
  appendIntMember(out, "workspace_bytes", p.workspaceBytes);
  out += ',';
  appendOpsAndIds(p.numEvents, p.buffers, p.ops, out);
  out += ',';
  appendIntMember(out, "slot_event_families", p.slotEventFamilies);
  out += ',';
  appendKey(out, "tasks");
  out += '[';
  for (size_t t = 0; t < p.tasks.size(); ++t) {
    const Task &task = p.tasks[t];
    out += t ? ",{" : "{";
    appendIntMember(out, "micro_batch", task.microBatch);
    out += ',';
    appendKey(out, "slot_events");
    appendPairs(task.slotEvents, out);
    out += ',';
    appendOpsAndIds(task.numEvents, task.buffers, task.ops, out);
    out += '}';
  }
  out += "],";
  appendKey(out, "runs");
  out += '[';
  for (size_t r = 0; r < p.runs.size(); ++r) {
    const TaskRuns &runs = p.runs[r];
    out += r ? ",{" : "{";
    appendIntMember(out, "at", runs.at);
    out += ',';
    appendIntMember(out, "buffers_before", runs.buffersBefore);
    out += ',';
    appendIntMember(out, "events_before", runs.eventsBefore);
    out += ',';
    appendKey(out, "order");
    appendPairs(runs.order, out);
    out += ',';
    appendKey(out, "picks");
    appendInts(out, runs.picks);
    out += '}';
  }
  out += ']';
}

/// The elements of `array` (at `at`), each read by `read`.
template <typename T>
static std::vector<T>
arrayFromJson(const JsonReader &r, const Json &array, const JsonPath &at,
              T (*read)(const JsonReader &, const Json &, const JsonPath &)) {
  std::vector<T> out;
  out.reserve(array.size());
  for (size_t i = 0; i < array.size(); ++i)
    out.push_back(read(r, array[i], at.element(i)));
  return out;
}

/// Calls `fn(element, path)` for each element of the array `name` of
/// `object` (at `at`), each of which must be an object.
template <typename Fn>
static void forEachObject(const JsonReader &r, const Json &object,
                          const JsonPath &at, const char *name, Fn fn) {
  JsonPath path = at.member(name);
  const Json &array = r.getArray(object, at, name);
  for (size_t i = 0; i < array.size(); ++i)
    fn(r.object(array[i], path.element(i)), path.element(i));
}

/// What appendPairs wrote, as member `name` of `j`; `what` says what each
/// pair is.
static std::vector<std::pair<int64_t, int64_t>>
pairsFromJson(const JsonReader &r, const Json &j, const JsonPath &at,
              const char *name, const char *what) {
  JsonPath path = at.member(name);
  const Json &array = r.getArray(j, at, name);
  std::vector<std::pair<int64_t, int64_t>> pairs;
  pairs.reserve(array.size());
  for (size_t k = 0; k < array.size(); ++k) {
    JsonPath entryAt = path.element(k);
    const Json &entry = r.array(array[k], entryAt);
    if (entry.size() != 2)
      r.fail(entryAt, std::string("must be ") + what);
    pairs.emplace_back(r.integer(entry[0], entryAt.element(0)),
                       r.integer(entry[1], entryAt.element(1)));
  }
  return pairs;
}

/// What appendOpsAndIds wrote, from the object `j` at `at`.
static void opsAndIdsFromJson(const JsonReader &r, const Json &j,
                              const JsonPath &at, int64_t &numEvents,
                              std::vector<Buffer> &buffers,
                              std::vector<Op> &ops) {
  numEvents = r.getInt(j, at, "num_events");
  buffers = arrayFromJson(r, r.getArray(j, at, "buffers"), at.member("buffers"),
                          bufferFromJson);
  ops =
      arrayFromJson(r, r.getArray(j, at, "ops"), at.member("ops"), opFromJson);
}

static Program programFromJson(const JsonReader &r, const Json &root,
                               const JsonPath &at) {
  if (!root.is_object())
    r.fail(at, "must be an object");
  Program p;
  p.arenaBytes = arenaFromJson(r, r.member(root, at, "arena_bytes"),
                               at.member("arena_bytes"));
  p.persistentBytes = arenaFromJson(r, r.member(root, at, "persistent_bytes"),
                                    at.member("persistent_bytes"));
  p.workspaceBytes = r.getInt(root, at, "workspace_bytes");
  opsAndIdsFromJson(r, root, at, p.numEvents, p.buffers, p.ops);
  p.slotEventFamilies = r.getInt(root, at, "slot_event_families");

  forEachObject(
      r, root, at, "tasks", [&](const Json &j, const JsonPath &where) {
        Task task;
        task.microBatch = r.getInt(j, where, "micro_batch");
        task.slotEvents =
            pairsFromJson(r, j, where, "slot_events", "[family, shift]");
        opsAndIdsFromJson(r, j, where, task.numEvents, task.buffers, task.ops);
        p.tasks.push_back(std::move(task));
      });
  forEachObject(r, root, at, "runs", [&](const Json &j, const JsonPath &where) {
    TaskRuns runs;
    runs.at = r.getInt(j, where, "at");
    runs.buffersBefore = r.getInt(j, where, "buffers_before");
    runs.eventsBefore = r.getInt(j, where, "events_before");
    runs.order = pairsFromJson(r, j, where, "order", "[task, micro-batch]");
    runs.picks = r.getInts(j, where, "picks");
    p.runs.push_back(std::move(runs));
  });
  return p;
}

void appendScheduleBody(const Schedule &s, std::string &out) {
  Json j;
  j["producer"] = s.producer;
  j["plan"] = s.planName;
  j["source_file"] = s.sourceFile;
  j["mesh"] = Json{{"pipeline", s.pipeline},
                   {"replicate", s.replicate},
                   {"shard", s.shard},
                   {"tensor", s.tensor},
                   {"sequence_parallel", s.sequenceParallel}};
  j["sharding"] = toString(s.sharding);
  j["model"] = modelToJson(s.model);
  j["cluster"] = clusterToJson(s.cluster);
  j["train"] = trainToJson(s.train);
  j["units"] = unitsToJson(s.units);
  j["groups"] = groupsToJson(s.groups);
  j["micro_batches"] = s.microBatches;
  // The programs' fields follow the others in the same object: the object
  // so far, without its closing brace.
  std::string head = j.dump();
  head.pop_back();
  size_t ops = 0;
  for (const Program &p : s.programs)
    ops += p.ops.size() + p.buffers.size();
  out.reserve(out.size() + head.size() + 128 * ops);
  out += head;
  out += ',';
  if (s.pipeline == 1 && s.programs.size() == 1) {
    appendProgramFields(s.programs.front(), out);
  } else {
    // Each stage's fields written on a thread of its own.
    std::vector<std::string> stages(s.programs.size());
    support::parallelFor(stages.size(), [&](size_t i) {
      appendProgramFields(s.programs[i], stages[i]);
    });
    appendKey(out, "stages");
    out += '[';
    for (size_t i = 0; i < stages.size(); ++i) {
      out += i ? ",{" : "{";
      out += stages[i];
      out += '}';
    }
    out += ']';
  }
  out += '}';
}

Schedule scheduleFromJson(const JsonReader &r, const Json &root) {
  JsonPath at;
  if (!root.is_object())
    r.fail(at, "the body is not a JSON object");
  Schedule s;
  s.producer = r.getString(root, at, "producer");
  s.planName = r.getString(root, at, "plan");
  s.sourceFile = r.getString(root, at, "source_file");
  JsonPath mp = at.member("mesh");
  const Json &mesh = r.getObject(root, at, "mesh");
  s.pipeline = r.getInt(mesh, mp, "pipeline");
  s.replicate = r.getInt(mesh, mp, "replicate");
  s.shard = r.getInt(mesh, mp, "shard");
  s.tensor = r.getInt(mesh, mp, "tensor");
  s.sequenceParallel = r.getBool(mesh, mp, "sequence_parallel");
  s.sharding = r.getKeyword<Sharding>(root, at, "sharding");
  s.model = modelFromJson(r, r.member(root, at, "model"), at.member("model"));
  s.cluster =
      clusterFromJson(r, r.member(root, at, "cluster"), at.member("cluster"));
  s.train = trainFromJson(r, r.member(root, at, "train"), at.member("train"));
  s.units = unitsFromJson(r, r.member(root, at, "units"), at.member("units"));
  s.groups =
      groupsFromJson(r, r.member(root, at, "groups"), at.member("groups"));
  s.microBatches = r.getInt(root, at, "micro_batches");
  s.programs.clear();
  if (s.pipeline == 1) {
    s.programs.push_back(programFromJson(r, root, at));
    return s;
  }
  JsonPath sp = at.member("stages");
  const Json &stages = r.getArray(root, at, "stages");
  for (size_t i = 0; i < stages.size(); ++i)
    s.programs.push_back(programFromJson(r, stages[i], sp.element(i)));
  return s;
}

} // namespace plan::rt
