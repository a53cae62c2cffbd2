//===- Data.h - Token batches for each rank and step -------------*- C++
//-*-===//
//
// Training data as token ids: nanoGPT / llm.c `.bin` token files (uint16 or
// uint32), or synthetic tokens from the seed. Every data-parallel rank takes
// its own slice of the global batch, deterministically, so a run's global
// batch at step k does not depend on the world size or strategy
// (docs/runtime.md, "Data"). A resumed run sets the position where its first
// step starts (setPosition), so the stream goes on where the checkpoint left
// it, even under another global batch.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_RUNTIME_DATA_DATA_H
#define PLAN_RUNTIME_DATA_DATA_H

#include "Model.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace plan::rt {

/// What the model learns from a sequence, and so what `MicroBatch::targets`
/// holds (docs/models.md, "Data").
struct Objective {
  enum class Kind {
    /// targets[i][j] = the token after tokens[i][j] (causal LM).
    NextToken,
    /// HF's DataCollatorForLanguageModeling: each position is chosen with
    /// `maskProbability`; a chosen token becomes `maskToken` (80%), a random
    /// token (10%) or stays (10%), and its target is the original token;
    /// every other target is kIgnoreTarget.
    MaskedTokens,
    /// targets[i] = the label of sequence i: a class in [0, numLabels), or a
    /// value to regress to (fp32) when numLabels is 1.
    SequenceLabel
  };
  Kind kind = Kind::NextToken;
  int64_t maskToken = 0;
  double maskProbability = 0.15;
  int64_t numLabels = 2;

  /// The objective of `model`'s family and head. BERT's mask token is
  /// `[MASK]` of the bert-base WordPiece vocabularies (kBertMaskToken), or the
  /// last id of a vocabulary too small to hold it.
  static Objective of(const ModelConfig &model);
};

/// `[MASK]` in bert-base-cased's and bert-base-uncased's vocabularies.
constexpr int64_t kBertMaskToken = 103;

class DataSource {
public:
  /// `spec` is "synthetic" or a token file path. Throws std::runtime_error
  /// with a one-line reason (missing file, bad header, too short, a token
  /// id >= vocab, labels asked of a token file, which has none).
  static std::unique_ptr<DataSource> open(const std::string &spec,
                                          int64_t vocab, uint64_t seed,
                                          Objective objective = {});
  virtual ~DataSource() = default;

  /// This rank's micro-batches of step `step` (1-based): micro-batch i, row r
  /// is sequence ((i * dpSize) + dpRank) * microBatch + r of the step's global
  /// batch of G = microBatches * dpSize * microBatch sequences of seqLen
  /// tokens, which is global sequences [firstSequence(step, G),
  /// firstSequence(step, G) + G). Throws std::runtime_error for a step before
  /// the position's (setPosition).
  virtual std::vector<MicroBatch> batches(int64_t step, int64_t microBatches,
                                          int64_t dpRank, int64_t dpSize,
                                          int64_t microBatch, int64_t seqLen,
                                          at::Device device) = 0;

  /// Resuming after step `afterStep`, whose steps read `sequencesConsumed`
  /// global sequences in all: step afterStep + 1 starts at global sequence
  /// `sequencesConsumed`, each later step right after the one before. The
  /// default, (0, 0), is a fresh run: step k reads [(k-1)G, kG). Throws
  /// std::invalid_argument for a negative value.
  void setPosition(int64_t afterStep, int64_t sequencesConsumed);

  /// The first global sequence of step `step` (> the position's afterStep)
  /// with `globalBatch` sequences per step.
  int64_t firstSequence(int64_t step, int64_t globalBatch) const;

  /// The global sequences read by the run up to and including step `step`
  /// (>= the position's afterStep): what a checkpoint after `step` records.
  int64_t sequencesConsumed(int64_t step, int64_t globalBatch) const;

protected:
  int64_t afterStep_ = 0, consumed_ = 0; // the position (setPosition)
};

} // namespace plan::rt

#endif // PLAN_RUNTIME_DATA_DATA_H
