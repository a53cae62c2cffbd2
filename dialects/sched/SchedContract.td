//===- SchedContract.td - What a sched op is in a schedule file -*- tablegen -*-===//
//
// Every sched op is also an instruction of the schedule file the runtime
// executes. plan-tblgen (tools/plan-tblgen) generates the runtime's op table
// from the op definitions themselves: an op's arguments and results are its
// fields, named and ordered as in ODS, and the exporter, the file's writer
// and reader, the reader's checks and sched-verify-schedule all come from
// that table (docs/architecture.md, "Adding a schedule op"). What ODS alone
// does not say is said here, next to each argument:
//
//   - what the op does to each buffer operand (Sched_Reads, Sched_Writes,
//     Sched_Updates: a decorator, `Arg<Sched_Buffer, "...", [Sched_Reads]>`);
//   - which attributes name a plan symbol or a micro-batch (the attribute
//     constraints below, which the file stores as indices);
//   - what a reader checks of a file's op beyond its ids, lifetimes and
//     events: the relations the op's verifier checks on the IR, restated
//     for files that a person or another producer wrote (`fileChecks`).
//
//===----------------------------------------------------------------------===//

#ifndef SCHED_CONTRACT_TD
#define SCHED_CONTRACT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/EnumAttr.td"

//===----------------------------------------------------------------------===//
// Buffer access
//===----------------------------------------------------------------------===//

// `kind` is Read, Write or ReadWrite. With `readsWith`, the name of a unit
// attribute of the op, a Write is a ReadWrite when the attribute is set
// (reduce_scatter's `accumulate`).
class Sched_Access<string kindName, string flag = ""> : OpVariableDecorator {
  string kind = kindName;
  string readsWith = flag;
}
def Sched_Reads : Sched_Access<"Read">;
def Sched_Writes : Sched_Access<"Write">;
def Sched_Updates : Sched_Access<"ReadWrite">;
class Sched_WritesOrUpdatesWith<string flag> : Sched_Access<"Write", flag>;

//===----------------------------------------------------------------------===//
// Attributes the file stores as indices
//===----------------------------------------------------------------------===//

// A unit of the program's plan: the file stores its index in `units`.
def Sched_UnitRefAttr
    : Attr<CPred<"::llvm::isa<::mlir::SymbolRefAttr>($_self)">,
           "symbol reference to a plan.unit"> {
  let storageType = [{ ::mlir::SymbolRefAttr }];
  let returnType = [{ ::mlir::SymbolRefAttr }];
  let valueType = NoneType;
  let constBuilderCall =
      "::mlir::SymbolRefAttr::get($_builder.getContext(), $0)";
  let convertFromStorage = "$_self";
}

// A group (FSDP unit) of the program's plan: the file stores its index in
// `groups`.
def Sched_GroupRefAttr
    : Attr<CPred<"::llvm::isa<::mlir::SymbolRefAttr>($_self)">,
           "symbol reference to a plan.group"> {
  let storageType = [{ ::mlir::SymbolRefAttr }];
  let returnType = [{ ::mlir::SymbolRefAttr }];
  let valueType = NoneType;
  let constBuilderCall =
      "::mlir::SymbolRefAttr::get($_builder.getContext(), $0)";
  let convertFromStorage = "$_self";
}

// A micro-batch of the step: at least 0, below the program's micro_batches.
// One of the plan dialect's recipe attributes (#plan.model, #plan.train, ...)
// as the sched.program carries it.
class Sched_PlanAttr<string name>
    : Attr<CPred<"::llvm::isa<::plan::" # name # "Attr>($_self)">,
           "#plan." # name # " attribute"> {
  let storageType = "::plan::" # name # "Attr";
  let returnType = "::plan::" # name # "Attr";
  let convertFromStorage = "$_self";
}

def Sched_MicroBatchAttr
    : TypedSignlessIntegerAttrBase<I64, "uint64_t", "micro-batch index">;

// A part of a unit's compute: 0 for a unit computed whole; under tensor
// parallelism the index among the parts its activation collectives separate
// (runtime/format/TensorParallelParts.h).
def Sched_PartAttr
    : TypedSignlessIntegerAttrBase<I64, "uint64_t", "part of a unit's compute">;

//===----------------------------------------------------------------------===//
// What a reader checks
//===----------------------------------------------------------------------===//

// Operands are named as in the op's arguments; an absent optional operand
// takes no part, a variadic one takes part with each of its buffers.
class Sched_FileCheck;

// The buffers have one element type.
class Sched_SameElementType<list<string> names> : Sched_FileCheck {
  list<string> operands = names;
}
// The buffers hold f32.
class Sched_ElementTypeF32<list<string> names> : Sched_FileCheck {
  list<string> operands = names;
}
// The buffers have one size.
class Sched_SameNumel<list<string> names> : Sched_FileCheck {
  list<string> operands = names;
}
// `whole` is the op's process group size times `part` (the op's `group`).
class Sched_NumelTimesGroup<string wholeName, string partName>
    : Sched_FileCheck {
  string whole = wholeName;
  string part = partName;
}
// The integer attribute is a rank of the op's process group.
class Sched_RankOfGroup<string attrName> : Sched_FileCheck {
  string attr = attrName;
}
// `params` holds exactly the stored elements of the op's unit that train,
// given exactly when it has some; `frozen` its frozen stored elements (the
// base of a LoRA run), given exactly when it has some; `tied` is given
// exactly when the unit ties a parameter stored in another unit, and then
// holds that unit's stored elements (its frozen ones in a LoRA run).
class Sched_UnitStorage<string paramsName, string tiedName,
                        string frozenName> : Sched_FileCheck {
  string params = paramsName;
  string tied = tiedName;
  string frozen = frozenName;
}
// `stored` holds the op's unit's frozen parameters as they are stored (the
// unit's frozen bytes when it is i8, its frozen elements otherwise), and when
// it is a view into a group's frozen base, the unit's own part of it;
// `working` its frozen elements, in a float type.
class Sched_FrozenStorage<string storedName, string workingName>
    : Sched_FileCheck {
  string stored = storedName;
  string working = workingName;
}
// The variadic operand holds as many buffers as the schedule's optimizer
// keeps (adamw 2, sgd with momentum 1, sgd 0).
class Sched_OptimizerState<string stateName> : Sched_FileCheck {
  string state = stateName;
}
// Each buffer of the operands lies in an allocation of one of these roles
// (`Sched_Role` keywords): what a file edited to point an op at the wrong
// buffer (the parameters as a forward's saves, a moment as the gradients)
// breaks, which no size or type check sees.
class Sched_Roles<list<string> names, list<string> allowed> : Sched_FileCheck {
  list<string> operands = names;
  list<string> roles = allowed;
}
// `grads` (the tied gradients) is given exactly when `tied` is and the tied
// parameters train: a tie to a LoRA base gets no gradient.
class Sched_TiedGrads<string tiedName, string gradsName> : Sched_FileCheck {
  string tied = tiedName;
  string grads = gradsName;
}
// Two optional operands are given together or not at all.
class Sched_GivenTogether<string first, string second> : Sched_FileCheck {
  string a = first;
  string b = second;
}

//===----------------------------------------------------------------------===//
// What crosses into the runtime
//===----------------------------------------------------------------------===//

// An enumeration the runtime reads from schedule files, under `name` in
// namespace plan::rt (runtime/format/generated/ScheduleEnums.h). Every
// enum attribute of a sched op must be one.
class Sched_RuntimeEnum<EnumInfo enumInfo, string runtimeName = ""> {
  EnumInfo info = enumInfo;
  string name = runtimeName;
}

#endif // SCHED_CONTRACT_TD
