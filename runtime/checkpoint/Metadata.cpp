//===- Metadata.cpp - checkpoint.json and the directory layout ------------===//
//
// docs/checkpoints.md describes the layout. checkpoint.json records the
// model, units and groups in the schedule file's own forms (ScheduleJson.h),
// so that a checkpoint and a schedule are compared field by field.
//
//===----------------------------------------------------------------------===//

#include "CheckpointFormat.h"
#include "ScheduleJson.h"

#include <algorithm>
#include <cstdio>
#include <set>

namespace plan::rt::checkpoint {

//===----------------------------------------------------------------------===//
// Layout
//===----------------------------------------------------------------------===//

std::string stepDirName(int64_t step) {
  char name[40];
  std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(step));
  return name;
}

std::string shardFileName(int64_t rank) {
  char name[40];
  std::snprintf(name, sizeof name, "rank-%05lld.safetensors",
                static_cast<long long>(rank));
  return name;
}

namespace {

/// The step of a directory named step-NNNNNNNN (at least 8 digits).
std::optional<int64_t> parseStepDirName(const std::string &name) {
  static const std::string prefix = "step-";
  if (name.rfind(prefix, 0) != 0 || name.size() < prefix.size() + 8 ||
      name.size() > prefix.size() + 18)
    return std::nullopt;
  int64_t step = 0;
  for (size_t i = prefix.size(); i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9')
      return std::nullopt;
    step = step * 10 + (name[i] - '0');
  }
  return step;
}

} // namespace

std::vector<std::pair<int64_t, std::string>>
completeCheckpoints(const std::string &root) {
  std::vector<std::pair<int64_t, std::string>> found;
  for (const std::string &name : support::listDirectory(root)) {
    auto step = parseStepDirName(name);
    std::string dir = support::joinPath(root, name);
    if (step && support::isDirectory(dir) &&
        support::isRegularFile(support::joinPath(dir, kMetadataFile)))
      found.push_back({*step, dir});
  }
  std::sort(found.begin(), found.end());
  return found;
}

void prune(const std::string &root, int keep) {
  for (const std::string &name : support::listDirectory(root)) {
    auto endsWith = [&](const std::string &suffix) {
      return name.size() > suffix.size() &&
             name.compare(name.size() - suffix.size(), suffix.size(), suffix) ==
                 0;
    };
    if (name.rfind(".step-", 0) == 0 &&
        (endsWith(".partial") || endsWith(".old")))
      support::removeTree(support::joinPath(root, name));
  }
  if (keep <= 0)
    return;
  auto complete = completeCheckpoints(root);
  for (size_t i = 0; i + static_cast<size_t>(keep) < complete.size(); ++i)
    support::removeTree(complete[i].second);
}

//===----------------------------------------------------------------------===//
// Encodings
//===----------------------------------------------------------------------===//

std::string toHex(const uint8_t *data, size_t size) {
  static const char digits[] = "0123456789abcdef";
  std::string out(2 * size, '0');
  for (size_t i = 0; i < size; ++i) {
    out[2 * i] = digits[data[i] >> 4];
    out[2 * i + 1] = digits[data[i] & 15];
  }
  return out;
}

std::optional<std::vector<uint8_t>> fromHex(const std::string &text) {
  if (text.size() % 2)
    return std::nullopt;
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9')
      return c - '0';
    if (c >= 'a' && c <= 'f')
      return c - 'a' + 10;
    return -1;
  };
  std::vector<uint8_t> out(text.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    int hi = digit(text[2 * i]), lo = digit(text[2 * i + 1]);
    if (hi < 0 || lo < 0)
      return std::nullopt;
    out[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return out;
}

std::string hexCrc(uint32_t crc) {
  char text[16];
  std::snprintf(text, sizeof text, "%08x", crc);
  return text;
}

//===----------------------------------------------------------------------===//
// What a checkpoint holds
//===----------------------------------------------------------------------===//

std::vector<SavedTensor> savedTensors(const Schedule &schedule) {
  std::vector<SavedTensor> out;
  // Each pipeline stage's ranks save its program's state.
  const int64_t stageRanks =
      schedule.replicate * schedule.shard * schedule.tensor;
  for (size_t stage = 0; stage < schedule.programs.size(); ++stage)
    for (const Buffer &b : schedule.programs[stage].buffers) {
      if (!isSavedState(schedule, static_cast<int64_t>(stage), b))
        continue;
      int64_t owners = b.sharded ? schedule.shard : 1;
      for (int64_t i = 0; i < owners; ++i)
        for (int64_t k = 0; k < schedule.tensor; ++k) {
          SavedTensor t;
          t.name = b.name;
          t.role = b.role;
          t.group = b.group;
          t.type = b.type;
          t.numel = b.numel;
          t.sharded = b.sharded;
          t.shardIndex = i;
          t.tensorIndex = k;
          // Replicate index 0: rank = stage * (replicate * shard * tensor)
          // + shard index * tensor + tensor index.
          t.rank = static_cast<int64_t>(stage) * stageRanks +
                   i * schedule.tensor + k;
          out.push_back(std::move(t));
        }
    }
  return out;
}

//===----------------------------------------------------------------------===//
// checkpoint.json
//===----------------------------------------------------------------------===//

/// The CRC-32 of checkpoint.json's contents without its `checksum` key, as
/// the writer prints them: an edit to any value (not to white space) shows.
static std::string metadataChecksum(const Json &j) {
  Json contents = j;
  contents.erase("checksum");
  return hexCrc(support::crc32(contents.dump(1)));
}

std::string metadataText(const CheckpointInfo &info, const Schedule &schedule,
                         const ExecutorCounters &counters,
                         const std::vector<std::array<int64_t, 3>> &files) {
  Json j;
  j["format"] = kFormatName;
  j["version"] = kCheckpointFormatVersion;
  j["producer"] = "plan-runtime";
  j["plan"] = schedule.planName;
  j["step"] = info.step;
  j["seed"] = info.seed;
  j["data"] = info.data;
  j["sequences_consumed"] = info.sequencesConsumed;
  j["global_batch"] = info.globalBatch;
  j["base"] = info.base;
  const OptimizerConfig &o = schedule.train.optimizer;
  j["optimizer"] = Json{{"kind", toString(o.kind)},
                        {"lr", o.lr},
                        {"beta1", o.beta1},
                        {"beta2", o.beta2},
                        {"eps", o.eps},
                        {"weight_decay", o.weightDecay},
                        {"decay", toString(o.decay)},
                        {"momentum", o.momentum}};
  j["precision"] = toString(schedule.train.precision);
  j["sharding"] = toString(schedule.sharding);
  j["mesh"] = Json{{"pipeline", schedule.pipeline},
                   {"replicate", schedule.replicate},
                   {"shard", schedule.shard},
                   {"tensor", schedule.tensor}};
  Json c;
  c["optimizer_steps"] = counters.optimizerSteps;
  c["loss_scale"] =
      counters.lossScale ? Json(*counters.lossScale) : Json(nullptr);
  c["growth_tracker"] = counters.growthTracker;
  j["counters"] = std::move(c);
  j["model"] = modelToJson(schedule.model);
  j["units"] = unitsToJson(schedule.units);
  j["groups"] = groupsToJson(schedule.groups);
  Json tensors = Json::array();
  for (const SavedTensor &t : savedTensors(schedule))
    tensors.push_back(Json{{"name", t.name},
                           {"role", toString(t.role)},
                           {"group", t.group},
                           {"dtype", toString(t.type)},
                           {"numel", t.numel},
                           {"sharded", t.sharded},
                           {"shard_index", t.shardIndex},
                           {"tensor_index", t.tensorIndex},
                           {"rank", t.rank}});
  j["tensors"] = std::move(tensors);
  Json fileList = Json::array();
  for (size_t r = 0; r < files.size(); ++r)
    fileList.push_back(
        Json{{"rank", static_cast<int64_t>(r)},
             {"file", shardFileName(static_cast<int64_t>(r))},
             {"bytes", files[r][1]},
             {"crc32", hexCrc(static_cast<uint32_t>(files[r][2]))}});
  j["files"] = std::move(fileList);
  j["checksum"] = metadataChecksum(j);
  return j.dump(1) + "\n";
}

namespace {

Metadata readMetadata(const JsonReader &r, const Json &j) {
  JsonPath at;
  Metadata m;
  r.object(j, at);
  if (r.getString(j, at, "format") != kFormatName)
    r.fail(at.member("format"),
           "not \"" + std::string(kFormatName) + "\": not a checkpoint");
  int64_t version = r.getInt(j, at, "version");
  if (version < 1 || version > kCheckpointFormatVersion)
    r.fail(at.member("version"),
           "format version " + std::to_string(version) +
               " is not supported (this build reads versions 1 to " +
               std::to_string(kCheckpointFormatVersion) + ")");
  if (version >= 2) {
    std::string stated = r.getString(j, at, "checksum");
    std::string actual = metadataChecksum(j);
    if (stated != actual)
      r.fail(at.member("checksum"),
             "is " + stated + ", but the contents give " + actual +
                 ": checkpoint.json was edited or damaged (a checkpoint's "
                 "description must match its tensors)");
  }
  m.plan = r.getString(j, at, "plan");
  m.info.step = r.getInt(j, at, "step");
  m.info.seed = r.getUnsigned(j, at, "seed");
  m.info.data = r.getString(j, at, "data");
  m.info.sequencesConsumed = r.getInt(j, at, "sequences_consumed");
  m.info.globalBatch = r.getInt(j, at, "global_batch");
  if (version >= 3)
    m.info.base = r.getString(j, at, "base");
  const Json &optimizer = r.getObject(j, at, "optimizer");
  m.optimizer =
      r.getKeyword<OptimizerKind>(optimizer, at.member("optimizer"), "kind");
  m.momentum = r.getNumber(optimizer, at.member("optimizer"), "momentum");
  m.precision = r.getKeyword<Precision>(j, at, "precision");
  m.sharding = r.getKeyword<Sharding>(j, at, "sharding");
  JsonPath mp = at.member("mesh");
  const Json &mesh = r.getObject(j, at, "mesh");
  m.replicate = r.getInt(mesh, mp, "replicate");
  m.shard = r.getInt(mesh, mp, "shard");
  if (version >= 4)
    m.tensor = r.getInt(mesh, mp, "tensor");
  if (version >= 5)
    m.pipeline = r.getInt(mesh, mp, "pipeline");
  if (m.pipeline < 1 || m.replicate < 1 || m.shard < 1 || m.tensor < 1)
    r.fail(mp, "invalid mesh " + std::to_string(m.pipeline) + "x" +
                   std::to_string(m.replicate) + "x" + std::to_string(m.shard) +
                   "x" + std::to_string(m.tensor));
  JsonPath cp = at.member("counters");
  const Json &counters = r.getObject(j, at, "counters");
  m.counters.optimizerSteps = r.getInt(counters, cp, "optimizer_steps");
  if (!r.member(counters, cp, "loss_scale").is_null())
    m.counters.lossScale = r.getNumber(counters, cp, "loss_scale");
  m.counters.growthTracker = r.getInt(counters, cp, "growth_tracker");
  m.model = modelFromJson(r, r.member(j, at, "model"), at.member("model"));

  JsonPath up = at.member("units");
  m.units = unitsFromJson(r, r.member(j, at, "units"), up);
  std::map<std::string, int64_t> unitNumel;
  for (size_t i = 0; i < m.units.size(); ++i) {
    const Unit &u = m.units[i];
    unitNumel[u.name] = u.numel;
    for (size_t k = 0; k < u.params.size(); ++k) {
      const Param &p = u.params[k];
      int64_t numel = p.localNumel(m.tensor);
      int64_t stored = p.frozen ? u.frozenNumel : u.numel;
      if (p.tiedTo.empty() &&
          (p.offset < 0 || numel < 0 || p.offset + numel > stored))
        r.fail(up.element(i).member("params").element(k),
               "lies outside its unit's " + std::to_string(stored) +
                   (p.frozen ? " frozen" : "") + " elements");
    }
  }
  JsonPath gp = at.member("groups");
  m.groups = groupsFromJson(r, r.member(j, at, "groups"), gp);
  std::map<std::string, const Group *> groupByName;
  for (size_t i = 0; i < m.groups.size(); ++i) {
    const Group &g = m.groups[i];
    groupByName[g.name] = &g;
    int64_t offset = 0;
    for (const std::string &unit : g.units) {
      auto it = unitNumel.find(unit);
      if (it == unitNumel.end())
        r.fail(gp.element(i),
               "names unit '" + unit + "', which 'units' does not list");
      if (m.unitPlace.count(unit))
        r.fail(gp.element(i), "unit '" + unit + "' is in two groups");
      m.unitPlace[unit] = {i, offset};
      offset += it->second;
    }
    if (offset > g.paddedNumel)
      r.fail(gp.element(i), "holds " + std::to_string(offset) +
                                " elements, more than its padded_numel " +
                                std::to_string(g.paddedNumel));
  }

  JsonPath fp = at.member("files");
  const Json &files = r.getArray(j, at, "files");
  std::set<int64_t> ranks;
  for (size_t i = 0; i < files.size(); ++i) {
    JsonPath p = fp.element(i);
    FileEntry f;
    f.rank = r.getInt(files[i], p, "rank");
    f.file = r.getString(files[i], p, "file");
    f.bytes = r.getInt(files[i], p, "bytes");
    std::string crc = r.getString(files[i], p, "crc32");
    auto crcBytes = fromHex(crc);
    if (!crcBytes || crcBytes->size() != 4)
      r.fail(p.member("crc32"), "'" + crc + "' is not 8 hex digits");
    f.crc = (uint32_t((*crcBytes)[0]) << 24) |
            (uint32_t((*crcBytes)[1]) << 16) | (uint32_t((*crcBytes)[2]) << 8) |
            uint32_t((*crcBytes)[3]);
    if (f.file.empty() || f.file.find('/') != std::string::npos)
      r.fail(p.member("file"), "'" + f.file + "' is not a file name");
    if (!ranks.insert(f.rank).second)
      r.fail(p, "rank " + std::to_string(f.rank) + " has two files");
    m.files.push_back(std::move(f));
  }

  JsonPath tp = at.member("tensors");
  const Json &tensors = r.getArray(j, at, "tensors");
  for (size_t i = 0; i < tensors.size(); ++i) {
    JsonPath p = tp.element(i);
    SavedTensor t;
    t.name = r.getString(tensors[i], p, "name");
    t.role = r.getKeyword<BufferRole>(tensors[i], p, "role");
    if (!isTrainingStateRole(t.role))
      r.fail(p.member("role"), std::string("'") + toString(t.role) +
                                   "' is not a role a checkpoint holds");
    t.group = r.getString(tensors[i], p, "group");
    t.type = r.getKeyword<ElementType>(tensors[i], p, "dtype");
    t.numel = r.getInt(tensors[i], p, "numel");
    t.sharded = r.getBool(tensors[i], p, "sharded");
    t.shardIndex = r.getInt(tensors[i], p, "shard_index");
    if (version >= 4)
      t.tensorIndex = r.getInt(tensors[i], p, "tensor_index");
    t.rank = r.getInt(tensors[i], p, "rank");
    if (t.tensorIndex < 0 || t.tensorIndex >= m.tensor)
      r.fail(p, "('" + t.name + "') is of tensor rank " +
                    std::to_string(t.tensorIndex) + " of a mesh with " +
                    std::to_string(m.tensor));
    auto g = groupByName.find(t.group);
    if (g == groupByName.end())
      r.fail(p, "names group '" + t.group + "', which 'groups' lacks");
    int64_t expected =
        t.sharded ? g->second->shardNumel : g->second->paddedNumel;
    if (t.numel != expected)
      r.fail(p, "('" + t.name + "') has " + std::to_string(t.numel) +
                    " elements, but its group's " +
                    (t.sharded ? "shard" : "padded size") + " is " +
                    std::to_string(expected));
    if (!ranks.count(t.rank))
      r.fail(p, "is held by rank " + std::to_string(t.rank) +
                    ", which 'files' does not list");
    if (t.sharded ? t.shardIndex < 0 || t.shardIndex >= m.shard
                  : t.shardIndex != 0)
      r.fail(p, "('" + t.name + "') is shard " + std::to_string(t.shardIndex) +
                    " of a mesh with " + std::to_string(m.shard) + " shards");
    m.tensors.push_back(std::move(t));
  }

  // The fields agree with one another: the mesh with the files and the
  // groups' shards, the optimizer with the state saved.
  const int64_t world = m.pipeline * m.replicate * m.shard * m.tensor;
  if (static_cast<int64_t>(m.files.size()) != world)
    r.fail(mp,
           "is " +
               (m.pipeline > 1 ? std::to_string(m.pipeline) + "x"
                               : std::string()) +
               std::to_string(m.replicate) + "x" + std::to_string(m.shard) +
               (m.tensor > 1 || m.pipeline > 1 ? "x" + std::to_string(m.tensor)
                                               : "") +
               ", " + std::to_string(world) +
               " ranks that write a file each, but 'files' lists " +
               std::to_string(m.files.size()));
  for (size_t i = 0; i < m.groups.size(); ++i)
    if (m.groups[i].shardNumel * m.shard != m.groups[i].paddedNumel)
      r.fail(gp.element(i),
             "has shard_numel " + std::to_string(m.groups[i].shardNumel) +
                 ", which is not padded_numel " +
                 std::to_string(m.groups[i].paddedNumel) + " / " +
                 std::to_string(m.shard) + " shards (mesh)");
  std::set<BufferRole> roles;
  for (const SavedTensor &t : m.tensors)
    roles.insert(t.role);
  std::set<BufferRole> optimizerRoles;
  if (m.optimizer == OptimizerKind::AdamW)
    optimizerRoles = {BufferRole::ExpAvg, BufferRole::ExpAvgSq};
  else if (m.momentum != 0)
    optimizerRoles = {BufferRole::Momentum};
  for (BufferRole role :
       {BufferRole::ExpAvg, BufferRole::ExpAvgSq, BufferRole::Momentum})
    if (roles.count(role) != optimizerRoles.count(role))
      r.fail(
          at.member("optimizer"),
          std::string("says ") + toString(m.optimizer) +
              (m.optimizer == OptimizerKind::SGD
                   ? (m.momentum != 0 ? " with momentum" : " without momentum")
                   : "") +
              ", but the tensors " + (roles.count(role) ? "hold " : "lack ") +
              toString(role) + " state");
  return m;
}

} // namespace

Metadata parseMetadata(const std::string &text, const std::string &path) {
  try {
    return readMetadata(JsonReader(path), support::parseJson(text, path));
  } catch (const support::JsonError &e) {
    throw CheckpointError(e.what());
  }
}

} // namespace plan::rt::checkpoint
