//===- ScheduleFile.cpp - Reading and writing schedule files --------------===//
//
// docs/schedule-format.md is the specification; this file and it must agree.
// The reader trusts nothing: sizes are compared before anything is read,
// the body is checked against its CRC before it is parsed, every field's
// type is checked before it is converted, and validateSchedule checks every
// id before the executor indexes with it.
//
//===----------------------------------------------------------------------===//

#include "ScheduleFile.h"

#include <nlohmann/json.hpp>
#include <zlib.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <unordered_map>
#include <unordered_set>

namespace plan::rt {

namespace {

// insertion-ordered: the body lists fields in the order the spec does.
using Json = nlohmann::ordered_json;

constexpr char kMagic[8] = {'P', 'L', 'A', 'N', 'S', 'C', 'H', 'D'};
constexpr size_t kHeaderBytes = 32;
// The format nests four levels (root, units, params, shape); anything much
// deeper is not a schedule, and refusing it bounds the parser's work.
constexpr int kMaxJsonDepth = 16;
// Bounds that keep every size computation inside 64 bits; far above any
// real schedule (2^60 elements is 4 EiB of fp32).
constexpr int64_t kMaxElements = int64_t(1) << 60;
constexpr int64_t kMaxRanks = int64_t(1) << 24;

[[noreturn]] void fail(const std::string &name, const std::string &reason) {
  throw ScheduleFileError(name + ": " + reason);
}

//===----------------------------------------------------------------------===//
// Header
//===----------------------------------------------------------------------===//

void putLE(std::string &out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i)
    out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

uint64_t getLE(std::string_view in, size_t at, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i)
    value |= uint64_t(static_cast<unsigned char>(in[at + i])) << (8 * i);
  return value;
}

uint32_t crc32Of(std::string_view body) {
  // zlib takes uInt lengths: feed large bodies in pieces.
  uLong crc = crc32(0L, Z_NULL, 0);
  while (!body.empty()) {
    size_t piece = std::min<size_t>(body.size(), 1u << 30);
    crc = crc32(crc, reinterpret_cast<const Bytef *>(body.data()),
                static_cast<uInt>(piece));
    body.remove_prefix(piece);
  }
  return static_cast<uint32_t>(crc);
}

/// Checks the header against the file and returns the body.
std::string_view checkHeader(std::string_view bytes, const std::string &name) {
  if (bytes.size() < kHeaderBytes)
    fail(name, "truncated: " + std::to_string(bytes.size()) +
                   " bytes, shorter than the " + std::to_string(kHeaderBytes) +
                   "-byte schedule file header");
  if (std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0)
    fail(name, "not a schedule file (no PLANSCHD magic; write one with "
               "`planc FILE.plan -o FILE.sched`)");
  uint32_t version = static_cast<uint32_t>(getLE(bytes, 8, 4));
  if (version > kScheduleFormatVersion)
    fail(name, "schedule format version " + std::to_string(version) +
                   " is newer than this reader supports (" +
                   std::to_string(kScheduleFormatVersion) +
                   "); rebuild plan-run from the planc that wrote it");
  if (version < kScheduleFormatVersion)
    fail(name, "schedule format version " + std::to_string(version) +
                   " is not supported (this reader reads version " +
                   std::to_string(kScheduleFormatVersion) +
                   "); recompile the plan with planc");
  uint32_t flags = static_cast<uint32_t>(getLE(bytes, 12, 4));
  if (flags != 0)
    fail(
        name, "unknown header flags 0x" + [&] {
          char hex[9];
          std::snprintf(hex, sizeof(hex), "%x", flags);
          return std::string(hex);
        }() + " (version 1 defines none)");
  uint64_t bodySize = getLE(bytes, 16, 8);
  uint64_t available = bytes.size() - kHeaderBytes;
  if (bodySize > available)
    fail(name, "truncated: the header announces a " + std::to_string(bodySize) +
                   "-byte body but the file holds " +
                   std::to_string(available) + " bytes after the header");
  if (bodySize < available)
    fail(name, "size mismatch: " + std::to_string(available - bodySize) +
                   " unexpected bytes after the " + std::to_string(bodySize) +
                   "-byte body");
  if (getLE(bytes, 28, 4) != 0)
    fail(name, "reserved header bytes 28..31 are not zero");
  std::string_view body = bytes.substr(kHeaderBytes);
  uint32_t expected = static_cast<uint32_t>(getLE(bytes, 24, 4));
  uint32_t actual = crc32Of(body);
  if (expected != actual) {
    char text[128];
    std::snprintf(text, sizeof(text),
                  "checksum mismatch (CRC-32 of the body is %08x, the header "
                  "says %08x): the file is corrupted",
                  actual, expected);
    fail(name, text);
  }
  return body;
}

/// The deepest nesting of arrays and objects in `text`, outside strings.
int nestingDepth(std::string_view text) {
  int depth = 0, deepest = 0;
  bool inString = false, escaped = false;
  for (char c : text) {
    if (inString) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        inString = false;
      continue;
    }
    if (c == '"')
      inString = true;
    else if (c == '[' || c == '{')
      deepest = std::max(deepest, ++depth);
    else if (c == ']' || c == '}')
      --depth;
  }
  return deepest;
}

//===----------------------------------------------------------------------===//
// Writing the body
//===----------------------------------------------------------------------===//

/// nlohmann writes a non-finite double as null, which no reader accepts.
double finite(double value, const char *field) {
  if (!std::isfinite(value))
    throw ScheduleFileError(std::string("schedule: ") + field +
                            " is not a finite number");
  return value;
}

Json toJson(const ModelConfig &m) {
  Json j;
  j["family"] = m.family;
  j["preset"] = m.preset;
  j["vocab"] = m.vocab;
  j["hidden"] = m.hidden;
  j["intermediate"] = m.intermediate;
  j["layers"] = m.layers;
  j["heads"] = m.heads;
  j["kv_heads"] = m.kvHeads;
  j["max_seq_len"] = m.maxSeqLen;
  j["rope_theta"] = finite(m.ropeTheta, "model.rope_theta");
  if (m.ropeScaling) {
    Json r;
    r["factor"] = finite(m.ropeScaling->factor, "model.rope_scaling.factor");
    r["low_freq_factor"] = finite(m.ropeScaling->lowFreqFactor,
                                  "model.rope_scaling.low_freq_factor");
    r["high_freq_factor"] = finite(m.ropeScaling->highFreqFactor,
                                   "model.rope_scaling.high_freq_factor");
    r["original_max_seq_len"] = m.ropeScaling->originalMaxSeqLen;
    j["rope_scaling"] = std::move(r);
  } else {
    j["rope_scaling"] = nullptr;
  }
  j["norm_eps"] = finite(m.normEps, "model.norm_eps");
  j["tie_embeddings"] = m.tieEmbeddings;
  j["type_vocab"] = m.typeVocab;
  j["bert_head"] = m.bertHead;
  j["num_labels"] = m.numLabels;
  return j;
}

Json toJson(const ClusterConfig &c) {
  Json d;
  d["name"] = c.device.name;
  d["memory"] = c.device.memory;
  d["bf16_tflops"] = finite(c.device.bf16Tflops, "cluster.device.bf16_tflops");
  d["fp16_tflops"] = finite(c.device.fp16Tflops, "cluster.device.fp16_tflops");
  d["fp32_tflops"] = finite(c.device.fp32Tflops, "cluster.device.fp32_tflops");
  d["hbm_bandwidth"] =
      finite(c.device.hbmBandwidth, "cluster.device.hbm_bandwidth");
  d["nvlink_bandwidth"] =
      finite(c.device.nvlinkBandwidth, "cluster.device.nvlink_bandwidth");
  d["pcie_bandwidth"] =
      finite(c.device.pcieBandwidth, "cluster.device.pcie_bandwidth");
  Json j;
  j["nodes"] = c.nodes;
  j["gpus_per_node"] = c.gpusPerNode;
  j["device"] = std::move(d);
  j["host_memory"] = c.hostMemory;
  j["inter_node_bandwidth"] =
      finite(c.interNodeBandwidth, "cluster.inter_node_bandwidth");
  return j;
}

Json toJson(const TrainConfig &t) {
  Json o;
  o["kind"] = t.optimizer.kind;
  o["lr"] = finite(t.optimizer.lr, "train.optimizer.lr");
  o["beta1"] = finite(t.optimizer.beta1, "train.optimizer.beta1");
  o["beta2"] = finite(t.optimizer.beta2, "train.optimizer.beta2");
  o["eps"] = finite(t.optimizer.eps, "train.optimizer.eps");
  o["weight_decay"] =
      finite(t.optimizer.weightDecay, "train.optimizer.weight_decay");
  o["momentum"] = finite(t.optimizer.momentum, "train.optimizer.momentum");
  Json ls;
  ls["kind"] = t.lossScale.kind;
  ls["initial"] = finite(t.lossScale.initial, "train.loss_scale.initial");
  ls["growth_interval"] = t.lossScale.growthInterval;
  Json lr;
  lr["kind"] = t.lrSchedule.kind;
  lr["warmup"] = t.lrSchedule.warmup;
  lr["min_lr_ratio"] =
      finite(t.lrSchedule.minLrRatio, "train.lr_schedule.min_lr_ratio");
  Json j;
  j["optimizer"] = std::move(o);
  j["micro_batch"] = t.microBatch;
  j["seq_len"] = t.seqLen;
  j["grad_accum"] = t.gradAccum;
  j["precision"] = t.precision;
  j["loss_scale"] = std::move(ls);
  j["reduce_dtype"] = t.reduceDtype;
  j["activation_checkpointing"] = t.activationCheckpointing;
  j["grad_clip"] = finite(t.gradClip, "train.grad_clip");
  j["lr_schedule"] = std::move(lr);
  j["steps"] = t.steps;
  j["seed"] = t.seed;
  return j;
}

Json toJson(const Buffer &b) {
  Json j;
  j["kind"] = toString(b.kind);
  j["type"] = toString(b.type);
  j["space"] = toString(b.space);
  j["numel"] = b.numel;
  switch (b.kind) {
  case Buffer::Kind::Alloc:
    j["name"] = b.name;
    j["role"] = toString(b.role);
    j["persistent"] = b.persistent;
    j["offset"] = b.offset;
    j["group"] = b.group;
    j["sharded"] = b.sharded;
    break;
  case Buffer::Kind::View:
    j["source"] = b.source;
    j["offset"] = b.viewOffset;
    break;
  case Buffer::Kind::ShardView:
    j["source"] = b.source;
    j["axis"] = toString(b.axis);
    break;
  }
  return j;
}

Json toJson(const Op &op) {
  Json j;
  j["op"] = toString(op.kind);
  auto async = [&] {
    j["event"] = op.event;
    j["after"] = op.after;
  };
  auto compute = [&] {
    j["unit"] = op.unit;
    j["micro_batch"] = op.microBatch;
  };
  switch (op.kind) {
  case OpKind::Alloc:
  case OpKind::Free:
  case OpKind::Zero:
    j["buffer"] = op.buffer;
    break;
  case OpKind::Wait:
    j["event"] = op.waitEvent;
    break;
  case OpKind::AllGather:
    j["src"] = op.src;
    j["dst"] = op.dst;
    j["axis"] = toString(op.axis);
    async();
    break;
  case OpKind::ReduceScatter:
    j["src"] = op.src;
    j["dst"] = op.dst;
    j["axis"] = toString(op.axis);
    j["reduce"] = toString(op.reduce);
    j["accumulate"] = op.accumulate;
    async();
    break;
  case OpKind::AllReduce:
    j["buffer"] = op.buffer;
    j["axis"] = toString(op.axis);
    j["reduce"] = toString(op.reduce);
    async();
    break;
  case OpKind::Broadcast:
    j["buffer"] = op.buffer;
    j["axis"] = toString(op.axis);
    j["root"] = op.root;
    async();
    break;
  case OpKind::Copy:
    j["src"] = op.src;
    j["dst"] = op.dst;
    async();
    break;
  case OpKind::Cast:
  case OpKind::Accumulate:
    j["src"] = op.src;
    j["dst"] = op.dst;
    break;
  case OpKind::Forward:
    compute();
    j["params"] = op.params;
    j["tied"] = op.tied;
    j["saves"] = op.saves;
    break;
  case OpKind::Recompute:
    compute();
    j["params"] = op.params;
    j["tied"] = op.tied;
    j["input"] = op.input;
    j["saves"] = op.saves;
    break;
  case OpKind::Loss:
    compute();
    j["scale"] = finite(op.scale, "loss scale");
    j["loss_scale"] = op.lossScale;
    break;
  case OpKind::Backward:
    compute();
    j["params"] = op.params;
    j["tied"] = op.tied;
    j["activations"] = op.activations;
    j["grads"] = op.grads;
    j["tied_grads"] = op.tiedGrads;
    break;
  case OpKind::GradNorm:
    j["src"] = op.src;
    j["scalar"] = op.scalar;
    break;
  case OpKind::CheckFinite:
    j["buffer"] = op.buffer;
    j["scalar"] = op.scalar;
    break;
  case OpKind::OptimizerStep:
    j["group"] = op.group;
    j["params"] = op.params;
    j["grads"] = op.grads;
    j["state"] = op.state;
    j["norm"] = op.norm;
    j["found_inf"] = op.foundInf;
    j["loss_scale"] = op.lossScale;
    break;
  case OpKind::UpdateLossScale:
    j["scalar"] = op.scalar;
    j["found_inf"] = op.foundInf;
    break;
  }
  j["line"] = op.line;
  return j;
}

Json toJson(const Schedule &s) {
  Json j;
  j["producer"] = s.producer;
  j["plan"] = s.planName;
  j["source_file"] = s.sourceFile;
  j["mesh"] = Json{{"replicate", s.replicate}, {"shard", s.shard}};
  j["sharding"] = s.sharding;
  j["model"] = toJson(s.model);
  j["cluster"] = toJson(s.cluster);
  j["train"] = toJson(s.train);
  Json units = Json::array();
  for (const Unit &u : s.units) {
    Json params = Json::array();
    for (const Param &p : u.params)
      params.push_back(Json{{"name", p.name},
                            {"shape", p.shape},
                            {"offset", p.offset},
                            {"tied_to", p.tiedTo}});
    units.push_back(Json{{"name", u.name},
                         {"kind", u.kind},
                         {"numel", u.numel},
                         {"params", std::move(params)}});
  }
  j["units"] = std::move(units);
  Json groups = Json::array();
  for (const Group &g : s.groups)
    groups.push_back(Json{{"name", g.name},
                          {"units", g.units},
                          {"numel", g.numel},
                          {"padded_numel", g.paddedNumel},
                          {"shard_numel", g.shardNumel}});
  j["groups"] = std::move(groups);
  Json arena = Json::object(), persistent = Json::object();
  for (const auto &[space, bytes] : s.arenaBytes)
    arena[space] = bytes;
  for (const auto &[space, bytes] : s.persistentBytes)
    persistent[space] = bytes;
  j["arena_bytes"] = std::move(arena);
  j["persistent_bytes"] = std::move(persistent);
  j["workspace_bytes"] = s.workspaceBytes;
  j["micro_batches"] = s.microBatches;
  j["num_events"] = s.numEvents;
  Json buffers = Json::array();
  for (const Buffer &b : s.buffers)
    buffers.push_back(toJson(b));
  j["buffers"] = std::move(buffers);
  Json ops = Json::array();
  for (const Op &op : s.ops)
    ops.push_back(toJson(op));
  j["ops"] = std::move(ops);
  return j;
}

//===----------------------------------------------------------------------===//
// Reading the body
//===----------------------------------------------------------------------===//

/// Where a value sits in the body, for messages ("buffers[3].numel"); built
/// on the stack as the reader descends and rendered only on error.
struct Path {
  const Path *parent = nullptr;
  std::string_view key;
  int64_t index = -1;

  Path member(std::string_view k) const { return Path{this, k, -1}; }
  Path element(int64_t i) const { return Path{this, {}, i}; }
  std::string str() const {
    std::string prefix = parent ? parent->str() : std::string();
    if (index >= 0)
      return prefix + "[" + std::to_string(index) + "]";
    if (key.empty())
      return prefix;
    return prefix.empty() ? std::string(key) : prefix + "." + std::string(key);
  }
};

class BodyReader {
public:
  explicit BodyReader(const std::string &name) : name(name) {}

  [[noreturn]] void error(const Path &at, const std::string &what) const {
    std::string where = at.str();
    fail(name, where.empty() ? what : where + ": " + what);
  }

  const Json &member(const Json &object, const Path &at,
                     std::string_view key) const {
    if (!object.is_object())
      error(at, "expected an object");
    auto it = object.find(key);
    if (it == object.end())
      error(at, "missing field '" + std::string(key) + "'");
    return *it;
  }

  int64_t integer(const Json &v, const Path &at) const {
    if (v.is_number_integer()) {
      if (v.is_number_unsigned() &&
          v.get<uint64_t>() >
              static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        error(at, "integer out of range");
      return v.get<int64_t>();
    }
    error(at, "expected an integer");
  }
  double number(const Json &v, const Path &at) const {
    if (!v.is_number())
      error(at, "expected a number");
    return v.get<double>();
  }
  bool boolean(const Json &v, const Path &at) const {
    if (!v.is_boolean())
      error(at, "expected true or false");
    return v.get<bool>();
  }
  std::string string(const Json &v, const Path &at) const {
    if (!v.is_string())
      error(at, "expected a string");
    return v.get<std::string>();
  }
  const Json &array(const Json &v, const Path &at) const {
    if (!v.is_array())
      error(at, "expected an array");
    return v;
  }

  // Member accessors: obj[key] with its path.
  int64_t getInt(const Json &o, const Path &at, std::string_view key) const {
    return integer(member(o, at, key), at.member(key));
  }
  double getNumber(const Json &o, const Path &at, std::string_view key) const {
    return number(member(o, at, key), at.member(key));
  }
  bool getBool(const Json &o, const Path &at, std::string_view key) const {
    return boolean(member(o, at, key), at.member(key));
  }
  std::string getString(const Json &o, const Path &at,
                        std::string_view key) const {
    return string(member(o, at, key), at.member(key));
  }
  std::vector<int64_t> getIntArray(const Json &o, const Path &at,
                                   std::string_view key) const {
    Path p = at.member(key);
    const Json &a = array(member(o, at, key), p);
    std::vector<int64_t> out;
    out.reserve(a.size());
    for (size_t i = 0; i < a.size(); ++i)
      out.push_back(integer(a[i], p.element(i)));
    return out;
  }
  template <typename Enum>
  Enum getEnum(const Json &o, const Path &at, std::string_view key,
               std::optional<Enum> (*parse)(std::string_view),
               const char *what) const {
    Path p = at.member(key);
    std::string keyword = string(member(o, at, key), p);
    std::optional<Enum> value = parse(keyword);
    if (!value)
      error(p, "unknown " + std::string(what) + " '" + keyword + "'");
    return *value;
  }

  Schedule read(const Json &root) const;
  ModelConfig readModel(const Json &j, const Path &at) const;

private:
  ClusterConfig readCluster(const Json &j, const Path &at) const;
  TrainConfig readTrain(const Json &j, const Path &at) const;
  Buffer readBuffer(const Json &j, const Path &at) const;
  Op readOp(const Json &j, const Path &at) const;

  const std::string &name;
};

ModelConfig BodyReader::readModel(const Json &j, const Path &at) const {
  ModelConfig m;
  m.family = getString(j, at, "family");
  m.preset = getString(j, at, "preset");
  m.vocab = getInt(j, at, "vocab");
  m.hidden = getInt(j, at, "hidden");
  m.intermediate = getInt(j, at, "intermediate");
  m.layers = getInt(j, at, "layers");
  m.heads = getInt(j, at, "heads");
  m.kvHeads = getInt(j, at, "kv_heads");
  m.maxSeqLen = getInt(j, at, "max_seq_len");
  m.ropeTheta = getNumber(j, at, "rope_theta");
  const Json &rope = member(j, at, "rope_scaling");
  if (!rope.is_null()) {
    Path p = at.member("rope_scaling");
    RopeScaling r;
    r.factor = getNumber(rope, p, "factor");
    r.lowFreqFactor = getNumber(rope, p, "low_freq_factor");
    r.highFreqFactor = getNumber(rope, p, "high_freq_factor");
    r.originalMaxSeqLen = getInt(rope, p, "original_max_seq_len");
    m.ropeScaling = r;
  }
  m.normEps = getNumber(j, at, "norm_eps");
  m.tieEmbeddings = getBool(j, at, "tie_embeddings");
  m.typeVocab = getInt(j, at, "type_vocab");
  m.bertHead = getString(j, at, "bert_head");
  m.numLabels = getInt(j, at, "num_labels");
  return m;
}

ClusterConfig BodyReader::readCluster(const Json &j, const Path &at) const {
  ClusterConfig c;
  c.nodes = getInt(j, at, "nodes");
  c.gpusPerNode = getInt(j, at, "gpus_per_node");
  Path dp = at.member("device");
  const Json &d = member(j, at, "device");
  c.device.name = getString(d, dp, "name");
  c.device.memory = getInt(d, dp, "memory");
  c.device.bf16Tflops = getNumber(d, dp, "bf16_tflops");
  c.device.fp16Tflops = getNumber(d, dp, "fp16_tflops");
  c.device.fp32Tflops = getNumber(d, dp, "fp32_tflops");
  c.device.hbmBandwidth = getNumber(d, dp, "hbm_bandwidth");
  c.device.nvlinkBandwidth = getNumber(d, dp, "nvlink_bandwidth");
  c.device.pcieBandwidth = getNumber(d, dp, "pcie_bandwidth");
  c.hostMemory = getInt(j, at, "host_memory");
  c.interNodeBandwidth = getNumber(j, at, "inter_node_bandwidth");
  return c;
}

TrainConfig BodyReader::readTrain(const Json &j, const Path &at) const {
  TrainConfig t;
  Path op = at.member("optimizer");
  const Json &o = member(j, at, "optimizer");
  t.optimizer.kind = getString(o, op, "kind");
  t.optimizer.lr = getNumber(o, op, "lr");
  t.optimizer.beta1 = getNumber(o, op, "beta1");
  t.optimizer.beta2 = getNumber(o, op, "beta2");
  t.optimizer.eps = getNumber(o, op, "eps");
  t.optimizer.weightDecay = getNumber(o, op, "weight_decay");
  t.optimizer.momentum = getNumber(o, op, "momentum");
  t.microBatch = getInt(j, at, "micro_batch");
  t.seqLen = getInt(j, at, "seq_len");
  t.gradAccum = getInt(j, at, "grad_accum");
  t.precision = getString(j, at, "precision");
  Path lsp = at.member("loss_scale");
  const Json &ls = member(j, at, "loss_scale");
  t.lossScale.kind = getString(ls, lsp, "kind");
  t.lossScale.initial = getNumber(ls, lsp, "initial");
  t.lossScale.growthInterval = getInt(ls, lsp, "growth_interval");
  t.reduceDtype = getString(j, at, "reduce_dtype");
  t.activationCheckpointing = getString(j, at, "activation_checkpointing");
  t.gradClip = getNumber(j, at, "grad_clip");
  Path lrp = at.member("lr_schedule");
  const Json &lr = member(j, at, "lr_schedule");
  t.lrSchedule.kind = getString(lr, lrp, "kind");
  t.lrSchedule.warmup = getInt(lr, lrp, "warmup");
  t.lrSchedule.minLrRatio = getNumber(lr, lrp, "min_lr_ratio");
  t.steps = getInt(j, at, "steps");
  t.seed = getInt(j, at, "seed");
  return t;
}

Buffer BodyReader::readBuffer(const Json &j, const Path &at) const {
  Buffer b;
  b.kind = getEnum(j, at, "kind", parseBufferKind, "buffer kind");
  b.type = getEnum(j, at, "type", parseElementType, "element type");
  b.space = getEnum(j, at, "space", parseSpace, "memory space");
  b.numel = getInt(j, at, "numel");
  switch (b.kind) {
  case Buffer::Kind::Alloc:
    b.name = getString(j, at, "name");
    b.role = getEnum(j, at, "role", parseBufferRole, "buffer role");
    b.persistent = getBool(j, at, "persistent");
    b.offset = getInt(j, at, "offset");
    b.group = getString(j, at, "group");
    b.sharded = getBool(j, at, "sharded");
    break;
  case Buffer::Kind::View:
    b.source = getInt(j, at, "source");
    b.viewOffset = getInt(j, at, "offset");
    break;
  case Buffer::Kind::ShardView:
    b.source = getInt(j, at, "source");
    b.axis = getEnum(j, at, "axis", parseGroupAxis, "process group");
    break;
  }
  return b;
}

Op BodyReader::readOp(const Json &j, const Path &at) const {
  Op op;
  op.kind = getEnum(j, at, "op", parseOpKind, "op");
  auto async = [&] {
    op.event = getInt(j, at, "event");
    op.after = getIntArray(j, at, "after");
  };
  auto compute = [&] {
    op.unit = getInt(j, at, "unit");
    op.microBatch = getInt(j, at, "micro_batch");
  };
  auto axis = [&] {
    op.axis = getEnum(j, at, "axis", parseGroupAxis, "process group");
  };
  auto reduce = [&] {
    op.reduce = getEnum(j, at, "reduce", parseReduceKind, "reduction");
  };
  switch (op.kind) {
  case OpKind::Alloc:
  case OpKind::Free:
  case OpKind::Zero:
    op.buffer = getInt(j, at, "buffer");
    break;
  case OpKind::Wait:
    op.waitEvent = getInt(j, at, "event");
    break;
  case OpKind::AllGather:
    op.src = getInt(j, at, "src");
    op.dst = getInt(j, at, "dst");
    axis();
    async();
    break;
  case OpKind::ReduceScatter:
    op.src = getInt(j, at, "src");
    op.dst = getInt(j, at, "dst");
    axis();
    reduce();
    op.accumulate = getBool(j, at, "accumulate");
    async();
    break;
  case OpKind::AllReduce:
    op.buffer = getInt(j, at, "buffer");
    axis();
    reduce();
    async();
    break;
  case OpKind::Broadcast:
    op.buffer = getInt(j, at, "buffer");
    axis();
    op.root = getInt(j, at, "root");
    async();
    break;
  case OpKind::Copy:
    op.src = getInt(j, at, "src");
    op.dst = getInt(j, at, "dst");
    async();
    break;
  case OpKind::Cast:
  case OpKind::Accumulate:
    op.src = getInt(j, at, "src");
    op.dst = getInt(j, at, "dst");
    break;
  case OpKind::Forward:
    compute();
    op.params = getInt(j, at, "params");
    op.tied = getInt(j, at, "tied");
    op.saves = getInt(j, at, "saves");
    break;
  case OpKind::Recompute:
    compute();
    op.params = getInt(j, at, "params");
    op.tied = getInt(j, at, "tied");
    op.input = getInt(j, at, "input");
    op.saves = getInt(j, at, "saves");
    break;
  case OpKind::Loss:
    compute();
    op.scale = getNumber(j, at, "scale");
    op.lossScale = getInt(j, at, "loss_scale");
    break;
  case OpKind::Backward:
    compute();
    op.params = getInt(j, at, "params");
    op.tied = getInt(j, at, "tied");
    op.activations = getInt(j, at, "activations");
    op.grads = getInt(j, at, "grads");
    op.tiedGrads = getInt(j, at, "tied_grads");
    break;
  case OpKind::GradNorm:
    op.src = getInt(j, at, "src");
    op.scalar = getInt(j, at, "scalar");
    break;
  case OpKind::CheckFinite:
    op.buffer = getInt(j, at, "buffer");
    op.scalar = getInt(j, at, "scalar");
    break;
  case OpKind::OptimizerStep:
    op.group = getInt(j, at, "group");
    op.params = getInt(j, at, "params");
    op.grads = getInt(j, at, "grads");
    op.state = getIntArray(j, at, "state");
    op.norm = getInt(j, at, "norm");
    op.foundInf = getInt(j, at, "found_inf");
    op.lossScale = getInt(j, at, "loss_scale");
    break;
  case OpKind::UpdateLossScale:
    op.scalar = getInt(j, at, "scalar");
    op.foundInf = getInt(j, at, "found_inf");
    break;
  }
  int64_t line = getInt(j, at, "line");
  if (line < 0 || line > std::numeric_limits<uint32_t>::max())
    error(at.member("line"), "line number out of range");
  op.line = static_cast<uint32_t>(line);
  return op;
}

Schedule BodyReader::read(const Json &root) const {
  Path at;
  if (!root.is_object())
    error(at, "the body is not a JSON object");
  Schedule s;
  s.producer = getString(root, at, "producer");
  s.planName = getString(root, at, "plan");
  s.sourceFile = getString(root, at, "source_file");
  Path mp = at.member("mesh");
  const Json &mesh = member(root, at, "mesh");
  s.replicate = getInt(mesh, mp, "replicate");
  s.shard = getInt(mesh, mp, "shard");
  s.sharding = getString(root, at, "sharding");
  s.model = readModel(member(root, at, "model"), at.member("model"));
  s.cluster = readCluster(member(root, at, "cluster"), at.member("cluster"));
  s.train = readTrain(member(root, at, "train"), at.member("train"));

  Path up = at.member("units");
  const Json &units = array(member(root, at, "units"), up);
  s.units.reserve(units.size());
  for (size_t i = 0; i < units.size(); ++i) {
    Path p = up.element(i);
    Unit u;
    u.name = getString(units[i], p, "name");
    u.kind = getString(units[i], p, "kind");
    u.numel = getInt(units[i], p, "numel");
    Path pp = p.member("params");
    const Json &params = array(member(units[i], p, "params"), pp);
    for (size_t k = 0; k < params.size(); ++k) {
      Path q = pp.element(k);
      Param param;
      param.name = getString(params[k], q, "name");
      param.shape = getIntArray(params[k], q, "shape");
      param.offset = getInt(params[k], q, "offset");
      param.tiedTo = getString(params[k], q, "tied_to");
      u.params.push_back(std::move(param));
    }
    s.units.push_back(std::move(u));
  }

  Path gp = at.member("groups");
  const Json &groups = array(member(root, at, "groups"), gp);
  for (size_t i = 0; i < groups.size(); ++i) {
    Path p = gp.element(i);
    Group g;
    g.name = getString(groups[i], p, "name");
    Path unp = p.member("units");
    const Json &names = array(member(groups[i], p, "units"), unp);
    for (size_t k = 0; k < names.size(); ++k)
      g.units.push_back(string(names[k], unp.element(k)));
    g.numel = getInt(groups[i], p, "numel");
    g.paddedNumel = getInt(groups[i], p, "padded_numel");
    g.shardNumel = getInt(groups[i], p, "shard_numel");
    s.groups.push_back(std::move(g));
  }

  for (const char *key : {"arena_bytes", "persistent_bytes"}) {
    Path p = at.member(key);
    const Json &sizes = member(root, at, key);
    if (!sizes.is_object())
      error(p, "expected an object");
    auto &out = std::string_view(key) == "arena_bytes" ? s.arenaBytes
                                                       : s.persistentBytes;
    for (auto it = sizes.begin(); it != sizes.end(); ++it) {
      if (!parseSpace(it.key()))
        error(p, "unknown memory space '" + it.key() + "'");
      out[it.key()] = integer(it.value(), p.member(it.key()));
    }
  }
  s.workspaceBytes = getInt(root, at, "workspace_bytes");
  s.microBatches = getInt(root, at, "micro_batches");
  s.numEvents = getInt(root, at, "num_events");

  Path bp = at.member("buffers");
  const Json &buffers = array(member(root, at, "buffers"), bp);
  s.buffers.reserve(buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i)
    s.buffers.push_back(readBuffer(buffers[i], bp.element(i)));

  Path op = at.member("ops");
  const Json &ops = array(member(root, at, "ops"), op);
  s.ops.reserve(ops.size());
  for (size_t i = 0; i < ops.size(); ++i)
    s.ops.push_back(readOp(ops[i], op.element(i)));
  return s;
}

//===----------------------------------------------------------------------===//
// Validation
//===----------------------------------------------------------------------===//

bool oneOf(const std::string &value, std::initializer_list<const char *> set) {
  for (const char *s : set)
    if (value == s)
      return true;
  return false;
}

/// Checks one schedule; each check names the offending item so that a
/// hand-edited or foreign file can be fixed from the message alone.
class ScheduleValidator {
public:
  ScheduleValidator(const Schedule &s, const std::string &name)
      : s(s), name(name) {}

  void run() {
    checkHeaderFields();
    checkUnits();
    checkGroups();
    checkArenas();
    checkBuffers();
    checkOps();
  }

private:
  [[noreturn]] void error(const std::string &what) const { fail(name, what); }

  void checkKeyword(const std::string &field, const std::string &value,
                    std::initializer_list<const char *> set) const {
    if (!oneOf(value, set))
      error(field + ": unknown value '" + value + "'");
  }

  void checkHeaderFields() {
    if (s.version != kScheduleFormatVersion)
      error("schedule version " + std::to_string(s.version) +
            " is not this reader's " + std::to_string(kScheduleFormatVersion));
    if (s.replicate < 1 || s.shard < 1)
      error("mesh: replicate and shard must be at least 1 (got " +
            std::to_string(s.replicate) + " x " + std::to_string(s.shard) +
            ")");
    if (s.cluster.nodes < 1 || s.cluster.gpusPerNode < 1)
      error("cluster: nodes and gpus_per_node must be at least 1");
    __int128 world = __int128(s.replicate) * s.shard;
    if (world > kMaxRanks)
      error("mesh " + std::to_string(s.replicate) + " x " +
            std::to_string(s.shard) + " has more than " +
            std::to_string(kMaxRanks) + " ranks");
    if (world != __int128(s.cluster.nodes) * s.cluster.gpusPerNode)
      error("mesh " + std::to_string(s.replicate) + " x " +
            std::to_string(s.shard) + " is not the cluster's " +
            std::to_string(s.cluster.nodes) + " x " +
            std::to_string(s.cluster.gpusPerNode) + " ranks");
    if (s.microBatches < 1)
      error("micro_batches must be at least 1");
    if (s.microBatches != s.train.gradAccum)
      error("micro_batches " + std::to_string(s.microBatches) +
            " is not train.grad_accum " + std::to_string(s.train.gradAccum));
    if (s.train.microBatch < 1 || s.train.seqLen < 1)
      error("train: micro_batch and seq_len must be at least 1");
    if (s.numEvents < 0)
      error("num_events is negative");
    checkKeyword("model.family", s.model.family, {"llama", "gpt2", "bert"});
    checkKeyword("model.bert_head", s.model.bertHead,
                 {"masked_lm", "sequence_classification"});
    checkKeyword("train.optimizer.kind", s.train.optimizer.kind,
                 {"adamw", "sgd"});
    checkKeyword("train.precision", s.train.precision,
                 {"fp32", "bf16_mixed", "fp16_mixed"});
    checkKeyword("train.loss_scale.kind", s.train.lossScale.kind,
                 {"none", "dynamic", "static"});
    checkKeyword("train.reduce_dtype", s.train.reduceDtype,
                 {"fp32", "bf16", "fp16"});
    checkKeyword("train.activation_checkpointing",
                 s.train.activationCheckpointing, {"none", "full"});
    checkKeyword("train.lr_schedule.kind", s.train.lrSchedule.kind,
                 {"constant", "cosine", "linear"});
  }

  void checkUnits() {
    // Stored parameters first: a tied parameter may name one in a later unit.
    struct Stored {
      int64_t unit, offset;
    };
    std::unordered_map<std::string, Stored> stored;
    std::unordered_set<std::string> paramNames;
    for (size_t u = 0; u < s.units.size(); ++u) {
      const Unit &unit = s.units[u];
      std::string where = "unit '" + unit.name + "'";
      if (!unitIndex.emplace(unit.name, u).second)
        error("units: duplicate unit '" + unit.name + "'");
      checkKeyword(where + " kind", unit.kind,
                   {"embedding", "llama_block", "gpt2_block", "bert_block",
                    "llama_head", "gpt2_head", "bert_head"});
      if (unit.numel < 0 || unit.numel > kMaxElements)
        error(where + ": numel " + std::to_string(unit.numel) +
              " out of range");
      int64_t next = 0;
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
        paramNumel[p.name] = static_cast<int64_t>(numel);
        if (!p.tiedTo.empty())
          continue;
        if (p.offset != next)
          error(where + ": parameter '" + p.name + "' is at offset " +
                std::to_string(p.offset) + ", expected " +
                std::to_string(next) +
                " (stored parameters are contiguous, in order)");
        stored.emplace(p.name, Stored{int64_t(u), p.offset});
        next += static_cast<int64_t>(numel);
        if (next > unit.numel)
          error(where + ": parameter '" + p.name +
                "' ends past the unit's numel " + std::to_string(unit.numel));
      }
      if (next != unit.numel)
        error(where + ": numel " + std::to_string(unit.numel) + " is not the " +
              std::to_string(next) + " elements its parameters store");
    }
    tiedUnit.assign(s.units.size(), -1);
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
        if (p.offset != it->second.offset)
          error(where + ": tied parameter '" + p.name + "' has offset " +
                std::to_string(p.offset) + ", but '" + p.tiedTo + "' is at " +
                std::to_string(it->second.offset));
        tiedUnit[u] = it->second.unit;
      }
    }
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
      __int128 numel = 0;
      for (const std::string &unit : group.units) {
        auto it = unitIndex.find(unit);
        if (it == unitIndex.end())
          error(where + ": unknown unit '" + unit + "'");
        ++unitGroups[it->second];
        numel += s.units[it->second].numel;
      }
      if (numel > kMaxElements)
        error(where + " holds more than 2^60 elements");
      if (group.numel != numel)
        error(where + ": numel " + std::to_string(group.numel) +
              " is not the " + std::to_string(static_cast<int64_t>(numel)) +
              " elements its units store");
      if (group.paddedNumel < group.numel || group.paddedNumel % s.shard != 0)
        error(where + ": padded_numel " + std::to_string(group.paddedNumel) +
              " is not numel rounded up to a multiple of the shard axis " +
              std::to_string(s.shard));
      if (group.paddedNumel - group.numel >= s.shard)
        error(where + ": padded_numel " + std::to_string(group.paddedNumel) +
              " pads more than the shard axis needs");
      if (__int128(group.shardNumel) * s.shard != group.paddedNumel)
        error(where + ": shard_numel " + std::to_string(group.shardNumel) +
              " x shard " + std::to_string(s.shard) + " is not padded_numel " +
              std::to_string(group.paddedNumel));
    }
    for (size_t u = 0; u < s.units.size(); ++u)
      if (unitGroups[u] != 1)
        error("unit '" + s.units[u].name + "' is in " +
              std::to_string(unitGroups[u]) + " groups, not one");
  }

  void checkArenas() {
    for (const auto *sizes : {&s.arenaBytes, &s.persistentBytes})
      for (const auto &[space, bytes] : *sizes) {
        if (!parseSpace(space))
          error("unknown memory space '" + space + "'");
        if (bytes < 0)
          error("arena of " + space + " has a negative size");
      }
    for (const auto &[space, bytes] : s.persistentBytes) {
      auto it = s.arenaBytes.find(space);
      if (it == s.arenaBytes.end() || bytes > it->second)
        error("persistent_bytes of " + space + " exceed its arena_bytes");
    }
    if (s.workspaceBytes < 0)
      error("workspace_bytes is negative");
  }

  int64_t axisSize(GroupAxis axis) const {
    switch (axis) {
    case GroupAxis::Shard:
      return s.shard;
    case GroupAxis::Replicate:
      return s.replicate;
    case GroupAxis::World:
      return s.replicate * s.shard;
    }
    return 0;
  }

  std::string bufferName(int64_t id) const {
    const Buffer &b = s.buffers[id];
    if (b.kind == Buffer::Kind::Alloc)
      return "buffer " + std::to_string(id) + " ('" + b.name + "')";
    return "buffer " + std::to_string(id) + " (" + toString(b.kind) + " of '" +
           s.buffers[root[id]].name + "')";
  }

  void checkBuffers() {
    root.resize(s.buffers.size());
    for (size_t i = 0; i < s.buffers.size(); ++i) {
      const Buffer &b = s.buffers[i];
      std::string where = "buffer " + std::to_string(i);
      if (b.numel < 1 || b.numel > kMaxElements)
        error(where + ": numel " + std::to_string(b.numel) + " out of range");
      if (b.kind == Buffer::Kind::Alloc) {
        root[i] = i;
        where += " ('" + b.name + "')";
        auto arena = s.arenaBytes.find(toString(b.space));
        if (arena == s.arenaBytes.end())
          error(where + ": no arena for memory space " + toString(b.space));
        __int128 end =
            __int128(b.offset) + __int128(b.numel) * elementBytes(b.type);
        if (b.offset < 0 || end > arena->second)
          error(where + ": bytes [" + std::to_string(b.offset) + ", " +
                std::to_string(static_cast<int64_t>(end)) +
                ") lie outside the " + toString(b.space) + " arena of " +
                std::to_string(arena->second) + " bytes");
        if (b.persistent) {
          auto block = s.persistentBytes.find(toString(b.space));
          if (block == s.persistentBytes.end() || end > block->second)
            error(where +
                  ": persistent, but outside the persistent block of "
                  "the " +
                  std::string(toString(b.space)) + " arena");
        }
        if (!b.group.empty()) {
          auto g = groupIndex.find(b.group);
          if (g == groupIndex.end())
            error(where + ": unknown group '" + b.group + "'");
          const Group &group = s.groups[g->second];
          int64_t expected = b.sharded ? group.shardNumel : group.paddedNumel;
          if (b.numel != expected)
            error(where + ": " + (b.sharded ? "a shard" : "all") +
                  " of group '" + b.group + "' must have " +
                  std::to_string(expected) + " elements, not " +
                  std::to_string(b.numel));
        } else if (b.sharded) {
          error(where + ": sharded, but of no group");
        }
        continue;
      }
      if (b.source < 0 || b.source >= int64_t(i))
        error(where + ": source " + std::to_string(b.source) +
              " is not an earlier buffer");
      root[i] = root[b.source];
      const Buffer &src = s.buffers[b.source];
      if (src.type != b.type || src.space != b.space)
        error(where + ": type or memory space differs from its source " +
              std::to_string(b.source));
      if (b.kind == Buffer::Kind::View) {
        if (b.viewOffset < 0 || b.viewOffset > src.numel - b.numel)
          error(where + ": elements [" + std::to_string(b.viewOffset) + ", " +
                std::to_string(b.viewOffset + b.numel) +
                ") lie outside its source's " + std::to_string(src.numel));
      } else if (__int128(b.numel) * axisSize(b.axis) != src.numel) {
        error(where + ": shard of " + std::to_string(b.numel) + " x " +
              std::to_string(axisSize(b.axis)) + " ranks is not its source's " +
              std::to_string(src.numel) + " elements");
      }
    }
  }

  // Program-order state.
  enum class Life : uint8_t { NotYet, Live, Freed };

  void checkOps() {
    // Each event is signalled by one op: more events than ops is a lie, and
    // must not size an allocation.
    if (s.numEvents > int64_t(s.ops.size()))
      error("num_events " + std::to_string(s.numEvents) + " exceeds the " +
            std::to_string(s.ops.size()) + " ops that could signal them");
    std::vector<Life> life(s.buffers.size(), Life::NotYet);
    enum class Event : uint8_t { NotYet, Signalled, Waited };
    std::vector<Event> events(s.numEvents, Event::NotYet);

    for (size_t i = 0; i < s.ops.size(); ++i) {
      const Op &op = s.ops[i];
      std::string where =
          "op " + std::to_string(i) + " (" + toString(op.kind) + ")";
      auto id = [&](int64_t b, const char *field) -> const Buffer & {
        if (b < 0 || b >= int64_t(s.buffers.size()))
          error(where + ": " + field + " " + std::to_string(b) +
                " is no buffer");
        Life l = life[root[b]];
        if (l == Life::NotYet)
          error(where + ": " + field + " " + bufferName(b) +
                " is used before its allocation");
        if (l == Life::Freed)
          error(where + ": " + field + " " + bufferName(b) +
                " is used after its free");
        return s.buffers[b];
      };
      auto optional = [&](int64_t b, const char *field) -> const Buffer * {
        return b == -1 ? nullptr : &id(b, field);
      };
      auto scalar = [&](int64_t b, const char *field) {
        const Buffer &buf = id(b, field);
        if (buf.numel != 1 || buf.type != ElementType::F32)
          error(where + ": " + field + " " + bufferName(b) +
                " is not a one-element f32 scalar");
      };
      auto optionalScalar = [&](int64_t b, const char *field) {
        if (b != -1)
          scalar(b, field);
      };
      auto sameNumel = [&](int64_t a, int64_t b, const char *what) {
        if (s.buffers[a].numel != s.buffers[b].numel)
          error(where + ": " + what + " have different sizes (" +
                std::to_string(s.buffers[a].numel) + " and " +
                std::to_string(s.buffers[b].numel) + ")");
      };
      auto unit = [&]() -> const Unit & {
        if (op.unit < 0 || op.unit >= int64_t(s.units.size()))
          error(where + ": unit " + std::to_string(op.unit) + " is no unit");
        if (op.microBatch < 0 || op.microBatch >= s.microBatches)
          error(where + ": micro-batch " + std::to_string(op.microBatch) +
                " out of range");
        return s.units[op.unit];
      };
      auto unitParams = [&](int64_t params, int64_t tied) {
        const Unit &u = s.units[op.unit];
        if (id(params, "params").numel != u.numel)
          error(where + ": params " + bufferName(params) + " has " +
                std::to_string(s.buffers[params].numel) + " elements, unit '" +
                u.name + "' stores " + std::to_string(u.numel));
        int64_t tiedTo = tiedUnit[op.unit];
        if ((tied != -1) != (tiedTo != -1))
          error(where + ": unit '" + u.name + "' " +
                (tiedTo != -1 ? "ties parameters but has no tied buffer"
                              : "ties no parameter but has a tied buffer"));
        if (tied != -1 && id(tied, "tied").numel != s.units[tiedTo].numel)
          error(where + ": tied " + bufferName(tied) +
                " is not the stored elements of unit '" + s.units[tiedTo].name +
                "'");
      };
      auto signal = [&]() {
        for (int64_t e : op.after) {
          if (e < 0 || e >= s.numEvents || events[e] == Event::NotYet)
            error(where + ": after event " + std::to_string(e) +
                  " that no earlier op signals");
        }
        if (op.event < 0 || op.event >= s.numEvents)
          error(where + ": event " + std::to_string(op.event) +
                " out of range (num_events " + std::to_string(s.numEvents) +
                ")");
        if (events[op.event] != Event::NotYet)
          error(where + ": event " + std::to_string(op.event) +
                " is signalled twice");
        events[op.event] = Event::Signalled;
      };
      auto axis = [&] { return axisSize(op.axis); };

      switch (op.kind) {
      case OpKind::Alloc: {
        if (op.buffer < 0 || op.buffer >= int64_t(s.buffers.size()) ||
            s.buffers[op.buffer].kind != Buffer::Kind::Alloc)
          error(where + ": " + std::to_string(op.buffer) + " is no allocation");
        if (life[op.buffer] != Life::NotYet)
          error(where + ": " + bufferName(op.buffer) + " is allocated twice");
        life[op.buffer] = Life::Live;
        break;
      }
      case OpKind::Free: {
        if (op.buffer < 0 || op.buffer >= int64_t(s.buffers.size()) ||
            s.buffers[op.buffer].kind != Buffer::Kind::Alloc)
          error(where + ": " + std::to_string(op.buffer) + " is no allocation");
        id(op.buffer, "buffer");
        if (s.buffers[op.buffer].persistent)
          error(where + ": " + bufferName(op.buffer) +
                " is persistent and is never freed");
        life[op.buffer] = Life::Freed;
        break;
      }
      case OpKind::Wait:
        if (op.waitEvent < 0 || op.waitEvent >= s.numEvents ||
            events[op.waitEvent] == Event::NotYet)
          error(where + ": event " + std::to_string(op.waitEvent) +
                " is waited before any op signals it");
        if (events[op.waitEvent] == Event::Waited)
          error(where + ": event " + std::to_string(op.waitEvent) +
                " is waited twice");
        events[op.waitEvent] = Event::Waited;
        break;
      case OpKind::AllGather: {
        const Buffer &src = id(op.src, "src"), &dst = id(op.dst, "dst");
        if (src.type != dst.type || __int128(src.numel) * axis() != dst.numel)
          error(where + ": dst must be " + std::to_string(axis()) +
                " times src, of the same type");
        signal();
        break;
      }
      case OpKind::ReduceScatter: {
        const Buffer &src = id(op.src, "src"), &dst = id(op.dst, "dst");
        if (src.type != dst.type || __int128(dst.numel) * axis() != src.numel)
          error(where + ": src must be " + std::to_string(axis()) +
                " times dst, of the same type");
        signal();
        break;
      }
      case OpKind::AllReduce:
        id(op.buffer, "buffer");
        signal();
        break;
      case OpKind::Broadcast:
        id(op.buffer, "buffer");
        if (op.root < 0 || op.root >= axis())
          error(where + ": root " + std::to_string(op.root) +
                " is not a rank of the group");
        signal();
        break;
      case OpKind::Copy: {
        const Buffer &src = id(op.src, "src"), &dst = id(op.dst, "dst");
        if (src.type != dst.type)
          error(where + ": src and dst have different element types");
        sameNumel(op.src, op.dst, "src and dst");
        signal();
        break;
      }
      case OpKind::Cast:
      case OpKind::Accumulate:
        id(op.src, "src");
        id(op.dst, "dst");
        sameNumel(op.src, op.dst, "src and dst");
        break;
      case OpKind::Zero:
        id(op.buffer, "buffer");
        break;
      case OpKind::Forward:
        unit();
        unitParams(op.params, op.tied);
        id(op.saves, "saves");
        break;
      case OpKind::Recompute:
        unit();
        unitParams(op.params, op.tied);
        id(op.input, "input");
        id(op.saves, "saves");
        break;
      case OpKind::Loss:
        unit();
        optionalScalar(op.lossScale, "loss_scale");
        if (!std::isfinite(op.scale))
          error(where + ": scale is not finite");
        break;
      case OpKind::Backward:
        unit();
        unitParams(op.params, op.tied);
        id(op.activations, "activations");
        id(op.grads, "grads");
        sameNumel(op.params, op.grads, "params and grads");
        if ((op.tiedGrads != -1) != (op.tied != -1))
          error(where + ": tied_grads must be given exactly when tied is");
        if (optional(op.tiedGrads, "tied_grads"))
          sameNumel(op.tied, op.tiedGrads, "tied and tied_grads");
        break;
      case OpKind::GradNorm:
        id(op.src, "src");
        scalar(op.scalar, "scalar");
        break;
      case OpKind::CheckFinite:
        id(op.buffer, "buffer");
        scalar(op.scalar, "scalar");
        break;
      case OpKind::OptimizerStep: {
        if (op.group < 0 || op.group >= int64_t(s.groups.size()))
          error(where + ": group " + std::to_string(op.group) + " is no group");
        id(op.params, "params");
        id(op.grads, "grads");
        sameNumel(op.params, op.grads, "params and grads");
        for (int64_t st : op.state) {
          id(st, "state");
          sameNumel(op.params, st, "params and state");
        }
        optionalScalar(op.norm, "norm");
        optionalScalar(op.foundInf, "found_inf");
        optionalScalar(op.lossScale, "loss_scale");
        break;
      }
      case OpKind::UpdateLossScale:
        scalar(op.scalar, "scalar");
        scalar(op.foundInf, "found_inf");
        break;
      }
    }

    for (int64_t e = 0; e < s.numEvents; ++e)
      if (events[e] != Event::Waited)
        error("event " + std::to_string(e) +
              (events[e] == Event::NotYet ? " is never signalled"
                                          : " is never waited"));
    for (size_t b = 0; b < s.buffers.size(); ++b) {
      if (s.buffers[b].kind != Buffer::Kind::Alloc)
        continue;
      if (life[b] == Life::NotYet)
        error(bufferName(b) + " is never allocated");
      if (!s.buffers[b].persistent && life[b] != Life::Freed)
        error(bufferName(b) + " is transient but never freed");
    }
  }

  const Schedule &s;
  const std::string &name;
  std::unordered_map<std::string, size_t> unitIndex, groupIndex;
  std::unordered_map<std::string, int64_t> paramNumel;
  std::vector<int64_t> tiedUnit; // per unit: the unit it ties, or -1
  std::vector<int64_t> root;     // per buffer: its allocation
};

} // namespace

//===----------------------------------------------------------------------===//
// Public entry points
//===----------------------------------------------------------------------===//

std::string serializeSchedule(const Schedule &schedule) {
  if (schedule.version != kScheduleFormatVersion)
    throw ScheduleFileError("schedule: version " +
                            std::to_string(schedule.version) +
                            " cannot be written by this writer (version " +
                            std::to_string(kScheduleFormatVersion) + ")");
  std::string body = toJson(schedule).dump();
  std::string out;
  out.reserve(kHeaderBytes + body.size());
  out.append(kMagic, sizeof(kMagic));
  putLE(out, kScheduleFormatVersion, 4);
  putLE(out, 0, 4); // flags
  putLE(out, body.size(), 8);
  putLE(out, crc32Of(body), 4);
  putLE(out, 0, 4); // reserved
  out += body;
  return out;
}

Schedule parseSchedule(std::string_view bytes, const std::string &name) {
  std::string_view body = checkHeader(bytes, name);
  // Checked before parsing: nlohmann's depth callback would slow every parse
  // down several times over.
  if (nestingDepth(body) > kMaxJsonDepth)
    fail(name, "the body nests deeper than " + std::to_string(kMaxJsonDepth) +
                   " levels");
  Json root;
  try {
    root = Json::parse(body.begin(), body.end());
  } catch (const nlohmann::json::exception &e) {
    // "[json.exception.parse_error.101] parse error at line 1, column 7: ..."
    std::string what = e.what();
    if (size_t bracket = what.find("] "); bracket != std::string::npos)
      what = what.substr(bracket + 2);
    fail(name, "the body is not valid JSON: " + what);
  }
  Schedule schedule = BodyReader(name).read(root);
  schedule.version = kScheduleFormatVersion;
  validateSchedule(schedule, name);
  return schedule;
}

std::string serializeModelConfig(const ModelConfig &model) {
  return toJson(model).dump();
}

ModelConfig parseModelConfig(std::string_view json, const std::string &name) {
  Json j;
  try {
    j = Json::parse(json.begin(), json.end());
  } catch (const nlohmann::json::exception &) {
    fail(name, "the model is not valid JSON");
  }
  Path root;
  return BodyReader(name).readModel(j, root.member("model"));
}

void validateSchedule(const Schedule &schedule, const std::string &name) {
  ScheduleValidator(schedule, name).run();
}

void writeScheduleFile(const Schedule &schedule, const std::string &path) {
  validateSchedule(schedule, path);
  std::string bytes = serializeSchedule(schedule);

  // A reader (or a crash) never sees half a file: write a temporary file
  // next to the target, flush it to disk, then rename it over the target.
  std::string dir = ".";
  if (size_t slash = path.rfind('/'); slash != std::string::npos)
    dir = slash == 0 ? "/" : path.substr(0, slash);
  std::string tmp = path + ".tmp.XXXXXX";
  std::vector<char> tmpName(tmp.begin(), tmp.end());
  tmpName.push_back('\0');
  int fd = mkstemp(tmpName.data());
  if (fd < 0)
    fail(path, std::string("cannot create a temporary file in ") + dir + ": " +
                   std::strerror(errno));
  auto abandon = [&](const char *what) {
    std::string reason = std::string(what) + ": " + std::strerror(errno);
    ::close(fd);
    ::unlink(tmpName.data());
    fail(path, reason);
  };
  // mkstemp creates 0600; a schedule is as readable as any output file.
  mode_t mask = ::umask(0);
  ::umask(mask);
  if (::fchmod(fd, 0666 & ~mask) != 0)
    abandon("cannot set permissions");
  size_t written = 0;
  while (written < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      abandon("cannot write");
    }
    written += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0)
    abandon("cannot sync");
  if (::close(fd) != 0) {
    std::string reason = std::string("cannot write: ") + std::strerror(errno);
    ::unlink(tmpName.data());
    fail(path, reason);
  }
  if (::rename(tmpName.data(), path.c_str()) != 0) {
    std::string reason = std::string("cannot rename the temporary file: ") +
                         std::strerror(errno);
    ::unlink(tmpName.data());
    fail(path, reason);
  }
  // Make the rename itself durable.
  int dirFd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dirFd >= 0) {
    ::fsync(dirFd);
    ::close(dirFd);
  }
}

Schedule readScheduleFile(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0)
    fail(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, "not a regular file");
  }
  std::string bytes;
  char chunk[1 << 16];
  while (true) {
    ssize_t n = ::read(fd, chunk, sizeof(chunk));
    if (n < 0) {
      if (errno == EINTR)
        continue;
      std::string reason = std::string("cannot read: ") + std::strerror(errno);
      ::close(fd);
      fail(path, reason);
    }
    if (n == 0)
      break;
    bytes.append(chunk, static_cast<size_t>(n));
  }
  ::close(fd);
  return parseSchedule(bytes, path);
}

} // namespace plan::rt
