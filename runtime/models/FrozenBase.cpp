//===- FrozenBase.cpp - A LoRA run's frozen base, as stored and as read ---===//

#include "FrozenBase.h"

#include "DTypes.h"
#include "NF4.h"

#include <stdexcept>
#include <string>

namespace plan::rt {
namespace {

void checkSize(const Unit &unit, const at::Tensor &t, int64_t expected,
               const char *what) {
  if (t.dim() != 1 || t.numel() != expected)
    throw std::invalid_argument("unit '" + unit.name + "': its " + what +
                                " has " + std::to_string(t.numel()) +
                                " elements, not " + std::to_string(expected));
}

/// Calls visit(param, elementOffset, byteOffset) for each frozen parameter
/// the unit stores, in order.
template <typename Visit> void forEachFrozen(const Unit &unit, Visit &&visit) {
  int64_t bytes = 0;
  for (const Param &p : unit.params) {
    if (!p.frozen || !p.tiedTo.empty())
      continue;
    visit(p, p.offset, bytes);
    bytes += storageBytes(p.base, p.numel());
  }
}

} // namespace

void storeFrozenBase(const Unit &unit, const at::Tensor &values,
                     at::Tensor stored) {
  checkSize(unit, values, unit.frozenNumel, "frozen values");
  if (stored.scalar_type() != at::kByte) {
    checkSize(unit, stored, unit.frozenNumel, "frozen base");
    stored.copy_(values);
    return;
  }
  checkSize(unit, stored, unit.frozenBytes(), "frozen base of bytes");
  forEachFrozen(unit, [&](const Param &p, int64_t offset, int64_t at) {
    at::Tensor v = values.narrow(0, offset, p.numel());
    at::Tensor out = stored.narrow(0, at, storageBytes(p.base, p.numel()));
    if (p.base == BaseStorage::NF4)
      writeNF4(quantizeNF4(v), out);
    else
      out.copy_(v.to(support::scalarType(p.base)).view(at::kByte));
  });
}

void loadFrozenBase(const Unit &unit, const at::Tensor &stored,
                    at::Tensor out) {
  checkSize(unit, out, unit.frozenNumel, "working base");
  if (stored.scalar_type() != at::kByte) {
    checkSize(unit, stored, unit.frozenNumel, "frozen base");
    out.copy_(stored);
    return;
  }
  checkSize(unit, stored, unit.frozenBytes(), "frozen base of bytes");
  forEachFrozen(unit, [&](const Param &p, int64_t offset, int64_t at) {
    const int64_t n = p.numel(), bytes = storageBytes(p.base, n);
    at::Tensor dst = out.narrow(0, offset, n);
    at::Tensor src = stored.narrow(0, at, bytes);
    if (p.base == BaseStorage::NF4)
      return dequantizeNF4Bytes(src, dst);
    // Raw elements at any byte offset: through an aligned copy, a chunk at
    // a time (denseDequantWorkspaceBytes).
    const at::ScalarType type = support::scalarType(p.base);
    const int64_t size = static_cast<int64_t>(c10::elementSize(type));
    const int64_t chunk = 4 * kDequantChunkElements;
    for (int64_t first = 0; first < bytes; first += chunk) {
      const int64_t count = std::min(chunk, bytes - first);
      at::Tensor aligned = src.narrow(0, first, count).clone();
      dst.narrow(0, first / size, count / size).copy_(aligned.view(type));
    }
  });
}

at::Tensor throughStorage(const Param &param, const at::Tensor &values) {
  if (!param.frozen)
    return values;
  if (param.base == BaseStorage::NF4)
    return dequantizeNF4(quantizeNF4(values), at::kFloat);
  return values.to(support::scalarType(param.base)).to(at::kFloat);
}

} // namespace plan::rt
