//===- ScheduleFile.h - Reading and writing schedule files ------*- C++ -*-===//
//
// The on-disk form of a Schedule (docs/schedule-format.md): a fixed binary
// header (magic, format version, body size, CRC-32 of the body) followed by
// a JSON body (ScheduleJson.h). Readers check everything before trusting
// anything: a truncated, corrupted, wrong-version or inconsistent file is a
// ScheduleFileError with a one-line message, never a crash.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_RUNTIME_FORMAT_SCHEDULEFILE_H
#define PLAN_RUNTIME_FORMAT_SCHEDULEFILE_H

#include "Schedule.h"

#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace plan::rt {

/// One-line, user-facing: "FILE: reason".
class ScheduleFileError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// Rewrites every buffer id of `op` (its operands and the buffer it
/// defines) with `buffer`, every event id with `event`, and adds
/// `microBatchShift` to its micro-batch: `op` moved to another place of a
/// program, or into a task.
void remapOp(Op &op, const std::function<int64_t(int64_t)> &buffer,
             const std::function<int64_t(int64_t)> &event,
             int64_t microBatchShift);

/// Replaces each program that has tasks by its expansion, the program the
/// executor runs: every run of a task in place, with ids of its own
/// (ScheduleTasks.cpp; docs/schedule-format.md, "Tasks"). Throws when a
/// run table or a task is malformed; what the expanded program then holds
/// is validateSchedule's to check. `name` prefixes the error's message.
void expandTasks(Schedule &schedule, const std::string &name);

/// Checks everything a reader checks (ids defined before use, lifetimes,
/// events, every op's fields and relations, units, groups, arenas) of the
/// schedule with its tasks expanded and returns it as one the executor
/// accepts (holding the schedule as given too, to be written as it was).
/// `name` prefixes the error's message.
ValidSchedule validateSchedule(Schedule schedule, const std::string &name);

/// The complete file contents (header + body). It does not validate: a
/// test can write any schedule; writeScheduleFile writes valid ones.
std::string serializeSchedule(const Schedule &schedule);
/// Parses and validates file contents; `name` prefixes error messages.
ValidSchedule parseSchedule(std::string_view bytes, const std::string &name);

/// The body as indented JSON text (planc --emit=schedule-json).
std::string scheduleJsonText(const Schedule &schedule);

/// Writes atomically (support::writeFileAtomic).
void writeScheduleFile(const ValidSchedule &schedule, const std::string &path);
ValidSchedule readScheduleFile(const std::string &path);

} // namespace plan::rt

#endif // PLAN_RUNTIME_FORMAT_SCHEDULEFILE_H
