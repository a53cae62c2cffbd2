//===- ScheduleJson.h - The JSON forms of a schedule's parts ----*- C++ -*-===//
//
// The body of a schedule file is JSON (docs/schedule-format.md); other files
// that record part of a schedule (a checkpoint's checkpoint.json records the
// model, units and groups) use the same forms through these functions, so
// that each part has one writer and one reader. Readers check every field
// (support::JsonReader) and throw support::JsonError; they do not validate
// relations between parts (validateSchedule does).
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_RUNTIME_FORMAT_SCHEDULEJSON_H
#define PLAN_RUNTIME_FORMAT_SCHEDULEJSON_H

#include "Json.h"
#include "Schedule.h"

namespace plan::rt {

using support::Json;
using support::JsonPath;
using support::JsonReader;

/// The whole body, appended to `out` as compact JSON text, and back.
void appendScheduleBody(const Schedule &schedule, std::string &out);
Schedule scheduleFromJson(const JsonReader &reader, const Json &body);

Json modelToJson(const ModelConfig &model);
ModelConfig modelFromJson(const JsonReader &reader, const Json &json,
                          const JsonPath &at);

Json unitsToJson(const std::vector<Unit> &units);
std::vector<Unit> unitsFromJson(const JsonReader &reader, const Json &json,
                                const JsonPath &at);

Json groupsToJson(const std::vector<Group> &groups);
std::vector<Group> groupsFromJson(const JsonReader &reader, const Json &json,
                                  const JsonPath &at);

/// An op as compact JSON text (its one writer), and as a JSON value.
void appendOpJson(const Op &op, std::string &out);
Json opToJson(const Op &op);
Op opFromJson(const JsonReader &reader, const Json &json, const JsonPath &at);

} // namespace plan::rt

#endif // PLAN_RUNTIME_FORMAT_SCHEDULEJSON_H
