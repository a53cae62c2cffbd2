//===- SchedDialect.cpp - The sched dialect -------------------------------===//

#include "dialects/sched/SchedDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace sched;

#include "dialects/sched/SchedEnums.cpp.inc"

#include "dialects/sched/SchedDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/sched/SchedAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/sched/SchedTypes.cpp.inc"

void SchedDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/sched/SchedAttrs.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "dialects/sched/SchedTypes.cpp.inc"
      >();
  registerOps();
}

MemRefType sched::getBufferType(MLIRContext *context, int64_t numel,
                                Type elementType, MemorySpace space) {
  return MemRefType::get({numel}, elementType, MemRefLayoutAttrInterface(),
                         MemorySpaceAttr::get(context, space));
}

MemorySpace sched::getMemorySpace(MemRefType type) {
  return cast<MemorySpaceAttr>(type.getMemorySpace()).getValue();
}

FailureOr<WaitOp> sched::findWait(Operation *asyncOp) {
  WaitOp found;
  for (Operation *user : asyncOp->getResult(0).getUsers()) {
    auto wait = dyn_cast<WaitOp>(user);
    if (!wait)
      continue;
    if (found)
      return asyncOp->emitOpError("event is waited more than once");
    found = wait;
  }
  if (!found)
    return asyncOp->emitOpError("event is never waited");
  return found;
}

AllocOp sched::getRootAlloc(Value buffer) {
  while (Operation *def = buffer.getDefiningOp()) {
    if (auto alloc = dyn_cast<AllocOp>(def))
      return alloc;
    if (auto view = dyn_cast<ViewOp>(def))
      buffer = view.getSource();
    else if (auto shard = dyn_cast<ShardViewOp>(def))
      buffer = shard.getSource();
    else
      return {};
  }
  return {};
}
