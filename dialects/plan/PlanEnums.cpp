//===- PlanEnums.cpp - Enumerations of the plan language ------------------===//

#include "dialects/plan/PlanEnums.h"

#include "dialects/plan/PlanEnums.cpp.inc"

#include "runtime/support/NF4Layout.h"

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
  switch (storage) {
  case BaseStorage::NF4:
    return rt::nf4StorageBytes(numel);
  case BaseStorage::BF16:
  case BaseStorage::F16:
    return 2 * numel;
  case BaseStorage::F32:
    return 4 * numel;
  }
  llvm_unreachable("unknown storage");
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
