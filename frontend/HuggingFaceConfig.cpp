//===- HuggingFaceConfig.cpp - A model from an HF config.json -------------===//
//
// Each key is read the way transformers' config class reads it (a key left
// out, or null, takes the class's default: runtime/support/
// HuggingFaceDefaults.h) and lands in the ModelSpec field the plan key of
// the same meaning fills. Options that change the math away from what the
// runtime computes are errors at their key; options that only change how
// transformers computes the same function (`pretraining_tp`, attention
// implementations, dtypes) are not read.
//
//===----------------------------------------------------------------------===//

#include "frontend/HuggingFaceConfig.h"

#include "frontend/ConfigDocument.h"
#include "runtime/support/HuggingFaceDefaults.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"

#include <cmath>

using namespace plan;
using llvm::formatv;
using llvm::SMLoc;
using llvm::StringRef;

std::string plan::huggingFaceConfigPath(StringRef path, StringRef baseDir) {
  llvm::SmallString<256> full;
  if (llvm::sys::path::is_absolute(path) || baseDir.empty())
    full = path;
  else
    llvm::sys::path::append(full, baseDir, path);
  if (llvm::sys::fs::is_directory(full))
    llvm::sys::path::append(full, "config.json");
  return std::string(full);
}

namespace {

/// Reads keys of one config.json into a HuggingFaceModel.
class ModelReader {
public:
  ModelReader(const ConfigNode &config, DiagEmitter &diag,
              HuggingFaceModel &model)
      : config(config), diag(diag), model(model) {}

  /// The value of `key`, or null when config.json leaves it out or writes
  /// null (HF then takes the default).
  const ConfigNode *given(StringRef key) const {
    const ConfigNode *value = config.find(key);
    return value && !value->isNull() ? value : nullptr;
  }

  /// Where `key` is written, or the top of the file for a default.
  llvm::SMLoc locOf(StringRef key) const {
    const ConfigNode *value = given(key);
    return value ? value->loc : config.loc;
  }

  /// Reads integer `key` into `field` (the default when left out) and
  /// records where `planKey` comes from.
  void integer(StringRef key, int64_t &field, int64_t fallback,
               StringRef planKey) {
    field = fallback;
    if (const ConfigNode *value = given(key)) {
      if (std::optional<int64_t> read = readConfigInteger(*value, key, diag))
        field = *read;
      model.keyLocs[planKey] = value->loc;
    }
  }
  void real(StringRef key, double &field, double fallback, StringRef planKey) {
    field = fallback;
    if (const ConfigNode *value = given(key)) {
      if (std::optional<double> read = readConfigNumber(*value, key, diag))
        field = *read;
      model.keyLocs[planKey] = value->loc;
    }
  }
  bool flag(StringRef key, bool fallback) {
    if (const ConfigNode *value = given(key))
      return readConfigBool(*value, key, diag).value_or(fallback);
    return fallback;
  }
  std::string text(StringRef key, StringRef fallback) {
    if (const ConfigNode *value = given(key))
      return readConfigString(*value, key, diag).value_or(fallback.str());
    return fallback.str();
  }

  /// A string option the runtime implements one value of.
  void expectText(StringRef key, StringRef fallback, StringRef expected,
                  StringRef what) {
    std::string value = text(key, fallback);
    if (value != expected)
      diag.error(locOf(key),
                 formatv("'{0}' is \"{1}\", but the runtime computes {2} "
                         "(\"{3}\") only",
                         key, value, what, expected));
  }
  /// A boolean option the runtime implements one value of.
  void expectFlag(StringRef key, bool fallback, bool expected, StringRef what) {
    if (flag(key, fallback) != expected)
      diag.error(locOf(key), formatv("'{0}' is {1}: {2}", key,
                                     expected ? "false" : "true", what));
  }

  bool readLlama(bool mistral);
  bool readGPT2();
  bool readBert(llvm::ArrayRef<std::string> architectures);

private:
  const ConfigNode &config;
  DiagEmitter &diag;
  HuggingFaceModel &model;
};

bool ModelReader::readLlama(bool mistral) {
  ModelSpec &m = model.spec;
  m.family = ModelFamily::Llama;
  using L = hf::LlamaDefaults;
  using M = hf::MistralDefaults;
  integer("vocab_size", m.vocab, mistral ? M::vocabSize : L::vocabSize,
          "model.vocab");
  integer("hidden_size", m.hidden, mistral ? M::hiddenSize : L::hiddenSize,
          "model.hidden");
  integer("intermediate_size", m.intermediate,
          mistral ? M::intermediateSize : L::intermediateSize,
          "model.intermediate");
  integer("num_hidden_layers", m.layers,
          mistral ? M::numHiddenLayers : L::numHiddenLayers, "model.layers");
  integer("num_attention_heads", m.heads,
          mistral ? M::numAttentionHeads : L::numAttentionHeads, "model.heads");
  integer("num_key_value_heads", m.kvHeads,
          mistral ? M::numKeyValueHeads : m.heads, "model.kv_heads");
  integer("max_position_embeddings", m.maxSeqLen,
          mistral ? M::maxPositionEmbeddings : L::maxPositionEmbeddings,
          "model.max_seq_len");
  real("rms_norm_eps", m.normEps, L::rmsNormEps, "model.norm_eps");
  real("rope_theta", m.ropeTheta, L::ropeTheta, "model.rope_theta");
  m.tieEmbeddings = flag("tie_word_embeddings", L::tieWordEmbeddings);
  if (const ConfigNode *tie = given("tie_word_embeddings"))
    model.keyLocs["model.tie_embeddings"] = tie->loc;

  expectText("hidden_act", L::hiddenAct, L::hiddenAct,
             "Llama's SiLU-gated MLP");
  expectFlag("attention_bias", false, false,
             "the runtime's Llama attention has no biases");
  expectFlag("mlp_bias", false, false, "the runtime's Llama MLP has no biases");
  if (const ConfigNode *headDim = given("head_dim")) {
    std::optional<int64_t> dim = readConfigInteger(*headDim, "head_dim", diag);
    if (dim && m.heads > 0 && *dim != m.hidden / m.heads)
      diag.error(headDim->loc,
                 formatv("'head_dim' is {0}, but the runtime's heads are "
                         "hidden_size / num_attention_heads = {1} wide",
                         *dim, m.hidden / m.heads));
  }

  if (const ConfigNode *scaling = given("rope_scaling")) {
    if (!scaling->isMap()) {
      diag.error(scaling->loc, "'rope_scaling' expects a map or null, got " +
                                   scaling->describe());
      return false;
    }
    const ConfigNode *type = scaling->find("rope_type");
    if (!type)
      type = scaling->find("type");
    std::string kind =
        type ? readConfigString(*type, "rope_type", diag).value_or("") : "";
    if (kind != "llama3") {
      diag.error(type ? type->loc : scaling->loc,
                 formatv("rope scaling '{0}' is not implemented: the runtime "
                         "computes Llama 3's (\"rope_type\": \"llama3\") or "
                         "none",
                         kind));
      return false;
    }
    RopeScaling rope;
    auto read = [&](StringRef key, double &field) {
      if (const ConfigNode *value = scaling->find(key))
        if (std::optional<double> v = readConfigNumber(*value, key, diag))
          field = *v;
    };
    read("factor", rope.factor);
    read("low_freq_factor", rope.lowFreqFactor);
    read("high_freq_factor", rope.highFreqFactor);
    if (const ConfigNode *value =
            scaling->find("original_max_position_embeddings"))
      if (std::optional<int64_t> v = readConfigInteger(
              *value, "original_max_position_embeddings", diag))
        rope.originalMaxSeqLen = *v;
    m.ropeScaling = rope;
    model.keyLocs["model.rope_scaling"] = scaling->loc;
  }

  if (mistral) {
    // MistralConfig's default window is 4096; `"sliding_window": null`
    // turns it off (Mistral-7B-v0.2 onwards).
    int64_t window = M::slidingWindow;
    const ConfigNode *value = config.find("sliding_window");
    if (value && value->isNull())
      window = 0;
    else if (value)
      window =
          readConfigInteger(*value, "sliding_window", diag).value_or(window);
    if (window > 0 && window < m.maxSeqLen) {
      diag.warning(value ? value->loc : config.loc,
                   formatv("sliding-window attention is not implemented; up "
                           "to the window of {0} tokens it is ordinary causal "
                           "attention, so the model's max_seq_len is {0} "
                           "rather than max_position_embeddings = {1}",
                           window, m.maxSeqLen));
      m.maxSeqLen = window;
      if (value)
        model.keyLocs["model.max_seq_len"] = value->loc;
    }
  }
  return true;
}

bool ModelReader::readGPT2() {
  ModelSpec &m = model.spec;
  m.family = ModelFamily::GPT2;
  using G = hf::GPT2Defaults;
  integer("vocab_size", m.vocab, G::vocabSize, "model.vocab");
  integer("n_embd", m.hidden, G::nEmbd, "model.hidden");
  integer("n_layer", m.layers, G::nLayer, "model.layers");
  integer("n_head", m.heads, G::nHead, "model.heads");
  m.kvHeads = m.heads;
  integer("n_positions", m.maxSeqLen, G::nPositions, "model.max_seq_len");
  real("layer_norm_epsilon", m.normEps, G::layerNormEpsilon, "model.norm_eps");
  // n_inner: null is 4 x n_embd (applyDerivedDefaults, as for a preset).
  integer("n_inner", m.intermediate, 4 * m.hidden, "model.intermediate");
  m.tieEmbeddings = true;
  expectText("activation_function", G::activationFunction,
             G::activationFunction, "GPT-2's tanh-approximated GELU");
  expectFlag("tie_word_embeddings", true, true,
             "the runtime's GPT-2 head is tied to wte, as GPT2LMHeadModel's");
  expectFlag("scale_attn_weights", true, true,
             "the runtime scales attention scores by 1/sqrt(head_dim)");
  expectFlag("scale_attn_by_inverse_layer_idx", false, false,
             "the runtime does not scale attention by the layer index");
  return true;
}

bool ModelReader::readBert(llvm::ArrayRef<std::string> architectures) {
  ModelSpec &m = model.spec;
  m.family = ModelFamily::Bert;
  using B = hf::BertDefaults;
  integer("vocab_size", m.vocab, B::vocabSize, "model.vocab");
  integer("hidden_size", m.hidden, B::hiddenSize, "model.hidden");
  integer("intermediate_size", m.intermediate, B::intermediateSize,
          "model.intermediate");
  integer("num_hidden_layers", m.layers, B::numHiddenLayers, "model.layers");
  integer("num_attention_heads", m.heads, B::numAttentionHeads, "model.heads");
  m.kvHeads = m.heads;
  integer("max_position_embeddings", m.maxSeqLen, B::maxPositionEmbeddings,
          "model.max_seq_len");
  integer("type_vocab_size", m.typeVocab, B::typeVocabSize, "model.type_vocab");
  real("layer_norm_eps", m.normEps, B::layerNormEps, "model.norm_eps");
  m.tieEmbeddings = true;
  expectText("hidden_act", B::hiddenAct, B::hiddenAct, "BERT's erf GELU");
  expectText("position_embedding_type", B::positionEmbeddingType,
             B::positionEmbeddingType, "learned absolute positions");
  expectFlag("tie_word_embeddings", true, true,
             "the runtime's masked-LM decoder is tied to the word "
             "embeddings");
  expectFlag("is_decoder", false, false,
             "the runtime's BERT is a bidirectional encoder");
  if (const ConfigNode *pad = given("pad_token_id")) {
    std::optional<int64_t> id = readConfigInteger(*pad, "pad_token_id", diag);
    if (id && *id != B::padTokenId)
      diag.error(pad->loc,
                 formatv("'pad_token_id' is {0}: the runtime's BERT pads "
                         "with token {1}",
                         *id, B::padTokenId));
  }
  bool classifier = llvm::any_of(architectures, [](const std::string &a) {
    return StringRef(a).ends_with("ForSequenceClassification");
  });
  if (classifier) {
    m.bertHead = BertHead::SequenceClassification;
    model.keyLocs["model.head"] = config.find("architectures")->loc;
    // transformers saves the labels as id2label; num_labels is derived.
    m.numLabels = B::numLabels;
    if (const ConfigNode *labels = given("id2label")) {
      if (!labels->isMap()) {
        diag.error(labels->loc, "'id2label' expects a map of label ids to "
                                "names ({\"0\": \"NEGATIVE\", ...}), got " +
                                    labels->describe());
        return false;
      }
      m.numLabels = static_cast<int64_t>(labels->members.size());
      model.keyLocs["model.num_labels"] = labels->loc;
    } else if (const ConfigNode *count = given("num_labels")) {
      integer("num_labels", m.numLabels, B::numLabels, "model.num_labels");
      (void)count;
    }
  }
  return true;
}

} // namespace

std::optional<HuggingFaceModel>
plan::readHuggingFaceModel(llvm::SourceMgr &sourceMgr, DiagEmitter &diag,
                           StringRef path, SMLoc at) {
  HuggingFaceModel model;
  model.path = huggingFaceConfigPath(pathBesidePlan(sourceMgr, at, path), "");

  size_t errorsBefore = diag.numErrors();
  std::optional<ConfigNode> config = readNamedDocument(
      sourceMgr, diag, model.path, ConfigFormat::Json, at, "hf()");
  if (!config)
    return std::nullopt;

  // transformers writes a list of class names; anything else would pass
  // the head checks below unread, so it is an error at the key.
  std::vector<std::string> architectures;
  if (const ConfigNode *list = config->find("architectures");
      list && !list->isNull()) {
    if (list->kind != ConfigNode::Kind::Sequence) {
      diag.error(list->loc, "'architectures' expects a list of class names "
                            "(\"LlamaForCausalLM\"), got " +
                                list->describe());
      return std::nullopt;
    }
    for (const ConfigNode &name : list->elements)
      if (std::optional<std::string> text =
              readConfigString(name, "architectures", diag))
        architectures.push_back(*text);
    if (diag.numErrors() != errorsBefore)
      return std::nullopt;
  }
  std::string named =
      architectures.empty() ? "" : " (" + architectures.front() + ")";

  const ConfigNode *typeNode = config->find("model_type");
  if (!typeNode) {
    diag.error(config->loc,
               "'" + model.path +
                   "' has no 'model_type': it is not a transformers model "
                   "config");
    return std::nullopt;
  }
  std::optional<std::string> type =
      readConfigString(*typeNode, "model_type", diag);
  if (!type)
    return std::nullopt;

  ModelReader reader(*config, diag, model);
  // Heads the runtime computes, per family: a config for another head of a
  // family (LlamaForSequenceClassification, ...) is not the same model.
  auto checkHead = [&](llvm::ArrayRef<StringRef> supported) {
    for (const std::string &architecture : architectures)
      if (!llvm::is_contained(supported, architecture)) {
        diag.error(config->find("architectures")->loc,
                   formatv("architecture '{0}' is not implemented; for "
                           "model_type \"{1}\" the runtime computes {2}",
                           architecture, *type, llvm::join(supported, ", ")));
        return false;
      }
    return true;
  };
  if (*type == "llama" || *type == "mistral") {
    bool mistral = *type == "mistral";
    if (!checkHead({mistral ? "MistralForCausalLM" : "LlamaForCausalLM"}))
      return std::nullopt;
    reader.readLlama(mistral);
  } else if (*type == "gpt2") {
    if (!checkHead({"GPT2LMHeadModel", "GPT2Model"}))
      return std::nullopt;
    reader.readGPT2();
  } else if (*type == "bert") {
    if (!checkHead({"BertForMaskedLM", "BertForPreTraining", "BertModel",
                    "BertForSequenceClassification"}))
      return std::nullopt;
    reader.readBert(architectures);
  } else {
    diag.error(typeNode->loc,
               formatv("model_type \"{0}\"{1} is not a family the runtime "
                       "computes; hf() reads Llama (\"llama\", and "
                       "\"mistral\" as a Llama), GPT-2 (\"gpt2\") and BERT "
                       "(\"bert\") configs",
                       *type, named));
    return std::nullopt;
  }
  if (diag.numErrors() != errorsBefore)
    return std::nullopt;
  return model;
}
