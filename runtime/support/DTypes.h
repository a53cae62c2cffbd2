//===- DTypes.h - Schedule element types as LibTorch dtypes -----*- C++ -*-===//
//
// For the runtime's LibTorch libraries only (the rest of support/ does not
// need LibTorch).
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_RUNTIME_SUPPORT_DTYPES_H
#define PLAN_RUNTIME_SUPPORT_DTYPES_H

#include "Schedule.h"

#include <c10/core/ScalarType.h>

namespace plan::rt::support {

inline c10::ScalarType scalarType(ElementType type) {
  switch (type) {
  case ElementType::F32:
    return c10::kFloat;
  case ElementType::BF16:
    return c10::kBFloat16;
  case ElementType::F16:
    return c10::kHalf;
  case ElementType::I8: // bytes, read as such
    return c10::kByte;
  }
  return c10::kFloat;
}

/// The dtype a dense frozen base stored as `storage` has (NF4, which is
/// bytes, has none: kByte).
inline c10::ScalarType scalarType(BaseStorage storage) {
  switch (storage) {
  case BaseStorage::BF16:
    return c10::kBFloat16;
  case BaseStorage::F16:
    return c10::kHalf;
  case BaseStorage::F32:
    return c10::kFloat;
  case BaseStorage::NF4:
    return c10::kByte;
  }
  return c10::kFloat;
}

} // namespace plan::rt::support

#endif // PLAN_RUNTIME_SUPPORT_DTYPES_H
