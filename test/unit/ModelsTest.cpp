//===- ModelsTest.cpp - Presets, parameter lists, device table ------------===//
//
// The parameter counts are what HuggingFace's `model.num_parameters()` prints
// for each hub model (each count is derived from the config next to the
// preset in frontend/Models.cpp).
//
//===----------------------------------------------------------------------===//

#include "frontend/Models.h"

#include "llvm/ADT/StringSet.h"

#include "gtest/gtest.h"

using namespace plan;

namespace {

const ModelSpec &preset(llvm::StringRef name) {
  const ModelPreset *found = lookupModelPreset(name);
  if (!found)
    ADD_FAILURE() << "no preset " << name.str();
  static const ModelSpec empty;
  return found ? found->spec : empty;
}

/// Every parameter of a model, in state_dict order.
std::vector<ParamInfo> flatten(const std::vector<ModelUnit> &units) {
  std::vector<ParamInfo> params;
  for (const ModelUnit &unit : units)
    params.insert(params.end(), unit.params.begin(), unit.params.end());
  return params;
}

const ParamInfo *findParam(const std::vector<ModelUnit> &units,
                           llvm::StringRef name) {
  for (const ModelUnit &unit : units)
    for (const ParamInfo &param : unit.params)
      if (param.name == name)
        return &param;
  return nullptr;
}

using Shape = llvm::SmallVector<int64_t, 2>;

Shape shapeOf(const std::vector<ModelUnit> &units, llvm::StringRef name) {
  const ParamInfo *param = findParam(units, name);
  if (!param) {
    ADD_FAILURE() << "no parameter " << name.str();
    return {};
  }
  return param->shape;
}

struct ExpectedCount {
  const char *preset;
  int64_t params;
};

TEST(ModelPresets, ParameterCountsMatchHuggingFace) {
  const ExpectedCount expected[] = {
      {"tinyllama_1_1b", 1'100'048'384},
      {"llama2_7b", 6'738'415'616},
      {"llama3_8b", 8'030'261'248},
      {"llama3_1_8b", 8'030'261'248},
      {"llama3_70b", 70'553'706'496},
      {"llama3_405b", 405'853'388'800},
      {"codellama_34b", 33'743'970'304},
      {"gpt2", 124'439'808},
      {"gpt2_medium", 354'823'168},
      {"gpt2_large", 774'030'080},
      {"gpt2_xl", 1'557'611'200},
      {"bert_base_cased", 108'340'804},
      {"llama_tiny", 158'016},
      {"gpt2_tiny", 149'248},
      {"bert_tiny", 154'176},
  };
  for (const ExpectedCount &e : expected)
    EXPECT_EQ(countParams(preset(e.preset)), e.params) << e.preset;
  EXPECT_EQ(modelPresets().size(), std::size(expected));
}

TEST(ModelPresets, NamesAreUniqueAndRecorded) {
  llvm::StringSet<> names;
  for (const ModelPreset &p : modelPresets()) {
    EXPECT_TRUE(names.insert(p.name).second) << p.name.str();
    EXPECT_EQ(p.spec.preset, p.name.str());
    EXPECT_FALSE(p.summary.empty()) << p.name.str();
    EXPECT_EQ(p.spec.hidden % p.spec.heads, 0) << p.name.str();
    EXPECT_EQ(p.spec.heads % p.spec.kvHeads, 0) << p.name.str();
  }
  EXPECT_EQ(lookupModelPreset("llama3_8B"), nullptr);
  EXPECT_EQ(lookupModelPreset(""), nullptr);
}

TEST(ModelPresets, ConfigFieldsMatchHuggingFace) {
  const ModelSpec &tiny = preset("tinyllama_1_1b");
  EXPECT_EQ(tiny.family, ModelFamily::Llama);
  EXPECT_EQ(tiny.vocab, 32000);
  EXPECT_EQ(tiny.hidden, 2048);
  EXPECT_EQ(tiny.intermediate, 5632);
  EXPECT_EQ(tiny.layers, 22);
  EXPECT_EQ(tiny.heads, 32);
  EXPECT_EQ(tiny.kvHeads, 4);
  EXPECT_EQ(tiny.maxSeqLen, 2048);
  EXPECT_EQ(tiny.ropeTheta, 10000.0);
  EXPECT_EQ(tiny.normEps, 1e-5);
  EXPECT_FALSE(tiny.tieEmbeddings);
  EXPECT_FALSE(tiny.ropeScaling);

  const ModelSpec &l3 = preset("llama3_8b");
  EXPECT_EQ(l3.ropeTheta, 500000.0);
  EXPECT_EQ(l3.maxSeqLen, 8192);
  EXPECT_FALSE(l3.ropeScaling);

  const ModelSpec &l31 = preset("llama3_1_8b");
  EXPECT_EQ(l31.maxSeqLen, 131072);
  EXPECT_EQ(l31.ropeTheta, 500000.0);
  ASSERT_TRUE(l31.ropeScaling);
  EXPECT_EQ(*l31.ropeScaling, (RopeScaling{8.0, 1.0, 4.0, 8192}));
  // Apart from the context length, the same model as Llama 3 8B.
  ModelSpec l31AsL3 = l31;
  l31AsL3.preset = l3.preset;
  l31AsL3.maxSeqLen = l3.maxSeqLen;
  l31AsL3.ropeScaling.reset();
  EXPECT_EQ(l31AsL3, l3);

  const ModelSpec &l405 = preset("llama3_405b");
  EXPECT_EQ(l405.layers, 126);
  EXPECT_EQ(l405.hidden, 16384);
  EXPECT_EQ(l405.intermediate, 53248);
  EXPECT_EQ(l405.heads, 128);
  EXPECT_EQ(l405.kvHeads, 8);
  EXPECT_TRUE(l405.ropeScaling);

  const ModelSpec &code = preset("codellama_34b");
  EXPECT_EQ(code.ropeTheta, 1e6);
  EXPECT_EQ(code.maxSeqLen, 16384);
  EXPECT_EQ(code.kvHeads, 8);

  const ModelSpec &gpt2 = preset("gpt2");
  EXPECT_EQ(gpt2.family, ModelFamily::GPT2);
  EXPECT_EQ(gpt2.vocab, 50257);
  EXPECT_EQ(gpt2.intermediate, 4 * 768);
  EXPECT_EQ(gpt2.maxSeqLen, 1024);
  EXPECT_EQ(gpt2.normEps, 1e-5);
  EXPECT_TRUE(gpt2.tieEmbeddings);
  EXPECT_EQ(preset("gpt2_xl").heads, 25);

  const ModelSpec &bert = preset("bert_base_cased");
  EXPECT_EQ(bert.family, ModelFamily::Bert);
  EXPECT_EQ(bert.vocab, 28996);
  EXPECT_EQ(bert.maxSeqLen, 512);
  EXPECT_EQ(bert.typeVocab, 2);
  EXPECT_EQ(bert.normEps, 1e-12);
  EXPECT_EQ(bert.bertHead, BertHead::MaskedLM);
}

TEST(EnumerateUnits, LlamaNamesShapesAndOrder) {
  auto units = enumerateUnits(preset("llama3_8b"));
  ASSERT_EQ(units.size(), 34u);
  EXPECT_EQ(units.front().name, "embed");
  EXPECT_EQ(units.front().kind, UnitKind::Embedding);
  EXPECT_EQ(units[1].name, "layers.0");
  EXPECT_EQ(units[32].name, "layers.31");
  for (size_t i = 1; i <= 32; ++i)
    EXPECT_EQ(units[i].kind, UnitKind::LlamaBlock);
  EXPECT_EQ(units.back().name, "head");
  EXPECT_EQ(units.back().kind, UnitKind::LlamaHead);

  auto params = flatten(units);
  ASSERT_EQ(params.size(), 1 + 32 * 9 + 2u);
  EXPECT_EQ(params.front().name, "model.embed_tokens.weight");
  EXPECT_EQ(params.front().shape, Shape({128256, 4096}));
  EXPECT_EQ(params.back().name, "lm_head.weight");
  EXPECT_EQ(params.back().shape, Shape({128256, 4096}));
  EXPECT_EQ(params.back().tiedTo, "");

  const char *layerOrder[] = {
      "self_attn.q_proj.weight",        "self_attn.k_proj.weight",
      "self_attn.v_proj.weight",        "self_attn.o_proj.weight",
      "mlp.gate_proj.weight",           "mlp.up_proj.weight",
      "mlp.down_proj.weight",           "input_layernorm.weight",
      "post_attention_layernorm.weight"};
  ASSERT_EQ(units[32].params.size(), std::size(layerOrder));
  for (size_t i = 0; i < std::size(layerOrder); ++i)
    EXPECT_EQ(units[32].params[i].name,
              std::string("model.layers.31.") + layerOrder[i]);
  EXPECT_EQ(units.back().params.front().name, "model.norm.weight");

  // GQA: 8 KV heads of 128 dims.
  EXPECT_EQ(shapeOf(units, "model.layers.0.self_attn.q_proj.weight"),
            Shape({4096, 4096}));
  EXPECT_EQ(shapeOf(units, "model.layers.0.self_attn.k_proj.weight"),
            Shape({1024, 4096}));
  EXPECT_EQ(shapeOf(units, "model.layers.0.self_attn.v_proj.weight"),
            Shape({1024, 4096}));
  EXPECT_EQ(shapeOf(units, "model.layers.0.self_attn.o_proj.weight"),
            Shape({4096, 4096}));
  EXPECT_EQ(shapeOf(units, "model.layers.0.mlp.gate_proj.weight"),
            Shape({14336, 4096}));
  EXPECT_EQ(shapeOf(units, "model.layers.0.mlp.down_proj.weight"),
            Shape({4096, 14336}));
  EXPECT_EQ(shapeOf(units, "model.layers.0.input_layernorm.weight"),
            Shape({4096}));

  auto tiny = enumerateUnits(preset("tinyllama_1_1b"));
  EXPECT_EQ(shapeOf(tiny, "model.layers.21.self_attn.k_proj.weight"),
            Shape({256, 2048}));
}

TEST(EnumerateUnits, LlamaTiedEmbeddingsCountOnce) {
  ModelSpec tied = preset("llama_tiny");
  tied.tieEmbeddings = true;
  auto units = enumerateUnits(tied);
  const ParamInfo *lmHead = findParam(units, "lm_head.weight");
  ASSERT_TRUE(lmHead);
  EXPECT_EQ(lmHead->tiedTo, "model.embed_tokens.weight");
  EXPECT_EQ(countParams(tied),
            countParams(preset("llama_tiny")) - tied.vocab * tied.hidden);
}

TEST(EnumerateUnits, GPT2Conv1DOrientationAndTiedHead) {
  auto units = enumerateUnits(preset("gpt2"));
  ASSERT_EQ(units.size(), 14u);
  EXPECT_EQ(units[1].kind, UnitKind::GPT2Block);
  EXPECT_EQ(units.back().kind, UnitKind::GPT2Head);

  auto params = flatten(units);
  ASSERT_EQ(params.size(), 2 + 12 * 12 + 3u);
  EXPECT_EQ(params[0].name, "transformer.wte.weight");
  EXPECT_EQ(params[0].shape, Shape({50257, 768}));
  EXPECT_EQ(params[1].name, "transformer.wpe.weight");
  EXPECT_EQ(params[1].shape, Shape({1024, 768}));
  EXPECT_EQ(params[2].name, "transformer.h.0.ln_1.weight");
  EXPECT_EQ(params[params.size() - 3].name, "transformer.ln_f.weight");
  EXPECT_EQ(params.back().name, "lm_head.weight");
  EXPECT_EQ(params.back().tiedTo, "transformer.wte.weight");

  // Conv1D stores [in, out].
  EXPECT_EQ(shapeOf(units, "transformer.h.0.attn.c_attn.weight"),
            Shape({768, 2304}));
  EXPECT_EQ(shapeOf(units, "transformer.h.0.attn.c_attn.bias"), Shape({2304}));
  EXPECT_EQ(shapeOf(units, "transformer.h.0.attn.c_proj.weight"),
            Shape({768, 768}));
  EXPECT_EQ(shapeOf(units, "transformer.h.11.mlp.c_fc.weight"),
            Shape({768, 3072}));
  EXPECT_EQ(shapeOf(units, "transformer.h.11.mlp.c_proj.weight"),
            Shape({3072, 768}));
  // The causal-mask buffer is not a parameter.
  EXPECT_EQ(findParam(units, "transformer.h.0.attn.bias"), nullptr);

  const char *blockOrder[] = {
      "ln_1.weight",      "ln_1.bias",          "attn.c_attn.weight",
      "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias",
      "ln_2.weight",      "ln_2.bias",          "mlp.c_fc.weight",
      "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};
  ASSERT_EQ(units[5].params.size(), std::size(blockOrder));
  for (size_t i = 0; i < std::size(blockOrder); ++i)
    EXPECT_EQ(units[5].params[i].name,
              std::string("transformer.h.4.") + blockOrder[i]);
}

TEST(EnumerateUnits, BertMaskedLMHeadOrderAndTies) {
  auto units = enumerateUnits(preset("bert_base_cased"));
  ASSERT_EQ(units.size(), 14u);
  EXPECT_EQ(units[1].kind, UnitKind::BertBlock);
  EXPECT_EQ(units.back().kind, UnitKind::BertHead);

  const char *embedOrder[] = {"bert.embeddings.word_embeddings.weight",
                              "bert.embeddings.position_embeddings.weight",
                              "bert.embeddings.token_type_embeddings.weight",
                              "bert.embeddings.LayerNorm.weight",
                              "bert.embeddings.LayerNorm.bias"};
  ASSERT_EQ(units.front().params.size(), std::size(embedOrder));
  for (size_t i = 0; i < std::size(embedOrder); ++i)
    EXPECT_EQ(units.front().params[i].name, embedOrder[i]);

  const char *layerOrder[] = {"attention.self.query.weight",
                              "attention.self.query.bias",
                              "attention.self.key.weight",
                              "attention.self.key.bias",
                              "attention.self.value.weight",
                              "attention.self.value.bias",
                              "attention.output.dense.weight",
                              "attention.output.dense.bias",
                              "attention.output.LayerNorm.weight",
                              "attention.output.LayerNorm.bias",
                              "intermediate.dense.weight",
                              "intermediate.dense.bias",
                              "output.dense.weight",
                              "output.dense.bias",
                              "output.LayerNorm.weight",
                              "output.LayerNorm.bias"};
  ASSERT_EQ(units[12].params.size(), std::size(layerOrder));
  for (size_t i = 0; i < std::size(layerOrder); ++i)
    EXPECT_EQ(units[12].params[i].name,
              std::string("bert.encoder.layer.11.") + layerOrder[i]);
  EXPECT_EQ(shapeOf(units, "bert.encoder.layer.0.intermediate.dense.weight"),
            Shape({3072, 768}));
  EXPECT_EQ(shapeOf(units, "bert.embeddings.token_type_embeddings.weight"),
            Shape({2, 768}));

  const char *headOrder[] = {"cls.predictions.bias",
                             "cls.predictions.transform.dense.weight",
                             "cls.predictions.transform.dense.bias",
                             "cls.predictions.transform.LayerNorm.weight",
                             "cls.predictions.transform.LayerNorm.bias",
                             "cls.predictions.decoder.weight"};
  const ModelUnit &head = units.back();
  ASSERT_EQ(head.params.size(), std::size(headOrder));
  for (size_t i = 0; i < std::size(headOrder); ++i)
    EXPECT_EQ(head.params[i].name, headOrder[i]);
  EXPECT_EQ(head.params[5].tiedTo, "bert.embeddings.word_embeddings.weight");
  EXPECT_EQ(head.params[5].shape, Shape({28996, 768}));
  // HF's decoder.bias is cls.predictions.bias itself, listed once.
  EXPECT_EQ(findParam(units, "cls.predictions.decoder.bias"), nullptr);
  // No pooler without a classification head.
  EXPECT_EQ(findParam(units, "bert.pooler.dense.weight"), nullptr);
}

TEST(EnumerateUnits, BertSequenceClassificationHead) {
  ModelSpec bert = preset("bert_base_cased");
  bert.bertHead = BertHead::SequenceClassification;
  bert.numLabels = 3;
  auto units = enumerateUnits(bert);
  const ModelUnit &head = units.back();
  ASSERT_EQ(head.params.size(), 4u);
  EXPECT_EQ(head.params[0].name, "bert.pooler.dense.weight");
  EXPECT_EQ(head.params[1].name, "bert.pooler.dense.bias");
  EXPECT_EQ(head.params[2].name, "classifier.weight");
  EXPECT_EQ(head.params[2].shape, Shape({3, 768}));
  EXPECT_EQ(head.params[3].name, "classifier.bias");
  for (const ParamInfo &param : flatten(units))
    EXPECT_EQ(param.tiedTo, "") << param.name;
  // BertForSequenceClassification.from_pretrained("bert-base-cased",
  // num_labels=2) has 108,311,810 parameters: 22,665,216 + 85,054,464 +
  // pooler 590,592 + classifier 2 * 768 + 2.
  bert.numLabels = 2;
  EXPECT_EQ(countParams(bert), 108'311'810);
}

TEST(EnumerateUnits, EveryTieNamesAnEarlierParameter) {
  for (const ModelPreset &p : modelPresets()) {
    llvm::StringSet<> seen;
    for (const ParamInfo &param : flatten(enumerateUnits(p.spec))) {
      if (!param.tiedTo.empty()) {
        EXPECT_TRUE(seen.contains(param.tiedTo))
            << p.name.str() << ": " << param.name;
        const ParamInfo *target =
            findParam(enumerateUnits(p.spec), param.tiedTo);
        ASSERT_TRUE(target);
        EXPECT_EQ(target->shape, param.shape) << param.name;
      }
      EXPECT_TRUE(seen.insert(param.name).second) << param.name;
    }
  }
}

TEST(ParamInfo, Numel) {
  EXPECT_EQ((ParamInfo{"w", {3, 5}, ""}).numel(), 15);
  EXPECT_EQ((ParamInfo{"b", {7}, ""}).numel(), 7);
}

TEST(DeviceTable, KnownDevices) {
  const char *names[] = {"h100_sxm", "h100_pcie", "h200",    "a100_80g",
                         "a100_40g", "a100_64g",  "rtx4090", "a6000_ada",
                         "l40s",     "cpu"};
  EXPECT_EQ(deviceTable().size(), std::size(names));
  for (const char *name : names) {
    const DeviceSpec *device = lookupDevice(name);
    ASSERT_TRUE(device) << name;
    EXPECT_EQ(device->name, name);
    EXPECT_GT(device->memoryBytes, 0) << name;
    EXPECT_GT(device->bf16Tflops, 0) << name;
    EXPECT_GT(device->fp16Tflops, 0) << name;
    EXPECT_GT(device->fp32Tflops, 0) << name;
    EXPECT_GT(device->hbmBandwidth, 0) << name;
    EXPECT_GE(device->nvlinkBandwidth, 0) << name;
    EXPECT_GT(device->pcieBandwidth, 0) << name;
    // Peak tensor math is never slower than plain fp32.
    EXPECT_GE(device->bf16Tflops, device->fp32Tflops) << name;
  }
  EXPECT_EQ(lookupDevice("h100"), nullptr);
  EXPECT_EQ(lookupDevice("H100_SXM"), nullptr);
}

TEST(DeviceTable, DatasheetValues) {
  constexpr int64_t GiB = int64_t(1) << 30;
  const DeviceSpec *h100 = lookupDevice("h100_sxm");
  ASSERT_TRUE(h100);
  EXPECT_EQ(h100->memoryBytes, 80 * GiB);
  EXPECT_DOUBLE_EQ(h100->bf16Tflops, 989.5);
  EXPECT_DOUBLE_EQ(h100->fp32Tflops, 67.0);
  EXPECT_DOUBLE_EQ(h100->hbmBandwidth, 3.35e12);
  EXPECT_DOUBLE_EQ(h100->nvlinkBandwidth, 450e9);
  EXPECT_DOUBLE_EQ(h100->pcieBandwidth, 64e9);

  const DeviceSpec *h200 = lookupDevice("h200");
  ASSERT_TRUE(h200);
  EXPECT_EQ(h200->memoryBytes, 141 * GiB);
  EXPECT_DOUBLE_EQ(h200->hbmBandwidth, 4.8e12);

  const DeviceSpec *a100 = lookupDevice("a100_80g");
  ASSERT_TRUE(a100);
  EXPECT_DOUBLE_EQ(a100->bf16Tflops, 312.0);
  EXPECT_DOUBLE_EQ(a100->fp32Tflops, 19.5);
  EXPECT_DOUBLE_EQ(a100->hbmBandwidth, 2039e9);
  EXPECT_DOUBLE_EQ(a100->nvlinkBandwidth, 300e9);

  const DeviceSpec *leonardo = lookupDevice("a100_64g");
  ASSERT_TRUE(leonardo);
  EXPECT_EQ(leonardo->memoryBytes, 64 * GiB);

  const DeviceSpec *rtx4090 = lookupDevice("rtx4090");
  ASSERT_TRUE(rtx4090);
  EXPECT_EQ(rtx4090->memoryBytes, 24 * GiB);
  EXPECT_DOUBLE_EQ(rtx4090->bf16Tflops, 165.2);
  EXPECT_DOUBLE_EQ(rtx4090->nvlinkBandwidth, 0);
  EXPECT_DOUBLE_EQ(rtx4090->pcieBandwidth, 32e9);

  const DeviceSpec *ada = lookupDevice("a6000_ada");
  ASSERT_TRUE(ada);
  EXPECT_EQ(ada->memoryBytes, 48 * GiB);
  EXPECT_DOUBLE_EQ(ada->hbmBandwidth, 960e9);

  // GPUs without NVLink talk to peers over PCIe.
  for (const char *name : {"h100_pcie", "rtx4090", "a6000_ada", "l40s"})
    EXPECT_EQ(lookupDevice(name)->nvlinkBandwidth, 0) << name;
  // GPUs take NCCL's ring step; cpu ranks are one core each of a shared host
  // and talk over Gloo (loopback TCP): slower and with more latency.
  for (const DeviceSpec &device : deviceTable()) {
    if (device.name != "cpu") {
      EXPECT_EQ(device.linkLatency, kDefaultLinkLatency) << device.name;
    }
  }
  const DeviceSpec *cpu = lookupDevice("cpu");
  ASSERT_TRUE(cpu);
  EXPECT_DOUBLE_EQ(cpu->fp32Tflops, 0.1);
  EXPECT_DOUBLE_EQ(cpu->hbmBandwidth, 10e9);
  EXPECT_DOUBLE_EQ(cpu->nvlinkBandwidth, 2e9);
  EXPECT_DOUBLE_EQ(cpu->linkLatency, 100e-6);
  EXPECT_EQ(typicalHost("cpu").cores, 4);
}

} // namespace
