//===- PlanDialect.cpp - The plan dialect ---------------------------------===//

#include "dialects/plan/PlanDialect.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace plan;

#include "dialects/plan/PlanDialect.cpp.inc"

void PlanDialect::initialize() {
  registerAttributes();
  addOperations<
#define GET_OP_LIST
#include "dialects/plan/PlanOps.cpp.inc"
      >();
}
