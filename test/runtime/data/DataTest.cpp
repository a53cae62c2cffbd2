//===- DataTest.cpp - Token files, synthetic data, per-rank slices --------===//

#include "Data.h"
#include "../models/TempDir.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <functional>

#include <unistd.h>

using namespace plan::rt;
using plan::rt::test::TempDir;

namespace {

class DataTest : public ::testing::Test {
protected:
  std::string path(const std::string &name) const { return dir_.file(name); }

  template <typename T>
  std::string writeTokens(const std::string &name, const std::vector<T> &tokens,
                          const std::vector<int32_t> &header = {}) {
    std::ofstream out(path(name), std::ios::binary | std::ios::trunc);
    if (!header.empty()) {
      std::vector<int32_t> h(256, 0);
      std::copy(header.begin(), header.end(), h.begin());
      out.write(reinterpret_cast<const char *>(h.data()), 1024);
    }
    out.write(reinterpret_cast<const char *>(tokens.data()),
              static_cast<std::streamsize>(tokens.size() * sizeof(T)));
    return path(name);
  }
  static std::string message(const std::function<void()> &f) {
    try {
      f();
    } catch (const std::runtime_error &e) {
      return e.what();
    }
    return "(no error)";
  }

  TempDir dir_;
};

/// All rows of all micro-batches, in the global-batch order of Data.h.
std::vector<at::Tensor> globalRows(DataSource &d, int64_t step, int64_t mbs,
                                   int64_t dp, int64_t b, int64_t s,
                                   bool targets = false) {
  std::vector<at::Tensor> rows(mbs * dp * b);
  for (int64_t rank = 0; rank < dp; ++rank) {
    auto batches = d.batches(step, mbs, rank, dp, b, s, at::kCPU);
    EXPECT_EQ(static_cast<int64_t>(batches.size()), mbs);
    for (int64_t i = 0; i < mbs; ++i)
      for (int64_t r = 0; r < b; ++r)
        rows[((i * dp) + rank) * b + r] =
            (targets ? batches[i].targets : batches[i].tokens)[r];
  }
  return rows;
}

TEST_F(DataTest, SyntheticIsDeterministicAndFollowsItsRecurrence) {
  auto a = DataSource::open("synthetic", 512, 1);
  auto b = DataSource::open("synthetic", 512, 1);
  auto c = DataSource::open("synthetic", 512, 2);
  auto x = a->batches(3, 2, 0, 1, 4, 16, at::kCPU);
  auto y = b->batches(3, 2, 0, 1, 4, 16, at::kCPU);
  auto z = c->batches(3, 2, 0, 1, 4, 16, at::kCPU);
  ASSERT_EQ(x.size(), 2u);
  EXPECT_EQ(x[0].tokens.sizes(), (std::vector<int64_t>{4, 16}));
  EXPECT_EQ(x[0].tokens.scalar_type(), at::kLong);
  EXPECT_TRUE(at::equal(x[1].tokens, y[1].tokens));
  EXPECT_FALSE(at::equal(x[1].tokens, z[1].tokens));
  EXPECT_TRUE(
      at::equal(x[0].tokens.narrow(1, 1, 15), x[0].targets.narrow(1, 0, 15)));
  EXPECT_LT(x[0].tokens.max().item<int64_t>(), 64);
  // Each row is t[n+1] = (a t[n] + c) mod 64 for one of the four rules.
  for (int64_t r = 0; r < 4; ++r) {
    auto t = x[0].tokens[r];
    auto g = x[0].targets[r];
    bool some = false;
    for (auto [mul, add] : {std::pair{1, 1}, {3, 7}, {5, 13}, {7, 31}})
      some |= at::equal((t * mul + add) % 64, g);
    EXPECT_TRUE(some) << "row " << r;
  }
  // Different steps read different sequences.
  auto w = a->batches(4, 2, 0, 1, 4, 16, at::kCPU);
  EXPECT_FALSE(at::equal(x[0].tokens, w[0].tokens));
}

TEST_F(DataTest, SyntheticMatchesThePublishedRecipe) {
  // docs/models.md: h = splitmix64(splitmix64(seed) + j), rule h & 3,
  // t0 = (h >> 8) % min(vocab, 64). Pinned values guard the Python copy.
  // Values computed by test/reference/llama_reference.py.
  auto first = DataSource::open("synthetic", 1000, 0)
                   ->batches(1, 1, 0, 1, 2, 4, at::kCPU)[0];
  auto row = [](const at::Tensor &t) {
    return std::vector<int64_t>(t.data_ptr<int64_t>(),
                                t.data_ptr<int64_t>() + t.numel());
  };
  EXPECT_EQ(row(first.tokens[0].contiguous()),
            (std::vector<int64_t>{62, 17, 22, 57}));
  EXPECT_EQ(row(first.targets[0].contiguous()),
            (std::vector<int64_t>{17, 22, 57, 46}));
  EXPECT_EQ(row(first.tokens[1].contiguous()),
            (std::vector<int64_t>{41, 62, 17, 22}));
  auto other = DataSource::open("synthetic", 1000, 12345)
                   ->batches(1, 1, 0, 1, 8, 4, at::kCPU)[0];
  EXPECT_EQ(row(other.tokens[7].contiguous()),
            (std::vector<int64_t>{61, 62, 63, 0}));
  // With vocab 5 the alphabet shrinks to 5 tokens.
  auto small = DataSource::open("synthetic", 5, 0)
                   ->batches(1, 1, 0, 1, 8, 32, at::kCPU)[0];
  EXPECT_LT(small.tokens.max().item<int64_t>(), 5);
  EXPECT_LT(small.targets.max().item<int64_t>(), 5);
}

TEST_F(DataTest, RankSlicesFormTheSingleRankBatch) {
  for (const std::string &spec :
       {std::string("synthetic"), std::string("file")}) {
    std::string source = spec;
    if (spec == "file") {
      std::vector<uint16_t> tokens(5000);
      for (size_t i = 0; i < tokens.size(); ++i)
        tokens[i] = static_cast<uint16_t>((i * 7919) % 300);
      source = writeTokens("slices.bin", tokens);
    }
    auto d = DataSource::open(source, 300, 5);
    for (int64_t step : {1, 2, 7}) {
      // 1 rank, 4 micro-batches of 2 == 2 ranks, 2 micro-batches of 2 ==
      // 4 ranks, 1 micro-batch of 2: the same global batch of 8 sequences.
      auto one = globalRows(*d, step, 4, 1, 2, 16);
      auto two = globalRows(*d, step, 2, 2, 2, 16);
      auto four = globalRows(*d, step, 1, 4, 2, 16);
      auto twoTargets = globalRows(*d, step, 2, 2, 2, 16, true);
      auto oneTargets = globalRows(*d, step, 4, 1, 2, 16, true);
      ASSERT_EQ(one.size(), 8u);
      for (size_t j = 0; j < one.size(); ++j) {
        EXPECT_TRUE(at::equal(one[j], two[j]))
            << spec << " step " << step << " row " << j;
        EXPECT_TRUE(at::equal(one[j], four[j]))
            << spec << " step " << step << " row " << j;
        EXPECT_TRUE(at::equal(oneTargets[j], twoTargets[j]));
      }
    }
  }
}

TEST_F(DataTest, PositionResumesTheStreamUnderAnyGlobalBatch) {
  for (const std::string &spec :
       {std::string("synthetic"), std::string("file")}) {
    std::string source = spec;
    if (spec == "file") {
      std::vector<uint16_t> tokens(5000);
      for (size_t i = 0; i < tokens.size(); ++i)
        tokens[i] = static_cast<uint16_t>((i * 7919) % 300);
      source = writeTokens("position.bin", tokens);
    }
    // An uninterrupted run with a global batch of 4 (2 ranks x 2 rows).
    auto fresh = DataSource::open(source, 300, 5);
    EXPECT_EQ(fresh->firstSequence(1, 4), 0);
    EXPECT_EQ(fresh->firstSequence(4, 4), 12);
    EXPECT_EQ(fresh->sequencesConsumed(3, 4), 12);
    // Resumed after step 3 with the same batch: steps 4 and 5 are the same.
    auto same = DataSource::open(source, 300, 5);
    same->setPosition(3, fresh->sequencesConsumed(3, 4));
    for (int64_t step : {4, 5}) {
      auto a = globalRows(*fresh, step, 1, 2, 2, 16);
      auto b = globalRows(*same, step, 1, 2, 2, 16);
      for (size_t j = 0; j < a.size(); ++j)
        EXPECT_TRUE(at::equal(a[j], b[j])) << spec << " step " << step;
    }
    EXPECT_EQ(same->sequencesConsumed(5, 4), 20);
    // Resumed with a global batch of 6 (3 ranks x 2 rows): step 4 reads
    // sequences 12..17, which the fresh run reads at steps 4 (12..15) and 5
    // (16, 17); step 5 goes on at 18.
    auto wider = DataSource::open(source, 300, 5);
    wider->setPosition(3, 12);
    auto w4 = globalRows(*wider, 4, 1, 3, 2, 16);
    auto f4 = globalRows(*fresh, 4, 1, 2, 2, 16);
    auto f5 = globalRows(*fresh, 5, 1, 2, 2, 16);
    ASSERT_EQ(w4.size(), 6u);
    for (size_t j = 0; j < 4; ++j)
      EXPECT_TRUE(at::equal(w4[j], f4[j])) << spec << " row " << j;
    for (size_t j = 0; j < 2; ++j)
      EXPECT_TRUE(at::equal(w4[4 + j], f5[j])) << spec << " row " << 4 + j;
    EXPECT_EQ(wider->firstSequence(5, 6), 18);
    EXPECT_EQ(wider->sequencesConsumed(5, 6), 24);
    auto w5 = globalRows(*wider, 5, 1, 3, 2, 16);
    auto f5b = globalRows(*fresh, 5, 1, 2, 2, 16);
    EXPECT_TRUE(at::equal(w5[0], f5b[2])) << spec; // sequence 18
    EXPECT_FALSE(at::equal(w5[0], f5b[0])) << spec;
  }
}

TEST_F(DataTest, PositionErrors) {
  auto d = DataSource::open("synthetic", 100, 0);
  EXPECT_THROW(d->setPosition(-1, 0), std::invalid_argument);
  EXPECT_THROW(d->setPosition(2, -8), std::invalid_argument);
  d->setPosition(2, 8);
  // Steps up to the position's are behind it.
  std::string e = message([&] { d->batches(2, 1, 0, 1, 4, 8, at::kCPU); });
  EXPECT_NE(e.find("step 2 is not after the data position's step 2"),
            std::string::npos)
      << e;
  EXPECT_NO_THROW(d->batches(3, 1, 0, 1, 4, 8, at::kCPU));
  // Back to a fresh run's position.
  d->setPosition(0, 0);
  auto fresh = DataSource::open("synthetic", 100, 0);
  EXPECT_TRUE(at::equal(d->batches(1, 1, 0, 1, 4, 8, at::kCPU)[0].tokens,
                        fresh->batches(1, 1, 0, 1, 4, 8, at::kCPU)[0].tokens));
}

TEST_F(DataTest, RawUint16WindowsWrapAround) {
  std::vector<uint16_t> tokens(100);
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = static_cast<uint16_t>(i);
  auto d = DataSource::open(writeTokens("raw.bin", tokens), 100, 0);
  // Sequence j starts at (j * 10) mod (100 - 10 - 1) = (j * 10) mod 89.
  auto b = d->batches(2, 1, 0, 1, 3, 10, at::kCPU)[0]; // sequences 3, 4, 5
  for (int64_t r = 0; r < 3; ++r) {
    int64_t start = ((3 + r) * 10) % 89;
    EXPECT_EQ(b.tokens[r][0].item<int64_t>(), start);
    EXPECT_EQ(b.targets[r][9].item<int64_t>(), start + 10);
  }
  auto wrapped = d->batches(4, 1, 0, 1, 3, 10, at::kCPU)[0]; // sequences 9..11
  EXPECT_EQ(wrapped.tokens[0][0].item<int64_t>(), 90 % 89);
}

TEST_F(DataTest, LlmcHeaders) {
  std::vector<uint16_t> t16(300);
  std::vector<uint32_t> t32(300);
  for (size_t i = 0; i < 300; ++i) {
    t16[i] = static_cast<uint16_t>(i % 250);
    t32[i] = static_cast<uint32_t>(70000 + i);
  }
  auto gpt2 = DataSource::open(writeTokens("gpt2.bin", t16, {20240520, 1, 300}),
                               250, 0);
  auto b = gpt2->batches(1, 1, 0, 1, 2, 8, at::kCPU)[0];
  EXPECT_EQ(b.tokens[0][0].item<int64_t>(), 0);
  EXPECT_EQ(b.tokens[1][0].item<int64_t>(), 8);
  auto llama = DataSource::open(
      writeTokens("llama.bin", t32, {20240801, 7, 300}), 128256, 0);
  auto c = llama->batches(1, 1, 0, 1, 2, 8, at::kCPU)[0];
  EXPECT_EQ(c.tokens[1][3].item<int64_t>(), 70000 + 11);

  std::string e = message([&] {
    DataSource::open(writeTokens("v.bin", t16, {20240520, 3, 300}), 250, 0);
  });
  EXPECT_NE(e.find("version 3"), std::string::npos) << e;
  e = message([&] {
    DataSource::open(writeTokens("n.bin", t16, {20240520, 1, 301}), 250, 0);
  });
  EXPECT_NE(e.find("counts 301"), std::string::npos) << e;
}

TEST_F(DataTest, Errors) {
  std::string e =
      message([&] { DataSource::open(path("missing.bin"), 10, 0); });
  EXPECT_NE(e.find("cannot open"), std::string::npos) << e;
  e = message(
      [&] { DataSource::open(writeTokens<uint16_t>("empty.bin", {}), 10, 0); });
  EXPECT_NE(e.find("empty"), std::string::npos) << e;
  e = message([&] {
    std::ofstream(path("odd.bin"), std::ios::binary) << "abc";
    DataSource::open(path("odd.bin"), 10, 0);
  });
  EXPECT_NE(e.find("odd size"), std::string::npos) << e;
  auto shortFile =
      DataSource::open(writeTokens<uint16_t>("short.bin", {1, 2, 3}), 10, 0);
  e = message([&] { shortFile->batches(1, 1, 0, 1, 1, 4, at::kCPU); });
  EXPECT_NE(e.find("needs at least 6"), std::string::npos) << e;
  // Token ids are checked per window, when read.
  std::vector<uint16_t> tokens(64, 1);
  tokens[40] = 99;
  auto bad = DataSource::open(writeTokens("bad.bin", tokens), 10, 0);
  EXPECT_NO_THROW(bad->batches(1, 1, 0, 1, 2, 8, at::kCPU));
  e = message([&] { bad->batches(3, 1, 0, 1, 2, 8, at::kCPU); });
  EXPECT_NE(e.find("token 99 at position 40"), std::string::npos) << e;
  e = message([&] { bad->batches(1, 1, 2, 2, 2, 8, at::kCPU); });
  EXPECT_NE(e.find("rank 2 of 2"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos);
}

Objective maskedTokens(int64_t maskToken) {
  Objective o;
  o.kind = Objective::Kind::MaskedTokens;
  o.maskToken = maskToken;
  return o;
}

// BERT's masked-LM data: HF's collator's proportions (15% of the positions
// chosen; of those 80% [MASK], 10% a random token, 10% kept), the same
// masking and loss divisor for every world size and accumulation, and the
// divisor is the step's chosen positions per micro-batch.
TEST_F(DataTest, MaskedTokensAsHuggingFaceCollates) {
  const int64_t vocab = 1000, mask = 103, s = 256;
  auto plain = DataSource::open("synthetic", vocab, 5);
  auto masked = DataSource::open("synthetic", vocab, 5, maskedTokens(mask));
  auto p = plain->batches(1, 1, 0, 1, 64, s, at::kCPU)[0];
  auto m = masked->batches(1, 1, 0, 1, 64, s, at::kCPU)[0];
  at::Tensor chosen = m.targets != kIgnoreTarget;
  const double n = static_cast<double>(p.tokens.numel());
  const double picked = chosen.sum().item<double>();
  EXPECT_NEAR(picked / n, 0.15, 0.01);
  // Targets are the original tokens where chosen.
  EXPECT_TRUE(at::equal(at::where(chosen, p.tokens, kIgnoreTarget), m.targets));
  // Unchosen tokens are kept; chosen ones are [MASK] (80%), kept (10%) or
  // random (10%, which may hit the original token: 1 in 1000).
  EXPECT_TRUE(at::equal(at::where(chosen, 0, m.tokens),
                        at::where(chosen, 0, p.tokens)));
  const double masks = (chosen & (m.tokens == mask)).sum().item<double>();
  const double kept = (chosen & (m.tokens == p.tokens)).sum().item<double>();
  EXPECT_NEAR(masks / picked, 0.8, 0.02);
  EXPECT_NEAR(kept / picked, 0.1, 0.02);
  EXPECT_NEAR(m.lossDivisor, picked, 1e-9);
  EXPECT_EQ(p.lossDivisor, 0); // next-token targets: the plain mean

  // 2 ranks x 2 micro-batches of 16 sequences: the same rows, masked the
  // same, and every micro-batch divides by the step's total over 4.
  auto rowsA = globalRows(*masked, 1, 1, 1, 64, s);
  auto rowsB = globalRows(*masked, 1, 2, 2, 16, s);
  auto targetsB = globalRows(*masked, 1, 2, 2, 16, s, true);
  for (size_t r = 0; r < rowsA.size(); ++r) {
    EXPECT_TRUE(at::equal(rowsA[r], rowsB[r])) << r;
    EXPECT_TRUE(at::equal(m.targets[r], targetsB[r])) << r;
  }
  for (int64_t rank = 0; rank < 2; ++rank)
    for (const MicroBatch &b : masked->batches(1, 2, rank, 2, 16, s, at::kCPU))
      EXPECT_NEAR(b.lossDivisor, picked / 4, 1e-9);
}

// BERT's classification data: one label per sequence, the rule that made the
// synthetic sequence (modulo the labels), fp32 values for a regression; a
// token file has no labels.
TEST_F(DataTest, SequenceLabels) {
  Objective o;
  o.kind = Objective::Kind::SequenceLabel;
  o.numLabels = 3;
  auto d = DataSource::open("synthetic", 64, 1, o);
  auto b = d->batches(1, 1, 0, 1, 32, 8, at::kCPU)[0];
  ASSERT_EQ(b.targets.sizes(), (std::vector<int64_t>{32}));
  EXPECT_EQ(b.targets.scalar_type(), at::kLong);
  EXPECT_GE(b.targets.min().item<int64_t>(), 0);
  EXPECT_EQ(b.targets.max().item<int64_t>(), 2);
  // The label follows the recurrence: t[1] = (a t[0] + c) mod 64 for the
  // label's rule a, c (kSyntheticRules; rule 3 is label 0 with 3 labels).
  const int64_t rules[4][2] = {{1, 1}, {3, 7}, {5, 13}, {7, 31}};
  for (int64_t r = 0; r < 32; ++r) {
    int64_t t0 = b.tokens[r][0].item<int64_t>(),
            t1 = b.tokens[r][1].item<int64_t>();
    int64_t label = b.targets[r].item<int64_t>();
    bool fits = false;
    for (int64_t rule = label; rule < 4; rule += 3)
      fits |= (rules[rule][0] * t0 + rules[rule][1]) % 64 == t1;
    EXPECT_TRUE(fits) << "row " << r;
  }
  o.numLabels = 1;
  auto regression = DataSource::open("synthetic", 64, 1, o);
  auto v = regression->batches(1, 1, 0, 1, 32, 8, at::kCPU)[0];
  EXPECT_EQ(v.targets.scalar_type(), at::kFloat);
  EXPECT_EQ(v.targets.max().item<float>(), 3.0f);
  o.numLabels = 3;
  std::string e = message([&] {
    DataSource::open(writeTokens<uint16_t>("t.bin", std::vector<uint16_t>(64)),
                     64, 0, o);
  });
  EXPECT_NE(e.find("has no labels"), std::string::npos) << e;
  e = message([&] { DataSource::open("synthetic", 64, 0, maskedTokens(64)); });
  EXPECT_NE(e.find("mask token below the vocab"), std::string::npos) << e;
}

// Objective::of follows the model: BERT's mask token is [MASK] = 103, or the
// last id of a smaller vocabulary.
TEST(Objective, FollowsTheModel) {
  ModelConfig m;
  EXPECT_EQ(Objective::of(m).kind, Objective::Kind::NextToken);
  m.family = ModelFamily::Bert;
  m.vocab = 28996;
  EXPECT_EQ(Objective::of(m).kind, Objective::Kind::MaskedTokens);
  EXPECT_EQ(Objective::of(m).maskToken, 103);
  m.vocab = 64;
  EXPECT_EQ(Objective::of(m).maskToken, 63);
  m.bertHead = BertHead::SequenceClassification;
  m.numLabels = 5;
  EXPECT_EQ(Objective::of(m).kind, Objective::Kind::SequenceLabel);
  EXPECT_EQ(Objective::of(m).numLabels, 5);
}

} // namespace
