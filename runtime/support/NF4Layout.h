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

} // namespace plan::rt

#endif // PLAN_RUNTIME_SUPPORT_NF4LAYOUT_H
