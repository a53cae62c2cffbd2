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

#endif // PLAN_DIALECTS_PLAN_PLANENUMS_H
