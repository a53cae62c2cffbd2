//===- Parser.cpp - Parsing .plan text into a syntax tree -----------------===//
//
// Recursive descent over the tokens of Lexer.h. Recovery follows two rules:
// a bracketed value ('(...)', '{...}') consumes through its closing bracket
// even when something inside it is wrong, and an item that fails skips to
// the next line that starts with a key, or to the '}' that closes its block.
// One typo then costs one message, and the rest of the file is still checked
// in the same run.
//
//===----------------------------------------------------------------------===//

#include "frontend/Parser.h"
#include "frontend/Lexer.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MemoryBuffer.h"

#include <optional>

using namespace plan;
using namespace plan::syntax;
using llvm::SMLoc;
using llvm::SMRange;
using llvm::StringRef;
using llvm::Twine;

namespace {

/// Deeper input is pathological (generated or corrupt); the bound keeps the
/// recursion far from the stack limit.
constexpr unsigned kMaxNesting = 64;
/// Past this, further messages are more likely noise than help.
constexpr unsigned kMaxErrors = 20;

/// One name of a dotted `--set` path, located in the "<--set>" buffer.
struct PathSegment {
  StringRef name;
  SMRange range;
};

struct Setting {
  llvm::SmallVector<PathSegment, 4> path;
  std::string pathText;
  Value value;
};

bool startsValue(const Token &tok) {
  switch (tok.kind) {
  case Token::Number:
  case Token::String:
  case Token::Identifier:
  case Token::LParen:
  case Token::LBracket:
  case Token::LBrace:
    return true;
  default:
    return false;
  }
}

/// The token quoted for a message, shortened when it is a long string.
std::string describe(const Token &tok) {
  if (tok.is(Token::EndOfFile))
    return "end of file";
  constexpr size_t kMaxShown = 24;
  StringRef text = tok.text;
  if (text.size() <= kMaxShown)
    return ("'" + text + "'").str();
  size_t cut = kMaxShown - 3;
  // Never cut a UTF-8 sequence in half.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80)
    --cut;
  return ("'" + text.take_front(cut) + "...'").str();
}

/// "24 GiB" is a common slip; a short run of letters ending in B/b is almost
/// certainly a size or bandwidth unit.
bool looksLikeUnit(StringRef word) {
  StringRef letters = word.take_until([](char c) { return c == '/'; });
  return !letters.empty() && letters.size() <= 3 &&
         llvm::all_of(letters, llvm::isAlpha) &&
         (letters.back() == 'B' || letters.back() == 'b');
}

class PlanParser {
public:
  PlanParser(StringRef buffer, DiagEmitter &diag)
      : lexer(buffer), buffer(buffer), diag(diag),
        prevEnd(SMLoc::getFromPointer(buffer.begin())) {
    tok.text = StringRef(buffer.begin(), 0);
    advance();
  }

  Block parseFile() {
    Block root;
    parseItems(root, /*topLevel=*/true);
    return root;
  }

  std::optional<Setting> parseSetting();

private:
  //===--------------------------------------------------------------------===//
  // Tokens
  //===--------------------------------------------------------------------===//

  void advance() {
    skip();
    reportProblems();
  }

  /// Moves on without reporting the new token's problems: used while
  /// skipping text after an error, which would otherwise cascade.
  void skip() {
    if (!tok.is(Token::EndOfFile))
      prevEnd = tok.endLoc();
    if (!stopped)
      tok = lexer.lex();
  }

  void reportProblems() {
    auto problems = std::move(tok.problems);
    tok.problems.clear();
    for (LexProblem &problem : problems)
      error(problem.loc, problem.message);
  }

  Token peek() const {
    Lexer ahead = lexer;
    return ahead.lex();
  }

  /// Where to report something missing before the current token: at the
  /// token when it is on the same line, else just after the previous token
  /// (where the missing text belongs, not on some later line).
  SMLoc where() const {
    return tok.is(Token::EndOfFile) || tok.atLineStart ? prevEnd : tok.loc();
  }

  /// True when the current token is an Invalid one on the line being parsed:
  /// its own problem has been reported and says more than "expected X" would.
  bool atReportedInvalidToken() const {
    return tok.is(Token::Invalid) && !tok.atLineStart;
  }

  //===--------------------------------------------------------------------===//
  // Errors
  //===--------------------------------------------------------------------===//

  void error(SMLoc loc, const Twine &message) {
    error(loc, message, SMLoc(), "");
  }

  void error(SMLoc loc, const Twine &message, SMLoc noteLoc,
             const Twine &note) {
    if (stopped)
      return;
    if (errors == kMaxErrors) {
      diag.error(loc, "too many errors; stopping here");
      stop();
      return;
    }
    ++errors;
    mlir::InFlightDiagnostic diagnostic = diag.error(loc, message);
    if (noteLoc.isValid())
      diagnostic.attachNote(diag.loc(noteLoc)) << note;
  }

  /// Ends the parse: the current token becomes the end of the file, so every
  /// loop and every open bracket unwinds without further messages.
  void stop() {
    stopped = true;
    Token end;
    end.kind = Token::EndOfFile;
    end.text = StringRef(tok.text.begin(), 0);
    tok = std::move(end);
  }

  //===--------------------------------------------------------------------===//
  // Grammar
  //===--------------------------------------------------------------------===//

  void parseItems(Block &block, bool topLevel);
  bool parseItem(Block &block);
  bool parseKey(std::string &key, SMRange &range,
                llvm::SmallVectorImpl<PathSegment> *segments);
  bool expectItemValue();
  bool parseValue(Value &v, StringRef owner);
  bool parseBlockBody(Block &block, StringRef owner);
  bool parseParenthesized(Value &v);
  bool checkAfterValue(const Item &item);
  void reportAfterValue(StringRef key, const Value &v);

  //===--------------------------------------------------------------------===//
  // Recovery
  //===--------------------------------------------------------------------===//

  void recoverItem(const char *itemStart);
  void skipPastClose(Token::Kind close);

  /// RAII for one level of '{' or '('; refuses (and stops the parse) past
  /// kMaxNesting.
  class Nesting {
  public:
    explicit Nesting(PlanParser &parser) : parser(parser) {
      entered = parser.depth < kMaxNesting;
      if (entered) {
        ++parser.depth;
        return;
      }
      parser.error(parser.tok.loc(), Twine("nesting is deeper than ") +
                                         Twine(kMaxNesting) +
                                         " levels of '{' and '('");
      parser.stop();
    }
    ~Nesting() {
      if (entered)
        --parser.depth;
    }
    explicit operator bool() const { return entered; }

  private:
    PlanParser &parser;
    bool entered;
  };

  Lexer lexer;
  StringRef buffer;
  DiagEmitter &diag;
  Token tok;
  SMLoc prevEnd;
  unsigned depth = 0;
  unsigned errors = 0;
  bool stopped = false;
};

void PlanParser::parseItems(Block &block, bool topLevel) {
  while (!tok.is(Token::EndOfFile)) {
    if (tok.is(Token::RBrace)) {
      if (!topLevel)
        return;
      error(tok.loc(), "unexpected '}' with no block to close");
      advance();
      continue;
    }
    if (tok.is(Token::Comma) || tok.is(Token::Semicolon)) {
      advance();
      continue;
    }
    const char *itemStart = tok.text.begin();
    if (!parseItem(block))
      recoverItem(itemStart);
  }
}

/// Returns false when the caller must resynchronize; an item whose value was
/// usable is kept in `block` even then.
bool PlanParser::parseItem(Block &block) {
  if (!tok.is(Token::Identifier)) {
    if (!tok.is(Token::Invalid))
      error(tok.loc(),
            "expected a key, got " + describe(tok) +
                (tok.is(Token::String) ? "; keys are written without quotes"
                                       : ""));
    return false;
  }
  Item item;
  if (!parseKey(item.key, item.keyRange, /*segments=*/nullptr))
    return false;

  if (tok.is(Token::LBrace)) {
    item.value.kind = ValueKind::Block;
    item.value.block = std::make_unique<Block>();
    SMLoc start = tok.loc();
    bool closed = parseBlockBody(*item.value.block, item.key);
    item.value.range = SMRange(start, prevEnd);
    block.items.push_back(std::move(item));
    return closed && checkAfterValue(block.items.back());
  }

  if (!tok.is(Token::Equal)) {
    if (!atReportedInvalidToken())
      error(where(), "expected '=' or '{' after key '" + item.key + "'");
    return false;
  }
  advance();
  if (!expectItemValue() || !parseValue(item.value, item.key))
    return false;
  block.items.push_back(std::move(item));
  return checkAfterValue(block.items.back());
}

bool PlanParser::parseKey(std::string &key, SMRange &range,
                          llvm::SmallVectorImpl<PathSegment> *segments) {
  SMLoc start = tok.loc();
  key = tok.text.str();
  if (segments)
    segments->push_back({tok.text, SMRange(tok.loc(), tok.endLoc())});
  advance();
  while (tok.is(Token::Dot)) {
    advance();
    if (!tok.is(Token::Identifier) || tok.atLineStart) {
      if (!atReportedInvalidToken())
        error(where(), "expected a name after '.' in key '" + key + ".'");
      return false;
    }
    key += '.';
    key += tok.text;
    if (segments)
      segments->push_back({tok.text, SMRange(tok.loc(), tok.endLoc())});
    advance();
  }
  range = SMRange(start, prevEnd);
  return true;
}

/// An item's value starts on the line of its '=': otherwise `a =` followed
/// by `b = 2` on the next line would silently make `b` the value of `a`.
bool PlanParser::expectItemValue() {
  if (!tok.atLineStart && startsValue(tok))
    return true;
  if (!atReportedInvalidToken())
    error(where(), "expected a value after '='");
  return false;
}

bool PlanParser::parseValue(Value &v, StringRef owner) {
  SMLoc start = tok.loc();
  bool ok = true;
  switch (tok.kind) {
  case Token::Number:
    v.kind = ValueKind::Number;
    v.number = tok.number;
    v.isInteger = tok.isInteger;
    v.integer = tok.integer;
    v.text = tok.digits.str();
    v.unit = tok.unit.str();
    v.unitLoc = SMLoc::getFromPointer(tok.unit.begin());
    advance();
    break;
  case Token::String:
    v.kind = ValueKind::String;
    v.text = std::move(tok.stringValue);
    advance();
    break;
  case Token::Identifier:
    v.kind = ValueKind::Identifier;
    v.text = tok.text.str();
    advance();
    // A dotted name written without spaces (`mlp.down_proj`, a module of a
    // LoRA target list) is one name.
    while (tok.is(Token::Dot) && tok.loc() == prevEnd) {
      Token next = peek();
      if (!next.is(Token::Identifier) ||
          next.loc().getPointer() != tok.text.end())
        break;
      advance();
      v.text.push_back('.');
      v.text.append(tok.text.begin(), tok.text.end());
      advance();
    }
    // No item starts with '(' or '{', so these belong to the name even on a
    // later line.
    if (tok.is(Token::LParen)) {
      v.kind = ValueKind::Call;
      ok = parseParenthesized(v);
    } else if (tok.is(Token::LBrace)) {
      v.block = std::make_unique<Block>();
      ok = parseBlockBody(*v.block, owner);
    }
    break;
  case Token::LParen:
    v.kind = ValueKind::Tuple;
    ok = parseParenthesized(v);
    break;
  case Token::LBracket:
    v.kind = ValueKind::List;
    ok = parseParenthesized(v);
    break;
  case Token::LBrace:
    v.kind = ValueKind::Block;
    v.block = std::make_unique<Block>();
    ok = parseBlockBody(*v.block, owner);
    break;
  case Token::Invalid:
    return false;
  default:
    error(tok.is(Token::EndOfFile) ? prevEnd : tok.loc(),
          "expected a value, got " + describe(tok));
    return false;
  }
  v.range = SMRange(start, prevEnd);
  return ok;
}

/// Parses `{ items }` at the current '{'. Returns false when the closing '}'
/// is missing; the items found are kept either way.
bool PlanParser::parseBlockBody(Block &block, StringRef owner) {
  block.lbrace = tok.loc();
  Nesting nesting(*this);
  if (!nesting)
    return false;
  advance();
  parseItems(block, /*topLevel=*/false);
  if (tok.is(Token::RBrace)) {
    block.rbrace = tok.loc();
    advance();
    return true;
  }
  std::string note = owner.empty()
                         ? std::string("block opened here")
                         : ("'" + owner + "' block opened here").str();
  error(where(), "expected '}' to close the block opened here", block.lbrace,
        note);
  return false;
}

/// Parses a tuple's elements or a call's arguments at the current '(', or a
/// list's elements at the current '['.
bool PlanParser::parseParenthesized(Value &v) {
  SMLoc open = tok.loc();
  Nesting nesting(*this);
  if (!nesting)
    return false;
  bool isCall = v.kind == ValueKind::Call;
  bool isList = v.kind == ValueKind::List;
  Token::Kind close = isList ? Token::RBracket : Token::RParen;
  StringRef closeText = isList ? "']'" : "')'";
  advance();
  if (!isCall && !isList && tok.is(Token::RParen)) {
    error(open, "empty tuple '()'; a tuple needs at least one value");
    advance();
    return false;
  }

  std::string what = isCall   ? std::string("call")
                     : isList ? std::string("list")
                              : std::string("tuple");
  auto reportUnclosed = [&] {
    std::string note =
        isCall ? ("call to '" + Twine(v.text) + "' opened here").str()
               : what + " opened here";
    error(where(),
          "expected " + closeText + " to close the " + what + " opened here",
          open, note);
  };

  while (true) {
    if (tok.is(close)) {
      advance();
      return true;
    }
    if (tok.is(Token::EndOfFile) || tok.is(Token::RBrace)) {
      reportUnclosed();
      return false;
    }

    Argument arg;
    if (isCall && tok.is(Token::Identifier) && peek().is(Token::Equal)) {
      arg.name = tok.text.str();
      arg.nameLoc = tok.loc();
      advance();
      advance();
      if (!startsValue(tok)) {
        if (!tok.is(Token::Invalid))
          error(tok.is(Token::EndOfFile) ? prevEnd : tok.loc(),
                "expected a value after '='");
        skipPastClose(close);
        return false;
      }
    }
    arg.value = std::make_unique<Value>();
    if (!parseValue(*arg.value, arg.name)) {
      skipPastClose(close);
      return false;
    }
    v.elements.push_back(std::move(arg));

    if (tok.is(Token::Comma)) {
      advance();
      continue;
    }
    if (tok.is(close))
      continue;
    if (tok.is(Token::EndOfFile) || tok.is(Token::RBrace)) {
      reportUnclosed();
      return false;
    }
    if (!tok.is(Token::Invalid))
      error(where(), "expected ',' or " + closeText + " after " +
                         (isCall   ? "an argument of '" + v.text + "'"
                          : isList ? std::string("a list element")
                                   : std::string("a tuple element")) +
                         ", got " + describe(tok));
    skipPastClose(close);
    return false;
  }
}

/// After a value, the item must end: a new line, a separator, the block's
/// '}', or the next `key =` on the same line.
bool PlanParser::checkAfterValue(const Item &item) {
  if (tok.atLineStart || tok.is(Token::EndOfFile) || tok.is(Token::RBrace) ||
      tok.is(Token::Comma) || tok.is(Token::Semicolon))
    return true;
  if (tok.is(Token::Invalid))
    return false;
  if (tok.is(Token::Identifier)) {
    Token next = peek();
    if (next.is(Token::Equal) || next.is(Token::LBrace) || next.is(Token::Dot))
      return true;
  }
  reportAfterValue(item.key, item.value);
  return false;
}

void PlanParser::reportAfterValue(StringRef key, const Value &v) {
  if (tok.is(Token::Identifier) && v.kind == ValueKind::Number &&
      v.unit.empty()) {
    StringRef rest(tok.text.begin(), buffer.end() - tok.text.begin());
    StringRef unit =
        rest.take_while([](char c) { return llvm::isAlpha(c) || c == '/'; });
    if (looksLikeUnit(unit)) {
      error(tok.loc(), "write the unit right after the number, without a "
                       "space: '" +
                           v.text + unit + "'");
      return;
    }
  }
  error(tok.loc(),
        "unexpected " + describe(tok) + " after the value of '" + key + "'");
}

/// Skips to where the next item can start: a key at the start of a line, or
/// the '}' closing the current block. Brackets opened on the way are skipped
/// whole. Always moves past the token the failed item started at, so the
/// item loop cannot spin.
void PlanParser::recoverItem(const char *itemStart) {
  unsigned level = 0;
  while (!tok.is(Token::EndOfFile)) {
    if (level == 0 && tok.text.begin() != itemStart &&
        (tok.is(Token::RBrace) ||
         (tok.is(Token::Identifier) && tok.atLineStart)))
      break;
    switch (tok.kind) {
    case Token::LParen:
    case Token::LBracket:
    case Token::LBrace:
      ++level;
      break;
    case Token::RParen:
    case Token::RBracket:
    case Token::RBrace:
      if (level > 0)
        --level;
      break;
    default:
      break;
    }
    skip();
  }
  reportProblems();
}

/// Skips past the `close` (')' or ']') that closes the tuple, call or list
/// being parsed. Stops without consuming at a '}' that closes the enclosing
/// block: the `close` is missing, and that block must still close.
void PlanParser::skipPastClose(Token::Kind close) {
  unsigned level = 0;
  while (!tok.is(Token::EndOfFile)) {
    if (level == 0 && tok.is(close)) {
      advance();
      return;
    }
    if (level == 0 && tok.is(Token::RBrace))
      break;
    switch (tok.kind) {
    case Token::LParen:
    case Token::LBracket:
    case Token::LBrace:
      ++level;
      break;
    case Token::RParen:
    case Token::RBracket:
    case Token::RBrace:
      if (level > 0)
        --level;
      break;
    default:
      break;
    }
    skip();
  }
  reportProblems();
}

constexpr StringRef kSetUsage =
    "write --set path=value, e.g. --set train.micro_batch=2";

std::optional<Setting> PlanParser::parseSetting() {
  Setting setting;
  if (tok.is(Token::EndOfFile)) {
    error(prevEnd, "empty --set; " + kSetUsage);
    return std::nullopt;
  }
  if (tok.is(Token::Equal)) {
    error(tok.loc(), "missing path before '=' in --set; " + kSetUsage);
    return std::nullopt;
  }
  if (!tok.is(Token::Identifier)) {
    if (!tok.is(Token::Invalid))
      error(tok.loc(), "expected a key path at the start of --set, got " +
                           describe(tok) + "; " + kSetUsage);
    return std::nullopt;
  }
  SMRange pathRange;
  if (!parseKey(setting.pathText, pathRange, &setting.path))
    return std::nullopt;
  if (!tok.is(Token::Equal)) {
    if (!atReportedInvalidToken())
      error(where(), "expected '=' after '" + setting.pathText +
                         "' in --set; " + kSetUsage);
    return std::nullopt;
  }
  advance();
  if (!expectItemValue() ||
      !parseValue(setting.value, setting.path.back().name))
    return std::nullopt;
  if (!tok.is(Token::EndOfFile)) {
    if (!tok.is(Token::Invalid))
      reportAfterValue(setting.pathText, setting.value);
    return std::nullopt;
  }
  // A value can parse and still carry a problem (a bad escape in a string).
  if (errors != 0)
    return std::nullopt;
  return setting;
}

//===----------------------------------------------------------------------===//
// Placing a --set value in the tree
//===----------------------------------------------------------------------===//

std::string joinSegments(llvm::ArrayRef<PathSegment> segments) {
  std::string joined;
  for (const PathSegment &segment : segments) {
    if (!joined.empty())
      joined += '.';
    joined += segment.name;
  }
  return joined;
}

/// `a { b { c = value } }` for the path a.b.c, located in the --set text.
Item makeNestedItem(llvm::ArrayRef<PathSegment> path, Value &value) {
  Item item;
  item.key = path.front().name.str();
  item.keyRange = path.front().range;
  if (path.size() == 1) {
    item.value = std::move(value);
    return item;
  }
  item.value.kind = ValueKind::Block;
  item.value.range = SMRange(path.front().range.Start, path.back().range.End);
  item.value.block = std::make_unique<Block>();
  item.value.block->lbrace = path.front().range.Start;
  item.value.block->rbrace = path.front().range.Start;
  item.value.block->items.push_back(makeNestedItem(path.drop_front(), value));
  return item;
}

/// The block a path continues into through `v`: a block, or a name's block,
/// which a bare name (a preset such as `model = llama3_8b`) gets on demand,
/// as does `model = hf("...")`, whose keys are overridden the same way.
Block *blockToDescend(Value &v, const PathSegment &at) {
  bool huggingFace = v.kind == ValueKind::Call && v.text == "hf";
  if (v.kind != ValueKind::Block && v.kind != ValueKind::Identifier &&
      !huggingFace)
    return nullptr;
  if (!v.block) {
    v.block = std::make_unique<Block>();
    v.block->lbrace = at.range.Start;
    v.block->rbrace = at.range.Start;
  }
  return v.block.get();
}

/// Puts `value` at `path` under `block`, whose own path is `blockPath` ("" at
/// the top).
bool placeSetting(Block &block, llvm::ArrayRef<PathSegment> path,
                  StringRef blockPath, StringRef fullPath, Value &value,
                  DiagEmitter &diag) {
  std::string rest = joinSegments(path);
  // An item written with exactly this key, dotted or not: replace in place.
  if (Item *item = block.find(rest)) {
    item->value = std::move(value);
    return true;
  }
  // The longest leading part of the path that names an item here.
  for (size_t n = path.size() - 1; n >= 1; --n) {
    std::string head = joinSegments(path.take_front(n));
    Item *item = block.find(head);
    if (!item)
      continue;
    std::string headPath =
        blockPath.empty() ? head : (blockPath + "." + head).str();
    Block *inner = blockToDescend(item->value, path[n - 1]);
    if (!inner) {
      diag.error(path[n].range.Start,
                 "cannot set '" + fullPath + "': '" + headPath + "' is " +
                     item->value.kindName() + ", not a block; set '" +
                     headPath + "' as a whole")
              .attachNote(diag.loc(item->keyLoc()))
          << "'" << headPath << "' is set here";
      return false;
    }
    return placeSetting(*inner, path.drop_front(n), headPath, fullPath, value,
                        diag);
  }
  // Nothing on the way exists yet. Where the block already spells this
  // section with dotted keys (`offload.params = cpu`), add another dotted key
  // rather than a second `offload` entry beside them.
  std::string dottedPrefix = (path.front().name + ".").str();
  bool usesDottedKeys = llvm::any_of(block.items, [&](const Item &item) {
    return StringRef(item.key).starts_with(dottedPrefix);
  });
  if (usesDottedKeys) {
    Item item;
    item.key = rest;
    item.keyRange = SMRange(path.front().range.Start, path.back().range.End);
    item.value = std::move(value);
    block.items.push_back(std::move(item));
    return true;
  }
  block.items.push_back(makeNestedItem(path, value));
  return true;
}

} // namespace

Block plan::parsePlanSyntax(const llvm::SourceMgr &sourceMgr, unsigned bufferId,
                            DiagEmitter &diag) {
  PlanParser parser(sourceMgr.getMemoryBuffer(bufferId)->getBuffer(), diag);
  return parser.parseFile();
}

namespace {

/// A path written without quotes in a --set value (`cluster.gpu=host.json`,
/// `model=hf(models/llama)`), which the shell has taken the quotes off or
/// the user never wrote: said as such, with the setting to write, rather
/// than as the lexer's complaint about its '.', '/' or '-'. A path is a run
/// of name characters with a '/' in it or a .json/.yaml/.yml ending.
bool reportUnquotedPath(StringRef text, DiagEmitter &diag) {
  auto [key, value] = text.split('=');
  if (value.empty() || value.contains('"'))
    return false;
  auto isPathChar = [](char c) {
    return llvm::isAlnum(c) || llvm::is_contained("_./~-", c);
  };
  for (size_t i = 0; i < value.size();) {
    if (!isPathChar(value[i])) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < value.size() && isPathChar(value[end]))
      ++end;
    StringRef token = value.slice(i, end);
    // A bandwidth (100GB/s) is a number with a unit, not a path.
    bool bandwidth = llvm::isDigit(token.front()) && token.ends_with("/s");
    if ((token.contains('/') && !bandwidth) || token.ends_with(".json") ||
        token.ends_with(".yaml") || token.ends_with(".yml")) {
      std::string quoted =
          (value.take_front(i) + "\"" + token + "\"" + value.drop_front(end))
              .str();
      const char *at = value.data() + i;
      diag.error(SMLoc::getFromPointer(at),
                 "a path in a --set value is a string in double quotes, "
                 "which the shell keeps inside single ones: --set '" +
                     key.str() + "=" + quoted + "'");
      return true;
    }
    i = end;
  }
  return false;
}

} // namespace

bool plan::applyOverride(Block &root, StringRef setting,
                         llvm::SourceMgr &sourceMgr, DiagEmitter &diag) {
  // Diagnostic printers find a location's source line by buffer name, so a
  // second override named like the first would be shown with the first's
  // text under its caret.
  unsigned earlierSettings = 0;
  for (unsigned id = 1, e = sourceMgr.getNumBuffers(); id <= e; ++id)
    if (sourceMgr.getMemoryBuffer(id)->getBufferIdentifier().starts_with(
            "<--set"))
      ++earlierSettings;
  std::string name =
      earlierSettings == 0
          ? std::string("<--set>")
          : "<--set #" + std::to_string(earlierSettings + 1) + ">";
  unsigned bufferId = sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(setting, name), SMLoc());
  if (reportUnquotedPath(sourceMgr.getMemoryBuffer(bufferId)->getBuffer(),
                         diag))
    return false;
  PlanParser parser(sourceMgr.getMemoryBuffer(bufferId)->getBuffer(), diag);
  std::optional<Setting> parsed = parser.parseSetting();
  if (!parsed)
    return false;
  return placeSetting(root, parsed->path, /*blockPath=*/"", parsed->pathText,
                      parsed->value, diag);
}
