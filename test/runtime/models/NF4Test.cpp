//===- NF4Test.cpp - NF4 with double quantization ------------------------===//
//
// The codec's own properties. That its bytes are bitsandbytes' is
// nf4_bitsandbytes.py's check (test/runtime/models/CMakeLists.txt).
//
//===----------------------------------------------------------------------===//

#include "NF4.h"
#include "FrozenBase.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace plan::rt;

namespace {

uint8_t indexAt(const NF4Tensor &q, int64_t i) {
  uint8_t byte = q.packed.data_ptr<uint8_t>()[i / 2];
  return i % 2 ? byte & 0x0F : byte >> 4;
}

} // namespace

TEST(NF4Test, CodebookAndMap) {
  const auto &code = nf4Codebook();
  EXPECT_EQ(code.front(), -1.0f);
  EXPECT_EQ(code[7], 0.0f);
  EXPECT_EQ(code.back(), 1.0f);
  EXPECT_TRUE(std::is_sorted(code.begin(), code.end()));
  const auto &map = dynamicMap();
  EXPECT_TRUE(std::is_sorted(map.begin(), map.end()));
  EXPECT_EQ(map.back(), 1.0f);
  EXPECT_NEAR(map.front(), -0.99297f, 1e-5);
  EXPECT_EQ(std::count(map.begin(), map.end(), 0.0f), 1);
  // The smallest magnitudes are 1e-6 times the first midpoint, 0.55.
  EXPECT_NEAR(map[128], 0.55e-6f, 1e-12);
}

// Each index is the nearest NF4 value to the element over its block's
// absmax (the lower one at a tie): the round trip's error, before the
// absmax's own, is the codebook's.
TEST(NF4Test, IndicesAreTheNearestValue) {
  at::manual_seed(7);
  const int64_t n = 64 * 5 + 37; // a short last block
  at::Tensor x = at::randn({n}) * 3.0;
  NF4Tensor q = quantizeNF4(x);
  ASSERT_EQ(q.packed.numel(), (n + 1) / 2);
  ASSERT_EQ(q.absmaxCodes.numel(), 6);
  ASSERT_EQ(q.absmaxScales.numel(), 1);
  const auto &code = nf4Codebook();
  const float *v = x.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i) {
    int64_t start = i / kNF4BlockSize * kNF4BlockSize;
    int64_t end = std::min(n, start + kNF4BlockSize);
    float absmax = 0;
    for (int64_t j = start; j < end; ++j)
      absmax = std::max(absmax, std::fabs(v[j]));
    float normed = v[i] / absmax;
    uint8_t chosen = indexAt(q, i);
    for (int k = 0; k < 16; ++k)
      EXPECT_LE(std::fabs(normed - code[chosen]),
                std::fabs(normed - code[k]) + 1e-6f)
          << "element " << i << " took " << int(chosen) << ", " << k
          << " is nearer";
  }
}

// Values on the codebook come back exactly when every block has the same
// absmax (double quantization then stores it as the offset alone), and
// the first element of a byte is its high nibble.
TEST(NF4Test, CodebookValuesRoundTrip) {
  const auto &code = nf4Codebook();
  std::vector<float> values;
  for (int block = 0; block < 3; ++block)
    for (int i = 0; i < kNF4BlockSize; ++i)
      values.push_back(2.5f * code[(i + block) % 16]);
  at::Tensor x = at::tensor(values).reshape({3, kNF4BlockSize});
  NF4Tensor q = quantizeNF4(x);
  EXPECT_EQ(q.shape, (std::vector<int64_t>{3, kNF4BlockSize}));
  EXPECT_EQ(q.absmaxOffset, 2.5f);
  EXPECT_EQ(q.packed.data_ptr<uint8_t>()[0], 0x01); // code 0, then code 1
  at::Tensor y = dequantizeNF4(q, at::kFloat);
  EXPECT_TRUE(at::equal(y, x));
  EXPECT_TRUE(at::equal(dequantizeNF4(q, at::kBFloat16), x.to(at::kBFloat16)));
}

// The absmax come back within the dynamic map's spacing: a step of the map
// near 1 is at most 1/64 of the block's largest magnitude.
TEST(NF4Test, DoubleQuantizedAbsmax) {
  at::manual_seed(3);
  at::Tensor x = at::randn({64 * 600}) * at::linspace(0.1, 4.0, 64 * 600);
  NF4Tensor q = quantizeNF4(x);
  ASSERT_EQ(q.absmaxScales.numel(), 3); // 600 blocks, 256 a scale
  at::Tensor exact = std::get<0>(x.reshape({600, 64}).abs().max(-1));
  at::Tensor stored = dequantizeNF4Absmax(q);
  at::Tensor centered = exact - exact.mean();
  double largest = centered.abs().max().item<double>();
  EXPECT_LE((stored - exact).abs().max().item<double>(), largest / 64);
  // And the elements within half a codebook step of their block's absmax,
  // plus the absmax's own error.
  at::Tensor y = dequantizeNF4(q, at::kFloat);
  // |code x stored - x| <= |stored - exact| + |code x exact - x|, and the
  // largest half-gap of the codebook is 0.152 (between -1 and -0.696).
  at::Tensor bound = exact.repeat_interleave(64) * 0.1525 +
                     (stored - exact).abs().repeat_interleave(64) + 1e-6;
  EXPECT_TRUE(((y - x).abs() <= bound).all().item<bool>());
}

TEST(NF4Test, StorageBytes) {
  // 4096 elements: 2048 packed bytes, 64 absmax codes, one fp32 scale, the
  // fp32 offset.
  EXPECT_EQ(nf4StorageBytes(4096), 2048 + 64 + 4 + 4);
  EXPECT_EQ(nf4StorageBytes(1), 1 + 1 + 4 + 4);
  // About 0.516 bytes a parameter for a large matrix.
  EXPECT_NEAR(double(nf4StorageBytes(4096 * 4096)) / (4096 * 4096), 0.5159,
              1e-4);
}

TEST(NF4Test, RejectsWhatItCannotQuantize) {
  EXPECT_THROW(quantizeNF4(at::ones({4}, at::kInt)), std::invalid_argument);
  EXPECT_THROW(quantizeNF4(at::ones({0})), std::invalid_argument);
  NF4Tensor q = quantizeNF4(at::ones({4}));
  EXPECT_THROW(dequantizeNF4(q, at::kInt), std::invalid_argument);
  EXPECT_THROW(quantizeNF4(at::tensor({1.0f, NAN})), std::invalid_argument);
  EXPECT_THROW(quantizeNF4(at::tensor({1.0f, INFINITY})),
               std::invalid_argument);
  NF4Tensor broken = q;
  broken.absmaxCodes = at::empty({0}, at::kByte);
  EXPECT_THROW(dequantizeNF4(broken, at::kFloat), std::invalid_argument);
  broken = q;
  broken.numel = 1000;
  EXPECT_THROW(dequantizeNF4(broken, at::kFloat), std::invalid_argument);
}

// A schedule's frozen base of bytes (FrozenBase.h): a unit with an NF4
// weight whose elements span two dequantization chunks and end in a short
// block, between two dense parameters (bf16, so the second one starts at an
// odd byte offset). Read back, each parameter is exactly what the codec
// gives (dequantizeNF4), or the dense type's rounding; the executor's chunked
// dequantization works on ATen ops, so this is also the CUDA path's.
TEST(NF4Test, FrozenBaseOfBytesRoundTrips) {
  const int64_t rows = 1025,
                cols = 1031; // 1,056,775: two chunks, a short block
  Unit unit;
  unit.name = "layers.0";
  unit.kind = UnitKind::LlamaBlock;
  auto frozen = [](std::string name, std::vector<int64_t> shape, int64_t offset,
                   BaseStorage base) {
    Param p;
    p.name = std::move(name);
    p.shape = std::move(shape);
    p.offset = offset;
    p.frozen = true;
    p.base = base;
    return p;
  };
  unit.params = {frozen("norm_a", {3}, 0, BaseStorage::BF16),
                 frozen("weight", {rows, cols}, 3, BaseStorage::NF4),
                 frozen("norm_b", {5}, 3 + rows * cols, BaseStorage::BF16)};
  unit.frozenNumel = 3 + rows * cols + 5;
  ASSERT_GT(rows * cols, kDequantChunkElements);
  ASSERT_EQ(unit.frozenBytes(), 6 + nf4StorageBytes(rows * cols) + 10);
  ASSERT_EQ(nf4StorageBytes(rows * cols) % 2, 1); // norm_b is unaligned
  EXPECT_TRUE(unit.hasQuantizedBase());

  at::manual_seed(7);
  at::Tensor values = at::randn({unit.frozenNumel}, at::kFloat);
  at::Tensor bytes = at::empty({unit.frozenBytes()}, at::kByte);
  storeFrozenBase(unit, values, bytes);
  for (at::ScalarType working : {at::kFloat, at::kBFloat16}) {
    at::Tensor out = at::empty({unit.frozenNumel}, working);
    loadFrozenBase(unit, bytes, out);
    at::Tensor weight = values.narrow(0, 3, rows * cols).reshape({rows, cols});
    EXPECT_TRUE(
        at::equal(out.narrow(0, 3, rows * cols),
                  dequantizeNF4(quantizeNF4(weight), working).reshape({-1})));
    EXPECT_TRUE(
        at::equal(out.narrow(0, 0, 3),
                  values.narrow(0, 0, 3).to(at::kBFloat16).to(working)));
    EXPECT_TRUE(at::equal(
        out.narrow(0, 3 + rows * cols, 5),
        values.narrow(0, 3 + rows * cols, 5).to(at::kBFloat16).to(working)));
    // What --merged merges into is what compute read.
    EXPECT_TRUE(at::equal(throughStorage(unit.params[1], weight).to(working),
                          out.narrow(0, 3, rows * cols).reshape({rows, cols})));
  }
  // A base of elements is copied across types.
  Unit dense = unit;
  dense.params = {frozen("w", {4, 4}, 0, BaseStorage::BF16)};
  dense.frozenNumel = 16;
  at::Tensor v = at::randn({16});
  at::Tensor stored = at::empty({16}, at::kBFloat16);
  storeFrozenBase(dense, v, stored);
  at::Tensor read = at::empty({16}, at::kFloat);
  loadFrozenBase(dense, stored, read);
  EXPECT_TRUE(at::equal(read, v.to(at::kBFloat16).to(at::kFloat)));
  // Sizes that do not match the unit are refused, not read past.
  EXPECT_THROW(loadFrozenBase(unit, bytes.narrow(0, 0, 10),
                              at::empty({unit.frozenNumel}, at::kFloat)),
               std::invalid_argument);
}
