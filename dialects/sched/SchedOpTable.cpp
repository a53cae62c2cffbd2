//===- SchedOpTable.cpp - The runtime's op table, seen from the IR --------===//

#include "dialects/sched/SchedOpTable.h"

#include <type_traits>

using namespace mlir;
namespace field = plan::rt::field;

namespace sched {

std::optional<SmallVector<BufferAccess, 4>> getBufferAccesses(Operation *op) {
  SmallVector<BufferAccess, 4> accesses;
  bool inTable = visitTableOp(op, [&](auto concrete, auto rtOp) {
    decltype(rtOp)::fields(rtOp, [&](auto d, auto &) {
      using D = decltype(d);
      if constexpr (std::is_base_of_v<field::Buffer, D>) {
        field::Access access = d.access;
        if (d.readsWith && op->hasAttr(d.readsWith))
          access = field::Access::ReadWrite;
        auto [start, length] = concrete.getODSOperandIndexAndLength(d.operand);
        for (OpOperand &operand : op->getOpOperands().slice(start, length))
          accesses.push_back({&operand, field::reads(access),
                              field::writes(access),
                              access == field::Access::Free});
      }
    });
  });
  if (!inTable)
    return std::nullopt;
  return accesses;
}

std::optional<AsyncInfo> getAsyncInfo(Operation *op) {
  std::optional<AsyncInfo> info;
  visitTableOp(op, [&](auto concrete, auto rtOp) {
    Value done;
    std::optional<OperandRange> after;
    std::optional<Group> group;
    decltype(rtOp)::fields(rtOp, [&](auto d, auto &) {
      using D = decltype(d);
      if constexpr (std::is_same_v<D, field::SignalledEvent>)
        done = concrete.getODSResults(d.result).front();
      else if constexpr (std::is_same_v<D, field::Events>)
        after = concrete.getODSOperands(d.operand);
      else if constexpr (std::is_same_v<D, field::Enum<plan::rt::GroupAxis>>)
        group = op->getAttrOfType<GroupAttr>(d.name).getValue();
    });
    if (done && after)
      info = AsyncInfo{*after, done, group};
  });
  return info;
}

std::optional<MutableOperandRange> getAfterMutable(Operation *op) {
  std::optional<MutableOperandRange> range;
  visitTableOp(op, [&](auto concrete, auto rtOp) {
    using Concrete = decltype(concrete);
    decltype(rtOp)::fields(rtOp, [&](auto d, auto &) {
      if constexpr (std::is_same_v<decltype(d), field::Events>) {
        // The asynchronous ops have no operand segments: `after` is their one
        // variadic operand, so its range is all there is to change.
        static_assert(
            !Concrete::template hasTrait<OpTrait::AttrSizedOperandSegments>(),
            "an op with operand segments needs its segment sizes "
            "updated with `after`");
        auto [start, length] = concrete.getODSOperandIndexAndLength(d.operand);
        range.emplace(op, start, length);
      }
    });
  });
  return range;
}

bool isBetweenStages(Operation *op) {
  return op && (isa<SendOp, RecvOp>(op) || isPipelineCollective(op));
}

} // namespace sched
