//===- Model.h - Units of a model, run one at a time -------------*- C++
//-*-===//
//
// The executor runs a schedule's compute ops (forward / recompute / loss /
// backward of one unit for one micro-batch) through this interface. A Model
// implements every unit kind of one family (Llama: embedding, llama_block,
// llama_head; GPT-2: embedding, gpt2_block, gpt2_head; BERT: embedding,
// bert_block, bert_head with its masked-LM or classification head) with
// LibTorch ops and autograd, one unit at a time, over parameters that are
// views into the schedule's flat buffers (see docs/runtime.md, "Units and
// autograd").
//
// Contract (the executor relies on each point):
// - `params` is a 1-D tensor with exactly the unit's stored elements, in the
//   schedule's parameter order and offsets (Unit::params[i].offset), in the
//   dtype the schedule computes in (f32, bf16 or f16). `tied` is the tying
//   unit's stored elements (GPT-2 head: the embedding's), or undefined.
//   Under LoRA, `frozen` holds the unit's frozen base the same way
//   (Unit::frozenNumel elements, frozen parameters' offsets); the base gets
//   no gradient, and a target module's output gains x A^T B^T alpha/rank.
// - The buffer behind `params` at backward may differ from the one at
//   forward (FSDP gathers again into another arena slot): backward must read
//   the parameters from the tensors it is given, never from ones kept since
//   forward. Gradients are ADDED into `grads` / `tiedGrads` (same layout and
//   dtype as params / tied).
// - Hidden states between units are handed over inside the Model, keyed by
//   micro-batch: forward of unit u reads the output of the unit before it;
//   backward of unit u leaves the gradient of its input for the unit before.
// - `saves` is the unit's planned activation buffer. A forward with a graph,
//   and a recompute, copy what autograd saves into it (SavedActivations.h).
//   A forward that will be recomputed (activation checkpointing) keeps no
//   autograd graph and stores its input in `saves` (which then has
//   micro_batch*seq_len*hidden elements); recompute reads it back from
//   `input` and rebuilds the graph.
// - Under tensor parallelism (schedule.tensor > 1) each compute op is one
//   part of its unit (UnitPart, TensorParallelParts.h): parameters are this
//   rank's slices (Param::localShape), the part reads and writes the
//   exchange buffers the schedule's collectives fill and drain, the residual
//   stream between parts and units stays inside the Model (docs/models.md,
//   "Tensor-parallel units"), and the loss comes from every rank's
//   statistics.
// - Errors are exceptions derived from std::runtime_error with a one-line
//   message.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_RUNTIME_MODELS_MODEL_H
#define PLAN_RUNTIME_MODELS_MODEL_H

#include "Schedule.h"

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>

namespace plan::rt {

/// A target the loss skips (a position that was not masked).
constexpr int64_t kIgnoreTarget = -100;

/// BERT's `pad_token_id`: its word embeddings' `padding_idx`, whose row
/// starts at zero and gets no gradient from the lookup (the tied decoder
/// still trains it), as in HF's BertEmbeddings.
constexpr int64_t kBertPadToken = 0;

/// One micro-batch of this rank, on the compute device: `tokens` is [b, s]
/// int64; `targets` what the head's loss compares with (Data.h, Objective):
/// [b, s] int64 token ids, kIgnoreTarget where there is none (next-token and
/// masked-token objectives), or [b] sequence labels (int64 classes, fp32
/// for a regression). `lossDivisor`, when positive, is what the head divides
/// its summed loss by instead of the micro-batch's own count of targets: the
/// counted targets (not kIgnoreTarget) of the step's whole global batch over
/// the number of micro-batches in it (all ranks), so that every target of
/// the step weighs the same whatever the micro-batch, rank or world size
/// (Data.h); worked out where the batch was made, so that no loss waits for
/// the device to count.
/// `firstSequence` is the global index of its first row (rows are
/// consecutive global sequences, Data.h) and `seed` the run's seed: what a
/// LoRA dropout mask is drawn from (loraDropoutSeed, Seeds.h), so that a
/// sequence gets the same mask whatever rank or micro-batch computes it.
struct MicroBatch {
  at::Tensor tokens, targets;
  double lossDivisor = 0;
  int64_t firstSequence = 0;
  uint64_t seed = 0;
};

/// The weights a compute op hands a unit: its trainable stored elements
/// (`params`), the tying unit's stored elements (`tied`: GPT-2's head gets
/// the embedding's, frozen ones under LoRA), and its frozen base (`frozen`,
/// a LoRA run's). Each is undefined where the unit stores none.
struct UnitWeights {
  at::Tensor params, tied, frozen;
};

/// Which part of a unit a compute op runs, and the exchange buffers of its
/// place between the cuts (runtime/format/TensorParallelParts.h): forward
/// and recompute read `in` (what the collective before the part left) and
/// write `out` (what the collective after it reads); backward reads
/// `outGrad` and writes `inGrad`. Each is 1-D, of the size the cut's
/// ExchangeShape gives, and undefined where the part's place has none.
/// Without tensor parallelism a unit is one part, 0, with no buffers.
struct UnitPart {
  int64_t index = 0;
  at::Tensor in, out, outGrad, inGrad;
};

class Model {
public:
  virtual ~Model() = default;

  /// The model for `schedule` (family from schedule.model.family); throws for
  /// a unit kind its family does not have.
  /// `lossChunkBytes`: the heads' loss chunking (Schedule.h,
  /// lossChunkTokens); other than the default only in tests.
  /// `tensorRank`: this rank's index on the mesh's tensor axis, which
  /// slice of each split parameter and of the vocabulary it holds.
  static std::unique_ptr<Model>
  create(const Schedule &schedule, at::Device device, int64_t tensorRank = 0,
         int64_t lossChunkBytes = kLossChunkBytes);

  /// Throws what create would (one line) when this runtime cannot compute
  /// `schedule`'s model: a unit kind its family lacks, a parameter it
  /// computes with missing (renamed) or of another shape. Allocates no
  /// tensors, so a reader can say it once before any rank starts.
  static void check(const Schedule &schedule);

  /// Writes the deterministic initial value of unit `unit`'s stored elements
  /// into `out` (1-D fp32, Unit::numel elements) and of its frozen ones into
  /// `frozen` (Unit::frozenNumel; undefined or empty when it has none): each
  /// parameter is drawn from a generator seeded by (seed, parameter name)
  /// alone, so every strategy, world size and rank gets the same full
  /// weights, and a LoRA run's base is the full model's. A split parameter
  /// (tensor parallelism) is drawn whole and this rank's slice stored. LoRA
  /// adapters as PEFT initialises them: lora_A Kaiming-uniform (bound
  /// 1/sqrt(in)), lora_B zero.
  virtual void initUnit(int64_t unit, uint64_t seed, at::Tensor out,
                        at::Tensor frozen = {}) = 0;

  /// Loads unit `unit`'s stored elements from HF-named tensors (see
  /// SafeTensors.h) into `out` (1-D fp32); throws naming a missing or
  /// mis-shaped tensor. The parameters of a new task head that `source`
  /// lacks (newTaskHeadParameters) are initialised as initUnit does with
  /// `seed`, as transformers' from_pretrained does when it puts a
  /// classifier on a pretrained encoder.
  /// LoRA adapters that `source` lacks are initialised as initUnit does.
  virtual void loadUnit(int64_t unit, const class TensorSource &source,
                        uint64_t seed, at::Tensor out,
                        at::Tensor frozen = {}) = 0;

  /// The parameters loadUnit initialises rather than loads from `source`
  /// (BERT's classifier, and its pooler where `source` has none), for the
  /// note a user gets; none by default.
  virtual std::vector<std::string>
  newTaskHeadParameters(const class TensorSource &) const {
    return {};
  }

  /// Sets the data of micro-batch `mb` for the coming step.
  virtual void setMicroBatch(int64_t mb, MicroBatch batch) = 0;

  /// `keepGraph` is false when a later recompute op rebuilds this unit's
  /// graph for this micro-batch (activation checkpointing). Under tensor
  /// parallelism each call computes `part` of the unit; the parts of one
  /// unit share its `saves` buffer, each after the ones before.
  virtual void forward(int64_t unit, int64_t mb, const UnitWeights &weights,
                       const at::Tensor &saves, bool keepGraph,
                       const UnitPart &part = {}) = 0;
  /// `input` is the saved input of part 0 (undefined for a later part,
  /// which reads part.in).
  virtual void recompute(int64_t unit, int64_t mb, const UnitWeights &weights,
                         const at::Tensor &input, const at::Tensor &saves,
                         const UnitPart &part = {}) = 0;
  /// After the head's forward: returns the micro-batch's mean loss (the
  /// cross-entropy over its counted targets; a regression's squared error)
  /// (a 0-dim fp32 tensor on the compute device, unscaled, which the
  /// executor reads after the step, so that no loss op waits for the
  /// device) and seeds its backward with `scale * lossScale`. Under tensor
  /// parallelism the loss is computed from `stats`, every tensor rank's
  /// per-token statistics of its vocabulary slice (kLossStatistics fp32 a
  /// token, rank-major).
  virtual at::Tensor loss(int64_t unit, int64_t mb, double scale,
                          double lossScale, const at::Tensor &stats = {}) = 0;
  virtual void backward(int64_t unit, int64_t mb, const UnitWeights &weights,
                        const at::Tensor &activations, const at::Tensor &grads,
                        const at::Tensor &tiedGrads,
                        const UnitPart &part = {}) = 0;

  /// Drops everything kept for micro-batches (end of a step or an error).
  virtual void reset() = 0;

  /// Bytes of tensors autograd saved outside the planned saves buffers
  /// since the last call (they did not fit: the schedule's activation model
  /// and this model disagree), and starts counting again.
  virtual int64_t takeUnplannedSaveBytes() { return 0; }
};

} // namespace plan::rt

#endif // PLAN_RUNTIME_MODELS_MODEL_H
