//===- HuggingFace.cpp - A checkpoint as HuggingFace safetensors ----------===//
//
// docs/checkpoints.md ("Export"): the consolidated weights under their HF
// names in one model.safetensors, and the config.json HF's LlamaForCausalLM,
// GPT2LMHeadModel, BertForMaskedLM or BertForSequenceClassification loads
// them with.
//
//===----------------------------------------------------------------------===//

#include "CheckpointFormat.h"
#include "FrozenBase.h"
#include "LoraNames.h"
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

namespace {

/// Writes `weights` (in `dtype`) as `outDir`/`file` (atomically) and `json`
/// as `outDir`/`jsonFile`, creating `outDir`.
void writeExport(const std::string &outDir, const std::string &file,
                 std::vector<std::pair<std::string, at::Tensor>> weights,
                 at::ScalarType dtype, const std::string &jsonFile,
                 const Json &json) {
  for (auto &entry : weights)
    entry.second = entry.second.to(dtype).contiguous();
  const std::string path = support::joinPath(outDir, file);
  checkpointFiles([&] { support::makeDirectories(outDir); });
  try {
    writeSafeTensors(path + ".tmp", weights, {{"format", "pt"}});
  } catch (const WeightsError &e) {
    throw CheckpointError(e.what());
  }
  checkpointFiles([&] {
    support::syncPath(path + ".tmp", false);
    support::renamePath(path + ".tmp", path);
    support::writeFileAtomic(support::joinPath(outDir, jsonFile),
                             json.dump(2) + "\n");
  });
}

/// adapter_config.json as PEFT writes it for a LoraConfig. target_modules
/// lists every adapted module by its full name, so that PEFT puts adapters on
/// exactly those (a suffix such as BERT's "dense" would also match the
/// masked-LM head's).
Json peftConfig(const ModelConfig &m, const CheckpointInfo &info,
                const std::vector<std::string> &modules) {
  const LoraConfig &l = *m.lora;
  Json j;
  j["peft_type"] = "LORA";
  if (m.family == ModelFamily::Bert)
    j["task_type"] = m.bertHead == BertHead::SequenceClassification
                         ? Json("SEQ_CLS")
                         : Json(nullptr);
  else
    j["task_type"] = "CAUSAL_LM";
  j["base_model_name_or_path"] =
      info.base == "seed" ? Json(nullptr) : Json(info.base);
  j["r"] = l.rank;
  j["lora_alpha"] = l.alpha;
  j["lora_dropout"] = l.dropout;
  j["target_modules"] = modules;
  j["bias"] = "none";
  // GPT-2's Conv1D stores its weight [in, out].
  j["fan_in_fan_out"] = m.family == ModelFamily::GPT2;
  j["use_rslora"] = false;
  j["use_dora"] = false;
  j["init_lora_weights"] = true;
  j["inference_mode"] = true;
  j["modules_to_save"] = nullptr;
  j["revision"] = nullptr;
  return j;
}

/// A LoRA checkpoint's frozen base, as its checkpoint.json's `base` names
/// it (the runtime's initialisation from the seed, or the --init weights),
/// through its storage: the values the run computed with (an NF4 base
/// dequantized, a bf16 one rounded).
std::map<std::string, at::Tensor> baseWeights(const Checkpoint &c) {
  const CheckpointInfo &info = c.info();
  std::map<std::string, at::Tensor> out;
  if (info.base != "seed") {
    std::unique_ptr<TensorSource> source;
    try {
      source = openTensorSource(info.base, c.model());
    } catch (const std::exception &e) {
      throw CheckpointError("the base of checkpoint '" + c.directory() +
                            "' is " + info.base +
                            ", which cannot be read: " + e.what());
    }
    for (const Unit &u : c.units())
      for (const Param &p : u.params)
        if (p.frozen && p.tiedTo.empty())
          out[p.name] =
              throughStorage(p, source->get(p.name, p.shape).to(at::kFloat));
    return out;
  }
  Schedule schedule;
  schedule.model = c.model();
  schedule.units = c.units();
  std::unique_ptr<Model> model = Model::create(schedule, at::kCPU);
  for (size_t i = 0; i < schedule.units.size(); ++i) {
    const Unit &u = schedule.units[i];
    at::Tensor trained = at::empty({u.numel}, at::kFloat);
    at::Tensor frozen = at::empty({u.frozenNumel}, at::kFloat);
    model->initUnit(static_cast<int64_t>(i), info.seed, trained, frozen);
    for (const Param &p : u.params)
      if (p.frozen && p.tiedTo.empty())
        out[p.name] = throughStorage(
            p, frozen.narrow(0, p.offset, p.numel()).reshape(p.shape));
  }
  return out;
}

} // namespace

void exportHuggingFace(const Checkpoint &checkpoint, const std::string &outDir,
                       at::ScalarType dtype, ExportKind kind) {
  const ModelConfig &m = checkpoint.model();
  const std::string &dir = checkpoint.directory();
  if (kind == ExportKind::Model && m.lora)
    throw CheckpointError("checkpoint '" + dir +
                          "' is a LoRA run's: it holds the adapters, not a "
                          "model; export them with --adapter (PEFT), or "
                          "the model with them merged in with --merged");
  if (kind != ExportKind::Model && !m.lora)
    throw CheckpointError(
        std::string("checkpoint '") + dir +
        "' is a full fine-tune's, with no LoRA adapters: " +
        (kind == ExportKind::Adapter ? "--adapter" : "--merged") +
        " exports a LoRA run's; leave it out");
  if (m.family == ModelFamily::GPT2 && !m.tieEmbeddings)
    throw CheckpointError("checkpoint '" + dir +
                          "': GPT2LMHeadModel ties lm_head to wte, but this "
                          "gpt2 model does not");
  const char *dtypeName = torchDtypeName(dtype);
  if (!dtypeName)
    throw CheckpointError(std::string("cannot export in dtype ") +
                          c10::toString(dtype) +
                          " (float32, bfloat16 and float16 are supported)");
  std::vector<std::pair<std::string, at::Tensor>> weights =
      checkpoint.weights();
  if (kind == ExportKind::Model)
    return writeExport(outDir, "model.safetensors", std::move(weights), dtype,
                       "config.json", huggingFaceConfig(m, dtypeName));

  if (kind == ExportKind::Adapter) {
    // PEFT saves `base_model.model.<module>.lora_A.weight` (the adapter's
    // name, "default", left out).
    std::vector<std::string> modules;
    for (auto &[name, tensor] : weights) {
      if (isLoraA(name))
        modules.emplace_back(*loraAdapterModule(name));
      name = "base_model.model." + name;
    }
    return writeExport(outDir, "adapter_model.safetensors", std::move(weights),
                       dtype, "adapter_config.json",
                       peftConfig(m, checkpoint.info(), modules));
  }

  // Merged: every base weight, with W + B A alpha/rank for a target's.
  // The checkpoint's weights: each module's (lora_A, lora_B), and any
  // other trained parameter.
  std::map<std::string, std::pair<at::Tensor, at::Tensor>> adapters;
  std::map<std::string, at::Tensor> trained;
  for (auto &[name, tensor] : weights)
    if (std::optional<std::string_view> module = loraAdapterModule(name))
      (isLoraA(name) ? adapters[std::string(*module)].first
                     : adapters[std::string(*module)].second) = tensor;
    else
      trained[name] = tensor;
  std::map<std::string, at::Tensor> base = baseWeights(checkpoint);
  const double scale = m.lora->alpha / static_cast<double>(m.lora->rank);
  std::vector<std::pair<std::string, at::Tensor>> merged;
  for (const Unit &u : checkpoint.units())
    for (const Param &p : u.params) {
      if (!p.tiedTo.empty() || loraAdapterModule(p.name))
        continue;
      auto it = base.find(p.name);
      at::Tensor w = it != base.end() ? it->second : trained.at(p.name);
      auto ad = p.name.ends_with(".weight")
                    ? adapters.find(p.name.substr(0, p.name.size() - 7))
                    : adapters.end();
      if (ad != adapters.end()) {
        auto [a, b] = ad->second;
        at::Tensor delta = at::matmul(b, a) * scale; // [out, in]
        w = w + (m.family == ModelFamily::GPT2 ? delta.t() : delta);
      }
      merged.push_back({p.name, w});
    }
  writeExport(outDir, "model.safetensors", std::move(merged), dtype,
              "config.json", huggingFaceConfig(m, dtypeName));
}

} // namespace plan::rt
