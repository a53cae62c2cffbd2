//===- Search.h - planc --search --------------------------------*- C++ -*-===//

#ifndef PLAN_TOOLS_PLANC_SEARCH_H
#define PLAN_TOOLS_PLANC_SEARCH_H

#include "frontend/Diagnostics.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/SourceMgr.h"

#include <cstdint>
#include <string>

namespace plan {

struct SearchRequest {
  std::string inputFilename;
  std::vector<std::string> overrides; // planc's --set, in order
  bool json = false;
  unsigned top = 5;
  int64_t tokens = 0; // --search-tokens; 0: the plan's global batch
  bool exhaustive = false;
  std::string outputFilename; // the table or JSON ("-": stdout)
  std::string planOut;        // --search-out; "" for none
};

/// `planc PLAN --search`: searches, prints the table (or JSON) and writes
/// the winner as a .plan. Exit code: 0 when a candidate fits, 2 when none
/// does, 1 on an error.
int runSearch(const SearchRequest &request, llvm::SourceMgr &sourceMgr,
              unsigned bufferId, DiagEmitter &diag);

} // namespace plan

#endif // PLAN_TOOLS_PLANC_SEARCH_H
