//===- Checkpoint.cpp - Sharded checkpoints: save, resume, reshard, export ===//
//
// docs/checkpoints.md describes the layout and the protocol. Directory and
// file operations are POSIX calls: libtorch.so exports its own copies of some
// std::filesystem symbols, which interpose on libstdc++'s and crash.
//
//===----------------------------------------------------------------------===//

#include "Checkpoint.h"

#include "SafeTensors.h"
#include "ScheduleFile.h"

#include <ATen/CPUGeneratorImpl.h>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <tuple>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace plan::rt {
namespace {

using nlohmann::json;

constexpr const char *kFormatName = "plan-checkpoint";
constexpr const char *kMetadataFile = "checkpoint.json";
constexpr const char *kRngKey = "plan.rng_state";

//===----------------------------------------------------------------------===//
// Files and directories
//===----------------------------------------------------------------------===//

std::string errnoText() { return std::strerror(errno); }

std::string join(const std::string &dir, const std::string &name) {
  if (dir.empty())
    return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

bool isDirectory(const std::string &path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool isRegularFile(const std::string &path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool pathExists(const std::string &path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

void makeDirectories(const std::string &path) {
  if (path.empty() || isDirectory(path))
    return;
  size_t slash = path.find_last_of('/', path.size() - 2);
  if (slash != std::string::npos && slash > 0)
    makeDirectories(path.substr(0, slash));
  if (::mkdir(path.c_str(), 0777) != 0 && errno != EEXIST)
    throw CheckpointError("cannot create directory '" + path +
                          "': " + errnoText());
  if (!isDirectory(path))
    throw CheckpointError("'" + path + "' exists and is not a directory");
}

/// Removes `path` and, when it is a directory, everything below it. A path
/// that does not exist is not an error.
void removeTree(const std::string &path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT)
      return;
    throw CheckpointError("cannot remove '" + path + "': " + errnoText());
  }
  if (S_ISDIR(st.st_mode)) {
    DIR *dir = ::opendir(path.c_str());
    if (!dir)
      throw CheckpointError("cannot open directory '" + path +
                            "': " + errnoText());
    std::vector<std::string> children;
    while (dirent *entry = ::readdir(dir)) {
      std::string name = entry->d_name;
      if (name != "." && name != "..")
        children.push_back(name);
    }
    ::closedir(dir);
    for (const std::string &child : children)
      removeTree(join(path, child));
    if (::rmdir(path.c_str()) != 0 && errno != ENOENT)
      throw CheckpointError("cannot remove directory '" + path +
                            "': " + errnoText());
    return;
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    throw CheckpointError("cannot remove '" + path + "': " + errnoText());
}

/// fsync of a file or a directory (a rename is durable once its directory
/// is synced).
void syncPath(const std::string &path, bool directory) {
  int fd = ::open(path.c_str(),
                  O_RDONLY | O_CLOEXEC | (directory ? O_DIRECTORY : 0));
  if (fd < 0)
    throw CheckpointError("cannot open '" + path +
                          "' to sync it: " + errnoText());
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0)
    throw CheckpointError("cannot sync '" + path + "': " + std::strerror(err));
}

void renamePath(const std::string &from, const std::string &to) {
  if (::rename(from.c_str(), to.c_str()) != 0)
    throw CheckpointError("cannot rename '" + from + "' to '" + to +
                          "': " + errnoText());
}

/// Writes `text` to `path` atomically: PATH.tmp, fsync, rename.
void writeFileAtomic(const std::string &path, const std::string &text) {
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0)
    throw CheckpointError("cannot create '" + tmp + "': " + errnoText());
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      throw CheckpointError("cannot write '" + tmp +
                            "': " + std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    int err = errno;
    ::close(fd);
    throw CheckpointError("cannot sync '" + tmp + "': " + std::strerror(err));
  }
  ::close(fd);
  renamePath(tmp, path);
}

std::string readTextFile(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw CheckpointError("cannot read '" + path + "': " + errnoText());
  std::string text;
  char chunk[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      throw CheckpointError("cannot read '" + path +
                            "': " + std::strerror(err));
    }
    if (n == 0)
      break;
    text.append(chunk, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

/// The size and zlib CRC-32 of a file's contents.
std::pair<int64_t, uint32_t> sizeAndCrc(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw CheckpointError("cannot read '" + path + "': " + errnoText());
  uLong crc = ::crc32(0L, Z_NULL, 0);
  int64_t bytes = 0;
  std::vector<unsigned char> chunk(1 << 20);
  for (;;) {
    ssize_t n = ::read(fd, chunk.data(), chunk.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      throw CheckpointError("cannot read '" + path +
                            "': " + std::strerror(err));
    }
    if (n == 0)
      break;
    crc = ::crc32(crc, chunk.data(), static_cast<uInt>(n));
    bytes += n;
  }
  ::close(fd);
  return {bytes, static_cast<uint32_t>(crc)};
}

int64_t fileSize(const std::string &path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return -1;
  return static_cast<int64_t>(st.st_size);
}

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

std::vector<std::string> listDirectory(const std::string &path) {
  std::vector<std::string> names;
  DIR *dir = ::opendir(path.c_str());
  if (!dir)
    return names;
  while (dirent *entry = ::readdir(dir)) {
    std::string name = entry->d_name;
    if (name != "." && name != "..")
      names.push_back(name);
  }
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

/// The complete checkpoints under `root` (step directories holding
/// checkpoint.json), by step.
std::vector<std::pair<int64_t, std::string>>
completeCheckpoints(const std::string &root) {
  std::vector<std::pair<int64_t, std::string>> found;
  for (const std::string &name : listDirectory(root)) {
    auto step = parseStepDirName(name);
    std::string dir = join(root, name);
    if (step && isDirectory(dir) && isRegularFile(join(dir, kMetadataFile)))
      found.push_back({*step, dir});
  }
  std::sort(found.begin(), found.end());
  return found;
}

/// Deletes leftovers of interrupted saves (.step-*.partial, .step-*.old) and,
/// with keep > 0, all but the `keep` newest complete checkpoints.
void prune(const std::string &root, int keep) {
  for (const std::string &name : listDirectory(root)) {
    auto endsWith = [&](const std::string &suffix) {
      return name.size() > suffix.size() &&
             name.compare(name.size() - suffix.size(), suffix.size(), suffix) ==
                 0;
    };
    if (name.rfind(".step-", 0) == 0 &&
        (endsWith(".partial") || endsWith(".old")))
      removeTree(join(root, name));
  }
  if (keep <= 0)
    return;
  auto complete = completeCheckpoints(root);
  for (size_t i = 0; i + static_cast<size_t>(keep) < complete.size(); ++i)
    removeTree(complete[i].second);
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

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

/// The roles a checkpoint stores; everything else is zeroed on restore.
bool isSavedRole(BufferRole role) {
  return role == BufferRole::Param || role == BufferRole::Master ||
         role == BufferRole::ExpAvg || role == BufferRole::ExpAvgSq ||
         role == BufferRole::Momentum;
}

bool isSavedBuffer(const Buffer &b) {
  return b.kind == Buffer::Kind::Alloc && b.persistent && !b.group.empty() &&
         isSavedRole(b.role);
}

at::ScalarType scalarTypeOf(ElementType type) {
  switch (type) {
  case ElementType::F32:
    return at::kFloat;
  case ElementType::BF16:
    return at::kBFloat16;
  case ElementType::F16:
    return at::kHalf;
  }
  return at::kFloat;
}

//===----------------------------------------------------------------------===//
// checkpoint.json
//===----------------------------------------------------------------------===//

/// Which rank's file holds a saved buffer, and which shard it is: a sharded
/// buffer is saved by the ranks of replicate index 0 (rank = shard index), an
/// unsharded one by rank 0.
struct SavedTensor {
  std::string name;
  BufferRole role = BufferRole::Param;
  std::string group;
  ElementType type = ElementType::F32;
  int64_t numel = 0;
  bool sharded = false;
  int64_t shardIndex = 0;
  int64_t rank = 0;
};

std::vector<SavedTensor> savedTensors(const Schedule &schedule) {
  std::vector<SavedTensor> out;
  for (const Buffer &b : schedule.buffers) {
    if (!isSavedBuffer(b))
      continue;
    int64_t owners = b.sharded ? schedule.shard : 1;
    for (int64_t i = 0; i < owners; ++i) {
      SavedTensor t;
      t.name = b.name;
      t.role = b.role;
      t.group = b.group;
      t.type = b.type;
      t.numel = b.numel;
      t.sharded = b.sharded;
      t.shardIndex = i;
      t.rank = i; // replicate index 0: rank = shard index
      out.push_back(std::move(t));
    }
  }
  return out;
}

json metadataJson(const CheckpointInfo &info, const Schedule &schedule,
                  const ExecutorCounters &counters,
                  const std::vector<std::array<int64_t, 3>> &files) {
  json j;
  j["format"] = kFormatName;
  j["version"] = kCheckpointFormatVersion;
  j["producer"] = "plan-runtime";
  j["plan"] = schedule.planName;
  j["step"] = info.step;
  j["seed"] = info.seed;
  j["data"] = info.data;
  j["sequences_consumed"] = info.sequencesConsumed;
  j["global_batch"] = info.globalBatch;
  const OptimizerConfig &o = schedule.train.optimizer;
  j["optimizer"] = {{"kind", o.kind},        {"lr", o.lr},
                    {"beta1", o.beta1},      {"beta2", o.beta2},
                    {"eps", o.eps},          {"weight_decay", o.weightDecay},
                    {"momentum", o.momentum}};
  j["precision"] = schedule.train.precision;
  j["sharding"] = schedule.sharding;
  j["mesh"] = {{"replicate", schedule.replicate}, {"shard", schedule.shard}};
  json c;
  c["optimizer_steps"] = counters.optimizerSteps;
  c["loss_scale"] =
      counters.lossScale ? json(*counters.lossScale) : json(nullptr);
  c["growth_tracker"] = counters.growthTracker;
  j["counters"] = std::move(c);
  j["model"] = json::parse(serializeModelConfig(schedule.model));
  json units = json::array();
  for (const Unit &u : schedule.units) {
    json params = json::array();
    for (const Param &p : u.params)
      params.push_back({{"name", p.name},
                        {"shape", p.shape},
                        {"offset", p.offset},
                        {"tied_to", p.tiedTo}});
    units.push_back({{"name", u.name},
                     {"kind", u.kind},
                     {"numel", u.numel},
                     {"params", std::move(params)}});
  }
  j["units"] = std::move(units);
  json groups = json::array();
  for (const Group &g : schedule.groups)
    groups.push_back({{"name", g.name},
                      {"units", g.units},
                      {"numel", g.numel},
                      {"padded_numel", g.paddedNumel},
                      {"shard_numel", g.shardNumel}});
  j["groups"] = std::move(groups);
  json tensors = json::array();
  for (const SavedTensor &t : savedTensors(schedule))
    tensors.push_back({{"name", t.name},
                       {"role", toString(t.role)},
                       {"group", t.group},
                       {"dtype", toString(t.type)},
                       {"numel", t.numel},
                       {"sharded", t.sharded},
                       {"shard_index", t.shardIndex},
                       {"rank", t.rank}});
  j["tensors"] = std::move(tensors);
  json fileList = json::array();
  for (size_t r = 0; r < files.size(); ++r)
    fileList.push_back({{"rank", static_cast<int64_t>(r)},
                        {"file", shardFileName(static_cast<int64_t>(r))},
                        {"bytes", files[r][1]},
                        {"crc32", hexCrc(static_cast<uint32_t>(files[r][2]))}});
  j["files"] = std::move(fileList);
  return j;
}

/// Reads checkpoint.json with one-line errors naming the file and the key.
class JsonReader {
public:
  explicit JsonReader(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const std::string &why) const {
    throw CheckpointError("checkpoint '" + file_ + "': " + why);
  }
  const json &member(const json &j, const std::string &at,
                     const char *key) const {
    if (!j.is_object())
      fail(at + " is not an object");
    auto it = j.find(key);
    if (it == j.end())
      fail("missing key " + where(at, key));
    return *it;
  }
  std::string where(const std::string &at, const char *key) const {
    std::string text = "'";
    if (!at.empty()) {
      text += at;
      text += '.';
    }
    text += key;
    text += '\'';
    return text;
  }
  int64_t integer(const json &j, const std::string &at, const char *key) const {
    const json &v = member(j, at, key);
    if (!v.is_number_integer())
      fail(where(at, key) + " is not an integer");
    return v.get<int64_t>();
  }
  uint64_t unsignedInteger(const json &j, const std::string &at,
                           const char *key) const {
    const json &v = member(j, at, key);
    if (!v.is_number_unsigned())
      fail(where(at, key) + " is not a non-negative integer");
    return v.get<uint64_t>();
  }
  double number(const json &j, const std::string &at, const char *key) const {
    const json &v = member(j, at, key);
    if (!v.is_number())
      fail(where(at, key) + " is not a number");
    return v.get<double>();
  }
  std::string string(const json &j, const std::string &at,
                     const char *key) const {
    const json &v = member(j, at, key);
    if (!v.is_string())
      fail(where(at, key) + " is not a string");
    return v.get<std::string>();
  }
  bool boolean(const json &j, const std::string &at, const char *key) const {
    const json &v = member(j, at, key);
    if (!v.is_boolean())
      fail(where(at, key) + " is not a boolean");
    return v.get<bool>();
  }
  const json &array(const json &j, const std::string &at,
                    const char *key) const {
    const json &v = member(j, at, key);
    if (!v.is_array())
      fail(where(at, key) + " is not an array");
    return v;
  }
  std::vector<int64_t> integers(const json &j, const std::string &at,
                                const char *key) const {
    std::vector<int64_t> out;
    for (const json &v : array(j, at, key)) {
      if (!v.is_number_integer())
        fail(where(at, key) + " holds a non-integer");
      out.push_back(v.get<int64_t>());
    }
    return out;
  }

private:
  std::string file_;
};

std::string indexed(const char *key, size_t i) {
  return std::string(key) + "[" + std::to_string(i) + "]";
}

} // namespace

//===----------------------------------------------------------------------===//
// Save
//===----------------------------------------------------------------------===//

namespace {

/// World all-reduce (sum) of an int64 CPU tensor; nothing at world 1.
void worldSum(Comm &comm, at::Tensor &values) {
  if (comm.world() <= 1)
    return;
  std::vector<at::Tensor> tensors{values};
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp::SUM;
  comm.group(GroupAxis::World).allreduce(tensors, options)->wait();
}

std::string rngStateHex() {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  at::Tensor state;
  {
    std::lock_guard<std::mutex> lock(gen.mutex());
    state = gen.get_state();
  }
  state = state.contiguous();
  return toHex(state.data_ptr<uint8_t>(), static_cast<size_t>(state.numel()));
}

/// The tensors of this rank's shard file: the saved buffers it owns.
std::vector<std::pair<std::string, at::Tensor>>
ownedTensors(const Schedule &schedule, const Executor &executor, Comm &comm) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  const bool firstReplica = comm.groupRank(GroupAxis::Replicate) == 0;
  for (size_t id = 0; id < schedule.buffers.size(); ++id) {
    const Buffer &b = schedule.buffers[id];
    if (!isSavedBuffer(b))
      continue;
    bool owner = b.sharded ? firstReplica : comm.rank() == 0;
    if (owner)
      out.push_back(
          {b.name, executor.buffer(static_cast<int64_t>(id)).to(at::kCPU)});
  }
  return out;
}

} // namespace

SaveResult saveCheckpoint(const std::string &root, const CheckpointInfo &info,
                          const Schedule &schedule, const Executor &executor,
                          Comm &comm, const SaveOptions &options) {
  auto start = std::chrono::steady_clock::now();
  const int world = comm.world(), rank = comm.rank();
  const std::string name = stepDirName(info.step);
  const std::string partial = join(root, "." + name + ".partial");
  const std::string final = join(root, name);

  // 1. Rank 0 prepares the partial directory; the others wait for it.
  std::string failure;
  if (rank == 0) {
    try {
      makeDirectories(root);
      removeTree(partial);
      if (::mkdir(partial.c_str(), 0777) != 0)
        throw CheckpointError("cannot create directory '" + partial +
                              "': " + errnoText());
    } catch (const std::exception &e) {
      failure = e.what();
    }
  }
  at::Tensor prepared = at::zeros({1}, at::kLong);
  prepared[0] = failure.empty() ? 0 : 1;
  worldSum(comm, prepared);
  if (prepared.item<int64_t>() != 0)
    throw CheckpointError(!failure.empty()
                              ? failure
                              : "rank 0 could not create the checkpoint "
                                "directory '" +
                                    partial + "'");

  // 2. Every rank writes its shard file and reports (ok, bytes, crc).
  const std::string file = join(partial, shardFileName(rank));
  int64_t bytes = 0;
  uint32_t crc = 0;
  try {
    std::map<std::string, std::string> metadata{
        {"plan.format", kFormatName},
        {"plan.rank", std::to_string(rank)},
        {"plan.step", std::to_string(info.step)},
        {kRngKey, rngStateHex()}};
    const std::string tmp = file + ".tmp";
    try {
      writeSafeTensors(tmp, ownedTensors(schedule, executor, comm), metadata);
    } catch (const WeightsError &e) {
      throw CheckpointError(e.what());
    }
    syncPath(tmp, false);
    if (options.afterShardWritten)
      options.afterShardWritten(tmp);
    renamePath(tmp, file);
    std::tie(bytes, crc) = sizeAndCrc(file);
  } catch (const std::exception &e) {
    failure = "rank " + std::to_string(rank) +
              " could not write its checkpoint shard: " + e.what();
  }
  at::Tensor results = at::zeros({world, 3}, at::kLong);
  results[rank][0] = failure.empty() ? 1 : 0;
  results[rank][1] = bytes;
  results[rank][2] = static_cast<int64_t>(crc);
  worldSum(comm, results);
  std::vector<std::array<int64_t, 3>> files(static_cast<size_t>(world));
  auto acc = results.accessor<int64_t, 2>();
  for (int r = 0; r < world; ++r)
    files[r] = {acc[r][0], acc[r][1], acc[r][2]};
  for (int r = 0; r < world; ++r)
    if (files[r][0] != 1)
      throw CheckpointError(r == rank ? failure
                                      : "rank " + std::to_string(r) +
                                            " could not write its checkpoint "
                                            "shard into '" +
                                            partial + "'");

  // 3. Rank 0 writes checkpoint.json last and moves the directory in place.
  int64_t total = 0;
  for (const auto &f : files)
    total += f[1];
  if (rank == 0) {
    try {
      std::string text =
          metadataJson(info, schedule, executor.counters(), files).dump(1) +
          "\n";
      writeFileAtomic(join(partial, kMetadataFile), text);
      total += static_cast<int64_t>(text.size());
      syncPath(partial, true);
      std::string old = join(root, "." + name + ".old");
      if (pathExists(final)) {
        removeTree(old);
        renamePath(final, old);
      }
      renamePath(partial, final);
      syncPath(root, true);
      prune(root, options.keep);
    } catch (const std::exception &e) {
      failure = e.what();
    }
  }
  at::Tensor committed = at::zeros({2}, at::kLong);
  if (rank == 0) {
    committed[0] = failure.empty() ? 0 : 1;
    committed[1] = total;
  }
  worldSum(comm, committed);
  if (committed[0].item<int64_t>() != 0)
    throw CheckpointError(rank == 0 ? failure
                                    : "rank 0 could not commit the checkpoint "
                                      "'" +
                                          final + "'");
  SaveResult result;
  result.directory = final;
  result.bytes = committed[1].item<int64_t>();
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return result;
}

void makeCheckpointRoot(const std::string &root) { makeDirectories(root); }

std::optional<std::string> findCheckpoint(const std::string &path) {
  if (isRegularFile(join(path, kMetadataFile)))
    return path;
  if (!isDirectory(path))
    return std::nullopt;
  auto complete = completeCheckpoints(path);
  if (complete.empty())
    return std::nullopt;
  return complete.back().second;
}

//===----------------------------------------------------------------------===//
// Open
//===----------------------------------------------------------------------===//

struct Checkpoint::Impl {
  struct FileEntry {
    int64_t rank = 0;
    std::string file; // name within the directory
    int64_t bytes = 0;
    uint32_t crc = 0;
    std::unique_ptr<SafeTensorsFile> opened; // after the size and CRC check
  };

  std::string directory;
  std::string metadataPath;
  CheckpointInfo info;
  ExecutorCounters counters;
  ModelConfig model;
  std::string plan, precision, sharding, optimizer;
  json optimizerJson;
  int64_t replicate = 1, shard = 1;
  int64_t metadataBytes = 0;
  std::vector<Unit> units;
  std::vector<Group> groups;
  std::vector<SavedTensor> tensors;
  std::vector<FileEntry> files;
  // unit name -> (group index, element offset of the unit in the group)
  std::map<std::string, std::pair<size_t, int64_t>> unitPlace;
  std::mutex mutex; // guards FileEntry::opened

  const SafeTensorsFile &file(int64_t rank) {
    std::lock_guard<std::mutex> lock(mutex);
    for (FileEntry &f : files) {
      if (f.rank != rank)
        continue;
      if (!f.opened) {
        verifyFile(f);
        try {
          f.opened = std::make_unique<SafeTensorsFile>(join(directory, f.file));
        } catch (const WeightsError &e) {
          throw CheckpointError(std::string("checkpoint shard: ") + e.what());
        }
      }
      return *f.opened;
    }
    throw CheckpointError("checkpoint '" + metadataPath +
                          "' lists no file of rank " + std::to_string(rank));
  }

  void verifyFile(const FileEntry &f) const {
    std::string path = join(directory, f.file);
    int64_t size = fileSize(path);
    if (size < 0)
      throw CheckpointError("checkpoint shard '" + path + "' is missing");
    if (size != f.bytes)
      throw CheckpointError(
          "checkpoint shard '" + path + "' has " + std::to_string(size) +
          " bytes, but " + kMetadataFile + " records " +
          std::to_string(f.bytes) + (size < f.bytes ? " (truncated)" : ""));
    auto [bytes, crc] = sizeAndCrc(path);
    if (bytes != f.bytes)
      throw CheckpointError("checkpoint shard '" + path +
                            "' changed while it was read");
    if (crc != f.crc)
      throw CheckpointError("checkpoint shard '" + path + "' has CRC-32 " +
                            hexCrc(crc) + ", but " + kMetadataFile +
                            " records " + hexCrc(f.crc) + " (corrupted)");
  }

  /// The saved tensors of `group` in `role`, by shard index.
  std::vector<const SavedTensor *> tensorsOf(const std::string &group,
                                             BufferRole role) const {
    std::vector<const SavedTensor *> out;
    for (const SavedTensor &t : tensors)
      if (t.group == group && t.role == role)
        out.push_back(&t);
    std::sort(out.begin(), out.end(),
              [](const SavedTensor *a, const SavedTensor *b) {
                return a->shardIndex < b->shardIndex;
              });
    return out;
  }

  /// Whether every saved tensor of `role` has element type `type`.
  bool allOfType(BufferRole role, ElementType type) const {
    for (const SavedTensor &t : tensors)
      if (t.role == role && t.type != type)
        return false;
    return true;
  }

  bool hasRole(BufferRole role) const {
    for (const SavedTensor &t : tensors)
      if (t.role == role)
        return true;
    return false;
  }

  /// Copies elements [offset, offset + dst.numel()) of unit `unit`'s stored
  /// elements in `role` into `dst` (converting the dtype).
  void readUnit(const std::string &unit, BufferRole role, int64_t offset,
                at::Tensor dst) {
    auto place = unitPlace.find(unit);
    if (place == unitPlace.end())
      throw CheckpointError("checkpoint '" + directory +
                            "' holds no state of unit '" + unit + "'");
    const Group &group = groups[place->second.first];
    auto sources = tensorsOf(group.name, role);
    if (sources.empty())
      throw CheckpointError("checkpoint '" + directory + "' has no " +
                            toString(role) + " of group '" + group.name + "'");
    int64_t begin = place->second.second + offset;
    const int64_t end = begin + dst.numel();
    int64_t written = 0;
    while (begin < end) {
      const SavedTensor *src = nullptr;
      int64_t srcOffset = 0, count = 0;
      if (!sources.front()->sharded) {
        src = sources.front();
        srcOffset = begin;
        count = end - begin;
      } else {
        const int64_t shardNumel = sources.front()->numel;
        int64_t index = shardNumel > 0 ? begin / shardNumel : 0;
        for (const SavedTensor *t : sources)
          if (t->shardIndex == index)
            src = t;
        if (!src || shardNumel <= 0)
          throw CheckpointError("checkpoint '" + directory + "' lacks shard " +
                                std::to_string(index) + " of " +
                                toString(role) + " of group '" + group.name +
                                "'");
        srcOffset = begin - index * shardNumel;
        count = std::min(end - begin, shardNumel - srcOffset);
      }
      if (srcOffset + count > src->numel)
        throw CheckpointError("checkpoint '" + directory + "': tensor '" +
                              src->name + "' is smaller than its group '" +
                              group.name + "'");
      at::Tensor piece;
      try {
        piece = file(src->rank).read(src->name, srcOffset, count);
      } catch (const WeightsError &e) {
        throw CheckpointError(std::string("checkpoint shard: ") + e.what());
      }
      dst.narrow(0, written, count).copy_(piece);
      written += count;
      begin += count;
    }
  }
};

Checkpoint::Checkpoint(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Checkpoint::~Checkpoint() = default;
Checkpoint::Checkpoint(Checkpoint &&) noexcept = default;
Checkpoint &Checkpoint::operator=(Checkpoint &&) noexcept = default;

Checkpoint Checkpoint::open(const std::string &directory) {
  auto impl = std::make_unique<Impl>();
  Impl &c = *impl;
  c.directory = directory;
  c.metadataPath = join(directory, kMetadataFile);
  if (!isDirectory(directory))
    throw CheckpointError("checkpoint '" + directory +
                          "' does not exist or is not a directory");
  if (!isRegularFile(c.metadataPath))
    throw CheckpointError("checkpoint '" + directory + "' has no " +
                          kMetadataFile +
                          " (not a checkpoint, or an "
                          "incomplete save)");
  std::string text = readTextFile(c.metadataPath);
  c.metadataBytes = static_cast<int64_t>(text.size());
  JsonReader r(c.metadataPath);
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception &) {
    r.fail("not valid JSON");
  }
  if (!j.is_object())
    r.fail("not a JSON object");
  if (r.string(j, "", "format") != kFormatName)
    r.fail("'format' is not \"" + std::string(kFormatName) + "\"");
  int64_t version = r.integer(j, "", "version");
  if (version != kCheckpointFormatVersion)
    r.fail("format version " + std::to_string(version) +
           " is not supported (this build reads version " +
           std::to_string(kCheckpointFormatVersion) + ")");
  c.plan = r.string(j, "", "plan");
  c.info.step = r.integer(j, "", "step");
  c.info.seed = r.unsignedInteger(j, "", "seed");
  c.info.data = r.string(j, "", "data");
  c.info.sequencesConsumed = r.integer(j, "", "sequences_consumed");
  c.info.globalBatch = r.integer(j, "", "global_batch");
  const json &opt = r.member(j, "", "optimizer");
  c.optimizer = r.string(opt, "optimizer", "kind");
  c.optimizerJson = opt;
  c.precision = r.string(j, "", "precision");
  c.sharding = r.string(j, "", "sharding");
  const json &mesh = r.member(j, "", "mesh");
  c.replicate = r.integer(mesh, "mesh", "replicate");
  c.shard = r.integer(mesh, "mesh", "shard");
  if (c.replicate < 1 || c.shard < 1)
    r.fail("invalid mesh " + std::to_string(c.replicate) + "x" +
           std::to_string(c.shard));
  const json &counters = r.member(j, "", "counters");
  c.counters.optimizerSteps =
      r.integer(counters, "counters", "optimizer_steps");
  const json &ls = r.member(counters, "counters", "loss_scale");
  if (!ls.is_null())
    c.counters.lossScale = r.number(counters, "counters", "loss_scale");
  c.counters.growthTracker = r.integer(counters, "counters", "growth_tracker");

  const json &m = r.member(j, "", "model");
  // The schedule file's spelling and checks (runtime/format).
  try {
    c.model = parseModelConfig(m.dump(), c.metadataPath);
  } catch (const ScheduleFileError &e) {
    throw CheckpointError(e.what());
  }

  const json &units = r.array(j, "", "units");
  for (size_t i = 0; i < units.size(); ++i) {
    std::string at = indexed("units", i);
    Unit u;
    u.name = r.string(units[i], at, "name");
    u.kind = r.string(units[i], at, "kind");
    u.numel = r.integer(units[i], at, "numel");
    const json &params = r.array(units[i], at, "params");
    for (size_t k = 0; k < params.size(); ++k) {
      std::string pat = at + "." + indexed("params", k);
      Param p;
      p.name = r.string(params[k], pat, "name");
      p.shape = r.integers(params[k], pat, "shape");
      p.offset = r.integer(params[k], pat, "offset");
      p.tiedTo = r.string(params[k], pat, "tied_to");
      int64_t numel = 1;
      for (int64_t d : p.shape)
        numel *= d;
      if (p.tiedTo.empty() &&
          (p.offset < 0 || numel < 0 || p.offset + numel > u.numel))
        r.fail(pat + " lies outside its unit's " + std::to_string(u.numel) +
               " elements");
      u.params.push_back(std::move(p));
    }
    c.units.push_back(std::move(u));
  }
  std::map<std::string, int64_t> unitNumel;
  for (const Unit &u : c.units)
    unitNumel[u.name] = u.numel;
  const json &groups = r.array(j, "", "groups");
  for (size_t i = 0; i < groups.size(); ++i) {
    std::string at = indexed("groups", i);
    Group g;
    g.name = r.string(groups[i], at, "name");
    g.numel = r.integer(groups[i], at, "numel");
    g.paddedNumel = r.integer(groups[i], at, "padded_numel");
    g.shardNumel = r.integer(groups[i], at, "shard_numel");
    int64_t offset = 0;
    for (const json &name : r.array(groups[i], at, "units")) {
      if (!name.is_string())
        r.fail(at + ".units holds a non-string");
      g.units.push_back(name.get<std::string>());
      auto it = unitNumel.find(g.units.back());
      if (it == unitNumel.end())
        r.fail(at + " names unit '" + g.units.back() +
               "', which 'units' does not list");
      if (c.unitPlace.count(g.units.back()))
        r.fail("unit '" + g.units.back() + "' is in two groups");
      c.unitPlace[g.units.back()] = {i, offset};
      offset += it->second;
    }
    if (offset > g.paddedNumel)
      r.fail(at + " holds " + std::to_string(offset) +
             " elements, more than its padded_numel " +
             std::to_string(g.paddedNumel));
    c.groups.push_back(std::move(g));
  }
  std::map<std::string, const Group *> groupByName;
  for (const Group &g : c.groups)
    groupByName[g.name] = &g;

  const json &files = r.array(j, "", "files");
  std::set<int64_t> ranks;
  for (size_t i = 0; i < files.size(); ++i) {
    std::string at = indexed("files", i);
    Impl::FileEntry f;
    f.rank = r.integer(files[i], at, "rank");
    f.file = r.string(files[i], at, "file");
    f.bytes = r.integer(files[i], at, "bytes");
    std::string crc = r.string(files[i], at, "crc32");
    auto crcBytes = fromHex(crc);
    if (!crcBytes || crcBytes->size() != 4)
      r.fail(at + ".crc32 '" + crc + "' is not 8 hex digits");
    f.crc = (uint32_t((*crcBytes)[0]) << 24) |
            (uint32_t((*crcBytes)[1]) << 16) | (uint32_t((*crcBytes)[2]) << 8) |
            uint32_t((*crcBytes)[3]);
    if (f.file.empty() || f.file.find('/') != std::string::npos)
      r.fail(at + ".file '" + f.file + "' is not a file name");
    if (!ranks.insert(f.rank).second)
      r.fail("rank " + std::to_string(f.rank) + " has two files");
    c.files.push_back(std::move(f));
  }

  const json &tensors = r.array(j, "", "tensors");
  for (size_t i = 0; i < tensors.size(); ++i) {
    std::string at = indexed("tensors", i);
    SavedTensor t;
    t.name = r.string(tensors[i], at, "name");
    std::string role = r.string(tensors[i], at, "role");
    auto parsedRole = parseBufferRole(role);
    if (!parsedRole || !isSavedRole(*parsedRole))
      r.fail(at + ".role '" + role + "' is not a saved role");
    t.role = *parsedRole;
    t.group = r.string(tensors[i], at, "group");
    std::string dtype = r.string(tensors[i], at, "dtype");
    auto type = parseElementType(dtype);
    if (!type)
      r.fail(at + ".dtype '" + dtype + "' is not an element type");
    t.type = *type;
    t.numel = r.integer(tensors[i], at, "numel");
    t.sharded = r.boolean(tensors[i], at, "sharded");
    t.shardIndex = r.integer(tensors[i], at, "shard_index");
    t.rank = r.integer(tensors[i], at, "rank");
    auto g = groupByName.find(t.group);
    if (g == groupByName.end())
      r.fail(at + " names group '" + t.group + "', which 'groups' lacks");
    int64_t expected =
        t.sharded ? g->second->shardNumel : g->second->paddedNumel;
    if (t.numel != expected)
      r.fail(at + " ('" + t.name + "') has " + std::to_string(t.numel) +
             " elements, but its group's " +
             (t.sharded ? "shard" : "padded size") + " is " +
             std::to_string(expected));
    if (!ranks.count(t.rank))
      r.fail(at + " is held by rank " + std::to_string(t.rank) +
             ", which 'files' does not list");
    c.tensors.push_back(std::move(t));
  }

  // Existence and size here (cheap: one stat each), so that a missing or
  // truncated shard is one message before any rank starts; the CRC-32 is
  // checked when a file is first read.
  for (const Impl::FileEntry &f : c.files) {
    std::string path = join(directory, f.file);
    if (!isRegularFile(path))
      throw CheckpointError("checkpoint shard '" + path + "' (rank " +
                            std::to_string(f.rank) + ") is missing");
    int64_t size = fileSize(path);
    if (size != f.bytes)
      throw CheckpointError(
          "checkpoint shard '" + path + "' has " + std::to_string(size) +
          " bytes, but " + kMetadataFile + " records " +
          std::to_string(f.bytes) + (size < f.bytes ? " (truncated)" : ""));
  }
  return Checkpoint(std::move(impl));
}

const std::string &Checkpoint::directory() const { return impl_->directory; }
const CheckpointInfo &Checkpoint::info() const { return impl_->info; }
const ExecutorCounters &Checkpoint::counters() const { return impl_->counters; }
const ModelConfig &Checkpoint::model() const { return impl_->model; }
const std::string &Checkpoint::planName() const { return impl_->plan; }
const std::string &Checkpoint::sharding() const { return impl_->sharding; }
const std::string &Checkpoint::precision() const { return impl_->precision; }
int64_t Checkpoint::replicate() const { return impl_->replicate; }
int64_t Checkpoint::shard() const { return impl_->shard; }
std::string Checkpoint::optimizer() const { return impl_->optimizer; }

std::vector<CheckpointParam> Checkpoint::params() const {
  std::vector<CheckpointParam> out;
  for (const Unit &u : impl_->units)
    for (const Param &p : u.params)
      if (p.tiedTo.empty())
        out.push_back({p.name, p.shape});
  return out;
}

int64_t Checkpoint::bytes() const {
  int64_t total = impl_->metadataBytes;
  for (const auto &f : impl_->files)
    total += f.bytes;
  return total;
}

std::vector<CheckpointFile> Checkpoint::files() const {
  std::vector<CheckpointFile> out;
  for (const auto &f : impl_->files)
    out.push_back({f.rank, join(impl_->directory, f.file), f.bytes, f.crc});
  return out;
}

void Checkpoint::verify() const {
  for (const auto &f : impl_->files)
    impl_->verifyFile(f);
}

void Checkpoint::checkCompatible(const Schedule &schedule) const {
  const Impl &c = *impl_;
  const ModelConfig &a = c.model, &b = schedule.model;
  auto differ = [&](const std::string &what, const std::string &ours,
                    const std::string &theirs) {
    throw CheckpointError("checkpoint '" + c.directory +
                          "' is of another model: " + what + " is " + theirs +
                          " in the checkpoint but " + ours +
                          " in the schedule");
  };
  auto num = [](int64_t v) { return std::to_string(v); };
  if (a.family != b.family)
    differ("the family", b.family, a.family);
  if (a.vocab != b.vocab)
    differ("vocab", num(b.vocab), num(a.vocab));
  if (a.hidden != b.hidden)
    differ("hidden", num(b.hidden), num(a.hidden));
  if (a.intermediate != b.intermediate)
    differ("intermediate", num(b.intermediate), num(a.intermediate));
  if (a.layers != b.layers)
    differ("layers", num(b.layers), num(a.layers));
  if (a.heads != b.heads)
    differ("heads", num(b.heads), num(a.heads));
  if (a.kvHeads != b.kvHeads)
    differ("kv_heads", num(b.kvHeads), num(a.kvHeads));
  if (a.tieEmbeddings != b.tieEmbeddings)
    differ("tie_embeddings", b.tieEmbeddings ? "true" : "false",
           a.tieEmbeddings ? "true" : "false");
  if (c.units.size() != schedule.units.size())
    differ("the number of units", num(schedule.units.size()),
           num(c.units.size()));
  for (size_t i = 0; i < c.units.size(); ++i) {
    const Unit &u = c.units[i], &v = schedule.units[i];
    std::string at = "unit " + num(static_cast<int64_t>(i));
    if (u.name != v.name)
      differ(at + "'s name", "'" + v.name + "'", "'" + u.name + "'");
    if (u.kind != v.kind)
      differ("unit '" + u.name + "''s kind", v.kind, u.kind);
    if (u.numel != v.numel)
      differ("unit '" + u.name + "''s size", num(v.numel), num(u.numel));
    if (u.params.size() != v.params.size())
      differ("unit '" + u.name + "''s parameter count", num(v.params.size()),
             num(u.params.size()));
    for (size_t k = 0; k < u.params.size(); ++k) {
      const Param &p = u.params[k], &q = v.params[k];
      if (p.name != q.name)
        differ("parameter " + num(static_cast<int64_t>(k)) + " of unit '" +
                   u.name + "'",
               "'" + q.name + "'", "'" + p.name + "'");
      if (p.shape != q.shape)
        differ("the shape of '" + p.name + "'", shapeString(q.shape),
               shapeString(p.shape));
      if (p.tiedTo != q.tiedTo)
        differ("the tie of '" + p.name + "'", "'" + q.tiedTo + "'",
               "'" + p.tiedTo + "'");
      if (p.tiedTo.empty() && p.offset != q.offset)
        differ("the offset of '" + p.name + "'", num(q.offset), num(p.offset));
    }
  }
  std::set<BufferRole> needed;
  for (const Buffer &buf : schedule.buffers)
    if (isSavedBuffer(buf) && buf.role != BufferRole::Param &&
        buf.role != BufferRole::Master)
      needed.insert(buf.role);
  for (BufferRole role : needed)
    if (!c.hasRole(role))
      throw CheckpointError("checkpoint '" + c.directory + "' has no " +
                            toString(role) + " state, which the schedule's " +
                            schedule.train.optimizer.kind +
                            " optimizer needs (the checkpoint was saved with " +
                            c.optimizer + ")");
  if (!c.hasRole(BufferRole::Param) && !c.hasRole(BufferRole::Master))
    throw CheckpointError("checkpoint '" + c.directory + "' holds no weights");
}

//===----------------------------------------------------------------------===//
// Restore
//===----------------------------------------------------------------------===//

void Checkpoint::restore(const Schedule &schedule, Executor &executor,
                         Comm &comm) const {
  Impl &c = *impl_;
  checkCompatible(schedule);
  executor.clearState();
  std::map<std::string, const Group *> groups;
  for (const Group &g : schedule.groups)
    groups[g.name] = &g;
  std::map<std::string, int64_t> unitNumel;
  for (const Unit &u : schedule.units)
    unitNumel[u.name] = u.numel;
  const bool hasMaster = c.hasRole(BufferRole::Master),
             hasParam = c.hasRole(BufferRole::Param);

  for (size_t id = 0; id < schedule.buffers.size(); ++id) {
    const Buffer &b = schedule.buffers[id];
    if (!isSavedBuffer(b))
      continue;
    auto g = groups.find(b.group);
    if (g == groups.end())
      throw CheckpointError("buffer '" + b.name + "' belongs to group '" +
                            b.group + "', which the schedule does not have");
    const Group &group = *g->second;
    int64_t begin = 0, length = group.paddedNumel;
    if (b.sharded) {
      begin = comm.groupRank(GroupAxis::Shard) * group.shardNumel;
      length = group.shardNumel;
    }
    if (b.numel != length || begin + length > group.paddedNumel)
      throw CheckpointError("buffer '" + b.name + "' has " +
                            std::to_string(b.numel) +
                            " elements, but its part of group '" + group.name +
                            "' has " + std::to_string(length));
    // Which saved role fills it: full-precision weights from the master,
    // low-precision params from params of the same dtype (their exact
    // values), else from the master (rounded once, never twice).
    BufferRole source = b.role;
    if (b.role == BufferRole::Master ||
        (b.role == BufferRole::Param && b.type == ElementType::F32))
      source = hasMaster ? BufferRole::Master : BufferRole::Param;
    else if (b.role == BufferRole::Param)
      source =
          (hasParam && c.allOfType(BufferRole::Param, b.type)) || !hasMaster
              ? BufferRole::Param
              : BufferRole::Master;
    at::Tensor target = executor.buffer(static_cast<int64_t>(id));
    at::Tensor staging = at::empty({length}, scalarTypeOf(b.type));
    staging.zero_();
    // The group's flat vector: its units in order, then zero padding.
    int64_t unitStart = 0;
    for (const std::string &unit : group.units) {
      auto n = unitNumel.find(unit);
      if (n == unitNumel.end())
        throw CheckpointError("group '" + group.name + "' names unit '" + unit +
                              "', which the schedule does not have");
      int64_t from = std::max(begin, unitStart);
      int64_t to = std::min(begin + length, unitStart + n->second);
      if (from < to)
        c.readUnit(unit, source, from - unitStart,
                   staging.narrow(0, from - begin, to - from));
      unitStart += n->second;
    }
    target.copy_(staging);
  }

  ExecutorCounters counters = c.counters;
  // A schedule without a loss scale ignores the saved one; one with a loss
  // scale restored from a checkpoint without keeps its initial scale.
  ExecutorCounters fresh = executor.counters();
  if (!fresh.lossScale)
    counters.lossScale.reset();
  else if (!counters.lossScale)
    counters.lossScale = fresh.lossScale;
  executor.setCounters(counters);

  if (comm.world() == c.replicate * c.shard) {
    const SafeTensorsFile &mine = c.file(comm.rank());
    auto it = mine.metadata().find(kRngKey);
    if (it != mine.metadata().end()) {
      auto bytes = fromHex(it->second);
      if (!bytes)
        throw CheckpointError("checkpoint shard '" + mine.path() +
                              "': its RNG state is not hex");
      at::Tensor state = at::empty({static_cast<int64_t>(bytes->size())},
                                   at::TensorOptions().dtype(at::kByte));
      std::memcpy(state.data_ptr(), bytes->data(), bytes->size());
      at::Generator gen = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(gen.mutex());
      try {
        gen.set_state(state);
      } catch (const std::exception &) {
        throw CheckpointError("checkpoint shard '" + mine.path() +
                              "': its RNG state does not fit this build's "
                              "CPU generator");
      }
    }
  }
}

std::vector<std::pair<std::string, at::Tensor>> Checkpoint::weights() const {
  Impl &c = *impl_;
  BufferRole role =
      c.hasRole(BufferRole::Master) ? BufferRole::Master : BufferRole::Param;
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const Unit &u : c.units) {
    bool stored = false;
    for (const Param &p : u.params)
      stored |= p.tiedTo.empty();
    if (!stored)
      continue;
    at::Tensor flat = at::empty({u.numel}, at::kFloat);
    c.readUnit(u.name, role, 0, flat);
    for (const Param &p : u.params) {
      if (!p.tiedTo.empty())
        continue;
      int64_t numel = 1;
      for (int64_t d : p.shape)
        numel *= d;
      out.push_back(
          {p.name, flat.narrow(0, p.offset, numel).reshape(p.shape).clone()});
    }
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Export
//===----------------------------------------------------------------------===//

namespace {

const char *torchDtypeName(at::ScalarType dtype) {
  switch (dtype) {
  case at::kFloat:
    return "float32";
  case at::kBFloat16:
    return "bfloat16";
  case at::kHalf:
    return "float16";
  default:
    return nullptr;
  }
}

json huggingFaceConfig(const ModelConfig &m, const char *dtype) {
  json j;
  if (m.family == "llama") {
    j["architectures"] = {"LlamaForCausalLM"};
    j["model_type"] = "llama";
    j["hidden_size"] = m.hidden;
    j["intermediate_size"] = m.intermediate;
    j["num_hidden_layers"] = m.layers;
    j["num_attention_heads"] = m.heads;
    j["num_key_value_heads"] = m.kvHeads;
    j["vocab_size"] = m.vocab;
    j["max_position_embeddings"] = m.maxSeqLen;
    j["rms_norm_eps"] = m.normEps;
    j["rope_theta"] = m.ropeTheta;
    if (m.ropeScaling)
      j["rope_scaling"] = {{"rope_type", "llama3"},
                           {"factor", m.ropeScaling->factor},
                           {"low_freq_factor", m.ropeScaling->lowFreqFactor},
                           {"high_freq_factor", m.ropeScaling->highFreqFactor},
                           {"original_max_position_embeddings",
                            m.ropeScaling->originalMaxSeqLen}};
    else
      j["rope_scaling"] = nullptr;
    j["tie_word_embeddings"] = m.tieEmbeddings;
    j["hidden_act"] = "silu";
    j["attention_bias"] = false;
    j["mlp_bias"] = false;
    j["torch_dtype"] = dtype;
    return j;
  }
  j["architectures"] = {"GPT2LMHeadModel"};
  j["model_type"] = "gpt2";
  j["n_embd"] = m.hidden;
  j["n_layer"] = m.layers;
  j["n_head"] = m.heads;
  j["n_positions"] = m.maxSeqLen;
  j["n_ctx"] = m.maxSeqLen;
  j["vocab_size"] = m.vocab;
  j["layer_norm_epsilon"] = m.normEps;
  j["n_inner"] =
      m.intermediate == 4 * m.hidden ? json(nullptr) : json(m.intermediate);
  j["activation_function"] = "gelu_new";
  j["tie_word_embeddings"] = true;
  j["torch_dtype"] = dtype;
  return j;
}

} // namespace

void exportHuggingFace(const Checkpoint &checkpoint, const std::string &outDir,
                       at::ScalarType dtype) {
  const ModelConfig &m = checkpoint.model();
  if (m.family != "llama" && m.family != "gpt2")
    throw CheckpointError("checkpoint '" + checkpoint.directory() +
                          "': export supports the llama and gpt2 families, "
                          "not '" +
                          m.family + "'");
  if (m.family == "gpt2" && !m.tieEmbeddings)
    throw CheckpointError("checkpoint '" + checkpoint.directory() +
                          "': GPT2LMHeadModel ties lm_head to wte, but this "
                          "gpt2 model does not");
  const char *dtypeName = torchDtypeName(dtype);
  if (!dtypeName)
    throw CheckpointError(std::string("cannot export in dtype ") +
                          c10::toString(dtype) +
                          " (float32, bfloat16 and float16 are supported)");
  auto weights = checkpoint.weights();
  for (auto &entry : weights)
    entry.second = entry.second.to(dtype).contiguous();
  makeDirectories(outDir);
  const std::string model = join(outDir, "model.safetensors");
  try {
    writeSafeTensors(model + ".tmp", weights, {{"format", "pt"}});
  } catch (const WeightsError &e) {
    throw CheckpointError(e.what());
  }
  syncPath(model + ".tmp", false);
  renamePath(model + ".tmp", model);
  writeFileAtomic(join(outDir, "config.json"),
                  huggingFaceConfig(m, dtypeName).dump(2) + "\n");
}

} // namespace plan::rt
