//===- Data.cpp - Token batches for each rank and step --------------------===//
//
// Global sequence j of a run is a pure function of j (and the seed, or the
// file), so which rank reads it and with which strategy never changes the
// tokens: step k (1-based) uses global sequences [(k-1)G, kG) with
// G = microBatches * dpSize * microBatch, and each rank takes its rows by the
// formula in Data.h. A resumed run shifts that origin (setPosition): step
// s + 1 starts at the sequences the checkpoint's steps 1..s consumed.
// docs/models.md, "Data", has both generators.
//
//===----------------------------------------------------------------------===//

#include "Data.h"
#include "Seeds.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace plan::rt {
namespace {

class DataError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// Fills `out` (seqLen + 1 tokens) with global sequence `index`.
class SequenceSource {
public:
  virtual ~SequenceSource() = default;
  virtual void sequence(int64_t index, int64_t seqLen, int64_t *out) const = 0;
  /// The label of global sequence `index`, for sources that have labels.
  virtual bool hasLabels() const { return false; }
  virtual int64_t label(int64_t /*index*/) const { return 0; }
};

// Affine recurrences t[n+1] = (a t[n] + c) mod m over m = min(vocab, 64)
// tokens, with (a, c) one of four pairs: after two tokens the next one is
// determined, so a small model's loss falls from ln(vocab) towards 0 within
// tens of steps.
constexpr int64_t kSyntheticAlphabet = 64;
constexpr std::array<std::pair<int64_t, int64_t>, 4> kSyntheticRules = {
    {{1, 1}, {3, 7}, {5, 13}, {7, 31}}};

class SyntheticSource final : public SequenceSource {
public:
  SyntheticSource(int64_t vocab, uint64_t seed)
      : m_(std::min(vocab, kSyntheticAlphabet)), key_(splitmix64(seed)) {}
  void sequence(int64_t index, int64_t seqLen, int64_t *out) const override {
    uint64_t h = hash(index);
    auto [a, c] = kSyntheticRules[h & 3];
    int64_t t = static_cast<int64_t>((h >> 8) % static_cast<uint64_t>(m_));
    for (int64_t n = 0; n <= seqLen; ++n) {
      out[n] = t;
      t = (a * t + c) % m_;
    }
  }
  /// Which of the rules made the sequence: a task a classifier can learn.
  bool hasLabels() const override { return true; }
  int64_t label(int64_t index) const override { return hash(index) & 3; }

private:
  uint64_t hash(int64_t index) const {
    return splitmix64(key_ + static_cast<uint64_t>(index));
  }

  int64_t m_;
  uint64_t key_;
};

/// The masking of HF's DataCollatorForLanguageModeling as a function of
/// (seed, global sequence, position) alone, so that every rank and world
/// size masks a sequence the same way. docs/models.md ("Data") spells it out
/// for the Python reference.
class Masker {
public:
  Masker(uint64_t seed, const Objective &objective, int64_t vocab)
      : key_(splitmix64(seed ^ kMaskSalt)), vocab_(vocab),
        threshold_(static_cast<uint64_t>(objective.maskProbability *
                                         static_cast<double>(kUnit))),
        maskToken_(objective.maskToken) {}

  /// Masks `tokens` (seqLen ids of global sequence `index`) in place and
  /// writes `targets`.
  void mask(int64_t index, int64_t seqLen, int64_t *tokens,
            int64_t *targets) const {
    const uint64_t base = splitmix64(key_ + static_cast<uint64_t>(index));
    for (int64_t n = 0; n < seqLen; ++n) {
      uint64_t u = splitmix64(base + static_cast<uint64_t>(n));
      if (!chosen(u)) {
        targets[n] = kIgnoreTarget;
        continue;
      }
      targets[n] = tokens[n];
      uint64_t how = (u >> 16) & (kUnit - 1);
      if (how < kUnit / 10 * 8)
        tokens[n] = maskToken_;
      else if (how < kUnit / 10 * 9)
        tokens[n] =
            static_cast<int64_t>(splitmix64(u) % static_cast<uint64_t>(vocab_));
    }
  }

  /// How many positions of global sequence `index` are chosen: a function
  /// of the position alone, not of the tokens.
  int64_t count(int64_t index, int64_t seqLen) const {
    const uint64_t base = splitmix64(key_ + static_cast<uint64_t>(index));
    int64_t n = 0;
    for (int64_t p = 0; p < seqLen; ++p)
      n += chosen(splitmix64(base + static_cast<uint64_t>(p))) ? 1 : 0;
    return n;
  }

private:
  bool chosen(uint64_t u) const { return (u >> 40) < threshold_; }

  static constexpr uint64_t kMaskSalt = 0x6D61736B; // "mask"
  static constexpr uint64_t kUnit = uint64_t(1) << 24;
  uint64_t key_;
  int64_t vocab_;
  uint64_t threshold_;
  int64_t maskToken_;
};

// llm.c's dev/data/data_common.py: 256 int32 header words (magic, version,
// token count), then the tokens.
constexpr int32_t kLlmcGpt2Magic = 20240520, kLlmcGpt2Version = 1;     // uint16
constexpr int32_t kLlmcLlama3Magic = 20240801, kLlmcLlama3Version = 7; // uint32
constexpr size_t kLlmcHeaderBytes = 256 * sizeof(int32_t);

class TokenFile final : public SequenceSource {
public:
  TokenFile(const std::string &path, int64_t vocab)
      : path_(path), vocab_(vocab) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      throw DataError("cannot open token file '" + path +
                      "': " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      throw DataError("token file '" + path + "' is not a regular file");
    }
    size_ = static_cast<size_t>(st.st_size);
    if (size_ == 0) {
      ::close(fd);
      throw DataError("token file '" + path + "' is empty");
    }
    void *base = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (base == MAP_FAILED)
      throw DataError("cannot map token file '" + path +
                      "': " + std::strerror(errno));
    base_ = static_cast<const uint8_t *>(base);
    try {
      parseHeader();
    } catch (...) {
      ::munmap(const_cast<uint8_t *>(base_), size_);
      throw;
    }
  }
  TokenFile(const TokenFile &) = delete;
  TokenFile &operator=(const TokenFile &) = delete;
  ~TokenFile() override { ::munmap(const_cast<uint8_t *>(base_), size_); }

  void sequence(int64_t index, int64_t seqLen, int64_t *out) const override {
    if (count_ < seqLen + 2)
      throw DataError("token file '" + path_ + "' has " +
                      std::to_string(count_) + " tokens; seq_len " +
                      std::to_string(seqLen) + " needs at least " +
                      std::to_string(seqLen + 2));
    int64_t start = (index * seqLen) % (count_ - seqLen - 1);
    for (int64_t n = 0; n <= seqLen; ++n) {
      int64_t pos = start + n;
      int64_t t = wide_ ? static_cast<int64_t>(load<uint32_t>(pos))
                        : static_cast<int64_t>(load<uint16_t>(pos));
      if (t >= vocab_)
        throw DataError("token file '" + path_ + "': token " +
                        std::to_string(t) + " at position " +
                        std::to_string(pos) + " is not below the vocab size " +
                        std::to_string(vocab_));
      out[n] = t;
    }
  }

private:
  void parseHeader() {
    int32_t word[3] = {0, 0, 0};
    if (size_ >= kLlmcHeaderBytes)
      std::memcpy(word, base_, sizeof(word));
    bool gpt2 = word[0] == kLlmcGpt2Magic, llama3 = word[0] == kLlmcLlama3Magic;
    if (!gpt2 && !llama3) {
      // nanoGPT: raw uint16 tokens, no header.
      if (size_ % 2 != 0)
        throw DataError("token file '" + path_ +
                        "' has no llm.c header and an odd size, so it is not "
                        "raw uint16 tokens either");
      data_ = base_;
      count_ = static_cast<int64_t>(size_ / 2);
      return;
    }
    int32_t expected = gpt2 ? kLlmcGpt2Version : kLlmcLlama3Version;
    if (word[1] != expected)
      throw DataError("token file '" + path_ + "': llm.c header with magic " +
                      std::to_string(word[0]) + " has version " +
                      std::to_string(word[1]) + ", expected " +
                      std::to_string(expected));
    wide_ = llama3;
    size_t width = wide_ ? 4 : 2;
    if (word[2] < 0 ||
        kLlmcHeaderBytes + static_cast<size_t>(word[2]) * width != size_)
      throw DataError("token file '" + path_ + "': the header counts " +
                      std::to_string(word[2]) + " tokens but the file holds " +
                      std::to_string((size_ - kLlmcHeaderBytes) / width));
    data_ = base_ + kLlmcHeaderBytes;
    count_ = word[2];
    if (count_ == 0)
      throw DataError("token file '" + path_ + "' holds no tokens");
  }

  template <typename T> T load(int64_t pos) const {
    T v; // little-endian on every platform we build for
    std::memcpy(&v, data_ + pos * sizeof(T), sizeof(T));
    return v;
  }

  std::string path_;
  int64_t vocab_;
  const uint8_t *base_ = nullptr;
  size_t size_ = 0;
  const uint8_t *data_ = nullptr;
  int64_t count_ = 0;
  bool wide_ = false;
};

class SequenceDataSource final : public DataSource {
public:
  SequenceDataSource(std::unique_ptr<SequenceSource> source,
                     Objective objective, int64_t vocab, uint64_t seed)
      : source_(std::move(source)), objective_(objective),
        masker_(seed, objective, vocab), seed_(seed) {}

  std::vector<MicroBatch> batches(int64_t step, int64_t microBatches,
                                  int64_t dpRank, int64_t dpSize,
                                  int64_t microBatch, int64_t seqLen,
                                  at::Device device) override {
    if (step <= afterStep_)
      throw DataError("bad batch request: step " + std::to_string(step) +
                      " is not after the data position's step " +
                      std::to_string(afterStep_));
    if (step < 1 || microBatches < 1 || dpSize < 1 || dpRank < 0 ||
        dpRank >= dpSize || microBatch < 1 || seqLen < 1)
      throw DataError("bad batch request: step " + std::to_string(step) +
                      ", micro-batches " + std::to_string(microBatches) +
                      ", rank " + std::to_string(dpRank) + " of " +
                      std::to_string(dpSize) + ", micro_batch " +
                      std::to_string(microBatch) + ", seq_len " +
                      std::to_string(seqLen));
    const int64_t global = microBatches * dpSize * microBatch;
    using Kind = Objective::Kind;
    const Kind kind = objective_.kind;
    std::vector<MicroBatch> out;
    std::vector<int64_t> window(seqLen + 1);
    // Masked tokens: every micro-batch of every rank divides its loss by the
    // global batch's masked positions per micro-batch (Model.h).
    double divisor = 0;
    if (kind == Kind::MaskedTokens) {
      int64_t total = 0;
      const int64_t first = firstSequence(step, global);
      for (int64_t j = first; j < first + global; ++j)
        total += masker_.count(j, seqLen);
      divisor = std::max<double>(static_cast<double>(total), 1.0) /
                static_cast<double>(microBatches * dpSize);
    }
    for (int64_t i = 0; i < microBatches; ++i) {
      at::Tensor tokens = at::empty({microBatch, seqLen}, at::kLong);
      at::Tensor targets =
          kind == Kind::SequenceLabel
              ? at::empty({microBatch},
                          objective_.numLabels == 1 ? at::kFloat : at::kLong)
              : at::empty({microBatch, seqLen}, at::kLong);
      int64_t *tp = tokens.data_ptr<int64_t>();
      for (int64_t r = 0; r < microBatch; ++r) {
        int64_t j = firstSequence(step, global) +
                    ((i * dpSize) + dpRank) * microBatch + r;
        source_->sequence(j, seqLen, window.data());
        int64_t *row = tp + r * seqLen;
        std::memcpy(row, window.data(), seqLen * sizeof(int64_t));
        switch (kind) {
        case Kind::NextToken:
          std::memcpy(targets.data_ptr<int64_t>() + r * seqLen,
                      window.data() + 1, seqLen * sizeof(int64_t));
          break;
        case Kind::MaskedTokens:
          masker_.mask(j, seqLen, row,
                       targets.data_ptr<int64_t>() + r * seqLen);
          break;
        case Kind::SequenceLabel: {
          int64_t label = source_->label(j);
          if (objective_.numLabels == 1)
            targets.data_ptr<float>()[r] = static_cast<float>(label);
          else
            targets.data_ptr<int64_t>()[r] = label % objective_.numLabels;
          break;
        }
        }
      }
      out.push_back(MicroBatch{tokens.to(device), targets.to(device), divisor,
                               firstSequence(step, global) +
                                   i * dpSize * microBatch +
                                   dpRank * microBatch,
                               seed_});
    }
    return out;
  }

private:
  std::unique_ptr<SequenceSource> source_;
  Objective objective_;
  Masker masker_;
  uint64_t seed_; // the run's: a micro-batch carries it (LoRA dropout)
};

} // namespace

void DataSource::setPosition(int64_t afterStep, int64_t sequencesConsumed) {
  if (afterStep < 0 || sequencesConsumed < 0)
    throw std::invalid_argument("data position: step " +
                                std::to_string(afterStep) + ", " +
                                std::to_string(sequencesConsumed) +
                                " sequences consumed: neither may be negative");
  afterStep_ = afterStep;
  consumed_ = sequencesConsumed;
}

int64_t DataSource::firstSequence(int64_t step, int64_t globalBatch) const {
  return consumed_ + (step - afterStep_ - 1) * globalBatch;
}

int64_t DataSource::sequencesConsumed(int64_t step, int64_t globalBatch) const {
  return consumed_ + (step - afterStep_) * globalBatch;
}

Objective Objective::of(const ModelConfig &model) {
  Objective o;
  if (model.family != ModelFamily::Bert)
    return o;
  if (model.bertHead == BertHead::SequenceClassification) {
    o.kind = Kind::SequenceLabel;
    o.numLabels = model.numLabels;
    return o;
  }
  o.kind = Kind::MaskedTokens;
  o.maskToken = std::min(kBertMaskToken, model.vocab - 1);
  return o;
}

std::unique_ptr<DataSource> DataSource::open(const std::string &spec,
                                             int64_t vocab, uint64_t seed,
                                             Objective objective) {
  if (vocab < 1)
    throw DataError("vocab size " + std::to_string(vocab) + " is not positive");
  if (objective.kind == Objective::Kind::MaskedTokens &&
      (objective.maskToken < 0 || objective.maskToken >= vocab ||
       !(objective.maskProbability > 0 && objective.maskProbability <= 1)))
    throw DataError("masked-token data needs a mask token below the vocab "
                    "size and a masking probability in (0, 1]");
  if (objective.kind == Objective::Kind::SequenceLabel &&
      objective.numLabels < 1)
    throw DataError("sequence labels need num_labels >= 1");
  std::unique_ptr<SequenceSource> source;
  if (spec == "synthetic")
    source = std::make_unique<SyntheticSource>(vocab, seed);
  else
    source = std::make_unique<TokenFile>(spec, vocab);
  if (objective.kind == Objective::Kind::SequenceLabel && !source->hasLabels())
    throw DataError("token file '" + spec +
                    "' has no labels, which a sequence-classification head "
                    "trains on: use --data synthetic (labelled by the rule "
                    "that made each sequence)");
  return std::make_unique<SequenceDataSource>(std::move(source), objective,
                                              vocab, seed);
}

} // namespace plan::rt
