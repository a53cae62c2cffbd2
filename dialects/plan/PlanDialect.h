//===- PlanDialect.h - The plan dialect -------------------------*- C++ -*-===//

#ifndef PLAN_DIALECTS_PLAN_PLANDIALECT_H
#define PLAN_DIALECTS_PLAN_PLANDIALECT_H

#include "dialects/plan/EnumKeyword.h"
#include "dialects/plan/PlanEnums.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"

#include "llvm/ADT/Hashing.h"

#include <bit>
#include <string>

namespace plan {

/// The axes of a plan's mesh (its `shard.grid`), outermost first. Ranks are
/// laid out `((pipeline_index * R + replicate_index) * S + shard_index) * T +
/// tensor_index`, so a tensor group is T consecutive ranks (inside one node
/// when T divides gpus_per_node), a shard group's ranks are T apart, and the
/// stages of a pipeline are R x S x T ranks apart (across nodes first, as
/// Megatron places them).
enum class MeshAxis : unsigned {
  Pipeline = 0,
  Replicate = 1,
  Shard = 2,
  Tensor = 3
};
constexpr unsigned kMeshAxes = 4;

/// A double attribute parameter. It converts to and from double, so the
/// generated getters read like plain doubles; it exists because attribute
/// storage hashes every parameter with llvm::hash_value, which has no
/// overload for double. Equality is bitwise, consistent with the hash.
struct F64 {
  double value = 0.0;
  F64() = default;
  F64(double value) : value(value) {}
  operator double() const { return value; }
  static bool same(F64 a, F64 b) {
    return std::bit_cast<uint64_t>(a.value) == std::bit_cast<uint64_t>(b.value);
  }
  friend llvm::hash_code hash_value(F64 f) {
    return llvm::hash_value(std::bit_cast<uint64_t>(f.value));
  }
};

// Parsers of attribute parameters that MLIR has no FieldParser for.
mlir::FailureOr<F64> parseF64Param(mlir::AsmParser &parser);
/// The shortest decimal that parses back to the same double, always with a
/// '.' (0.95, 1.0e-12, 10000.0); for attribute printing and messages.
std::string formatF64(double value);
/// Prints the shortest decimal that parses back to the same double, always
/// with a '.' so MLIR's lexer reads it as a float: 0.95, 1.0e-12, 10000.0.
void printF64Param(mlir::AsmPrinter &printer, F64 value);
mlir::FailureOr<bool> parseBoolParam(mlir::AsmParser &parser);
} // namespace plan

#include "dialects/plan/PlanDialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/plan/PlanAttrs.h.inc"

#define GET_OP_CLASSES
#include "dialects/plan/PlanOps.h.inc"

#endif // PLAN_DIALECTS_PLAN_PLANDIALECT_H
