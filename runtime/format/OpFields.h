//===- OpFields.h - The kinds of fields an op of a schedule has -*- C++ -*-===//
//
// The vocabulary of the generated op table (generated/ScheduleOps.h): each
// op struct's `fields(op, visit)` calls `visit(descriptor, member)` for each
// of its fields, in ODS order, and the descriptor's type says what kind of
// field it is. Generic code (the file's writer, reader and checks, the
// exporter, the executor's bookkeeping) is written once over these kinds;
// docs/architecture.md shows how an op is added.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_RUNTIME_FORMAT_OPFIELDS_H
#define PLAN_RUNTIME_FORMAT_OPFIELDS_H

#include <cstdint>
#include <span>
#include <vector>

namespace plan::rt::field {

/// What an op does to a buffer operand.
enum class Access : uint8_t { Read, Write, ReadWrite, Free };

inline bool reads(Access a) {
  return a == Access::Read || a == Access::ReadWrite;
}
inline bool writes(Access a) {
  return a == Access::Write || a == Access::ReadWrite;
}

/// A buffer operand (member: the buffer's id). `operand` is its ODS operand
/// index; `access` what the op does to it, already resolved against the op's
/// flags; `readsWith` names the flag that turns a write into a read-write
/// (nullptr if none); `scalar`: a one-element f32 buffer.
struct Buffer {
  const char *name;
  unsigned operand;
  Access access;
  const char *readsWith;
  bool scalar;
};
/// An optional buffer operand (member: the id, -1 when absent).
struct OptionalBuffer : Buffer {};
/// A variadic buffer operand (member: the ids).
struct Buffers : Buffer {};
/// The buffer an allocating op defines (member: its id); `result` is the
/// ODS result index.
struct DefinedBuffer {
  const char *name;
  unsigned result;
};
/// An event the op waits for (member: the event's id).
struct Event {
  const char *name;
  unsigned operand;
};
/// Events the op starts after (member: their ids).
struct Events {
  const char *name;
  unsigned operand;
};
/// The event an asynchronous op signals (member: its id).
struct SignalledEvent {
  const char *name;
  unsigned result;
};
/// Attributes (member: int64_t, double, bool, the enumeration).
struct Int {
  const char *name;
};
struct Float {
  const char *name;
};
struct Flag {
  const char *name;
};
template <typename E> struct Enum { const char *name; };
/// Indices into Schedule::units and Schedule::groups, and a micro-batch.
struct UnitRef {
  const char *name;
};
struct GroupRef {
  const char *name;
};
struct MicroBatch {
  const char *name;
};

/// Buffer operands as the reader's checks see them: a name and its ids (an
/// absent optional operand is -1, which the checks pass over).
struct NamedIds {
  const char *name;
  std::span<const int64_t> ids;
};
inline std::span<const int64_t> one(const int64_t &id) { return {&id, 1}; }

} // namespace plan::rt::field

#endif // PLAN_RUNTIME_FORMAT_OPFIELDS_H
