//===- PlanEnums.cpp - Enumerations of the plan language ------------------===//

#include "dialects/plan/PlanEnums.h"

#include "dialects/plan/PlanEnums.cpp.inc"

#include "Schedule.h"

#include "llvm/Support/ErrorHandling.h"

bool plan::isBlockKind(UnitKind kind) {
  return kind == UnitKind::LlamaBlock || kind == UnitKind::GPT2Block ||
         kind == UnitKind::BertBlock;
}

bool plan::isHeadKind(UnitKind kind) {
  return kind == UnitKind::LlamaHead || kind == UnitKind::GPT2Head ||
         kind == UnitKind::BertHead;
}

int64_t plan::storageBytes(BaseStorage storage, int64_t numel) {
  // The runtime's definition (runtime/format/Schedule.h): the enumerations
  // share their keywords.
  return rt::storageBytes(
      *rt::parseKeyword<rt::BaseStorage>(stringifyBaseStorage(storage)), numel);
}

plan::BaseStorage plan::workingStorage(Precision precision) {
  switch (precision) {
  case Precision::FP32:
    return BaseStorage::F32;
  case Precision::BF16Mixed:
    return BaseStorage::BF16;
  case Precision::FP16Mixed:
    return BaseStorage::F16;
  }
  llvm_unreachable("unknown precision");
}
