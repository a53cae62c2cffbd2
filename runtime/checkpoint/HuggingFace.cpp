//===- HuggingFace.cpp - A checkpoint as HuggingFace safetensors ----------===//
//
// docs/checkpoints.md ("Export"): the consolidated weights under their HF
// names in one model.safetensors, and the config.json HF's LlamaForCausalLM,
// GPT2LMHeadModel, BertForMaskedLM or BertForSequenceClassification loads
// them with.
//
//===----------------------------------------------------------------------===//

#include "CheckpointFormat.h"
#include "Model.h"

namespace plan::rt {

using checkpoint::checkpointFiles;
using support::Json;

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

/// config.json for `m`. The weights' dtype is `dtype`, the key transformers
/// writes since 4.56 (`torch_dtype` is deprecated there); older versions
/// keep it as an attribute and still load the weights, whose dtype the
/// safetensors header states.
Json huggingFaceConfig(const ModelConfig &m, const char *dtype) {
  Json j;
  if (m.family == ModelFamily::Llama) {
    j["architectures"] = Json::array({"LlamaForCausalLM"});
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
      j["rope_scaling"] =
          Json{{"rope_type", "llama3"},
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
    j["dtype"] = dtype;
    return j;
  }
  if (m.family == ModelFamily::Bert) {
    bool classifier = m.bertHead == BertHead::SequenceClassification;
    j["architectures"] = Json::array(
        {classifier ? "BertForSequenceClassification" : "BertForMaskedLM"});
    j["model_type"] = "bert";
    j["hidden_size"] = m.hidden;
    j["intermediate_size"] = m.intermediate;
    j["num_hidden_layers"] = m.layers;
    j["num_attention_heads"] = m.heads;
    j["vocab_size"] = m.vocab;
    j["max_position_embeddings"] = m.maxSeqLen;
    j["type_vocab_size"] = m.typeVocab;
    j["layer_norm_eps"] = m.normEps;
    j["hidden_act"] = "gelu";
    j["position_embedding_type"] = "absolute";
    j["pad_token_id"] = kBertPadToken;
    j["tie_word_embeddings"] = true;
    if (classifier) {
      // num_labels is what id2label holds; one label is a regression.
      Json labels = Json::object();
      for (int64_t i = 0; i < m.numLabels; ++i)
        labels[std::to_string(i)] = "LABEL_" + std::to_string(i);
      j["id2label"] = labels;
      if (m.numLabels == 1)
        j["problem_type"] = "regression";
    }
    j["dtype"] = dtype;
    return j;
  }
  j["architectures"] = Json::array({"GPT2LMHeadModel"});
  j["model_type"] = "gpt2";
  j["n_embd"] = m.hidden;
  j["n_layer"] = m.layers;
  j["n_head"] = m.heads;
  j["n_positions"] = m.maxSeqLen;
  j["n_ctx"] = m.maxSeqLen;
  j["vocab_size"] = m.vocab;
  j["layer_norm_epsilon"] = m.normEps;
  j["n_inner"] =
      m.intermediate == 4 * m.hidden ? Json(nullptr) : Json(m.intermediate);
  j["activation_function"] = "gelu_new";
  j["tie_word_embeddings"] = true;
  j["dtype"] = dtype;
  return j;
}

} // namespace

void exportHuggingFace(const Checkpoint &checkpoint, const std::string &outDir,
                       at::ScalarType dtype) {
  const ModelConfig &m = checkpoint.model();
  if (m.family == ModelFamily::GPT2 && !m.tieEmbeddings)
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
  const std::string model = support::joinPath(outDir, "model.safetensors");
  checkpointFiles([&] { support::makeDirectories(outDir); });
  try {
    writeSafeTensors(model + ".tmp", weights, {{"format", "pt"}});
  } catch (const WeightsError &e) {
    throw CheckpointError(e.what());
  }
  checkpointFiles([&] {
    support::syncPath(model + ".tmp", false);
    support::renamePath(model + ".tmp", model);
    support::writeFileAtomic(support::joinPath(outDir, "config.json"),
                             huggingFaceConfig(m, dtypeName).dump(2) + "\n");
  });
}

} // namespace plan::rt
