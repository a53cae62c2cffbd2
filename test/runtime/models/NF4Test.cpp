//===- NF4Test.cpp - NF4 with double quantization ------------------------===//
//
// The codec's own properties. That its bytes are bitsandbytes' is
// nf4_bitsandbytes.py's check (test/runtime/models/CMakeLists.txt).
//
//===----------------------------------------------------------------------===//

#include "NF4.h"

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
