//===- RuntimeTables.cpp - The runtime's op table, from SchedOps.td -------===//
//
// Generators that turn the sched dialect's op definitions into the MLIR-free
// tables the schedule file and the runtime are built on, as IREE generates
// its VM op table from its ODS: one definition of each op's contract.
//
//   -gen-runtime-enums  runtime/format/generated/ScheduleEnums.h: the
//                       enumerations named by `Sched_RuntimeEnum` records
//   -gen-runtime-ops    runtime/format/generated/ScheduleOps.h: per-op
//                       structs with their fields, the field visitor and the
//                       reader's checks
//   -gen-runtime-ops-doc docs/generated/schedule-ops.md: the ops' file forms
//
// The rules (docs/architecture.md, "Adding a schedule op"):
//   - every sched op is an instruction except those with a region (program,
//     repeat, tasks), pure ops (view, shard_view: they only define entries
//     of the file's buffer table) and those marked `isInstruction = 0` (a
//     task's slot signals: the file holds them in its tables); an op whose
//     result is a buffer (alloc) has that result
//     as its only field, its attributes being the buffer's;
//   - arguments and results become fields, in ODS order, under their ODS
//     names (a C++ member in lowerCamelCase);
//   - a buffer operand must declare its access (SchedContract.td), an enum
//     attribute must be a Sched_RuntimeEnum, and any other attribute must be
//     I64Attr, F64Attr, UnitAttr or one of the index attributes.
//
// Anything else is a fatal error naming the op and the argument: a generator
// that guessed would let the file and the IR drift apart.
//
//===----------------------------------------------------------------------===//

#include "mlir/TableGen/Argument.h"
#include "mlir/TableGen/Attribute.h"
#include "mlir/TableGen/GenInfo.h"
#include "mlir/TableGen/Operator.h"
#include "mlir/TableGen/SideEffects.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/TableGen/Error.h"
#include "llvm/TableGen/Record.h"

#include <optional>
#include <string>
#include <vector>

using llvm::formatv;
using llvm::Record;
using llvm::RecordKeeper;
using llvm::StringRef;
using mlir::tblgen::Operator;

namespace {

//===----------------------------------------------------------------------===//
// The model: what the generators emit, read off the records
//===----------------------------------------------------------------------===//

struct RuntimeEnum {
  const Record *info;   // the EnumInfo
  std::string name;     // in plan::rt
  std::string mlirEnum; // "::sched::Group"
  std::string summary;
  std::vector<std::pair<std::string, std::string>> cases; // symbol, keyword
  std::string source; // the .td file's enum def name, for comments
};

enum class FieldKind {
  Buffer,
  OptionalBuffer,
  Buffers,
  DefinedBuffer,
  Event,
  Events,
  SignalledEvent,
  Int,
  Float,
  Flag,
  Enum,
  UnitRef,
  GroupRef,
  MicroBatch,
};

struct Field {
  FieldKind kind;
  std::string name;   // ODS name, the file's key
  std::string member; // C++ member
  unsigned index = 0; // ODS operand or result index
  std::string access; // buffer operands: Read, Write, ReadWrite, Free
  std::string readsWith;
  bool scalar = false; // a Sched_Scalar operand
  const RuntimeEnum *enumeration = nullptr;
  std::string description; // for the docs
};

struct RuntimeOp {
  const Record *def;
  std::string name;      // "AllGather"
  std::string mlirClass; // "AllGatherOp"
  std::string mnemonic;  // "all_gather"
  std::string summary;
  std::vector<Field> fields;
  std::vector<std::string> checks; // C++ statements
  std::vector<std::string> checkDocs;
};

std::string lowerCamel(StringRef odsName) {
  std::string camel = llvm::convertToCamelFromSnakeCase(odsName);
  return camel;
}

std::string upperCamel(StringRef mnemonic) {
  return llvm::convertToCamelFromSnakeCase(mnemonic, /*capitalizeFirst=*/true);
}

std::vector<const Record *>
inDefinitionOrder(llvm::ArrayRef<const Record *> records) {
  std::vector<const Record *> sorted(records.begin(), records.end());
  llvm::sort(sorted, [](const Record *a, const Record *b) {
    return a->getID() < b->getID();
  });
  return sorted;
}

std::vector<RuntimeEnum> collectEnums(const RecordKeeper &records) {
  std::vector<RuntimeEnum> enums;
  for (const Record *def : inDefinitionOrder(
           records.getAllDerivedDefinitions("Sched_RuntimeEnum"))) {
    const Record *info = def->getValueAsDef("info");
    RuntimeEnum e;
    e.info = info;
    e.name = def->getValueAsString("name").str();
    if (e.name.empty())
      e.name = info->getValueAsString("className").str();
    e.mlirEnum = (info->getValueAsString("cppNamespace") +
                  "::" + info->getValueAsString("className"))
                     .str();
    e.summary = info->getValueAsString("summary").str();
    e.source = info->getName().str();
    int64_t expected = 0;
    for (const Record *c : info->getValueAsListOfDefs("enumerants")) {
      if (c->getValueAsInt("value") != expected)
        llvm::PrintFatalError(
            info, "the runtime's enumerations are numbered 0, 1, ... in "
                  "order; case '" +
                      c->getValueAsString("symbol") + "' has value " +
                      llvm::Twine(c->getValueAsInt("value")));
      ++expected;
      e.cases.emplace_back(c->getValueAsString("symbol").str(),
                           c->getValueAsString("str").str());
    }
    for (const RuntimeEnum &other : enums)
      if (other.name == e.name)
        llvm::PrintFatalError(def, "two runtime enumerations named '" + e.name +
                                       "'");
    enums.push_back(std::move(e));
  }
  return enums;
}

bool hasTrait(const Record &op, StringRef traitDef) {
  for (const Record *trait : op.getValueAsListOfDefs("traits"))
    if (trait->getName() == traitDef)
      return true;
  return false;
}

/// The access a buffer argument declares; fatal when it declares none.
void readAccess(const Operator &op, int argIndex, Field &field) {
  for (Operator::VariableDecorator decorator : op.getArgDecorators(argIndex)) {
    const Record &def = decorator.getDef();
    if (def.isSubClassOf("Sched_Access")) {
      field.access = def.getValueAsString("kind").str();
      field.readsWith = def.getValueAsString("readsWith").str();
      return;
    }
    if (def.isSubClassOf("MemoryEffect") &&
        def.getValueAsString("effect") == "::mlir::MemoryEffects::Free") {
      field.access = "Free";
      return;
    }
  }
  llvm::PrintFatalError(
      &op.getDef(), "operand '" + field.name + "' of " + op.getOperationName() +
                        " declares no access: decorate it with "
                        "Sched_Reads, Sched_Writes or Sched_Updates "
                        "(dialects/sched/SchedContract.td)");
}

const RuntimeEnum *enumOf(const Record &attrDef,
                          const std::vector<RuntimeEnum> &enums) {
  const llvm::RecordVal *value = attrDef.getValue("enum");
  if (!value)
    return nullptr;
  const Record *info = attrDef.getValueAsDef("enum");
  for (const RuntimeEnum &e : enums)
    if (e.info == info)
      return &e;
  return nullptr;
}

const Field &fieldNamed(const RuntimeOp &op, StringRef name) {
  for (const Field &f : op.fields)
    if (f.name == name)
      return f;
  llvm::PrintFatalError(op.def, "fileChecks names '" + name +
                                    "', which is no field of sched." +
                                    op.mnemonic);
}

/// `{"name", ids}` for a checker call: one id, or a variadic operand's.
std::string namedIds(const Field &f) {
  if (f.kind == FieldKind::Buffers)
    return formatv("{{\"{0}\", op.{1}}", f.name, f.member).str();
  if (f.kind != FieldKind::Buffer && f.kind != FieldKind::OptionalBuffer)
    llvm::PrintFatalError("fileChecks: '" + f.name + "' is not a buffer");
  return formatv("{{\"{0}\", field::one(op.{1})}", f.name, f.member).str();
}

const Field &fieldOfKind(const RuntimeOp &op, FieldKind kind,
                         StringRef enumName, StringRef what) {
  const Field *found = nullptr;
  for (const Field &f : op.fields)
    if (f.kind == kind &&
        (enumName.empty() ||
         (f.enumeration && f.enumeration->name == enumName))) {
      if (found)
        llvm::PrintFatalError(op.def, "sched." + op.mnemonic + " has two " +
                                          what + "s");
      found = &f;
    }
  if (!found)
    llvm::PrintFatalError(op.def, "sched." + op.mnemonic + " has no " + what);
  return *found;
}

std::string listNames(const std::vector<std::string> &names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    out += (i ? ", `" : "`") + names[i] + "`";
  return out;
}

void collectChecks(RuntimeOp &op) {
  for (const Record *check : op.def->getValueAsListOfDefs("fileChecks")) {
    auto operandList = [&](StringRef method) {
      std::vector<std::string> names;
      std::string args;
      for (StringRef name : check->getValueAsListOfStrings("operands")) {
        args += (args.empty() ? "" : ", ") + namedIds(fieldNamed(op, name));
        names.push_back(name.str());
      }
      op.checks.push_back(formatv("c.{0}({{{1}});", method, args).str());
      return names;
    };
    if (check->isSubClassOf("Sched_SameElementType")) {
      op.checkDocs.push_back(listNames(operandList("sameElementType")) +
                             " have one element type");
    } else if (check->isSubClassOf("Sched_ElementTypeF32")) {
      op.checkDocs.push_back(listNames(operandList("elementTypeF32")) +
                             " are `f32`");
    } else if (check->isSubClassOf("Sched_SameNumel")) {
      op.checkDocs.push_back(listNames(operandList("sameNumel")) +
                             " have one size");
    } else if (check->isSubClassOf("Sched_NumelTimesGroup")) {
      const Field &group =
          fieldOfKind(op, FieldKind::Enum, "GroupAxis", "process group");
      const Field &whole = fieldNamed(op, check->getValueAsString("whole"));
      const Field &part = fieldNamed(op, check->getValueAsString("part"));
      op.checks.push_back(formatv("c.numelTimesGroup(op.{0}, {1}, {2});",
                                  group.member, namedIds(whole), namedIds(part))
                              .str());
      op.checkDocs.push_back(
          formatv("`{0}` has `k` times the elements of `{1}`, `k` the size "
                  "of `{2}`",
                  whole.name, part.name, group.name)
              .str());
    } else if (check->isSubClassOf("Sched_RankOfGroup")) {
      const Field &group =
          fieldOfKind(op, FieldKind::Enum, "GroupAxis", "process group");
      const Field &rank = fieldNamed(op, check->getValueAsString("attr"));
      if (rank.kind != FieldKind::Int)
        llvm::PrintFatalError(op.def, "Sched_RankOfGroup<'" + rank.name +
                                          "'> needs an integer attribute");
      op.checks.push_back(formatv("c.rankOfGroup(op.{0}, \"{1}\", op.{2});",
                                  group.member, rank.name, rank.member)
                              .str());
      op.checkDocs.push_back(
          formatv("`{0}` is a rank of `{1}`", rank.name, group.name).str());
    } else if (check->isSubClassOf("Sched_UnitStorage")) {
      const Field &unit = fieldOfKind(op, FieldKind::UnitRef, "", "unit");
      const Field &params = fieldNamed(op, check->getValueAsString("params"));
      const Field &tied = fieldNamed(op, check->getValueAsString("tied"));
      const Field &frozen = fieldNamed(op, check->getValueAsString("frozen"));
      op.checks.push_back(formatv("c.unitStorage(op.{0}, {1}, {2}, {3});",
                                  unit.member, namedIds(params), namedIds(tied),
                                  namedIds(frozen))
                              .str());
      op.checkDocs.push_back(
          formatv("`{0}` holds exactly the stored elements of `{1}` that "
                  "train and `{3}` its frozen ones, each given exactly when "
                  "there are some; `{2}` is given exactly when `{1}` ties a "
                  "parameter of another unit, and holds that unit's stored "
                  "elements (its frozen ones when they are frozen)",
                  params.name, unit.name, tied.name, frozen.name)
              .str());
    } else if (check->isSubClassOf("Sched_FrozenStorage")) {
      const Field &unit = fieldOfKind(op, FieldKind::UnitRef, "", "unit");
      const Field &stored = fieldNamed(op, check->getValueAsString("stored"));
      const Field &working = fieldNamed(op, check->getValueAsString("working"));
      op.checks.push_back(formatv("c.frozenStorage(op.{0}, {1}, {2});",
                                  unit.member, namedIds(stored),
                                  namedIds(working))
                              .str());
      op.checkDocs.push_back(
          formatv("`{0}` holds the frozen parameters of `{1}` as they are "
                  "stored (bytes when it is `i8`, elements otherwise; its own "
                  "part when it is a view of a group's frozen base) and `{2}` "
                  "its frozen elements in a float type",
                  stored.name, unit.name, working.name)
              .str());
    } else if (check->isSubClassOf("Sched_TiedGrads")) {
      const Field &unit = fieldOfKind(op, FieldKind::UnitRef, "", "unit");
      const Field &tied = fieldNamed(op, check->getValueAsString("tied"));
      const Field &grads = fieldNamed(op, check->getValueAsString("grads"));
      op.checks.push_back(formatv("c.tiedGrads(op.{0}, {1}, {2});", unit.member,
                                  namedIds(tied), namedIds(grads))
                              .str());
      op.checkDocs.push_back(
          formatv("`{0}` is given exactly when `{1}` is and the parameters "
                  "`{2}` ties train (a tie to a LoRA base gets no gradient)",
                  grads.name, tied.name, unit.name)
              .str());
    } else if (check->isSubClassOf("Sched_OptimizerState")) {
      const Field &state = fieldNamed(op, check->getValueAsString("state"));
      op.checks.push_back(
          formatv("c.optimizerState({0});", namedIds(state)).str());
      op.checkDocs.push_back(
          formatv("`{0}` holds as many buffers as the optimizer keeps "
                  "(adamw 2, sgd with momentum 1, sgd 0)",
                  state.name)
              .str());
    } else if (check->isSubClassOf("Sched_Roles")) {
      std::string roles, roleDocs;
      for (StringRef role : check->getValueAsListOfStrings("roles")) {
        roles += (roles.empty() ? "\"" : ", \"") + role.str() + "\"";
        roleDocs += (roleDocs.empty() ? "`" : ", `") + role.str() + "`";
      }
      std::vector<std::string> names;
      std::string args;
      for (StringRef name : check->getValueAsListOfStrings("operands")) {
        args += (args.empty() ? "" : ", ") + namedIds(fieldNamed(op, name));
        names.push_back(name.str());
      }
      op.checks.push_back(
          formatv("c.roles({{{0}}, {{{1}});", args, roles).str());
      op.checkDocs.push_back(listNames(names) + " lie in allocations of role " +
                             roleDocs);
    } else if (check->isSubClassOf("Sched_GivenTogether")) {
      const Field &a = fieldNamed(op, check->getValueAsString("a"));
      const Field &b = fieldNamed(op, check->getValueAsString("b"));
      op.checks.push_back(
          formatv("c.givenTogether({0}, {1});", namedIds(a), namedIds(b))
              .str());
      op.checkDocs.push_back(
          formatv("`{0}` and `{1}` are given together", a.name, b.name).str());
    } else {
      llvm::PrintFatalError(check, "a file check plan-tblgen does not know");
    }
  }
}

std::vector<RuntimeOp> collectOps(const RecordKeeper &records,
                                  const std::vector<RuntimeEnum> &enums) {
  std::vector<RuntimeOp> ops;
  for (const Record *def :
       inDefinitionOrder(records.getAllDerivedDefinitions("Op"))) {
    Operator op(def);
    if (op.getDialectName() != "sched")
      continue;
    if (op.getNumRegions() > 0 || hasTrait(*def, "Pure") ||
        !def->getValueAsBit("isInstruction"))
      continue;
    RuntimeOp r;
    r.def = def;
    r.mlirClass = op.getCppClassName().str();
    r.mnemonic = def->getValueAsString("opName").str();
    r.name = upperCamel(r.mnemonic);
    r.summary = op.getSummary().str();

    bool definesBuffer = false;
    for (int i = 0; i < op.getNumResults(); ++i)
      definesBuffer |=
          op.getResult(i).constraint.getDefName() == "Sched_Buffer";
    if (definesBuffer) {
      // Its attributes describe the buffer (the file's buffer table).
      if (op.getNumResults() != 1)
        llvm::PrintFatalError(def, "a buffer-defining op has one result");
      Field f;
      f.kind = FieldKind::DefinedBuffer;
      f.name = op.getResult(0).name.str();
      f.member = lowerCamel(f.name);
      f.description = "the buffer it allocates (an id of `buffers`)";
      r.fields.push_back(std::move(f));
      ops.push_back(std::move(r));
      continue;
    }

    unsigned operandIndex = 0;
    for (int i = 0; i < op.getNumArgs(); ++i) {
      mlir::tblgen::Argument arg = op.getArg(i);
      Field f;
      if (auto *operand =
              llvm::dyn_cast<mlir::tblgen::NamedTypeConstraint *>(arg)) {
        f.name = operand->name.str();
        f.index = operandIndex++;
        StringRef type = operand->constraint.getDefName();
        if (type == "Sched_Buffer" || type == "Sched_Scalar") {
          f.scalar = type == "Sched_Scalar";
          f.kind = operand->isVariadic()   ? FieldKind::Buffers
                   : operand->isOptional() ? FieldKind::OptionalBuffer
                                           : FieldKind::Buffer;
          readAccess(op, i, f);
        } else if (type == "Sched_EventType") {
          if (operand->isOptional())
            llvm::PrintFatalError(def, "optional event operand '" + f.name +
                                           "': the file has no form for it");
          f.kind = operand->isVariadic() ? FieldKind::Events : FieldKind::Event;
        } else {
          llvm::PrintFatalError(def, "operand '" + f.name + "' of type " +
                                         type +
                                         " has no form in the schedule file");
        }
        f.description = operand->constraint.getSummary().str();
      } else if (auto *attr =
                     llvm::dyn_cast<mlir::tblgen::NamedAttribute *>(arg)) {
        f.name = attr->name.str();
        StringRef attrDef = attr->attr.getAttrDefName();
        // A unit attribute is optional by nature: present or not.
        if (attr->attr.isOptional() && attrDef != "UnitAttr")
          llvm::PrintFatalError(def, "optional attribute '" + f.name +
                                         "': the file has no form for it");
        if (const RuntimeEnum *e = enumOf(attr->attr.getDef(), enums)) {
          f.kind = FieldKind::Enum;
          f.enumeration = e;
        } else if (attrDef == "I64Attr" || attrDef == "Sched_PartAttr") {
          f.kind = FieldKind::Int;
        } else if (attrDef == "F64Attr") {
          f.kind = FieldKind::Float;
        } else if (attrDef == "UnitAttr") {
          f.kind = FieldKind::Flag;
        } else if (attrDef == "Sched_UnitRefAttr") {
          f.kind = FieldKind::UnitRef;
        } else if (attrDef == "Sched_GroupRefAttr") {
          f.kind = FieldKind::GroupRef;
        } else if (attrDef == "Sched_MicroBatchAttr") {
          f.kind = FieldKind::MicroBatch;
        } else {
          llvm::PrintFatalError(
              def, "attribute '" + f.name + "' (" + attrDef +
                       ") has no form in the schedule file; an enumeration "
                       "needs a Sched_RuntimeEnum record");
        }
        f.description = attr->attr.getSummary().str();
      } else {
        llvm::PrintFatalError(def, "properties have no form in the schedule "
                                   "file");
      }
      f.member = lowerCamel(f.name);
      r.fields.push_back(std::move(f));
    }
    for (int i = 0; i < op.getNumResults(); ++i) {
      const auto &result = op.getResult(i);
      if (result.constraint.getDefName() != "Sched_EventType" ||
          result.isVariableLength())
        llvm::PrintFatalError(def, "result '" + result.name +
                                       "' has no form in the schedule file");
      Field f;
      f.kind = FieldKind::SignalledEvent;
      f.name = result.name.str();
      f.member = lowerCamel(f.name);
      f.index = i;
      f.description = "the event it signals";
      r.fields.push_back(std::move(f));
    }
    for (const Field &f : r.fields)
      if (!f.readsWith.empty()) {
        const Field &flag = fieldNamed(r, f.readsWith);
        if (flag.kind != FieldKind::Flag)
          llvm::PrintFatalError(def, "'" + f.name + "' reads with '" +
                                         f.readsWith +
                                         "', which is not a unit attribute");
      }
    collectChecks(r);
    ops.push_back(std::move(r));
  }
  return ops;
}

//===----------------------------------------------------------------------===//
// Emitters
//===----------------------------------------------------------------------===//

/// What a generated file says of itself, `prefix` before each line.
void emitBanner(llvm::raw_ostream &os, StringRef what, StringRef generator,
                StringRef prefix = "// ") {
  os << prefix << what << "\n"
     << prefix << "Generated by `plan-tblgen " << generator
     << "` from dialects/sched/SchedRuntime.td.\n"
     << prefix << "Do not edit: `cmake --build build --target "
     << "plan-update-generated` rewrites\n"
     << prefix << "it, and the build fails while it differs from what the .td "
     << "files say.\n";
}

bool emitEnums(const RecordKeeper &records, llvm::raw_ostream &os) {
  std::vector<RuntimeEnum> enums = collectEnums(records);
  emitBanner(os, "The enumerations of schedule files.", "-gen-runtime-enums");
  os << R"(
#ifndef PLAN_RUNTIME_FORMAT_GENERATED_SCHEDULEENUMS_H
#define PLAN_RUNTIME_FORMAT_GENERATED_SCHEDULEENUMS_H

#include "Keywords.h"

#include <array>
#include <cstddef>
#include <cstdint>

namespace plan::rt {

)";
  for (const RuntimeEnum &e : enums) {
    os << formatv("/// {0} ({1}, `{2}`).\n", e.summary, e.source, e.mlirEnum);
    os << "enum class " << e.name << " : uint8_t {\n";
    for (const auto &[symbol, keyword] : e.cases)
      os << "  " << symbol << ",\n";
    os << "};\n";
    os << formatv("template <> struct EnumKeywords<{0}> {{\n"
                  "  static constexpr std::array<const char *, {1}> keywords = "
                  "{{",
                  e.name, e.cases.size());
    for (size_t i = 0; i < e.cases.size(); ++i)
      os << (i ? ", " : "") << '"' << e.cases[i].second << '"';
    os << "};\n};\n";
    os << formatv("/// The keyword of `value`; \"?\" for no value of the "
                  "enumeration.\n"
                  "inline const char *toString({0} value) {{\n"
                  "  auto index = static_cast<size_t>(value);\n"
                  "  const auto &keywords = EnumKeywords<{0}>::keywords;\n"
                  "  return index < keywords.size() ? keywords[index] : "
                  "\"?\";\n}\n\n",
                  e.name);
  }
  os << "} // namespace plan::rt\n\n";
  os << "/// (runtime enumeration, the IR's C++ enumeration), for the "
        "exporter.\n#define PLAN_SCHEDULE_ENUMS(X)";
  for (const RuntimeEnum &e : enums)
    os << " \\\n  X(" << e.name << ", " << e.mlirEnum << ")";
  // The attribute classes (EnumAttr defs) of the enumerations that have one.
  os << "\n\n/// (runtime enumeration, the IR's attribute class), for the "
        "exporter.\n#define PLAN_SCHEDULE_ENUM_ATTRS(X)";
  for (const Record *attr :
       inDefinitionOrder(records.getAllDerivedDefinitions("EnumAttr")))
    for (const RuntimeEnum &e : enums)
      if (attr->getValueAsDef("enum") == e.info)
        os << " \\\n  X(" << e.name << ", "
           << attr->getValueAsString("cppNamespace")
           << "::" << attr->getValueAsString("cppClassName") << ")";
  os << "\n\n#endif // PLAN_RUNTIME_FORMAT_GENERATED_SCHEDULEENUMS_H\n";
  return false;
}

std::string cppType(const Field &f) {
  switch (f.kind) {
  case FieldKind::Buffers:
  case FieldKind::Events:
    return "std::vector<int64_t>";
  case FieldKind::Float:
    return "double";
  case FieldKind::Flag:
    return "bool";
  case FieldKind::Enum:
    return f.enumeration->name;
  default:
    return "int64_t";
  }
}

std::string initializer(const Field &f) {
  switch (f.kind) {
  case FieldKind::Buffers:
  case FieldKind::Events:
    return "";
  case FieldKind::Float:
    return " = 0";
  case FieldKind::Flag:
    return " = false";
  case FieldKind::Enum:
    return " = " + f.enumeration->name + "::" + f.enumeration->cases[0].first;
  case FieldKind::Int:
  case FieldKind::MicroBatch:
    return " = 0";
  default:
    return " = -1";
  }
}

std::string descriptor(const RuntimeOp &op, const Field &f) {
  auto bufferDescriptor = [&](StringRef type) {
    std::string access = "field::Access::" + f.access;
    if (!f.readsWith.empty())
      access = formatv("op.{0} ? field::Access::ReadWrite : {1}",
                       lowerCamel(f.readsWith), access)
                   .str();
    std::string readsWith =
        f.readsWith.empty() ? "nullptr" : "\"" + f.readsWith + "\"";
    // OptionalBuffer and Buffers derive from Buffer: one more pair of braces.
    StringRef open = type == "Buffer" ? "{" : "{{";
    StringRef close = type == "Buffer" ? "}" : "}}";
    return formatv("field::{0}{1}\"{2}\", {3}, {4}, {5}, {6}{7}", type, open,
                   f.name, f.index, access, readsWith,
                   f.scalar ? "true" : "false", close)
        .str();
  };
  switch (f.kind) {
  case FieldKind::Buffer:
    return bufferDescriptor("Buffer");
  case FieldKind::OptionalBuffer:
    return bufferDescriptor("OptionalBuffer");
  case FieldKind::Buffers:
    return bufferDescriptor("Buffers");
  case FieldKind::DefinedBuffer:
    return formatv("field::DefinedBuffer{{\"{0}\", {1}}", f.name, f.index);
  case FieldKind::Event:
    return formatv("field::Event{{\"{0}\", {1}}", f.name, f.index);
  case FieldKind::Events:
    return formatv("field::Events{{\"{0}\", {1}}", f.name, f.index);
  case FieldKind::SignalledEvent:
    return formatv("field::SignalledEvent{{\"{0}\", {1}}", f.name, f.index);
  case FieldKind::Int:
    return formatv("field::Int{{\"{0}\"}", f.name);
  case FieldKind::Float:
    return formatv("field::Float{{\"{0}\"}", f.name);
  case FieldKind::Flag:
    return formatv("field::Flag{{\"{0}\"}", f.name);
  case FieldKind::Enum:
    return formatv("field::Enum<{0}>{{\"{1}\"}", f.enumeration->name, f.name);
  case FieldKind::UnitRef:
    return formatv("field::UnitRef{{\"{0}\"}", f.name);
  case FieldKind::GroupRef:
    return formatv("field::GroupRef{{\"{0}\"}", f.name);
  case FieldKind::MicroBatch:
    return formatv("field::MicroBatch{{\"{0}\"}", f.name);
  }
  (void)op;
  return "";
}

bool emitOps(const RecordKeeper &records, llvm::raw_ostream &os) {
  std::vector<RuntimeEnum> enums = collectEnums(records);
  std::vector<RuntimeOp> ops = collectOps(records, enums);
  emitBanner(os, "The instructions of schedule files: one struct per sched op.",
             "-gen-runtime-ops");
  os << R"(
#ifndef PLAN_RUNTIME_FORMAT_GENERATED_SCHEDULEOPS_H
#define PLAN_RUNTIME_FORMAT_GENERATED_SCHEDULEOPS_H

#include "OpFields.h"
#include "generated/ScheduleEnums.h"

#include <cstdint>
#include <variant>
#include <vector>

namespace plan::rt {

/// The ops' kinds, in the order of dialects/sched/SchedOps.td; an Op's
/// OpKind is the index of its struct in OpBody.
enum class OpKind : uint8_t {
)";
  for (const RuntimeOp &op : ops)
    os << "  " << op.name << ",\n";
  os << "};\n";
  os << formatv(
      "template <> struct EnumKeywords<OpKind> {{\n"
      "  static constexpr std::array<const char *, {0}> keywords = {{",
      ops.size());
  for (size_t i = 0; i < ops.size(); ++i)
    os << (i ? ", " : "") << '"' << ops[i].mnemonic << '"';
  os << "};\n};\n"
     << "inline const char *toString(OpKind value) {\n"
        "  auto index = static_cast<size_t>(value);\n"
        "  const auto &keywords = EnumKeywords<OpKind>::keywords;\n"
        "  return index < keywords.size() ? keywords[index] : \"?\";\n"
        "}\n\nnamespace ops {\n";

  for (const RuntimeOp &op : ops) {
    os << formatv("\n/// `sched.{0}`: {1}.\nstruct {2} {{\n", op.mnemonic,
                  op.summary, op.name);
    os << formatv("  static constexpr OpKind kind = OpKind::{0};\n", op.name);
    for (const Field &f : op.fields)
      os << "  " << cppType(f) << " " << f.member << initializer(f) << ";\n";
    os << "\n  /// Calls visit(descriptor, member) for each field, in order.\n"
          "  template <typename Op, typename Visitor>\n"
          "  static void fields(Op &op, Visitor &&visit) {\n";
    if (op.fields.empty())
      os << "    (void)op;\n    (void)visit;\n";
    for (const Field &f : op.fields)
      os << "    visit(" << descriptor(op, f) << ", op." << f.member << ");\n";
    os << "  }\n";
    os << "  /// The reader's checks beyond ids, lifetimes and events.\n"
          "  template <typename Checker>\n"
       << formatv("  static void check(const {0} &op, Checker &c) {{\n",
                  op.name);
    if (op.checks.empty())
      os << "    (void)op;\n    (void)c;\n";
    for (const std::string &check : op.checks)
      os << "    " << check << "\n";
    os << "  }\n};\n";
  }
  os << "\n} // namespace ops\n\n/// One instruction's kind and fields.\n"
        "using OpBody = std::variant<";
  for (size_t i = 0; i < ops.size(); ++i)
    os << (i ? ", " : "") << "ops::" << ops[i].name;
  os << ">;\n\n} // namespace plan::rt\n\n"
        "/// (op struct, the sched dialect's op class), for the compiler.\n"
        "#define PLAN_SCHEDULE_OPS(X)";
  for (const RuntimeOp &op : ops)
    os << " \\\n  X(" << op.name << ", " << op.mlirClass << ")";
  os << "\n\n#endif // PLAN_RUNTIME_FORMAT_GENERATED_SCHEDULEOPS_H\n";
  return false;
}

std::string fileForm(const Field &f) {
  switch (f.kind) {
  case FieldKind::Buffer:
    return f.scalar ? "scalar id" : "buffer id";
  case FieldKind::OptionalBuffer:
    return f.scalar ? "scalar id or -1" : "buffer id or -1";
  case FieldKind::Buffers:
    return "array of buffer ids";
  case FieldKind::DefinedBuffer:
    return "buffer id";
  case FieldKind::Event:
    return "event id";
  case FieldKind::Events:
    return "array of event ids";
  case FieldKind::SignalledEvent:
    return "event id";
  case FieldKind::Int:
    return "integer";
  case FieldKind::Float:
    return "finite number";
  case FieldKind::Flag:
    return "true or false";
  case FieldKind::Enum: {
    std::string keywords;
    for (const auto &[symbol, keyword] : f.enumeration->cases)
      keywords += (keywords.empty() ? "`" : ", `") + keyword + "`";
    return keywords;
  }
  case FieldKind::UnitRef:
    return "unit id";
  case FieldKind::GroupRef:
    return "group id";
  case FieldKind::MicroBatch:
    return "in [0, micro_batches)";
  }
  return "";
}

std::string role(const Field &f) {
  auto access = [&]() -> std::string {
    if (f.access == "Free")
      return "frees it";
    std::string text = f.access == "Read"    ? "reads"
                       : f.access == "Write" ? "writes"
                                             : "reads and writes";
    if (!f.readsWith.empty())
      text += " (and reads, with `" + f.readsWith + "`)";
    return text;
  };
  switch (f.kind) {
  case FieldKind::Buffer:
  case FieldKind::OptionalBuffer:
  case FieldKind::Buffers:
    return access();
  case FieldKind::Event:
    return "waits for it";
  case FieldKind::Events:
    return "starts after them";
  case FieldKind::SignalledEvent:
    return "signals it";
  case FieldKind::DefinedBuffer:
    return "allocates it";
  default:
    return f.description;
  }
}

bool emitOpsDoc(const RecordKeeper &records, llvm::raw_ostream &os) {
  std::vector<RuntimeEnum> enums = collectEnums(records);
  std::vector<RuntimeOp> ops = collectOps(records, enums);
  os << "<!--\n";
  emitBanner(os, "The ops of schedule files.", "-gen-runtime-ops-doc", "");
  os << "-->\n\n# The ops of a schedule file\n\n"
        "Each op of `ops` is `{\"op\": KIND, FIELDS..., \"line\": N}`: its "
        "fields are the sched op's\narguments and results, in this order, "
        "under these keys (docs/schedule-format.md).\nA reader checks every "
        "id, lifetime and event, and what each op lists under "
        "*checks*.\n";
  for (const RuntimeOp &op : ops) {
    os << "\n## `" << op.mnemonic << "`\n\n" << op.summary << ".\n\n";
    os << "| key | value | the op |\n| --- | --- | --- |\n";
    for (const Field &f : op.fields)
      os << "| `" << f.name << "` | " << fileForm(f) << " | " << role(f)
         << " |\n";
    if (!op.checkDocs.empty()) {
      os << "\nChecks: ";
      for (size_t i = 0; i < op.checkDocs.size(); ++i)
        os << (i ? "; " : "") << op.checkDocs[i];
      os << ".\n";
    }
  }
  return false;
}

mlir::GenRegistration
    genRuntimeEnums("gen-runtime-enums",
                    "The runtime's enumerations of schedule files", emitEnums);
mlir::GenRegistration genRuntimeOps("gen-runtime-ops",
                                    "The runtime's op table of schedule files",
                                    emitOps);
mlir::GenRegistration genRuntimeOpsDoc("gen-runtime-ops-doc",
                                       "The ops of schedule files, as Markdown",
                                       emitOpsDoc);

} // namespace
