//===- PlanEnums.cpp - Enumerations of the plan language ------------------===//

#include "dialects/plan/PlanEnums.h"

#include "dialects/plan/PlanEnums.cpp.inc"

bool plan::isBlockKind(UnitKind kind) {
  return kind == UnitKind::LlamaBlock || kind == UnitKind::GPT2Block ||
         kind == UnitKind::BertBlock;
}

bool plan::isHeadKind(UnitKind kind) {
  return kind == UnitKind::LlamaHead || kind == UnitKind::GPT2Head ||
         kind == UnitKind::BertHead;
}
