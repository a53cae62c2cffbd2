//===- Lexer.cpp - Tokens of the .plan language ---------------------------===//

#include "frontend/Lexer.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/ConvertUTF.h"

#include <charconv>

using namespace plan::syntax;
using llvm::StringRef;

namespace {

bool isIdentifierStart(char c) { return llvm::isAlpha(c) || c == '_'; }
bool isIdentifierChar(char c) { return llvm::isAlnum(c) || c == '_'; }

/// Names the language spells with a leading digit (a pipeline schedule):
/// words, not malformed numbers.
bool isDigitLeadingName(StringRef word) { return word == "1f1b"; }

/// The bytes of `text` up to the end of its number body (digit groups,
/// fraction, exponent) or `StringRef::npos` when they do not form one.
/// Digit groups are separated by single underscores: "8_192", never "8__192"
/// or "8_".
size_t scanNumberBody(StringRef text, bool &isInteger) {
  size_t i = 0, n = text.size();
  auto digitGroups = [&] {
    if (i == n || !llvm::isDigit(text[i]))
      return false;
    while (i < n && llvm::isDigit(text[i]))
      ++i;
    while (i < n && text[i] == '_') {
      ++i;
      if (i == n || !llvm::isDigit(text[i]))
        return false;
      while (i < n && llvm::isDigit(text[i]))
        ++i;
    }
    return true;
  };

  isInteger = true;
  if (!digitGroups())
    return StringRef::npos;
  if (i < n && text[i] == '.') {
    ++i;
    isInteger = false;
    if (!digitGroups())
      return StringRef::npos;
  }
  // An 'e' followed by a letter starts a unit; otherwise it is an exponent
  // and needs digits ("1e" is a broken exponent, not a unit named "e").
  if (i < n && (text[i] == 'e' || text[i] == 'E') &&
      (i + 1 == n || !llvm::isAlpha(text[i + 1]))) {
    ++i;
    isInteger = false;
    if (i < n && (text[i] == '+' || text[i] == '-'))
      ++i;
    if (i == n || !llvm::isDigit(text[i]))
      return StringRef::npos;
    while (i < n && llvm::isDigit(text[i]))
      ++i;
  }
  return i;
}

/// True when `text` is a unit: letters, optionally '/' and more letters.
bool isUnitSpelling(StringRef text) {
  auto isLetters = [](StringRef s) {
    return !s.empty() && llvm::all_of(s, llvm::isAlpha);
  };
  size_t slash = text.find('/');
  if (slash == StringRef::npos)
    return isLetters(text);
  return isLetters(text.take_front(slash)) &&
         isLetters(text.drop_front(slash + 1));
}

/// Characters people paste from documents or other config formats, with what
/// to write instead.
StringRef hintFor(StringRef character) {
  return llvm::StringSwitch<StringRef>(character)
      .Case(":", "; items are written 'key = value'")
      .Case("'", "; strings use double quotes")
      .Cases({"\u201C", "\u201D", "\u201E", "\u2018", "\u2019"},
             "; strings use plain double quotes '\"'")
      .Cases({"\u2013", "\u2014", "\u2212"}, "; a minus sign is a plain '-'")
      .Cases({"\u00A0", "\u200B", "\u2028", "\u2029", "\uFEFF"},
             "; replace it with a plain space")
      .Default("");
}

} // namespace

std::string plan::syntax::describeCharacter(StringRef text, size_t &length) {
  length = text.empty() ? 0 : 1;
  if (text.empty())
    return "end of file";
  unsigned char first = text[0];
  if (first < 0x80) {
    if (llvm::isPrint(first))
      return ("'" + text.take_front(1) + "'").str();
    return "'\\x" + llvm::utohexstr(first, /*LowerCase=*/false, 2) + "'";
  }
  const auto *source = reinterpret_cast<const llvm::UTF8 *>(text.data());
  const auto *sourceEnd = source + text.size();
  llvm::UTF32 codePoint = 0;
  if (llvm::convertUTF8Sequence(&source, sourceEnd, &codePoint,
                                llvm::strictConversion) != llvm::conversionOK)
    return "'\\x" + llvm::utohexstr(first, /*LowerCase=*/false, 2) + "'";
  length = reinterpret_cast<const char *>(source) - text.data();
  return ("'" + text.take_front(length) + "' (U+" +
          llvm::utohexstr(codePoint, /*LowerCase=*/false, 4) + ")")
      .str();
}

Lexer::Lexer(StringRef buffer)
    : begin(buffer.begin()), cur(buffer.begin()), end(buffer.end()) {
  // Editors on Windows like to start UTF-8 files with a byte order mark.
  if (buffer.starts_with("\xEF\xBB\xBF"))
    cur += 3;
}

void Lexer::skipTrivia() {
  while (cur != end) {
    char c = *cur;
    if (c == '\n') {
      newlineBefore = true;
      ++cur;
    } else if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
      ++cur;
    } else if (c == '#') {
      while (cur != end && *cur != '\n')
        ++cur;
    } else {
      return;
    }
  }
}

Token Lexer::finish(Token tok, Token::Kind kind, const char *start) {
  tok.kind = kind;
  tok.text = StringRef(start, cur - start);
  return tok;
}

Token Lexer::lex() {
  skipTrivia();
  Token tok;
  tok.atLineStart = newlineBefore;
  newlineBefore = false;
  const char *start = cur;
  if (cur == end)
    return finish(std::move(tok), Token::EndOfFile, start);

  char c = *cur;
  if (isIdentifierStart(c))
    return lexIdentifier(std::move(tok));
  bool digitFollows = cur + 1 != end && llvm::isDigit(cur[1]);
  // ".5" is a broken number, but in "layers.0" the '.' separates key parts.
  bool dotStartsNumber =
      c == '.' && digitFollows && (cur == begin || !isIdentifierChar(cur[-1]));
  if (llvm::isDigit(c)) {
    const char *wordEnd = cur;
    while (wordEnd != end && isIdentifierChar(*wordEnd))
      ++wordEnd;
    if (isDigitLeadingName(StringRef(cur, wordEnd - cur)))
      return lexIdentifier(std::move(tok));
  }
  if (llvm::isDigit(c) || dotStartsNumber ||
      (c == '-' && (digitFollows || (cur + 1 != end && cur[1] == '.'))))
    return lexNumber(std::move(tok));
  if (c == '"')
    return lexString(std::move(tok));

  Token::Kind kind;
  switch (c) {
  case '=':
    kind = Token::Equal;
    break;
  case '.':
    kind = Token::Dot;
    break;
  case ',':
    kind = Token::Comma;
    break;
  case ';':
    kind = Token::Semicolon;
    break;
  case '(':
    kind = Token::LParen;
    break;
  case ')':
    kind = Token::RParen;
    break;
  case '[':
    kind = Token::LBracket;
    break;
  case ']':
    kind = Token::RBracket;
    break;
  case '{':
    kind = Token::LBrace;
    break;
  case '}':
    kind = Token::RBrace;
    break;
  case '-':
    ++cur;
    tok.problems.push_back(
        {llvm::SMLoc::getFromPointer(start), "expected a digit after '-'"});
    return finish(std::move(tok), Token::Invalid, start);
  default:
    return lexInvalidCharacter(std::move(tok));
  }
  ++cur;
  return finish(std::move(tok), kind, start);
}

Token Lexer::lexIdentifier(Token tok) {
  const char *start = cur;
  while (cur != end && isIdentifierChar(*cur))
    ++cur;
  return finish(std::move(tok), Token::Identifier, start);
}

Token Lexer::lexNumber(Token tok) {
  const char *start = cur;
  const char *p = cur;
  if (*p == '-')
    ++p;
  const char *bodyStart = p;

  // First take everything that could belong to the number, so that "8__192"
  // or "24GiB2" is one malformed number rather than a number followed by
  // puzzling leftovers.
  const char *firstLetter = nullptr;
  bool sawSlash = false;
  while (p != end) {
    char c = *p;
    if (llvm::isDigit(c) || c == '_' || c == '.') {
      ++p;
    } else if (llvm::isAlpha(c)) {
      if (!firstLetter)
        firstLetter = p;
      ++p;
    } else if ((c == '+' || c == '-') && firstLetter && firstLetter == p - 1 &&
               (*firstLetter == 'e' || *firstLetter == 'E')) {
      ++p;
    } else if (c == '/' && firstLetter && !sawSlash && p + 1 != end &&
               llvm::isAlpha(p[1])) {
      sawSlash = true;
      ++p;
    } else {
      break;
    }
  }
  cur = p;
  tok = finish(std::move(tok), Token::Number, start);

  StringRef body(bodyStart, p - bodyStart);
  bool isInteger = false;
  size_t bodyLength = scanNumberBody(body, isInteger);
  if (bodyLength == StringRef::npos ||
      (bodyLength != body.size() &&
       !isUnitSpelling(body.drop_front(bodyLength)))) {
    tok.kind = Token::Invalid;
    tok.problems.push_back(
        {tok.loc(), ("malformed number '" + tok.text + "'").str()});
    return tok;
  }

  tok.digits = tok.text.take_front((bodyStart - start) + bodyLength);
  tok.unit = tok.text.drop_front(tok.digits.size());
  tok.isInteger = isInteger;
  std::string cleaned;
  cleaned.reserve(tok.digits.size());
  for (char c : tok.digits)
    if (c != '_')
      cleaned += c;

  double value = 0;
  auto [parsedEnd, ec] =
      std::from_chars(cleaned.data(), cleaned.data() + cleaned.size(), value);
  if (ec != std::errc() || parsedEnd != cleaned.data() + cleaned.size()) {
    tok.kind = Token::Invalid;
    tok.problems.push_back(
        {tok.loc(), ("number '" + tok.digits + "' is out of range").str()});
    return tok;
  }
  tok.number = value;
  int64_t exact = 0;
  if (isInteger && !StringRef(cleaned).getAsInteger(10, exact))
    tok.integer = exact;
  return tok;
}

Token Lexer::lexString(Token tok) {
  const char *start = cur;
  ++cur; // the opening quote
  std::string value;
  while (true) {
    // A string ends on its own line: running on to the end of the file would
    // swallow the rest of the plan into one error.
    if (cur == end || *cur == '\n' || *cur == '\r') {
      tok = finish(std::move(tok), Token::Invalid, start);
      tok.problems.push_back({tok.loc(), "unterminated string"});
      return tok;
    }
    char c = *cur;
    if (c == '"') {
      ++cur;
      break;
    }
    if (c != '\\') {
      // A raw control character (a NUL, an escape sequence of a terminal)
      // is never meant; a tab is written as one, or as \t.
      auto byte = static_cast<unsigned char>(c);
      if ((byte < 0x20 && c != '\t') || byte == 0x7f) {
        size_t length = 0;
        tok.problems.push_back(
            {llvm::SMLoc::getFromPointer(cur),
             "control character " +
                 describeCharacter(StringRef(cur, end - cur), length) +
                 " in string"});
      }
      value += c;
      ++cur;
      continue;
    }
    if (cur + 1 == end || cur[1] == '\n' || cur[1] == '\r') {
      ++cur; // the line ends inside the string; reported above
      continue;
    }
    switch (cur[1]) {
    case '"':
      value += '"';
      break;
    case '\\':
      value += '\\';
      break;
    case 'n':
      value += '\n';
      break;
    case 't':
      value += '\t';
      break;
    default: {
      size_t length = 0;
      std::string shown =
          describeCharacter(StringRef(cur + 1, end - cur - 1), length);
      std::string escape = llvm::isPrint(cur[1])
                               ? ("'\\" + StringRef(cur + 1, 1) + "'").str()
                               : "'\\' followed by " + shown;
      tok.problems.push_back({llvm::SMLoc::getFromPointer(cur),
                              "unknown escape " + escape +
                                  " in string; use \\\", \\\\, \\n or \\t"});
      value.append(cur + 1, length);
      cur += 1 + length;
      continue;
    }
    }
    cur += 2;
  }
  tok = finish(std::move(tok), Token::String, start);
  tok.stringValue = std::move(value);
  return tok;
}

Token Lexer::lexInvalidCharacter(Token tok) {
  const char *start = cur;
  size_t length = 0;
  std::string shown = describeCharacter(StringRef(cur, end - cur), length);
  cur += length;
  tok = finish(std::move(tok), Token::Invalid, start);
  tok.problems.push_back(
      {tok.loc(), "unexpected character " + shown + hintFor(tok.text).str()});
  return tok;
}
