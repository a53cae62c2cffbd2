//===- Syntax.cpp - The untyped syntax tree of a .plan file ---------------===//

#include "frontend/Syntax.h"

#include "llvm/ADT/STLExtras.h"

#include <array>
#include <charconv>
#include <utility>

using namespace plan::syntax;

namespace {

/// Shortest text that reads back as `number`; only for numbers that did not
/// come from source text (the parser keeps what the user wrote).
std::string formatNumber(double number) {
  std::array<char, 64> buffer;
  auto [end, ec] =
      std::to_chars(buffer.data(), buffer.data() + buffer.size(), number);
  if (ec != std::errc())
    return "?";
  return std::string(buffer.data(), end);
}

void appendQuoted(std::string &out, llvm::StringRef text) {
  out += '"';
  for (char c : text) {
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      out += c;
    }
  }
  out += '"';
}

void appendSpelling(std::string &out, const Value &v);

void appendArguments(std::string &out, const std::vector<Argument> &args,
                     char open = '(', char close = ')') {
  out += open;
  llvm::interleave(
      args,
      [&](const Argument &arg) {
        if (!arg.name.empty()) {
          out += arg.name;
          out += " = ";
        }
        if (arg.value)
          appendSpelling(out, *arg.value);
      },
      [&] { out += ", "; });
  out += close;
}

// Blocks are abbreviated: a message quoting a whole model block would bury
// the point it makes.
void appendBlock(std::string &out, const Block *block) {
  out += block && !block->items.empty() ? "{ ... }" : "{}";
}

void appendSpelling(std::string &out, const Value &v) {
  switch (v.kind) {
  case ValueKind::Number:
    if (!v.text.empty())
      out += v.text;
    else if (v.isInteger && v.integer)
      out += std::to_string(*v.integer);
    else
      out += formatNumber(v.number);
    out += v.unit;
    return;
  case ValueKind::String:
    appendQuoted(out, v.text);
    return;
  case ValueKind::Identifier:
    out += v.text;
    if (v.block) {
      out += ' ';
      appendBlock(out, v.block.get());
    }
    return;
  case ValueKind::Tuple:
    appendArguments(out, v.elements);
    return;
  case ValueKind::List:
    appendArguments(out, v.elements, '[', ']');
    return;
  case ValueKind::Call:
    out += v.text;
    appendArguments(out, v.elements);
    return;
  case ValueKind::Block:
    appendBlock(out, v.block.get());
    return;
  }
}

} // namespace

std::string Value::spelling() const {
  std::string out;
  appendSpelling(out, *this);
  return out;
}

llvm::StringRef Value::kindName() const {
  switch (kind) {
  case ValueKind::Number:
    return "a number";
  case ValueKind::String:
    return "a string";
  case ValueKind::Identifier:
    return block ? "a name with a block" : "a name";
  case ValueKind::Tuple:
    return "a tuple";
  case ValueKind::List:
    return "a list";
  case ValueKind::Call:
    return "a call";
  case ValueKind::Block:
    return "a block";
  }
  return "a value";
}

const Item *Block::find(llvm::StringRef key) const {
  for (const Item &item : llvm::reverse(items))
    if (item.key == key)
      return &item;
  return nullptr;
}

Item *Block::find(llvm::StringRef key) {
  return const_cast<Item *>(std::as_const(*this).find(key));
}

void plan::syntax::printBlock(const Block &block, llvm::raw_ostream &os,
                              unsigned indent) {
  for (const Item &item : block.items) {
    os.indent(indent) << item.key;
    const Value &v = item.value;
    if (v.kind == ValueKind::Block) {
      os << " {\n";
      printBlock(*v.block, os, indent + 2);
      os.indent(indent) << "}\n";
    } else if (v.kind == ValueKind::Identifier && v.block) {
      os << " = " << v.text << " {\n";
      printBlock(*v.block, os, indent + 2);
      os.indent(indent) << "}\n";
    } else {
      os << " = " << v.spelling() << "\n";
    }
  }
}

Value plan::syntax::cloneValue(const Value &v) {
  Value copy;
  copy.kind = v.kind;
  copy.range = v.range;
  copy.number = v.number;
  copy.isInteger = v.isInteger;
  copy.integer = v.integer;
  copy.unit = v.unit;
  copy.unitLoc = v.unitLoc;
  copy.text = v.text;
  copy.elements.reserve(v.elements.size());
  for (const Argument &arg : v.elements) {
    Argument argCopy;
    argCopy.name = arg.name;
    argCopy.nameLoc = arg.nameLoc;
    if (arg.value)
      argCopy.value = std::make_unique<Value>(cloneValue(*arg.value));
    copy.elements.push_back(std::move(argCopy));
  }
  if (v.block)
    copy.block = std::make_unique<Block>(cloneBlock(*v.block));
  return copy;
}

Block plan::syntax::cloneBlock(const Block &b) {
  Block copy;
  copy.lbrace = b.lbrace;
  copy.rbrace = b.rbrace;
  copy.items.reserve(b.items.size());
  for (const Item &item : b.items) {
    Item itemCopy;
    itemCopy.key = item.key;
    itemCopy.keyRange = item.keyRange;
    itemCopy.value = cloneValue(item.value);
    copy.items.push_back(std::move(itemCopy));
  }
  return copy;
}
