//===- HuggingFaceDefaults.h - What HF config classes default to -*- C++
//-*-===//
//
// The value transformers' config classes give a key that a config.json leaves
// out (transformers 4.57: LlamaConfig, MistralConfig, GPT2Config,
// BertConfig). The compiler reads a config.json into a model with them
// (`model = hf("...")`) and plan-run checks a weights directory's config.json
// against the schedule's model with them: one copy, plain C++.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_RUNTIME_SUPPORT_HUGGINGFACEDEFAULTS_H
#define PLAN_RUNTIME_SUPPORT_HUGGINGFACEDEFAULTS_H

#include <cstdint>

namespace plan::hf {

/// LlamaConfig's defaults; `num_key_value_heads` defaults to the heads.
struct LlamaDefaults {
  static constexpr int64_t vocabSize = 32000;
  static constexpr int64_t hiddenSize = 4096;
  static constexpr int64_t intermediateSize = 11008;
  static constexpr int64_t numHiddenLayers = 32;
  static constexpr int64_t numAttentionHeads = 32;
  static constexpr int64_t maxPositionEmbeddings = 2048;
  static constexpr double rmsNormEps = 1e-6;
  static constexpr double ropeTheta = 10000.0;
  static constexpr bool tieWordEmbeddings = false;
  static constexpr const char *hiddenAct = "silu";
};

/// MistralConfig's: a Llama with its own sizes and a sliding window.
struct MistralDefaults {
  static constexpr int64_t vocabSize = 32000;
  static constexpr int64_t hiddenSize = 4096;
  static constexpr int64_t intermediateSize = 14336;
  static constexpr int64_t numHiddenLayers = 32;
  static constexpr int64_t numAttentionHeads = 32;
  static constexpr int64_t numKeyValueHeads = 8;
  static constexpr int64_t maxPositionEmbeddings = 4096 * 32;
  static constexpr double rmsNormEps = 1e-6;
  static constexpr double ropeTheta = 10000.0;
  static constexpr bool tieWordEmbeddings = false;
  static constexpr int64_t slidingWindow = 4096;
};

/// GPT2Config's; `n_inner` null means 4 x `n_embd`.
struct GPT2Defaults {
  static constexpr int64_t vocabSize = 50257;
  static constexpr int64_t nPositions = 1024;
  static constexpr int64_t nEmbd = 768;
  static constexpr int64_t nLayer = 12;
  static constexpr int64_t nHead = 12;
  static constexpr double layerNormEpsilon = 1e-5;
  static constexpr const char *activationFunction = "gelu_new";
};

/// BertConfig's; PretrainedConfig gives every model 2 labels.
struct BertDefaults {
  static constexpr int64_t vocabSize = 30522;
  static constexpr int64_t hiddenSize = 768;
  static constexpr int64_t numHiddenLayers = 12;
  static constexpr int64_t numAttentionHeads = 12;
  static constexpr int64_t intermediateSize = 3072;
  static constexpr int64_t maxPositionEmbeddings = 512;
  static constexpr int64_t typeVocabSize = 2;
  static constexpr double layerNormEps = 1e-12;
  static constexpr int64_t padTokenId = 0;
  static constexpr int64_t numLabels = 2;
  static constexpr const char *hiddenAct = "gelu";
  static constexpr const char *positionEmbeddingType = "absolute";
};

} // namespace plan::hf

#endif // PLAN_RUNTIME_SUPPORT_HUGGINGFACEDEFAULTS_H
