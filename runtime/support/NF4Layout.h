//===- NF4Layout.h - The sizes of a tensor stored in NF4 ---------*- C++
//-*-===//
//
// How many bytes bitsandbytes' NF4 with double quantization takes: the one
// definition that the runtime's codec (runtime/models/NF4.h) stores and the
// compiler's memory accounting counts. Plain C++, no LibTorch.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_RUNTIME_SUPPORT_NF4LAYOUT_H
#define PLAN_RUNTIME_SUPPORT_NF4LAYOUT_H

#include <cstdint>

namespace plan::rt {

/// Elements a block of NF4 indices shares one absmax over.
constexpr int64_t kNF4BlockSize = 64;
/// Absmax values a block of double quantization shares one fp32 scale over.
constexpr int64_t kNF4StatsBlockSize = 256;

/// Blocks of `block` elements that `n` elements take, the last one short.
constexpr int64_t nf4BlocksOf(int64_t n, int64_t block) {
  return (n + block - 1) / block;
}

/// Bytes `numel` elements take in NF4: the packed indices (two a byte), one
/// absmax index a block, an fp32 scale a block of absmax, and the fp32
/// offset.
constexpr int64_t nf4StorageBytes(int64_t numel) {
  int64_t blocks = nf4BlocksOf(numel, kNF4BlockSize);
  return (numel + 1) / 2 + blocks +
         4 * nf4BlocksOf(blocks, kNF4StatsBlockSize) + 4;
}

/// A schedule's frozen base of bytes holds each NF4 parameter as these
/// parts, one after the other: the packed indices ((numel + 1) / 2 bytes,
/// the first element in the high nibble), the absmax indices (one byte a
/// block), the fp32 scales of the absmax (one a kNF4StatsBlockSize blocks)
/// and the fp32 offset (the mean of the absmax). Byte offsets of the parts:
struct NF4Parts {
  int64_t blocks, scales;
  int64_t codesOffset, scalesOffset, offsetOffset;
};
constexpr NF4Parts nf4PartsOf(int64_t numel) {
  int64_t blocks = nf4BlocksOf(numel, kNF4BlockSize);
  int64_t codes = (numel + 1) / 2;
  int64_t scalesAt = codes + blocks;
  int64_t scales = nf4BlocksOf(blocks, kNF4StatsBlockSize);
  return {blocks, scales, codes, scalesAt, scalesAt + 4 * scales};
}

/// The runtime dequantizes a frozen base in chunks of this many elements (a
/// whole number of double-quantization blocks), so that its temporaries
/// stay bounded for any parameter size.
constexpr int64_t kDequantChunkElements = int64_t{1} << 20;
static_assert(kDequantChunkElements % (kNF4BlockSize * kNF4StatsBlockSize) ==
              0);

/// The bytes the runtime allocates at most while it dequantizes an NF4
/// parameter of `numel` elements (runtime/models/NF4.cpp,
/// dequantizeNF4Bytes), as planc's workspace model counts them: its two
/// fp32 tables (the dynamic map, each byte's two code values), the fp32
/// scales and offset, then for the largest chunk its absmax and values
/// (whole blocks of scales and of elements, in fp32) and the int32 indices
/// of its packed bytes (which outlive the absmax indices).
constexpr int64_t nf4DequantWorkspaceBytes(int64_t numel) {
  NF4Parts parts = nf4PartsOf(numel);
  int64_t chunk = numel < kDequantChunkElements ? numel : kDequantChunkElements;
  int64_t blocks = nf4BlocksOf(chunk, kNF4BlockSize);
  int64_t absmax =
      4 * kNF4StatsBlockSize * nf4BlocksOf(blocks, kNF4StatsBlockSize);
  int64_t values = 4 * kNF4BlockSize * blocks;
  int64_t codeIndices = 4 * blocks, packedIndices = 4 * ((chunk + 1) / 2);
  int64_t perChunk =
      absmax + (values + packedIndices > codeIndices ? values + packedIndices
                                                     : codeIndices);
  int64_t tables = 4 * (256 + 2 * 256);
  return tables + 4 * parts.scales + 4 + perChunk;
}

/// The bytes the runtime allocates at most while it converts a parameter
/// stored densely in a frozen base of bytes: an aligned copy of a chunk.
constexpr int64_t denseDequantWorkspaceBytes(int64_t bytes) {
  int64_t chunk = kDequantChunkElements * 4;
  return bytes < chunk ? bytes : chunk;
}

} // namespace plan::rt

#endif // PLAN_RUNTIME_SUPPORT_NF4LAYOUT_H
