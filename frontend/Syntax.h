//===- Syntax.h - The untyped syntax tree of a .plan file -------*- C++ -*-===//
//
// A .plan file is a block of items. An item is `key = value` or `key { ... }`.
// The parser knows nothing about which keys exist: it builds this tree, and
// the analyzer (Analyze.h) gives it meaning against the schema. Keeping the two
// apart lets `--set` overrides edit the tree before any check runs, so an
// override gets exactly the checks the file gets.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_FRONTEND_SYNTAX_H
#define PLAN_FRONTEND_SYNTAX_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/SMLoc.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace plan::syntax {

struct Block;

enum class ValueKind {
  Number,     // 2e-5, 8_192, 24GiB, 900GB/s
  String,     // "path/to/file"
  Identifier, // llama3_8b, full_shard, true, cpu; may carry a block: llama {
              // ... }
  Tuple,      // (0.9, 0.95)
  List,       // [q_proj, v_proj]; may be empty
  Call,       // adamw(lr = 2e-5, betas = (0.9, 0.95)), min_params(1e8)
  Block,      // { key = value ... }
};

struct Value;

/// One argument of a call: `name = value` or a positional `value`.
struct Argument {
  std::string name; // empty for a positional argument
  llvm::SMLoc nameLoc;
  std::unique_ptr<Value> value;
};

struct Value {
  ValueKind kind = ValueKind::Identifier;
  llvm::SMRange range; // the whole value as written

  // Number: the numeric value, whether it was written as an integer (no '.',
  // no exponent; underscores allowed), its exact integer value when it was and
  // fits in int64_t, and its unit suffix as written ("" when none). `text`
  // holds the digits as written ("8_192", "-2e-5"); `unitLoc` is where the
  // unit starts, or would start when there is none ("needs a unit" points
  // there).
  double number = 0;
  bool isInteger = false;
  std::optional<int64_t> integer;
  std::string unit;
  llvm::SMLoc unitLoc;

  // String: the unescaped contents. Identifier / Call: the name.
  std::string text;

  // Tuple: elements (names empty). Call: arguments.
  std::vector<Argument> elements;

  // Block, or an Identifier followed by a block (`llama { ... }`).
  std::unique_ptr<Block> block;

  llvm::SMLoc loc() const { return range.Start; }
  /// The value as the user wrote it, for messages ("'fulll_shard'").
  std::string spelling() const;
  /// A short name of the kind for type errors: "a number", "a string", ...
  llvm::StringRef kindName() const;
};

/// `key = value` or `key { ... }` (then value.kind == Block).
struct Item {
  std::string key; // may be dotted: `offload.params = cpu`
  llvm::SMRange keyRange;
  Value value;

  llvm::SMLoc keyLoc() const { return keyRange.Start; }
};

struct Block {
  llvm::SMLoc lbrace; // invalid for the top level of a file
  llvm::SMLoc rbrace;
  std::vector<Item> items;

  /// The last item with this key, or null. (Duplicates are the analyzer's
  /// error; the parser keeps them all so it can point at both.)
  const Item *find(llvm::StringRef key) const;
  Item *find(llvm::StringRef key);
};

/// Prints `block` as .plan source: one `key = value` per line, nested blocks
/// indented by two spaces. What it prints parses back to the same tree.
void printBlock(const Block &block, llvm::raw_ostream &os, unsigned indent = 0);

/// Deep copy (values own their children through unique_ptr).
Value cloneValue(const Value &v);
Block cloneBlock(const Block &b);

} // namespace plan::syntax

#endif // PLAN_FRONTEND_SYNTAX_H
