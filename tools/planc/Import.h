//===- Import.h - planc import ----------------------------------*- C++ -*-===//

#ifndef PLAN_TOOLS_PLANC_IMPORT_H
#define PLAN_TOOLS_PLANC_IMPORT_H

#include "llvm/Support/CommandLine.h"

namespace plan {

/// `planc import ...`: its options live in this subcommand.
extern llvm::cl::SubCommand importCommand;

/// Runs `planc import` after the command line was parsed; the exit code.
int runImport();

} // namespace plan

#endif // PLAN_TOOLS_PLANC_IMPORT_H
