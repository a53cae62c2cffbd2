//===- NF4.h - 4-bit NormalFloat weights, as QLoRA stores them --*- C++ -*-===//
//
// The base weights of a QLoRA run (issue 17): NF4 with double quantization
// as bitsandbytes' `quantize_4bit(x, blocksize=64, quant_type="nf4",
// compress_statistics=True)` stores it, so that a quantized base here is the
// one QLoRA users get from HF + bitsandbytes:
//
// - Elements are taken in blocks of kNF4BlockSize (the last one may be
//   shorter); each block is scaled by its largest magnitude (absmax) into
//   [-1, 1] and each element stored as the 4-bit index of the nearest of
//   the 16 NF4 values (nf4Codebook(); a value half-way between two goes to
//   the lower one). Two indices a byte, the first in the high nibble.
// - The absmax of the blocks, less their mean (absmaxOffset), are stored as
//   8-bit indices into bitsandbytes' signed dynamic map (dynamicMap()), in
//   blocks of kNF4StatsBlockSize with an fp32 scale each: the nearest value
//   (the lower at a tie). bitsandbytes' CPU kernel picks the other one of
//   two for values within about 1e-5 of their midpoint (NF4.cpp).
//
// Dequantized, an element is code[index] x (dynamicMap()[absmax index] x
// scale + offset), computed in fp32 and then cast.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_RUNTIME_MODELS_NF4_H
#define PLAN_RUNTIME_MODELS_NF4_H

#include "NF4Layout.h"

#include <ATen/ATen.h>

#include <array>
#include <cstdint>
#include <vector>

namespace plan::rt {

// kNF4BlockSize, kNF4StatsBlockSize and nf4StorageBytes are in NF4Layout.h.

/// The 16 NF4 values, ascending (QLoRA, appendix E; bitsandbytes' table).
const std::array<float, 16> &nf4Codebook();

/// bitsandbytes' signed 8-bit dynamic map (`create_dynamic_map(signed=True,
/// max_exponent_bits=7, total_bits=8)`), ascending, -0.993 to 1: what
/// double quantization stores the absmax as.
const std::array<float, 256> &dynamicMap();

/// A tensor in NF4 with double quantization (all CPU, contiguous).
struct NF4Tensor {
  std::vector<int64_t> shape;
  int64_t numel = 0;
  at::Tensor packed;       // uint8 [(numel + 1) / 2]
  at::Tensor absmaxCodes;  // uint8 [blocks]
  at::Tensor absmaxScales; // fp32 [ceil(blocks / kNF4StatsBlockSize)]
  float absmaxOffset = 0;  // the mean of the blocks' absmax
};

/// Quantizes `x` (fp32, bf16 or fp16, any device; read as fp32 on the CPU).
/// Throws std::invalid_argument for another dtype, an empty tensor, or a
/// NaN or infinity in it.
NF4Tensor quantizeNF4(const at::Tensor &x);

/// The blocks' absmax as double quantization stores them (fp32 [blocks]).
/// This and dequantizeNF4 throw std::invalid_argument for a tensor whose
/// parts do not have the sizes and dtypes quantizeNF4 gives them.
at::Tensor dequantizeNF4Absmax(const NF4Tensor &q);

/// `q` in `dtype` (fp32, bf16 or fp16), shaped as it was, on the CPU.
at::Tensor dequantizeNF4(const NF4Tensor &q, at::ScalarType dtype);

/// Writes `q` into `bytes` (uint8, CPU, nf4StorageBytes(q.numel) of them)
/// as a schedule's frozen base stores it (NF4Layout.h, NF4Parts).
void writeNF4(const NF4Tensor &q, at::Tensor bytes);

/// Dequantizes the NF4 tensor that `bytes` holds as writeNF4 writes it
/// (uint8, on any device) into `out` (its numel elements, fp32, bf16 or
/// fp16, on the same device), equal to dequantizeNF4 of it. Works on ATen
/// ops in chunks of kDequantChunkElements, so that what it allocates is at
/// most nf4DequantWorkspaceBytes(numel).
void dequantizeNF4Bytes(const at::Tensor &bytes, at::Tensor out);

} // namespace plan::rt

#endif // PLAN_RUNTIME_MODELS_NF4_H
