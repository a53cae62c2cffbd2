//===- SchedOpTable.h - The runtime's op table, seen from the IR -*- C++
//-*-===//
//
// plan-tblgen generates the runtime's op table (one struct per sched op,
// runtime/format/generated/ScheduleOps.h) from SchedOps.td. The compiler
// reads the same table to know, for any op, its fields, what it does to its
// buffers and which events it follows and signals: the exporter, the
// schedule verifier and the passes that move asynchronous ops ask here
// instead of listing ops themselves.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_DIALECTS_SCHED_SCHEDOPTABLE_H
#define PLAN_DIALECTS_SCHED_SCHEDOPTABLE_H

#include "dialects/sched/SchedDialect.h"

#include "generated/ScheduleOps.h"

#include "llvm/ADT/SmallVector.h"

#include <optional>

namespace sched {

/// Calls `fn(concreteOp, rtOp)` with `op` as its op class and a
/// default-constructed struct of the runtime's op table; false (and no call)
/// for an op outside the table (the program, views, other dialects').
template <typename Fn> bool visitTableOp(mlir::Operation *op, Fn &&fn) {
#define PLAN_VISIT_TABLE_OP(Name, Class)                                       \
  if (auto concrete = llvm::dyn_cast<Class>(op)) {                             \
    fn(concrete, plan::rt::ops::Name{});                                       \
    return true;                                                               \
  }
  PLAN_SCHEDULE_OPS(PLAN_VISIT_TABLE_OP)
#undef PLAN_VISIT_TABLE_OP
  return false;
}

/// The runtime's value of an IR enumeration: they share their keywords
/// (plan-tblgen checks that they share their cases, in order).
#define PLAN_TO_RUNTIME(Rt, Mlir)                                              \
  inline plan::rt::Rt toRuntime(Mlir value) {                                  \
    return *plan::rt::parseKeyword<plan::rt::Rt>(stringifyEnum(value));        \
  }
PLAN_SCHEDULE_ENUMS(PLAN_TO_RUNTIME)
#undef PLAN_TO_RUNTIME

/// The IR's attribute class of a runtime enumeration (`type`).
template <typename RtEnum> struct EnumAttrOf;
#define PLAN_ENUM_ATTR_OF(Rt, Attr)                                            \
  template <> struct EnumAttrOf<plan::rt::Rt> { using type = Attr; };
PLAN_SCHEDULE_ENUM_ATTRS(PLAN_ENUM_ATTR_OF)
#undef PLAN_ENUM_ATTR_OF

/// One buffer operand of an op and what the op does to it.
struct BufferAccess {
  mlir::OpOperand *operand;
  bool reads = false;
  bool writes = false;
  bool frees = false;

  mlir::Value buffer() const { return operand->get(); }
};

/// The buffer operands of `op`, in ODS order; nullopt for an op outside the
/// op table.
std::optional<llvm::SmallVector<BufferAccess, 4>>
getBufferAccesses(mlir::Operation *op);

/// What makes an op asynchronous: the events it starts after, the event it
/// signals and, for a collective, its process group.
struct AsyncInfo {
  mlir::OperandRange after;
  mlir::Value done;
  std::optional<Group> group;
};

/// nullopt for an op that signals no event.
std::optional<AsyncInfo> getAsyncInfo(mlir::Operation *op);

/// The `after` events of an asynchronous op, to change; nullopt for an op
/// that signals no event.
std::optional<mlir::MutableOperandRange> getAfterMutable(mlir::Operation *op);

/// Whether `op` is a collective: an asynchronous op on a process group.
inline bool isCollective(mlir::Operation *op) {
  std::optional<AsyncInfo> info = getAsyncInfo(op);
  return info && info->group;
}

/// Whether `group` spans pipeline stages: the pipeline group, or its first
/// and last stages' (embedding).
inline bool isAcrossStages(Group group) {
  return group == Group::Pipeline || group == Group::Embedding;
}

/// Whether `op` is a collective between pipeline stages (on the pipeline or
/// the embedding group), which sched-lower emits itself (the sum of the
/// stages' gradient norms, a tied embedding's gradient) and the passes that
/// distribute the single-rank program leave alone.
inline bool isPipelineCollective(mlir::Operation *op) {
  std::optional<AsyncInfo> info = getAsyncInfo(op);
  return info && info->group && isAcrossStages(*info->group);
}

/// Whether `op` involves another pipeline stage: a sched.send, a sched.recv
/// or a collective between stages (false for null).
bool isBetweenStages(mlir::Operation *op);

} // namespace sched

#endif // PLAN_DIALECTS_SCHED_SCHEDOPTABLE_H
