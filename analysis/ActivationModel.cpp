//===- ActivationModel.cpp - Memory a unit saves for backward -------------===//
//
// The bytes the runtime keeps between a unit's forward and its backward. The
// runtime runs each unit as LibTorch ops under autograd and copies every
// tensor autograd saves into the unit's saves buffer, storage by storage,
// each 64-byte aligned (runtime/models/SavedActivations.h); the parameters,
// the token ids and targets and the rope tables are kept by reference. The
// formulas count those storages for the ops of runtime/models/Model.cpp.
// docs/sched.md ("Activation model") lists them term by term; keep the
// three in step.
//
//===----------------------------------------------------------------------===//

#include "analysis/ActivationModel.h"

#include "LoraNames.h"
#include "Schedule.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"

#include <algorithm>
#include <initializer_list>

using namespace plan;

namespace {

/// The sizes the formulas use, named as in docs/sched.md. Under tensor
/// parallelism (`tensor` ranks) they are one rank's: its heads,
/// intermediate features and vocabulary rows, and `normTokens` the tokens
/// the norms, residuals and hand-over compute on (1/T of them under
/// sequence parallelism, where `tokens` stays what the column- and
/// row-parallel layers see).
struct ActivationShape {
  int64_t tokens; // b * s
  int64_t normTokens;
  int64_t b;
  int64_t s;
  int64_t h;     // hidden
  int64_t inter; // intermediate (this rank's)
  int64_t heads; // attention heads (this rank's)
  int64_t vocab; // vocabulary rows (this rank's)
  int64_t tensor;
};

ActivationShape shapeOf(ModelAttr model, int64_t microBatch, int64_t seqLen,
                        TensorShare share) {
  auto divided = [&](int64_t n) { return (n + share.ranks - 1) / share.ranks; };
  ActivationShape shape;
  shape.b = microBatch;
  shape.s = seqLen;
  shape.tokens = microBatch * seqLen;
  shape.normTokens = streamTokens(shape.tokens, share);
  shape.h = model.getHidden();
  shape.inter = divided(model.getIntermediate());
  shape.heads = divided(model.getHeads());
  shape.vocab = divided(model.getVocab());
  shape.tensor = share.ranks;
  return shape;
}

// Each saved storage starts on a kSavesAlignment boundary (Schedule.h): one
// alignment's worth per storage bounds the padding.
// fp32 statistics (rstd, mean, logsumexp) and log-probabilities; LayerNorm's
// mean and rstd are fp32 on CUDA and the working type on the CPU: counted as
// fp32.
constexpr int64_t kF32 = 4;

/// SDPA's fp32 logsumexp, per head and query: CUDA's memory-efficient kernel
/// (fp32 compute) pads each sequence's to a multiple of 32 queries.
int64_t logsumexpBytes(const ActivationShape &a) {
  return kF32 * a.heads * a.b * ((a.s + 31) / 32 * 32);
}

/// Bytes of `tokens` x `perToken` plus `fixed`, and the padding of `storages`
/// saved storages.
int64_t bytes(int64_t tokens, int64_t perToken, int64_t fixed,
              int64_t storages) {
  return tokens * perToken + fixed + storages * rt::kSavesAlignment;
}

/// What one RMSNorm (LlamaRMSNorm: statistics in fp32) saves per token, and
/// how many storages: rstd, the normalised value in the working type and the
/// scaled output (the next linear's input), and the input in fp32. That is
/// a new tensor, except when the input is already fp32 and is the unit's
/// own input, which the runtime keeps by reference.
struct Saved {
  int64_t perToken, storages;
};
Saved rmsNorm(const ActivationShape &a, int64_t w, bool unitInput) {
  if (unitInput && w == kF32)
    return {kF32 + 2 * w * a.h, 3};
  return {kF32 * a.h + kF32 + 2 * w * a.h, 4};
}

// Its input norm and the norm of the residual h1; SDPA's q and k after RoPE
// and v, k and v repeated to all heads (grouped-query attention repeats them
// before the kernel), its output and fp32 logsumexp (5 storages, plus 2 for
// the CUDA kernels' RNG seed and offset); MLP gate and up outputs,
// silu(gate) and silu(gate) * up (4); the block's output (1). The o_proj
// input is a view of the SDPA output, the residual sums save nothing.
//
// Under tensor parallelism each norm's scaled output is what its part
// exchanges, and the next part's column-parallel layers save their input
// (the exchanged activation, every token) instead; q, k, v, the attention
// output and the MLP's four are this rank's heads' and features' (the
// `4 w h` and `4 w inter` terms, over T); under sequence parallelism the
// norms and the block's output cover 1/T of the tokens. The residual sum h1
// is kept from the part that makes it to the part that adds the MLP's
// output to it: in fp32 it is the second norm's fp32 input, counted there;
// in a 16-bit working type it is a tensor of its own (one storage more).
int64_t llamaBlock(const ActivationShape &a, int64_t w) {
  Saved input = rmsNorm(a, w, true), inner = rmsNorm(a, w, false);
  if (a.tensor == 1) {
    int64_t perToken = input.perToken + inner.perToken + 4 * w * a.h +
                       4 * w * a.inter + w * a.h;
    return bytes(a.tokens, perToken, logsumexpBytes(a),
                 input.storages + inner.storages + 5 + 2 + 4 + 1);
  }
  const bool ownResidual = w != kF32;
  int64_t norms = input.perToken + inner.perToken - 2 * w * a.h + w * a.h +
                  (ownResidual ? w * a.h : 0);
  int64_t layers = 2 * w * a.h + 4 * w * a.h / a.tensor + 4 * w * a.inter;
  return bytes(a.normTokens, norms, 0, 0) +
         bytes(a.tokens, layers, logsumexpBytes(a),
               input.storages + inner.storages + 5 + 2 + 4 + 1 +
                   (ownResidual ? 1 : 0));
}

// ln_1's mean, rstd and output (its input is the unit's); qkv (SDPA saves
// three views of it), the SDPA output and logsumexp (+2 RNG tensors on
// CUDA); ln_2's input (the residual h1), mean, rstd and output; c_fc output
// (the GELU input) and the GELU output; the block's output.
//
// Under tensor parallelism the layer norms' statistics, ln_2's input and
// the block's output cover the norms' tokens (1/T under sequence
// parallelism); ln_1's and ln_2's outputs are the exchanged inputs of
// c_attn and c_fc (every token); qkv, the attention output and the MLP's
// two are this rank's heads' and features'.
int64_t gpt2Block(const ActivationShape &a, int64_t w) {
  if (a.tensor == 1) {
    int64_t perToken = w * (8 * a.h + 2 * a.inter) + 4 * kF32;
    return bytes(a.tokens, perToken, logsumexpBytes(a), 3 + 3 + 2 + 4 + 2 + 1);
  }
  int64_t norms = 2 * w * a.h + 4 * kF32;
  int64_t layers = 2 * w * a.h + 4 * w * a.h / a.tensor + 2 * w * a.inter;
  return bytes(a.normTokens, norms, 0, 0) +
         bytes(a.tokens, layers, logsumexpBytes(a), 3 + 3 + 2 + 4 + 2 + 1);
}

// Post-LN. q, k and v (SDPA saves them), its output (also the
// attention.output.dense input) and fp32 logsumexp (5 storages, plus 2 for
// the CUDA kernels' RNG seed and offset); the first LayerNorm's input (the
// residual sum), mean and rstd (3), its output h1 (the intermediate.dense
// input, 1); the GELU input and output (2); the second LayerNorm's input,
// mean and rstd (3); the block's output (1). The block's input is kept by
// reference.
int64_t bertBlock(const ActivationShape &a, int64_t w) {
  int64_t perToken = w * (8 * a.h + 2 * a.inter) + 4 * kF32;
  return bytes(a.tokens, perToken, logsumexpBytes(a),
               5 + 2 + 3 + 1 + 2 + 3 + 1);
}

// The embedding's output (the first block's input); the gather's backward
// needs only the token ids, which the runtime keeps by reference. GPT-2 also
// saves the position ids (int64, one row of s). BERT adds its token-type row
// and position rows by broadcasting (nothing saved) and saves its
// LayerNorm's input, mean and rstd.
//
// Under tensor parallelism the lookup of this rank's rows also keeps the
// token ids shifted into its slice (int64) and which of them it holds
// (bool), and the output covers the norms' tokens.
int64_t embedding(ModelFamily family, const ActivationShape &a, int64_t w) {
  int64_t slice = a.tensor > 1 ? bytes(a.tokens, 8 + 1, 0, 2) : 0;
  switch (family) {
  case ModelFamily::Llama:
    return slice + bytes(a.normTokens, w * a.h, 0, 1);
  case ModelFamily::GPT2:
    return slice + bytes(a.normTokens, w * a.h, 8 * a.s, 2);
  case ModelFamily::Bert:
    return bytes(a.tokens, 2 * w * a.h + 2 * kF32, 0, 4);
  }
  return 0;
}

// The loss runs in chunks of tokens (lossChunkTokens, Schedule.h); each
// chunk's cross_entropy saves its fp32 log-probabilities (counted per token
// below) and an fp32 total-weight scalar: two storages and 4 bytes a chunk.
int64_t lossChunks(const ActivationShape &a) {
  int64_t chunk = rt::lossChunkTokens(a.tokens, a.vocab);
  return (a.tokens + chunk - 1) / chunk;
}

// The final norm (RMSNorm; LayerNorm: mean, rstd, output), then the loss
// chunks. The targets are kept by reference. With `ownInput` the unit's
// input is its own to keep too (it came from a block checkpointed without a
// graph, which keeps no copy): one more storage of w h a token, which for an
// fp32 RMSNorm is its fp32 input.
//
// Under tensor parallelism (vocabulary-parallel loss, no chunks) the norm
// covers the norms' tokens and its output is the exchanged input of
// lm_head (every token); the loss keeps this rank's fp32 logits, from
// which backward takes the softmax with the gathered statistics, and the
// per-token log-sum-exp and target logit (2 fp32).
int64_t llamaHead(const ActivationShape &a, int64_t w, bool ownInput) {
  Saved norm = rmsNorm(a, w, true);
  int64_t own = ownInput ? w * a.h : 0;
  if (a.tensor > 1)
    return bytes(a.normTokens, norm.perToken - w * a.h + own, 0, 0) +
           bytes(a.tokens, w * a.h + kF32 * (a.vocab + 2), 0,
                 norm.storages + 3 + (ownInput ? 1 : 0));
  int64_t chunks = lossChunks(a);
  int64_t perToken = norm.perToken + kF32 * a.vocab + own;
  return bytes(a.tokens, perToken, kF32 * chunks,
               norm.storages + 2 * chunks + (ownInput ? 1 : 0));
}
int64_t gpt2Head(const ActivationShape &a, int64_t w, bool ownInput) {
  int64_t own = ownInput ? w * a.h : 0;
  if (a.tensor > 1)
    return bytes(a.normTokens, 2 * kF32 + own, 0, 0) +
           bytes(a.tokens, w * a.h + kF32 * (a.vocab + 2), 0,
                 3 + 3 + (ownInput ? 1 : 0));
  int64_t chunks = lossChunks(a);
  int64_t perToken = w * a.h + 2 * kF32 + kF32 * a.vocab + own;
  return bytes(a.tokens, perToken, kF32 * chunks,
               3 + 2 * chunks + (ownInput ? 1 : 0));
}

// MaskedLM: the transform's GELU input and output (the LayerNorm's input),
// the LayerNorm's mean, rstd and output (the decoder's input), then the loss
// chunks as the other heads'. SequenceClassification, per sequence: the
// pooler's tanh output (the classifier's input) and the fp32 log-softmax of
// the logits with its total-weight scalar; with one label (a regression) the
// fp32 logits instead. The pooler reads the first token of the unit's input,
// which is kept by reference, or is the head's own (`ownInput`).
int64_t bertHead(ModelAttr model, const ActivationShape &a, int64_t w,
                 bool ownInput) {
  const int64_t own = ownInput ? w * a.tokens * a.h : 0;
  const int64_t ownStorages = ownInput ? 1 : 0;
  if (model.getBertHead() == BertHead::SequenceClassification) {
    if (model.getNumLabels() == 1)
      return bytes(a.b, w * a.h + kF32, own, 2 + ownStorages);
    return bytes(a.b, w * a.h + kF32 * model.getNumLabels(), own + kF32,
                 3 + ownStorages);
  }
  int64_t chunks = lossChunks(a);
  int64_t perToken = 3 * w * a.h + 2 * kF32 + kF32 * a.vocab;
  return bytes(a.tokens, perToken, own + kF32 * chunks,
               5 + 2 * chunks + ownStorages);
}

} // namespace

int64_t plan::activationBytes(UnitKind kind, ModelAttr model,
                              int64_t microBatch, int64_t seqLen,
                              int64_t workingBytes, bool ownInput,
                              TensorShare share) {
  ActivationShape a = shapeOf(model, microBatch, seqLen, share);
  const int64_t w = workingBytes;
  int64_t total = 0;
  switch (kind) {
  case UnitKind::Embedding:
    total = embedding(model.getFamily(), a, w);
    break;
  case UnitKind::LlamaBlock:
    total = llamaBlock(a, w);
    break;
  case UnitKind::GPT2Block:
    total = gpt2Block(a, w);
    break;
  case UnitKind::BertBlock:
    total = bertBlock(a, w);
    break;
  case UnitKind::LlamaHead:
    total = llamaHead(a, w, ownInput);
    break;
  case UnitKind::GPT2Head:
    total = gpt2Head(a, w, ownInput);
    break;
  case UnitKind::BertHead:
    total = bertHead(model, a, w, ownInput);
    break;
  }
  return total;
}

int64_t plan::checkpointBytes(ModelAttr model, int64_t microBatch,
                              int64_t seqLen, int64_t workingBytes,
                              TensorShare share) {
  return shapeOf(model, microBatch, seqLen, share).normTokens *
         model.getHidden() * workingBytes;
}

TensorShare plan::tensorShareOf(PlanOp plan) {
  return {plan.getTensorRanks(), plan.getParallel().getSequenceParallel()};
}

int64_t plan::workingBytes(TrainAttr train) {
  return train.getPrecision() == Precision::FP32 ? 4 : 2;
}

/// `bytes` in elements of the working type, rounded up, at least one.
static int64_t inWorkingElements(int64_t bytes, TrainAttr train) {
  int64_t working = plan::workingBytes(train);
  return std::max<int64_t>((bytes + working - 1) / working, 1);
}

int64_t plan::loraActivationBytes(UnitOp unit, ModelAttr model,
                                  int64_t microBatch, int64_t seqLen,
                                  int64_t workingBytes) {
  LoraAttr lora = model.getLora();
  if (!lora)
    return 0;
  int64_t tokens = microBatch * seqLen, total = 0;
  bool dropout = lora.getDropout().value > 0;
  llvm::StringSet<> adapted;
  for (auto param : unit.getBody().getOps<ParamOp>()) {
    // lora_A: [rank, in].
    if (!rt::isLoraA(param.getParamName()))
      continue;
    llvm::StringRef module(*rt::loraAdapterModule(param.getParamName()));
    adapted.insert(module.rsplit('.').second);
    llvm::ArrayRef<int64_t> shape = param.getTensorType().getShape();
    int64_t rank = shape.front(), in = shape.back();
    total += tokens * rank * workingBytes + rt::kSavesAlignment;
    if (dropout)
      total += tokens * in * (workingBytes + 1) + 2 * rt::kSavesAlignment;
  }
  if (model.getFamily() != ModelFamily::Llama)
    return total;
  // What only a frozen base weight's gradient reads, per token: a tensor of
  // `width` working-type elements (one storage).
  const int64_t h = model.getHidden();
  auto unsaved = [&](int64_t width) {
    total -= tokens * width * workingBytes + rt::kSavesAlignment;
  };
  auto any = [&](std::initializer_list<llvm::StringRef> names) {
    return llvm::any_of(names,
                        [&](llvm::StringRef n) { return adapted.contains(n); });
  };
  switch (unit.getKind()) {
  case UnitKind::LlamaBlock:
    unsaved(h); // input_layernorm's normalised value
    unsaved(h); // post_attention_layernorm's
    if (!any({"q_proj", "k_proj", "v_proj"}))
      unsaved(h); // their input, the first norm's output
    if (!any({"gate_proj", "up_proj"}))
      unsaved(h); // their input, the second norm's output
    if (!any({"down_proj"}))
      unsaved(model.getIntermediate()); // silu(gate) * up
    break;
  case UnitKind::LlamaHead:
    unsaved(h); // the final norm's normalised value
    unsaved(h); // lm_head's input
    break;
  default:
    break;
  }
  return total;
}

int64_t plan::savesElements(UnitOp unit, ModelAttr model, TrainAttr train,
                            bool ownInput) {
  int64_t w = workingBytes(train);
  return inWorkingElements(
      activationBytes(unit.getKind(), model, train.getMicroBatch(),
                      train.getSeqLen(), w, ownInput,
                      tensorShareOf(unit->getParentOfType<PlanOp>())) +
          loraActivationBytes(unit, model, train.getMicroBatch(),
                              train.getSeqLen(), w),
      train);
}

int64_t plan::checkpointElements(ModelAttr model, TrainAttr train,
                                 TensorShare share) {
  return inWorkingElements(checkpointBytes(model, train.getMicroBatch(),
                                           train.getSeqLen(),
                                           workingBytes(train), share),
                           train);
}
