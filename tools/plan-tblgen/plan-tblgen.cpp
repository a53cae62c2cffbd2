//===- plan-tblgen.cpp - TableGen with the project's generators -----------===//
//
// mlir-tblgen's driver with the generators of RuntimeTables.cpp: the
// runtime's op table and enumerations, generated from the sched dialect's
// ODS (dialects/sched/SchedRuntime.td).
//
//===----------------------------------------------------------------------===//

#include "mlir/Tools/mlir-tblgen/MlirTblgenMain.h"

int main(int argc, char **argv) { return mlir::MlirTblgenMain(argc, argv); }
