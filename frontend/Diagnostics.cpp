//===- Diagnostics.cpp - Reporting .plan errors through MLIR --------------===//

#include "frontend/Diagnostics.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace plan;

DiagEmitter::DiagEmitter(mlir::MLIRContext *context, llvm::SourceMgr *sourceMgr,
                         mlir::Location fallback)
    : context(context), sourceMgr(sourceMgr), fallback(fallback) {}

mlir::Location DiagEmitter::loc(llvm::SMLoc point) const {
  if (!sourceMgr || !point.isValid())
    return fallback;
  unsigned bufferId = sourceMgr->FindBufferContainingLoc(point);
  if (bufferId == 0)
    return fallback;
  // SourceMgr::getLineAndColumn finds the column by searching back to the
  // line's start, every time: quadratic over the many diagnostics of one
  // long line. The last line is kept, so each line is searched once.
  const char *p = point.getPointer();
  if (lastLine.buffer != bufferId || p < lastLine.start || p > lastLine.end) {
    auto [line, column] = sourceMgr->getLineAndColumn(point, bufferId);
    llvm::StringRef rest(p - (column - 1),
                         sourceMgr->getMemoryBuffer(bufferId)->getBufferEnd() -
                             (p - (column - 1)));
    lastLine = {bufferId, line, rest.data(),
                rest.data() +
                    std::min(rest.find_first_of("\n\r"), rest.size())};
  }
  unsigned line = lastLine.line;
  unsigned column = p - lastLine.start + 1;
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

DiagnosticPrinter::DiagnosticPrinter(llvm::SourceMgr &sourceMgr,
                                     mlir::MLIRContext *context,
                                     unsigned errorLimit, llvm::StringRef tool)
    : sourceMgr(sourceMgr), tool(tool.str()), errorLimit(errorLimit),
      printer(sourceMgr, context),
      // Registered after `printer`, so it sees each diagnostic first.
      limiter(context,
              [this](mlir::Diagnostic &diag) { return handle(diag); }) {}

mlir::LogicalResult DiagnosticPrinter::handle(mlir::Diagnostic &diag) {
  if (diag.getSeverity() == mlir::DiagnosticSeverity::Error &&
      errorLimit != 0 && ++errors > errorLimit) {
    ++dropped;
    return mlir::success(); // consumed: not printed
  }
  // Short lines: the SourceMgr printer, as for any MLIR tool.
  return mlir::success(printCut(diag));
}

/// The source line of `loc`, and its buffer, if `loc` points into one.
static std::optional<std::pair<unsigned, llvm::StringRef>>
lineOf(llvm::SourceMgr &sourceMgr, mlir::FileLineColLoc loc) {
  for (unsigned id = 1; id <= sourceMgr.getNumBuffers(); ++id) {
    const llvm::MemoryBuffer *buffer = sourceMgr.getMemoryBuffer(id);
    if (buffer->getBufferIdentifier() != loc.getFilename().getValue())
      continue;
    llvm::SMLoc start = sourceMgr.FindLocForLineAndColumn(id, loc.getLine(), 1);
    if (!start.isValid())
      return std::nullopt;
    llvm::StringRef rest(start.getPointer(),
                         buffer->getBufferEnd() - start.getPointer());
    return std::make_pair(
        id, rest.take_until([](char c) { return c == '\n' || c == '\r'; }));
  }
  return std::nullopt;
}

static llvm::SourceMgr::DiagKind kindOf(mlir::DiagnosticSeverity severity) {
  switch (severity) {
  case mlir::DiagnosticSeverity::Error:
    return llvm::SourceMgr::DK_Error;
  case mlir::DiagnosticSeverity::Warning:
    return llvm::SourceMgr::DK_Warning;
  case mlir::DiagnosticSeverity::Note:
    return llvm::SourceMgr::DK_Note;
  case mlir::DiagnosticSeverity::Remark:
    return llvm::SourceMgr::DK_Remark;
  }
  return llvm::SourceMgr::DK_Error;
}

bool DiagnosticPrinter::printCut(mlir::Diagnostic &diag) {
  auto cut = [&](mlir::Location location)
      -> std::optional<std::pair<mlir::FileLineColLoc, llvm::StringRef>> {
    auto loc = llvm::dyn_cast<mlir::FileLineColLoc>(location);
    if (!loc)
      return std::nullopt;
    auto line = lineOf(sourceMgr, loc);
    if (!line || line->second.size() <= kMaxShownLine)
      return std::nullopt;
    return std::make_pair(loc, line->second);
  };
  // Cut only when some line of the diagnostic or its notes is long; the
  // usual case stays the SourceMgr printer's.
  bool anyLong = bool(cut(diag.getLocation()));
  for (mlir::Diagnostic &note : diag.getNotes())
    anyLong |= bool(cut(note.getLocation()));
  if (!anyLong)
    return false;

  auto print = [&](mlir::Diagnostic &d) {
    auto long_ = cut(d.getLocation());
    if (!long_) {
      printer.emitDiagnostic(d.getLocation(), d.str(), d.getSeverity());
      return;
    }
    auto [loc, line] = *long_;
    // The caret's column (0-based) and a window of the line around it.
    size_t column = loc.getColumn() ? loc.getColumn() - 1 : 0;
    size_t half = kMaxShownLine / 2;
    size_t begin = column > half ? column - half : 0;
    llvm::StringRef shown = line.substr(begin, kMaxShownLine);
    std::string text = (begin ? "..." : "") + shown.str() +
                       (begin + shown.size() < line.size() ? "..." : "");
    size_t shownColumn = column - begin + (begin ? 3 : 0);
    llvm::SMDiagnostic message(sourceMgr, llvm::SMLoc(),
                               loc.getFilename().getValue(), loc.getLine(),
                               static_cast<int>(shownColumn),
                               kindOf(d.getSeverity()), d.str(), text, {});
    // The location is the line's, not the window's: printed here.
    llvm::errs() << loc.getFilename().getValue() << ":" << loc.getLine() << ":"
                 << loc.getColumn() << ": ";
    message.print(nullptr, llvm::errs(), /*ShowColors=*/true,
                  /*ShowKindLabel=*/true, /*ShowLocation=*/false);
  };
  print(diag);
  for (mlir::Diagnostic &note : diag.getNotes())
    print(note);
  return true;
}

void DiagnosticPrinter::finish() {
  if (dropped)
    llvm::errs() << tool << ": " << dropped << " more error"
                 << (dropped == 1 ? "" : "s") << " not shown (the first "
                 << errorLimit << " are; --error-limit=0 shows all)\n";
  dropped = 0;
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
