//===- ParserTest.cpp - The .plan lexer, parser and --set overrides -------===//

#include "frontend/Parser.h"
#include "frontend/Diagnostics.h"
#include "frontend/Syntax.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

using namespace plan;
using namespace plan::syntax;
using llvm::StringRef;

namespace {

std::string describeLocation(mlir::Location loc) {
  if (auto fileLoc = llvm::dyn_cast<mlir::FileLineColLoc>(loc))
    return (fileLoc.getFilename().getValue() + ":" +
            llvm::Twine(fileLoc.getLine()) + ":" +
            llvm::Twine(fileLoc.getColumn()))
        .str();
  return "<unknown>";
}

/// A .plan text parsed as "test.plan", with every diagnostic recorded as
/// "file:line:col: error: message" and its notes after it.
class Plan {
public:
  explicit Plan(StringRef text)
      : context(mlir::MLIRContext::Threading::DISABLED),
        handler(&context,
                [this](mlir::Diagnostic &d) {
                  record(d);
                  return mlir::success();
                }),
        diag(&context, &sourceMgr, mlir::UnknownLoc::get(&context)) {
    unsigned id = sourceMgr.AddNewSourceBuffer(
        llvm::MemoryBuffer::getMemBufferCopy(text, "test.plan"), llvm::SMLoc());
    root = parsePlanSyntax(sourceMgr, id, diag);
  }

  bool set(StringRef setting) {
    return applyOverride(root, setting, sourceMgr, diag);
  }

  /// "line:col" of a location in the source manager's buffers.
  std::string at(llvm::SMLoc loc) const {
    return describeLocation(diag.loc(loc));
  }

  mlir::MLIRContext context;
  llvm::SourceMgr sourceMgr;
  mlir::ScopedDiagnosticHandler handler;
  DiagEmitter diag;
  Block root;
  std::vector<std::string> diags;

private:
  void record(mlir::Diagnostic &d) {
    auto severity = [](mlir::DiagnosticSeverity s) {
      switch (s) {
      case mlir::DiagnosticSeverity::Error:
        return "error";
      case mlir::DiagnosticSeverity::Warning:
        return "warning";
      case mlir::DiagnosticSeverity::Note:
        return "note";
      case mlir::DiagnosticSeverity::Remark:
        return "remark";
      }
      return "?";
    };
    diags.push_back(describeLocation(d.getLocation()) + ": " +
                    severity(d.getSeverity()) + ": " + d.str());
    for (mlir::Diagnostic &note : d.getNotes())
      diags.push_back(describeLocation(note.getLocation()) + ": " +
                      severity(note.getSeverity()) + ": " + note.str());
  }
};

using Diags = std::vector<std::string>;

/// The value of `x = <text>`, parsed without errors.
const Value &valueOf(Plan &plan) {
  EXPECT_EQ(plan.diags, Diags{});
  static Value missing;
  if (plan.root.items.size() != 1)
    return missing;
  return plan.root.items.front().value;
}

//===----------------------------------------------------------------------===//
// Numbers and units
//===----------------------------------------------------------------------===//

struct IntegerCase {
  const char *text;
  int64_t value;
};

TEST(ParserNumbers, Integers) {
  for (IntegerCase c : {IntegerCase{"8", 8},
                        {"0", 0},
                        {"8_192", 8192},
                        {"1_000_000", 1000000},
                        {"-1", -1},
                        {"007", 7},
                        {"9223372036854775807", INT64_MAX},
                        {"-9223372036854775808", INT64_MIN}}) {
    SCOPED_TRACE(c.text);
    Plan plan(std::string("x = ") + c.text);
    const Value &v = valueOf(plan);
    EXPECT_EQ(v.kind, ValueKind::Number);
    EXPECT_TRUE(v.isInteger);
    ASSERT_TRUE(v.integer.has_value());
    EXPECT_EQ(*v.integer, c.value);
    EXPECT_EQ(v.number, static_cast<double>(c.value));
    EXPECT_EQ(v.unit, "");
    EXPECT_EQ(v.text, c.text);
    EXPECT_EQ(v.spelling(), c.text);
  }
}

TEST(ParserNumbers, IntegerBeyondInt64KeepsTheDouble) {
  Plan plan("x = 18_446_744_073_709_551_616");
  const Value &v = valueOf(plan);
  EXPECT_TRUE(v.isInteger);
  EXPECT_FALSE(v.integer.has_value());
  EXPECT_EQ(v.number, 18446744073709551616.0);
}

struct RealCase {
  const char *text;
  double value;
};

TEST(ParserNumbers, Reals) {
  for (RealCase c : {RealCase{"2e-5", 2e-5},
                     {"1.5e8", 1.5e8},
                     {"0.95", 0.95},
                     {"1e8", 1e8},
                     {"1E3", 1e3},
                     {"2.5e+3", 2.5e3},
                     {"-2.5e-3", -2.5e-3},
                     {"0.0", 0.0},
                     {"1_000.000_5", 1000.0005}}) {
    SCOPED_TRACE(c.text);
    Plan plan(std::string("x = ") + c.text);
    const Value &v = valueOf(plan);
    EXPECT_EQ(v.kind, ValueKind::Number);
    EXPECT_FALSE(v.isInteger);
    EXPECT_FALSE(v.integer.has_value());
    EXPECT_DOUBLE_EQ(v.number, c.value);
    EXPECT_EQ(v.unit, "");
    EXPECT_EQ(v.spelling(), c.text);
  }
}

struct QuantityCase {
  const char *text;
  double value;
  const char *unit;
};

TEST(ParserNumbers, EveryUnitSpelling) {
  for (QuantityCase c : {QuantityCase{"1B", 1, "B"},
                         {"2KB", 2, "KB"},
                         {"512MB", 512, "MB"},
                         {"80GB", 80, "GB"},
                         {"1TB", 1, "TB"},
                         {"4KiB", 4, "KiB"},
                         {"25MiB", 25, "MiB"},
                         {"24GiB", 24, "GiB"},
                         {"2TiB", 2, "TiB"},
                         {"16GB/s", 16, "GB/s"},
                         {"900GB/s", 900, "GB/s"},
                         {"3.35TB/s", 3.35, "TB/s"},
                         {"64GiB/s", 64, "GiB/s"},
                         {"500MB/s", 500, "MB/s"},
                         {"400Gb/s", 400, "Gb/s"},
                         {"1.6Tb/s", 1.6, "Tb/s"},
                         {"0GB/s", 0, "GB/s"},
                         {"8_192MiB", 8192, "MiB"},
                         {"1e3MB", 1e3, "MB"}}) {
    SCOPED_TRACE(c.text);
    Plan plan(std::string("x = ") + c.text);
    const Value &v = valueOf(plan);
    EXPECT_EQ(v.kind, ValueKind::Number);
    EXPECT_DOUBLE_EQ(v.number, c.value);
    EXPECT_EQ(v.unit, c.unit);
    EXPECT_EQ(v.spelling(), c.text);
    size_t digits = std::string(c.text).size() - std::string(c.unit).size();
    EXPECT_EQ(plan.at(v.unitLoc), "test.plan:1:" + std::to_string(5 + digits));
  }
}

TEST(ParserNumbers, UnitLocPointsWhereAMissingUnitGoes) {
  Plan plan("host_memory = 128");
  const Value &v = valueOf(plan);
  EXPECT_EQ(v.unit, "");
  EXPECT_EQ(plan.at(v.unitLoc), "test.plan:1:18");
}

TEST(ParserNumbers, UnknownUnitsAreLeftToTheAnalyzer) {
  Plan plan("x = 5min\ny = 3GB/sec");
  ASSERT_EQ(plan.diags, Diags{});
  EXPECT_EQ(plan.root.items[0].value.unit, "min");
  EXPECT_EQ(plan.root.items[1].value.unit, "GB/sec");
}

TEST(ParserNumbers, Malformed) {
  for (const char *text :
       {"8__192", "1e", "8_", "1e+", "1e-", "24GiB2", "1.2.3", "0x10", "1._5",
        "1.", "24_GiB", "1e_5", "3.35TB/s2", ".5", "-.5"}) {
    SCOPED_TRACE(text);
    Plan plan(std::string("x = ") + text + "\ny = 1");
    EXPECT_EQ(plan.diags, Diags{"test.plan:1:5: error: malformed number '" +
                                std::string(text) + "'"});
    // The next line still parses.
    ASSERT_NE(plan.root.find("y"), nullptr);
  }
}

TEST(ParserNumbers, OutOfRange) {
  Plan plan("x = 1e999");
  EXPECT_EQ(plan.diags,
            Diags{"test.plan:1:5: error: number '1e999' is out of range"});
}

TEST(ParserNumbers, MinusNeedsADigit) {
  Plan plan("x = -foo");
  EXPECT_EQ(plan.diags,
            Diags{"test.plan:1:5: error: expected a digit after '-'"});
}

TEST(ParserNumbers, SpaceBeforeTheUnit) {
  Plan plan("host_memory = 128 GiB\nbw = 900 GB/s");
  EXPECT_EQ(plan.diags,
            (Diags{"test.plan:1:19: error: write the unit right after the "
                   "number, without a space: '128GiB'",
                   "test.plan:2:10: error: write the unit right after the "
                   "number, without a space: '900GB/s'"}));
}

//===----------------------------------------------------------------------===//
// Strings
//===----------------------------------------------------------------------===//

TEST(ParserStrings, Plain) {
  Plan plan("data = \"data/train.bin\"");
  const Value &v = valueOf(plan);
  EXPECT_EQ(v.kind, ValueKind::String);
  EXPECT_EQ(v.text, "data/train.bin");
  EXPECT_EQ(v.spelling(), "\"data/train.bin\"");
  EXPECT_EQ(plan.at(v.range.Start), "test.plan:1:8");
  EXPECT_EQ(plan.at(v.range.End), "test.plan:1:24");
}

TEST(ParserStrings, Escapes) {
  Plan plan(R"(name = "a\"b\\c\nd\te # not a comment")");
  const Value &v = valueOf(plan);
  EXPECT_EQ(v.text, "a\"b\\c\nd\te # not a comment");
  EXPECT_EQ(v.spelling(), R"("a\"b\\c\nd\te # not a comment")");
}

TEST(ParserStrings, EmptyAndUnicode) {
  Plan plan("a = \"\"\nb = \"h\xC3\xA9llo \xE2\x9C\x93\"");
  ASSERT_EQ(plan.diags, Diags{});
  EXPECT_EQ(plan.root.items[0].value.text, "");
  EXPECT_EQ(plan.root.items[1].value.text, "h\xC3\xA9llo \xE2\x9C\x93");
}

TEST(ParserStrings, UnterminatedAtEndOfLine) {
  Plan plan("name = \"abc\nmodel = llama3_8b\n");
  EXPECT_EQ(plan.diags, Diags{"test.plan:1:8: error: unterminated string"});
  const Item *model = plan.root.find("model");
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->value.text, "llama3_8b");
}

TEST(ParserStrings, UnterminatedAtEndOfFile) {
  Plan plan("name = \"abc\\");
  EXPECT_EQ(plan.diags, Diags{"test.plan:1:8: error: unterminated string"});
}

TEST(ParserStrings, UnknownEscape) {
  Plan plan(R"(name = "a\qb\x")");
  EXPECT_EQ(
      plan.diags,
      (Diags{
          R"(test.plan:1:10: error: unknown escape '\q' in string; use \", \\, \n or \t)",
          R"(test.plan:1:13: error: unknown escape '\x' in string; use \", \\, \n or \t)"}));
}

//===----------------------------------------------------------------------===//
// Identifiers, blocks, calls, tuples
//===----------------------------------------------------------------------===//

TEST(ParserValues, Identifiers) {
  Plan plan("a = full_shard\nb = _private\nc = true\nd = llama3_8b");
  ASSERT_EQ(plan.diags, Diags{});
  ASSERT_EQ(plan.root.items.size(), 4u);
  for (const Item &item : plan.root.items) {
    EXPECT_EQ(item.value.kind, ValueKind::Identifier);
    EXPECT_EQ(item.value.block, nullptr);
    EXPECT_EQ(item.value.kindName(), "a name");
  }
  EXPECT_EQ(plan.root.items[0].value.text, "full_shard");
  EXPECT_EQ(plan.root.items[1].value.text, "_private");
  EXPECT_EQ(plan.root.items[3].value.spelling(), "llama3_8b");
}

TEST(ParserValues, IdentifierWithBlock) {
  Plan plan("model = llama { layers = 2 }\n"
            "cluster { gpu = h100_sxm { memory = 64GiB } }");
  ASSERT_EQ(plan.diags, Diags{});
  const Item *model = plan.root.find("model");
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->value.kind, ValueKind::Identifier);
  EXPECT_EQ(model->value.text, "llama");
  ASSERT_NE(model->value.block, nullptr);
  ASSERT_EQ(model->value.block->items.size(), 1u);
  EXPECT_EQ(model->value.block->items[0].key, "layers");
  EXPECT_EQ(*model->value.block->items[0].value.integer, 2);
  EXPECT_EQ(model->value.spelling(), "llama { ... }");
  EXPECT_EQ(model->value.kindName(), "a name with a block");
  EXPECT_EQ(plan.at(model->value.range.Start), "test.plan:1:9");
  EXPECT_EQ(plan.at(model->value.range.End), "test.plan:1:29");
  EXPECT_EQ(plan.at(model->value.block->lbrace), "test.plan:1:15");
  EXPECT_EQ(plan.at(model->value.block->rbrace), "test.plan:1:28");

  const Item *cluster = plan.root.find("cluster");
  ASSERT_NE(cluster, nullptr);
  ASSERT_EQ(cluster->value.kind, ValueKind::Block);
  const Item *gpu = cluster->value.block->find("gpu");
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(gpu->value.text, "h100_sxm");
  ASSERT_NE(gpu->value.block, nullptr);
  const Item *memory = gpu->value.block->find("memory");
  ASSERT_NE(memory, nullptr);
  EXPECT_EQ(memory->value.unit, "GiB");
  EXPECT_EQ(memory->value.number, 64);
}

TEST(ParserValues, BlockOnTheLinesAfterTheName) {
  Plan plan("model = llama3_8b\n\n  # overrides\n{\n  layers = 2\n}\n"
            "train { seq_len = 8 }");
  ASSERT_EQ(plan.diags, Diags{});
  ASSERT_EQ(plan.root.items.size(), 2u);
  const Value &model = plan.root.items[0].value;
  ASSERT_NE(model.block, nullptr);
  EXPECT_EQ(model.block->items[0].key, "layers");
  EXPECT_EQ(plan.at(model.block->lbrace), "test.plan:4:1");
}

TEST(ParserValues, Sections) {
  Plan plan("cluster {\n  nodes = 1\n}\nempty {}\nalso = { x = 1 }");
  ASSERT_EQ(plan.diags, Diags{});
  ASSERT_EQ(plan.root.items.size(), 3u);
  const Item &cluster = plan.root.items[0];
  EXPECT_EQ(cluster.key, "cluster");
  EXPECT_EQ(cluster.value.kind, ValueKind::Block);
  EXPECT_EQ(cluster.value.kindName(), "a block");
  EXPECT_EQ(cluster.value.spelling(), "{ ... }");
  EXPECT_EQ(plan.at(cluster.keyLoc()), "test.plan:1:1");
  EXPECT_EQ(plan.at(cluster.value.block->lbrace), "test.plan:1:9");
  EXPECT_EQ(plan.at(cluster.value.block->rbrace), "test.plan:3:1");
  EXPECT_EQ(plan.at(cluster.value.range.Start), "test.plan:1:9");
  EXPECT_EQ(plan.root.items[1].value.spelling(), "{}");
  EXPECT_TRUE(plan.root.items[1].value.block->items.empty());
  EXPECT_EQ(plan.root.items[2].value.kind, ValueKind::Block);
  EXPECT_FALSE(plan.root.lbrace.isValid());
}

TEST(ParserValues, CallWithNamedAndPositionalArguments) {
  Plan plan("optimizer = adamw(lr = 2e-5, betas = (0.9, 0.95), "
            "weight_decay = 0.0)\nwrap = min_params(1e8)\n"
            "loss_scale = dynamic()\n");
  ASSERT_EQ(plan.diags, Diags{});
  const Value &adamw = plan.root.items[0].value;
  EXPECT_EQ(adamw.kind, ValueKind::Call);
  EXPECT_EQ(adamw.text, "adamw");
  ASSERT_EQ(adamw.elements.size(), 3u);
  EXPECT_EQ(adamw.elements[0].name, "lr");
  EXPECT_EQ(plan.at(adamw.elements[0].nameLoc), "test.plan:1:19");
  EXPECT_DOUBLE_EQ(adamw.elements[0].value->number, 2e-5);
  EXPECT_EQ(adamw.elements[1].name, "betas");
  const Value &betas = *adamw.elements[1].value;
  EXPECT_EQ(betas.kind, ValueKind::Tuple);
  ASSERT_EQ(betas.elements.size(), 2u);
  EXPECT_TRUE(betas.elements[0].name.empty());
  EXPECT_DOUBLE_EQ(betas.elements[1].value->number, 0.95);
  EXPECT_EQ(adamw.spelling(),
            "adamw(lr = 2e-5, betas = (0.9, 0.95), weight_decay = 0.0)");
  EXPECT_EQ(adamw.kindName(), "a call");

  const Value &wrap = plan.root.items[1].value;
  EXPECT_EQ(wrap.kind, ValueKind::Call);
  ASSERT_EQ(wrap.elements.size(), 1u);
  EXPECT_TRUE(wrap.elements[0].name.empty());
  EXPECT_EQ(wrap.elements[0].value->number, 1e8);

  const Value &dynamic = plan.root.items[2].value;
  EXPECT_EQ(dynamic.kind, ValueKind::Call);
  EXPECT_TRUE(dynamic.elements.empty());
  EXPECT_EQ(dynamic.spelling(), "dynamic()");
}

TEST(ParserValues, NestedTuplesAndMixedArguments) {
  Plan plan("x = f(1, \"s\", g(y = (1, (2, 3))), z = llama { a = 1 }, "
            "w = { b = 2 },)");
  const Value &v = valueOf(plan);
  ASSERT_EQ(v.kind, ValueKind::Call);
  ASSERT_EQ(v.elements.size(), 5u);
  EXPECT_EQ(v.elements[1].value->kind, ValueKind::String);
  const Value &g = *v.elements[2].value;
  ASSERT_EQ(g.kind, ValueKind::Call);
  const Value &outer = *g.elements[0].value;
  ASSERT_EQ(outer.kind, ValueKind::Tuple);
  ASSERT_EQ(outer.elements.size(), 2u);
  const Value &inner = *outer.elements[1].value;
  ASSERT_EQ(inner.kind, ValueKind::Tuple);
  EXPECT_EQ(*inner.elements[1].value->integer, 3);
  EXPECT_EQ(v.elements[3].value->block->items[0].key, "a");
  EXPECT_EQ(v.elements[4].value->kind, ValueKind::Block);
  EXPECT_EQ(v.spelling(), "f(1, \"s\", g(y = (1, (2, 3))), z = llama { ... }, "
                          "w = { ... })");
}

TEST(ParserValues, CallAcrossLinesWithComments) {
  Plan plan("optimizer = adamw(  # the usual\n"
            "  lr = 2e-5,        # small\n"
            "  betas = (0.9,\n"
            "           0.95),\n"
            ")\n"
            "seq_len = 2048\n");
  ASSERT_EQ(plan.diags, Diags{});
  ASSERT_EQ(plan.root.items.size(), 2u);
  EXPECT_EQ(plan.root.items[0].value.elements.size(), 2u);
  EXPECT_EQ(plan.at(plan.root.items[0].value.range.End), "test.plan:5:2");
}

TEST(ParserValues, Tuples) {
  Plan plan("mesh = (2, 4)\none = (2)\npairs = ((1, 2), (3, 4))\n"
            "trailing = (1, 2,)");
  ASSERT_EQ(plan.diags, Diags{});
  const Value &mesh = plan.root.items[0].value;
  EXPECT_EQ(mesh.kind, ValueKind::Tuple);
  EXPECT_EQ(mesh.kindName(), "a tuple");
  EXPECT_EQ(mesh.spelling(), "(2, 4)");
  const Value &one = plan.root.items[1].value;
  EXPECT_EQ(one.kind, ValueKind::Tuple);
  ASSERT_EQ(one.elements.size(), 1u);
  EXPECT_EQ(one.spelling(), "(2)");
  EXPECT_EQ(plan.root.items[2].value.elements[1].value->kind, ValueKind::Tuple);
  EXPECT_EQ(plan.root.items[3].value.elements.size(), 2u);
}

TEST(ParserValues, EmptyTupleIsAnError) {
  Plan plan("mesh = ()\nnext = 1");
  EXPECT_EQ(plan.diags, Diags{"test.plan:1:8: error: empty tuple '()'; a "
                              "tuple needs at least one value"});
  EXPECT_NE(plan.root.find("next"), nullptr);
}

//===----------------------------------------------------------------------===//
// Items, separators, comments, keys
//===----------------------------------------------------------------------===//

TEST(ParserItems, EverySeparator) {
  for (const char *text :
       {"cluster {\n  nodes = 1\n  gpus_per_node = 2\n  gpu = rtx4090\n}",
        "cluster { nodes = 1 gpus_per_node = 2 gpu = rtx4090 }",
        "cluster { nodes = 1, gpus_per_node = 2, gpu = rtx4090 }",
        "cluster { nodes = 1; gpus_per_node = 2; gpu = rtx4090; }",
        "cluster {nodes=1,gpus_per_node=2;gpu=rtx4090,}",
        "cluster {\n  nodes = 1,\n  gpus_per_node = 2;\n  gpu = rtx4090\n}"}) {
    SCOPED_TRACE(text);
    Plan plan(text);
    ASSERT_EQ(plan.diags, Diags{});
    const Item *cluster = plan.root.find("cluster");
    ASSERT_NE(cluster, nullptr);
    ASSERT_EQ(cluster->value.block->items.size(), 3u);
    EXPECT_EQ(cluster->value.block->items[0].key, "nodes");
    EXPECT_EQ(cluster->value.block->items[1].key, "gpus_per_node");
    EXPECT_EQ(cluster->value.block->items[2].value.text, "rtx4090");
  }
}

TEST(ParserItems, CommentsEverywhere) {
  Plan plan("# leading comment\n"
            "model = llama3_8b # after a value\n"
            "cluster # before a brace\n"
            "{ # after a brace\n"
            "  nodes = # after '='? no: the value must be on this line\n"
            "}\n"
            "train { micro_batch = 1 } # trailing\n"
            "# last line without newline");
  EXPECT_EQ(plan.diags,
            Diags{"test.plan:5:10: error: expected a value after '='"});

  Plan clean("# only comments\n"
             "model = llama3_8b # after a value\n"
             "cluster # before a brace\n"
             "{ # after a brace\n"
             "  nodes = 1 # after a value\n"
             "  # a line of its own\n"
             "}\n"
             "optimizer = adamw( # inside a call\n"
             "  lr = 1e-4 # between arguments\n"
             ")\n"
             "# last line without newline");
  ASSERT_EQ(clean.diags, Diags{});
  ASSERT_EQ(clean.root.items.size(), 3u);
  EXPECT_EQ(clean.root.items[1].value.block->items.size(), 1u);
}

TEST(ParserItems, EmptyAndCommentOnlyFiles) {
  for (const char *text :
       {"", "   \n\t\n", "# just a comment", "# a comment\n# and another\n",
        "\xEF\xBB\xBF", ",;,"}) {
    Plan plan(text);
    EXPECT_EQ(plan.diags, Diags{});
    EXPECT_TRUE(plan.root.items.empty());
  }
}

TEST(ParserItems, DottedKeysAreKeptAsWritten) {
  Plan plan("parallel {\n  offload.params = cpu\n  a.b.c { x = 1 }\n}");
  ASSERT_EQ(plan.diags, Diags{});
  const Block &parallel = *plan.root.items[0].value.block;
  ASSERT_EQ(parallel.items.size(), 2u);
  EXPECT_EQ(parallel.items[0].key, "offload.params");
  EXPECT_EQ(plan.at(parallel.items[0].keyRange.Start), "test.plan:2:3");
  EXPECT_EQ(plan.at(parallel.items[0].keyRange.End), "test.plan:2:17");
  EXPECT_EQ(parallel.items[1].key, "a.b.c");
  EXPECT_EQ(parallel.items[1].value.kind, ValueKind::Block);
}

TEST(ParserItems, WindowsLineEndings) {
  Plan plan("cluster {\r\n  nodes = 1\r\n  name = \"x\"\r\n}\r\n");
  ASSERT_EQ(plan.diags, Diags{});
  EXPECT_EQ(plan.root.items[0].value.block->items.size(), 2u);
}

TEST(ParserItems, DuplicatesAreKeptAndFindReturnsTheLast) {
  Plan plan("a = 1\nb = 2\na = 3");
  ASSERT_EQ(plan.diags, Diags{});
  ASSERT_EQ(plan.root.items.size(), 3u);
  const Block &constRoot = plan.root;
  EXPECT_EQ(*constRoot.find("a")->value.integer, 3);
  EXPECT_EQ(plan.root.find("a"), &plan.root.items[2]);
  EXPECT_EQ(plan.root.find("c"), nullptr);
}

//===----------------------------------------------------------------------===//
// Syntax errors
//===----------------------------------------------------------------------===//

struct ErrorCase {
  const char *text;
  Diags diags;
};

TEST(ParserErrors, ExactMessagesAndLocations) {
  std::vector<ErrorCase> cases = {
      {"cluster\n  nodes = 1\n",
       {"test.plan:1:8: error: expected '=' or '{' after key 'cluster'"}},
      {"cluster nodes = 1",
       {"test.plan:1:9: error: expected '=' or '{' after key 'cluster'"}},
      {"x =\ny = 1", {"test.plan:1:4: error: expected a value after '='"}},
      {"x = )", {"test.plan:1:5: error: expected a value after '='"}},
      {"x = ,", {"test.plan:1:5: error: expected a value after '='"}},
      {"x = @", {"test.plan:1:5: error: unexpected character '@'"}},
      {"x = 1 @", {"test.plan:1:7: error: unexpected character '@'"}},
      {"nodes: 1",
       {"test.plan:1:6: error: unexpected character ':'; items are written "
        "'key = value'"}},
      {"targets = [q_proj, 2",
       {"test.plan:1:21: error: expected ']' to close the list opened here",
        "test.plan:1:11: note: list opened here"}},
      {"name = 'x'",
       {"test.plan:1:8: error: unexpected character '''; strings use double "
        "quotes"}},
      {"name = \xE2\x80\x9Cx\xE2\x80\x9D",
       {"test.plan:1:8: error: unexpected character '\xE2\x80\x9C' (U+201C); "
        "strings use plain double quotes '\"'"}},
      {"x = \xE2\x88\x92"
       "1",
       {"test.plan:1:5: error: unexpected character '\xE2\x88\x92' (U+2212); "
        "a minus sign is a plain '-'"}},
      {"x = 1\xC2\xA0",
       {"test.plan:1:6: error: unexpected character '\xC2\xA0' (U+00A0); "
        "replace it with a plain space"}},
      {"x = \xFF", {"test.plan:1:5: error: unexpected character '\\xFF'"}},
      {"x = 1 2",
       {"test.plan:1:7: error: unexpected '2' after the value of 'x'"}},
      {"x = 1 y",
       {"test.plan:1:7: error: unexpected 'y' after the value of "
        "'x'"}},
      {"x = f(1) { a = 1 }",
       {"test.plan:1:10: error: unexpected '{' after the value of 'x'"}},
      {"\"name\" = 1",
       {"test.plan:1:1: error: expected a key, got '\"name\"'; keys are "
        "written without quotes"}},
      {"= 1", {"test.plan:1:1: error: expected a key, got '='"}},
      {"8 = 1", {"test.plan:1:1: error: expected a key, got '8'"}},
      {"a. = 1",
       {"test.plan:1:4: error: expected a name after '.' in key 'a.'"}},
      {"a.\nb = 1",
       {"test.plan:1:3: error: expected a name after '.' in key "
        "'a.'"}},
      {"layers.0 = 1",
       {"test.plan:1:8: error: expected a name after '.' in key 'layers.'"}},
      {"}", {"test.plan:1:1: error: unexpected '}' with no block to close"}},
      {"cluster {\n  nodes = 1\n",
       {"test.plan:2:12: error: expected '}' to close the block opened here",
        "test.plan:1:9: note: 'cluster' block opened here"}},
      {"x = {",
       {"test.plan:1:6: error: expected '}' to close the block opened here",
        "test.plan:1:5: note: 'x' block opened here"}},
      {"x = adamw(lr = 1",
       {"test.plan:1:17: error: expected ')' to close the call opened here",
        "test.plan:1:10: note: call to 'adamw' opened here"}},
      {"a { x = (1, 2 }",
       {"test.plan:1:15: error: expected ')' to close the tuple opened here",
        "test.plan:1:9: note: tuple opened here"}},
      {"x = f(1 2)\ny = 1",
       {"test.plan:1:9: error: expected ',' or ')' after an argument of 'f', "
        "got '2'"}},
      {"x = (1 2)",
       {"test.plan:1:8: error: expected ',' or ')' after a tuple element, got "
        "'2'"}},
      {"x = (1\n  y = 2)",
       {"test.plan:1:7: error: expected ',' or ')' after a tuple element, got "
        "'y'"}},
      {"x = f(a = )", {"test.plan:1:11: error: expected a value after '='"}},
      {"x = f(,)", {"test.plan:1:7: error: expected a value, got ','"}},
      {"x = f(a = 1 b = 2)",
       {"test.plan:1:13: error: expected ',' or ')' after an argument of 'f', "
        "got 'b'"}},
  };
  for (const ErrorCase &c : cases) {
    SCOPED_TRACE(c.text);
    Plan plan(c.text);
    EXPECT_EQ(plan.diags, c.diags);
    EXPECT_EQ(plan.diag.numErrors(),
              static_cast<unsigned>(llvm::count_if(c.diags, [](auto &d) {
                return StringRef(d).contains(": error: ");
              })));
  }
}

TEST(ParserErrors, NulBytes) {
  // The second NUL on line 3 is skipped while recovering from the first.
  Plan plan(StringRef("x = \0\ny = 1\n\0\0", 14));
  EXPECT_EQ(plan.diags,
            (Diags{"test.plan:1:5: error: unexpected character '\\x00'",
                   "test.plan:3:1: error: unexpected character '\\x00'"}));
  EXPECT_NE(plan.root.find("y"), nullptr);
}

TEST(ParserErrors, SeveralErrorsInOneRun) {
  Plan plan("cluster {\n"                                            // 1
            "  nodes =\n"                                            // 2
            "  gpus_per_node = 8__192\n"                             // 3
            "  gpu = h100 { memory = @ }\n"                          // 4
            "  host_memory = 128GiB\n"                               // 5
            "}\n"                                                    // 6
            "train {\n"                                              // 7
            "  optimizer = adamw(lr = 2e-5,, betas = (0.9, 0.95))\n" // 8
            "  seq_len = 2048\n"                                     // 9
            "}\n"                                                    // 10
            "parallel sharding = full_shard\n"                       // 11
            "name = \"unterminated\n"                                // 12
            "model = llama3_8b\n");                                  // 13
  EXPECT_EQ(
      plan.diags,
      (Diags{"test.plan:2:10: error: expected a value after '='",
             "test.plan:3:19: error: malformed number '8__192'",
             "test.plan:4:25: error: unexpected character '@'",
             "test.plan:8:31: error: expected a value, got ','",
             "test.plan:11:10: error: expected '=' or '{' after key 'parallel'",
             "test.plan:12:8: error: unterminated string"}));
  EXPECT_EQ(plan.diag.numErrors(), 6u);

  // What could be recovered is in the tree.
  const Item *cluster = plan.root.find("cluster");
  ASSERT_NE(cluster, nullptr);
  EXPECT_NE(cluster->value.block->find("host_memory"), nullptr);
  EXPECT_NE(cluster->value.block->find("gpu"), nullptr);
  const Item *train = plan.root.find("train");
  ASSERT_NE(train, nullptr);
  EXPECT_NE(train->value.block->find("seq_len"), nullptr);
  EXPECT_EQ(train->value.block->find("optimizer"), nullptr);
  EXPECT_NE(plan.root.find("model"), nullptr);
}

TEST(ParserErrors, MissingClosingBraceInTheMiddle) {
  // The brace of `cluster` is missing: `train` becomes part of it, and the
  // end of the file reports the unclosed block once.
  Plan plan("cluster {\n  nodes = 1\ntrain {\n  seq_len = 8\n}\n");
  EXPECT_EQ(plan.diags,
            (Diags{"test.plan:5:2: error: expected '}' to close the block "
                   "opened here",
                   "test.plan:1:9: note: 'cluster' block opened here"}));
}

TEST(ParserErrors, MissingOpeningBrace) {
  Plan plan("cluster\n  nodes = 1\n}\ntrain { seq_len = 8 }\n");
  EXPECT_EQ(plan.diags,
            (Diags{"test.plan:1:8: error: expected '=' or '{' after key "
                   "'cluster'",
                   "test.plan:3:1: error: unexpected '}' with no block to "
                   "close"}));
  EXPECT_NE(plan.root.find("train"), nullptr);
}

TEST(ParserErrors, ErrorInsideABlockRecoversInsideIt) {
  Plan plan("model = llama {\n  layers = @\n  hidden = 64\n}\nnext = 1");
  EXPECT_EQ(plan.diags,
            Diags{"test.plan:2:12: error: unexpected character '@'"});
  const Item *model = plan.root.find("model");
  ASSERT_NE(model, nullptr);
  EXPECT_NE(model->value.block->find("hidden"), nullptr);
  EXPECT_NE(plan.root.find("next"), nullptr);
}

TEST(ParserErrors, UnbalancedParentheses) {
  Plan plan("train {\n"
            "  optimizer = adamw(lr = (1, 2\n"
            "  seq_len = 8\n"
            "}\n"
            "parallel { sharding = full_shard ) }\n"
            "x = 1");
  EXPECT_EQ(plan.diags,
            (Diags{"test.plan:2:31: error: expected ',' or ')' after a tuple "
                   "element, got 'seq_len'",
                   "test.plan:5:34: error: unexpected ')' after the value of "
                   "'sharding'"}));
  EXPECT_NE(plan.root.find("x"), nullptr);
  EXPECT_NE(plan.root.find("parallel"), nullptr);
}

TEST(ParserErrors, StrayClosingParenthesisAtTheStartOfALine) {
  Plan plan("a = 1\n)\nb = 2");
  EXPECT_EQ(plan.diags, Diags{"test.plan:2:1: error: expected a key, got ')'"});
  EXPECT_NE(plan.root.find("b"), nullptr);
}

TEST(ParserErrors, TooManyErrors) {
  std::string text;
  for (int i = 0; i < 40; ++i)
    text += "x = @\n";
  Plan plan(text);
  ASSERT_EQ(plan.diags.size(), 21u);
  EXPECT_EQ(plan.diags[19], "test.plan:20:5: error: unexpected character '@'");
  EXPECT_EQ(plan.diags[20],
            "test.plan:21:5: error: too many errors; stopping here");
  EXPECT_EQ(plan.diag.numErrors(), 21u);
}

TEST(ParserErrors, DeepNestingIsBounded) {
  for (const char *open : {"(", "f(", "{a = ", "{a "}) {
    SCOPED_TRACE(open);
    std::string text = "x = ";
    for (int i = 0; i < 100000; ++i)
      text += open;
    Plan plan(text);
    ASSERT_EQ(plan.diags.size(), 1u);
    EXPECT_TRUE(StringRef(plan.diags[0])
                    .ends_with("error: nesting is deeper than 64 levels of "
                               "'{' and '('"));
  }
  // 64 levels are fine.
  std::string text = "x = " + std::string(64, '(') + "1" + std::string(64, ')');
  Plan ok(text);
  EXPECT_EQ(ok.diags, Diags{});
}

TEST(ParserErrors, PrintedWithSourceLineAndCaret) {
  mlir::MLIRContext context(mlir::MLIRContext::Threading::DISABLED);
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy("cluster {\n  nodes = 8__192\n}\n",
                                           "test.plan"),
      llvm::SMLoc());
  std::string printed;
  llvm::raw_string_ostream os(printed);
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context, os);
  DiagEmitter diag(&context, &sourceMgr, mlir::UnknownLoc::get(&context));
  parsePlanSyntax(sourceMgr, 1, diag);
  EXPECT_EQ(printed, "test.plan:2:11: error: malformed number '8__192'\n"
                     "  nodes = 8__192\n"
                     "          ^\n");
}

/// A fixed-seed fuzz: whatever the bytes, the parser terminates, reports a
/// bounded number of errors and never crashes.
TEST(ParserErrors, GarbageNeverCrashes) {
  const std::string valid =
      "# plan\nmodel = llama3_8b { layers = 2 }\n"
      "cluster {\n  nodes = 1\n  gpu = h100_sxm\n"
      "  host_memory = 128GiB\n}\n"
      "train {\n  optimizer = adamw(lr = 2e-5, betas = "
      "(0.9, 0.95))\n  name = \"a\\\"b\"\n}\n"
      "parallel { offload.params = cpu; mesh = (1, 2) }\n";
  static const char letters[] = "{}()=,;.#\"\\-_+/ \n\tabzAZ019eE@:\0\xC3\xE2";
  const std::string alphabet(letters, sizeof(letters) - 1);
  std::mt19937 random(20240611);
  auto pick = [&](size_t n) {
    return std::uniform_int_distribution<size_t>(0, n - 1)(random);
  };
  for (int round = 0; round < 3000; ++round) {
    std::string text;
    if (round % 2 == 0) {
      size_t length = pick(200);
      for (size_t i = 0; i < length; ++i)
        text += alphabet[pick(alphabet.size())];
    } else {
      text = valid;
      for (size_t edits = 1 + pick(6); edits > 0; --edits) {
        size_t at = pick(text.size());
        switch (pick(3)) {
        case 0:
          text.erase(at, 1);
          break;
        case 1:
          text.insert(text.begin() + at, alphabet[pick(alphabet.size())]);
          break;
        default:
          text[at] = static_cast<char>(pick(256));
        }
      }
    }
    Plan plan(text);
    EXPECT_LE(plan.diag.numErrors(), 21u) << text;
    // Overrides of any shape are just as safe.
    plan.set(text.substr(0, pick(text.size() + 1)));
    plan.set("model.layers=" + text.substr(0, pick(40)));
  }
}

//===----------------------------------------------------------------------===//
// --set overrides
//===----------------------------------------------------------------------===//

TEST(ParserOverride, ReplacesAnExistingKeyInPlace) {
  Plan plan("parallel {\n  sharding = no_shard\n  wrap = whole_model\n}");
  ASSERT_TRUE(plan.set("parallel.sharding=full_shard"));
  EXPECT_EQ(plan.diags, Diags{});
  const Block &parallel = *plan.root.find("parallel")->value.block;
  ASSERT_EQ(parallel.items.size(), 2u);
  const Item &sharding = parallel.items[0];
  EXPECT_EQ(sharding.key, "sharding");
  EXPECT_EQ(sharding.value.text, "full_shard");
  EXPECT_EQ(plan.at(sharding.keyLoc()), "test.plan:2:3");
  EXPECT_EQ(plan.at(sharding.value.loc()), "<--set>:1:19");
}

TEST(ParserOverride, AddsANewKey) {
  Plan plan("parallel {\n  sharding = no_shard\n}");
  ASSERT_TRUE(plan.set("parallel.backward_prefetch=post"));
  const Block &parallel = *plan.root.find("parallel")->value.block;
  ASSERT_EQ(parallel.items.size(), 2u);
  EXPECT_EQ(parallel.items[1].key, "backward_prefetch");
  EXPECT_EQ(parallel.items[1].value.text, "post");
  EXPECT_EQ(plan.at(parallel.items[1].keyLoc()), "<--set>:1:10");
}

TEST(ParserOverride, AddsIntoAPreset) {
  Plan plan("model = llama3_8b\ntrain { seq_len = 8 }");
  ASSERT_TRUE(plan.set("model.layers=2"));
  const Value &model = plan.root.find("model")->value;
  EXPECT_EQ(model.kind, ValueKind::Identifier);
  EXPECT_EQ(model.text, "llama3_8b");
  ASSERT_NE(model.block, nullptr);
  ASSERT_EQ(model.block->items.size(), 1u);
  EXPECT_EQ(model.block->items[0].key, "layers");
  EXPECT_EQ(*model.block->items[0].value.integer, 2);
  EXPECT_EQ(model.spelling(), "llama3_8b { ... }");
  // A second override goes into the block the first one made.
  ASSERT_TRUE(plan.set("model.hidden=64"));
  EXPECT_EQ(model.block->items.size(), 2u);
  ASSERT_TRUE(plan.set("model.layers=4"));
  EXPECT_EQ(*model.block->items[0].value.integer, 4);
  EXPECT_EQ(plan.diags, Diags{});
}

TEST(ParserOverride, IntoAnIdentifierWithABlock) {
  Plan plan("cluster {\n  gpu = h100_sxm { memory = 64GiB }\n}");
  ASSERT_TRUE(plan.set("cluster.gpu.memory=80GiB"));
  ASSERT_TRUE(plan.set("cluster.gpu.bf16_tflops=900"));
  const Value &gpu = plan.root.find("cluster")->value.block->find("gpu")->value;
  ASSERT_EQ(gpu.block->items.size(), 2u);
  EXPECT_EQ(gpu.block->items[0].value.number, 80);
  EXPECT_EQ(gpu.block->items[0].value.unit, "GiB");
}

TEST(ParserOverride, ReplacesADottedItem) {
  Plan plan("parallel {\n  offload.params = cpu\n}");
  ASSERT_TRUE(plan.set("parallel.offload.params=device"));
  const Block &parallel = *plan.root.find("parallel")->value.block;
  ASSERT_EQ(parallel.items.size(), 1u);
  EXPECT_EQ(parallel.items[0].key, "offload.params");
  EXPECT_EQ(parallel.items[0].value.text, "device");
  // A sibling follows the file's dotted style.
  ASSERT_TRUE(plan.set("parallel.offload.grads=cpu"));
  ASSERT_EQ(parallel.items.size(), 2u);
  EXPECT_EQ(parallel.items[1].key, "offload.grads");
  EXPECT_EQ(plan.diags, Diags{});
}

TEST(ParserOverride, DescendsThroughADottedSection) {
  Plan plan("parallel.offload { params = cpu }");
  ASSERT_TRUE(plan.set("parallel.offload.grads=cpu"));
  const Block &offload = *plan.root.items[0].value.block;
  ASSERT_EQ(offload.items.size(), 2u);
  EXPECT_EQ(offload.items[1].key, "grads");
}

TEST(ParserOverride, IntoAnExistingNestedSection) {
  Plan plan("parallel {\n  offload { params = cpu }\n}");
  ASSERT_TRUE(plan.set("parallel.offload.optimizer=cpu"));
  const Block &offload =
      *plan.root.find("parallel")->value.block->find("offload")->value.block;
  ASSERT_EQ(offload.items.size(), 2u);
  EXPECT_EQ(offload.items[1].key, "optimizer");
}

TEST(ParserOverride, AddsAMissingSection) {
  Plan plan("model = gpt2\n");
  ASSERT_TRUE(plan.set("parallel.sharding=shard_grad_op"));
  ASSERT_TRUE(plan.set("parallel.offload.params=cpu"));
  ASSERT_TRUE(plan.set("name=\"run 1\""));
  ASSERT_EQ(plan.root.items.size(), 3u);
  const Item &parallel = plan.root.items[1];
  EXPECT_EQ(parallel.key, "parallel");
  ASSERT_EQ(parallel.value.kind, ValueKind::Block);
  ASSERT_EQ(parallel.value.block->items.size(), 2u);
  EXPECT_EQ(parallel.value.block->items[0].key, "sharding");
  EXPECT_EQ(parallel.value.block->items[0].value.text, "shard_grad_op");
  const Item &offload = parallel.value.block->items[1];
  EXPECT_EQ(offload.key, "offload");
  ASSERT_EQ(offload.value.kind, ValueKind::Block);
  EXPECT_EQ(offload.value.block->items[0].key, "params");
  EXPECT_EQ(plan.at(offload.value.block->lbrace), "<--set #2>:1:10");
  EXPECT_EQ(plan.root.items[2].value.text, "run 1");
}

TEST(ParserOverride, StructuredValues) {
  Plan plan("train {\n  optimizer = sgd(lr = 1)\n}");
  ASSERT_TRUE(plan.set("train.optimizer=adamw(lr = 1e-5, betas = (0.9, "
                       "0.95))"));
  ASSERT_TRUE(plan.set(" model = llama { layers = 2 } "));
  ASSERT_TRUE(plan.set("parallel.offload={ params = cpu }"));
  const Value &optimizer =
      plan.root.find("train")->value.block->find("optimizer")->value;
  EXPECT_EQ(optimizer.spelling(), "adamw(lr = 1e-5, betas = (0.9, 0.95))");
  EXPECT_EQ(plan.root.find("model")->value.block->items[0].key, "layers");
  EXPECT_EQ(plan.diags, Diags{});
}

TEST(ParserOverride, ReplacesAWholeSection) {
  Plan plan("parallel {\n  sharding = no_shard\n}");
  ASSERT_TRUE(plan.set("parallel=full_shard"));
  EXPECT_EQ(plan.root.items[0].value.kind, ValueKind::Identifier);
}

TEST(ParserOverride, PathThroughAValueThatIsNotABlock) {
  Plan plan("train {\n  optimizer = adamw(lr = 1)\n  seq_len = 8\n}");
  EXPECT_FALSE(plan.set("train.optimizer.lr=2"));
  EXPECT_FALSE(plan.set("train.seq_len.x.y=2"));
  EXPECT_EQ(plan.diags,
            (Diags{"<--set>:1:17: error: cannot set 'train.optimizer.lr': "
                   "'train.optimizer' is a call, not a block; set "
                   "'train.optimizer' as a whole",
                   "test.plan:2:3: note: 'train.optimizer' is set here",
                   "<--set #2>:1:15: error: cannot set 'train.seq_len.x.y': "
                   "'train.seq_len' is a number, not a block; set "
                   "'train.seq_len' as a whole",
                   "test.plan:3:3: note: 'train.seq_len' is set here"}));
}

TEST(ParserOverride, SyntaxErrors) {
  std::vector<ErrorCase> cases = {
      {"model.layers",
       {"<--set>:1:13: error: expected '=' after 'model.layers' in --set; "
        "write --set path=value, e.g. --set train.micro_batch=2"}},
      {"model.layers 2",
       {"<--set>:1:14: error: expected '=' after 'model.layers' in --set; "
        "write --set path=value, e.g. --set train.micro_batch=2"}},
      {"=3",
       {"<--set>:1:1: error: missing path before '=' in --set; write --set "
        "path=value, e.g. --set train.micro_batch=2"}},
      {"",
       {"<--set>:1:1: error: empty --set; write --set path=value, e.g. --set "
        "train.micro_batch=2"}},
      {"\"a\"=1",
       {"<--set>:1:1: error: expected a key path at the start of --set, got "
        "'\"a\"'; write --set path=value, e.g. --set train.micro_batch=2"}},
      {"a..b=1", {"<--set>:1:3: error: expected a name after '.' in key 'a.'"}},
      {"train.micro_batch=",
       {"<--set>:1:19: error: expected a value after '='"}},
      {"train.micro_batch=8__2",
       {"<--set>:1:19: error: malformed number '8__2'"}},
      {"train.micro_batch=2 4",
       {"<--set>:1:21: error: unexpected '4' after the value of "
        "'train.micro_batch'"}},
      {"cluster.host_memory=128 GiB",
       {"<--set>:1:25: error: write the unit right after the number, without "
        "a space: '128GiB'"}},
      {"train.optimizer=adamw(lr = 1",
       {"<--set>:1:29: error: expected ')' to close the call opened here",
        "<--set>:1:22: note: call to 'adamw' opened here"}},
      {"name=\"a\\qb\"",
       {"<--set>:1:8: error: unknown escape '\\q' in string; use \\\", \\\\, "
        "\\n or \\t"}},
      {"x=@", {"<--set>:1:3: error: unexpected character '@'"}},
  };
  for (const ErrorCase &c : cases) {
    SCOPED_TRACE(c.text);
    Plan plan("model = llama3_8b\n");
    EXPECT_FALSE(plan.set(c.text));
    EXPECT_EQ(plan.diags, c.diags);
    // A failed override leaves the tree alone.
    ASSERT_EQ(plan.root.items.size(), 1u);
    EXPECT_EQ(plan.root.items[0].value.block, nullptr);
  }
}

TEST(ParserOverride, PrintedWithTheSettingAndACaret) {
  mlir::MLIRContext context(mlir::MLIRContext::Threading::DISABLED);
  llvm::SourceMgr sourceMgr;
  unsigned id = sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy("model = gpt2\n", "test.plan"),
      llvm::SMLoc());
  std::string printed;
  llvm::raw_string_ostream os(printed);
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context, os);
  DiagEmitter diag(&context, &sourceMgr, mlir::UnknownLoc::get(&context));
  Block root = parsePlanSyntax(sourceMgr, id, diag);
  EXPECT_FALSE(applyOverride(root, "train.micro_batch=8__2", sourceMgr, diag));
  EXPECT_EQ(printed, "<--set>:1:19: error: malformed number '8__2'\n"
                     "train.micro_batch=8__2\n"
                     "                  ^\n");

  // Later settings get their own buffer names, so each caret sits under
  // its own text.
  printed.clear();
  EXPECT_TRUE(applyOverride(root, "a=1", sourceMgr, diag));
  EXPECT_FALSE(applyOverride(root, "b=@", sourceMgr, diag));
  EXPECT_EQ(printed, "<--set #3>:1:3: error: unexpected character '@'\n"
                     "b=@\n"
                     "  ^\n");
}

//===----------------------------------------------------------------------===//
// Syntax tree utilities and diagnostics plumbing
//===----------------------------------------------------------------------===//

TEST(SyntaxTree, CloneIsDeep) {
  Plan plan("model = llama { layers = 2 }\n"
            "train { optimizer = adamw(lr = 1e-4, betas = (0.9, 0.95)) }");
  ASSERT_EQ(plan.diags, Diags{});
  Block copy = cloneBlock(plan.root);
  ASSERT_EQ(copy.items.size(), 2u);
  EXPECT_EQ(copy.items[0].value.spelling(), "llama { ... }");
  EXPECT_NE(copy.items[0].value.block.get(),
            plan.root.items[0].value.block.get());
  copy.items[0].value.block->items[0].value.integer = 7;
  EXPECT_EQ(*plan.root.items[0].value.block->items[0].value.integer, 2);

  const Value &optimizer = copy.items[1].value.block->find("optimizer")->value;
  EXPECT_EQ(optimizer.spelling(), "adamw(lr = 1e-4, betas = (0.9, 0.95))");
  EXPECT_EQ(plan.at(optimizer.range.Start), "test.plan:2:21");
  Value single = cloneValue(optimizer);
  EXPECT_NE(single.elements[1].value.get(), optimizer.elements[1].value.get());
  EXPECT_EQ(single.elements[1].name, "betas");
  EXPECT_EQ(plan.at(single.elements[1].nameLoc), "test.plan:2:38");
}

TEST(SyntaxTree, SpellingOfValuesBuiltInCode) {
  Value integer;
  integer.kind = ValueKind::Number;
  integer.isInteger = true;
  integer.integer = 8192;
  integer.number = 8192;
  EXPECT_EQ(integer.spelling(), "8192");
  Value real;
  real.kind = ValueKind::Number;
  real.number = 0.95;
  real.unit = "GB";
  EXPECT_EQ(real.spelling(), "0.95GB");
  EXPECT_EQ(real.kindName(), "a number");
  Value text;
  text.kind = ValueKind::String;
  text.text = "a\"b\n";
  EXPECT_EQ(text.spelling(), "\"a\\\"b\\n\"");
  EXPECT_EQ(text.kindName(), "a string");
}

TEST(Diagnostics, ClosestMatch) {
  std::vector<StringRef> shardings = {"no_shard", "zero1", "shard_grad_op",
                                      "full_shard", "hybrid_shard"};
  EXPECT_EQ(closestMatch("fulll_shard", shardings), "full_shard");
  EXPECT_EQ(closestMatch("FULL_SHARD", shardings), "full_shard");
  EXPECT_EQ(closestMatch("shardgradop", shardings), "shard_grad_op");
  EXPECT_EQ(closestMatch("zero", shardings), "zero1");
  EXPECT_EQ(closestMatch("pipeline", shardings), "");
  EXPECT_EQ(closestMatch("", shardings), "");
  EXPECT_EQ(closestMatch("x", {"b", "y"}), "");
  EXPECT_EQ(closestMatch("layer", {"layers", "heads"}), "layers");
  EXPECT_EQ(closestMatch("hiden", {"hidden", "heads"}), "hidden");
  EXPECT_EQ(closestMatch("gpu", {"cpu", "gpus"}), "cpu"); // tie: first wins
  EXPECT_EQ(closestMatch("gpu", {"gpus", "cpu"}), "gpus");
  EXPECT_EQ(closestMatch("pre", {"post", "none"}), "");
  EXPECT_EQ(closestMatch("optimiser", {"optimizer"}), "optimizer");
}

TEST(Diagnostics, LocationsAndCounts) {
  mlir::MLIRContext context(mlir::MLIRContext::Threading::DISABLED);
  std::vector<std::string> seen;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
    seen.push_back(describeLocation(d.getLocation()) + " " + d.str());
    return mlir::success();
  });
  mlir::Location fallback =
      mlir::FileLineColLoc::get(&context, "builder.cpp", 7, 1);
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy("a = 1\nbb = 2\n", "f.plan"),
      llvm::SMLoc());
  const char *text = sourceMgr.getMemoryBuffer(1)->getBufferStart();

  DiagEmitter diag(&context, &sourceMgr, fallback);
  diag.warning(llvm::SMLoc::getFromPointer(text + 8), "careful");
  EXPECT_FALSE(diag.hadError());
  diag.error(llvm::SMLoc::getFromPointer(text + 6), "bad");
  diag.error(llvm::SMLoc(), "no location");
  static const char elsewhere[] = "not in any buffer";
  diag.error(llvm::SMLoc::getFromPointer(elsewhere), "foreign pointer");
  EXPECT_EQ(diag.numErrors(), 3u);
  EXPECT_TRUE(diag.hadError());

  DiagEmitter noSource(&context, nullptr, fallback);
  noSource.error(llvm::SMLoc::getFromPointer(text), "built in code");

  EXPECT_EQ(seen,
            (std::vector<std::string>{"f.plan:2:3 careful", "f.plan:2:1 bad",
                                      "builder.cpp:7:1 no location",
                                      "builder.cpp:7:1 foreign pointer",
                                      "builder.cpp:7:1 built in code"}));
  EXPECT_EQ(diag.getContext(), &context);
}

} // namespace
