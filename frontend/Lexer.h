//===- Lexer.h - Tokens of the .plan language -------------------*- C++ -*-===//
//
// Private to the parser. The lexer never gives up on bad input: a character
// it cannot use becomes an Invalid token, and what is wrong with a token is
// attached to it as a problem. The parser reports a token's problems when the
// token becomes current, so lookahead never reports twice, messages come out
// in source order, and text skipped while recovering from an earlier error
// adds no noise.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_FRONTEND_LEXER_H
#define PLAN_FRONTEND_LEXER_H

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/SMLoc.h"

#include <cstdint>
#include <optional>
#include <string>

namespace plan::syntax {

struct LexProblem {
  llvm::SMLoc loc;
  std::string message;
};

struct Token {
  enum Kind {
    Identifier,
    Number,
    String,
    Equal,
    Dot,
    Comma,
    Semicolon,
    LParen,
    RParen,
    LBracket,
    RBracket,
    LBrace,
    RBrace,
    EndOfFile,
    Invalid, // its problems say why
  };

  Kind kind = EndOfFile;
  llvm::StringRef text; // as written: quotes, sign and unit included
  /// No earlier token on its line: the parser resynchronizes at line starts
  /// and wants an item's value on the line of its '='.
  bool atLineStart = false;

  // Number.
  llvm::StringRef digits; // "-8_192", "2e-5": the text without the unit
  llvm::StringRef unit;   // "GiB", "GB/s", or empty
  double number = 0;
  bool isInteger = false;
  std::optional<int64_t> integer;

  // String: the contents with escapes resolved.
  std::string stringValue;

  llvm::SmallVector<LexProblem, 0> problems;

  bool is(Kind k) const { return kind == k; }
  llvm::SMLoc loc() const { return llvm::SMLoc::getFromPointer(text.begin()); }
  llvm::SMLoc endLoc() const { return llvm::SMLoc::getFromPointer(text.end()); }
};

class Lexer {
public:
  /// `buffer` must outlive the lexer and every token it returns.
  explicit Lexer(llvm::StringRef buffer);

  /// The next token; EndOfFile forever once the buffer is used up.
  Token lex();

private:
  void skipTrivia();
  Token lexIdentifier(Token tok);
  Token lexNumber(Token tok);
  Token lexString(Token tok);
  Token lexInvalidCharacter(Token tok);
  Token finish(Token tok, Token::Kind kind, const char *start);

  const char *begin;
  const char *cur;
  const char *end;
  bool newlineBefore = true;
};

/// How a message should quote the character (or UTF-8 sequence) that starts
/// `text`: 'a', '\x00', or '“' (U+201C); `length` receives its byte count.
std::string describeCharacter(llvm::StringRef text, size_t &length);

} // namespace plan::syntax

#endif // PLAN_FRONTEND_LEXER_H
