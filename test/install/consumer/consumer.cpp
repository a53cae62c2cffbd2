// Loads a .plan text through the installed headers and libraries and prints
// its plan IR.
#include "frontend/Frontend.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

int main() {
  const char *text = R"(
model = llama_tiny
cluster { gpus_per_node = 2  gpu = cpu  host_memory = 16GiB }
train { optimizer = adamw(lr = 1e-3)  micro_batch = 2  seq_len = 64 }
parallel { sharding = full_shard }
)";
  mlir::MLIRContext context;
  llvm::SourceMgr sourceMgr;
  unsigned buffer = sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBuffer(text, "embedded.plan"), llvm::SMLoc());
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  plan::DiagEmitter diag(&context, &sourceMgr,
                         mlir::FileLineColLoc::get(&context, "embedded.plan", 1, 1));
  std::optional<plan::PlanSpec> spec =
      plan::loadPlan(sourceMgr, buffer, {}, "embedded", diag);
  if (!spec)
    return 1;
  mlir::OwningOpRef<mlir::ModuleOp> module = plan::importPlan(*spec, diag);
  if (!module)
    return 1;
  module->print(llvm::outs());
  return 0;
}
