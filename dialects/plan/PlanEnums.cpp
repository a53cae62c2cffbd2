//===- PlanEnums.cpp - Enumerations of the plan language ------------------===//

#include "dialects/plan/PlanEnums.h"

#include "dialects/plan/PlanEnums.cpp.inc"
