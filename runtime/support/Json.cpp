//===- Json.cpp - Reading JSON documents with checked types ---------------===//

#include "Json.h"

#include <algorithm>
#include <limits>

namespace plan::rt::support {
namespace {

/// The deepest nesting of arrays and objects in `text`, outside strings.
int nestingDepth(std::string_view text) {
  int depth = 0, deepest = 0;
  bool inString = false, escaped = false;
  for (char c : text) {
    if (inString) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        inString = false;
      continue;
    }
    if (c == '"')
      inString = true;
    else if (c == '[' || c == '{')
      deepest = std::max(deepest, ++depth);
    else if (c == ']' || c == '}')
      --depth;
  }
  return deepest;
}

} // namespace

std::string JsonPath::str() const {
  std::string prefix = parent_ ? parent_->str() : std::string();
  if (index_ >= 0)
    return prefix + "[" + std::to_string(index_) + "]";
  if (key_.empty())
    return prefix;
  return prefix.empty() ? std::string(key_) : prefix + "." + std::string(key_);
}

Json parseJson(std::string_view text, const std::string &name, int maxDepth) {
  // Checked before parsing: nlohmann's depth callback would slow every parse
  // down several times over.
  if (nestingDepth(text) > maxDepth)
    throw JsonError(name + ": nested deeper than " + std::to_string(maxDepth) +
                    " levels");
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception &e) {
    // "[json.exception.parse_error.101] parse error at line 1, column 7: ..."
    std::string what = e.what();
    if (size_t bracket = what.find("] "); bracket != std::string::npos)
      what = what.substr(bracket + 2);
    throw JsonError(name + ": not valid JSON: " + what);
  }
}

void JsonReader::fail(const JsonPath &at, const std::string &what) const {
  std::string where = at.str();
  throw JsonError(name_ + ": " + (where.empty() ? what : where + ": " + what));
}

const Json &JsonReader::member(const Json &object, const JsonPath &at,
                               std::string_view key) const {
  if (const Json *found = optionalMember(object, at, key))
    return *found;
  fail(at, "missing field '" + std::string(key) + "'");
}

const Json *JsonReader::optionalMember(const Json &object, const JsonPath &at,
                                       std::string_view key) const {
  if (!object.is_object())
    fail(at, "expected an object");
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

int64_t JsonReader::integer(const Json &v, const JsonPath &at) const {
  if (!v.is_number_integer())
    fail(at, "expected an integer");
  if (v.is_number_unsigned() &&
      v.get<uint64_t>() >
          static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    fail(at, "integer out of range");
  return v.get<int64_t>();
}

uint64_t JsonReader::unsignedInteger(const Json &v, const JsonPath &at) const {
  if (!v.is_number_unsigned())
    fail(at, "expected a non-negative integer");
  return v.get<uint64_t>();
}

double JsonReader::number(const Json &v, const JsonPath &at) const {
  if (!v.is_number())
    fail(at, "expected a number");
  return v.get<double>();
}

bool JsonReader::boolean(const Json &v, const JsonPath &at) const {
  if (!v.is_boolean())
    fail(at, "expected true or false");
  return v.get<bool>();
}

std::string JsonReader::string(const Json &v, const JsonPath &at) const {
  if (!v.is_string())
    fail(at, "expected a string");
  return v.get<std::string>();
}

const Json &JsonReader::array(const Json &v, const JsonPath &at) const {
  if (!v.is_array())
    fail(at, "expected an array");
  return v;
}

const Json &JsonReader::object(const Json &v, const JsonPath &at) const {
  if (!v.is_object())
    fail(at, "expected an object");
  return v;
}

std::vector<int64_t> JsonReader::getInts(const Json &object, const JsonPath &at,
                                         std::string_view key) const {
  JsonPath p = at.member(key);
  const Json &a = array(member(object, at, key), p);
  std::vector<int64_t> out;
  out.reserve(a.size());
  for (size_t i = 0; i < a.size(); ++i)
    out.push_back(integer(a[i], p.element(i)));
  return out;
}

std::vector<std::string> JsonReader::getStrings(const Json &object,
                                                const JsonPath &at,
                                                std::string_view key) const {
  JsonPath p = at.member(key);
  const Json &a = array(member(object, at, key), p);
  std::vector<std::string> out;
  out.reserve(a.size());
  for (size_t i = 0; i < a.size(); ++i)
    out.push_back(string(a[i], p.element(i)));
  return out;
}

} // namespace plan::rt::support
