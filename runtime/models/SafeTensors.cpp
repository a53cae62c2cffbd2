//===- SafeTensors.cpp - HF-named weights from .safetensors files ---------===//

#include "SafeTensors.h"

#include "Files.h"
#include "Format.h"
#include "HuggingFaceDefaults.h"
#include "Json.h"
#include "Model.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
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
  /// The files, as errors name them.
  std::string describe() const { return description_; }

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
    // BERT checkpoints converted from TensorFlow (bert-base-cased's among
    // them) name LayerNorm's weight and bias `gamma` and `beta`, which HF
    // renames on load.
    for (auto [modern, old] :
         {std::pair{".LayerNorm.weight", ".LayerNorm.gamma"},
          std::pair{".LayerNorm.bias", ".LayerNorm.beta"}})
      if (name.ends_with(modern)) {
        it = tensors_.find(name.substr(0, name.size() - std::strlen(modern)) +
                           old);
        if (it != tensors_.end())
          return &it->second;
      }
    return nullptr;
  }

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

/// A number as JSON writes it: the shortest text that reads back the same.
std::string formatNumber(double value) { return support::Json(value).dump(); }

/// Checks an HF config.json against the schedule's model: every key that
/// changes the model's math must agree, or the weights would train another
/// model than the plan's without a word. A key config.json leaves out has
/// the value HF's config class gives it (LlamaConfig, GPT2Config).
void checkConfig(const std::string &path, const ModelConfig &model) {
  using L = hf::LlamaDefaults;
  using G = hf::GPT2Defaults;
  using B = hf::BertDefaults;
  support::Json cfg = readJsonFile(path);
  if (!cfg.is_object())
    throw WeightsError("'" + path + "' is not a JSON object");
  auto mismatch = [&](const std::string &key, const std::string &theirs,
                      const std::string &ours) {
    throw WeightsError("'" + path + "': " + key + " is " + theirs +
                       " but the schedule's model has " + ours);
  };
  auto typeError = [&](const std::string &key, const char *type) {
    throw WeightsError("'" + path + "': " + key + " is not " + type);
  };
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
      mismatch(key, std::to_string(value),
               std::string(ours) + " = " + std::to_string(expected));
  };
  auto real = [&](const support::Json &json, const std::string &key,
                  double fallback) {
    if (!json.contains(key) || json[key].is_null())
      return fallback;
    if (!json[key].is_number())
      typeError(key, "a number");
    return json[key].get<double>();
  };
  auto checkReal = [&](const std::string &key, double value, double expected,
                       const char *ours) {
    // The plan's and HF's values are both decimal literals read into
    // doubles: equal unless they differ.
    if (std::fabs(value - expected) >
        1e-12 * std::max(std::fabs(value), std::fabs(expected)))
      mismatch(key, formatNumber(value),
               std::string(ours) + " = " + formatNumber(expected));
  };
  auto flag = [&](const char *key, bool fallback) {
    if (!cfg.contains(key) || cfg[key].is_null())
      return fallback;
    if (!cfg[key].is_boolean())
      typeError(key, "true or false");
    return cfg[key].get<bool>();
  };
  auto text = [&](const char *key, const char *fallback) {
    if (!cfg.contains(key) || cfg[key].is_null())
      return std::string(fallback);
    if (!cfg[key].is_string())
      typeError(key, "a string");
    return cfg[key].get<std::string>();
  };
  auto checkText = [&](const char *key, const char *fallback,
                       const char *expected, const char *what) {
    std::string value = text(key, fallback);
    if (value != expected)
      mismatch(key, "'" + value + "'",
               std::string(what) + " '" + expected + "'");
  };
  auto checkFlag = [&](const char *key, bool fallback, bool expected,
                       const char *ours) {
    bool value = flag(key, fallback);
    if (value != expected)
      mismatch(key, value ? "true" : "false",
               std::string(ours) + (expected ? " = true" : " = false"));
  };

  if (model.family == ModelFamily::GPT2) {
    checkText("model_type", "gpt2", "gpt2", "a");
    check("n_embd", model.hidden, "hidden");
    check("n_layer", model.layers, "layers");
    check("n_head", model.heads, "heads");
    check("vocab_size", model.vocab, "vocab");
    check("n_inner", model.intermediate, "intermediate", 4 * model.hidden);
    check("n_positions", model.maxSeqLen, "max_seq_len", G::nPositions);
    checkReal("layer_norm_epsilon",
              real(cfg, "layer_norm_epsilon", G::layerNormEpsilon),
              model.normEps, "norm_eps");
    checkText("activation_function", G::activationFunction,
              G::activationFunction, "GPT-2's activation");
    checkFlag("tie_word_embeddings", true, true,
              "tied embeddings (GPT-2's lm_head is wte)");
    return;
  }
  if (model.family == ModelFamily::Bert) {
    // BertConfig's defaults.
    checkText("model_type", "bert", "bert", "a");
    check("hidden_size", model.hidden, "hidden", B::hiddenSize);
    check("num_hidden_layers", model.layers, "layers", B::numHiddenLayers);
    check("num_attention_heads", model.heads, "heads", B::numAttentionHeads);
    check("intermediate_size", model.intermediate, "intermediate",
          B::intermediateSize);
    check("vocab_size", model.vocab, "vocab", B::vocabSize);
    check("max_position_embeddings", model.maxSeqLen, "max_seq_len",
          B::maxPositionEmbeddings);
    check("type_vocab_size", model.typeVocab, "type_vocab", B::typeVocabSize);
    checkReal("layer_norm_eps", real(cfg, "layer_norm_eps", B::layerNormEps),
              model.normEps, "norm_eps");
    checkText("hidden_act", B::hiddenAct, B::hiddenAct, "BERT's activation");
    checkText("position_embedding_type", B::positionEmbeddingType,
              B::positionEmbeddingType, "BERT's learned");
    check("pad_token_id", kBertPadToken, "padding row", B::padTokenId);
    checkFlag("tie_word_embeddings", true, true,
              "a masked-LM decoder tied to the word embeddings");
    // A pretrained encoder's config (BertForMaskedLM, BertForPreTraining)
    // has PretrainedConfig's default 2 labels and no classifier: a new head
    // of any size goes on it. Only a classifier's own count must agree.
    bool classifier = false;
    if (cfg.contains("architectures") && cfg["architectures"].is_array())
      for (const support::Json &a : cfg["architectures"])
        classifier |= a.is_string() && a.get<std::string>().ends_with(
                                           "ForSequenceClassification");
    if (model.bertHead == BertHead::SequenceClassification && classifier) {
      int64_t labels = B::numLabels;
      if (cfg.contains("id2label") && cfg["id2label"].is_object())
        labels = static_cast<int64_t>(cfg["id2label"].size());
      check("num_labels", model.numLabels, "num_labels", labels);
    }
    return;
  }
  // A Mistral is a Llama whose sliding window the schedule's max_seq_len
  // stays within (the compiler's hf() makes it so).
  bool mistral = text("model_type", "llama") == "mistral";
  if (!mistral)
    checkText("model_type", "llama", "llama", "a");
  check("hidden_size", model.hidden, "hidden");
  check("num_hidden_layers", model.layers, "layers");
  check("num_attention_heads", model.heads, "heads");
  int64_t heads = cfg.value("num_attention_heads", model.heads);
  check("num_key_value_heads", model.kvHeads, "kv_heads",
        mistral ? hf::MistralDefaults::numKeyValueHeads : heads);
  check("vocab_size", model.vocab, "vocab");
  check("intermediate_size", model.intermediate, "intermediate");
  checkReal("rope_theta", real(cfg, "rope_theta", L::ropeTheta),
            model.ropeTheta, "rope_theta");
  checkReal("rms_norm_eps", real(cfg, "rms_norm_eps", L::rmsNormEps),
            model.normEps, "norm_eps");
  checkFlag("tie_word_embeddings", L::tieWordEmbeddings, model.tieEmbeddings,
            "tie_embeddings");
  checkText("hidden_act", L::hiddenAct, L::hiddenAct, "Llama's activation");
  checkFlag("attention_bias", false, false, "no attention biases");
  checkFlag("mlp_bias", false, false, "no MLP biases");
  const support::Json none;
  const support::Json &scaling =
      cfg.contains("rope_scaling") ? cfg["rope_scaling"] : none;
  if (scaling.is_null() != !model.ropeScaling)
    mismatch("rope_scaling", scaling.is_null() ? "null" : scaling.dump(),
             model.ropeScaling ? "llama3 rope scaling" : "no rope scaling");
  if (scaling.is_null())
    return;
  if (!scaling.is_object())
    typeError("rope_scaling", "an object");
  std::string type = scaling.value("rope_type", scaling.value("type", ""));
  if (type != "llama3")
    mismatch("rope_scaling.rope_type", "'" + type + "'",
             "llama3 rope scaling (the only kind it implements)");
  const RopeScaling &ours = *model.ropeScaling;
  checkReal("rope_scaling.factor", real(scaling, "factor", 0), ours.factor,
            "rope_scaling.factor");
  checkReal("rope_scaling.low_freq_factor", real(scaling, "low_freq_factor", 0),
            ours.lowFreqFactor, "rope_scaling.low_freq_factor");
  checkReal("rope_scaling.high_freq_factor",
            real(scaling, "high_freq_factor", 0), ours.highFreqFactor,
            "rope_scaling.high_freq_factor");
  checkReal("rope_scaling.original_max_position_embeddings",
            real(scaling, "original_max_position_embeddings", 0),
            static_cast<double>(ours.originalMaxSeqLen),
            "rope_scaling.original_max_seq_len");
}

/// A plan that ties lm_head to the embeddings reads only the embeddings: a
/// checkpoint whose own lm_head.weight differs would train another model.
void checkTiedHead(const SafeTensorsSource &source, const ModelConfig &config) {
  if (config.family != ModelFamily::Llama || !config.tieEmbeddings ||
      !source.contains("lm_head.weight"))
    return;
  std::vector<int64_t> shape = {config.vocab, config.hidden};
  if (!at::equal(source.get("lm_head.weight", shape),
                 source.get("model.embed_tokens.weight", shape)))
    throw WeightsError(
        source.describe() +
        " has an lm_head.weight of its own, but the schedule's model ties it "
        "to model.embed_tokens.weight (tie_embeddings = true): the checkpoint "
        "is untied; set model.tie_embeddings = false");
}

std::unique_ptr<SafeTensorsSource> openFiles(const std::string &path,
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

} // namespace

std::unique_ptr<TensorSource> openTensorSource(const std::string &path,
                                               const ModelConfig &config) {
  std::unique_ptr<SafeTensorsSource> source = openFiles(path, config);
  checkTiedHead(*source, config);
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
