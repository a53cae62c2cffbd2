//===- InsertCollectives.cpp - UNDER CONSTRUCTION ----------------------------------------===//
// Scaffolding so the tree builds while this pass is written; it fails loudly.

#include "passes/Passes.h"

namespace plan {
#define GEN_PASS_DEF_SCHEDINSERTCOLLECTIVES
#include "passes/Passes.h.inc"
} // namespace plan

namespace {
struct SchedInsertCollectivesPass : plan::impl::SchedInsertCollectivesBase<SchedInsertCollectivesPass> {
  void runOnOperation() override {
    getOperation().emitError("pass '") << getArgument() << "' is not written yet";
    signalPassFailure();
  }
};
} // namespace
