//===- EnumKeyword.h - Enum attributes as bare keywords ---------*- C++ -*-===//
//
// `custom<EnumKeyword>($attr)` in an op's assembly format prints an enum
// attribute as its bare keyword (`role param`, `group shard`) and parses it
// back, while the attribute keeps its full form (`#sched.role<param>`) in
// the generic syntax.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_DIALECTS_PLAN_ENUMKEYWORD_H
#define PLAN_DIALECTS_PLAN_ENUMKEYWORD_H

#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"

#include <utility>

namespace plan {

template <typename AttrT>
void printEnumKeyword(mlir::OpAsmPrinter &printer, mlir::Operation *,
                      AttrT attr) {
  printer << stringifyEnum(attr.getValue());
}

template <typename AttrT>
mlir::ParseResult parseEnumKeyword(mlir::OpAsmParser &parser, AttrT &attr) {
  using Enum = decltype(std::declval<AttrT>().getValue());
  // The FieldParser that ODS generates for every enum reports what it expects.
  mlir::FailureOr<Enum> value = mlir::FieldParser<Enum>::parse(parser);
  if (mlir::failed(value))
    return mlir::failure();
  attr = AttrT::get(parser.getContext(), *value);
  return mlir::success();
}

} // namespace plan

#endif // PLAN_DIALECTS_PLAN_ENUMKEYWORD_H
