//===- SafeTensors.cpp - HF-named weights from .safetensors files ---------===//

#include "SafeTensors.h"

#include "Files.h"
#include "Format.h"
#include "Json.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace plan::rt {

TensorSource::~TensorSource() = default;

namespace {

using nlohmann::json;

using support::isDirectory;

// A header larger than this is not a real checkpoint's: refuse it before
// allocating (the format's reference implementation uses the same bound).
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

// The whole file mapped read-only; tensors are copied out of it on get(), so
// a checkpoint larger than memory streams through the page cache.
class MappedFile {
public:
  explicit MappedFile(const std::string &path) : path_(path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      throw WeightsError("cannot open weights file '" + path +
                         "': " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      throw WeightsError("weights file '" + path + "' is not a regular file");
    }
    size_ = static_cast<size_t>(st.st_size);
    if (size_ > 0) {
      void *base = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (base == MAP_FAILED) {
        ::close(fd);
        throw WeightsError("cannot map weights file '" + path +
                           "': " + std::strerror(errno));
      }
      base_ = static_cast<const uint8_t *>(base);
    }
    ::close(fd);
  }
  MappedFile(const MappedFile &) = delete;
  MappedFile &operator=(const MappedFile &) = delete;
  ~MappedFile() {
    if (base_)
      ::munmap(const_cast<uint8_t *>(base_), size_);
  }
  const uint8_t *data() const { return base_; }
  size_t size() const { return size_; }
  const std::string &path() const { return path_; }

private:
  std::string path_;
  const uint8_t *base_ = nullptr;
  size_t size_ = 0;
};

struct StoredTensor {
  std::shared_ptr<MappedFile> file;
  std::string dtype; // as written: "F32", "BF16", "I64", ...
  std::vector<int64_t> shape;
  size_t begin = 0, end = 0; // absolute byte offsets in the file
};

std::optional<at::ScalarType> scalarTypeOf(const std::string &dtype) {
  if (dtype == "F32")
    return at::kFloat;
  if (dtype == "BF16")
    return at::kBFloat16;
  if (dtype == "F16")
    return at::kHalf;
  return std::nullopt;
}

size_t dtypeBytes(const std::string &dtype) {
  static const std::map<std::string, size_t> bytes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
      {"U32", 4},  {"F32", 4}, {"I64", 8}, {"U64", 8},     {"F64", 8}};
  auto it = bytes.find(dtype);
  return it == bytes.end() ? 0 : it->second;
}

/// Maps `path` and reads its header: every tensor into `tensors` (replacing
/// an entry of the same name) and, when `metadata` is given, the string
/// entries of "__metadata__" into it.
void readFile(const std::string &path,
              std::map<std::string, StoredTensor> &tensors,
              std::map<std::string, std::string> *metadata) {
  auto file = std::make_shared<MappedFile>(path);
  auto fail = [&](const std::string &why) -> WeightsError {
    return WeightsError("weights file '" + path + "': " + why);
  };
  if (file->size() < 8)
    throw fail("too short for a safetensors header");
  uint64_t headerBytes = 0;
  for (int i = 7; i >= 0; --i)
    headerBytes = (headerBytes << 8) | file->data()[i];
  if (headerBytes > kMaxHeaderBytes || headerBytes > file->size() - 8)
    throw fail("header length " + std::to_string(headerBytes) +
               " exceeds the file size " + std::to_string(file->size()));
  json header;
  try {
    header = json::parse(file->data() + 8, file->data() + 8 + headerBytes);
  } catch (const json::exception &) {
    throw fail("the header is not valid JSON");
  }
  if (!header.is_object())
    throw fail("the header is not a JSON object");
  const size_t dataStart = 8 + headerBytes;
  const size_t dataBytes = file->size() - dataStart;
  for (auto &[name, info] : header.items()) {
    if (name == "__metadata__") {
      if (!metadata)
        continue;
      if (!info.is_object())
        throw fail("__metadata__ is not a JSON object");
      for (auto &[key, value] : info.items()) {
        if (!value.is_string())
          throw fail("__metadata__ entry '" + key + "' is not a string");
        (*metadata)[key] = value.get<std::string>();
      }
      continue;
    }
    auto bad = [&](const std::string &why) {
      return fail("tensor '" + name + "': " + why);
    };
    if (!info.is_object() || !info.contains("dtype") ||
        !info["dtype"].is_string() || !info.contains("shape") ||
        !info["shape"].is_array() || !info.contains("data_offsets") ||
        !info["data_offsets"].is_array() || info["data_offsets"].size() != 2)
      throw bad("needs dtype, shape and data_offsets [begin, end]");
    StoredTensor t;
    t.file = file;
    t.dtype = info["dtype"].get<std::string>();
    uint64_t numel = 1;
    for (const auto &d : info["shape"]) {
      if (!d.is_number_unsigned())
        throw bad("shape entries must be non-negative integers");
      t.shape.push_back(d.get<int64_t>());
      numel *= d.get<uint64_t>();
    }
    const auto &off = info["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      throw bad("data_offsets must be non-negative integers");
    uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    if (begin > end || end > dataBytes)
      throw bad("data_offsets [" + std::to_string(begin) + ", " +
                std::to_string(end) + "] lie outside the " +
                std::to_string(dataBytes) + " data bytes");
    size_t elem = dtypeBytes(t.dtype);
    if (elem == 0)
      throw bad("unknown dtype '" + t.dtype + "'");
    if (end - begin != numel * elem)
      throw bad("data_offsets span " + std::to_string(end - begin) +
                " bytes but shape " + support::shapeString(t.shape) + " of " +
                t.dtype + " needs " + std::to_string(numel * elem));
    t.begin = dataStart + begin;
    t.end = dataStart + end;
    tensors[name] = std::move(t);
  }
}

class SafeTensorsSource final : public TensorSource {
public:
  /// Adds every tensor of one file (a later file's tensor of the same name
  /// replaces an earlier one's).
  void addFile(const std::string &path) { readFile(path, tensors_, nullptr); }

  bool contains(const std::string &name) const override {
    return find(name) != nullptr;
  }

  at::Tensor get(const std::string &name,
                 at::IntArrayRef expectedShape) const override {
    const StoredTensor *t = find(name);
    if (!t)
      throw WeightsError("tensor '" + name + "' is not in " + describe());
    const std::string &file = t->file->path();
    if (at::IntArrayRef(t->shape) != expectedShape)
      throw WeightsError("tensor '" + name + "' in '" + file + "' has shape " +
                         support::shapeString(t->shape) + ", the model needs " +
                         support::shapeString(expectedShape));
    auto type = scalarTypeOf(t->dtype);
    if (!type)
      throw WeightsError("tensor '" + name + "' in '" + file + "' has dtype " +
                         t->dtype + " (F32, BF16 and F16 are supported)");
    // Copied rather than wrapped: data offsets need not be aligned for the
    // element type, and the result must outlive the mapping.
    at::Tensor stored = at::empty(t->shape, at::TensorOptions().dtype(*type));
    if (t->end > t->begin)
      std::memcpy(stored.data_ptr(), t->file->data() + t->begin,
                  t->end - t->begin);
    return stored.to(at::kFloat).contiguous();
  }

  void setDescription(std::string d) { description_ = std::move(d); }

private:
  const StoredTensor *find(const std::string &name) const {
    auto it = tensors_.find(name);
    if (it != tensors_.end())
      return &it->second;
    // The GPT-2 checkpoints on the Hub name GPT2Model's tensors ("h.0...",
    // "wte.weight"), not GPT2LMHeadModel's ("transformer.h.0...").
    static const std::string prefix = "transformer.";
    if (name.rfind(prefix, 0) == 0) {
      it = tensors_.find(name.substr(prefix.size()));
      if (it != tensors_.end())
        return &it->second;
    }
    return nullptr;
  }
  std::string describe() const { return description_; }

  std::map<std::string, StoredTensor> tensors_;
  std::string description_;
};

support::Json readJsonFile(const std::string &path) {
  try {
    return support::parseJson(support::readFile(path), path);
  } catch (const std::runtime_error &e) { // FileError, JsonError
    throw WeightsError(e.what());
  }
}

// config.json keys per family, HF's names; the first is the schedule's field.
void checkConfig(const std::string &path, const ModelConfig &model) {
  support::Json cfg = readJsonFile(path);
  if (!cfg.is_object())
    throw WeightsError("'" + path + "' is not a JSON object");
  auto check = [&](const char *key, int64_t expected, const char *ours,
                   std::optional<int64_t> fallback = std::nullopt) {
    int64_t value;
    if (cfg.contains(key) && cfg[key].is_number_integer())
      value = cfg[key].get<int64_t>();
    else if (fallback)
      value = *fallback;
    else
      return; // absent: nothing to compare
    if (value != expected)
      throw WeightsError("'" + path + "': " + key + " is " +
                         std::to_string(value) +
                         " but the schedule's model has " + ours + " = " +
                         std::to_string(expected));
  };
  if (model.family == ModelFamily::GPT2) {
    check("n_embd", model.hidden, "hidden");
    check("n_layer", model.layers, "layers");
    check("n_head", model.heads, "heads");
    check("vocab_size", model.vocab, "vocab");
    check("n_inner", model.intermediate, "intermediate", 4 * model.hidden);
  } else {
    check("hidden_size", model.hidden, "hidden");
    check("num_hidden_layers", model.layers, "layers");
    check("num_attention_heads", model.heads, "heads");
    int64_t heads = cfg.value("num_attention_heads", model.heads);
    check("num_key_value_heads", model.kvHeads, "kv_heads", heads);
    check("vocab_size", model.vocab, "vocab");
    check("intermediate_size", model.intermediate, "intermediate");
  }
}

} // namespace

std::unique_ptr<TensorSource> openTensorSource(const std::string &path,
                                               const ModelConfig &config) {
  auto source = std::make_unique<SafeTensorsSource>();
  if (!support::pathExists(path))
    throw WeightsError("weights path '" + path + "' does not exist");
  if (!isDirectory(path)) {
    source->addFile(path);
    source->setDescription("'" + path + "'");
    return source;
  }
  const std::string dir = path.back() == '/' ? path : path + "/";
  if (support::pathExists(dir + "config.json"))
    checkConfig(dir + "config.json", config);
  const std::string index = dir + "model.safetensors.index.json";
  if (support::pathExists(index)) {
    support::Json idx = readJsonFile(index);
    if (!idx.is_object() || !idx.contains("weight_map") ||
        !idx["weight_map"].is_object())
      throw WeightsError("'" + index + "' has no weight_map object");
    std::vector<std::string> shards;
    for (auto &[name, file] : idx["weight_map"].items()) {
      if (!file.is_string())
        throw WeightsError("'" + index + "': weight_map entry '" + name +
                           "' is not a file name");
      std::string f = file.get<std::string>();
      if (std::find(shards.begin(), shards.end(), f) == shards.end())
        shards.push_back(f);
    }
    for (const std::string &shard : shards)
      source->addFile(dir + shard);
    source->setDescription("the shards of '" + index + "'");
    return source;
  }
  const std::string single = dir + "model.safetensors";
  if (!support::pathExists(single))
    throw WeightsError("directory '" + path +
                       "' has neither model.safetensors nor "
                       "model.safetensors.index.json");
  source->addFile(single);
  source->setDescription("'" + single + "'");
  return source;
}

void writeSafeTensors(
    const std::string &path,
    const std::vector<std::pair<std::string, at::Tensor>> &tensors) {
  writeSafeTensors(path, tensors, {});
}

void writeSafeTensors(
    const std::string &path,
    const std::vector<std::pair<std::string, at::Tensor>> &tensors,
    const std::map<std::string, std::string> &metadata) {
  json header = json::object();
  header["__metadata__"] = {{"format", "pt"}};
  for (const auto &[key, value] : metadata)
    header["__metadata__"][key] = value;
  std::vector<at::Tensor> data;
  uint64_t offset = 0;
  for (const auto &[name, tensor] : tensors) {
    const char *dtype = nullptr;
    switch (tensor.scalar_type()) {
    case at::kFloat:
      dtype = "F32";
      break;
    case at::kBFloat16:
      dtype = "BF16";
      break;
    case at::kHalf:
      dtype = "F16";
      break;
    default:
      throw WeightsError("cannot write tensor '" + name + "' of dtype " +
                         std::string(c10::toString(tensor.scalar_type())) +
                         " (F32, BF16 and F16 are supported)");
    }
    if (header.contains(name))
      throw WeightsError("tensor '" + name + "' is written twice");
    at::Tensor cpu = tensor.detach().to(at::kCPU).contiguous();
    uint64_t bytes = cpu.numel() * cpu.element_size();
    header[name] = {{"dtype", dtype},
                    {"shape", cpu.sizes().vec()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    data.push_back(std::move(cpu));
  }
  std::string text = header.dump();
  // Pad with spaces so the data starts 8-byte aligned, as the reference
  // writer does: readers may then map tensors in place.
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out)
    throw WeightsError("cannot write weights file '" + path + "'");
  uint64_t n = text.size();
  char len[8];
  for (int i = 0; i < 8; ++i)
    len[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  out.write(len, 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const at::Tensor &t : data)
    out.write(static_cast<const char *>(t.data_ptr()),
              static_cast<std::streamsize>(t.numel() * t.element_size()));
  out.close();
  if (!out)
    throw WeightsError("writing weights file '" + path + "' failed");
}

struct SafeTensorsFile::Impl {
  std::string path;
  std::map<std::string, StoredTensor> tensors;
  std::map<std::string, std::string> metadata;

  const StoredTensor &find(const std::string &name) const {
    auto it = tensors.find(name);
    if (it == tensors.end())
      throw WeightsError("tensor '" + name + "' is not in '" + path + "'");
    return it->second;
  }
};

SafeTensorsFile::SafeTensorsFile(const std::string &path)
    : impl_(std::make_unique<Impl>()) {
  impl_->path = path;
  readFile(path, impl_->tensors, &impl_->metadata);
}

SafeTensorsFile::~SafeTensorsFile() = default;

const std::string &SafeTensorsFile::path() const { return impl_->path; }

const std::map<std::string, std::string> &SafeTensorsFile::metadata() const {
  return impl_->metadata;
}

std::vector<std::string> SafeTensorsFile::names() const {
  std::vector<std::string> names;
  for (const auto &entry : impl_->tensors)
    names.push_back(entry.first);
  return names;
}

bool SafeTensorsFile::contains(const std::string &name) const {
  return impl_->tensors.count(name) != 0;
}

std::vector<int64_t> SafeTensorsFile::shape(const std::string &name) const {
  return impl_->find(name).shape;
}

std::string SafeTensorsFile::dtype(const std::string &name) const {
  return impl_->find(name).dtype;
}

at::Tensor SafeTensorsFile::read(const std::string &name, int64_t offset,
                                 int64_t numel) const {
  const StoredTensor &t = impl_->find(name);
  auto type = scalarTypeOf(t.dtype);
  if (!type)
    throw WeightsError("tensor '" + name + "' in '" + impl_->path +
                       "' has dtype " + t.dtype +
                       " (F32, BF16 and F16 are supported)");
  const int64_t elem = static_cast<int64_t>(dtypeBytes(t.dtype));
  const int64_t total = static_cast<int64_t>(t.end - t.begin) / elem;
  if (numel < 0)
    numel = total - offset;
  if (offset < 0 || numel < 0 || offset + numel > total)
    throw WeightsError("tensor '" + name + "' in '" + impl_->path + "' has " +
                       std::to_string(total) + " elements; elements [" +
                       std::to_string(offset) + ", " +
                       std::to_string(offset + numel) + ") were asked for");
  at::Tensor out = at::empty({numel}, at::TensorOptions().dtype(*type));
  if (numel > 0)
    std::memcpy(out.data_ptr(), t.file->data() + t.begin + offset * elem,
                static_cast<size_t>(numel * elem));
  return out;
}

at::Tensor SafeTensorsFile::readFloat(const std::string &name) const {
  return read(name).to(at::kFloat).reshape(impl_->find(name).shape);
}

} // namespace plan::rt
