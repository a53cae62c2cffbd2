//===- PlanEnums.h - Enumerations of the plan language ----------*- C++ -*-===//
//
// Generated from PlanEnums.td: `enum class plan::Sharding`, with
// `stringifySharding` (the .plan / IR spelling) and `symbolizeSharding`.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_DIALECTS_PLAN_PLANENUMS_H
#define PLAN_DIALECTS_PLAN_PLANENUMS_H

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>

#include "dialects/plan/PlanEnums.h.inc"

namespace plan {
/// A transformer block (Llama, GPT-2, BERT): what the wrap policy groups and
/// activation checkpointing recomputes.
bool isBlockKind(UnitKind kind);
/// The model's last unit, whose logits the loss is of.
bool isHeadKind(UnitKind kind);

/// Bytes `numel` elements take stored as `storage` (NF4: bitsandbytes'
/// layout of one tensor, runtime/support/NF4Layout.h): the runtime's
/// rt::storageBytes.
int64_t storageBytes(BaseStorage storage, int64_t numel);

/// The storage of a precision's working type: what a frozen base is kept
/// in when the plan does not say (`model.base`), and what compute reads it
/// in.
BaseStorage workingStorage(Precision precision);

/// A device's `link_latency` (#plan.device) when nothing sets it, in seconds:
/// one NCCL ring step between GPUs of a node (NVLink or PCIe).
constexpr double kDefaultLinkLatency = 5e-6;
} // namespace plan

#endif // PLAN_DIALECTS_PLAN_PLANENUMS_H
