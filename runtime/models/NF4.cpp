//===- NF4.cpp - 4-bit NormalFloat weights, as QLoRA stores them ----------===//
//
// Where bitsandbytes computes with torch ops (the 4-bit indices, the mean
// of the absmax, the dynamic map) this does the same ATen ops in the same
// order, so every value rounds the same. The 8-bit quantization of the
// absmax is bitsandbytes' rule (divide by the block's largest magnitude,
// take the nearest value of the map, the lower at a tie); bitsandbytes'
// CPU kernel for it resolves values within about 1e-5 of a midpoint between
// two map values differently (test/runtime/models/nf4_bitsandbytes.py
// measures how often).
//
//===----------------------------------------------------------------------===//

#include "NF4.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <stdexcept>

namespace plan::rt {

const std::array<float, 16> &nf4Codebook() {
  // The quantiles of N(0, 1) that give each bin equal mass, scaled to
  // [-1, 1], with an exact zero (QLoRA's NormalFloat); as fp32.
  static const std::array<float, 16> codebook = {-1.0f,
                                                 -0.6961928009986877f,
                                                 -0.5250730514526367f,
                                                 -0.39491748809814453f,
                                                 -0.28444138169288635f,
                                                 -0.18477343022823334f,
                                                 -0.09105003625154495f,
                                                 0.0f,
                                                 0.07958029955625534f,
                                                 0.16093020141124725f,
                                                 0.24611230194568634f,
                                                 0.33791524171829224f,
                                                 0.44070982933044434f,
                                                 0.5626170039176941f,
                                                 0.7229568362236023f,
                                                 1.0f};
  return codebook;
}

namespace {

std::array<float, 256> makeDynamicMap() {
  // Signed, 7 exponent bits, 8 bits in all: for each exponent e = 0..6, the
  // midpoints of 2^e + 1 points spread evenly over [0.1, 1], times
  // 10^(e - 6), with both signs; then 0 and 1. Computed with the ATen ops
  // bitsandbytes computes it with (linspace, add, divide, a scalar
  // multiply, all in fp32), so every value rounds the same.
  static const double kPowers[] = {1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1e0};
  std::vector<float> values;
  for (int e = 0; e < 7; ++e) {
    at::Tensor bounds =
        at::linspace(0.1, 1.0, (int64_t(1) << e) + 1, at::kFloat);
    at::Tensor means = (bounds.slice(0, 0, -1) + bounds.slice(0, 1)) / 2.0;
    at::Tensor positive = (means * kPowers[e]).contiguous();
    at::Tensor negative = (means * -kPowers[e]).contiguous();
    for (int64_t i = 0; i < means.numel(); ++i) {
      values.push_back(positive.data_ptr<float>()[i]);
      values.push_back(negative.data_ptr<float>()[i]);
    }
  }
  values.push_back(0.0f);
  values.push_back(1.0f);
  std::sort(values.begin(), values.end());
  std::array<float, 256> map{};
  std::copy(values.begin(), values.end(), map.begin());
  return map;
}

void checkInput(const at::Tensor &x) {
  if (x.scalar_type() != at::kFloat && x.scalar_type() != at::kBFloat16 &&
      x.scalar_type() != at::kHalf)
    throw std::invalid_argument(
        std::string("NF4 quantizes fp32, bf16 or fp16 tensors, got ") +
        c10::toString(x.scalar_type()));
  if (x.numel() == 0)
    throw std::invalid_argument("NF4 quantizes a tensor with no elements");
}

/// That `q` holds what quantizeNF4 stores for `q.numel` elements.
void checkStored(const NF4Tensor &q) {
  auto is = [](const at::Tensor &t, at::ScalarType dtype, int64_t numel) {
    return t.defined() && t.device().is_cpu() && t.scalar_type() == dtype &&
           t.is_contiguous() && t.numel() == numel;
  };
  int64_t blocks = nf4BlocksOf(q.numel, kNF4BlockSize);
  if (q.numel <= 0 || !is(q.packed, at::kByte, (q.numel + 1) / 2) ||
      !is(q.absmaxCodes, at::kByte, blocks) ||
      !is(q.absmaxScales, at::kFloat, nf4BlocksOf(blocks, kNF4StatsBlockSize)))
    throw std::invalid_argument(
        "an NF4 tensor's packed indices, absmax codes and scales do not have "
        "the sizes and dtypes its element count needs");
}

/// The map index for `normed`, clamped to [-1, 1]: the nearest value, the
/// lower one at a tie.
uint8_t nearestInMap(float normed, const std::array<float, 256> &map) {
  if (std::isnan(normed))
    return 0; // a block of equal absmax, scale 0: every index gives 0
  normed = std::clamp(normed, -1.0f, 1.0f);
  auto right = std::lower_bound(map.begin(), map.end(), normed);
  if (right == map.begin())
    return 0;
  if (right == map.end())
    return 255;
  auto left = right - 1;
  auto idx = static_cast<uint8_t>(right - map.begin());
  return std::fabs(*right - normed) < std::fabs(normed - *left) ? idx : idx - 1;
}

} // namespace

const std::array<float, 256> &dynamicMap() {
  static const std::array<float, 256> map = makeDynamicMap();
  return map;
}

NF4Tensor quantizeNF4(const at::Tensor &x) {
  checkInput(x);
  NF4Tensor q;
  q.shape = x.sizes().vec();
  q.numel = x.numel();
  at::Tensor flat = x.detach().reshape(-1).to(at::kCPU, at::kFloat);
  // One NaN or infinity would make the mean of the absmax, and so every
  // element, NaN (bitsandbytes stores it so).
  if (!at::isfinite(flat).all().item<bool>())
    throw std::invalid_argument("NF4 quantizes finite values; the tensor has "
                                "a NaN or an infinity");
  const int64_t n = q.numel, rem = n % kNF4BlockSize, full = n - rem;

  // The 4-bit indices, as bitsandbytes' quantize_4bit does it with torch.
  at::Tensor blocks = flat.slice(0, 0, full).reshape({-1, kNF4BlockSize});
  at::Tensor absmax = std::get<0>(blocks.abs().max(-1));
  at::Tensor scaled =
      at::clamp(blocks * at::reciprocal(absmax.clamp_min(1e-38).view({-1, 1})),
                -1, 1)
          .reshape(-1);
  if (rem) {
    at::Tensor tail = flat.slice(0, full);
    at::Tensor am = tail.abs().max().clamp_min(1e-38);
    absmax = at::cat({absmax, am.unsqueeze(0)});
    scaled = at::cat({scaled, at::clamp(tail / am, -1, 1)});
  }
  if (scaled.numel() % 2)
    scaled = at::cat({scaled, at::zeros({1}, scaled.options())});
  const std::array<float, 16> &code = nf4Codebook();
  std::array<float, 15> mids;
  for (size_t i = 0; i < mids.size(); ++i)
    mids[i] = (code[i] + code[i + 1]) / 2.0f;
  at::Tensor bounds = at::tensor(at::ArrayRef<float>(mids.data(), mids.size()));
  at::Tensor idx =
      at::bucketize(scaled, bounds, /*out_int32=*/true).to(at::kByte);
  q.packed = at::bitwise_or(at::bitwise_left_shift(idx.slice(0, 0, {}, 2), 4),
                            idx.slice(0, 1, {}, 2))
                 .contiguous();

  // Double quantization: the absmax less their mean, in 8 bits.
  at::Tensor mean = absmax.mean();
  q.absmaxOffset = mean.item<float>();
  at::Tensor centered = (absmax - mean).contiguous();
  const int64_t count = centered.numel();
  const float *v = centered.data_ptr<float>();
  q.absmaxCodes = at::empty({count}, at::kByte);
  q.absmaxScales =
      at::empty({nf4BlocksOf(count, kNF4StatsBlockSize)}, at::kFloat);
  uint8_t *codes = q.absmaxCodes.data_ptr<uint8_t>();
  float *scales = q.absmaxScales.data_ptr<float>();
  const std::array<float, 256> &map = dynamicMap();
  for (int64_t start = 0; start < count; start += kNF4StatsBlockSize) {
    int64_t end = std::min(count, start + kNF4StatsBlockSize);
    float scale = -FLT_MAX;
    for (int64_t i = start; i < end; ++i)
      scale = std::fmax(scale, std::fabs(v[i]));
    scales[start / kNF4StatsBlockSize] = scale;
    for (int64_t i = start; i < end; ++i)
      codes[i] = nearestInMap(v[i] / scale, map);
  }
  return q;
}

at::Tensor dequantizeNF4Absmax(const NF4Tensor &q) {
  checkStored(q);
  const int64_t count = q.absmaxCodes.numel();
  at::Tensor absmax = at::empty({count}, at::kFloat);
  const uint8_t *codes = q.absmaxCodes.data_ptr<uint8_t>();
  const float *scales = q.absmaxScales.data_ptr<float>();
  float *out = absmax.data_ptr<float>();
  const std::array<float, 256> &map = dynamicMap();
  for (int64_t i = 0; i < count; ++i)
    out[i] = map[codes[i]] * scales[i / kNF4StatsBlockSize];
  return absmax + at::scalar_tensor(q.absmaxOffset, at::kFloat);
}

at::Tensor dequantizeNF4(const NF4Tensor &q, at::ScalarType dtype) {
  if (dtype != at::kFloat && dtype != at::kBFloat16 && dtype != at::kHalf)
    throw std::invalid_argument(
        std::string("NF4 dequantizes to fp32, bf16 or fp16, not ") +
        c10::toString(dtype));
  at::Tensor absmax = dequantizeNF4Absmax(q);
  const std::array<float, 16> &code = nf4Codebook();
  at::Tensor out = at::empty({q.numel}, at::kFloat);
  const uint8_t *packed = q.packed.data_ptr<uint8_t>();
  const float *scale = absmax.data_ptr<float>();
  float *o = out.data_ptr<float>();
  for (int64_t i = 0; i < q.numel; ++i) {
    uint8_t byte = packed[i / 2];
    uint8_t index = i % 2 ? byte & 0x0F : byte >> 4;
    o[i] = code[index] * scale[i / kNF4BlockSize];
  }
  return out.to(dtype).reshape(q.shape);
}

void writeNF4(const NF4Tensor &q, at::Tensor bytes) {
  checkStored(q);
  NF4Parts parts = nf4PartsOf(q.numel);
  if (bytes.scalar_type() != at::kByte || bytes.dim() != 1 ||
      bytes.numel() != nf4StorageBytes(q.numel) || !bytes.is_cpu())
    throw std::invalid_argument("NF4 of " + std::to_string(q.numel) +
                                " elements takes " +
                                std::to_string(nf4StorageBytes(q.numel)) +
                                " bytes of a CPU uint8 tensor");
  auto asBytes = [](const at::Tensor &t) {
    return t.reshape({-1}).contiguous().view(at::kByte);
  };
  bytes.narrow(0, 0, parts.codesOffset).copy_(q.packed);
  bytes.narrow(0, parts.codesOffset, parts.blocks).copy_(q.absmaxCodes);
  bytes.narrow(0, parts.scalesOffset, 4 * parts.scales)
      .copy_(asBytes(q.absmaxScales));
  bytes.narrow(0, parts.offsetOffset, 4)
      .copy_(asBytes(at::scalar_tensor(q.absmaxOffset, at::kFloat)));
}

void dequantizeNF4Bytes(const at::Tensor &bytes, at::Tensor out) {
  const int64_t n = out.numel();
  NF4Parts parts = nf4PartsOf(n);
  if (bytes.scalar_type() != at::kByte || bytes.numel() != nf4StorageBytes(n))
    throw std::invalid_argument("NF4 of " + std::to_string(n) +
                                " elements takes " +
                                std::to_string(nf4StorageBytes(n)) + " bytes");
  at::TensorOptions f32 = out.options().dtype(at::kFloat);
  // The tables, on the device: the dynamic map, and each byte's two values.
  const std::array<float, 256> &map = dynamicMap();
  const std::array<float, 16> &code = nf4Codebook();
  std::array<float, 512> pairs;
  for (int b = 0; b < 256; ++b) {
    pairs[2 * b] = code[b >> 4];
    pairs[2 * b + 1] = code[b & 0x0F];
  }
  at::Tensor mapTable =
      at::tensor(at::ArrayRef<float>(map.data(), map.size())).to(f32);
  at::Tensor pairTable =
      at::tensor(at::ArrayRef<float>(pairs.data(), 512)).view({256, 2}).to(f32);
  // The fp32 parts, copied out of the bytes (which need not be aligned).
  at::Tensor scales = bytes.narrow(0, parts.scalesOffset, 4 * parts.scales)
                          .clone()
                          .view(at::kFloat);
  at::Tensor offset =
      bytes.narrow(0, parts.offsetOffset, 4).clone().view(at::kFloat);
  for (int64_t first = 0; first < n; first += kDequantChunkElements) {
    const int64_t count = std::min(kDequantChunkElements, n - first);
    const int64_t block0 = first / kNF4BlockSize;
    const int64_t blocks = nf4BlocksOf(count, kNF4BlockSize);
    const int64_t scaleBlocks = nf4BlocksOf(blocks, kNF4StatsBlockSize);
    // Each block's absmax: map[index] x scale + offset, as
    // dequantizeNF4Absmax computes it.
    at::Tensor absmax = at::empty({scaleBlocks * kNF4StatsBlockSize}, f32);
    {
      at::Tensor indices =
          bytes.narrow(0, parts.codesOffset + block0, blocks).to(at::kInt);
      at::Tensor head = absmax.narrow(0, 0, blocks);
      at::index_select_out(head, mapTable, 0, indices);
    }
    absmax.view({scaleBlocks, kNF4StatsBlockSize})
        .mul_(scales.narrow(0, block0 / kNF4StatsBlockSize, scaleBlocks)
                  .unsqueeze(1));
    absmax.add_(offset);
    // Each element: its code value times its block's absmax.
    at::Tensor values = at::empty({blocks * kNF4BlockSize}, f32);
    {
      const int64_t packed = (count + 1) / 2;
      at::Tensor indices = bytes.narrow(0, first / 2, packed).to(at::kInt);
      at::Tensor pairsOut = values.narrow(0, 0, 2 * packed).view({packed, 2});
      at::index_select_out(pairsOut, pairTable, 0, indices);
    }
    values.view({blocks, kNF4BlockSize})
        .mul_(absmax.narrow(0, 0, blocks).unsqueeze(1));
    out.narrow(0, first, count).copy_(values.narrow(0, 0, count));
  }
}

} // namespace plan::rt
