//===- ActivationModel.cpp - Memory a unit saves for backward -------------===//
//
// Counts the tensors LibTorch autograd keeps alive between a unit's forward
// and its backward when the runtime runs the unit as ordinary LibTorch ops
// (fused RMSNorm / LayerNorm that save their input and per-row statistics,
// scaled_dot_product_attention with the flash / memory-efficient kernel that
// saves q, k, v, its output and a per-row logsumexp). docs/sched.md
// ("Activation model") derives each formula term by term; keep the two in
// step.
//
//===----------------------------------------------------------------------===//

#include "passes/ActivationModel.h"

#include <algorithm>

using namespace plan;

namespace {

/// The sizes the formulas use, named as in docs/sched.md.
struct ActivationShape {
  int64_t tokens; // b * s
  int64_t b;
  int64_t s;
  int64_t h;     // hidden
  int64_t inter; // intermediate
  int64_t heads; // attention heads
  int64_t kvDim; // kv_heads * head_dim
  int64_t vocab;
};

ActivationShape shapeOf(ModelAttr model, int64_t microBatch, int64_t seqLen) {
  ActivationShape shape;
  shape.b = microBatch;
  shape.s = seqLen;
  shape.tokens = microBatch * seqLen;
  shape.h = model.getHidden();
  shape.inter = model.getIntermediate();
  shape.heads = model.getHeads();
  int64_t headDim = shape.heads > 0 ? shape.h / shape.heads : 0;
  int64_t kvHeads = model.getKvHeads() > 0 ? model.getKvHeads() : shape.heads;
  shape.kvDim = kvHeads * headDim;
  shape.vocab = model.getVocab();
  return shape;
}

// Per token: input x, rstd, norm output, q, k, v, SDPA output, logsumexp (one
// per head), o_proj input, residual h1, rstd, norm output, gate, up,
// silu(gate), silu(gate) * up.
int64_t llamaBlock(const ActivationShape &a) {
  return a.tokens * (6 * a.h + 2 * a.kvDim + 4 * a.inter + 2 + a.heads);
}

// Per token: input x, LayerNorm mean and rstd, ln_1 output, qkv, SDPA output,
// logsumexp, c_proj input, residual h1, mean and rstd, ln_2 output, c_fc
// output (GELU input), GELU output.
int64_t gpt2Block(const ActivationShape &a) {
  return a.tokens * (9 * a.h + 2 * a.inter + 4 + a.heads);
}

// Post-LN. Per token: input x, q, k, v, SDPA output, logsumexp,
// attention.output.dense input, first LayerNorm input, mean and rstd, its
// output, intermediate output (GELU input), GELU output, second LayerNorm
// input, mean and rstd.
int64_t bertBlock(const ActivationShape &a) {
  return a.tokens * (9 * a.h + 2 * a.inter + 4 + a.heads);
}

// Token ids for the embedding gathers' backward; BERT also keeps the token
// type ids and its embedding LayerNorm (input, mean, rstd). Position ids are
// one row of s shared by the micro-batch.
int64_t embedding(ModelFamily family, const ActivationShape &a) {
  switch (family) {
  case ModelFamily::Llama:
    return a.tokens;
  case ModelFamily::GPT2:
    return a.tokens + a.s;
  case ModelFamily::Bert:
    return a.tokens * (2 + a.h + 2) + a.s;
  }
  return a.tokens;
}

// Per token: final norm input, its statistics, norm output (lm_head input),
// fp32 logits, log-softmax output, label.
int64_t llamaHead(const ActivationShape &a) {
  return a.tokens * (2 * a.h + 1 + 2 * a.vocab + 1);
}
int64_t gpt2Head(const ActivationShape &a) {
  return a.tokens * (2 * a.h + 2 + 2 * a.vocab + 1);
}

// MaskedLM per token: transform.dense input (the unit's input), GELU input,
// GELU output (LayerNorm input), mean and rstd, decoder input, logits,
// log-softmax output, label. SequenceClassification: the unit's input per
// token, then per sequence the pooler input, tanh output, logits,
// log-softmax output and label.
int64_t bertHead(ModelAttr model, const ActivationShape &a) {
  if (model.getBertHead() == BertHead::SequenceClassification)
    return a.tokens * a.h + a.b * (2 * a.h + 2 * model.getNumLabels() + 1);
  return a.tokens * (4 * a.h + 2 + 2 * a.vocab + 1);
}

} // namespace

int64_t plan::activationElements(UnitKind kind, ModelAttr model,
                                 int64_t microBatch, int64_t seqLen) {
  ActivationShape a = shapeOf(model, microBatch, seqLen);
  int64_t elements = 0;
  switch (kind) {
  case UnitKind::Embedding:
    elements = embedding(model.getFamily(), a);
    break;
  case UnitKind::LlamaBlock:
    elements = llamaBlock(a);
    break;
  case UnitKind::GPT2Block:
    elements = gpt2Block(a);
    break;
  case UnitKind::BertBlock:
    elements = bertBlock(a);
    break;
  case UnitKind::LlamaHead:
    elements = llamaHead(a);
    break;
  case UnitKind::GPT2Head:
    elements = gpt2Head(a);
    break;
  case UnitKind::BertHead:
    elements = bertHead(model, a);
    break;
  }
  // A buffer holds at least one element, even for a degenerate shape.
  return std::max<int64_t>(elements, 1);
}

int64_t plan::checkpointElements(ModelAttr model, int64_t microBatch,
                                 int64_t seqLen) {
  return std::max<int64_t>(microBatch * seqLen * model.getHidden(), 1);
}
