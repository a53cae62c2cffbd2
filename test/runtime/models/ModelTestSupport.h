//===- ModelTestSupport.h - Tiny schedules for the model tests ----*- C++
//-*-===//
//
// Builds the model part of a Schedule (units, HF-named parameters, offsets)
// as the compiler emits it, without the compiler.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_TEST_RUNTIME_MODELS_MODELTESTSUPPORT_H
#define PLAN_TEST_RUNTIME_MODELS_MODELTESTSUPPORT_H

#include "Schedule.h"

#include <string>
#include <utility>
#include <vector>

namespace plan::rt::test {

using ParamList = std::vector<std::pair<std::string, std::vector<int64_t>>>;

inline Unit
makeUnit(std::string name, UnitKind kind, const ParamList &params,
         const std::vector<std::pair<std::string, std::string>> &tied = {}) {
  Unit u;
  u.name = std::move(name);
  u.kind = kind;
  for (const auto &[pname, shape] : params) {
    Param p;
    p.name = pname;
    p.shape = shape;
    for (const auto &[from, to] : tied)
      if (from == pname)
        p.tiedTo = to;
    if (p.tiedTo.empty()) {
      p.offset = u.numel;
      int64_t n = 1;
      for (int64_t d : shape)
        n *= d;
      u.numel += n;
    }
    u.params.push_back(std::move(p));
  }
  return u;
}

inline ModelConfig tinyLlamaConfig() {
  ModelConfig m;
  m.family = ModelFamily::Llama;
  m.vocab = 64;
  m.hidden = 32;
  m.intermediate = 48;
  m.layers = 2;
  m.heads = 4;
  m.kvHeads = 2;
  m.maxSeqLen = 32;
  m.ropeTheta = 10000.0;
  m.normEps = 1e-5;
  return m;
}

inline ModelConfig tinyGpt2Config() {
  ModelConfig m;
  m.family = ModelFamily::GPT2;
  m.vocab = 64;
  m.hidden = 32;
  m.intermediate = 128;
  m.layers = 2;
  m.heads = 4;
  m.kvHeads = 4;
  m.maxSeqLen = 16;
  m.normEps = 1e-5;
  m.tieEmbeddings = true;
  return m;
}

inline Schedule llamaSchedule(const ModelConfig &m) {
  Schedule s;
  s.model = m;
  const int64_t h = m.hidden, kv = m.kvHeads * (m.hidden / m.heads);
  s.units.push_back(makeUnit("embed", UnitKind::Embedding,
                             {{"model.embed_tokens.weight", {m.vocab, h}}}));
  for (int64_t l = 0; l < m.layers; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    s.units.push_back(
        makeUnit("layers." + std::to_string(l), UnitKind::LlamaBlock,
                 {{p + "self_attn.q_proj.weight", {h, h}},
                  {p + "self_attn.k_proj.weight", {kv, h}},
                  {p + "self_attn.v_proj.weight", {kv, h}},
                  {p + "self_attn.o_proj.weight", {h, h}},
                  {p + "mlp.gate_proj.weight", {m.intermediate, h}},
                  {p + "mlp.up_proj.weight", {m.intermediate, h}},
                  {p + "mlp.down_proj.weight", {h, m.intermediate}},
                  {p + "input_layernorm.weight", {h}},
                  {p + "post_attention_layernorm.weight", {h}}}));
  }
  s.units.push_back(makeUnit(
      "head", UnitKind::LlamaHead,
      {{"model.norm.weight", {h}}, {"lm_head.weight", {m.vocab, h}}},
      m.tieEmbeddings
          ? std::vector<std::pair<std::string,
                                  std::string>>{{"lm_head.weight",
                                                 "model.embed_tokens.weight"}}
          : std::vector<std::pair<std::string, std::string>>{}));
  return s;
}

inline Schedule gpt2Schedule(const ModelConfig &m) {
  Schedule s;
  s.model = m;
  const int64_t h = m.hidden, i = m.intermediate;
  s.units.push_back(makeUnit("embed", UnitKind::Embedding,
                             {{"transformer.wte.weight", {m.vocab, h}},
                              {"transformer.wpe.weight", {m.maxSeqLen, h}}}));
  for (int64_t l = 0; l < m.layers; ++l) {
    std::string p = "transformer.h." + std::to_string(l) + ".";
    s.units.push_back(makeUnit("layers." + std::to_string(l),
                               UnitKind::GPT2Block,
                               {{p + "ln_1.weight", {h}},
                                {p + "ln_1.bias", {h}},
                                {p + "attn.c_attn.weight", {h, 3 * h}},
                                {p + "attn.c_attn.bias", {3 * h}},
                                {p + "attn.c_proj.weight", {h, h}},
                                {p + "attn.c_proj.bias", {h}},
                                {p + "ln_2.weight", {h}},
                                {p + "ln_2.bias", {h}},
                                {p + "mlp.c_fc.weight", {h, i}},
                                {p + "mlp.c_fc.bias", {i}},
                                {p + "mlp.c_proj.weight", {i, h}},
                                {p + "mlp.c_proj.bias", {h}}}));
  }
  s.units.push_back(makeUnit("head", UnitKind::GPT2Head,
                             {{"transformer.ln_f.weight", {h}},
                              {"transformer.ln_f.bias", {h}},
                              {"lm_head.weight", {m.vocab, h}}},
                             {{"lm_head.weight", "transformer.wte.weight"}}));
  return s;
}

/// The tiny GPT-2's shapes with BERT's own keys.
inline ModelConfig tinyBertConfig(BertHead head, int64_t numLabels = 3) {
  ModelConfig m = tinyGpt2Config();
  m.family = ModelFamily::Bert;
  m.normEps = 1e-12;
  m.typeVocab = 2;
  m.bertHead = head;
  m.numLabels = numLabels;
  return m;
}

/// BertForMaskedLM or BertForSequenceClassification, as
/// frontend/Models.cpp lists them.
inline Schedule bertSchedule(const ModelConfig &m) {
  Schedule s;
  s.model = m;
  const int64_t h = m.hidden, i = m.intermediate;
  s.units.push_back(makeUnit(
      "embed", UnitKind::Embedding,
      {{"bert.embeddings.word_embeddings.weight", {m.vocab, h}},
       {"bert.embeddings.position_embeddings.weight", {m.maxSeqLen, h}},
       {"bert.embeddings.token_type_embeddings.weight", {m.typeVocab, h}},
       {"bert.embeddings.LayerNorm.weight", {h}},
       {"bert.embeddings.LayerNorm.bias", {h}}}));
  for (int64_t l = 0; l < m.layers; ++l) {
    std::string p = "bert.encoder.layer." + std::to_string(l) + ".";
    ParamList params;
    auto linear = [&](const std::string &name, int64_t in, int64_t out) {
      params.push_back({p + name + ".weight", {out, in}});
      params.push_back({p + name + ".bias", {out}});
    };
    auto norm = [&](const std::string &name) {
      params.push_back({p + name + ".weight", {h}});
      params.push_back({p + name + ".bias", {h}});
    };
    linear("attention.self.query", h, h);
    linear("attention.self.key", h, h);
    linear("attention.self.value", h, h);
    linear("attention.output.dense", h, h);
    norm("attention.output.LayerNorm");
    linear("intermediate.dense", h, i);
    linear("output.dense", i, h);
    norm("output.LayerNorm");
    s.units.push_back(
        makeUnit("layers." + std::to_string(l), UnitKind::BertBlock, params));
  }
  if (m.bertHead == BertHead::MaskedLM)
    s.units.push_back(
        makeUnit("head", UnitKind::BertHead,
                 {{"cls.predictions.bias", {m.vocab}},
                  {"cls.predictions.transform.dense.weight", {h, h}},
                  {"cls.predictions.transform.dense.bias", {h}},
                  {"cls.predictions.transform.LayerNorm.weight", {h}},
                  {"cls.predictions.transform.LayerNorm.bias", {h}},
                  {"cls.predictions.decoder.weight", {m.vocab, h}}},
                 {{"cls.predictions.decoder.weight",
                   "bert.embeddings.word_embeddings.weight"}}));
  else
    s.units.push_back(makeUnit("head", UnitKind::BertHead,
                               {{"bert.pooler.dense.weight", {h, h}},
                                {"bert.pooler.dense.bias", {h}},
                                {"classifier.weight", {m.numLabels, h}},
                                {"classifier.bias", {m.numLabels}}}));
  return s;
}

} // namespace plan::rt::test

#endif // PLAN_TEST_RUNTIME_MODELS_MODELTESTSUPPORT_H
