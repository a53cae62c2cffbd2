//===- Diagnostics.cpp - Reporting .plan errors through MLIR --------------===//

#include "frontend/Diagnostics.h"

#include "llvm/Support/SourceMgr.h"

#include <algorithm>

using namespace plan;

DiagEmitter::DiagEmitter(mlir::MLIRContext *context,
                         const llvm::SourceMgr *sourceMgr,
                         mlir::Location fallback)
    : context(context), sourceMgr(sourceMgr), fallback(fallback) {}

mlir::Location DiagEmitter::loc(llvm::SMLoc point) const {
  if (!sourceMgr || !point.isValid())
    return fallback;
  unsigned bufferId = sourceMgr->FindBufferContainingLoc(point);
  if (bufferId == 0)
    return fallback;
  auto [line, column] = sourceMgr->getLineAndColumn(point, bufferId);
  return mlir::FileLineColLoc::get(
      context, sourceMgr->getMemoryBuffer(bufferId)->getBufferIdentifier(),
      line, column);
}

mlir::InFlightDiagnostic DiagEmitter::error(llvm::SMLoc point,
                                            const llvm::Twine &message) {
  ++errors;
  return mlir::emitError(loc(point), message);
}

mlir::InFlightDiagnostic DiagEmitter::warning(llvm::SMLoc point,
                                              const llvm::Twine &message) {
  return mlir::emitWarning(loc(point), message);
}

llvm::StringRef plan::closestMatch(llvm::StringRef word,
                                   llvm::ArrayRef<llvm::StringRef> candidates) {
  if (word.empty())
    return "";
  // About one edit per three characters is a typo ("fulll_shard",
  // "shardgradop"); more than that is a different word. An edit count as
  // large as either word would replace it wholesale ("x" -> "b"), which is
  // never a suggestion worth making.
  unsigned allowed = (word.size() + 2) / 3;
  llvm::StringRef best;
  unsigned bestDistance = allowed + 1;
  for (llvm::StringRef candidate : candidates) {
    if (candidate.empty())
      continue;
    unsigned distance = word.edit_distance_insensitive(
        candidate, /*AllowReplacements=*/true, /*MaxEditDistance=*/allowed);
    size_t shorter = std::min(word.size(), candidate.size());
    if (distance >= shorter && distance != 0)
      continue;
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}
