//===- Format.cpp - Numbers, sizes and shapes for people ------------------===//

#include "Format.h"

#include <cstdio>

namespace plan::rt::support {

std::string formatBytes(int64_t bytes) {
  // The magnitude as unsigned: -INT64_MIN does not fit in an int64_t.
  uint64_t magnitude = bytes < 0 ? 0 - static_cast<uint64_t>(bytes)
                                 : static_cast<uint64_t>(bytes);
  const char *sign = bytes < 0 ? "-" : "";
  constexpr double KiB = 1024.0, MiB = KiB * 1024, GiB = MiB * 1024,
                   TiB = GiB * 1024;
  double b = static_cast<double>(magnitude);
  char text[48];
  if (b >= TiB)
    std::snprintf(text, sizeof text, "%s%.2f TiB", sign, b / TiB);
  else if (b >= GiB)
    std::snprintf(text, sizeof text, "%s%.2f GiB", sign, b / GiB);
  else if (b >= MiB)
    std::snprintf(text, sizeof text, "%s%.1f MiB", sign, b / MiB);
  else if (b >= KiB)
    std::snprintf(text, sizeof text, "%s%.1f KiB", sign, b / KiB);
  else
    std::snprintf(text, sizeof text, "%s%llu B", sign,
                  static_cast<unsigned long long>(magnitude));
  return text;
}

std::string formatSeconds(double seconds) {
  char text[48];
  if (seconds >= 1)
    std::snprintf(text, sizeof text, "%.3f s", seconds);
  else if (seconds >= 1e-3)
    std::snprintf(text, sizeof text, "%.2f ms", seconds * 1e3);
  else
    std::snprintf(text, sizeof text, "%.1f us", seconds * 1e6);
  return text;
}

std::string withThousands(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0 && digits[i - 1] != '-')
      out += ',';
    out += digits[i];
  }
  return out;
}

std::string shapeString(std::span<const int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string oneLine(std::string text) {
  for (char &c : text)
    if (c == '\n')
      c = ' ';
  while (!text.empty() && text.back() == ' ')
    text.pop_back();
  return text;
}

} // namespace plan::rt::support
