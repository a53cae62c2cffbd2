//===- ExpandPresets.cpp - UNDER CONSTRUCTION ----------------------------------------===//
// Scaffolding so the tree builds while this pass is written; it fails loudly.

#include "passes/Passes.h"

namespace plan {
#define GEN_PASS_DEF_PLANEXPANDPRESETS
#include "passes/Passes.h.inc"
} // namespace plan

namespace {
struct PlanExpandPresetsPass : plan::impl::PlanExpandPresetsBase<PlanExpandPresetsPass> {
  void runOnOperation() override {
    getOperation().emitError("pass '") << getArgument() << "' is not written yet";
    signalPassFailure();
  }
};
} // namespace
