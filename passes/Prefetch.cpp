//===- Prefetch.cpp - UNDER CONSTRUCTION ----------------------------------------===//
// Scaffolding so the tree builds while this pass is written; it fails loudly.

#include "passes/Passes.h"

namespace plan {
#define GEN_PASS_DEF_SCHEDPREFETCH
#include "passes/Passes.h.inc"
} // namespace plan

namespace {
struct SchedPrefetchPass : plan::impl::SchedPrefetchBase<SchedPrefetchPass> {
  void runOnOperation() override {
    getOperation().emitError("pass '") << getArgument() << "' is not written yet";
    signalPassFailure();
  }
};
} // namespace
