//===- ScheduleFile.h - Reading and writing schedule files ------*- C++ -*-===//
//
// The on-disk form of a Schedule (docs/schedule-format.md): a fixed binary
// header (magic, format version, body size, CRC-32 of the body) followed by
// a JSON body. Readers check everything before trusting anything: a
// truncated, corrupted, wrong-version or inconsistent file is a
// ScheduleFileError with a one-line message, never a crash.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_RUNTIME_FORMAT_SCHEDULEFILE_H
#define PLAN_RUNTIME_FORMAT_SCHEDULEFILE_H

#include "Schedule.h"

#include <stdexcept>
#include <string>
#include <string_view>

namespace plan::rt {

/// One-line, user-facing: "FILE: reason".
class ScheduleFileError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// The complete file contents (header + body).
std::string serializeSchedule(const Schedule &schedule);
/// Parses and validates file contents; `name` prefixes error messages.
Schedule parseSchedule(std::string_view bytes, const std::string &name);

/// Writes atomically (temporary file in the same directory, then rename).
void writeScheduleFile(const Schedule &schedule, const std::string &path);
Schedule readScheduleFile(const std::string &path);

/// The schedule file's JSON object for a model (docs/schedule-format.md,
/// "model"), for other files that record one (checkpoint.json); and its
/// parser, which checks every field and prefixes errors with
/// "`name`: model.KEY: " (ScheduleFileError).
std::string serializeModelConfig(const ModelConfig &model);
ModelConfig parseModelConfig(std::string_view json, const std::string &name);

/// Structural checks (also run by parseSchedule): every id in range and
/// defined before use, views inside their source, allocations inside the
/// planned arena of their space, units/groups consistent. Throws
/// ScheduleFileError.
void validateSchedule(const Schedule &schedule, const std::string &name);

} // namespace plan::rt

#endif // PLAN_RUNTIME_FORMAT_SCHEDULEFILE_H
