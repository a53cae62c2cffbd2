//===- AssignSharding.cpp - UNDER CONSTRUCTION ----------------------------------------===//
// Scaffolding so the tree builds while this pass is written; it fails loudly.

#include "passes/Passes.h"

namespace plan {
#define GEN_PASS_DEF_PLANASSIGNSHARDING
#include "passes/Passes.h.inc"
} // namespace plan

namespace {
struct PlanAssignShardingPass : plan::impl::PlanAssignShardingBase<PlanAssignShardingPass> {
  void runOnOperation() override {
    getOperation().emitError("pass '") << getArgument() << "' is not written yet";
    signalPassFailure();
  }
};
} // namespace
