//===- PresetMatrixTest.cpp - Every preset under every strategy
//------------===//
//
// Every model preset x every sharding strategy x every precision x three
// offload settings either compiles all the way (lowering, report, schedule
// export and the schedule reader's checks) or is rejected by the plan
// checker with user-level errors at a place in the plan. A plan the checker
// accepts must never fail later, and no MLIR verifier text ("'plan.param'
// op ...", "see current operation") may reach a user. Layers are cut to two
// per model: what can go wrong is per unit kind, not per layer count.
//
//===----------------------------------------------------------------------===//

#include "ScheduleFile.h"
#include "export/ExportSchedule.h"
#include "frontend/Frontend.h"
#include "frontend/Models.h"
#include "passes/Passes.h"
#include "report/Report.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <regex>
#include <string>
#include <vector>

namespace {

struct Outcome {
  bool accepted = false; // the checker accepted the plan
  bool compiled = false; // and everything after it succeeded
  std::vector<std::string> diagnostics;
};

Outcome compile(const std::string &text) {
  mlir::DialectRegistry registry;
  plan::registerPlanDialects(registry);
  mlir::MLIRContext context(registry);
  Outcome outcome;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
    std::string where;
    if (auto loc = llvm::dyn_cast<mlir::FileLineColLoc>(d.getLocation()))
      where = (loc.getFilename().str() + ":" + std::to_string(loc.getLine()) +
               ":" + std::to_string(loc.getColumn()) + ": ");
    outcome.diagnostics.push_back(where + d.str());
    for (const mlir::Diagnostic &note : d.getNotes())
      outcome.diagnostics.push_back("  note: " + note.str());
    return mlir::success();
  });
  llvm::SourceMgr sourceMgr;
  unsigned id = sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(text, "matrix.plan"), llvm::SMLoc());
  plan::DiagEmitter diag(
      &context, &sourceMgr,
      mlir::FileLineColLoc::get(&context, "matrix.plan", 1, 1));
  std::optional<plan::PlanSpec> spec =
      plan::loadPlan(sourceMgr, id, {}, "matrix", diag);
  if (!spec)
    return outcome;
  outcome.accepted = true;
  mlir::OwningOpRef<mlir::ModuleOp> module = plan::importPlan(*spec, diag);
  if (!module)
    return outcome;
  mlir::PassManager pm(&context);
  plan::buildPlanLowerPipeline(pm);
  if (mlir::failed(pm.run(*module)) ||
      mlir::failed(plan::analyzeSchedule(*module)))
    return outcome;
  mlir::FailureOr<plan::rt::Schedule> schedule = plan::exportSchedule(*module);
  if (mlir::failed(schedule))
    return outcome;
  try {
    plan::rt::validateSchedule(std::move(*schedule), "matrix.sched");
  } catch (const std::exception &e) {
    outcome.diagnostics.push_back(e.what());
    return outcome;
  }
  outcome.compiled = true;
  return outcome;
}

std::string join(const std::vector<std::string> &lines) {
  std::string out;
  for (const std::string &line : lines)
    out += line + "\n";
  return out;
}

TEST(PresetMatrix, EveryPresetStrategyPrecisionAndOffload) {
  const char *shardings[] = {"no_shard", "zero1", "shard_grad_op", "full_shard",
                             "hybrid_shard"};
  const char *precisions[] = {"fp32", "bf16_mixed", "fp16_mixed"};
  const char *offloads[] = {"", "offload { optimizer = cpu }",
                            "offload { params = cpu  grads = cpu  "
                            "optimizer = cpu }"};
  // What only MLIR's verifier says, never the plan checker.
  const std::regex verifierText(
      R"(see current operation|'[a-z_]+\.[a-z_]+' op )");
  // A checker error names a place in the plan: matrix.plan:LINE:COL.
  const std::regex located(R"(^matrix\.plan:[1-9][0-9]*:[1-9][0-9]*: )");

  int compiled = 0, rejected = 0;
  for (const plan::ModelPreset &preset : plan::modelPresets())
    for (const char *sharding : shardings)
      for (const char *precision : precisions)
        for (const char *offload : offloads) {
          std::string text =
              "model = " + preset.name.str() +
              " { layers = 2 }\n"
              "cluster { nodes = 2  gpus_per_node = 2  gpu = h100_sxm  "
              "host_memory = 2TiB }\n"
              "train { optimizer = adamw(lr = 1e-4)  micro_batch = 1  "
              "seq_len = 64  grad_accum = 2  precision = " +
              precision +
              " }\n"
              "parallel { sharding = " +
              sharding + "  " + offload + " }\n";
          SCOPED_TRACE(text);
          Outcome outcome = compile(text);
          std::string said = join(outcome.diagnostics);
          for (const std::string &line : outcome.diagnostics)
            EXPECT_FALSE(std::regex_search(line, verifierText)) << said;
          if (outcome.accepted) {
            // Accepted by the checker: it must compile.
            EXPECT_TRUE(outcome.compiled) << said;
            compiled += outcome.compiled;
            continue;
          }
          ++rejected;
          ASSERT_FALSE(outcome.diagnostics.empty());
          EXPECT_TRUE(std::regex_search(outcome.diagnostics.front(), located))
              << said;
        }
  std::printf("%d plans compiled, %d rejected by the checker\n", compiled,
              rejected);
  // The matrix is mostly plans that compile: a checker that rejected
  // everything would pass the loop above.
  EXPECT_GT(compiled, 4 * rejected)
      << compiled << " compiled, " << rejected << " rejected";
}

} // namespace
