//===- Keywords.h - Enumerations spelled as keywords ------------*- C++ -*-===//
//
// Files spell enumerations by keyword ("device", "bf16_mixed"), never by
// number. Each enumeration specializes EnumKeywords with its keywords by
// value (the generated ones in runtime/format/generated/ScheduleEnums.h).
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_RUNTIME_SUPPORT_KEYWORDS_H
#define PLAN_RUNTIME_SUPPORT_KEYWORDS_H

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace plan::rt {

/// `static constexpr std::array<const char *, N> keywords`, by value.
template <typename Enum> struct EnumKeywords;

/// The value spelled `keyword`, or nullopt.
template <typename Enum>
std::optional<Enum> parseKeyword(std::string_view keyword) {
  const auto &keywords = EnumKeywords<Enum>::keywords;
  for (size_t i = 0; i < keywords.size(); ++i)
    if (keyword == keywords[i])
      return static_cast<Enum>(i);
  return std::nullopt;
}

/// "a, b, c": the keywords, for messages that say what was expected.
template <typename Enum> std::string keywordList() {
  std::string list;
  for (const char *keyword : EnumKeywords<Enum>::keywords)
    list += (list.empty() ? "" : ", ") + std::string(keyword);
  return list;
}

} // namespace plan::rt

#endif // PLAN_RUNTIME_SUPPORT_KEYWORDS_H
