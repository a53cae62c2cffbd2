//===- Models.cpp - Model presets and HuggingFace parameter lists ---------===//
//
// Each preset is written as the fields of its HuggingFace config.json, under
// the config.json names and in config.json (alphabetical) order, so a reader
// can check it line by line against the hub. Parameter names and shapes follow
// the transformers modeling code: nn.Linear stores [out, in], GPT-2's Conv1D
// stores [in, out], and a state_dict lists a module's own parameters before
// those of its children, children in the order `__init__` assigns them.
//
//===----------------------------------------------------------------------===//

#include "frontend/Models.h"
#include "runtime/support/LoraNames.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Twine.h"

#include <optional>

using namespace plan;

namespace {

/// The fields of a LlamaForCausalLM config.json that shape the model.
struct LlamaConfig {
  int64_t hiddenSize;
  int64_t intermediateSize;
  int64_t maxPositionEmbeddings;
  int64_t numAttentionHeads;
  int64_t numHiddenLayers;
  int64_t numKeyValueHeads;
  double rmsNormEps;
  std::optional<RopeScaling> ropeScaling;
  double ropeTheta;
  bool tieWordEmbeddings;
  int64_t vocabSize;
};

/// The fields of a GPT2LMHeadModel config.json that shape the model.
struct GPT2Config {
  double layerNormEpsilon;
  int64_t nEmbd;
  int64_t nHead;
  std::optional<int64_t> nInner; // null in every OpenAI config: 4 * n_embd
  int64_t nLayer;
  int64_t nPositions;
  int64_t vocabSize;
};

/// The fields of a BertForMaskedLM config.json that shape the model.
struct BertConfig {
  int64_t hiddenSize;
  int64_t intermediateSize;
  double layerNormEps;
  int64_t maxPositionEmbeddings;
  int64_t numAttentionHeads;
  int64_t numHiddenLayers;
  int64_t typeVocabSize;
  int64_t vocabSize;
};

ModelSpec fromConfig(llvm::StringRef preset, const LlamaConfig &config) {
  ModelSpec spec;
  spec.family = ModelFamily::Llama;
  spec.preset = preset.str();
  spec.vocab = config.vocabSize;
  spec.hidden = config.hiddenSize;
  spec.intermediate = config.intermediateSize;
  spec.layers = config.numHiddenLayers;
  spec.heads = config.numAttentionHeads;
  spec.kvHeads = config.numKeyValueHeads;
  spec.maxSeqLen = config.maxPositionEmbeddings;
  spec.ropeTheta = config.ropeTheta;
  spec.ropeScaling = config.ropeScaling;
  spec.normEps = config.rmsNormEps;
  spec.tieEmbeddings = config.tieWordEmbeddings;
  return spec;
}

ModelSpec fromConfig(llvm::StringRef preset, const GPT2Config &config) {
  ModelSpec spec;
  spec.family = ModelFamily::GPT2;
  spec.preset = preset.str();
  spec.vocab = config.vocabSize;
  spec.hidden = config.nEmbd;
  spec.intermediate = config.nInner.value_or(4 * config.nEmbd);
  spec.layers = config.nLayer;
  spec.heads = config.nHead;
  spec.kvHeads = config.nHead;
  spec.maxSeqLen = config.nPositions;
  spec.normEps = config.layerNormEpsilon;
  // GPT2LMHeadModel always ties lm_head to wte (tie_word_embeddings defaults
  // to true and no OpenAI config overrides it).
  spec.tieEmbeddings = true;
  return spec;
}

ModelSpec fromConfig(llvm::StringRef preset, const BertConfig &config,
                     BertHead head) {
  ModelSpec spec;
  spec.family = ModelFamily::Bert;
  spec.preset = preset.str();
  spec.vocab = config.vocabSize;
  spec.hidden = config.hiddenSize;
  spec.intermediate = config.intermediateSize;
  spec.layers = config.numHiddenLayers;
  spec.heads = config.numAttentionHeads;
  spec.kvHeads = config.numAttentionHeads;
  spec.maxSeqLen = config.maxPositionEmbeddings;
  spec.normEps = config.layerNormEps;
  // The MLM decoder shares the word embedding matrix.
  spec.tieEmbeddings = true;
  spec.typeVocab = config.typeVocabSize;
  spec.bertHead = head;
  return spec;
}

/// Llama 3.1's `"rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0,
/// "high_freq_factor": 4.0, "original_max_position_embeddings": 8192,
/// "rope_type": "llama3"}`.
constexpr RopeScaling llama31RopeScaling{.factor = 8.0,
                                         .lowFreqFactor = 1.0,
                                         .highFreqFactor = 4.0,
                                         .originalMaxSeqLen = 8192};

std::vector<ModelPreset> buildPresets() {
  std::vector<ModelPreset> presets;
  auto addLlama = [&](llvm::StringRef name, llvm::StringRef repo,
                      llvm::StringRef summary, const LlamaConfig &config) {
    presets.push_back({name, repo, summary, fromConfig(name, config)});
  };
  auto addGPT2 = [&](llvm::StringRef name, llvm::StringRef repo,
                     llvm::StringRef summary, const GPT2Config &config) {
    presets.push_back({name, repo, summary, fromConfig(name, config)});
  };

  // 1,100,048,384 parameters: embed 32000*2048 = 65,536,000; per layer q, o
  // 2048*2048 and k, v (4*64)*2048 = 9,437,184, MLP 3*2048*5632 = 34,603,008,
  // norms 2*2048 -> 44,044,288 * 22 = 968,974,336; final norm 2048; untied
  // lm_head 65,536,000.
  addLlama("tinyllama_1_1b",
           "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T",
           "TinyLlama 1.1B: the Llama 2 architecture with 4 KV heads",
           {.hiddenSize = 2048,
            .intermediateSize = 5632,
            .maxPositionEmbeddings = 2048,
            .numAttentionHeads = 32,
            .numHiddenLayers = 22,
            .numKeyValueHeads = 4,
            .rmsNormEps = 1e-5,
            .ropeScaling = std::nullopt,
            .ropeTheta = 10000.0,
            .tieWordEmbeddings = false,
            .vocabSize = 32000});

  // 6,738,415,616: embed 32000*4096 = 131,072,000; per layer 4*4096^2 =
  // 67,108,864 + 3*4096*11008 = 135,266,304 + 8192 = 202,383,360, * 32 =
  // 6,476,267,520; norm 4096; lm_head 131,072,000.
  addLlama("llama2_7b", "meta-llama/Llama-2-7b-hf", "Llama 2 7B",
           {.hiddenSize = 4096,
            .intermediateSize = 11008,
            .maxPositionEmbeddings = 4096,
            .numAttentionHeads = 32,
            .numHiddenLayers = 32,
            .numKeyValueHeads = 32,
            .rmsNormEps = 1e-5,
            .ropeScaling = std::nullopt,
            .ropeTheta = 10000.0,
            .tieWordEmbeddings = false,
            .vocabSize = 32000});

  // 8,030,261,248: embed 128256*4096 = 525,336,576; per layer q, o 4096^2 and
  // k, v 1024*4096 = 41,943,040 + MLP 3*4096*14336 = 176,160,768 + 8192 =
  // 218,112,000, * 32 = 6,979,584,000; norm 4096; lm_head 525,336,576.
  addLlama("llama3_8b", "meta-llama/Meta-Llama-3-8B", "Llama 3 8B",
           {.hiddenSize = 4096,
            .intermediateSize = 14336,
            .maxPositionEmbeddings = 8192,
            .numAttentionHeads = 32,
            .numHiddenLayers = 32,
            .numKeyValueHeads = 8,
            .rmsNormEps = 1e-5,
            .ropeScaling = std::nullopt,
            .ropeTheta = 500000.0,
            .tieWordEmbeddings = false,
            .vocabSize = 128256});

  // Same tensors as Llama 3 8B (8,030,261,248); a 128K context through
  // llama3 RoPE scaling.
  addLlama("llama3_1_8b", "meta-llama/Llama-3.1-8B",
           "Llama 3.1 8B (128K context)",
           {.hiddenSize = 4096,
            .intermediateSize = 14336,
            .maxPositionEmbeddings = 131072,
            .numAttentionHeads = 32,
            .numHiddenLayers = 32,
            .numKeyValueHeads = 8,
            .rmsNormEps = 1e-5,
            .ropeScaling = llama31RopeScaling,
            .ropeTheta = 500000.0,
            .tieWordEmbeddings = false,
            .vocabSize = 128256});

  // 70,553,706,496: embed 128256*8192 = 1,050,673,152; per layer q, o 8192^2
  // and k, v 1024*8192 = 150,994,944 + MLP 3*8192*28672 = 704,643,072 +
  // 16384 = 855,654,400, * 80 = 68,452,352,000; norm 8192; lm_head
  // 1,050,673,152.
  addLlama("llama3_70b", "meta-llama/Meta-Llama-3-70B", "Llama 3 70B",
           {.hiddenSize = 8192,
            .intermediateSize = 28672,
            .maxPositionEmbeddings = 8192,
            .numAttentionHeads = 64,
            .numHiddenLayers = 80,
            .numKeyValueHeads = 8,
            .rmsNormEps = 1e-5,
            .ropeScaling = std::nullopt,
            .ropeTheta = 500000.0,
            .tieWordEmbeddings = false,
            .vocabSize = 128256});

  // 405,853,388,800: embed 128256*16384 = 2,101,346,304; per layer q, o
  // 16384^2 and k, v 1024*16384 = 570,425,344 + MLP 3*16384*53248 =
  // 2,617,245,696 + 32768 = 3,187,703,808, * 126 = 401,650,679,808; norm
  // 16384; lm_head 2,101,346,304.
  addLlama("llama3_405b", "meta-llama/Llama-3.1-405B",
           "Llama 3.1 405B (128K context)",
           {.hiddenSize = 16384,
            .intermediateSize = 53248,
            .maxPositionEmbeddings = 131072,
            .numAttentionHeads = 128,
            .numHiddenLayers = 126,
            .numKeyValueHeads = 8,
            .rmsNormEps = 1e-5,
            .ropeScaling = llama31RopeScaling,
            .ropeTheta = 500000.0,
            .tieWordEmbeddings = false,
            .vocabSize = 128256});

  // 33,743,970,304: embed 32000*8192 = 262,144,000; per layer q, o 8192^2
  // and k, v 1024*8192 = 150,994,944 + MLP 3*8192*22016 = 541,065,216 +
  // 16384 = 692,076,544, * 48 = 33,219,674,112; norm 8192; lm_head
  // 262,144,000.
  addLlama("codellama_34b", "codellama/CodeLlama-34b-hf",
           "Code Llama 34B (16K context)",
           {.hiddenSize = 8192,
            .intermediateSize = 22016,
            .maxPositionEmbeddings = 16384,
            .numAttentionHeads = 64,
            .numHiddenLayers = 48,
            .numKeyValueHeads = 8,
            .rmsNormEps = 1e-5,
            .ropeScaling = std::nullopt,
            .ropeTheta = 1000000.0,
            .tieWordEmbeddings = false,
            .vocabSize = 32000});

  // GPT-2, d = n_embd: per block 2 LayerNorms 4d, c_attn 3d^2 + 3d, c_proj
  // d^2 + d, c_fc 4d^2 + 4d, mlp.c_proj 4d^2 + d -> 12d^2 + 13d; plus wte
  // 50257d, wpe 1024d, ln_f 2d; lm_head is wte.
  // 124,439,808 = 38,597,376 + 786,432 + 12 * 7,087,872 + 1536.
  addGPT2("gpt2", "openai-community/gpt2", "GPT-2 small (124M)",
          {.layerNormEpsilon = 1e-5,
           .nEmbd = 768,
           .nHead = 12,
           .nInner = std::nullopt,
           .nLayer = 12,
           .nPositions = 1024,
           .vocabSize = 50257});
  // 354,823,168 = 51,463,168 + 1,048,576 + 24 * 12,596,224 + 2048.
  addGPT2("gpt2_medium", "openai-community/gpt2-medium", "GPT-2 medium (355M)",
          {.layerNormEpsilon = 1e-5,
           .nEmbd = 1024,
           .nHead = 16,
           .nInner = std::nullopt,
           .nLayer = 24,
           .nPositions = 1024,
           .vocabSize = 50257});
  // 774,030,080 = 64,328,960 + 1,310,720 + 36 * 19,677,440 + 2560.
  addGPT2("gpt2_large", "openai-community/gpt2-large", "GPT-2 large (774M)",
          {.layerNormEpsilon = 1e-5,
           .nEmbd = 1280,
           .nHead = 20,
           .nInner = std::nullopt,
           .nLayer = 36,
           .nPositions = 1024,
           .vocabSize = 50257});
  // 1,557,611,200 = 80,411,200 + 1,638,400 + 48 * 30,740,800 + 3200.
  addGPT2("gpt2_xl", "openai-community/gpt2-xl", "GPT-2 XL (1.5B)",
          {.layerNormEpsilon = 1e-5,
           .nEmbd = 1600,
           .nHead = 25,
           .nInner = std::nullopt,
           .nLayer = 48,
           .nPositions = 1024,
           .vocabSize = 50257});

  // 108,340,804: embeddings 28996*768 + 512*768 + 2*768 + LayerNorm 1536 =
  // 22,665,216; per layer Q, K, V, O 4 * (768^2 + 768) = 2,362,368,
  // intermediate 768*3072 + 3072 = 2,362,368, output 3072*768 + 768 =
  // 2,360,064, 2 LayerNorms 3072 -> 7,087,872, * 12 = 85,054,464; MLM head
  // bias 28996 + transform dense 590,592 + LayerNorm 1536; the decoder's
  // weight and bias are the word embeddings and the head bias. (No pooler:
  // BertForMaskedLM builds BertModel with add_pooling_layer=False.)
  presets.push_back({"bert_base_cased", "google-bert/bert-base-cased",
                     "BERT base, cased, with the masked-LM head",
                     fromConfig("bert_base_cased",
                                {.hiddenSize = 768,
                                 .intermediateSize = 3072,
                                 .layerNormEps = 1e-12,
                                 .maxPositionEmbeddings = 512,
                                 .numAttentionHeads = 12,
                                 .numHiddenLayers = 12,
                                 .typeVocabSize = 2,
                                 .vocabSize = 28996},
                                BertHead::MaskedLM)});

  // Ours: small enough that a CPU step takes milliseconds, while keeping what
  // makes the real ones interesting (GQA with 2 query heads per KV head, an
  // intermediate size that is not a multiple of the hidden size, untied
  // lm_head). 158,016 parameters: embed 32,768; per layer q, o 64*64, k, v
  // 32*64 -> 12,288 + MLP 3*64*176 = 33,792 + 128 = 46,208, * 2; norm 64;
  // lm_head 32,768.
  addLlama("llama_tiny", "", "a 2-layer Llama for CPU runs and tests",
           {.hiddenSize = 64,
            .intermediateSize = 176,
            .maxPositionEmbeddings = 256,
            .numAttentionHeads = 4,
            .numHiddenLayers = 2,
            .numKeyValueHeads = 2,
            .rmsNormEps = 1e-5,
            .ropeScaling = std::nullopt,
            .ropeTheta = 10000.0,
            .tieWordEmbeddings = false,
            .vocabSize = 512});
  // 149,248 = 32,768 + 16,384 + 2 * (12 * 64^2 + 13 * 64) + 128.
  addGPT2("gpt2_tiny", "", "a 2-layer GPT-2 for CPU runs and tests",
          {.layerNormEpsilon = 1e-5,
           .nEmbd = 64,
           .nHead = 4,
           .nInner = std::nullopt,
           .nLayer = 2,
           .nPositions = 256,
           .vocabSize = 512});
  // 154,176: embeddings 512*64 + 256*64 + 2*64 + LayerNorm 128 = 49,408; per
  // layer Q, K, V, O 4 * (64^2 + 64) + intermediate 64*256 + 256 + output
  // 256*64 + 64 + 2 LayerNorms 256 = 49,984, * 2; MLM head bias 512 +
  // transform dense 4,160 + LayerNorm 128.
  presets.push_back({"bert_tiny", "",
                     "a 2-layer BERT (masked-LM head) for CPU runs and tests",
                     fromConfig("bert_tiny",
                                {.hiddenSize = 64,
                                 .intermediateSize = 256,
                                 .layerNormEps = 1e-12,
                                 .maxPositionEmbeddings = 256,
                                 .numAttentionHeads = 4,
                                 .numHiddenLayers = 2,
                                 .typeVocabSize = 2,
                                 .vocabSize = 512},
                                BertHead::MaskedLM)});
  return presets;
}

/// A LoRA run's choices, as enumerating the units applies them.
struct LoraLayout {
  const LoraSpec *spec = nullptr; // null: every parameter trains
  BaseStorage dense = BaseStorage::F32;
  bool everyModule = false; // adapters on every linear layer (loraModules)
};

/// One unit being assembled: its parameters get the unit's name prefix.
class UnitParams {
public:
  UnitParams(std::string name, UnitKind kind, std::string prefix,
             LoraLayout lora = {})
      : unit{std::move(name), kind, {}}, prefix(std::move(prefix)), lora(lora) {
  }

  /// Which of a linear layer's features tensor parallelism divides
  /// (Megatron's ColumnParallelLinear / RowParallelLinear).
  enum class Parallel { None, Column, Row };

  void add(llvm::StringRef name, llvm::ArrayRef<int64_t> shape,
           llvm::StringRef tiedTo = "", TensorSplit split = {}) {
    addStored(name, shape, tiedTo, frozenDense(), split);
  }
  /// An nn.Linear: weight [out, in], then bias [out] when it has one. A
  /// row-parallel layer's bias is whole: it is added after the reduction.
  void linear(llvm::StringRef name, int64_t in, int64_t out, bool bias,
              Parallel parallel = Parallel::None) {
    addStored((name + ".weight").str(), {out, in}, "", frozenWeight(),
              parallel == Parallel::Column ? TensorSplit{0}
              : parallel == Parallel::Row  ? TensorSplit{1}
                                           : TensorSplit{});
    if (bias)
      add((name + ".bias").str(), {out}, "",
          parallel == Parallel::Column ? TensorSplit{0} : TensorSplit{});
    addAdapters(name, in, out);
  }
  /// GPT-2's Conv1D: weight [in, out], bias [out]; `chunks` output parts
  /// divided each (c_attn's q, k and v).
  void conv1d(llvm::StringRef name, int64_t in, int64_t out,
              Parallel parallel = Parallel::None, int64_t chunks = 1) {
    addStored((name + ".weight").str(), {in, out}, "", frozenWeight(),
              parallel == Parallel::Column ? TensorSplit{1, chunks}
              : parallel == Parallel::Row  ? TensorSplit{0}
                                           : TensorSplit{});
    add((name + ".bias").str(), {out}, "",
        parallel == Parallel::Column ? TensorSplit{0, chunks} : TensorSplit{});
    addAdapters(name, in, out);
  }
  void layerNorm(llvm::StringRef name, int64_t dim) {
    add((name + ".weight").str(), {dim});
    add((name + ".bias").str(), {dim});
  }

  void appendTo(std::vector<ModelUnit> &units) {
    units.push_back(std::move(unit));
  }

private:
  bool isBlock() const { return isBlockKind(unit.kind); }
  std::optional<BaseStorage> frozenDense() const {
    if (!lora.spec)
      return std::nullopt;
    return lora.spec->base == BaseStorage::NF4 ? lora.dense : *lora.spec->base;
  }
  /// bitsandbytes quantizes the blocks' linear layers, not the head.
  std::optional<BaseStorage> frozenWeight() const {
    if (lora.spec && isBlock() && lora.spec->base == BaseStorage::NF4)
      return BaseStorage::NF4;
    return frozenDense();
  }
  void addStored(llvm::StringRef name, llvm::ArrayRef<int64_t> shape,
                 llvm::StringRef tiedTo, std::optional<BaseStorage> frozen,
                 TensorSplit split = {}) {
    unit.params.push_back({(llvm::Twine(prefix) + name).str(),
                           llvm::SmallVector<int64_t, 2>(shape), tiedTo.str(),
                           tiedTo.empty() ? frozen : std::nullopt,
                           tiedTo.empty() ? split : TensorSplit{}});
  }
  /// PEFT's lora_A (an nn.Linear in -> rank) and lora_B (rank -> out) on a
  /// targeted linear layer of a block, after the layer's own parameters.
  void addAdapters(llvm::StringRef module, int64_t in, int64_t out) {
    if (!lora.spec || !isBlock() ||
        (!lora.everyModule &&
         !llvm::any_of(lora.spec->targets, [&](const std::string &target) {
           return loraTargetMatches(module, target);
         })))
      return;
    int64_t rank = lora.spec->rank;
    addStored((module + rt::kLoraASuffix).str(), {rank, in}, "", std::nullopt);
    addStored((module + rt::kLoraBSuffix).str(), {out, rank}, "", std::nullopt);
  }

  ModelUnit unit;
  std::string prefix;
  LoraLayout lora;
};

std::string layerUnitName(int64_t i) {
  return ("layers." + llvm::Twine(i)).str();
}

// LlamaForCausalLM: model.embed_tokens, model.layers.N (self_attn q/k/v/o,
// mlp gate/up/down, input_layernorm, post_attention_layernorm), model.norm,
// lm_head. No biases (attention_bias and mlp_bias are false in every preset);
// RoPE's inv_freq is a non-persistent buffer.
void enumerateLlama(const ModelSpec &m, std::vector<ModelUnit> &units,
                    LoraLayout lora) {
  const int64_t kvDim = m.kvHeads * m.headDim();
  const int64_t qDim = m.heads * m.headDim();
  using Parallel = UnitParams::Parallel;
  // Megatron's layout: vocab-parallel embedding and head; q, k, v, gate and
  // up by their output features (heads, intermediate), o and down by their
  // input features; the norms whole.
  UnitParams embed("embed", UnitKind::Embedding, "model.", lora);
  embed.add("embed_tokens.weight", {m.vocab, m.hidden}, "", TensorSplit{0});
  embed.appendTo(units);

  for (int64_t i = 0; i < m.layers; ++i) {
    UnitParams layer(layerUnitName(i), UnitKind::LlamaBlock,
                     ("model.layers." + llvm::Twine(i) + ".").str(), lora);
    layer.linear("self_attn.q_proj", m.hidden, qDim, /*bias=*/false,
                 Parallel::Column);
    layer.linear("self_attn.k_proj", m.hidden, kvDim, /*bias=*/false,
                 Parallel::Column);
    layer.linear("self_attn.v_proj", m.hidden, kvDim, /*bias=*/false,
                 Parallel::Column);
    layer.linear("self_attn.o_proj", qDim, m.hidden, /*bias=*/false,
                 Parallel::Row);
    layer.linear("mlp.gate_proj", m.hidden, m.intermediate, /*bias=*/false,
                 Parallel::Column);
    layer.linear("mlp.up_proj", m.hidden, m.intermediate, /*bias=*/false,
                 Parallel::Column);
    layer.linear("mlp.down_proj", m.intermediate, m.hidden, /*bias=*/false,
                 Parallel::Row);
    layer.add("input_layernorm.weight", {m.hidden});
    layer.add("post_attention_layernorm.weight", {m.hidden});
    layer.appendTo(units);
  }

  UnitParams head("head", UnitKind::LlamaHead, "", lora);
  head.add("model.norm.weight", {m.hidden});
  head.add("lm_head.weight", {m.vocab, m.hidden},
           m.tieEmbeddings ? "model.embed_tokens.weight" : "", TensorSplit{0});
  head.appendTo(units);
}

// GPT2LMHeadModel: transformer.wte, wpe, h.N (ln_1, attn.c_attn, attn.c_proj,
// ln_2, mlp.c_fc, mlp.c_proj), ln_f, then lm_head, always tied to wte. The
// causal-mask buffers (attn.bias, attn.masked_bias) are not parameters.
void enumerateGPT2(const ModelSpec &m, std::vector<ModelUnit> &units,
                   LoraLayout lora) {
  using Parallel = UnitParams::Parallel;
  // As Megatron's GPT: wte vocab-parallel (lm_head is tied to it), wpe and
  // the layer norms whole; c_attn's q, k and v and c_fc by their output
  // features, the c_projs by their input features.
  UnitParams embed("embed", UnitKind::Embedding, "transformer.", lora);
  embed.add("wte.weight", {m.vocab, m.hidden}, "", TensorSplit{0});
  embed.add("wpe.weight", {m.maxSeqLen, m.hidden});
  embed.appendTo(units);

  for (int64_t i = 0; i < m.layers; ++i) {
    UnitParams layer(layerUnitName(i), UnitKind::GPT2Block,
                     ("transformer.h." + llvm::Twine(i) + ".").str(), lora);
    layer.layerNorm("ln_1", m.hidden);
    layer.conv1d("attn.c_attn", m.hidden, 3 * m.hidden, Parallel::Column,
                 /*chunks=*/3);
    layer.conv1d("attn.c_proj", m.hidden, m.hidden, Parallel::Row);
    layer.layerNorm("ln_2", m.hidden);
    layer.conv1d("mlp.c_fc", m.hidden, m.intermediate, Parallel::Column);
    layer.conv1d("mlp.c_proj", m.intermediate, m.hidden, Parallel::Row);
    layer.appendTo(units);
  }

  UnitParams head("head", UnitKind::GPT2Head, "", lora);
  head.layerNorm("transformer.ln_f", m.hidden);
  head.add("lm_head.weight", {m.vocab, m.hidden}, "transformer.wte.weight");
  head.appendTo(units);
}

// BertForMaskedLM / BertForSequenceClassification: bert.embeddings (word,
// position, token_type, LayerNorm), bert.encoder.layer.N, then either the MLM
// head `cls.predictions` (its own `bias` first, then transform.dense,
// transform.LayerNorm, decoder.weight, which is the word embedding matrix) or
// bert.pooler + classifier. HF's `cls.predictions.decoder.bias` is not a
// parameter of its own: it is `cls.predictions.bias` itself (the same
// nn.Parameter, in the same unit), so it is listed once, under that name; a
// tie stands for storage in another unit. The position_ids / token_type_ids
// buffers are not parameters.
void enumerateBert(const ModelSpec &m, std::vector<ModelUnit> &units,
                   LoraLayout lora) {
  UnitParams embed("embed", UnitKind::Embedding, "bert.embeddings.", lora);
  embed.add("word_embeddings.weight", {m.vocab, m.hidden});
  embed.add("position_embeddings.weight", {m.maxSeqLen, m.hidden});
  embed.add("token_type_embeddings.weight", {m.typeVocab, m.hidden});
  embed.layerNorm("LayerNorm", m.hidden);
  embed.appendTo(units);

  for (int64_t i = 0; i < m.layers; ++i) {
    UnitParams layer(layerUnitName(i), UnitKind::BertBlock,
                     ("bert.encoder.layer." + llvm::Twine(i) + ".").str(),
                     lora);
    layer.linear("attention.self.query", m.hidden, m.hidden, /*bias=*/true);
    layer.linear("attention.self.key", m.hidden, m.hidden, /*bias=*/true);
    layer.linear("attention.self.value", m.hidden, m.hidden, /*bias=*/true);
    layer.linear("attention.output.dense", m.hidden, m.hidden, /*bias=*/true);
    layer.layerNorm("attention.output.LayerNorm", m.hidden);
    layer.linear("intermediate.dense", m.hidden, m.intermediate,
                 /*bias=*/true);
    layer.linear("output.dense", m.intermediate, m.hidden, /*bias=*/true);
    layer.layerNorm("output.LayerNorm", m.hidden);
    layer.appendTo(units);
  }

  UnitParams head("head", UnitKind::BertHead, "", lora);
  switch (m.bertHead) {
  case BertHead::MaskedLM:
    head.add("cls.predictions.bias", {m.vocab});
    head.linear("cls.predictions.transform.dense", m.hidden, m.hidden,
                /*bias=*/true);
    head.layerNorm("cls.predictions.transform.LayerNorm", m.hidden);
    head.add("cls.predictions.decoder.weight", {m.vocab, m.hidden},
             "bert.embeddings.word_embeddings.weight");
    break;
  case BertHead::SequenceClassification:
    head.linear("bert.pooler.dense", m.hidden, m.hidden, /*bias=*/true);
    head.linear("classifier", m.hidden, m.numLabels, /*bias=*/true);
    break;
  }
  head.appendTo(units);
}

} // namespace

llvm::ArrayRef<ModelPreset> plan::modelPresets() {
  static const std::vector<ModelPreset> presets = buildPresets();
  return presets;
}

const ModelPreset *plan::lookupModelPreset(llvm::StringRef name) {
  auto presets = modelPresets();
  const auto *it = llvm::find_if(
      presets, [&](const ModelPreset &preset) { return preset.name == name; });
  return it == presets.end() ? nullptr : it;
}

int64_t ParamInfo::numel() const {
  int64_t n = 1;
  for (int64_t dim : shape)
    n *= dim;
  return n;
}

static std::vector<ModelUnit> unitsWith(const ModelSpec &model,
                                        LoraLayout lora) {
  std::vector<ModelUnit> units;
  units.reserve(model.layers + 2);
  switch (model.family) {
  case ModelFamily::Llama:
    enumerateLlama(model, units, lora);
    break;
  case ModelFamily::GPT2:
    enumerateGPT2(model, units, lora);
    break;
  case ModelFamily::Bert:
    enumerateBert(model, units, lora);
    break;
  }
  return units;
}

std::vector<ModelUnit> plan::enumerateUnits(const ModelSpec &model) {
  return unitsWith(model, LoraLayout{});
}

std::vector<ModelUnit> plan::enumerateUnits(const ModelSpec &model,
                                            const LoraSpec &lora,
                                            BaseStorage dense) {
  assert(lora.base && "the analyzer resolves the base storage");
  return unitsWith(model, LoraLayout{&lora, dense});
}

ParamCounts plan::countParams(const std::vector<ModelUnit> &units) {
  ParamCounts counts;
  for (const ModelUnit &unit : units)
    for (const ParamInfo &param : unit.params) {
      if (!param.tiedTo.empty())
        continue;
      counts.total += param.numel();
      if (param.frozen)
        counts.frozenBytes += storageBytes(*param.frozen, param.numel());
      else
        counts.trainable += param.numel();
    }
  return counts;
}

std::vector<std::string> plan::loraModules(ModelFamily family) {
  // The linear layers of one block of a one-layer model of the family.
  ModelSpec tiny;
  tiny.family = family;
  tiny.vocab = tiny.hidden = tiny.intermediate = tiny.maxSeqLen = 8;
  tiny.layers = tiny.heads = tiny.kvHeads = 1;
  LoraSpec lora;
  lora.base = BaseStorage::F32;
  std::vector<std::string> modules;
  for (const ModelUnit &unit :
       unitsWith(tiny, LoraLayout{&lora, BaseStorage::F32, true}))
    for (const ParamInfo &param : unit.params) {
      if (!rt::isLoraA(param.name))
        continue;
      modules.emplace_back(
          rt::moduleInBlock(*rt::loraAdapterModule(param.name)));
    }
  return modules;
}

std::vector<std::string> plan::defaultLoraTargets(ModelFamily family) {
  switch (family) {
  case ModelFamily::Llama:
    return {"q_proj", "v_proj"};
  case ModelFamily::GPT2:
    return {"c_attn"};
  case ModelFamily::Bert:
    return {"query", "value"};
  }
  llvm_unreachable("unknown family");
}

bool plan::loraTargetMatches(llvm::StringRef module, llvm::StringRef target) {
  return !target.empty() &&
         (module == target || (module.ends_with(target) &&
                               module.drop_back(target.size()).ends_with(".")));
}

int64_t plan::countParams(const ModelSpec &model) {
  return countParams(enumerateUnits(model)).total;
}
