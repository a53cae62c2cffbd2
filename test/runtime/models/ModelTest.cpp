//===- ModelTest.cpp - Units against a monolithic LibTorch model ----------===//
//
// Runs every unit of tiny Llama, GPT-2 and BERT (masked-LM head, and the
// classification head with 3 labels and with 1, a regression) schedules
// through Model (forward, loss, backward, unit by unit over flat buffers) and
// compares the loss and every parameter gradient with one autograd graph over
// the whole model, written here independently (explicit softmax attention,
// explicit norms and GELU).
//
//===----------------------------------------------------------------------===//

#include "Model.h"
#include "ModelTestSupport.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numbers>

using namespace plan::rt;
using namespace plan::rt::test;

namespace {

//===----------------------------------------------------------------------===//
// The monolithic reference (fp32)
//===----------------------------------------------------------------------===//

using Leaves = std::map<std::string, at::Tensor>;

at::Tensor refRms(const at::Tensor &x, const at::Tensor &w, double eps) {
  return x * at::rsqrt(x.pow(2).mean({-1}, true) + eps) * w;
}

at::Tensor refLayerNorm(const at::Tensor &x, const at::Tensor &w,
                        const at::Tensor &b, double eps) {
  at::Tensor mean = x.mean({-1}, true);
  at::Tensor var = (x - mean).pow(2).mean({-1}, true);
  return (x - mean) / at::sqrt(var + eps) * w + b;
}

at::Tensor refAttention(const at::Tensor &q, const at::Tensor &k,
                        const at::Tensor &v, bool causal = true) {
  int64_t s = q.size(2), d = q.size(3);
  at::Tensor scores = q.matmul(k.transpose(-1, -2)) / std::sqrt(double(d));
  if (causal) {
    at::Tensor mask = at::ones({s, s}, at::kBool).triu(1);
    scores = scores.masked_fill(mask, -std::numeric_limits<double>::infinity());
  }
  return at::softmax(scores, -1).matmul(v);
}

at::Tensor refGeluErf(const at::Tensor &x) {
  return 0.5 * x * (1 + at::erf(x / std::sqrt(2.0)));
}

/// BertForMaskedLM's loss (mean cross-entropy over the masked positions) or
/// BertForSequenceClassification's (cross-entropy, or the squared error of
/// a regression), post-LN encoder layers, token type 0 everywhere.
at::Tensor referenceBertLoss(const ModelConfig &m, Leaves &w,
                             const MicroBatch &batch) {
  const int64_t b = batch.tokens.size(0), s = batch.tokens.size(1);
  const int64_t h = m.hidden, heads = m.heads, d = h / heads;
  auto lin = [&](const at::Tensor &x, const std::string &name) {
    return x.matmul(w.at(name + ".weight").t()) + w.at(name + ".bias");
  };
  auto norm = [&](const at::Tensor &x, const std::string &name) {
    return refLayerNorm(x, w.at(name + ".weight"), w.at(name + ".bias"),
                        m.normEps);
  };
  auto heads4 = [&](const at::Tensor &t) {
    return t.view({b, s, heads, d}).permute({0, 2, 1, 3});
  };
  // The padding row (0) gets no gradient from the lookup.
  const at::Tensor &word = w.at("bert.embeddings.word_embeddings.weight");
  at::Tensor lookup =
      at::cat({word.narrow(0, 0, 1).detach(), word.narrow(0, 1, m.vocab - 1)});
  at::Tensor x =
      lookup.index_select(0, batch.tokens.reshape({-1})).view({b, s, h}) +
      w.at("bert.embeddings.token_type_embeddings.weight")[0] +
      w.at("bert.embeddings.position_embeddings.weight").narrow(0, 0, s);
  x = norm(x, "bert.embeddings.LayerNorm");
  for (int64_t l = 0; l < m.layers; ++l) {
    std::string p = "bert.encoder.layer." + std::to_string(l) + ".";
    at::Tensor a =
        refAttention(heads4(lin(x, p + "attention.self.query")),
                     heads4(lin(x, p + "attention.self.key")),
                     heads4(lin(x, p + "attention.self.value")), false)
            .permute({0, 2, 1, 3})
            .reshape({b, s, h});
    x = norm(x + lin(a, p + "attention.output.dense"),
             p + "attention.output.LayerNorm");
    at::Tensor f = refGeluErf(lin(x, p + "intermediate.dense"));
    x = norm(x + lin(f, p + "output.dense"), p + "output.LayerNorm");
  }
  if (m.bertHead == BertHead::SequenceClassification) {
    at::Tensor pooled = at::tanh(lin(x.select(1, 0), "bert.pooler.dense"));
    at::Tensor logits = lin(pooled, "classifier");
    if (m.numLabels == 1)
      return (logits.squeeze(-1) - batch.targets).pow(2).mean();
    at::Tensor logp = at::log_softmax(logits, -1);
    return -logp.gather(1, batch.targets.reshape({-1, 1})).mean();
  }
  at::Tensor t = refGeluErf(lin(x, "cls.predictions.transform.dense"));
  t = norm(t, "cls.predictions.transform.LayerNorm");
  at::Tensor logits = t.matmul(word.t()) + w.at("cls.predictions.bias");
  at::Tensor logp = at::log_softmax(logits.reshape({-1, m.vocab}), -1);
  at::Tensor targets = batch.targets.reshape({-1});
  at::Tensor counted = targets != kIgnoreTarget;
  at::Tensor picked =
      logp.gather(1, at::where(counted, targets, 0).reshape({-1, 1}))
          .reshape({-1});
  return -(picked * counted).sum() / counted.sum();
}

at::Tensor refRotate(const at::Tensor &t, const at::Tensor &cos,
                     const at::Tensor &sin) {
  int64_t half = t.size(-1) / 2;
  at::Tensor rotated =
      at::cat({-t.narrow(-1, half, half), t.narrow(-1, 0, half)}, -1);
  return t * cos + rotated * sin;
}

// Llama 3.1's frequency rescaling, element by element in double precision.
at::Tensor refInvFreq(const ModelConfig &m) {
  int64_t d = m.hidden / m.heads;
  at::Tensor inv = at::reciprocal(
      at::pow(m.ropeTheta, at::arange(0, d, 2, at::kLong).to(at::kFloat) / d));
  if (!m.ropeScaling)
    return inv;
  const RopeScaling &r = *m.ropeScaling;
  double lowWavelen = r.originalMaxSeqLen / r.lowFreqFactor;
  double highWavelen = r.originalMaxSeqLen / r.highFreqFactor;
  at::Tensor out = at::empty_like(inv);
  for (int64_t i = 0; i < inv.numel(); ++i) {
    double f = inv[i].item<double>();
    double wavelen = 2 * std::numbers::pi / f;
    double g;
    if (wavelen < highWavelen)
      g = f;
    else if (wavelen > lowWavelen)
      g = f / r.factor;
    else {
      double smooth = (r.originalMaxSeqLen / wavelen - r.lowFreqFactor) /
                      (r.highFreqFactor - r.lowFreqFactor);
      g = (1 - smooth) * f / r.factor + smooth * f;
    }
    out[i] = g;
  }
  return out;
}

at::Tensor referenceLoss(const ModelConfig &m, Leaves &w,
                         const MicroBatch &batch) {
  if (m.family == ModelFamily::Bert)
    return referenceBertLoss(m, w, batch);
  const int64_t b = batch.tokens.size(0), s = batch.tokens.size(1);
  const int64_t h = m.hidden, heads = m.heads, d = h / heads;
  auto proj = [&](const at::Tensor &x, const std::string &name) {
    return x.matmul(w.at(name).t());
  };
  auto heads4 = [&](const at::Tensor &t, int64_t n) {
    return t.view({b, s, n, d}).permute({0, 2, 1, 3});
  };
  at::Tensor x, logits;
  if (m.family == ModelFamily::Llama) {
    x = w.at("model.embed_tokens.weight")
            .index_select(0, batch.tokens.reshape({-1}))
            .view({b, s, h});
    at::Tensor angles = at::outer(at::arange(s, at::kFloat), refInvFreq(m));
    angles = at::cat({angles, angles}, -1);
    at::Tensor cos = angles.cos(), sin = angles.sin();
    for (int64_t l = 0; l < m.layers; ++l) {
      std::string p = "model.layers." + std::to_string(l) + ".";
      at::Tensor n = refRms(x, w.at(p + "input_layernorm.weight"), m.normEps);
      at::Tensor q = refRotate(
          heads4(proj(n, p + "self_attn.q_proj.weight"), heads), cos, sin);
      at::Tensor k = refRotate(
          heads4(proj(n, p + "self_attn.k_proj.weight"), m.kvHeads), cos, sin);
      at::Tensor v = heads4(proj(n, p + "self_attn.v_proj.weight"), m.kvHeads);
      k = k.repeat_interleave(heads / m.kvHeads, 1);
      v = v.repeat_interleave(heads / m.kvHeads, 1);
      at::Tensor a =
          refAttention(q, k, v).permute({0, 2, 1, 3}).reshape({b, s, h});
      x = x + proj(a, p + "self_attn.o_proj.weight");
      n = refRms(x, w.at(p + "post_attention_layernorm.weight"), m.normEps);
      at::Tensor g = proj(n, p + "mlp.gate_proj.weight");
      x = x + proj(g * at::sigmoid(g) * proj(n, p + "mlp.up_proj.weight"),
                   p + "mlp.down_proj.weight");
    }
    x = refRms(x, w.at("model.norm.weight"), m.normEps);
    logits = proj(x, m.tieEmbeddings ? "model.embed_tokens.weight"
                                     : "lm_head.weight");
  } else {
    const at::Tensor &wte = w.at("transformer.wte.weight");
    x = wte.index_select(0, batch.tokens.reshape({-1})).view({b, s, h}) +
        w.at("transformer.wpe.weight").narrow(0, 0, s).unsqueeze(0);
    for (int64_t l = 0; l < m.layers; ++l) {
      std::string p = "transformer.h." + std::to_string(l) + ".";
      auto conv = [&](const at::Tensor &t, const std::string &name) {
        return t.matmul(w.at(name + ".weight")) + w.at(name + ".bias");
      };
      at::Tensor n = refLayerNorm(x, w.at(p + "ln_1.weight"),
                                  w.at(p + "ln_1.bias"), m.normEps);
      at::Tensor qkv = conv(n, p + "attn.c_attn");
      at::Tensor a = refAttention(heads4(qkv.narrow(2, 0, h), heads),
                                  heads4(qkv.narrow(2, h, h), heads),
                                  heads4(qkv.narrow(2, 2 * h, h), heads))
                         .permute({0, 2, 1, 3})
                         .reshape({b, s, h});
      x = x + conv(a, p + "attn.c_proj");
      n = refLayerNorm(x, w.at(p + "ln_2.weight"), w.at(p + "ln_2.bias"),
                       m.normEps);
      at::Tensor f = conv(n, p + "mlp.c_fc");
      f = 0.5 * f *
          (1 + at::tanh(std::sqrt(2 / std::numbers::pi) *
                        (f + 0.044715 * f.pow(3))));
      x = x + conv(f, p + "mlp.c_proj");
    }
    x = refLayerNorm(x, w.at("transformer.ln_f.weight"),
                     w.at("transformer.ln_f.bias"), m.normEps);
    logits = x.matmul(wte.t());
  }
  at::Tensor logp = at::log_softmax(logits.reshape({-1, m.vocab}), -1);
  return -logp.gather(1, batch.targets.reshape({-1, 1})).mean();
}

struct Reference {
  double loss = 0;
  Leaves grads;
};

Reference runReference(const Schedule &s, const std::vector<at::Tensor> &flat,
                       const std::vector<MicroBatch> &batches) {
  Leaves w;
  for (size_t u = 0; u < s.units.size(); ++u)
    for (const Param &p : s.units[u].params)
      if (p.tiedTo.empty()) {
        int64_t n = 1;
        for (int64_t d : p.shape)
          n *= d;
        w[p.name] = flat[u]
                        .narrow(0, p.offset, n)
                        .view(p.shape)
                        .clone()
                        .requires_grad_(true);
      }
  at::Tensor total = at::zeros({});
  for (const MicroBatch &batch : batches)
    total = total + referenceLoss(s.model, w, batch);
  total = total / static_cast<double>(batches.size());
  total.backward();
  Reference r;
  r.loss = total.item<double>();
  for (auto &[name, t] : w)
    r.grads[name] = t.grad();
  return r;
}

//===----------------------------------------------------------------------===//
// Running the units as the executor does
//===----------------------------------------------------------------------===//

struct StepOptions {
  at::ScalarType dtype = at::kFloat;
  bool checkpoint = false;  // blocks: forward without graph, recompute
  bool swapBuffers = false; // backward gets other buffers; forward's trashed
  bool reverseMicroBatches = false;
  // > 0: forwards with a graph and recomputes get a NaN-filled saves buffer
  // of this many bytes (SavedActivations.h), kept in `savesBuffers`.
  int64_t savesBytes = 0;
  std::vector<at::Tensor> *savesBuffers = nullptr;
};

int64_t tiedUnit(const Schedule &s, int64_t u) {
  for (const Param &p : s.units[u].params)
    if (!p.tiedTo.empty())
      for (size_t v = 0; v < s.units.size(); ++v)
        for (const Param &q : s.units[v].params)
          if (q.name == p.tiedTo && q.tiedTo.empty())
            return static_cast<int64_t>(v);
  return -1;
}

bool isBlock(const Unit &u) { return isBlockKind(u.kind); }

/// One step: every micro-batch's forward, then the backwards. Returns the
/// mean loss and leaves the gradients (params' dtype) in `grads`.
double runUnits(Model &model, const Schedule &s,
                const std::vector<at::Tensor> &flat,
                const std::vector<MicroBatch> &batches,
                std::vector<at::Tensor> &grads, const StepOptions &o) {
  const int64_t n = static_cast<int64_t>(s.units.size());
  const int64_t mbs = static_cast<int64_t>(batches.size());
  std::vector<at::Tensor> fwd, bwd;
  grads.clear();
  for (const at::Tensor &f : flat) {
    fwd.push_back(f.to(o.dtype).clone());
    grads.push_back(at::zeros({f.numel()}, o.dtype));
  }
  auto tiedOf = [&](std::vector<at::Tensor> &bufs, int64_t u) {
    int64_t t = tiedUnit(s, u);
    return t < 0 ? at::Tensor() : bufs[t];
  };
  std::map<std::pair<int64_t, int64_t>, at::Tensor> inputs;
  auto savesBuffer = [&]() {
    if (o.savesBytes <= 0)
      return at::Tensor();
    int64_t itemsize = c10::elementSize(o.dtype);
    at::Tensor buffer =
        at::full({o.savesBytes / itemsize}, std::nan(""), o.dtype);
    if (o.savesBuffers)
      o.savesBuffers->push_back(buffer);
    return buffer;
  };
  double loss = 0;
  for (int64_t mb = 0; mb < mbs; ++mb) {
    model.setMicroBatch(mb, batches[mb]);
    for (int64_t u = 0; u < n; ++u) {
      bool ckpt = o.checkpoint && isBlock(s.units[u]);
      at::Tensor saves;
      if (ckpt) {
        saves = at::full({batches[mb].tokens.numel() * s.model.hidden},
                         std::nan(""), o.dtype);
        inputs[{u, mb}] = saves;
      } else {
        saves = savesBuffer();
      }
      model.forward(u, mb, {fwd[u], tiedOf(fwd, u)}, saves, !ckpt);
    }
    loss += model.loss(n - 1, mb, 1.0 / mbs, 1.0).item<double>() / mbs;
  }
  if (o.swapBuffers) {
    for (at::Tensor &f : fwd) {
      bwd.push_back(f.clone());
      f.fill_(std::nan(""));
    }
  } else {
    bwd = fwd;
  }
  for (int64_t i = 0; i < mbs; ++i) {
    int64_t mb = o.reverseMicroBatches ? mbs - 1 - i : i;
    for (int64_t u = n - 1; u >= 0; --u) {
      if (o.checkpoint && isBlock(s.units[u]))
        model.recompute(u, mb, {bwd[u], tiedOf(bwd, u)}, inputs.at({u, mb}),
                        savesBuffer());
      model.backward(u, mb, {bwd[u], tiedOf(bwd, u)}, {}, grads[u],
                     tiedOf(grads, u));
    }
  }
  model.reset();
  return loss;
}

/// Random micro-batches with the targets of the model's objective: the
/// next tokens; about a third of the positions masked (token 1) for BERT's
/// masked LM (the loss over each micro-batch's own masked positions), whose
/// first micro-batch also has a sequence with none; random
/// labels (or regression values) for its classifier.
std::vector<MicroBatch> randomBatches(const ModelConfig &m, int64_t count,
                                      int64_t b, int64_t s, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::vector<MicroBatch> out;
  for (int64_t i = 0; i < count; ++i) {
    at::Tensor t = at::randint(m.vocab, {b, s + 1}, gen, at::kLong);
    MicroBatch batch{t.narrow(1, 0, s).contiguous(),
                     t.narrow(1, 1, s).contiguous()};
    if (m.family == ModelFamily::Bert &&
        m.bertHead == BertHead::SequenceClassification) {
      batch.targets = m.numLabels == 1
                          ? at::randn({b}, gen)
                          : at::randint(m.numLabels, {b}, gen, at::kLong);
    } else if (m.family == ModelFamily::Bert) {
      at::Tensor chosen = at::rand({b, s}, gen) < 0.3;
      if (i == 0)
        chosen[0].fill_(false);
      batch.targets = at::where(chosen, batch.tokens, kIgnoreTarget);
      batch.tokens =
          at::where(chosen, at::ones_like(batch.tokens), batch.tokens);
      batch.lossDivisor = std::max<double>(chosen.sum().item<int64_t>(), 1);
    }
    out.push_back(batch);
  }
  return out;
}

std::vector<at::Tensor> initWeights(Model &model, const Schedule &s,
                                    uint64_t seed) {
  std::vector<at::Tensor> flat;
  for (size_t u = 0; u < s.units.size(); ++u) {
    flat.push_back(at::empty({s.units[u].numel}, at::kFloat));
    model.initUnit(static_cast<int64_t>(u), seed, flat.back());
  }
  // Norm scales of 1 and zero biases would leave their gradients' paths
  // untested against mistakes that a scale of 1 hides: perturb them.
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed + 1);
  for (size_t u = 0; u < s.units.size(); ++u)
    for (const Param &p : s.units[u].params)
      if (p.tiedTo.empty() && p.shape.size() == 1)
        flat[u]
            .narrow(0, p.offset, p.shape[0])
            .add_(at::randn({p.shape[0]}, gen) * 0.1);
  return flat;
}

/// Every stored gradient of the units against the reference, rtol `rtol`
/// relative to the largest entry of each parameter's gradient, or to
/// `unitShare` of the largest of its unit's gradients when that is more.
/// BERT's key bias has a gradient of zero in exact arithmetic (it shifts all
/// of a query's scores alike, which softmax ignores), so both sides are
/// roundoff: it is held to the largest gradient of its unit.
void expectGradsMatch(const Schedule &s, const std::vector<at::Tensor> &grads,
                      const Reference &ref, double rtol, double unitShare = 0) {
  for (size_t u = 0; u < s.units.size(); ++u)
    for (const Param &p : s.units[u].params) {
      if (!p.tiedTo.empty())
        continue;
      int64_t n = 1;
      for (int64_t d : p.shape)
        n *= d;
      at::Tensor got =
          grads[u].narrow(0, p.offset, n).view(p.shape).to(at::kFloat);
      const at::Tensor &want = ref.grads.at(p.name);
      double scale = want.abs().max().item<double>();
      double share =
          p.name.ends_with("attention.self.key.bias") ? 1.0 : unitShare;
      if (share > 0)
        for (const Param &q : s.units[u].params)
          if (q.tiedTo.empty())
            scale = std::max(
                scale, share * ref.grads.at(q.name).abs().max().item<double>());
      double err = (got - want).abs().max().item<double>();
      EXPECT_LE(err, rtol * scale + 1e-12)
          << p.name << ": max error " << err << ", max |grad| " << scale;
    }
}

class ModelFamilies : public ::testing::TestWithParam<std::string> {
protected:
  Schedule schedule() const {
    if (GetParam() == "llama")
      return llamaSchedule(tinyLlamaConfig());
    if (GetParam() == "gpt2")
      return gpt2Schedule(tinyGpt2Config());
    if (GetParam() == "bert_mlm")
      return bertSchedule(tinyBertConfig(BertHead::MaskedLM));
    if (GetParam() == "bert_cls")
      return bertSchedule(tinyBertConfig(BertHead::SequenceClassification));
    return bertSchedule(tinyBertConfig(BertHead::SequenceClassification, 1));
  }
};

TEST_P(ModelFamilies, MatchesMonolithicModel) {
  Schedule s = schedule();
  auto model = Model::create(s, at::kCPU);
  auto flat = initWeights(*model, s, 7);
  auto batches = randomBatches(s.model, 1, 2, 8, 11);
  std::vector<at::Tensor> grads;
  double loss = runUnits(*model, s, flat, batches, grads, {});
  Reference ref = runReference(s, flat, batches);
  EXPECT_NEAR(loss, ref.loss, 1e-5 * ref.loss);
  if (s.model.family != ModelFamily::Bert ||
      s.model.bertHead == BertHead::MaskedLM)
    EXPECT_GT(loss, 0.5 * std::log(double(s.model.vocab)));
  else
    EXPECT_GT(loss, 0.1);
  expectGradsMatch(s, grads, ref, 1e-5);
}

TEST_P(ModelFamilies, BackwardReadsTheBuffersGivenToBackward) {
  Schedule s = schedule();
  auto model = Model::create(s, at::kCPU);
  auto flat = initWeights(*model, s, 3);
  auto batches = randomBatches(s.model, 1, 2, 8, 5);
  std::vector<at::Tensor> plain, swapped;
  double a = runUnits(*model, s, flat, batches, plain, {});
  StepOptions o;
  o.swapBuffers = true;
  double b = runUnits(*model, s, flat, batches, swapped, o);
  EXPECT_EQ(a, b);
  for (size_t u = 0; u < plain.size(); ++u) {
    EXPECT_TRUE(swapped[u].isfinite().all().item<bool>()) << s.units[u].name;
    EXPECT_TRUE(at::equal(plain[u], swapped[u])) << s.units[u].name;
  }
}

TEST_P(ModelFamilies, CheckpointingGivesTheSameGradients) {
  Schedule s = schedule();
  auto model = Model::create(s, at::kCPU);
  auto flat = initWeights(*model, s, 5);
  auto batches = randomBatches(s.model, 2, 2, 8, 6);
  std::vector<at::Tensor> plain, ckpt;
  double a = runUnits(*model, s, flat, batches, plain, {});
  StepOptions o;
  o.checkpoint = true;
  o.swapBuffers = true;
  double b = runUnits(*model, s, flat, batches, ckpt, o);
  EXPECT_EQ(a, b);
  for (size_t u = 0; u < plain.size(); ++u)
    EXPECT_TRUE(at::allclose(plain[u], ckpt[u], 1e-6, 1e-9)) << s.units[u].name;
}

// What autograd saves is copied into the saves buffers (SavedActivations.h)
// and read back from there at backward: bitwise the same gradients, in every
// precision, whether all of it fits, some of it or none.
TEST_P(ModelFamilies, SavedTensorsLiveInTheSavesBuffers) {
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    for (bool checkpoint : {false, true}) {
      for (int64_t bytes : {int64_t(1) << 22, int64_t(4096)}) {
        SCOPED_TRACE(std::string(c10::toString(dtype)) +
                     (checkpoint ? " checkpointed " : " ") +
                     std::to_string(bytes) + " bytes");
        Schedule s = schedule();
        auto model = Model::create(s, at::kCPU);
        auto flat = initWeights(*model, s, 12);
        auto batches = randomBatches(s.model, 2, 2, 8, 13);
        StepOptions o;
        o.dtype = dtype;
        o.checkpoint = checkpoint;
        o.swapBuffers = true;
        std::vector<at::Tensor> plain, saved, buffers;
        double a = runUnits(*model, s, flat, batches, plain, o);
        // No buffers: everything was kept outside them, and counted.
        EXPECT_GT(model->takeUnplannedSaveBytes(), 0);
        o.savesBytes = bytes;
        o.savesBuffers = &buffers;
        double b = runUnits(*model, s, flat, batches, saved, o);
        int64_t unplanned = model->takeUnplannedSaveBytes();
        if (bytes > 4096) {
          EXPECT_EQ(unplanned, 0);
        } else {
          EXPECT_GT(unplanned, 0);
        }
        EXPECT_EQ(a, b);
        for (size_t u = 0; u < plain.size(); ++u)
          EXPECT_TRUE(at::equal(plain[u], saved[u])) << s.units[u].name;
        // The big buffers received the copies.
        int64_t written = 0;
        for (const at::Tensor &buffer : buffers)
          written += buffer.isnan().logical_not().sum().item<int64_t>();
        if (bytes > 4096) {
          EXPECT_GT(written, 0);
        }
      }
    }
  }
}

// The heads' loss in chunks of tokens (lossChunkTokens): 16 tokens in
// chunks of 5 (the last one of 1) give the one-piece loss and gradients, up
// to the order of the sums in fp32. In bf16 each chunk's lm_head gradient is
// rounded to bf16 before autograd adds them up (as in any chunked loss over
// bf16 weights): still within the tolerance of a bf16 run against fp32.
TEST_P(ModelFamilies, ChunkedLossMatchesTheLossInOnePiece) {
  Schedule s = schedule();
  const int64_t chunkBytes = 5 * 4 * s.model.vocab;
  ASSERT_EQ(lossChunkTokens(16, s.model.vocab, chunkBytes), 5);
  auto whole = Model::create(s, at::kCPU);
  auto chunked = Model::create(s, at::kCPU, 0, chunkBytes);
  auto flat = initWeights(*whole, s, 21);
  auto batches = randomBatches(s.model, 2, 2, 8, 22);
  for (bool checkpoint : {false, true}) {
    SCOPED_TRACE(checkpoint ? "checkpointed" : "plain");
    StepOptions o;
    o.checkpoint = checkpoint;
    o.swapBuffers = true;
    std::vector<at::Tensor> a, b;
    double lossA = runUnits(*whole, s, flat, batches, a, o);
    double lossB = runUnits(*chunked, s, flat, batches, b, o);
    EXPECT_NEAR(lossA, lossB, 1e-6 * lossA);
    EXPECT_NE(lossA, 0.0);
    for (size_t u = 0; u < a.size(); ++u)
      EXPECT_TRUE(at::allclose(a[u], b[u], 1e-5, 1e-7)) << s.units[u].name;
    Reference ref = runReference(s, flat, batches);
    expectGradsMatch(s, b, ref, 1e-5);
  }
  // bf16, weights exactly representable (HalfPrecisionIsCloseToFp32).
  for (at::Tensor &f : flat)
    f = f.to(at::kBFloat16).to(at::kFloat);
  StepOptions o;
  o.dtype = at::kBFloat16;
  std::vector<at::Tensor> grads;
  double loss = runUnits(*chunked, s, flat, batches, grads, o);
  Reference ref = runReference(s, flat, batches);
  EXPECT_NEAR(loss, ref.loss, 1e-2 * ref.loss);
  expectGradsMatch(s, grads, ref, 0.08);
}

TEST(LossChunks, TokensPerChunk) {
  // 256 MiB of fp32 logits: 512 tokens of a 131072 vocab, all of a small one.
  EXPECT_EQ(lossChunkTokens(8192, 131072), 512);
  EXPECT_EQ(lossChunkTokens(8192, 512), 8192);
  EXPECT_EQ(lossChunkTokens(100, 512, 4 * 512 * 30), 30);
  // At least one token, at most all of them.
  EXPECT_EQ(lossChunkTokens(10, 1 << 30, 1), 1);
  EXPECT_EQ(lossChunkTokens(0, 512), 1);
}

TEST_P(ModelFamilies, MicroBatchesInFlightTogether) {
  Schedule s = schedule();
  auto model = Model::create(s, at::kCPU);
  auto flat = initWeights(*model, s, 9);
  auto batches = randomBatches(s.model, 2, 2, 8, 10);
  StepOptions o;
  o.swapBuffers = true;
  o.reverseMicroBatches = true;
  std::vector<at::Tensor> grads;
  double loss = runUnits(*model, s, flat, batches, grads, o);
  Reference ref = runReference(s, flat, batches);
  EXPECT_NEAR(loss, ref.loss, 1e-5 * ref.loss);
  expectGradsMatch(s, grads, ref, 1e-5);
}

TEST_P(ModelFamilies, HalfPrecisionIsCloseToFp32) {
  for (at::ScalarType dtype : {at::kBFloat16, at::kHalf}) {
    SCOPED_TRACE(c10::toString(dtype));
    Schedule s = schedule();
    auto model = Model::create(s, at::kCPU);
    auto flat = initWeights(*model, s, 4);
    // Weights exactly representable: the reference then differs from the
    // half-precision run by compute rounding alone.
    for (at::Tensor &f : flat)
      f = f.to(dtype).to(at::kFloat);
    auto batches = randomBatches(s.model, 1, 2, 8, 2);
    StepOptions o;
    o.dtype = dtype;
    o.swapBuffers = true;
    std::vector<at::Tensor> grads;
    double loss = runUnits(*model, s, flat, batches, grads, o);
    Reference ref = runReference(s, flat, batches);
    EXPECT_EQ(grads[0].scalar_type(), dtype);
    EXPECT_NEAR(loss, ref.loss, 1e-2 * ref.loss);
    // BERT's attention is near uniform at this initialisation (LayerNorm'd
    // inputs, no RoPE): its query and key gradients are 1e-3 to 1e-4 of the
    // block's others, below what half precision resolves next to them. They
    // are held to 1% of the block's largest gradient.
    expectGradsMatch(s, grads, ref, dtype == at::kHalf ? 0.02 : 0.08,
                     s.model.family == ModelFamily::Bert ? 0.01 : 0.0);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, ModelFamilies,
                         ::testing::Values("llama", "gpt2", "bert_mlm",
                                           "bert_cls", "bert_regression"));

TEST(LlamaModel, Llama3RopeScalingAndUntiedGqa) {
  ModelConfig m = tinyLlamaConfig();
  m.ropeTheta = 500000.0;
  m.ropeScaling = RopeScaling{8.0, 1.0, 4.0, 8};
  m.kvHeads = 1;
  Schedule s = llamaSchedule(m);
  auto model = Model::create(s, at::kCPU);
  auto flat = initWeights(*model, s, 1);
  auto batches = randomBatches(m, 1, 1, 16, 2);
  std::vector<at::Tensor> grads;
  double loss = runUnits(*model, s, flat, batches, grads, {});
  Reference ref = runReference(s, flat, batches);
  EXPECT_NEAR(loss, ref.loss, 1e-5 * ref.loss);
  expectGradsMatch(s, grads, ref, 1e-4);
}

TEST(LlamaModel, TiedEmbeddings) {
  ModelConfig m = tinyLlamaConfig();
  m.tieEmbeddings = true;
  Schedule s = llamaSchedule(m);
  auto model = Model::create(s, at::kCPU);
  auto flat = initWeights(*model, s, 1);
  auto batches = randomBatches(m, 1, 2, 8, 2);
  std::vector<at::Tensor> grads;
  double loss = runUnits(*model, s, flat, batches, grads, {});
  Reference ref = runReference(s, flat, batches);
  EXPECT_NEAR(loss, ref.loss, 1e-5 * ref.loss);
  expectGradsMatch(s, grads, ref, 1e-5);
}

//===----------------------------------------------------------------------===//
// Initialisation
//===----------------------------------------------------------------------===//

TEST(ModelInit, DeterministicPerSeedAndName) {
  Schedule s = llamaSchedule(tinyLlamaConfig());
  auto model = Model::create(s, at::kCPU);
  auto a = at::empty({s.units[1].numel}), b = at::empty({s.units[1].numel}),
       c = at::empty({s.units[1].numel});
  model->initUnit(1, 42, a);
  model->initUnit(1, 42, b);
  model->initUnit(1, 43, c);
  EXPECT_TRUE(at::equal(a, b));
  EXPECT_FALSE(at::equal(a, c));
  // Same shapes, different names: different values. q_proj [32, 32] and
  // o_proj [32, 32] are the first and fourth parameters.
  const auto &ps = s.units[1].params;
  at::Tensor q = a.narrow(0, ps[0].offset, 32 * 32);
  at::Tensor o = a.narrow(0, ps[3].offset, 32 * 32);
  EXPECT_FALSE(at::equal(q, o));
  // A parameter's values depend on its name alone, not on its unit: layer 1
  // drawn under layer 0's names would repeat layer 0.
  auto other = Model::create(s, at::kCPU);
  auto d = at::empty({s.units[2].numel});
  other->initUnit(2, 42, d);
  EXPECT_FALSE(at::equal(a, d));
  EXPECT_NEAR(q.std().item<double>(), 0.02, 0.003);
  EXPECT_NEAR(q.mean().item<double>(), 0.0, 0.003);
  EXPECT_TRUE(at::equal(a.narrow(0, ps[7].offset, 32), at::ones({32})));
}

TEST(ModelInit, MatchesThePythonRecipe) {
  // Values from test/reference/llama_reference.py's init_parameter.
  Schedule s = llamaSchedule(tinyLlamaConfig());
  auto model = Model::create(s, at::kCPU);
  auto layer = at::empty({s.units[1].numel});
  model->initUnit(1, 0, layer); // q_proj [32, 32] first
  EXPECT_FLOAT_EQ(layer[0].item<float>(), 0.0318047889f);
  EXPECT_FLOAT_EQ(layer[1].item<float>(), 0.00973145477f);
  EXPECT_FLOAT_EQ(layer[2].item<float>(), -0.000957557932f);
  EXPECT_FLOAT_EQ(layer[1023].item<float>(), 0.006059563718736172f);
  auto embed = at::empty({s.units[0].numel});
  model->initUnit(0, 123, embed);
  EXPECT_FLOAT_EQ(embed[0].item<float>(), 0.0188733414f);
  EXPECT_FLOAT_EQ(embed[2].item<float>(), -0.00464447681f);
}

TEST(ModelInit, BiasesZeroAndTiedParamsSkipped) {
  Schedule s = gpt2Schedule(tinyGpt2Config());
  auto model = Model::create(s, at::kCPU);
  auto head = at::full({s.units[3].numel}, 5.0);
  model->initUnit(3, 1, head);
  EXPECT_EQ(s.units[3].numel, 64); // ln_f weight and bias; lm_head is tied
  EXPECT_TRUE(at::equal(head.narrow(0, 0, 32), at::ones({32})));
  EXPECT_TRUE(at::equal(head.narrow(0, 32, 32), at::zeros({32})));
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

TEST(ModelErrors, OneLineMessages) {
  Schedule s = llamaSchedule(tinyLlamaConfig());
  Schedule bert = s;
  bert.model.family = ModelFamily::Bert;
  EXPECT_THROW(Model::create(bert, at::kCPU), std::runtime_error);
  Schedule wrongKind = s;
  wrongKind.units[1].kind = UnitKind::GPT2Block;
  EXPECT_THROW(Model::create(wrongKind, at::kCPU), std::runtime_error);
  Schedule wrongShape = s;
  wrongShape.units[1].params[1].shape = {8, 32};
  EXPECT_THROW(Model::create(wrongShape, at::kCPU), std::runtime_error);
  // A renamed parameter: the message says what is missing and what to do
  // (it used to say only "has no parameter named '*.<suffix>'").
  Schedule renamed = s;
  for (Param &p : renamed.units[1].params)
    if (p.name.find("input_layernorm") != std::string::npos)
      p.name = "model.layers.0.ln_in.weight";
  try {
    Model::create(renamed, at::kCPU);
    FAIL() << "a renamed parameter was accepted";
  } catch (const std::runtime_error &e) {
    EXPECT_NE(std::string(e.what()).find(
                  "unit 'layers.0' has no parameter whose name ends in "
                  "'.input_layernorm.weight', which a llama_block computes "
                  "with"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("recompile the plan with planc"),
              std::string::npos);
  }

  auto model = Model::create(s, at::kCPU);
  auto flat = initWeights(*model, s, 1);
  auto batches = randomBatches(s.model, 1, 1, 4, 1);
  model->setMicroBatch(0, batches[0]);
  at::Tensor g = at::zeros({s.units[1].numel});
  try {
    model->backward(1, 0, {flat[1]}, {}, g, {});
    FAIL() << "backward without forward";
  } catch (const std::runtime_error &e) {
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
  }
  // A block's forward before the embedding's.
  EXPECT_THROW(model->forward(1, 0, {flat[1]}, {}, true), std::runtime_error);
  // Wrong number of elements.
  EXPECT_THROW(model->forward(0, 0, {flat[1]}, {}, true), std::runtime_error);
  model->forward(0, 0, {flat[0]}, {}, true);
  EXPECT_THROW(model->loss(0, 0, 1.0, 1.0), std::runtime_error);
  model->reset();
  EXPECT_THROW(model->forward(0, 0, {flat[0]}, {}, true), std::runtime_error);
}

} // namespace
