//===- Json.h - Reading JSON documents with checked types -------*- C++ -*-===//
//
// The one reader of the runtime's JSON files (schedule bodies,
// checkpoint.json): every member is looked up and type-checked before it is
// converted, and an error is one line naming the document and the path of
// the offending value: "FILE: units[3].params[0].shape: expected an array".
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_RUNTIME_SUPPORT_JSON_H
#define PLAN_RUNTIME_SUPPORT_JSON_H

#include "Keywords.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace plan::rt::support {

// insertion-ordered: writers list members in the order their spec does.
using Json = nlohmann::ordered_json;

class JsonError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// Where a value sits in a document ("buffers[3].numel"); built on the stack
/// as a reader descends and rendered only for an error.
class JsonPath {
public:
  JsonPath() = default;
  JsonPath member(std::string_view key) const { return {this, key, -1}; }
  JsonPath element(size_t index) const {
    return {this, {}, static_cast<int64_t>(index)};
  }
  std::string str() const;

private:
  JsonPath(const JsonPath *parent, std::string_view key, int64_t index)
      : parent_(parent), key_(key), index_(index) {}
  const JsonPath *parent_ = nullptr;
  std::string_view key_;
  int64_t index_ = -1;
};

/// Parses `text` (`name` names it in errors), refusing documents nested
/// deeper than `maxDepth` before parsing them.
Json parseJson(std::string_view text, const std::string &name,
               int maxDepth = 64);

/// Checked access to a parsed document; every error is a JsonError
/// "NAME: PATH: what".
class JsonReader {
public:
  explicit JsonReader(std::string name) : name_(std::move(name)) {}

  [[noreturn]] void fail(const JsonPath &at, const std::string &what) const;

  const Json &member(const Json &object, const JsonPath &at,
                     std::string_view key) const;
  /// nullptr when `object` has no member `key`.
  const Json *optionalMember(const Json &object, const JsonPath &at,
                             std::string_view key) const;

  int64_t integer(const Json &value, const JsonPath &at) const;
  uint64_t unsignedInteger(const Json &value, const JsonPath &at) const;
  double number(const Json &value, const JsonPath &at) const;
  bool boolean(const Json &value, const JsonPath &at) const;
  std::string string(const Json &value, const JsonPath &at) const;
  const Json &array(const Json &value, const JsonPath &at) const;
  const Json &object(const Json &value, const JsonPath &at) const;
  /// An enumeration spelled by its keyword (generated/ScheduleEnums.h).
  template <typename Enum>
  Enum keyword(const Json &value, const JsonPath &at) const {
    std::string text = string(value, at);
    if (std::optional<Enum> parsed = parseKeyword<Enum>(text))
      return *parsed;
    fail(at, "unknown value '" + text + "' (expected one of " +
                 keywordList<Enum>() + ")");
  }

  // The same for member `key` of `object`.
  int64_t getInt(const Json &object, const JsonPath &at,
                 std::string_view key) const {
    return integer(member(object, at, key), at.member(key));
  }
  uint64_t getUnsigned(const Json &object, const JsonPath &at,
                       std::string_view key) const {
    return unsignedInteger(member(object, at, key), at.member(key));
  }
  double getNumber(const Json &object, const JsonPath &at,
                   std::string_view key) const {
    return number(member(object, at, key), at.member(key));
  }
  bool getBool(const Json &object, const JsonPath &at,
               std::string_view key) const {
    return boolean(member(object, at, key), at.member(key));
  }
  std::string getString(const Json &object, const JsonPath &at,
                        std::string_view key) const {
    return string(member(object, at, key), at.member(key));
  }
  const Json &getArray(const Json &object, const JsonPath &at,
                       std::string_view key) const {
    return array(member(object, at, key), at.member(key));
  }
  const Json &getObject(const Json &object, const JsonPath &at,
                        std::string_view key) const {
    return this->object(member(object, at, key), at.member(key));
  }
  std::vector<int64_t> getInts(const Json &object, const JsonPath &at,
                               std::string_view key) const;
  std::vector<std::string> getStrings(const Json &object, const JsonPath &at,
                                      std::string_view key) const;
  template <typename Enum>
  Enum getKeyword(const Json &object, const JsonPath &at,
                  std::string_view key) const {
    return keyword<Enum>(member(object, at, key), at.member(key));
  }

  const std::string &name() const { return name_; }

private:
  std::string name_;
};

} // namespace plan::rt::support

#endif // PLAN_RUNTIME_SUPPORT_JSON_H
