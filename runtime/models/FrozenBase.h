//===- FrozenBase.h - A LoRA base as stored and as read --------*- C++ -*-===//
//
// A unit's frozen parameters (a LoRA run's base) are stored as each param's
// `base` says (Schedule.h): in a group's frozen buffer of bytes when one of
// them is NF4 (QLoRA: each parameter in NF4, NF4Layout.h, or raw in its
// dense type, one after the other), in elements of their one float type
// otherwise. Compute reads them in the working type, after the schedule's
// `dequantize`. These convert between the two, on any device.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_RUNTIME_MODELS_FROZENBASE_H
#define PLAN_RUNTIME_MODELS_FROZENBASE_H

#include "Schedule.h"

#include <ATen/ATen.h>

namespace plan::rt {

/// Stores `values` (fp32 on the CPU: `unit`'s frozenNumel elements, in
/// parameter order) into `stored` (CPU): bytes (uint8, unit.frozenBytes())
/// or elements of a float type (unit.frozenNumel).
void storeFrozenBase(const Unit &unit, const at::Tensor &values,
                     at::Tensor stored);

/// `stored` (as storeFrozenBase writes it, on any device) in `out`
/// (unit.frozenNumel elements of a float type, on the same device). What it
/// allocates is at most frozenBaseWorkspaceBytes(unit, stored's type).
void loadFrozenBase(const Unit &unit, const at::Tensor &stored, at::Tensor out);

/// The values a frozen parameter computes with: `values` (fp32) through its
/// storage and back (NF4's quantization error, or a dense type's rounding),
/// in fp32. What `--merged` merges the adapters into.
at::Tensor throughStorage(const Param &param, const at::Tensor &values);

} // namespace plan::rt

#endif // PLAN_RUNTIME_MODELS_FROZENBASE_H
