//===- ConfigDocumentTest.cpp - Located YAML and JSON trees ---------------===//
//
// Every key and value of a config knows where it is written, in both
// formats, so that planc import and hf() point at the text; scalars are
// typed as the writing tool (PyYAML, json) types them; damaged and hostile
// inputs end in one error, never a crash.
//
//===----------------------------------------------------------------------===//

#include "frontend/ConfigDocument.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

#include <gtest/gtest.h>

#include <random>

using namespace plan;

namespace {

struct Parsed {
  mlir::MLIRContext context{mlir::MLIRContext::Threading::DISABLED};
  llvm::SourceMgr sourceMgr;
  std::vector<std::string> errors;
  std::optional<ConfigNode> root;
  const char *start = nullptr;

  Parsed(const std::string &text, ConfigFormat format) {
    context.getDiagEngine().registerHandler([this](mlir::Diagnostic &d) {
      if (d.getSeverity() == mlir::DiagnosticSeverity::Error)
        errors.push_back(d.str());
      return mlir::success();
    });
    DiagEmitter diag(&context, &sourceMgr, mlir::UnknownLoc::get(&context));
    unsigned id = sourceMgr.AddNewSourceBuffer(
        llvm::MemoryBuffer::getMemBufferCopy(text, "config"), llvm::SMLoc());
    start = sourceMgr.getMemoryBuffer(id)->getBufferStart();
    root = parseConfigDocument(sourceMgr, id, diag, format);
  }
  /// The offset of a location in the text.
  long at(llvm::SMLoc loc) const { return loc.getPointer() - start; }
};

TEST(ConfigDocument, JsonLocatesEveryKeyAndValue) {
  std::string text = "{\n"
                     "  \"a\": 12,\n"
                     "  \"b\" :[true, null,-2.5e3 ],\n"
                     "  \"c\": {\"d\": \"x,y\"},\n"
                     "  \"e\": 5e8\n"
                     "}\n";
  Parsed p(text, ConfigFormat::Json);
  ASSERT_TRUE(p.root) << (p.errors.empty() ? "" : p.errors.front());
  const ConfigNode &root = *p.root;
  ASSERT_EQ(root.members.size(), 4u);
  auto offset = [&](const char *needle) { return long(text.find(needle)); };
  EXPECT_EQ(p.at(root.members[0].keyLoc), offset("\"a\""));
  EXPECT_EQ(p.at(root.members[0].value.loc), offset("12"));
  EXPECT_EQ(root.members[0].value.integer, 12);
  EXPECT_EQ(p.at(root.members[1].keyLoc), offset("\"b\""));
  const ConfigNode &list = root.members[1].value;
  EXPECT_EQ(p.at(list.loc), offset("[true"));
  ASSERT_EQ(list.elements.size(), 3u);
  EXPECT_EQ(p.at(list.elements[0].loc), offset("true"));
  EXPECT_EQ(list.elements[0].kind, ConfigNode::Kind::Bool);
  EXPECT_EQ(p.at(list.elements[1].loc), offset("null"));
  EXPECT_TRUE(list.elements[1].isNull());
  EXPECT_EQ(p.at(list.elements[2].loc), offset("-2.5e3"));
  EXPECT_EQ(list.elements[2].number, -2500);
  EXPECT_EQ(list.elements[2].text, "-2.5e3");
  const ConfigNode &inner = root.members[2].value;
  EXPECT_EQ(p.at(inner.loc), offset("{\"d\""));
  EXPECT_EQ(p.at(inner.members[0].keyLoc), offset("\"d\""));
  EXPECT_EQ(p.at(inner.members[0].value.loc), offset("\"x,y\""));
  EXPECT_EQ(inner.members[0].value.text, "x,y");
  // A key after a nested map and a whole-valued real: an integer too.
  EXPECT_EQ(p.at(root.members[3].keyLoc), offset("\"e\""));
  EXPECT_EQ(root.members[3].value.integer, 500000000);
}

TEST(ConfigDocument, YamlTypesScalarsAsPyYamlDoes) {
  std::string text = "a: no\n"
                     "b: 'no'\n"
                     "c: ~\n"
                     "d:\n"
                     "e: 1_000\n"
                     "f: FULL_SHARD\n"
                     "g: 0.5\n"
                     "h:\n"
                     "  - on\n"
                     "  - \"2\"\n";
  Parsed p(text, ConfigFormat::Yaml);
  ASSERT_TRUE(p.root);
  const ConfigNode &root = *p.root;
  EXPECT_EQ(root.find("a")->kind, ConfigNode::Kind::Bool);
  EXPECT_FALSE(root.find("a")->boolean);
  EXPECT_EQ(root.find("b")->kind, ConfigNode::Kind::String);
  EXPECT_TRUE(root.find("c")->isNull());
  EXPECT_TRUE(root.find("d")->isNull());
  EXPECT_EQ(root.find("e")->integer, 1000);
  EXPECT_EQ(root.find("f")->kind, ConfigNode::Kind::String);
  EXPECT_EQ(root.find("g")->number, 0.5);
  const ConfigNode &h = *root.find("h");
  ASSERT_EQ(h.elements.size(), 2u);
  EXPECT_TRUE(h.elements[0].boolean);
  EXPECT_EQ(h.elements[1].kind, ConfigNode::Kind::String);
  EXPECT_EQ(p.at(root.members[5].keyLoc), long(text.find("f:")));
  EXPECT_EQ(p.at(root.find("f")->loc), long(text.find("FULL_SHARD")));
}

TEST(ConfigDocument, RefusesWhatIsNotAConfig) {
  EXPECT_FALSE(Parsed("[1, 2]", ConfigFormat::Json).root);
  EXPECT_FALSE(Parsed("- a\n- b\n", ConfigFormat::Yaml).root);
  EXPECT_FALSE(Parsed("{\"a\": 1, \"a\": 2}", ConfigFormat::Json).root);
  EXPECT_FALSE(Parsed("a: 1\na: 2\n", ConfigFormat::Yaml).root);
  EXPECT_FALSE(Parsed("", ConfigFormat::Json).root);
  // Deep nesting: an error, not a stack overflow while building or freeing.
  std::string deep = "{\"a\": " + std::string(100000, '[') + "]}";
  Parsed json(deep, ConfigFormat::Json);
  EXPECT_FALSE(json.root);
  ASSERT_FALSE(json.errors.empty());
  EXPECT_NE(json.errors.front().find("nested deeper than 64"),
            std::string::npos);
  EXPECT_FALSE(
      Parsed("a: " + std::string(100000, '['), ConfigFormat::Yaml).root);
  // Aliases that would expand into 10^9 values.
  std::string laughs = "a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n";
  for (char c = 'b'; c <= 'j'; ++c)
    laughs += std::string(1, c) + ": &" + c + " [*" + char(c - 1) + ", *" +
              char(c - 1) + ", *" + char(c - 1) + ", *" + char(c - 1) + ", *" +
              char(c - 1) + ", *" + char(c - 1) + ", *" + char(c - 1) + ", *" +
              char(c - 1) + ", *" + char(c - 1) + ", *" + char(c - 1) + "]\n";
  EXPECT_FALSE(Parsed(laughs, ConfigFormat::Yaml).root);
}

// PyYAML (which Accelerate reads with) applies merge keys and refuses a
// second document; yaml-cpp does neither by itself.
TEST(ConfigDocument, YamlMergesKeysAndRefusesASecondDocument) {
  std::string text = "base: &base {a: 1, b: 2}\n"
                     "more: &more {c: 3, a: 9}\n"
                     "x:\n"
                     "  b: 5\n"
                     "  <<: [*base, *more]\n";
  Parsed p(text, ConfigFormat::Yaml);
  ASSERT_TRUE(p.root) << (p.errors.empty() ? "" : p.errors.front());
  const ConfigNode &x = *p.root->find("x");
  ASSERT_EQ(x.members.size(), 3u);
  EXPECT_FALSE(x.find("<<"));
  // The map's own key wins, then the earlier of the merged maps.
  EXPECT_EQ(x.find("b")->integer, 5);
  EXPECT_EQ(x.find("a")->integer, 1);
  EXPECT_EQ(x.find("c")->integer, 3);
  // A merged value is located where it is written, in the anchored map.
  EXPECT_EQ(p.at(x.find("a")->loc), long(text.find("1,")));
  // A quoted "<<" is an ordinary key.
  Parsed quoted("'<<': 1\n", ConfigFormat::Yaml);
  ASSERT_TRUE(quoted.root);
  EXPECT_EQ(quoted.root->find("<<")->integer, 1);
  EXPECT_FALSE(Parsed("x:\n  <<: 3\n", ConfigFormat::Yaml).root);
  EXPECT_FALSE(
      Parsed("a: &a {b: 1}\nx:\n  <<: [*a, [1]]\n", ConfigFormat::Yaml).root);

  std::string two = "a: 1\n---\nb: 2\n";
  Parsed second(two, ConfigFormat::Yaml);
  EXPECT_FALSE(second.root);
  ASSERT_EQ(second.errors.size(), 1u);
  EXPECT_NE(second.errors.front().find("a second YAML document"),
            std::string::npos);
  EXPECT_TRUE(Parsed("---\na: 1\n", ConfigFormat::Yaml).root);
  EXPECT_FALSE(Parsed("a: 1\n---\n", ConfigFormat::Yaml).root);
}

TEST(ConfigDocument, IntegersOutsideTheirRangeAreErrorsAtTheValue) {
  Parsed p("{\"n\": 0, \"m\": -9223372036854775808, \"k\": 7}",
           ConfigFormat::Json);
  ASSERT_TRUE(p.root);
  mlir::MLIRContext context{mlir::MLIRContext::Threading::DISABLED};
  std::vector<std::string> errors;
  context.getDiagEngine().registerHandler([&](mlir::Diagnostic &d) {
    errors.push_back(d.str());
    return mlir::success();
  });
  DiagEmitter diag(&context, &p.sourceMgr, mlir::UnknownLoc::get(&context));
  EXPECT_FALSE(readConfigInteger(*p.root->find("n"), "n", diag, 1));
  EXPECT_FALSE(readConfigInteger(*p.root->find("m"), "m", diag, 1));
  EXPECT_FALSE(readConfigInteger(*p.root->find("k"), "k", diag, 1, 6));
  EXPECT_EQ(readConfigInteger(*p.root->find("k"), "k", diag, 1, 7), 7);
  EXPECT_EQ(readConfigInteger(*p.root->find("m"), "m", diag),
            std::numeric_limits<int64_t>::min());
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_EQ(errors[0], "'n' must be >= 1, got 0");
  EXPECT_EQ(errors[1], "'m' must be >= 1, got -9223372036854775808");
  EXPECT_EQ(errors[2], "'k' must be <= 6, got 7");
}

// Every prefix of a real config, and random byte flips in it, parse or end
// in an error; none crashes, and an error is reported whenever there is no
// document.
TEST(ConfigDocument, DamagedInputsEndInAnError) {
  std::string json = "{\"zero_optimization\": {\"stage\": 3, "
                     "\"offload_param\": {\"device\": \"cpu\"}}, "
                     "\"bf16\": {\"enabled\": \"auto\"}, "
                     "\"train_batch_size\": 64}";
  std::string yaml = "distributed_type: FSDP\nfsdp_config:\n"
                     "  fsdp_sharding_strategy: FULL_SHARD\n"
                     "  fsdp_offload_params: false\nnum_processes: 8\n";
  std::mt19937 random(7);
  for (auto [text, format] : {std::pair(json, ConfigFormat::Json),
                              std::pair(yaml, ConfigFormat::Yaml)}) {
    for (size_t n = 0; n < text.size(); ++n) {
      Parsed p(text.substr(0, n), format);
      EXPECT_EQ(!p.root, !p.errors.empty()) << text.substr(0, n);
    }
    for (int i = 0; i < 500; ++i) {
      std::string damaged = text;
      damaged[random() % damaged.size()] = "{}[]:,\"'\n -&*#0a"[random() % 17];
      Parsed p(damaged, format);
      EXPECT_EQ(!p.root, !p.errors.empty()) << damaged;
    }
  }
}

} // namespace
