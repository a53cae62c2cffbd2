//===- WorkspaceModel.cpp - Memory a unit allocates while it runs ---------===//
//
// The bytes LibTorch allocates outside the planned arena while one unit
// computes: the runtime (runtime/models/Model.cpp) runs each unit as ATen
// ops, whose outputs are fresh allocations until autograd's copies land in
// the saves buffer and the locals are dropped. Each formula is the largest
// of a few moments of the unit's ops, each a sum of the tensors alive then,
// worked out from the ops and checked byte for byte against the cpu
// backend's allocation trace (`plan-run --memory-trace`) for fp32. The CPU's
// bf16 matmul and attention kernels allocate fp32 scratch copies that CUDA
// kernels do not; those are not counted. docs/sched.md ("Workspace model")
// lists the terms; keep the three in step.
//
//===----------------------------------------------------------------------===//

#include "analysis/WorkspaceModel.h"

#include "LoraNames.h"
#include "Schedule.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <initializer_list>

using namespace plan;

namespace {

constexpr int64_t kF32 = 4;

struct Sizes {
  int64_t t;     // tokens of the micro-batch
  int64_t s;     // sequence length
  int64_t h;     // hidden
  int64_t inter; // intermediate
  int64_t d;     // head_dim
  int64_t q;     // query width per token (heads x head_dim): a tensor
                 // rank's heads
  int64_t kv;    // key/value width per token (kv_heads x head_dim)
  int64_t ts;    // tokens of the residual stream: t, or under sequence
                 // parallelism a rank's 1/T of them
  int64_t vocab;
  int64_t maxPos;
  int64_t w;     // working-type bytes
  int64_t p;     // the unit's parameter elements
  int64_t chunk; // tokens per loss chunk
  int64_t chunks;
  bool frozen;                    // a LoRA base: no base weight gets a gradient
  int64_t mlpIn, mlpOut, attnOut; // under LoRA: those modules' adapters
  int64_t dropoutRank;            // LoRA dropout: the adapters' rank, or 0
  const std::vector<std::string> *dropped; // ... and the modules it drops
  /// The gradient elements of a base weight (and bias) of `full` elements,
  /// or under LoRA of its module's adapters (`adapters`).
  int64_t grad(int64_t full, int64_t adapters) const {
    return frozen ? adapters : full;
  }
  // An fp32 copy that a cast makes only when the working type is not fp32.
  int64_t f32Copy() const { return w == kF32 ? 0 : kF32; }
};

Sizes sizesOf(ModelAttr model, const WorkspaceShape &shape) {
  Sizes z;
  z.t = shape.microBatch * shape.seqLen;
  z.s = shape.seqLen;
  z.h = model.getHidden();
  // A tensor-parallel rank's share of what is divided (rounded up, as a
  // padded vocabulary is).
  const int64_t t = std::max<int64_t>(shape.share.ranks, 1);
  auto divided = [&](int64_t n) { return (n + t - 1) / t; };
  z.inter = divided(model.getIntermediate());
  int64_t heads = std::max<int64_t>(model.getHeads(), 1);
  int64_t kvHeads = model.getKvHeads() > 0 ? model.getKvHeads() : heads;
  z.d = z.h / heads;
  z.q = divided(heads) * z.d;
  z.kv = divided(kvHeads) * z.d;
  z.ts = streamTokens(z.t, shape.share);
  z.vocab = divided(model.getVocab());
  z.maxPos = model.getMaxSeqLen();
  z.w = shape.workingBytes;
  z.p = shape.params;
  // The loss runs in chunks of tokens (docs/models.md, "Loss chunks"); a
  // vocabulary-parallel head's part 1 has moments of its own.
  z.chunk = std::max<int64_t>(rt::lossChunkTokens(z.t, z.vocab), 1);
  z.chunks = (z.t + z.chunk - 1) / z.chunk;
  z.frozen = shape.frozenBase;
  z.mlpIn = shape.mlpInAdapters;
  z.mlpOut = shape.mlpOutAdapters;
  z.attnOut = shape.attnOutAdapters;
  z.dropoutRank = shape.dropoutRank;
  z.dropped = &shape.droppedModules;
  return z;
}

int64_t largest(std::initializer_list<int64_t> moments) {
  return std::max(moments);
}

/// LoRA dropout on the input of block module `module` ([tokens, in], its
/// output [tokens, out]), which the runtime calls with `base` bytes alive
/// (Model.cpp, UnitModel::dropped): with the module's output, first the
/// drop mask (a byte an element) next to a chunk of uniform fp32 values
/// (kDropoutChunkElements, whole rows, within a sequence), then the mask
/// next to the dropped input, then the dropped input next to x A^T. 0 when
/// the module has no dropout.
int64_t dropoutMoment(const Sizes &z, llvm::StringRef module, int64_t base,
                      int64_t out, int64_t in) {
  if (!z.dropoutRank || llvm::find(*z.dropped, module) == z.dropped->end())
    return 0;
  int64_t rows =
      std::min(z.s, std::max<int64_t>(1, rt::kDropoutChunkElements /
                                             std::max<int64_t>(in, 1)));
  int64_t mask = z.t * in, dropped = z.t * z.w * in;
  return base + z.t * z.w * out +
         largest({mask + kF32 * rows * in, mask + dropped,
                  dropped + z.t * z.w * z.dropoutRank});
}

/// LlamaRMSNorm's backward (statistics in fp32): the fp32 gradients of the
/// normalised value, of the squares and of the input, the product and power
/// rules' temporaries, and the input's gradient cast back, per token.
int64_t rmsNormBackwardPerToken(const Sizes &z) {
  return z.h * (4 * kF32 + z.w + z.f32Copy());
}

// Forward, per token: the MLP half's gate output, silu(gate) and up, then
// their product (3 of intermediate), while the attention half's output h1
// lives; the attention half's q, k and v repeated to all heads, the SDPA
// output and its contiguous copy (5 of hidden) next to the un-repeated k and
// v; RMSNorm's fp32 input copy, square and scaled value next to h1.
// Under LoRA dropout, each dropped module's moment (dropoutMoment) with
// what is alive when it runs: the normalised input and the projections
// before it; the attention's output; the normalised input next to h1, and
// silu(gate) for up_proj; h1 and the product for down_proj.
int64_t llamaBlockForward(const Sizes &z) {
  const int64_t t = z.t, w = z.w, h = z.h, kv = z.kv, inter = z.inter;
  return largest(
      {t * largest({3 * w * inter + w * h, 5 * w * h + 2 * w * kv,
                    w * h + 2 * kF32 * h + z.f32Copy() * h}),
       dropoutMoment(z, "self_attn.q_proj", t * w * h, h, h),
       dropoutMoment(z, "self_attn.k_proj", t * w * 2 * h, kv, h),
       dropoutMoment(z, "self_attn.v_proj", t * w * (2 * h + kv), kv, h),
       dropoutMoment(z, "self_attn.o_proj", t * w * h, h, h),
       dropoutMoment(z, "mlp.gate_proj", t * w * 2 * h, inter, h),
       dropoutMoment(z, "mlp.up_proj", t * w * (2 * h + inter), inter, h),
       dropoutMoment(z, "mlp.down_proj", t * w * (h + inter), h, inter)});
}

// Backward: down_proj's weight gradient with the gradients of the product,
// gate and up (3 of intermediate per token); at the end every weight
// gradient (autograd returns them together) while the input RMSNorm's
// backward runs; between, SDPA's backward (dq, dk, dv, its output's
// gradient and the residual's) after the MLP's weight gradients.
int64_t llamaBlockBackward(const Sizes &z) {
  return largest({z.w * (z.grad(z.inter * z.h, z.mlpOut) + 3 * z.t * z.inter),
                  z.w * z.p + z.t * rmsNormBackwardPerToken(z),
                  z.w * z.grad(3 * z.h * z.inter, z.mlpIn + z.mlpOut) +
                      z.t * 6 * z.w * z.h});
}

// Forward: c_fc's output and the GELU output next to h1; the attention
// half's qkv, SDPA output, its copy and c_proj's output (6 of hidden).
// Under LoRA dropout, each dropped module's moment (dropoutMoment): c_attn
// with ln_1's output, attn.c_proj with the attention's output, c_fc with h1
// and ln_2's output, mlp.c_proj with h1 and the GELU output.
int64_t gpt2BlockForward(const Sizes &z) {
  const int64_t t = z.t, w = z.w, h = z.h, inter = z.inter;
  return largest(
      {t * w * largest({h + 2 * inter, 6 * h}),
       dropoutMoment(z, "attn.c_attn", t * w * h, 3 * h, h),
       dropoutMoment(z, "attn.c_proj", t * w * h, h, h),
       dropoutMoment(z, "mlp.c_fc", t * w * 2 * h, inter, h),
       dropoutMoment(z, "mlp.c_proj", t * w * (h + inter), h, inter)});
}

// BERT's block forward has GPT-2's moments; under LoRA dropout, query with
// nothing else alive (its input is the block's), key and value after the
// projections before them, attention.output.dense with the attention's
// output, intermediate.dense with h1, output.dense with h1 and the GELU
// output.
int64_t bertBlockForward(const Sizes &z) {
  const int64_t t = z.t, w = z.w, h = z.h, inter = z.inter;
  return largest(
      {gpt2BlockForward(z), dropoutMoment(z, "attention.self.query", 0, h, h),
       dropoutMoment(z, "attention.self.key", t * w * h, h, h),
       dropoutMoment(z, "attention.self.value", t * w * 2 * h, h, h),
       dropoutMoment(z, "attention.output.dense", t * w * h, h, h),
       dropoutMoment(z, "intermediate.dense", t * w * h, inter, h),
       dropoutMoment(z, "output.dense", t * w * (h + inter), h, inter)});
}

// Backward: mlp.c_proj's weight and bias gradients with the gradients of the
// GELU output and input (2 of intermediate per token); SDPA's backward
// (qkv's gradient in three parts and its concatenation, the output's
// gradient and the residual's: 7 of hidden) after the MLP's and c_proj's
// weight gradients; at the end every weight gradient with ln_1's backward.
int64_t gpt2BlockBackward(const Sizes &z) {
  int64_t mlp =
      z.grad(2 * z.h * z.inter + z.inter + 3 * z.h, z.mlpIn + z.mlpOut);
  int64_t proj = z.grad(z.h * z.h + z.h, z.attnOut);
  return largest(
      {z.w * (z.grad(z.inter * z.h + z.h, z.mlpOut) + 2 * z.t * z.inter),
       z.w * (mlp + proj) + 7 * z.t * z.w * z.h,
       z.w * z.p + 3 * z.t * z.w * z.h});
}

// Forward: the final norm's output for the whole micro-batch, then per loss
// chunk its logits in the working type (a separate tensor unless that is
// fp32), in fp32, and their log-probabilities, plus the loss scalars.
int64_t headForward(const Sizes &z) {
  return z.t * z.w * z.h +
         z.chunk * z.vocab * (2 * kF32 + (z.w == kF32 ? 0 : z.w)) + 8;
}

// Backward, per chunk: the loss's gradient and the log-softmax gradient (2
// fp32 logits); the fp32 gradient and its cast to the working type; then
// the logits' gradient, lm_head's weight gradient and the hidden gradient.
// With several chunks the sums of the earlier chunks' weight and hidden
// gradients (each chunk's widened to the micro-batch) live next to them. At
// the end, every weight gradient next to the norm's backward.
int64_t headBackward(const Sizes &z, int64_t normBackwardPerToken) {
  int64_t logits = z.chunk * z.vocab;
  int64_t weight = z.grad(z.vocab * z.h, 0); // lm_head's (a LoRA base's: none)
  int64_t earlier = z.chunks > 1 ? z.w * (weight + z.t * z.h) : int64_t{0};
  return largest({2 * kF32 * logits + earlier,
                  z.w == kF32 ? 0 : (kF32 + z.w) * logits + earlier,
                  z.w * (logits + weight + z.t * z.h) + earlier,
                  z.w * z.p + z.t * normBackwardPerToken}) +
         4;
}

// BERT's block forward has GPT-2's moments (c_fc's output and the GELU
// output next to h1; q, k, v, the SDPA output and the residual sums).
// Backward starts at the output LayerNorm (post-LN): the MLP's moment of
// GPT-2 (output.dense's weight gradient with the gradients of the GELU
// output and input) holds the LayerNorm's input gradient and its weight and
// bias gradients too; the attention half's moments are GPT-2's, with the
// attention LayerNorm's input gradient.
int64_t bertBlockBackward(const Sizes &z) {
  return largest({z.w * (z.t * z.h + 2 * z.t * z.inter +
                         z.grad(z.inter * z.h + 3 * z.h, z.mlpOut)),
                  gpt2BlockBackward(z) + z.t * z.w * z.h});
}

// BERT's classification head works on one token of each of the b sequences:
// forward, the pooler's output, its tanh and the logits in the working type
// and in fp32 with their log-probabilities; backward, every weight gradient
// next to the input's gradient, which selecting the first token widens to
// the whole micro-batch (zeros elsewhere).
int64_t classificationForward(const Sizes &z, int64_t labels) {
  int64_t b = z.t / std::max<int64_t>(z.s, 1);
  return b * (2 * z.w * z.h + labels * (z.w + 2 * kF32)) + 8;
}
int64_t classificationBackward(const Sizes &z, int64_t labels) {
  int64_t b = z.t / std::max<int64_t>(z.s, 1);
  return z.w * (z.p + z.t * z.h) + b * labels * 2 * kF32 + 8;
}

// A vocabulary-parallel head's part 1 (TensorParallel.cpp) computes no
// loss (sched.loss does, from every rank's statistics). Forward: next to its
// input's leaf, its slice's fp32 logits (the working-type ones are freed
// once converted) and their exponentials (lossStatistics), with each
// token's maximum, shift and sum of exponentials (3 fp32). Backward: the
// fp32 loss gradient (lossGradient) with its cast to the working type as
// autograd hands it to lm_head, that slice's weight gradient and the
// input's, a token's fp32 mask of counted targets, and a scalar.
int64_t vocabParallelHeadForward(const Sizes &z) {
  return z.t * z.w * z.h + z.t * z.vocab * 2 * kF32 + 3 * kF32 * z.t;
}
int64_t vocabParallelHeadBackward(const Sizes &z) {
  return z.t * z.vocab * (kF32 + (z.w == kF32 ? 0 : z.w)) +
         z.w * (z.vocab * z.h + z.t * z.h) + kF32 * z.t + 4;
}

// Tensor parallelism runs a block in five parts (TensorParallelParts.h:
// input norm, attention, residual and second norm, MLP, residual), each
// with its own moments. A part after the first copies its exchanged input
// into a leaf of its own first (Model.cpp, exchangeLeaf: `w h` a token);
// under sequence parallelism the norm and residual parts hold the rank's
// `ts` tokens, the attention and the MLP all `t`, and a part that leaves
// through a reduce-scatter lays its output out for it in a copy while its
// full-expression temporaries live (toExchange). Each was worked out from
// the ops and measured to the byte in fp32 (and bf16 where CPU kernels add
// no scratch) against `plan-run --memory-trace`.

// RMSNorm's forward on `tokens`: the fp32 input (a copy unless fp32), the
// scaled value, and 3 fp32 statistics a token (mean, + eps, rsqrt).
int64_t rmsNormForward(const Sizes &z, int64_t tokens) {
  return tokens * (2 * kF32 * z.h + z.f32Copy() * z.h + 3 * kF32);
}
// Its backward within a part: five fp32 [tokens, hidden] tensors next to
// the weight's gradient.
int64_t rmsNormPartBackward(const Sizes &z, int64_t tokens) {
  return z.w * z.h + tokens * 5 * kF32 * z.h;
}
// GPT-2's LayerNorm forward: its output next to the fp32 mean and rstd.
int64_t layerNormForward(const Sizes &z, int64_t tokens) {
  return tokens * (z.w * z.h + 2 * kF32);
}

int64_t llamaBlockPartForward(const Sizes &z, int64_t part, bool sp) {
  const int64_t w = z.w, h = z.h;
  switch (part) {
  case 0:
    return rmsNormForward(z, z.ts);
  case 1: // the leaf; q, k and v, q and k with RoPE, k and v repeated, the
          // SDPA output and its copy (5 q + 2 kv); o_proj's output, its
          // copy for the reduce-scatter and the attention's output (SP)
    return z.t * w *
           std::max(h + 5 * z.q + 2 * z.kv, sp ? 3 * h + z.q : int64_t{0});
  case 2: // the leaf, h1 and the second norm
    return z.ts * 2 * w * h + rmsNormForward(z, z.ts);
  case 3: // the leaf with silu(gate), up and their product; with the
          // product and down_proj's output; that output's copy (SP)
    return z.t * w *
           largest({h + 3 * z.inter, 2 * h + z.inter, sp ? 3 * h : 0});
  default: // the leaf and the block's output
    return 2 * z.ts * w * h;
  }
}

int64_t llamaBlockPartBackward(const Sizes &z, int64_t part) {
  const int64_t w = z.w, h = z.h;
  switch (part) {
  case 0:
  case 2:
    return rmsNormPartBackward(z, z.ts);
  case 1: // o, k and v's weight gradients with the input's three gradients
          // and q's; at the end every weight gradient next to the input's
          // gradient and q, k and v's (repeated to every head)
    return std::max(w * h * (z.q + 2 * z.kv) + z.t * w * (3 * h + z.q),
                    w * h * (2 * z.q + 2 * z.kv) + z.t * w * (h + 3 * z.q));
  case 3: // down_proj's weight gradient with the gradients of the product,
          // gate and up; at the end the three weight gradients with the
          // input's two gradients and their sum (or up's gradient)
    return std::max(
        w * (z.inter * h + 3 * z.t * z.inter),
        w * (3 * z.inter * h + z.t * std::max(3 * h, 2 * h + z.inter)));
  default:
    return 0;
  }
}

int64_t gpt2BlockPartForward(const Sizes &z, int64_t part, bool sp) {
  const int64_t w = z.w, h = z.h;
  switch (part) {
  case 0:
    return layerNormForward(z, z.ts);
  case 1: // the leaf, c_attn's q, k and v (alive through their views) and
          // the SDPA output with its fp32 log-sum-exp per head (the CPU
          // kernel's per-thread blocks are not counted); c_proj's output,
          // its copy for the reduce-scatter and the SDPA output (SP)
    return std::max(z.t * (w * (h + 4 * z.q) + kF32 * (z.q / z.d)),
                    sp ? z.t * w * (3 * h + z.q) : int64_t{0});
  case 2: // the leaf, h1 and ln_2
    return z.ts * 2 * w * h + layerNormForward(z, z.ts);
  case 3: // the leaf, c_fc's output and the GELU's; then the GELU's with
          // c_proj's output; that output's copy (SP)
    return z.t * w *
           largest({h + 2 * z.inter, 2 * h + z.inter, sp ? 3 * h : 0});
  default: // the leaf, the bias added and the block's output
    return 3 * z.ts * w * h;
  }
}

int64_t gpt2BlockPartBackward(const Sizes &z, int64_t part) {
  const int64_t w = z.w, h = z.h;
  switch (part) {
  case 0:
  case 2: // the LayerNorm's input gradient (and its fp32 intermediate)
          // next to its weight and bias gradients
    return 2 * z.ts * w * h + 2 * w * h;
  case 1: // at the end every weight gradient (c_attn's weight and bias,
          // c_proj's weight) with the input's gradient and q, k and v's
    return w * (4 * h * z.q + 3 * z.q) + z.t * w * (h + 3 * z.q);
  case 3: // c_proj's weight gradient with the GELU's two gradients; at the
          // end c_fc's and c_proj's weights and c_fc's bias with the
          // input's gradient and c_fc's output gradient
    return std::max(w * (z.inter * h + 2 * z.t * z.inter),
                    w * (2 * z.inter * h + z.inter + z.t * (h + z.inter)));
  default: // c_proj's bias gradient
    return w * h;
  }
}

bool isClassificationHead(UnitKind kind, ModelAttr model) {
  return kind == UnitKind::BertHead &&
         model.getBertHead() == BertHead::SequenceClassification;
}

} // namespace

int64_t plan::forwardWorkspaceBytes(UnitKind kind, ModelAttr model,
                                    const WorkspaceShape &shape, int64_t part) {
  Sizes z = sizesOf(model, shape);
  if (shape.share.ranks > 1) {
    bool sp = shape.share.sequenceParallel;
    switch (kind) {
    case UnitKind::LlamaBlock:
      return llamaBlockPartForward(z, part, sp);
    case UnitKind::GPT2Block:
      return gpt2BlockPartForward(z, part, sp);
    case UnitKind::LlamaHead: // part 0: the final norm
      return part == 0 ? rmsNormForward(z, z.ts) : vocabParallelHeadForward(z);
    case UnitKind::GPT2Head:
      return part == 0 ? layerNormForward(z, z.ts)
                       : vocabParallelHeadForward(z);
    default:
      break;
    }
  }
  if (isClassificationHead(kind, model))
    return classificationForward(z, model.getNumLabels());
  switch (kind) {
  case UnitKind::Embedding:
    // The gathered rows (the output, before it moves into the saves
    // buffer); GPT-2 also gathers the position rows, adds them and makes
    // the position ids (int64).
    // BERT adds the token-type and position rows by broadcasting, then its
    // LayerNorm writes the output (and mean and rstd) next to the sum.
    if (model.getFamily() == ModelFamily::Llama)
      return z.t * z.w * z.h;
    if (model.getFamily() == ModelFamily::Bert)
      return 2 * z.t * z.w * z.h + 2 * kF32 * z.t;
    return z.w * (2 * z.t * z.h + z.s * z.h) + 8 * z.s;
  case UnitKind::LlamaBlock:
    return llamaBlockForward(z);
  case UnitKind::GPT2Block:
    return gpt2BlockForward(z);
  case UnitKind::BertBlock:
    return bertBlockForward(z);
  case UnitKind::LlamaHead:
  case UnitKind::GPT2Head:
  case UnitKind::BertHead:
    return headForward(z);
  }
  return 0;
}

int64_t plan::backwardWorkspaceBytes(UnitKind kind, ModelAttr model,
                                     const WorkspaceShape &shape,
                                     int64_t part) {
  Sizes z = sizesOf(model, shape);
  if (shape.share.ranks > 1) {
    switch (kind) {
    case UnitKind::LlamaBlock:
      return llamaBlockPartBackward(z, part);
    case UnitKind::GPT2Block:
      return gpt2BlockPartBackward(z, part);
    case UnitKind::LlamaHead:
      return part == 0 ? rmsNormPartBackward(z, z.ts)
                       : vocabParallelHeadBackward(z);
    case UnitKind::GPT2Head: // part 0, ln_f: as measured, its input's
      if (part == 0)         // gradient next to 4 h of the working type
        return z.ts * z.w * z.h + 4 * z.w * z.h;
      return vocabParallelHeadBackward(z);
    default:
      break;
    }
  }
  if (isClassificationHead(kind, model))
    return classificationBackward(z, model.getNumLabels());
  switch (kind) {
  case UnitKind::Embedding:
    // The dense gradient of the token table; GPT-2 also of the position
    // table, and the position rows' gradient summed over the batch.
    // BERT: the LayerNorm's input gradient next to every table's gradient
    // (word, position, token type) and the LayerNorm's. A LoRA base's
    // embedding has nothing to differentiate: its backward computes none.
    if (z.frozen && z.p == 0)
      return 0;
    if (model.getFamily() == ModelFamily::Llama)
      return z.w * z.vocab * z.h;
    if (model.getFamily() == ModelFamily::Bert)
      return z.w * z.h * (z.vocab + z.maxPos + model.getTypeVocab() + 2 + z.t);
    return z.w * (z.vocab * z.h + z.maxPos * z.h + z.s * z.h);
  case UnitKind::LlamaBlock:
    return llamaBlockBackward(z);
  case UnitKind::GPT2Block:
    return gpt2BlockBackward(z);
  case UnitKind::BertBlock:
    return bertBlockBackward(z);
  case UnitKind::LlamaHead:
    return headBackward(z, rmsNormBackwardPerToken(z));
  case UnitKind::GPT2Head:
    return headBackward(z, 3 * z.w * z.h);
  case UnitKind::BertHead: // masked LM: the transform's gradients too
    return headBackward(z, 4 * z.w * z.h);
  }
  return 0;
}

WorkspaceShape plan::workspaceShapeOf(UnitOp unit, PlanOp plan,
                                      WorkspaceShape base) {
  WorkspaceShape s = base;
  s.params = 0;
  s.frozenBase = false;
  s.mlpInAdapters = s.mlpOutAdapters = s.attnOutAdapters = 0;
  s.dropoutRank = 0;
  s.droppedModules.clear();
  s.share = tensorShareOf(plan);
  LoraAttr lora = plan.getModel().getLora();
  bool dropout = lora && lora.getDropout().value > 0;
  for (ParamOp param : unit.getBody().getOps<ParamOp>()) {
    // A tied parameter trains when the one it ties to does.
    ParamOp stored =
        param.getTiedTo() ? plan.lookupTiedTo(param).second : param;
    if (!stored || stored.getFrozen()) {
      s.frozenBase = true;
      continue;
    }
    int64_t numel = stored.getLocalNumel(s.share.ranks);
    s.params += numel;
    std::optional<std::string_view> adapterOf =
        rt::loraAdapterModule(param.getParamName());
    if (!adapterOf)
      continue;
    // The module's place in the block, by the family's names.
    llvm::StringRef module = rt::moduleInBlock(*adapterOf);
    if (dropout && rt::isLoraA(param.getParamName())) {
      s.dropoutRank = static_cast<int64_t>(lora.getRank());
      s.droppedModules.push_back(module.str());
    }
    if (llvm::is_contained({"mlp.down_proj", "mlp.c_proj", "output.dense"},
                           module))
      s.mlpOutAdapters += numel;
    else if (llvm::is_contained({"mlp.gate_proj", "mlp.up_proj", "mlp.c_fc",
                                 "intermediate.dense"},
                                module))
      s.mlpInAdapters += numel;
    else if (llvm::is_contained(
                 {"self_attn.o_proj", "attn.c_proj", "attention.output.dense"},
                 module))
      s.attnOutAdapters += numel;
  }
  return s;
}

int64_t plan::gpuLibraryWorkspaceBytes(llvm::StringRef deviceName,
                                       ModelFamily family) {
  constexpr int64_t kKiB = 1024, kMiB = 1024 * kKiB;
  bool hopper = deviceName.starts_with("h100") ||
                deviceName.starts_with("h200") || deviceName == "custom";
  int64_t cublas = hopper ? 32 * kMiB : 8 * kMiB + 128 * kKiB;
  int64_t cublasLt = family == ModelFamily::Llama ? 0 : kMiB;
  constexpr int64_t kThreads = 2; // the executor's and autograd's
  return kThreads * (cublas + cublasLt);
}
