//===- PlanEdit.cpp - Changing keys of a .plan file in its text -----------===//

#include "frontend/PlanEdit.h"

#include "frontend/Parser.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <algorithm>

using namespace plan;
using namespace plan::syntax;

namespace {

/// One change of the text: `text` inserted at `offset`, after `length`
/// characters there are removed.
struct Edit {
  size_t offset = 0, length = 0;
  std::string text;
  size_t order = 0; // settings keep their order where they meet
};

/// Where a section that is not in the file yet is added: the path segments
/// that do not exist, under `block` (null: the top level is missing them).
struct Placement {
  const Block *block = nullptr;
  const Item *item = nullptr; // the item the path names, when written
  std::vector<std::string> rest;
  // An item written without a block whose value takes one (`model =
  // llama3_8b`, `model = hf(...)`): `rest` goes in a block added after it.
  const Item *extend = nullptr;
};

/// Whether `--set` may give keys under a value written without a block
/// (Parser.cpp, blockToDescend): a name (a preset) or an hf() call.
bool takesBlock(const Value &value) {
  return value.kind == ValueKind::Identifier ||
         (value.kind == ValueKind::Call && value.text == "hf");
}

/// Finds `path` under `block` the way `--set` places a value
/// (Parser.cpp, placeSetting): an item written with the whole dotted key,
/// or the longest leading part of it that names a block.
Placement place(const Block &block, llvm::ArrayRef<std::string> path) {
  std::string whole = llvm::join(path, ".");
  if (const Item *item = block.find(whole))
    return {&block, item, {}};
  for (size_t n = path.size() - 1; n >= 1; --n) {
    const Item *item = block.find(llvm::join(path.take_front(n), "."));
    if (item && item->value.block && item->value.block->lbrace.isValid())
      return place(*item->value.block, path.drop_front(n));
    if (item && takesBlock(item->value)) {
      llvm::ArrayRef<std::string> rest = path.drop_front(n);
      return {&block, nullptr, {rest.begin(), rest.end()}, item};
    }
    if (item)
      break;
  }
  return {&block, nullptr, {path.begin(), path.end()}};
}

/// The indentation of the line `at` is on.
std::string indentOf(llvm::StringRef buffer, const char *at) {
  size_t line = buffer.rfind('\n', at - buffer.data());
  line = line == llvm::StringRef::npos ? 0 : line + 1;
  size_t first = buffer.find_first_not_of(" \t", line);
  return buffer.substr(line, first - line).str();
}

} // namespace

std::optional<std::string>
plan::editPlanText(const llvm::SourceMgr &sourceMgr, unsigned bufferId,
                   llvm::ArrayRef<std::string> settings, DiagEmitter &diag) {
  Block root = parsePlanSyntax(sourceMgr, bufferId, diag);
  if (diag.hadError())
    return std::nullopt;
  llvm::StringRef buffer = sourceMgr.getMemoryBuffer(bufferId)->getBuffer();
  auto offsetOf = [&](llvm::SMLoc loc) {
    return size_t(loc.getPointer() - buffer.data());
  };

  std::vector<Edit> edits;
  // Keys for a block added after a value written without one, per item.
  std::vector<std::pair<const Item *, std::vector<std::string>>> added;
  // Top-level sections the file lacks, in the order first set.
  std::vector<std::pair<std::string, std::vector<std::string>>> newSections;
  for (auto [order, setting] : llvm::enumerate(settings)) {
    auto [pathText, value] = llvm::StringRef(setting).split('=');
    llvm::SmallVector<llvm::StringRef> parts;
    pathText.split(parts, '.');
    std::vector<std::string> path(parts.begin(), parts.end());
    Placement at = place(root, path);
    if (at.item) {
      const llvm::SMRange range = at.item->value.range;
      edits.push_back(
          {offsetOf(range.Start),
           size_t(range.End.getPointer() - range.Start.getPointer()),
           value.str(), order});
      continue;
    }
    if (at.extend) {
      std::string line = llvm::join(at.rest, ".") + " = " + value.str();
      auto it = llvm::find_if(
          added, [&](const auto &a) { return a.first == at.extend; });
      if (it == added.end())
        added.push_back({at.extend, {line}});
      else
        it->second.push_back(line);
      continue;
    }
    if (at.block == &root) {
      // A section of its own at the end (`parallel { ... }`), or a
      // top-level key (`name = ...`).
      if (at.rest.size() == 1) {
        newSections.push_back({"", {at.rest[0] + " = " + value.str()}});
        continue;
      }
      std::string section = at.rest.front();
      std::string line = llvm::join(llvm::ArrayRef(at.rest).drop_front(), ".") +
                         " = " + value.str();
      auto it = llvm::find_if(
          newSections, [&](const auto &s) { return s.first == section; });
      if (it == newSections.end())
        newSections.push_back({section, {line}});
      else
        it->second.push_back(line);
      continue;
    }
    // The section is written: add the key before its closing brace.
    const Block &block = *at.block;
    std::string line = llvm::join(at.rest, ".") + " = " + value.str();
    const char *rbrace = block.rbrace.getPointer();
    llvm::StringRef inside(block.lbrace.getPointer(),
                           rbrace - block.lbrace.getPointer());
    if (!inside.contains('\n')) {
      std::string text = line + " ";
      if (rbrace > buffer.data() && !llvm::isSpace(rbrace[-1]))
        text = " " + text;
      edits.push_back({offsetOf(block.rbrace), 0, text, order});
      continue;
    }
    std::string indent =
        block.items.empty()
            ? indentOf(buffer, block.lbrace.getPointer()) + "  "
            : indentOf(buffer, block.items.front().keyLoc().getPointer());
    std::string closing = indentOf(buffer, rbrace);
    size_t lineStart = offsetOf(block.rbrace) - closing.size();
    bool braceStartsLine = lineStart == 0 || buffer[lineStart - 1] == '\n';
    if (braceStartsLine)
      edits.push_back({lineStart, 0, indent + line + "\n", order});
    else
      edits.push_back(
          {offsetOf(block.rbrace), 0, "\n" + indent + line + "\n", order});
  }

  for (const auto &[item, lines] : added)
    edits.push_back({offsetOf(item->value.range.End), 0,
                     " { " + llvm::join(lines, "  ") + " }", settings.size()});

  std::string text = buffer.str();
  llvm::stable_sort(edits, [](const Edit &a, const Edit &b) {
    return a.offset != b.offset ? a.offset > b.offset : a.order > b.order;
  });
  for (const Edit &edit : edits)
    text.replace(edit.offset, edit.length, edit.text);
  for (const auto &[section, lines] : newSections) {
    if (!text.empty() && text.back() != '\n')
      text += '\n';
    if (section.empty()) {
      text += lines.front() + "\n";
      continue;
    }
    text += "\n" + section + " {\n";
    for (const std::string &line : lines)
      text += "  " + line + "\n";
    text += "}\n";
  }
  return text;
}
