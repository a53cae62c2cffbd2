//===- Model.cpp - Llama, GPT-2 and BERT units over flat buffers ----------===//
//
// Each unit runs as LibTorch ops with its own autograd graph: its input is a
// fresh leaf (the previous unit's output, detached), so backward of one unit
// ends at that leaf and hands its gradient to the unit before.
//
// Parameters are views into the executor's flat buffers, and FSDP gathers
// them again into another buffer for backward. Every (unit, parameter) owns
// one persistent leaf tensor over a non-owning storage; before each forward,
// recompute and backward the storage is re-pointed at the buffer of that
// call. The graphs saved by autograd hold that leaf, or views of it (W.t()
// inside linear), all sharing its StorageImpl, so backward reads the buffer
// passed to backward. docs/models.md has the details.
//
//===----------------------------------------------------------------------===//

#include "Model.h"
#include "Format.h"
#include "LoraNames.h"
#include "SafeTensors.h"
#include "SavedActivations.h"
#include "Seeds.h"
#include "TensorParallel.h"
#include "TensorParallelParts.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <numbers>
#include <optional>
#include <sstream>
#include <utility>

namespace plan::rt {
namespace {

class ModelError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// What a unit computes: the schedule's unit kind for the model's family.
enum class Layer {
  LlamaEmbedding,
  LlamaBlock,
  LlamaHead,
  Gpt2Embedding,
  Gpt2Block,
  Gpt2Head,
  BertEmbedding,
  BertBlock,
  BertMaskedLMHead,
  BertClassificationHead
};

// Each kind's parameters, found by name suffix (HF names); the role index is
// the position in the list.
namespace llama_embedding {
enum { Tokens };
} // namespace llama_embedding
namespace llama_block {
enum { Q, K, V, O, Gate, Up, Down, InputNorm, PostNorm };
} // namespace llama_block
namespace llama_head {
enum { Norm, LmHead };
} // namespace llama_head
namespace gpt2_embedding {
enum { Wte, Wpe };
} // namespace gpt2_embedding
namespace gpt2_block {
enum {
  Ln1W,
  Ln1B,
  AttnW,
  AttnB,
  AttnProjW,
  AttnProjB,
  Ln2W,
  Ln2B,
  FcW,
  FcB,
  MlpProjW,
  MlpProjB
};
} // namespace gpt2_block
namespace gpt2_head {
enum { LnW, LnB, LmHead };
} // namespace gpt2_head
namespace bert_embedding {
enum { Word, Position, TokenType, LnW, LnB };
} // namespace bert_embedding
namespace bert_block {
enum {
  Q,
  QB,
  K,
  KB,
  V,
  VB,
  AttnOut,
  AttnOutB,
  Ln1W,
  Ln1B,
  Inter,
  InterB,
  Out,
  OutB,
  Ln2W,
  Ln2B
};
} // namespace bert_block
namespace bert_mlm_head {
enum { Bias, Dense, DenseB, LnW, LnB, Decoder };
} // namespace bert_mlm_head
namespace bert_cls_head {
enum { Pooler, PoolerB, Classifier, ClassifierB };
} // namespace bert_cls_head

struct RoleSpec {
  const char *suffix;
  // Expected shape in units of the config; -1 = any extent.
  std::vector<int64_t> shape;
};

std::vector<RoleSpec> roleSpecs(Layer kind, const ModelConfig &m) {
  const int64_t h = m.hidden, v = m.vocab, i = m.intermediate;
  const int64_t kv = m.heads > 0 ? m.kvHeads * (m.hidden / m.heads) : 0;
  switch (kind) {
  case Layer::LlamaEmbedding:
    return {{"embed_tokens.weight", {v, h}}};
  case Layer::LlamaBlock:
    return {{".self_attn.q_proj.weight", {h, h}},
            {".self_attn.k_proj.weight", {kv, h}},
            {".self_attn.v_proj.weight", {kv, h}},
            {".self_attn.o_proj.weight", {h, h}},
            {".mlp.gate_proj.weight", {i, h}},
            {".mlp.up_proj.weight", {i, h}},
            {".mlp.down_proj.weight", {h, i}},
            {".input_layernorm.weight", {h}},
            {".post_attention_layernorm.weight", {h}}};
  case Layer::LlamaHead:
    return {{"model.norm.weight", {h}}, {"lm_head.weight", {v, h}}};
  case Layer::Gpt2Embedding:
    return {{"wte.weight", {v, h}}, {"wpe.weight", {-1, h}}};
  case Layer::Gpt2Block:
    return {{".ln_1.weight", {h}},
            {".ln_1.bias", {h}},
            {".attn.c_attn.weight", {h, 3 * h}},
            {".attn.c_attn.bias", {3 * h}},
            {".attn.c_proj.weight", {h, h}},
            {".attn.c_proj.bias", {h}},
            {".ln_2.weight", {h}},
            {".ln_2.bias", {h}},
            {".mlp.c_fc.weight", {h, i}},
            {".mlp.c_fc.bias", {i}},
            {".mlp.c_proj.weight", {i, h}},
            {".mlp.c_proj.bias", {h}}};
  case Layer::Gpt2Head:
    return {
        {"ln_f.weight", {h}}, {"ln_f.bias", {h}}, {"lm_head.weight", {v, h}}};
  case Layer::BertEmbedding:
    return {{"word_embeddings.weight", {v, h}},
            {"position_embeddings.weight", {-1, h}},
            {"token_type_embeddings.weight", {-1, h}},
            {"embeddings.LayerNorm.weight", {h}},
            {"embeddings.LayerNorm.bias", {h}}};
  case Layer::BertBlock:
    return {{".attention.self.query.weight", {h, h}},
            {".attention.self.query.bias", {h}},
            {".attention.self.key.weight", {h, h}},
            {".attention.self.key.bias", {h}},
            {".attention.self.value.weight", {h, h}},
            {".attention.self.value.bias", {h}},
            {".attention.output.dense.weight", {h, h}},
            {".attention.output.dense.bias", {h}},
            {".attention.output.LayerNorm.weight", {h}},
            {".attention.output.LayerNorm.bias", {h}},
            {".intermediate.dense.weight", {i, h}},
            {".intermediate.dense.bias", {i}},
            {".output.dense.weight", {h, i}},
            {".output.dense.bias", {h}},
            {".output.LayerNorm.weight", {h}},
            {".output.LayerNorm.bias", {h}}};
  case Layer::BertMaskedLMHead:
    return {{"cls.predictions.bias", {v}},
            {"cls.predictions.transform.dense.weight", {h, h}},
            {"cls.predictions.transform.dense.bias", {h}},
            {"cls.predictions.transform.LayerNorm.weight", {h}},
            {"cls.predictions.transform.LayerNorm.bias", {h}},
            {"cls.predictions.decoder.weight", {v, h}}};
  case Layer::BertClassificationHead:
    return {{"bert.pooler.dense.weight", {h, h}},
            {"bert.pooler.dense.bias", {h}},
            {"classifier.weight", {m.numLabels, h}},
            {"classifier.bias", {m.numLabels}}};
  }
  return {};
}

bool endsWith(const std::string &s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// One parameter of a unit and its persistent autograd leaf.
struct Slot {
  std::string name;
  std::vector<int64_t> shape;       // what this rank stores and computes with
  std::vector<int64_t> fullShape;   // the HF parameter's (shape, unless split)
  std::optional<TensorSplit> split; // tensor parallelism's, if split
  int64_t numel = 0;
  int64_t offset = 0;    // elements into `params`, `frozen` or `tied`
  bool fromTied = false; // stored in another unit, passed as `tied`
  bool frozen = false;   // a LoRA base: in `frozen` (or a frozen `tied`)
  at::Tensor leaf;       // storage re-pointed at every call; requires grad
                         // unless frozen
};

/// A LoRA target's adapters: the slots of its lora_A and lora_B, and the
/// module's HF name (what its dropout masks are drawn for).
struct Adapter {
  size_t a = 0, b = 0;
  std::string module;
};

/// What LoRA dropout draws a unit's masks from while it computes one
/// micro-batch: the probability, the run's seed and the micro-batch's
/// sequences (`count` of `length` tokens from global sequence `first`).
struct DropoutDraw {
  double p = 0;
  uint64_t seed = 0;
  int64_t first = 0, count = 0, length = 0;
};

/// PEFT's lora_dropout on an adapter's input, given which elements drop:
/// `x` with those zeroed, times `scale` (1 / keep), keeping only the boolean
/// mask for backward (what loraActivationBytes counts, next to the dropped
/// input lora_A saves). masked_fill reads the mask as it is, where a product
/// with it would first convert it to x's type on a CPU.
struct DropMasked : torch::autograd::Function<DropMasked> {
  static at::Tensor forward(torch::autograd::AutogradContext *ctx,
                            const at::Tensor &x, const at::Tensor &drop,
                            double scale) {
    ctx->save_for_backward({drop});
    ctx->saved_data["scale"] = scale;
    return x.masked_fill(drop, 0).mul_(scale);
  }
  static torch::autograd::variable_list
  backward(torch::autograd::AutogradContext *ctx,
           torch::autograd::variable_list grads) {
    at::Tensor drop = ctx->get_saved_variables()[0];
    at::Tensor g = grads[0].masked_fill(drop, 0);
    g.mul_(ctx->saved_data["scale"].toDouble());
    return {g, at::Tensor(), at::Tensor()};
  }
};

/// GPT-2's Conv1D: x @ W + b with W stored [in, out].
at::Tensor conv1d(const at::Tensor &x, const at::Tensor &w,
                  const at::Tensor &b) {
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = w.size(1);
  return at::addmm(b, x.reshape({-1, x.size(-1)}), w).view(shape);
}

struct UnitModel {
  std::string name;
  Layer kind;
  int64_t numel = 0, frozenNumel = 0;
  std::vector<Slot> slots;
  std::vector<size_t> roles; // role index -> slot index
  // role index -> the adapters of that weight's module (LoRA targets only)
  std::vector<std::optional<Adapter>> adapters;
  double loraScale = 0; // alpha / rank
  // Set for the micro-batch being computed (compute()).
  mutable DropoutDraw dropout;
  const at::Tensor &param(int role) const { return slots[roles[role]].leaf; }

  /// nn.Linear of role `role` (with `bias` when given), LoRA included.
  at::Tensor linear(int role, const at::Tensor &x,
                    const at::Tensor &bias = {}) const {
    if (!adapters[role])
      return at::linear(x, param(role), bias);
    at::Tensor x2 = x.reshape({-1, x.size(-1)});
    return adapted(role, x, x2, at::linear(x2, param(role), bias));
  }
  /// GPT-2's Conv1D of role `role` with the bias of `biasRole`, LoRA
  /// included.
  at::Tensor conv1dOf(int role, int biasRole, const at::Tensor &x) const {
    if (!adapters[role])
      return conv1d(x, param(role), param(biasRole));
    at::Tensor x2 = x.reshape({-1, x.size(-1)});
    return adapted(role, x, x2, at::addmm(param(biasRole), x2, param(role)));
  }

private:
  /// `y2`, role `role`'s module on `x2` (`x` as [tokens, in]), plus the
  /// module's LoRA path x A^T B^T alpha/rank (PEFT's; a GPT-2 Conv1D's
  /// adapters are laid out as a Linear's), as `x`'s shape. Added into `y2`
  /// in place by one addmm: the only temporary is x A^T ([tokens, rank],
  /// what B's gradient needs), not an output-sized product, its scaled copy
  /// and the sum; on the 2-D result itself, not a view of it, so that its
  /// backward does not copy the output's gradient (the module's own
  /// backward does not need `y2`).
  at::Tensor adapted(int role, const at::Tensor &x, const at::Tensor &x2,
                     at::Tensor y2) const {
    const Adapter &ad = *adapters[role];
    const at::Tensor &a = slots[ad.a].leaf, &b = slots[ad.b].leaf;
    y2.addmm_(at::linear(dropped(ad, x2), a), b.t(), /*beta=*/1, loraScale);
    std::vector<int64_t> shape = x.sizes().vec();
    shape.back() = y2.size(1);
    return y2.view(shape);
  }

  /// `x2` ([tokens, in], the micro-batch's sequences one after the other)
  /// through LoRA dropout: each sequence's elements drop where uniform fp32
  /// values [length, in], drawn row-major on the compute device by a
  /// generator seeded by loraDropoutSeed (one per sequence), are at least
  /// 1 - p; the rest are scaled by 1 / (1 - p) (DropMasked). `x2` itself
  /// without dropout.
  at::Tensor dropped(const Adapter &ad, const at::Tensor &x2) const {
    if (dropout.p == 0)
      return x2;
    const double keep = 1.0 - dropout.p;
    at::Tensor drop = at::empty({dropout.count, dropout.length, x2.size(1)},
                                x2.options().dtype(at::kBool));
    at::Generator gen =
        at::globalContext().defaultGenerator(x2.device()).clone();
    for (int64_t r = 0; r < dropout.count; ++r) {
      {
        std::lock_guard<std::mutex> lock(gen.mutex());
        gen.set_current_seed(
            loraDropoutSeed(dropout.seed, ad.module, dropout.first + r));
      }
      // A few rows at a time, so that the uniform values stay small next
      // to the mask; the generator continues from one call to the next.
      const int64_t in = x2.size(1);
      const int64_t rows = std::max<int64_t>(1, kDropoutChunkElements / in);
      for (int64_t first = 0; first < dropout.length; first += rows) {
        const int64_t n = std::min(rows, dropout.length - first);
        at::Tensor uniform =
            at::rand({n, in}, gen, x2.options().dtype(at::kFloat));
        at::Tensor part = drop.select(0, r).narrow(0, first, n);
        at::ge_out(part, uniform, keep);
      }
    }
    return DropMasked::apply(x2, drop.view({-1, x2.size(1)}), 1.0 / keep);
  }
};

/// What one unit's forward (or recompute) of one micro-batch keeps until its
/// backward.
struct Run {
  at::Tensor input;  // leaf requiring grad; undefined for the embedding
  at::Tensor output; // hidden state, or the head's loss
};

/// What one part of a tensor-parallel unit keeps from its forward (or
/// recompute) until its backward: its inputs as autograd leaves (the
/// exchanged `in`, and the residual stream it read), and its graph's
/// outputs (what it wrote to `out`, and the residual stream it left).
struct PartRun {
  at::Tensor in, carryIn;
  at::Tensor out, carryOut;
};

/// Where a part sits in a unit's residual stream (the hidden state between
/// the cuts, which the parts hand on inside the model): whether it reads it,
/// and whether it leaves a new one (a residual sum, the unit's output).
struct CarryUse {
  bool reads = false, replaces = false;
};
CarryUse carryUse(tp::UnitRole role, int64_t part) {
  switch (role) {
  case tp::UnitRole::Embedding: // lookup | hidden state
    return {false, part == 1};
  case tp::UnitRole::Block: // norm | attention | residual, norm | MLP |
                            // residual
    return {part % 2 == 0, part == 2 || part == 4};
  case tp::UnitRole::Head: // norm | logits
    return {part == 0, false};
  }
  return {};
}

/// How a part runs: a forward that keeps its graph, one that does not
/// (activation checkpointing), or a recompute.
enum class PartMode { Graph, NoGraph, Recompute };

/// A tensor handed from one unit to the next, tagged with its producer so a
/// schedule that skips a unit is caught instead of computing garbage.
struct Handover {
  int64_t unit = -1;
  at::Tensor value;
  // The value lives in its producer's saves buffer (SaveInto::adopt), which
  // the schedule keeps until after the consumer's backward.
  bool planned = false;
};

at::Tensor rmsNorm(const at::Tensor &x, const at::Tensor &weight, double eps) {
  // LlamaRMSNorm: statistics in fp32, the scale in the model's dtype.
  at::Tensor h = x.to(at::kFloat);
  h = h * at::rsqrt(h.pow(2).mean({-1}, /*keepdim=*/true) + eps);
  return weight * h.to(x.scalar_type());
}

at::Tensor rotateHalf(const at::Tensor &x) {
  int64_t half = x.size(-1) / 2;
  return at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

at::Tensor repeatKv(const at::Tensor &x, int64_t times) {
  if (times == 1)
    return x;
  int64_t b = x.size(0), k = x.size(1), s = x.size(2), d = x.size(3);
  return x.unsqueeze(2)
      .expand({b, k, times, s, d})
      .reshape({b, k * times, s, d});
}

at::Tensor causalAttention(const at::Tensor &q, const at::Tensor &k,
                           const at::Tensor &v) {
  return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{},
                                          /*dropout_p=*/0.0,
                                          /*is_causal=*/true);
}

at::Tensor crossEntropy(const at::Tensor &logits, const at::Tensor &targets) {
  return at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}),
                                targets.reshape({-1}));
}

/// BERT's `hidden_act = "gelu"`: the exact (erf) GELU.
at::Tensor geluErf(const at::Tensor &x) { return at::gelu(x, "none"); }

/// SDPA over every position (BERT: no causal mask, no padding).
at::Tensor fullAttention(const at::Tensor &q, const at::Tensor &k,
                         const at::Tensor &v) {
  return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{},
                                          /*dropout_p=*/0.0,
                                          /*is_causal=*/false);
}

class TransformerModel final : public Model {
public:
  TransformerModel(const Schedule &schedule, at::Device device,
                   int64_t tensorRank, int64_t lossChunkBytes)
      : config_(schedule.model), device_(device),
        lossChunkBytes_(lossChunkBytes), tensor_(schedule.tensor),
        tensorRank_(tensorRank), sequenceParallel_(schedule.sequenceParallel) {
    const ModelConfig &m = config_;
    if (tensorRank < 0 || tensorRank >= tensor_)
      throw ModelError("tensor rank " + std::to_string(tensorRank) +
                       " is not one of the mesh's " + std::to_string(tensor_));
    if (m.hidden <= 0 || m.heads <= 0 || m.hidden % m.heads != 0)
      throw ModelError("hidden " + std::to_string(m.hidden) +
                       " is not a positive multiple of heads " +
                       std::to_string(m.heads));
    if (m.family == ModelFamily::Llama &&
        (m.kvHeads <= 0 || m.heads % m.kvHeads != 0 ||
         (m.hidden / m.heads) % 2 != 0))
      throw ModelError("heads " + std::to_string(m.heads) +
                       " is not a multiple of kv_heads " +
                       std::to_string(m.kvHeads) +
                       ", or the head dimension is odd");
    if (m.lora && m.lora->rank < 1)
      throw ModelError("lora rank " + std::to_string(m.lora->rank) +
                       " is below 1");
    if (m.lora && !(m.lora->dropout >= 0 && m.lora->dropout < 1))
      throw ModelError("lora dropout " + std::to_string(m.lora->dropout) +
                       " is not in [0, 1)");
    // Where each defining parameter is stored, for the units that tie to it.
    std::map<std::string, std::pair<const Param *, const Unit *>> defined;
    for (const Unit &unit : schedule.units)
      for (const Param &p : unit.params)
        if (p.tiedTo.empty())
          defined[p.name] = {&p, &unit};
    for (const Unit &unit : schedule.units)
      units_.push_back(makeUnit(unit, defined));
  }

  void initUnit(int64_t unit, uint64_t seed, at::Tensor out,
                at::Tensor frozen) override {
    const UnitModel &u = unitAt(unit);
    checkFlat(u, out, u.numel, "initUnit");
    checkFlat(u, frozen, u.frozenNumel, "initUnit's frozen");
    for (const Slot &s : u.slots)
      if (!s.fromTied)
        (s.frozen ? frozen : out)
            .narrow(0, s.offset, s.numel)
            .copy_(rankSlice(s, initialValue(u, s, seed)).reshape({-1}));
  }

  void loadUnit(int64_t unit, const TensorSource &source, uint64_t seed,
                at::Tensor out, at::Tensor frozen) override {
    const UnitModel &u = unitAt(unit);
    checkFlat(u, out, u.numel, "loadUnit");
    checkFlat(u, frozen, u.frozenNumel, "loadUnit's frozen");
    for (const Slot &s : u.slots) {
      if (s.fromTied)
        continue;
      // A pretrained base has no adapters: they start as initUnit's.
      bool fresh = (isNewTaskHead(s.name) || loraAdapterModule(s.name)) &&
                   !source.contains(s.name);
      at::Tensor value =
          fresh ? initialValue(u, s, seed) : source.get(s.name, s.fullShape);
      (s.frozen ? frozen : out)
          .narrow(0, s.offset, s.numel)
          .copy_(rankSlice(s, value).reshape({-1}));
    }
  }

  std::vector<std::string>
  newTaskHeadParameters(const TensorSource &source) const override {
    std::vector<std::string> names;
    for (const UnitModel &u : units_)
      for (const Slot &s : u.slots)
        if (!s.fromTied && isNewTaskHead(s.name) && !source.contains(s.name))
          names.push_back(s.name);
    return names;
  }

  void setMicroBatch(int64_t mb, MicroBatch batch) override {
    const bool labels = config_.family == ModelFamily::Bert &&
                        config_.bertHead == BertHead::SequenceClassification;
    if (!batch.tokens.defined() || batch.tokens.dim() != 2 ||
        !batch.targets.defined())
      throw ModelError("micro-batch " + std::to_string(mb) +
                       ": tokens must be [batch, seq_len] and have targets");
    if (labels ? batch.targets.dim() != 1 ||
                     batch.targets.size(0) != batch.tokens.size(0)
               : batch.targets.sizes() != batch.tokens.sizes())
      throw ModelError("micro-batch " + std::to_string(mb) + ": targets must " +
                       (labels ? "be [batch] sequence labels"
                               : "be [batch, seq_len] like the tokens"));
    batch.tokens = batch.tokens.to(device_, at::kLong);
    batch.targets = batch.targets.to(
        device_, labels && config_.numLabels == 1 ? at::kFloat : at::kLong);
    batches_[mb] = std::move(batch);
  }

  void forward(int64_t unit, int64_t mb, const UnitWeights &weights,
               const at::Tensor &saves, bool keepGraph,
               const UnitPart &part) override {
    if (tensor_ > 1)
      return runPart(unit, mb, weights, {}, saves, part,
                     keepGraph ? PartMode::Graph : PartMode::NoGraph);
    UnitModel &u = unitAt(unit);
    const MicroBatch &batch = batchAt(mb);
    bind(u, weights);
    at::Tensor x;
    bool planned = false;
    if (part.in.defined()) {
      // A pipeline stage's input, received into its planned buffer, which
      // the schedule keeps until this unit's backward (or copied into the
      // saves below, without a graph).
      x = plannedHidden(part.in, batch.tokens.size(1), batch,
                        computeType(weights),
                        "forward of unit '" + u.name + "': its in",
                        /*received=*/true);
      planned = true;
    } else if (!isEmbedding(u)) {
      auto it = hidden_.find(mb);
      if (it == hidden_.end() || it->second.unit != unit - 1)
        throw ModelError("forward of unit '" + u.name + "' micro-batch " +
                         std::to_string(mb) + " comes before the forward of '" +
                         units_[unit - 1].name + "'");
      x = it->second.value;
      planned = it->second.planned;
    }
    if (keepGraph) {
      at::Tensor input;
      if (x.defined())
        input = x.detach().requires_grad_(true);
      auto [out, adopted] = computeSaving(u, input, !planned, batch, saves);
      finish(unit, mb, out, adopted);
      runs_[{unit, mb}] = Run{input, out};
      handOn(mb, out, part.out);
      return;
    }
    // Checkpointed: keep only the input (in the planned buffer) and no graph.
    if (x.defined()) {
      if (!saves.defined() || saves.numel() < x.numel())
        throw ModelError("forward of unit '" + u.name +
                         "' without a graph needs a saves buffer of at least " +
                         std::to_string(x.numel()) + " elements");
      saves.narrow(0, 0, x.numel()).view(x.sizes()).copy_(x);
    }
    at::NoGradGuard noGrad;
    at::Tensor out = compute(u, x, batch);
    finish(unit, mb, out);
    handOn(mb, out, part.out);
  }

  void recompute(int64_t unit, int64_t mb, const UnitWeights &weights,
                 const at::Tensor &input, const at::Tensor &saves,
                 const UnitPart &part) override {
    if (tensor_ > 1)
      return runPart(unit, mb, weights, input, saves, part,
                     PartMode::Recompute);
    UnitModel &u = unitAt(unit);
    const MicroBatch &batch = batchAt(mb);
    bind(u, weights);
    at::Tensor x;
    // The planned input buffer, which the schedule keeps until after this
    // unit's backward.
    if (!isEmbedding(u))
      x = plannedHidden(input, batch.tokens.size(1), batch,
                        computeType(weights),
                        "recompute of unit '" + u.name + "': its input")
              .requires_grad_(true);
    // The input stays in its planned buffer until after the backward.
    at::Tensor out =
        computeSaving(u, x, /*adoptInput=*/false, batch, saves).first;
    if (isHead(u))
      losses_[mb] = out.detach();
    runs_[{unit, mb}] = Run{x, out};
  }

  at::Tensor loss(int64_t unit, int64_t mb, double scale, double lossScale,
                  const at::Tensor &stats) override {
    UnitModel &u = unitAt(unit);
    if (!isHead(u))
      throw ModelError("loss of unit '" + u.name + "', which is not a head");
    if (tensor_ > 1)
      return vocabParallelLoss(u, mb, scale * lossScale, stats);
    auto it = losses_.find(mb);
    if (it == losses_.end())
      throw ModelError("loss of micro-batch " + std::to_string(mb) +
                       " before the forward of '" + u.name + "'");
    seeds_[mb] = scale * lossScale;
    return it->second;
  }

  void backward(int64_t unit, int64_t mb, const UnitWeights &weights,
                const at::Tensor & /*activations*/, const at::Tensor &grads,
                const at::Tensor &tiedGrads, const UnitPart &part) override {
    if (tensor_ > 1)
      return backwardPart(unit, mb, weights, grads, tiedGrads, part);
    UnitModel &u = unitAt(unit);
    auto run = runs_.find({unit, mb});
    if (run == runs_.end())
      throw ModelError("backward of unit '" + u.name + "' micro-batch " +
                       std::to_string(mb) +
                       " has no graph (no forward with a graph or recompute)");
    if (u.numel > 0)
      checkFlat(u, grads, u.numel, "backward's grads");
    at::Tensor seed;
    if (isHead(u)) {
      auto it = seeds_.find(mb);
      if (it == seeds_.end())
        throw ModelError("backward of '" + u.name + "' micro-batch " +
                         std::to_string(mb) + " before its loss");
      seed = at::full({}, it->second, run->second.output.options());
    } else if (part.outGrad.defined()) {
      // The gradient of a pipeline stage's output, from the next stage.
      const at::Tensor &out = run->second.output;
      if (part.outGrad.numel() != out.numel() ||
          part.outGrad.scalar_type() != out.scalar_type())
        throw ModelError("backward of unit '" + u.name + "': out_grad has " +
                         std::to_string(part.outGrad.numel()) + " " +
                         c10::toString(part.outGrad.scalar_type()) +
                         " elements, its output " +
                         std::to_string(out.numel()) + " " +
                         c10::toString(out.scalar_type()));
      seed = part.outGrad.view(out.sizes());
    } else {
      auto it = gradIn_.find(mb);
      if (it == gradIn_.end() || it->second.unit != unit + 1)
        throw ModelError("backward of unit '" + u.name + "' micro-batch " +
                         std::to_string(mb) +
                         " comes before the backward of '" +
                         units_[unit + 1].name + "'");
      seed = it->second.value;
    }
    bind(u, weights);
    // The trained parameters' leaves, then the unit's input.
    std::vector<at::Tensor> inputs;
    std::vector<size_t> trained = trainedLeaves(u, inputs);
    if (run->second.input.defined())
      inputs.push_back(run->second.input);
    // Nothing to differentiate: an embedding whose weights are all a LoRA
    // base (the lowering schedules its backward all the same).
    std::vector<at::Tensor> g =
        inputs.empty()
            ? std::vector<at::Tensor>{}
            : torch::autograd::grad({run->second.output}, inputs, {seed},
                                    /*retain_graph=*/false,
                                    /*create_graph=*/false,
                                    /*allow_unused=*/true);
    addParamGrads(u, trained, g, grads, tiedGrads);
    runs_.erase(run);
    if (isHead(u))
      seeds_.erase(mb);
    if (isEmbedding(u)) {
      gradIn_.erase(mb);
    } else if (part.inGrad.defined()) {
      // The gradient of a pipeline stage's input, sent to the one before.
      checkFlat(u, part.inGrad, g.back().numel(), "backward's in_grad");
      part.inGrad.copy_(g.back().reshape({-1}));
      gradIn_.erase(mb);
    } else {
      gradIn_[mb] = Handover{unit, g.back()};
    }
  }

  int64_t takeUnplannedSaveBytes() override {
    return std::exchange(unplannedSaveBytes_, 0);
  }

  void reset() override {
    partRuns_.clear();
    partCarry_.clear();
    savesUsed_.clear();
    logSumExp_.clear();
    runs_.clear();
    hidden_.clear();
    gradIn_.clear();
    losses_.clear();
    seeds_.clear();
    batches_.clear();
  }

private:
  //===--------------------------------------------------------------------===//
  // Tensor parallelism: a unit in parts (TensorParallelParts.h)
  //===--------------------------------------------------------------------===//

  /// Appends the leaves of `u`'s trained parameters (a LoRA base's get no
  /// gradient) to `inputs`; returns their slots, in that order.
  static std::vector<size_t> trainedLeaves(const UnitModel &u,
                                           std::vector<at::Tensor> &inputs) {
    std::vector<size_t> trained;
    for (size_t i = 0; i < u.slots.size(); ++i)
      if (!u.slots[i].frozen) {
        inputs.push_back(u.slots[i].leaf);
        trained.push_back(i);
      }
    return trained;
  }

  /// Adds the gradients `g[k]` of the trained slots `trained[k]` into
  /// `grads` (or, for a tied parameter, `tiedGrads`).
  static void addParamGrads(const UnitModel &u,
                            const std::vector<size_t> &trained,
                            const std::vector<at::Tensor> &g,
                            const at::Tensor &grads,
                            const at::Tensor &tiedGrads) {
    RECORD_USER_SCOPE("plan::grad_accumulate");
    for (size_t k = 0; k < trained.size(); ++k) {
      const Slot &s = u.slots[trained[k]];
      const at::Tensor &gi = g[k];
      if (!gi.defined())
        continue;
      const at::Tensor &dst = s.fromTied ? tiedGrads : grads;
      if (s.fromTied && (!dst.defined() || dst.numel() < s.offset + s.numel))
        throw ModelError("backward of unit '" + u.name +
                         "' needs tied_grads "
                         "holding '" +
                         s.name + "'");
      dst.narrow(0, s.offset, s.numel).view(s.shape).add_(gi);
    }
  }

  tp::UnitRole roleOf(const UnitModel &u) const {
    if (isEmbedding(u))
      return tp::UnitRole::Embedding;
    return isHead(u) ? tp::UnitRole::Head : tp::UnitRole::Block;
  }

  /// Tokens of the residual stream on this rank: the micro-batch's
  /// sequence, or under sequence parallelism this rank's 1/T of it.
  int64_t streamLength(const MicroBatch &batch) const {
    int64_t s = batch.tokens.size(1);
    return sequenceParallel_ ? s / tensor_ : s;
  }

  /// How an exchange buffer after cut `cut` holds the part's input, [b,
  /// s', h] in sequence order: as it is, except the ranks' slices that
  /// sequence parallelism gathers before column-parallel layers, which lie
  /// rank-major ([T, b, s/T, h]); as that, a [b, T, s/T, h] view of the
  /// input.
  at::Tensor exchangeView(const at::Tensor &buffer, tp::Boundary cut,
                          const MicroBatch &batch) const {
    const int64_t b = batch.tokens.size(0), s = batch.tokens.size(1);
    const int64_t h = config_.hidden;
    if (cut == tp::Boundary::EnterColumns && sequenceParallel_)
      return buffer.view({tensor_, b, s / tensor_, h}).transpose(0, 1);
    if (cut == tp::Boundary::EnterColumns)
      return buffer.view({b, s, h});
    return buffer.view({b, streamLength(batch), h});
  }

  /// The part's input after cut `cut` as a leaf, [b, s', h] in the type the
  /// unit computes in: a copy (in sequence order), since the schedule frees
  /// the buffer right after the part (releaseLeaf gives its memory back
  /// once the part ran).
  at::Tensor exchangeLeaf(const at::Tensor &buffer, tp::Boundary cut,
                          const MicroBatch &batch, at::ScalarType type) const {
    at::Tensor from = exchangeView(buffer.detach(), cut, batch);
    at::Tensor leaf = at::empty(from.sizes(), buffer.options().dtype(type));
    leaf.copy_(from);
    const int64_t b = batch.tokens.size(0);
    return leaf.view({b, -1, config_.hidden}).requires_grad_(true);
  }

  /// What a part hands to cut `cut`, flat: the partial sums of row-parallel
  /// layers ([b, s, h]) laid out for the reduce-scatter along the sequence
  /// under sequence parallelism ([T, b, s/T, h]: rank t's positions are
  /// slice t); anything else as it is.
  at::Tensor toExchange(const at::Tensor &y, tp::Boundary cut) const {
    if (cut == tp::Boundary::LeaveRows && sequenceParallel_) {
      const int64_t b = y.size(0), s = y.size(1), h = y.size(2);
      return y.view({b, tensor_, s / tensor_, h})
          .transpose(0, 1)
          .contiguous()
          .view({-1});
    }
    return y.reshape({-1});
  }

  /// The first vocabulary row (and logit column) of this rank's slice.
  int64_t vocabStart(const at::Tensor &rows) const {
    return tensorRank_ * rows.size(0);
  }

  /// The bytes of a unit's `saves` that its earlier parts left free, as a
  /// byte tensor (undefined when none are left: everything then overflows,
  /// counted).
  at::Tensor savesFrom(const at::Tensor &saves, int64_t used) const {
    if (!saves.defined() || saves.nbytes() <= static_cast<size_t>(used))
      return {};
    at::Tensor bytes = saves.view(at::kByte);
    return bytes.narrow(0, used, bytes.numel() - used);
  }

  /// After a part's ops: backward reads nothing of its exchanged input's own
  /// memory (what autograd saved of it is in `saves`, or kept by
  /// reference where it did not fit), so its storage is pointed at the
  /// saved copy, or, where nothing saved it, at `buffer`, and its memory is
  /// freed. Autograd still has the leaf to differentiate by.
  static void releaseLeaf(const at::Tensor &leaf, const SaveInto &into,
                          const at::Tensor &buffer) {
    std::optional<int64_t> at = into.placedAt(leaf);
    if (at && *at < 0)
      return;
    void *data = at ? into.base() + *at : buffer.data_ptr();
    leaf.storage().unsafeGetStorageImpl()->set_data_ptr_noswap(
        at::DataPtr(data, leaf.device()));
  }

  /// Copies a part's output into its exchange buffer and points the
  /// output's storage at the buffer: backward reads nothing of a graph's
  /// output (what it saved went to `saves`), so its own memory is freed.
  static void handOut(const at::Tensor &value, const at::Tensor &buffer) {
    // Detached: the arena must not join the part's graph.
    buffer.copy_(value.detach().reshape({-1}));
    if (value.scalar_type() != buffer.scalar_type() || !value.is_contiguous() ||
        value.storage_offset() != 0 ||
        value.storage().nbytes() != buffer.nbytes())
      return;
    value.storage().unsafeGetStorageImpl()->set_data_ptr_noswap(
        at::DataPtr(buffer.data_ptr(), buffer.device()));
  }

  /// Part `part.index` of unit `unit` for micro-batch `mb`: its forward
  /// (with or without a graph) or its recompute (`input`: part 0's saved
  /// input).
  void runPart(int64_t unit, int64_t mb, const UnitWeights &weights,
               const at::Tensor &input, const at::Tensor &saves,
               const UnitPart &part, PartMode mode) {
    UnitModel &u = unitAt(unit);
    const MicroBatch &batch = batchAt(mb);
    const tp::UnitRole role = roleOf(u);
    const auto cuts = tp::boundaries(role);
    const int64_t k = part.index;
    const char *what = mode == PartMode::Recompute ? "recompute" : "forward";
    if (k < 0 || k >= tp::partCount(role))
      throw ModelError(std::string(what) + " of unit '" + u.name + "': part " +
                       std::to_string(k) + " is not one of its " +
                       std::to_string(tp::partCount(role)));
    const bool hasCut = k < static_cast<int64_t>(cuts.size());
    // A pipeline stage's edges, where no cut is: its input into part 0 of a
    // chunk's first unit, its output out of the last part of its last unit.
    const bool stageIn = k == 0 && part.in.defined();
    const bool stageOut = !hasCut && part.out.defined();
    if ((k > 0) != (part.in.defined() && !stageIn) ||
        hasCut != (part.out.defined() && !stageOut))
      throw ModelError(std::string(what) + " of unit '" + u.name + "' part " +
                       std::to_string(k) +
                       " lacks its exchange buffers (in, out)");
    bind(u, weights);
    const at::ScalarType type = computeType(weights);
    const CarryUse carry = carryUse(role, k);
    const bool graph = mode != PartMode::NoGraph;
    if (k == 0)
      savesUsed_[{unit, mb}] = 0;

    // The residual stream it reads: the unit before's output (part 0), an
    // earlier part's, or for a recompute's part 0 its saved input.
    std::map<int64_t, Handover> &stream =
        mode == PartMode::Recompute ? partCarry_ : hidden_;
    at::Tensor carryIn;
    bool carryPlanned = false;
    if (carry.reads && mode == PartMode::Recompute && k == 0) {
      carryIn = plannedHidden(input, streamLength(batch), batch, type,
                              "recompute of unit '" + u.name + "': its input");
      carryPlanned = true;
      // Its later parts read it from here (kept by reference: the input
      // buffer lives until after the unit's backward).
      partCarry_[mb] = Handover{unit, carryIn, true};
    } else if (carry.reads && stageIn) {
      carryIn = plannedHidden(part.in, streamLength(batch), batch, type,
                              "forward of unit '" + u.name + "': its in",
                              /*received=*/true);
      carryPlanned = true;
      // Its later parts read it from here (the buffer lives until after the
      // unit's backward).
      stream[mb] = Handover{unit, carryIn, true};
    } else if (carry.reads) {
      auto it = stream.find(mb);
      int64_t from = k == 0 ? unit - 1 : unit;
      if (it == stream.end() || it->second.unit != from)
        throw ModelError(std::string(what) + " of unit '" + u.name + "' part " +
                         std::to_string(k) + " micro-batch " +
                         std::to_string(mb) + " comes before the " + what +
                         " of " +
                         (k == 0 ? "'" + units_[from].name + "'"
                                 : std::string("its earlier parts")));
      // From part 0 on the stream is this unit's: its later parts read it.
      it->second.unit = unit;
      carryIn = it->second.value;
      carryPlanned = it->second.planned;
    }
    if (mode == PartMode::NoGraph && k == 0 && carryIn.defined()) {
      // Checkpointed: keep only the input (in the planned buffer).
      if (!saves.defined() || saves.numel() < carryIn.numel())
        throw ModelError("forward of unit '" + u.name +
                         "' without a graph needs a saves buffer of at least " +
                         std::to_string(carryIn.numel()) + " elements");
      saves.narrow(0, 0, carryIn.numel()).view(carryIn.sizes()).copy_(carryIn);
    }

    PartRun run;
    if (k > 0)
      run.in = exchangeLeaf(part.in, cuts[k - 1], batch, type);
    if (carryIn.defined())
      run.carryIn = carryIn.detach().requires_grad_(graph);
    std::optional<at::NoGradGuard> noGrad;
    std::optional<SaveInto> into;
    if (graph) {
      std::set<const void *> persistent = persistentStorages(u, {}, batch);
      if (u.kind == Layer::LlamaBlock) {
        auto [cos, sin] = ropeTables(batch.tokens.size(1), type, device_);
        persistent.insert(cos.storage().unsafeGetStorageImpl());
        persistent.insert(sin.storage().unsafeGetStorageImpl());
      }
      if (carryIn.defined() && carryPlanned)
        persistent.insert(carryIn.storage().unsafeGetStorageImpl());
      int64_t &used = savesUsed_[{unit, mb}];
      into.emplace(savesFrom(saves, used), std::move(persistent));
      if (carryIn.defined() && !carryPlanned && into->adopt(carryIn))
        for (auto &[m, handover] : stream)
          if (handover.value.is_same(carryIn))
            handover.planned = true;
    } else {
      noGrad.emplace();
    }

    auto [out, carryOut] = computePart(u, k, run.in, run.carryIn, batch);

    if (role == tp::UnitRole::Head && k == 1) {
      // The logits stay for backward; the loss reads their statistics.
      part.out.copy_(
          tp::lossStatistics(out.detach(), batch.targets.reshape({-1}),
                             vocabStart(u.param(lmHeadRole(u))), config_.vocab)
              .reshape({-1}));
      if (into)
        into->adopt(out);
    } else if (hasCut) {
      handOut(out, part.out);
    }
    if (carry.replaces) {
      bool adopted = into && into->adopt(carryOut);
      bool last = k + 1 == tp::partCount(role);
      if (mode == PartMode::Recompute && last)
        partCarry_.erase(mb);
      else
        stream[mb] = Handover{unit, carryOut.detach(), adopted};
    }
    if (stageOut)
      handOn(mb, carryOut, part.out);
    if (role == tp::UnitRole::Head && k == 1)
      stream.erase(mb);
    if (into) {
      if (run.in.defined())
        releaseLeaf(run.in, *into, part.in);
      savesUsed_[{unit, mb}] += into->usedBytes();
      unplannedSaveBytes_ += into->overflowBytes();
      into.reset();
    }
    if (graph) {
      run.out = out;
      run.carryOut = carryOut;
      partRuns_[{unit, mb, k}] = std::move(run);
    }
  }

  /// The head's role index of its vocabulary-parallel weight.
  static int lmHeadRole(const UnitModel &u) {
    return u.kind == Layer::Gpt2Head ? int(gpt2_head::LmHead)
                                     : int(llama_head::LmHead);
  }

  /// Part `k` of `u`: from the exchanged input `x` ([b, s', h], undefined
  /// for part 0) and the residual stream `carry`, what it hands to its cut
  /// (the head's last part: its fp32 logits [tokens, V/T]) and the residual
  /// stream it leaves (each undefined where it has none).
  std::pair<at::Tensor, at::Tensor> computePart(const UnitModel &u, int64_t k,
                                                const at::Tensor &x,
                                                const at::Tensor &carry,
                                                const MicroBatch &batch) {
    const bool gpt2 = u.kind == Layer::Gpt2Embedding ||
                      u.kind == Layer::Gpt2Block || u.kind == Layer::Gpt2Head;
    const auto cuts = tp::boundaries(roleOf(u));
    auto handed = [&](const at::Tensor &y) { return toExchange(y, cuts[k]); };
    switch (roleOf(u)) {
    case tp::UnitRole::Embedding: {
      const at::Tensor &w = u.param(gpt2 ? int(gpt2_embedding::Wte)
                                         : int(llama_embedding::Tokens));
      if (k == 0) {
        // This rank's rows; the ranks' lookups are summed at LeaveRows.
        return {handed(tp::vocabRows(batch.tokens, w, vocabStart(w))), {}};
      }
      if (!gpt2)
        return {{}, x.clone()};
      const at::Tensor &wpe = u.param(gpt2_embedding::Wpe);
      const int64_t s = batch.tokens.size(1), n = streamLength(batch);
      if (s > wpe.size(0))
        throw ModelError("seq_len " + std::to_string(s) + " exceeds the " +
                         std::to_string(wpe.size(0)) + " learned positions");
      const int64_t first = sequenceParallel_ ? tensorRank_ * n : 0;
      at::Tensor positions =
          at::arange(first, first + n, batch.tokens.options());
      return {{}, x + at::embedding(wpe, positions).unsqueeze(0)};
    }
    case tp::UnitRole::Block:
      return gpt2 ? gpt2BlockPart(u, k, x, carry, handed)
                  : llamaBlockPart(u, k, x, carry, handed);
    case tp::UnitRole::Head: {
      if (k == 0) {
        at::Tensor n =
            gpt2 ? at::layer_norm(carry, {config_.hidden},
                                  u.param(gpt2_head::LnW),
                                  u.param(gpt2_head::LnB), config_.normEps)
                 : rmsNorm(carry, u.param(llama_head::Norm), config_.normEps);
        return {handed(n), {}};
      }
      at::Tensor logits = at::linear(x, u.param(lmHeadRole(u)));
      return {logits.reshape({-1, logits.size(-1)}).to(at::kFloat), {}};
    }
    }
    return {};
  }

  template <typename Handed>
  std::pair<at::Tensor, at::Tensor>
  llamaBlockPart(const UnitModel &u, int64_t k, const at::Tensor &x,
                 const at::Tensor &carry, Handed handed) {
    using namespace llama_block;
    switch (k) {
    case 0:
      return {handed(rmsNorm(carry, u.param(InputNorm), config_.normEps)), {}};
    case 1: // This rank's heads; o_proj's partial sums.
      return {
          handed(u.linear(O, llamaSelfAttention(u, x, config_.heads / tensor_,
                                                config_.kvHeads / tensor_))),
          {}};
    case 2: {
      at::Tensor h1 = carry + x;
      return {handed(rmsNorm(h1, u.param(PostNorm), config_.normEps)), h1};
    }
    case 3: // This rank's features; down_proj's partial sums.
      return {handed(llamaFeedForward(u, x)), {}};
    default:
      return {{}, carry + x};
    }
  }

  template <typename Handed>
  std::pair<at::Tensor, at::Tensor>
  gpt2BlockPart(const UnitModel &u, int64_t k, const at::Tensor &x,
                const at::Tensor &carry, Handed handed) {
    using namespace gpt2_block;
    const int64_t h = config_.hidden;
    switch (k) {
    case 0:
      return {handed(at::layer_norm(carry, {h}, u.param(Ln1W), u.param(Ln1B),
                                    config_.normEps)),
              {}};
    case 1: // c_proj's rows give partial sums, its bias is added once the
            // ranks' are summed.
      return {
          handed(at::matmul(gpt2SelfAttention(u, x, config_.heads / tensor_),
                            u.param(AttnProjW))),
          {}};
    case 2: {
      at::Tensor h1 = carry + (x + u.param(AttnProjB));
      return {handed(at::layer_norm(h1, {h}, u.param(Ln2W), u.param(Ln2B),
                                    config_.normEps)),
              h1};
    }
    case 3:
      return {handed(at::matmul(gpt2MlpActivation(u, x), u.param(MlpProjW))),
              {}};
    default:
      return {{}, carry + (x + u.param(MlpProjB))};
    }
  }

  /// The vocabulary-parallel loss of micro-batch `mb` from every tensor
  /// rank's statistics; keeps its log-sum-exp and seed for the head's
  /// backward.
  at::Tensor vocabParallelLoss(const UnitModel &u, int64_t mb, double seed,
                               const at::Tensor &stats) {
    const MicroBatch &batch = batchAt(mb);
    const int64_t tokens = batch.targets.numel();
    if (!stats.defined() ||
        stats.numel() != tensor_ * tp::kLossStatistics * tokens)
      throw ModelError("loss of '" + u.name + "' micro-batch " +
                       std::to_string(mb) + " needs the " +
                       std::to_string(tensor_) + " tensor ranks' statistics (" +
                       std::to_string(tensor_ * tp::kLossStatistics * tokens) +
                       " elements)");
    tp::VocabParallelLoss loss = tp::lossFromStatistics(
        stats.view({tensor_, tp::kLossStatistics, tokens}).to(at::kFloat),
        batch.targets.reshape({-1}), kIgnoreTarget, batch.lossDivisor);
    logSumExp_[mb] = loss.logSumExp;
    seeds_[mb] = seed;
    losses_[mb] = loss.loss;
    return loss.loss;
  }

  /// Backward of part `part.index` of unit `unit` for micro-batch `mb`.
  void backwardPart(int64_t unit, int64_t mb, const UnitWeights &weights,
                    const at::Tensor &grads, const at::Tensor &tiedGrads,
                    const UnitPart &part) {
    UnitModel &u = unitAt(unit);
    const int64_t k = part.index;
    auto it = partRuns_.find({unit, mb, k});
    if (it == partRuns_.end())
      throw ModelError("backward of unit '" + u.name + "' part " +
                       std::to_string(k) + " micro-batch " +
                       std::to_string(mb) +
                       " has no graph (no forward with a graph or recompute)");
    PartRun &run = it->second;
    if (u.numel > 0)
      checkFlat(u, grads, u.numel, "backward's grads");
    const tp::UnitRole role = roleOf(u);
    const CarryUse carry = carryUse(role, k);
    const bool last = k + 1 == tp::partCount(role);
    // A pipeline stage's edges: the gradient of its output seeds the last
    // part of a chunk's last unit, that of its input leaves part 0 of its
    // first unit.
    const bool stageInGrad = k == 0 && part.inGrad.defined();
    const bool stageOutGrad = last && part.outGrad.defined();
    if (run.in.defined() != (part.inGrad.defined() && !stageInGrad))
      throw ModelError("backward of unit '" + u.name + "' part " +
                       std::to_string(k) + " lacks its in_grad buffer");

    std::vector<at::Tensor> outputs, seeds;
    if (role == tp::UnitRole::Head && k == 1) {
      auto seed = seeds_.find(mb);
      auto lse = logSumExp_.find(mb);
      if (seed == seeds_.end() || lse == logSumExp_.end())
        throw ModelError("backward of '" + u.name + "' micro-batch " +
                         std::to_string(mb) + " before its loss");
      const MicroBatch &batch = batchAt(mb);
      outputs.push_back(run.out);
      seeds.push_back(
          tp::lossGradient(run.out, batch.targets.reshape({-1}), lse->second,
                           vocabStart(u.param(lmHeadRole(u))), config_.vocab,
                           kIgnoreTarget, seed->second, batch.lossDivisor));
    } else if (run.out.defined()) {
      if (!part.outGrad.defined() || part.outGrad.numel() != run.out.numel())
        throw ModelError("backward of unit '" + u.name + "' part " +
                         std::to_string(k) + " needs an out_grad of " +
                         std::to_string(run.out.numel()) + " elements");
      outputs.push_back(run.out);
      seeds.push_back(part.outGrad.view(run.out.sizes()).to(run.out.dtype()));
    }
    if (carry.replaces && stageOutGrad) {
      if (part.outGrad.numel() != run.carryOut.numel())
        throw ModelError("backward of unit '" + u.name + "' part " +
                         std::to_string(k) + ": out_grad has " +
                         std::to_string(part.outGrad.numel()) +
                         " elements, its residual stream " +
                         std::to_string(run.carryOut.numel()));
      outputs.push_back(run.carryOut);
      seeds.push_back(part.outGrad.view(run.carryOut.sizes()));
    } else if (carry.replaces) {
      auto g = gradIn_.find(mb);
      int64_t from = last ? unit + 1 : unit;
      if (g == gradIn_.end() || g->second.unit != from)
        throw ModelError("backward of unit '" + u.name + "' part " +
                         std::to_string(k) + " micro-batch " +
                         std::to_string(mb) + " comes before the backward of " +
                         (last && from < static_cast<int64_t>(units_.size())
                              ? "'" + units_[from].name + "'"
                              : std::string("its later parts")));
      outputs.push_back(run.carryOut);
      seeds.push_back(g->second.value);
    }
    bind(u, weights);
    std::vector<at::Tensor> inputs;
    std::vector<size_t> trained = trainedLeaves(u, inputs);
    const size_t inAt = inputs.size();
    if (run.in.defined())
      inputs.push_back(run.in);
    const size_t carryAt = inputs.size();
    if (run.carryIn.defined())
      inputs.push_back(run.carryIn);
    std::vector<at::Tensor> g =
        torch::autograd::grad(outputs, inputs, seeds, /*retain_graph=*/false,
                              /*create_graph=*/false, /*allow_unused=*/true);
    addParamGrads(u, trained, g, grads, tiedGrads);
    if (run.in.defined()) {
      // In the layout of the buffer `in` came from.
      at::Tensor into =
          exchangeView(part.inGrad, tp::boundaries(role)[k - 1], batchAt(mb));
      if (g[inAt].defined())
        into.copy_(g[inAt].view(into.sizes()));
      else
        into.zero_();
    }
    if (run.carryIn.defined()) {
      at::Tensor gc =
          g[carryAt].defined() ? g[carryAt] : at::zeros_like(run.carryIn);
      auto held = gradIn_.find(mb);
      // A part that reads the stream without leaving a new one (a norm
      // before the unit's later parts) adds to what those parts handed back.
      if (!carry.replaces && held != gradIn_.end() && held->second.unit == unit)
        gradIn_[mb] = Handover{unit, held->second.value + gc};
      else
        gradIn_[mb] = Handover{unit, gc};
    } else if (carry.replaces) {
      gradIn_.erase(mb);
    }
    if (stageInGrad) {
      auto held = gradIn_.find(mb);
      if (held == gradIn_.end() || held->second.unit != unit)
        throw ModelError("backward of unit '" + u.name +
                         "' part 0 has no gradient of its input to send");
      checkFlat(u, part.inGrad, held->second.value.numel(),
                "backward's in_grad");
      part.inGrad.copy_(held->second.value.reshape({-1}));
      gradIn_.erase(held);
    }
    partRuns_.erase(it);
    if (role == tp::UnitRole::Head && k == 1) {
      seeds_.erase(mb);
      logSumExp_.erase(mb);
    }
  }

  UnitModel
  makeUnit(const Unit &unit,
           const std::map<std::string, std::pair<const Param *, const Unit *>>
               &defined) {
    UnitModel u;
    u.name = unit.name;
    u.numel = unit.numel;
    u.frozenNumel = unit.frozenNumel;
    std::optional<Layer> kind = layerOf(unit.kind);
    if (!kind)
      throw ModelError("unit '" + unit.name + "' has kind '" +
                       toString(unit.kind) + "', which the " +
                       toString(config_.family) + " model does not implement");
    u.kind = *kind;
    for (const Param &p : unit.params) {
      Slot s;
      s.name = p.name;
      s.shape = p.localShape(tensor_);
      s.fullShape = p.shape;
      s.numel = p.localNumel(tensor_);
      s.offset = p.offset;
      if (tensor_ > 1)
        s.split = p.split;
      if (!p.tiedTo.empty()) {
        auto it = defined.find(p.tiedTo);
        if (it == defined.end())
          throw ModelError("parameter '" + p.name + "' is tied to '" +
                           p.tiedTo + "', which no unit stores");
        if (it->second.first->shape != p.shape)
          throw ModelError("parameter '" + p.name + "' " +
                           support::shapeString(p.shape) + " is tied to '" +
                           p.tiedTo + "' " +
                           support::shapeString(it->second.first->shape));
        s.fromTied = true;
        s.offset = it->second.first->offset;
        s.frozen = it->second.first->frozen;
        // Stored (and split) as the parameter it ties to.
        s.shape = it->second.first->localShape(tensor_);
        s.numel = it->second.first->localNumel(tensor_);
      } else {
        s.frozen = p.frozen;
        int64_t stored = p.frozen ? unit.frozenNumel : unit.numel;
        if (p.offset < 0 || p.offset + s.numel > stored)
          throw ModelError("parameter '" + p.name + "' lies outside unit '" +
                           unit.name + "'s " + std::to_string(stored) +
                           (p.frozen ? " frozen" : "") + " elements");
      }
      u.slots.push_back(std::move(s));
    }
    if (config_.lora)
      u.loraScale =
          config_.lora->alpha / static_cast<double>(config_.lora->rank);
    for (const RoleSpec &spec : roleSpecs(u.kind, config_)) {
      // Of the names that end in the suffix, the shortest: BERT's
      // `output.dense.weight` is also the end of
      // `attention.output.dense.weight`.
      size_t found = u.slots.size();
      for (size_t i = 0; i < u.slots.size(); ++i)
        if (endsWith(u.slots[i].name, spec.suffix) &&
            (found == u.slots.size() ||
             u.slots[i].name.size() < u.slots[found].name.size()))
          found = i;
      if (found == u.slots.size())
        throw ModelError("unit '" + unit.name +
                         "' has no parameter whose name "
                         "ends in '" +
                         spec.suffix + "', which a " + toString(unit.kind) +
                         " computes with: the schedule's parameters are not "
                         "the HF names this runtime knows (recompile the "
                         "plan with planc)");
      const std::vector<int64_t> &shape = u.slots[found].fullShape;
      bool ok = shape.size() == spec.shape.size();
      for (size_t d = 0; ok && d < shape.size(); ++d)
        ok = spec.shape[d] < 0 || spec.shape[d] == shape[d];
      if (!ok)
        throw ModelError("parameter '" + u.slots[found].name + "' has shape " +
                         support::shapeString(shape) + ", the " +
                         toString(config_.family) + " model needs " +
                         support::shapeString(spec.shape));
      u.roles.push_back(found);
    }
    // LoRA targets: a role's weight `M.weight` with `M.lora_A.weight` [r, in]
    // and `M.lora_B.weight` [out, r] in the unit.
    u.adapters.assign(u.roles.size(), std::nullopt);
    for (size_t role = 0; role < u.roles.size(); ++role) {
      const Slot &w = u.slots[u.roles[role]];
      if (!endsWith(w.name, ".weight") || w.shape.size() != 2)
        continue;
      std::string module = w.name.substr(0, w.name.size() - 7);
      std::optional<size_t> a, b;
      for (size_t i = 0; i < u.slots.size(); ++i)
        if (loraAdapterModule(u.slots[i].name) == module)
          (isLoraA(u.slots[i].name) ? a : b) = i;
      if (!a && !b)
        continue;
      if (!a || !b || !config_.lora)
        throw ModelError("unit '" + unit.name + "': module '" + module +
                         "' has " + (a ? "lora_A" : "lora_B") +
                         " without its other half, or the model has no lora");
      // nn.Linear's weight is [out, in], GPT-2's Conv1D's [in, out].
      bool conv = u.kind == Layer::Gpt2Block;
      int64_t in = conv ? w.shape[0] : w.shape[1];
      int64_t out = conv ? w.shape[1] : w.shape[0];
      int64_t r = config_.lora->rank;
      if (u.slots[*a].shape != std::vector<int64_t>{r, in} ||
          u.slots[*b].shape != std::vector<int64_t>{out, r})
        throw ModelError(
            "unit '" + unit.name + "': the adapters of '" + module + "' are " +
            support::shapeString(u.slots[*a].shape) + " and " +
            support::shapeString(u.slots[*b].shape) + ", not [" +
            std::to_string(r) + ", " + std::to_string(in) + "] and [" +
            std::to_string(out) + ", " + std::to_string(r) + "]");
      u.adapters[role] = Adapter{*a, *b, module};
    }
    for (const Slot &s : u.slots)
      if (loraAdapterModule(s.name) &&
          !std::any_of(u.adapters.begin(), u.adapters.end(), [&](auto &ad) {
            return ad && (&u.slots[ad->a] == &s || &u.slots[ad->b] == &s);
          }))
        throw ModelError("unit '" + unit.name + "': adapter '" + s.name +
                         "' belongs to no module this runtime computes");
    return u;
  }

  /// This rank's part of a whole parameter's value: its slice under
  /// tensor parallelism, else all of it.
  at::Tensor rankSlice(const Slot &s, const at::Tensor &whole) const {
    if (!s.split)
      return whole;
    return tp::localSlice(whole, s.split->dim, s.split->chunks, tensorRank_,
                          tensor_);
  }

  /// A parameter's deterministic initial value: drawn from a generator
  /// seeded by (seed, name) alone (initUnit).
  static at::Tensor initialValue(const UnitModel &u, const Slot &s,
                                 uint64_t seed) {
    at::Tensor value = at::empty(s.fullShape, at::kFloat);
    // A 1-D weight is a norm's scale in both families.
    if (endsWith(s.name, kLoraBSuffix))
      value.zero_(); // PEFT: the adapted model starts as the base
    else if (isLoraA(s.name))
      // PEFT: kaiming_uniform_(a = sqrt(5)), bound sqrt(6 / ((1 + 5) in)).
      value.uniform_(-1.0 / std::sqrt(static_cast<double>(s.fullShape[1])),
                     1.0 / std::sqrt(static_cast<double>(s.fullShape[1])),
                     at::make_generator<at::CPUGeneratorImpl>(
                         parameterSeed(seed, s.name)));
    else if (endsWith(s.name, ".bias"))
      value.zero_();
    else if (s.shape.size() == 1)
      value.fill_(1.0);
    else
      value.normal_(0.0, 0.02,
                    at::make_generator<at::CPUGeneratorImpl>(
                        parameterSeed(seed, s.name)));
    if (u.kind == Layer::BertEmbedding &&
        &s == &u.slots[u.roles[bert_embedding::Word]])
      value[kBertPadToken].zero_();
    return value;
  }

  /// Whether `name` belongs to a task head that a pretrained model's
  /// checkpoint does not have: BERT's pooler and classifier under a
  /// classification head (a masked-LM checkpoint has neither; the Hub's
  /// bert-base-cased has the pooler). transformers' from_pretrained
  /// initialises these afresh; so does loadUnit.
  bool isNewTaskHead(const std::string &name) const {
    return config_.family == ModelFamily::Bert &&
           config_.bertHead == BertHead::SequenceClassification &&
           (name.starts_with("classifier.") ||
            name.starts_with("bert.pooler."));
  }

  UnitModel &unitAt(int64_t unit) {
    if (unit < 0 || unit >= static_cast<int64_t>(units_.size()))
      throw ModelError("unit index " + std::to_string(unit) +
                       " is out of range (the model has " +
                       std::to_string(units_.size()) + " units)");
    return units_[unit];
  }

  const MicroBatch &batchAt(int64_t mb) const {
    auto it = batches_.find(mb);
    if (it == batches_.end())
      throw ModelError("micro-batch " + std::to_string(mb) + " has no data");
    return it->second;
  }

  /// What a unit of `kind` computes in this model's family, if it has one.
  std::optional<Layer> layerOf(UnitKind kind) const {
    switch (config_.family) {
    case ModelFamily::Llama:
      if (kind == UnitKind::Embedding)
        return Layer::LlamaEmbedding;
      if (kind == UnitKind::LlamaBlock)
        return Layer::LlamaBlock;
      if (kind == UnitKind::LlamaHead)
        return Layer::LlamaHead;
      break;
    case ModelFamily::GPT2:
      if (kind == UnitKind::Embedding)
        return Layer::Gpt2Embedding;
      if (kind == UnitKind::GPT2Block)
        return Layer::Gpt2Block;
      if (kind == UnitKind::GPT2Head)
        return Layer::Gpt2Head;
      break;
    case ModelFamily::Bert:
      if (kind == UnitKind::Embedding)
        return Layer::BertEmbedding;
      if (kind == UnitKind::BertBlock)
        return Layer::BertBlock;
      if (kind == UnitKind::BertHead)
        return config_.bertHead == BertHead::MaskedLM
                   ? Layer::BertMaskedLMHead
                   : Layer::BertClassificationHead;
      break;
    }
    return std::nullopt;
  }

  static bool isEmbedding(const UnitModel &u) {
    return u.kind == Layer::LlamaEmbedding || u.kind == Layer::Gpt2Embedding ||
           u.kind == Layer::BertEmbedding;
  }
  static bool isHead(const UnitModel &u) {
    return u.kind == Layer::LlamaHead || u.kind == Layer::Gpt2Head ||
           u.kind == Layer::BertMaskedLMHead ||
           u.kind == Layer::BertClassificationHead;
  }

  /// `t` holds `numel` elements of unit `u`: a contiguous 1-D tensor, or,
  /// where the unit stores none of them, nothing (undefined or empty).
  static void checkFlat(const UnitModel &u, const at::Tensor &t, int64_t numel,
                        const char *what) {
    if (numel == 0 && (!t.defined() || t.numel() == 0))
      return;
    if (!t.defined() || t.dim() != 1 || t.numel() != numel ||
        !t.is_contiguous())
      throw ModelError(std::string(what) + " of unit '" + u.name +
                       "' must be a contiguous 1-D tensor of " +
                       std::to_string(numel) + " elements");
  }

  /// The dtype a unit computes in: its parameters', trainable or frozen.
  static at::ScalarType computeType(const UnitWeights &w) {
    return (w.params.defined() ? w.params : w.frozen).scalar_type();
  }

  bool inFlight(int64_t unit) const {
    for (const auto &[key, run] : runs_)
      if (key.first == unit)
        return true;
    return false;
  }

  /// Points every parameter leaf of `u` at this call's buffers.
  void bind(UnitModel &u, const UnitWeights &w) {
    checkFlat(u, w.params, u.numel, "params");
    checkFlat(u, w.frozen, u.frozenNumel, "frozen");
    int64_t index = &u - units_.data();
    for (Slot &s : u.slots) {
      const at::Tensor &src =
          s.fromTied ? w.tied : (s.frozen ? w.frozen : w.params);
      if (s.fromTied && (!src.defined() || !src.is_contiguous() ||
                         src.numel() < s.offset + s.numel))
        throw ModelError("unit '" + u.name +
                         "' needs tied parameters holding '" + s.name + "'");
      void *ptr = static_cast<char *>(src.data_ptr()) +
                  s.offset * static_cast<int64_t>(src.element_size());
      if (s.leaf.defined() && s.leaf.scalar_type() == src.scalar_type() &&
          s.leaf.device() == src.device()) {
        s.leaf.storage().unsafeGetStorageImpl()->set_data_ptr_noswap(
            at::DataPtr(ptr, src.device()));
        continue;
      }
      // A graph in flight holds the old leaf; a new one would leave it
      // reading a buffer the executor no longer passes.
      if (inFlight(index))
        throw ModelError("unit '" + u.name +
                         "': parameters changed dtype or device while a "
                         "micro-batch's graph is alive");
      s.leaf = at::from_blob(
          ptr, s.shape,
          at::TensorOptions().dtype(src.scalar_type()).device(src.device()));
      s.leaf.set_requires_grad(!s.frozen);
    }
  }

  /// The storages a unit's graph may keep by reference: its parameters (and
  /// the tied ones), the micro-batch's tokens and targets and the rope
  /// tables, which outlive the graph anyway. Creates the rope tables first,
  /// so that they are not created (and saved) inside the scope.
  std::set<const void *> persistentStorages(const UnitModel &u,
                                            const at::Tensor &input,
                                            const MicroBatch &batch) {
    std::set<const void *> kept{batch.tokens.storage().unsafeGetStorageImpl(),
                                batch.targets.storage().unsafeGetStorageImpl()};
    for (const Slot &s : u.slots)
      kept.insert(s.leaf.storage().unsafeGetStorageImpl());
    if (u.kind == Layer::LlamaBlock && input.defined()) {
      auto [cos, sin] =
          ropeTables(input.size(1), input.scalar_type(), input.device());
      kept.insert(cos.storage().unsafeGetStorageImpl());
      kept.insert(sin.storage().unsafeGetStorageImpl());
    }
    return kept;
  }

  /// Runs `u` on `x` with autograd so that all its graph keeps until the
  /// unit's backward is in `saves` (SavedActivations.h): what autograd
  /// saves is copied there, and the unit's output (the next unit's input,
  /// which backward also seeds) is moved there; the head's loss, a scalar,
  /// is not. `x` is kept by reference, in the buffer that holds it, or moved
  /// into `saves` with `adoptInput` (it came from a forward without a graph,
  /// which planned no buffer for it). Returns the output and whether it was
  /// moved.
  std::pair<at::Tensor, bool>
  computeSaving(const UnitModel &u, const at::Tensor &x, bool adoptInput,
                const MicroBatch &batch, const at::Tensor &saves) {
    std::set<const void *> persistent = persistentStorages(u, x, batch);
    if (x.defined() && !adoptInput)
      persistent.insert(x.storage().unsafeGetStorageImpl());
    SaveInto into(saves, std::move(persistent));
    if (x.defined() && adoptInput)
      into.adopt(x);
    at::Tensor out = compute(u, x, batch);
    bool adopted = !isHead(u) && into.adopt(out);
    unplannedSaveBytes_ += into.overflowBytes();
    return {out, adopted};
  }

  /// One micro-batch's hidden states of `seq` tokens a sequence at the
  /// start of a planned buffer (a saved input, a pipeline stage's received
  /// input), as the [b, seq, hidden] tensor a unit computes on, in `type`.
  /// A fresh TensorImpl over the buffer's memory (from_blob), not a view:
  /// views of the arena share its version counter, which every in-place op
  /// on any other buffer bumps, and autograd would then reject the saved
  /// input at backward.
  /// A received stage input (`received`) is exactly one micro-batch's hidden
  /// states in `type`: the schedule plans that buffer to be read in place,
  /// so a conversion would be memory the plan does not have.
  at::Tensor plannedHidden(const at::Tensor &buffer, int64_t seq,
                           const MicroBatch &batch, at::ScalarType type,
                           const std::string &what,
                           bool received = false) const {
    int64_t b = batch.tokens.size(0);
    int64_t n = b * seq * config_.hidden;
    if (!buffer.defined() || buffer.numel() < n ||
        (received && (buffer.numel() != n || buffer.dim() != 1)))
      throw ModelError(what + " has " +
                       std::to_string(buffer.defined() ? buffer.numel() : 0) +
                       " elements, not " + (received ? "" : "at least ") +
                       "a micro-batch's " + std::to_string(n) +
                       " hidden states");
    if (received && buffer.scalar_type() != type)
      throw ModelError(what + " holds " + c10::toString(buffer.scalar_type()) +
                       ", the units compute in " + c10::toString(type));
    return at::from_blob(buffer.data_ptr(), {b, seq, config_.hidden},
                         buffer.options())
        .to(type);
  }

  /// A pipeline stage's last unit: its output goes into `out`, the buffer
  /// sent to the next stage, rather than to a next unit here.
  void handOn(int64_t mb, const at::Tensor &output, const at::Tensor &out) {
    if (!out.defined())
      return;
    if (out.numel() != output.numel() ||
        out.scalar_type() != output.scalar_type())
      throw ModelError("forward's out has " + std::to_string(out.numel()) +
                       " " + c10::toString(out.scalar_type()) +
                       " elements, the output " +
                       std::to_string(output.numel()) + " " +
                       c10::toString(output.scalar_type()));
    out.copy_(output.detach().reshape({-1}));
    hidden_.erase(mb);
  }

  /// Records a forward's output: the next unit's input, or the loss.
  void finish(int64_t unit, int64_t mb, const at::Tensor &out,
              bool planned = false) {
    if (isHead(units_[unit])) {
      losses_[mb] = out.detach();
      hidden_.erase(mb);
    } else {
      hidden_[mb] = Handover{unit, out.detach(), planned};
    }
  }

  at::Tensor compute(const UnitModel &u, const at::Tensor &x,
                     const MicroBatch &batch) {
    if (config_.lora)
      u.dropout =
          DropoutDraw{config_.lora->dropout, batch.seed, batch.firstSequence,
                      batch.tokens.size(0), batch.tokens.size(1)};
    switch (u.kind) {
    case Layer::LlamaEmbedding:
      return at::embedding(u.param(llama_embedding::Tokens), batch.tokens);
    case Layer::Gpt2Embedding: {
      int64_t s = batch.tokens.size(1);
      const at::Tensor &wpe = u.param(gpt2_embedding::Wpe);
      if (s > wpe.size(0))
        throw ModelError("seq_len " + std::to_string(s) + " exceeds the " +
                         std::to_string(wpe.size(0)) + " learned positions");
      at::Tensor positions = at::arange(s, batch.tokens.options());
      return at::embedding(u.param(gpt2_embedding::Wte), batch.tokens) +
             at::embedding(wpe, positions).unsqueeze(0);
    }
    case Layer::LlamaBlock:
      return llamaBlock(u, x);
    case Layer::LlamaHead: {
      at::Tensor h = rmsNorm(x, u.param(llama_head::Norm), config_.normEps);
      return headLoss(h, u.param(llama_head::LmHead), {}, batch);
    }
    case Layer::Gpt2Block:
      return gpt2Block(u, x);
    case Layer::Gpt2Head: {
      at::Tensor h =
          at::layer_norm(x, {config_.hidden}, u.param(gpt2_head::LnW),
                         u.param(gpt2_head::LnB), config_.normEps);
      return headLoss(h, u.param(gpt2_head::LmHead), {}, batch);
    }
    case Layer::BertEmbedding:
      return bertEmbedding(u, batch);
    case Layer::BertBlock:
      return bertBlock(u, x);
    case Layer::BertMaskedLMHead:
      return bertMaskedLM(u, x, batch);
    case Layer::BertClassificationHead:
      return bertClassification(u, x, batch);
    }
    throw ModelError("unit '" + u.name + "' has no implementation");
  }

  /// Mean cross-entropy of the logits h W^T + bias (in fp32) against the
  /// batch's targets: over its targets, or, for targets of which only some
  /// count (kIgnoreTarget), the sum over those divided by the batch's
  /// lossDivisor. In one piece when the fp32 logits fit the loss chunk, else
  /// chunk by chunk of tokens (sum of each chunk's, then divided), so that
  /// only one chunk's logits and their temporaries live at a time, in forward
  /// and in backward.
  at::Tensor headLoss(const at::Tensor &h, const at::Tensor &w,
                      const at::Tensor &bias, const MicroBatch &batch) {
    const at::Tensor &targets = batch.targets;
    const int64_t tokens = targets.numel();
    const bool mean = batch.lossDivisor <= 0;
    const int64_t chunk = lossChunkTokens(tokens, w.size(0), lossChunkBytes_);
    if (chunk >= tokens && mean)
      return crossEntropy(at::linear(h, w, bias).to(at::kFloat), targets);
    at::Tensor flat = h.reshape({tokens, h.size(-1)});
    at::Tensor labels = targets.reshape({tokens});
    at::Tensor sum;
    for (int64_t start = 0; start < tokens; start += chunk) {
      int64_t n = std::min(chunk, tokens - start);
      at::Tensor part = at::cross_entropy_loss(
          at::linear(flat.narrow(0, start, n), w, bias).to(at::kFloat),
          labels.narrow(0, start, n), /*weight=*/{}, at::Reduction::Sum,
          kIgnoreTarget);
      sum = sum.defined() ? sum + part : part;
    }
    return sum / (mean ? static_cast<double>(tokens) : batch.lossDivisor);
  }

  // A block is two halves, each in its own function: the intermediates of
  // one half (copied into the saves buffer as autograd saves them) are freed
  // before the other half allocates its own.

  at::Tensor llamaBlock(const UnitModel &u, const at::Tensor &x) {
    at::Tensor h1 = llamaAttention(u, x);
    return h1 + llamaMlp(u, h1);
  }

  /// x + o_proj(attention(RMSNorm(x))).
  at::Tensor llamaAttention(const UnitModel &u, const at::Tensor &x) {
    using namespace llama_block;
    at::Tensor a =
        llamaSelfAttention(u, rmsNorm(x, u.param(InputNorm), config_.normEps),
                           config_.heads, config_.kvHeads);
    return x + u.linear(O, a);
  }

  /// Llama's attention of `heads` query and `kvHeads` key/value heads (all,
  /// or a tensor-parallel rank's) on the normalised input `n`, dropped once
  /// q, k and v exist: q and k with RoPE, k and v repeated to every query
  /// head, SDPA. [b, s, heads x head_dim]: o_proj's input.
  at::Tensor llamaSelfAttention(const UnitModel &u, at::Tensor n, int64_t heads,
                                int64_t kvHeads) {
    using namespace llama_block;
    const int64_t b = n.size(0), s = n.size(1);
    const int64_t d = config_.hidden / config_.heads;
    const at::ScalarType type = n.scalar_type();
    const at::Device device = n.device();
    at::Tensor q = u.linear(Q, n).view({b, s, heads, d}).transpose(1, 2);
    at::Tensor k = u.linear(K, n).view({b, s, kvHeads, d}).transpose(1, 2);
    at::Tensor v = u.linear(V, n).view({b, s, kvHeads, d}).transpose(1, 2);
    n.reset();
    auto [cos, sin] = ropeTables(s, type, device);
    q = q * cos + rotateHalf(q) * sin;
    k = k * cos + rotateHalf(k) * sin;
    k = repeatKv(k, heads / kvHeads);
    v = repeatKv(v, heads / kvHeads);
    return causalAttention(q, k, v).transpose(1, 2).contiguous().reshape(
        {b, s, heads * d});
  }

  /// down_proj(silu(gate_proj(n)) * up_proj(n)) of n = RMSNorm(h1).
  at::Tensor llamaMlp(const UnitModel &u, const at::Tensor &h1) {
    using namespace llama_block;
    return llamaFeedForward(u, rmsNorm(h1, u.param(PostNorm), config_.normEps));
  }

  /// down_proj(silu(gate_proj(n)) * up_proj(n)) on the normalised input
  /// `n`, dropped once gate and up exist (all features, or a rank's).
  at::Tensor llamaFeedForward(const UnitModel &u, at::Tensor n) {
    using namespace llama_block;
    at::Tensor gate = at::silu(u.linear(Gate, n));
    at::Tensor up = u.linear(Up, n);
    n.reset();
    at::Tensor product = gate * up;
    gate.reset();
    up.reset();
    return u.linear(Down, product);
  }

  at::Tensor gpt2Block(const UnitModel &u, const at::Tensor &x) {
    at::Tensor h1 = gpt2Attention(u, x);
    return h1 + gpt2Mlp(u, h1);
  }

  /// x + c_proj(attention(ln_1(x))).
  at::Tensor gpt2Attention(const UnitModel &u, const at::Tensor &x) {
    using namespace gpt2_block;
    at::Tensor a =
        gpt2SelfAttention(u,
                          at::layer_norm(x, {config_.hidden}, u.param(Ln1W),
                                         u.param(Ln1B), config_.normEps),
                          config_.heads);
    return x + u.conv1dOf(AttnProjW, AttnProjB, a);
  }

  /// GPT-2's attention of `heads` heads (all, or a tensor-parallel rank's,
  /// whose c_attn slice holds their q, k and v) on the normalised input
  /// `n`, dropped once c_attn ran: SDPA of c_attn's q, k and v.
  /// [b, s, heads x head_dim]: c_proj's input.
  at::Tensor gpt2SelfAttention(const UnitModel &u, at::Tensor n,
                               int64_t heads) {
    using namespace gpt2_block;
    const int64_t b = n.size(0), s = n.size(1);
    const int64_t d = config_.hidden / config_.heads;
    at::Tensor qkv = u.conv1dOf(AttnW, AttnB, n);
    n.reset();
    auto split = qkv.split(heads * d, 2);
    qkv.reset();
    auto heads4 = [&](const at::Tensor &t) {
      return t.view({b, s, heads, d}).transpose(1, 2);
    };
    return causalAttention(heads4(split[0]), heads4(split[1]), heads4(split[2]))
        .transpose(1, 2)
        .contiguous()
        .reshape({b, s, heads * d});
  }

  /// mlp.c_proj(gelu(mlp.c_fc(ln_2(h1)))).
  at::Tensor gpt2Mlp(const UnitModel &u, const at::Tensor &h1) {
    using namespace gpt2_block;
    at::Tensor act =
        gpt2MlpActivation(u, at::layer_norm(h1, {config_.hidden}, u.param(Ln2W),
                                            u.param(Ln2B), config_.normEps));
    return u.conv1dOf(MlpProjW, MlpProjB, act);
  }

  /// gelu(mlp.c_fc(n)) on the normalised input `n`, dropped once c_fc ran
  /// (all features, or a rank's): c_proj's input.
  at::Tensor gpt2MlpActivation(const UnitModel &u, at::Tensor n) {
    using namespace gpt2_block;
    at::Tensor fc = u.conv1dOf(FcW, FcB, n);
    n.reset();
    return at::gelu(fc, "tanh");
  }

  /// BertEmbeddings: LayerNorm(word[tokens] + token_type[0] + position[0..s)).
  /// Every token has type 0 (HF's default token_type_ids, a single segment):
  /// row 0 of the token-type table is added to every position, and its
  /// gradient is the sum over them, as the lookup's would be.
  at::Tensor bertEmbedding(const UnitModel &u, const MicroBatch &batch) {
    using namespace bert_embedding;
    const int64_t s = batch.tokens.size(1);
    const at::Tensor &pos = u.param(Position);
    if (s > pos.size(0))
      throw ModelError("seq_len " + std::to_string(s) + " exceeds the " +
                       std::to_string(pos.size(0)) + " learned positions");
    at::Tensor x = at::embedding(u.param(Word), batch.tokens, kBertPadToken);
    x = x + u.param(TokenType).narrow(0, 0, 1);
    x = x + pos.narrow(0, 0, s);
    return at::layer_norm(x, {config_.hidden}, u.param(LnW), u.param(LnB),
                          config_.normEps);
  }

  at::Tensor bertBlock(const UnitModel &u, const at::Tensor &x) {
    at::Tensor h1 = bertAttention(u, x);
    return bertMlp(u, h1);
  }

  /// BertAttention (post-LN): LayerNorm(x + dense(attention(x))).
  at::Tensor bertAttention(const UnitModel &u, const at::Tensor &x) {
    using namespace bert_block;
    const int64_t b = x.size(0), s = x.size(1), h = config_.hidden;
    const int64_t heads = config_.heads, d = h / heads;
    auto heads4 = [&](const at::Tensor &t) {
      return t.view({b, s, heads, d}).transpose(1, 2);
    };
    at::Tensor q = heads4(u.linear(Q, x, u.param(QB)));
    at::Tensor k = heads4(u.linear(K, x, u.param(KB)));
    at::Tensor v = heads4(u.linear(V, x, u.param(VB)));
    at::Tensor a =
        fullAttention(q, k, v).transpose(1, 2).contiguous().reshape({b, s, h});
    q.reset();
    k.reset();
    v.reset();
    at::Tensor sum = x + u.linear(AttnOut, a, u.param(AttnOutB));
    a.reset();
    return at::layer_norm(sum, {h}, u.param(Ln1W), u.param(Ln1B),
                          config_.normEps);
  }

  /// BertIntermediate + BertOutput: LayerNorm(h1 + dense(gelu(dense(h1)))).
  at::Tensor bertMlp(const UnitModel &u, const at::Tensor &h1) {
    using namespace bert_block;
    at::Tensor act = geluErf(u.linear(Inter, h1, u.param(InterB)));
    at::Tensor sum = h1 + u.linear(Out, act, u.param(OutB));
    act.reset();
    return at::layer_norm(sum, {config_.hidden}, u.param(Ln2W), u.param(Ln2B),
                          config_.normEps);
  }

  /// BertOnlyMLMHead: the transform (dense, GELU, LayerNorm), then the
  /// decoder (the word embeddings, tied) with the head's own bias, and the
  /// cross-entropy over the masked positions.
  at::Tensor bertMaskedLM(const UnitModel &u, const at::Tensor &x,
                          const MicroBatch &batch) {
    using namespace bert_mlm_head;
    at::Tensor t = geluErf(at::linear(x, u.param(Dense), u.param(DenseB)));
    t = at::layer_norm(t, {config_.hidden}, u.param(LnW), u.param(LnB),
                       config_.normEps);
    return headLoss(t, u.param(Decoder), u.param(Bias), batch);
  }

  /// BertPooler (dense and tanh on the first token) and the classifier:
  /// BertForSequenceClassification's cross-entropy over the labels, or its
  /// mean squared error with one label (a regression).
  at::Tensor bertClassification(const UnitModel &u, const at::Tensor &x,
                                const MicroBatch &batch) {
    using namespace bert_cls_head;
    at::Tensor pooled =
        at::tanh(at::linear(x.select(1, 0), u.param(Pooler), u.param(PoolerB)));
    at::Tensor logits =
        at::linear(pooled, u.param(Classifier), u.param(ClassifierB))
            .to(at::kFloat);
    if (config_.numLabels == 1)
      return at::mse_loss(logits.squeeze(-1), batch.targets);
    return at::cross_entropy_loss(logits, batch.targets);
  }

  /// cos and sin of HF's LlamaRotaryEmbedding ([s, head_dim], computed in
  /// fp32, then cast to the compute dtype), cached per length and dtype.
  std::pair<at::Tensor, at::Tensor> ropeTables(int64_t s, at::ScalarType dtype,
                                               at::Device device) {
    auto key = std::make_tuple(s, static_cast<int>(dtype), device.str());
    auto it = rope_.find(key);
    if (it != rope_.end())
      return it->second;
    const int64_t d = config_.hidden / config_.heads;
    at::Tensor exponents = at::arange(0, d, 2, at::kLong).to(at::kFloat) / d;
    at::Tensor invFreq = at::reciprocal(at::pow(config_.ropeTheta, exponents));
    if (config_.ropeScaling) {
      // transformers' _compute_llama3_parameters.
      const RopeScaling &r = *config_.ropeScaling;
      double oldLen = static_cast<double>(r.originalMaxSeqLen);
      double lowWavelen = oldLen / r.lowFreqFactor;
      double highWavelen = oldLen / r.highFreqFactor;
      at::Tensor wavelen = invFreq.reciprocal() * (2 * std::numbers::pi);
      at::Tensor scaled =
          at::where(wavelen > lowWavelen, invFreq / r.factor, invFreq);
      at::Tensor smooth = (wavelen.reciprocal() * oldLen - r.lowFreqFactor) /
                          (r.highFreqFactor - r.lowFreqFactor);
      at::Tensor smoothed =
          (1.0 - smooth) * scaled / r.factor + smooth * scaled;
      at::Tensor medium =
          at::logical_and(at::logical_not(wavelen < highWavelen),
                          at::logical_not(wavelen > lowWavelen));
      invFreq = at::where(medium, smoothed, scaled);
    }
    at::Tensor positions = at::arange(s, at::kFloat);
    at::Tensor freqs = at::outer(positions, invFreq);
    at::Tensor emb = at::cat({freqs, freqs}, -1);
    auto tables = std::make_pair(emb.cos().to(device, dtype),
                                 emb.sin().to(device, dtype));
    rope_[key] = tables;
    return tables;
  }

  ModelConfig config_;
  at::Device device_;
  int64_t lossChunkBytes_;
  // The mesh's tensor axis and this rank's place on it.
  int64_t tensor_ = 1, tensorRank_ = 0;
  bool sequenceParallel_ = false;
  // Tensor parallelism: each part's graph by (unit, micro-batch, part), the
  // residual stream a recompute's parts hand on by micro-batch, the bytes
  // of a unit's saves buffer its parts used so far by (unit, micro-batch),
  // and each micro-batch's log-sum-exp from its loss.
  std::map<std::tuple<int64_t, int64_t, int64_t>, PartRun> partRuns_;
  std::map<int64_t, Handover> partCarry_;
  std::map<std::pair<int64_t, int64_t>, int64_t> savesUsed_;
  std::map<int64_t, at::Tensor> logSumExp_;
  int64_t unplannedSaveBytes_ = 0;
  std::vector<UnitModel> units_;
  std::map<int64_t, MicroBatch> batches_;
  std::map<std::pair<int64_t, int64_t>, Run> runs_; // (unit, micro-batch)
  std::map<int64_t, Handover> hidden_;              // forward, by micro-batch
  std::map<int64_t, Handover> gradIn_;              // backward, by micro-batch
  std::map<int64_t, at::Tensor> losses_;
  std::map<int64_t, double> seeds_;
  std::map<std::tuple<int64_t, int, std::string>,
           std::pair<at::Tensor, at::Tensor>>
      rope_;
};

} // namespace

std::unique_ptr<Model> Model::create(const Schedule &schedule,
                                     at::Device device, int64_t tensorRank,
                                     int64_t lossChunkBytes) {
  return std::make_unique<TransformerModel>(schedule, device, tensorRank,
                                            lossChunkBytes);
}

void Model::check(const Schedule &schedule) {
  // Construction only resolves names and shapes; tensors come later.
  TransformerModel(schedule, at::kCPU, 0, kLossChunkBytes);
}

} // namespace plan::rt
