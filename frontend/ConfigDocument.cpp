//===- ConfigDocument.cpp - Users' YAML and JSON configs, located ---------===//
//
// JSON: nlohmann-json's SAX parser over an iterator that records how far the
// lexer has read, so each event knows where its token ends; the token starts
// at the first character after the previous event's end that is not white
// space or a `,` / `:` separator.
//
// YAML: yaml-cpp's node tree, whose marks are byte offsets. Accelerate and
// DeepSpeed write and read their YAML with PyYAML, so an unquoted scalar is
// typed the way PyYAML (YAML 1.1) types it: `no`, `off`, `yes`, `on` are
// booleans as `true` and `false` are, and `~`, `null` and nothing are null.
//
//===----------------------------------------------------------------------===//

#include "frontend/ConfigDocument.h"

#include "frontend/Frontend.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <iterator>

using namespace plan;
using llvm::SMLoc;
using llvm::StringRef;

const ConfigNode *ConfigNode::find(StringRef key) const {
  for (const ConfigMember &member : members)
    if (member.key == key)
      return &member.value;
  return nullptr;
}

std::string ConfigNode::describe() const {
  switch (kind) {
  case Kind::Null:
    return "null";
  case Kind::Bool:
    return boolean ? "true" : "false";
  case Kind::Number:
    return text;
  case Kind::String:
    return "\"" + text + "\"";
  case Kind::Map:
    return "a map";
  case Kind::Sequence:
    return "a list";
  }
  return "";
}

std::optional<int64_t> plan::readConfigInteger(const ConfigNode &value,
                                               StringRef key, DiagEmitter &diag,
                                               int64_t min, int64_t max) {
  if (value.kind != ConfigNode::Kind::Number || !value.integer ||
      static_cast<double>(*value.integer) != value.number) {
    diag.error(value.loc,
               "'" + key + "' expects an integer, got " + value.describe());
    return std::nullopt;
  }
  // The plan's own range checks word it the same way (Checks.cpp).
  if (*value.integer < min) {
    diag.error(value.loc, "'" + key + "' must be >= " + std::to_string(min) +
                              ", got " + value.describe());
    return std::nullopt;
  }
  if (*value.integer > max) {
    diag.error(value.loc, "'" + key + "' must be <= " + std::to_string(max) +
                              ", got " + value.describe());
    return std::nullopt;
  }
  return value.integer;
}

std::optional<double> plan::readConfigNumber(const ConfigNode &value,
                                             StringRef key, DiagEmitter &diag) {
  if (value.kind == ConfigNode::Kind::Number)
    return value.number;
  diag.error(value.loc,
             "'" + key + "' expects a number, got " + value.describe());
  return std::nullopt;
}

std::optional<bool> plan::readConfigBool(const ConfigNode &value, StringRef key,
                                         DiagEmitter &diag) {
  if (value.kind == ConfigNode::Kind::Bool)
    return value.boolean;
  diag.error(value.loc,
             "'" + key + "' expects true or false, got " + value.describe());
  return std::nullopt;
}

std::optional<std::string> plan::readConfigString(const ConfigNode &value,
                                                  StringRef key,
                                                  DiagEmitter &diag) {
  if (value.kind == ConfigNode::Kind::String)
    return value.text;
  diag.error(value.loc,
             "'" + key + "' expects a string, got " + value.describe());
  return std::nullopt;
}

ConfigFormat plan::configFormatOf(StringRef path) {
  return path.ends_with_insensitive(".yaml") ||
                 path.ends_with_insensitive(".yml")
             ? ConfigFormat::Yaml
             : ConfigFormat::Json;
}

namespace {

/// How deep a config may nest; real ones nest 3 or 4 levels.
constexpr size_t kMaxDepth = 64;

/// Reports a key given twice in one map, at the second, with a note at the
/// first.
void checkDuplicate(const ConfigNode &map, const ConfigMember &added,
                    DiagEmitter &diag) {
  for (const ConfigMember &member : map.members)
    if (member.key == added.key) {
      diag.error(added.keyLoc, "duplicate key '" + added.key + "'")
              .attachNote(diag.loc(member.keyLoc))
          << "first given here";
      return;
    }
}

/// A double as an integer when it is a whole number that fits.
std::optional<int64_t> wholeNumber(double value) {
  if (std::isfinite(value) && value == std::trunc(value) &&
      std::fabs(value) < 9.2e18)
    return static_cast<int64_t>(value);
  return std::nullopt;
}

/// Sets `node` to a number if `text` reads as one entirely.
bool readNumber(StringRef text, ConfigNode &node) {
  std::string digits = text.str();
  llvm::erase(digits, '_');
  StringRef s = digits;
  if (s.empty())
    return false;
  int64_t whole;
  if (!s.getAsInteger(0, whole)) {
    node.kind = ConfigNode::Kind::Number;
    node.integer = whole;
    node.number = static_cast<double>(whole);
    return true;
  }
  double real;
  if (s.getAsDouble(real) || !std::isfinite(real))
    return false;
  node.kind = ConfigNode::Kind::Number;
  node.number = real;
  node.integer = wholeNumber(real);
  return true;
}

//===----------------------------------------------------------------------===//
// JSON
//===----------------------------------------------------------------------===//

/// A `const char *` that records the furthest point nlohmann's lexer read.
struct CountingIterator {
  using iterator_category = std::forward_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char *;
  using reference = const char &;

  const char *at = nullptr;
  const char **furthest = nullptr;

  reference operator*() const { return *at; }
  CountingIterator &operator++() {
    ++at;
    if (at > *furthest)
      *furthest = at;
    return *this;
  }
  CountingIterator operator++(int) {
    CountingIterator before = *this;
    ++*this;
    return before;
  }
  bool operator==(const CountingIterator &other) const {
    return at == other.at;
  }
  bool operator!=(const CountingIterator &other) const {
    return at != other.at;
  }
};

class JsonBuilder : public nlohmann::json_sax<nlohmann::json> {
public:
  JsonBuilder(StringRef text, const char *&furthest, DiagEmitter &diag)
      : text(text), furthest(furthest), diag(diag) {}

  ConfigNode root;

  bool null() override { return add({}); }
  bool boolean(bool value) override {
    ConfigNode node;
    node.kind = ConfigNode::Kind::Bool;
    node.boolean = value;
    return add(std::move(node));
  }
  bool number_integer(number_integer_t value) override {
    ConfigNode node;
    node.kind = ConfigNode::Kind::Number;
    node.integer = value;
    node.number = static_cast<double>(value);
    return add(std::move(node));
  }
  bool number_unsigned(number_unsigned_t value) override {
    ConfigNode node;
    node.kind = ConfigNode::Kind::Number;
    if (value <= static_cast<uint64_t>(INT64_MAX))
      node.integer = static_cast<int64_t>(value);
    node.number = static_cast<double>(value);
    return add(std::move(node));
  }
  bool number_float(number_float_t value, const string_t &) override {
    ConfigNode node;
    node.kind = ConfigNode::Kind::Number;
    node.number = value;
    node.integer = wholeNumber(value);
    return add(std::move(node));
  }
  bool string(string_t &value) override {
    ConfigNode node;
    node.kind = ConfigNode::Kind::String;
    node.text = std::move(value);
    return add(std::move(node));
  }
  bool binary(binary_t &) override { return false; }
  bool start_object(std::size_t) override {
    ConfigNode node;
    node.kind = ConfigNode::Kind::Map;
    return open(std::move(node));
  }
  bool key(string_t &value) override {
    pendingKey = std::move(value);
    pendingKeyLoc = tokenStart();
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override {
    ConfigNode node;
    node.kind = ConfigNode::Kind::Sequence;
    return open(std::move(node));
  }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t position, const std::string &,
                   const nlohmann::detail::exception &error) override {
    // "[json.exception.parse_error.101] parse error at line 3, column 5:
    // syntax error while parsing ..." -> "syntax error while parsing ...".
    StringRef message = error.what();
    size_t colon = message.find(": ");
    if (colon != StringRef::npos)
      message = message.drop_front(colon + 2);
    size_t offset = std::min(position ? position - 1 : 0, text.size());
    diag.error(SMLoc::getFromPointer(text.data() + offset),
               "malformed JSON: " + message);
    return false;
  }

  bool failed = false;

private:
  /// Where the token of the event being handled starts.
  SMLoc tokenStart() {
    const char *p = previousEnd;
    while (p < text.end() && (llvm::isSpace(*p) || *p == ',' || *p == ':'))
      ++p;
    previousEnd = furthest;
    return SMLoc::getFromPointer(p);
  }

  bool add(ConfigNode node) {
    node.loc = tokenStart();
    if (node.kind == ConfigNode::Kind::Number && node.text.empty())
      node.text = tokenText(node.loc);
    return place(std::move(node)) != nullptr;
  }
  /// A scalar's text as written, for messages.
  std::string tokenText(SMLoc loc) const {
    const char *begin = loc.getPointer(), *end = begin;
    while (end < text.end() && !llvm::isSpace(*end) && *end != ',' &&
           *end != '}' && *end != ']')
      ++end;
    return std::string(begin, end);
  }
  bool open(ConfigNode node) {
    node.loc = tokenStart();
    // The tree is destroyed recursively: a hostile file must not nest deep.
    if (stack.size() >= kMaxDepth) {
      diag.error(node.loc,
                 "nested deeper than " + std::to_string(kMaxDepth) + " levels");
      failed = true;
      return false;
    }
    ConfigNode *placed = place(std::move(node));
    if (!placed)
      return false;
    stack.push_back(placed);
    return true;
  }
  bool close() {
    tokenStart();
    stack.pop_back();
    return true;
  }
  ConfigNode *place(ConfigNode node) {
    if (stack.empty()) {
      root = std::move(node);
      return &root;
    }
    ConfigNode &parent = *stack.back();
    if (parent.kind == ConfigNode::Kind::Sequence) {
      parent.elements.push_back(std::move(node));
      return &parent.elements.back();
    }
    ConfigMember member{std::move(pendingKey), pendingKeyLoc, std::move(node)};
    size_t errorsBefore = diag.numErrors();
    checkDuplicate(parent, member, diag);
    if (diag.numErrors() != errorsBefore) {
      failed = true;
      return nullptr;
    }
    parent.members.push_back(std::move(member));
    return &parent.members.back().value;
  }

  StringRef text;
  const char *&furthest;
  const char *previousEnd = text.begin();
  DiagEmitter &diag;
  // Pointers into the tree stay valid: a container is only appended to
  // while it is the innermost open one, after which nothing refers to its
  // elements but through the tree.
  std::vector<ConfigNode *> stack;
  std::string pendingKey;
  SMLoc pendingKeyLoc;
};

std::optional<ConfigNode> parseJsonDocument(StringRef text, DiagEmitter &diag) {
  const char *furthest = text.begin();
  JsonBuilder builder(text, furthest, diag);
  CountingIterator first{text.begin(), &furthest};
  CountingIterator last{text.end(), &furthest};
  size_t errorsBefore = diag.numErrors();
  bool ok = nlohmann::json::sax_parse(first, last, &builder,
                                      nlohmann::json::input_format_t::json,
                                      /*strict=*/true);
  if (!ok || builder.failed || diag.numErrors() != errorsBefore)
    return std::nullopt;
  return std::move(builder.root);
}

//===----------------------------------------------------------------------===//
// YAML
//===----------------------------------------------------------------------===//

/// PyYAML's (YAML 1.1) booleans and nulls.
std::optional<bool> pyyamlBool(StringRef text) {
  static constexpr StringRef yes[] = {"yes",  "Yes", "YES", "true", "True",
                                      "TRUE", "on",  "On",  "ON"};
  static constexpr StringRef no[] = {"no",    "No",  "NO",  "false", "False",
                                     "FALSE", "off", "Off", "OFF"};
  if (llvm::is_contained(yes, text))
    return true;
  if (llvm::is_contained(no, text))
    return false;
  return std::nullopt;
}

class YamlBuilder {
public:
  YamlBuilder(StringRef text, DiagEmitter &diag) : text(text), diag(diag) {}

  SMLoc at(const YAML::Mark &mark) const {
    size_t offset = mark.pos < 0 ? 0 : static_cast<size_t>(mark.pos);
    return SMLoc::getFromPointer(text.data() + std::min(offset, text.size()));
  }

  bool build(const YAML::Node &yaml, ConfigNode &node, int depth) {
    node.loc = at(yaml.Mark());
    // Aliases share nodes in yaml-cpp but are copied here: a few lines of
    // nested aliases would otherwise expand into billions of values.
    if (++built > kMaxValues) {
      diag.error(node.loc, "more than " + std::to_string(kMaxValues) +
                               " values (aliases expanded); a config has "
                               "hundreds");
      return false;
    }
    if (depth > static_cast<int>(kMaxDepth)) {
      diag.error(node.loc,
                 "nested deeper than " + std::to_string(kMaxDepth) + " levels");
      return false;
    }
    switch (yaml.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      node.kind = ConfigNode::Kind::Null;
      return true;
    case YAML::NodeType::Scalar: {
      node.text = yaml.Scalar();
      node.kind = ConfigNode::Kind::String;
      if (yaml.Tag() != "?") // quoted, or tagged: a string
        return true;
      StringRef plain = node.text;
      if (plain.empty() || plain == "~" || plain == "null" || plain == "Null" ||
          plain == "NULL") {
        node.kind = ConfigNode::Kind::Null;
      } else if (std::optional<bool> value = pyyamlBool(plain)) {
        node.kind = ConfigNode::Kind::Bool;
        node.boolean = *value;
      } else {
        readNumber(plain, node);
      }
      return true;
    }
    case YAML::NodeType::Sequence:
      node.kind = ConfigNode::Kind::Sequence;
      for (const YAML::Node &element : yaml) {
        node.elements.emplace_back();
        if (!build(element, node.elements.back(), depth + 1))
          return false;
      }
      return true;
    case YAML::NodeType::Map: {
      node.kind = ConfigNode::Kind::Map;
      // YAML 1.1's merge key, `<<: *defaults`, which PyYAML applies and
      // yaml-cpp leaves as a key named "<<": merged after the map's own
      // keys, which take precedence.
      std::optional<YAML::Node> merge;
      SMLoc mergeLoc;
      for (const auto &entry : yaml) {
        ConfigMember member;
        member.keyLoc = at(entry.first.Mark());
        if (!entry.first.IsScalar()) {
          diag.error(member.keyLoc, "a key must be a plain name");
          return false;
        }
        member.key = entry.first.Scalar();
        if (member.key == "<<" && entry.first.Tag() == "?") {
          if (merge) {
            diag.error(member.keyLoc, "duplicate key '<<'")
                    .attachNote(diag.loc(mergeLoc))
                << "first given here";
            return false;
          }
          merge = entry.second;
          mergeLoc = member.keyLoc;
          continue;
        }
        size_t errorsBefore = diag.numErrors();
        checkDuplicate(node, member, diag);
        if (diag.numErrors() != errorsBefore)
          return false;
        if (!build(entry.second, member.value, depth + 1))
          return false;
        // yaml-cpp marks an empty value where the next token starts, often
        // on a later line: point at its key instead.
        if (member.value.isNull() && member.value.text.empty())
          member.value.loc = member.keyLoc;
        node.members.push_back(std::move(member));
      }
      return !merge || mergeInto(node, *merge, mergeLoc, depth);
    }
    }
    return true;
  }

private:
  /// Merges `merge` (a map, or a list of maps of which the earlier take
  /// precedence) into `node`, below the keys `node` already has.
  bool mergeInto(ConfigNode &node, const YAML::Node &merge, SMLoc keyLoc,
                 int depth) {
    constexpr StringRef expected =
        "'<<' merges a map, or a list of maps, into this one";
    std::vector<YAML::Node> sources;
    if (merge.IsMap()) {
      sources.push_back(merge);
    } else if (merge.IsSequence()) {
      for (const YAML::Node &element : merge)
        sources.push_back(element);
    } else {
      // yaml-cpp marks an empty value where the next token starts.
      diag.error(merge.IsNull() ? keyLoc : at(merge.Mark()), expected);
      return false;
    }
    for (const YAML::Node &source : sources)
      if (!source.IsMap()) {
        diag.error(at(source.Mark()), expected);
        return false;
      }
    for (const YAML::Node &source : sources) {
      ConfigNode merged;
      if (!build(source, merged, depth + 1))
        return false;
      for (ConfigMember &member : merged.members)
        if (!node.find(member.key))
          node.members.push_back(std::move(member));
    }
    return true;
  }

  static constexpr size_t kMaxValues = 1000000;
  StringRef text;
  DiagEmitter &diag;
  size_t built = 0;
};

std::optional<ConfigNode> parseYamlDocument(StringRef text, DiagEmitter &diag) {
  YamlBuilder builder(text, diag);
  std::vector<YAML::Node> documents;
  try {
    // All of them: YAML::Load would read the first and drop the others.
    documents = YAML::LoadAll(text.str());
  } catch (const YAML::Exception &e) {
    diag.error(builder.at(e.mark), "malformed YAML: " + e.msg);
    return std::nullopt;
  }
  if (documents.size() > 1) {
    // Accelerate reads its config with PyYAML's safe_load, which refuses a
    // second document too. The error points at the `---` that starts it:
    // between it and the document's first value there are only comments,
    // and an empty document is marked at the end of the file.
    SMLoc second = builder.at(documents[1].Mark());
    StringRef before = text.take_front(second.getPointer() - text.data());
    for (size_t line = before.size(); line != StringRef::npos && line > 0;) {
      line = before.rfind('\n', line - 1);
      StringRef rest = text.drop_front(line == StringRef::npos ? 0 : line + 1);
      if (rest.starts_with("---") &&
          (rest.size() == 3 || llvm::isSpace(rest[3]))) {
        second = SMLoc::getFromPointer(rest.data());
        break;
      }
    }
    diag.error(second, "a second YAML document: a config is one document; "
                       "merge this one into the first");
    return std::nullopt;
  }
  // An empty file has no document: null, which the caller reports.
  YAML::Node document = documents.empty() ? YAML::Node() : documents.front();
  ConfigNode root;
  if (!builder.build(document, root, 0))
    return std::nullopt;
  return root;
}

} // namespace

std::optional<ConfigNode> plan::readConfigDocument(llvm::SourceMgr &sourceMgr,
                                                   DiagEmitter &diag,
                                                   StringRef path,
                                                   ConfigFormat format,
                                                   std::string &fileError) {
  std::unique_ptr<llvm::MemoryBuffer> buffer = openInput(path, fileError);
  if (!buffer)
    return std::nullopt;
  unsigned id = sourceMgr.AddNewSourceBuffer(std::move(buffer), SMLoc());
  return parseConfigDocument(sourceMgr, id, diag, format);
}

std::optional<ConfigNode> plan::parseConfigDocument(llvm::SourceMgr &sourceMgr,
                                                    unsigned bufferId,
                                                    DiagEmitter &diag,
                                                    ConfigFormat format) {
  StringRef text = sourceMgr.getMemoryBuffer(bufferId)->getBuffer();
  std::optional<ConfigNode> root = format == ConfigFormat::Json
                                       ? parseJsonDocument(text, diag)
                                       : parseYamlDocument(text, diag);
  if (!root)
    return std::nullopt;
  if (!root->isMap()) {
    diag.error(root->loc.isValid() ? root->loc
                                   : SMLoc::getFromPointer(text.data()),
               "expected a map of keys at the top of the file, got " +
                   root->describe());
    return std::nullopt;
  }
  return root;
}

std::optional<ConfigNode> plan::readNamedDocument(llvm::SourceMgr &sourceMgr,
                                                  DiagEmitter &diag,
                                                  StringRef path,
                                                  ConfigFormat format, SMLoc at,
                                                  StringRef what) {
  std::string fileError;
  std::optional<ConfigNode> root =
      readConfigDocument(sourceMgr, diag, path, format, fileError);
  if (!root && !fileError.empty())
    diag.error(at, (what + ": " + fileError).str());
  return root;
}

std::string plan::pathBesidePlan(const llvm::SourceMgr &sourceMgr, SMLoc at,
                                 StringRef path) {
  if (llvm::sys::path::is_absolute(path))
    return path.str();
  unsigned buffer = sourceMgr.FindBufferContainingLoc(at);
  if (!buffer)
    return path.str();
  StringRef name = sourceMgr.getMemoryBuffer(buffer)->getBufferIdentifier();
  if (name.starts_with("<")) // <stdin>, <--set #2>
    return path.str();
  llvm::SmallString<256> full = llvm::sys::path::parent_path(name);
  llvm::sys::path::append(full, path);
  return std::string(full);
}
