// Compiles a .plan text through the installed headers and libraries: load
// it, lower it with the compiler's pipeline, report it, export the schedule
// and write the file.
//   compile OUT.sched
#include "export/ExportSchedule.h"
#include "frontend/Frontend.h"
#include "passes/Passes.h"
#include "report/Report.h"

#include "ScheduleFile.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

int main(int argc, char **argv) {
  if (argc != 2) {
    llvm::errs() << "usage: compile OUT.sched\n";
    return 2;
  }
  const char *text = R"(
model = llama_tiny
cluster { gpus_per_node = 1  gpu = cpu  host_memory = 16GiB }
train { optimizer = adamw(lr = 1e-3)  micro_batch = 2  seq_len = 16 }
parallel { sharding = full_shard }
)";
  mlir::DialectRegistry registry;
  plan::registerPlanDialects(registry);
  mlir::MLIRContext context(registry);
  llvm::SourceMgr sourceMgr;
  unsigned buffer = sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBuffer(text, "embedded.plan"), llvm::SMLoc());
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  plan::DiagEmitter diag(
      &context, &sourceMgr,
      mlir::FileLineColLoc::get(&context, "embedded.plan", 1, 1));
  std::optional<plan::PlanSpec> spec =
      plan::loadPlan(sourceMgr, buffer, {}, "embedded", diag);
  if (!spec)
    return 1;
  mlir::OwningOpRef<mlir::ModuleOp> module = plan::importPlan(*spec, diag);
  if (!module)
    return 1;
  mlir::PassManager pm(&context);
  plan::buildPlanLowerPipeline(pm);
  if (mlir::failed(pm.run(*module)))
    return 1;
  mlir::FailureOr<plan::ScheduleReport> report = plan::analyzeSchedule(*module);
  if (mlir::failed(report))
    return 1;
  plan::printReportTable(*report, llvm::outs());
  mlir::FailureOr<plan::rt::Schedule> schedule = plan::exportSchedule(*module);
  if (mlir::failed(schedule))
    return 1;
  try {
    plan::rt::writeScheduleFile(
        plan::rt::validateSchedule(std::move(*schedule), argv[1]), argv[1]);
  } catch (const std::exception &e) {
    llvm::errs() << "compile: " << e.what() << "\n";
    return 1;
  }
  llvm::outs() << "wrote " << argv[1] << "\n";
  return 0;
}
