//===- SafeTensorsTest.cpp - safetensors read/write and loadUnit ----------===//

#include "SafeTensors.h"
#include "Model.h"
#include "ModelTestSupport.h"
#include "TempDir.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <functional>

#include <fstream>
#include <unistd.h>

using namespace plan::rt;
using namespace plan::rt::test;
using plan::rt::test::TempDir;

namespace {

class SafeTensorsTest : public ::testing::Test {
protected:
  std::string path(const std::string &name) const { return dir_.file(name); }

  static std::string readAll(const std::string &p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }
  static void writeAll(const std::string &p, const std::string &bytes) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  /// A file with `header` as its JSON header and `data` bytes after it.
  static std::string rawFile(const std::string &header, size_t dataBytes) {
    std::string out(8, '\0');
    uint64_t n = header.size();
    for (int i = 0; i < 8; ++i)
      out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
    return out + header + std::string(dataBytes, '\x01');
  }
  static std::string message(const std::function<void()> &f) {
    try {
      f();
    } catch (const WeightsError &e) {
      return e.what();
    }
    return "(no error)";
  }

  TempDir dir_;
};

TEST_F(SafeTensorsTest, RoundTripKeepsValuesAndDtypes) {
  at::Tensor a = at::randn({3, 5});
  at::Tensor b = at::randn({7}).to(at::kBFloat16);
  at::Tensor c = at::randn({2, 2, 2}).to(at::kHalf);
  writeSafeTensors(path("w.safetensors"),
                   {{"a", a}, {"b.weight", b}, {"c", c}});
  std::string bytes = readAll(path("w.safetensors"));
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | static_cast<uint8_t>(bytes[i]);
  EXPECT_EQ((8 + n) % 8, 0u); // data 8-byte aligned
  EXPECT_EQ(bytes.size(), 8 + n + 15 * 4 + 7 * 2 + 8 * 2);

  ModelConfig m;
  auto source = openTensorSource(path("w.safetensors"), m);
  EXPECT_TRUE(source->contains("b.weight"));
  EXPECT_FALSE(source->contains("d"));
  EXPECT_TRUE(at::equal(source->get("a", {3, 5}), a));
  at::Tensor gotB = source->get("b.weight", {7});
  EXPECT_EQ(gotB.scalar_type(), at::kFloat);
  EXPECT_TRUE(at::equal(gotB, b.to(at::kFloat)));
  EXPECT_TRUE(at::equal(source->get("c", {2, 2, 2}), c.to(at::kFloat)));
}

TEST_F(SafeTensorsTest, ErrorsNameTheProblem) {
  ModelConfig m;
  writeSafeTensors(path("w.safetensors"), {{"a", at::randn({4, 4})}});
  auto source = openTensorSource(path("w.safetensors"), m);
  EXPECT_NE(message([&] {
              source->get("a", {4, 5});
            }).find("shape [4, 4]"),
            std::string::npos);
  EXPECT_NE(message([&] { source->get("missing", {4}); }).find("'missing'"),
            std::string::npos);

  std::string good = readAll(path("w.safetensors"));
  writeAll(path("truncated.safetensors"), good.substr(0, good.size() - 10));
  EXPECT_NE(message([&] {
              openTensorSource(path("truncated.safetensors"), m);
            }).find("outside"),
            std::string::npos);
  writeAll(path("short.safetensors"), "abc");
  EXPECT_NE(message([&] {
              openTensorSource(path("short.safetensors"), m);
            }).find("too short"),
            std::string::npos);
  writeAll(path("huge.safetensors"), rawFile("{}", 0).replace(0, 8, 8, '\x7f'));
  EXPECT_NE(message([&] {
              openTensorSource(path("huge.safetensors"), m);
            }).find("exceeds"),
            std::string::npos);
  writeAll(path("json.safetensors"), rawFile("{not json", 0));
  EXPECT_NE(message([&] {
              openTensorSource(path("json.safetensors"), m);
            }).find("not valid JSON"),
            std::string::npos);
  writeAll(path("fields.safetensors"), rawFile(R"({"a":{"dtype":"F32"}})", 0));
  EXPECT_NE(message([&] {
              openTensorSource(path("fields.safetensors"), m);
            }).find("data_offsets"),
            std::string::npos);
  writeAll(
      path("span.safetensors"),
      rawFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 4));
  EXPECT_NE(message([&] {
              openTensorSource(path("span.safetensors"), m);
            }).find("needs 8"),
            std::string::npos);
  // An integer tensor opens (checkpoints carry such buffers) but cannot be
  // loaded as a weight.
  writeAll(path("int.safetensors"),
           rawFile(R"({"a":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})",
                   16));
  auto ints = openTensorSource(path("int.safetensors"), m);
  EXPECT_NE(message([&] { ints->get("a", {2}); }).find("dtype I64"),
            std::string::npos);
  EXPECT_NE(message([&] {
              openTensorSource(path("nope.safetensors"), m);
            }).find("does not exist"),
            std::string::npos);
  for (const std::string &e :
       {message([&] {
          source->get("a", {4, 5});
        }),
        message([&] { openTensorSource(path("json.safetensors"), m); })})
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

TEST_F(SafeTensorsTest, HfDirectoryWithShardsAndConfig) {
  ModelConfig m = tinyLlamaConfig();
  Schedule s = llamaSchedule(m);
  auto model = Model::create(s, at::kCPU);
  // Write every unit's initial weights, split over two shards, with an index.
  std::vector<std::pair<std::string, at::Tensor>> first, second;
  std::vector<at::Tensor> flat;
  std::string weightMap;
  for (size_t u = 0; u < s.units.size(); ++u) {
    flat.push_back(at::empty({s.units[u].numel}));
    model->initUnit(static_cast<int64_t>(u), 99, flat.back());
    for (const Param &p : s.units[u].params) {
      int64_t n = 1;
      for (int64_t d : p.shape)
        n *= d;
      auto &shard = u < 2 ? first : second;
      shard.push_back(
          {p.name,
           flat[u].narrow(0, p.offset, n).view(p.shape).to(at::kBFloat16)});
      weightMap += std::string(weightMap.empty() ? "" : ",") + "\"" + p.name +
                   "\":\"" + (u < 2 ? "m-1.safetensors" : "m-2.safetensors") +
                   "\"";
    }
  }
  writeSafeTensors(path("m-1.safetensors"), first);
  writeSafeTensors(path("m-2.safetensors"), second);
  writeAll(path("model.safetensors.index.json"),
           "{\"metadata\":{},\"weight_map\":{" + weightMap + "}}");
  writeAll(path("config.json"),
           R"({"model_type":"llama","hidden_size":32,"num_hidden_layers":2,
               "num_attention_heads":4,"num_key_value_heads":2,
               "vocab_size":64,"intermediate_size":48,"rms_norm_eps":1e-5})");
  auto source = openTensorSource(dir_.path(), m);
  for (size_t u = 0; u < s.units.size(); ++u) {
    at::Tensor loaded = at::empty({s.units[u].numel});
    model->loadUnit(static_cast<int64_t>(u), *source, 0, loaded);
    EXPECT_TRUE(at::equal(loaded, flat[u].to(at::kBFloat16).to(at::kFloat)))
        << s.units[u].name;
  }

  ModelConfig other = m;
  other.kvHeads = 4;
  std::string e = message([&] { openTensorSource(dir_.path(), other); });
  EXPECT_NE(e.find("num_key_value_heads is 2"), std::string::npos) << e;
  EXPECT_NE(e.find("kv_heads = 4"), std::string::npos) << e;

  // loadUnit names a tensor that has the wrong shape.
  Schedule wider = llamaSchedule([&] {
    ModelConfig w = m;
    w.vocab = 65;
    return w;
  }());
  auto widerModel = Model::create(wider, at::kCPU);
  at::Tensor out = at::empty({wider.units[0].numel});
  e = message([&] { widerModel->loadUnit(0, *source, 0, out); });
  EXPECT_NE(e.find("model.embed_tokens.weight"), std::string::npos) << e;
}

TEST_F(SafeTensorsTest, Gpt2HubNamesWithoutTransformerPrefix) {
  at::Tensor wte = at::randn({64, 32});
  writeSafeTensors(path("model.safetensors"),
                   {{"wte.weight", wte}, {"wpe.weight", at::randn({16, 32})}});
  writeAll(
      path("config.json"),
      R"({"model_type":"gpt2","n_embd":32,"n_layer":2,"n_head":4,"vocab_size":64,
          "n_positions":16})");
  ModelConfig m = tinyGpt2Config();
  auto source = openTensorSource(dir_.path(), m);
  EXPECT_TRUE(at::equal(source->get("transformer.wte.weight", {64, 32}), wte));
  m.layers = 3;
  std::string e = message([&] { openTensorSource(dir_.path(), m); });
  EXPECT_NE(e.find("n_layer is 2"), std::string::npos) << e;
}

// Every config.json key that changes the math must agree with the plan,
// with HF's defaults for the keys it leaves out: a plan with rope_theta 1e4
// and rms eps 1e-5 used to train silently on a directory saying 5e5 / 1e-6.
TEST_F(SafeTensorsTest, ConfigKeysThatChangeTheMathMustAgree) {
  ModelConfig m = tinyLlamaConfig();
  writeSafeTensors(path("model.safetensors"),
                   {{"model.embed_tokens.weight", at::randn({64, 32})}});
  const std::string sizes =
      R"("model_type":"llama","hidden_size":32,"num_hidden_layers":2,)"
      R"("num_attention_heads":4,"num_key_value_heads":2,"vocab_size":64,)"
      R"("intermediate_size":48)";
  auto openWith = [&](const std::string &extra, const ModelConfig &model) {
    writeAll(path("config.json"), "{" + sizes + extra + "}");
    return message([&] { openTensorSource(dir_.path(), model); });
  };
  const std::string ok = ",\"rms_norm_eps\":1e-5";
  EXPECT_EQ(openWith(ok, m), "(no error)");
  // Left out, rms_norm_eps is LlamaConfig's 1e-6.
  EXPECT_NE(openWith("", m).find("rms_norm_eps is 1e-06 but the schedule's "
                                 "model has norm_eps = 1e-05"),
            std::string::npos);
  EXPECT_NE(openWith(ok + ",\"rope_theta\":500000.0", m)
                .find("rope_theta is 500000.0 but the schedule's model has "
                      "rope_theta = 10000.0"),
            std::string::npos);
  EXPECT_NE(openWith(ok + ",\"tie_word_embeddings\":true", m)
                .find("tie_word_embeddings is true but the schedule's model "
                      "has tie_embeddings = false"),
            std::string::npos);
  EXPECT_NE(openWith(ok + ",\"hidden_act\":\"gelu\"", m)
                .find("hidden_act is 'gelu' but the schedule's model has "
                      "Llama's activation 'silu'"),
            std::string::npos);
  EXPECT_NE(openWith(ok + ",\"attention_bias\":true", m)
                .find("attention_bias is true"),
            std::string::npos);
  EXPECT_NE(
      openWith(ok + R"(,"rope_scaling":{"rope_type":"llama3","factor":8.0,)"
                    R"("low_freq_factor":1.0,"high_freq_factor":4.0,)"
                    R"("original_max_position_embeddings":8192})",
               m)
          .find("rope_scaling is {"),
      std::string::npos);
  ModelConfig scaled = m;
  scaled.ropeScaling = RopeScaling{8.0, 1.0, 4.0, 8192};
  EXPECT_EQ(
      openWith(ok + R"(,"rope_scaling":{"rope_type":"llama3","factor":8.0,)"
                    R"("low_freq_factor":1.0,"high_freq_factor":4.0,)"
                    R"("original_max_position_embeddings":8192})",
               scaled),
      "(no error)");
  EXPECT_NE(
      openWith(ok + R"(,"rope_scaling":{"rope_type":"yarn","factor":8.0})",
               scaled)
          .find("rope_scaling.rope_type is 'yarn'"),
      std::string::npos);
  EXPECT_NE(openWith(ok + ",\"rope_theta\":\"big\"", m)
                .find("rope_theta is not a number"),
            std::string::npos);
  // A Mistral is a Llama here (hf() caps its max_seq_len at the window);
  // another family is not.
  EXPECT_EQ(openWith(ok + ",\"model_type\":\"mistral\"", m), "(no error)");
  EXPECT_NE(openWith(ok + ",\"model_type\":\"mixtral\"", m).find("model_type"),
            std::string::npos);
}

// A plan that ties lm_head to the embeddings reads only the embeddings, so
// an untied checkpoint's own lm_head.weight is an error, not ignored.
TEST_F(SafeTensorsTest, TiedPlanRefusesAnUntiedHead) {
  ModelConfig m = tinyLlamaConfig();
  m.tieEmbeddings = true;
  at::Tensor embed = at::randn({64, 32});
  writeSafeTensors(path("model.safetensors"),
                   {{"model.embed_tokens.weight", embed},
                    {"lm_head.weight", embed.clone()}});
  EXPECT_EQ(message([&] { openTensorSource(path("model.safetensors"), m); }),
            "(no error)"); // the same values: a tied checkpoint saved both
  writeSafeTensors(
      path("model.safetensors"),
      {{"model.embed_tokens.weight", embed}, {"lm_head.weight", embed + 1}});
  std::string e =
      message([&] { openTensorSource(path("model.safetensors"), m); });
  EXPECT_NE(e.find("has an lm_head.weight of its own, but the schedule's "
                   "model ties it"),
            std::string::npos)
      << e;
}

} // namespace
