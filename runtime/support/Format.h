//===- Format.h - Numbers, sizes and shapes for people ----------*- C++ -*-===//
//
// How every tool and report of the project writes a byte count, a large
// integer or a tensor shape, so that planc's report, plan-run's progress and
// plan-checkpoint's listing read alike.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_RUNTIME_SUPPORT_FORMAT_H
#define PLAN_RUNTIME_SUPPORT_FORMAT_H

#include <cstdint>
#include <span>
#include <string>

namespace plan::rt::support {

/// "512 B", "1.5 KiB", "37.2 MiB", "51.70 GiB", "1.02 TiB": binary units,
/// one decimal below a GiB and two from there; negative counts keep their
/// sign ("-1.5 KiB").
std::string formatBytes(int64_t bytes);

/// "1.234 s", "5.58 ms", "12.0 us": three significant-ish digits in the
/// largest unit below the value.
std::string formatSeconds(double seconds);

/// "1,234,567", "-1,234".
std::string withThousands(int64_t n);

/// `text` on one line: newlines become spaces, trailing spaces go (a
/// library's multi-line message in a tool's one-line error).
std::string oneLine(std::string text);

/// "[4096, 128256]".
std::string shapeString(std::span<const int64_t> shape);

} // namespace plan::rt::support

#endif // PLAN_RUNTIME_SUPPORT_FORMAT_H
