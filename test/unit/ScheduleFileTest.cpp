//===- ScheduleFileTest.cpp - The schedule file: writer, reader, checks ---===//
//
// Real schedules come from the compiler (tiny_llama_cpu.plan through the
// lowering pipeline and the exporter), so the reader is tested on what planc
// writes. Damaged files are made from those bytes; inconsistent but
// well-formed ones by editing the JSON body or the Schedule and wrapping the
// result in a header whose CRC this test computes itself (bitwise, not with
// zlib), which also checks that the file's checksum is the documented one.
//
//===----------------------------------------------------------------------===//

#include "ScheduleFile.h"
#include "ScheduleJson.h"
#include "analysis/TimeModel.h"
#include "dialects/sched/SchedDialect.h"
#include "dialects/sched/SchedOpTable.h"
#include "export/ExportSchedule.h"
#include "frontend/Frontend.h"
#include "passes/Passes.h"
#include "report/Report.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <variant>

using namespace plan::rt;
// plan::rt::Json (ScheduleJson.h): nlohmann::ordered_json.

namespace {

constexpr size_t kHeader = 32;

uint32_t referenceCrc32(std::string_view data) {
  uint32_t crc = 0xffffffffu;
  for (unsigned char c : data) {
    crc ^= c;
    for (int k = 0; k < 8; ++k)
      crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

uint64_t readLE(std::string_view bytes, size_t at, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i)
    v |= uint64_t(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  return v;
}

void writeLE(std::string &bytes, size_t at, uint64_t v, int n) {
  for (int i = 0; i < n; ++i)
    bytes[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

/// A file around `body`, built from the specification, not the writer.
std::string wrap(std::string_view body,
                 uint32_t version = kScheduleFormatVersion) {
  std::string out(kHeader, '\0');
  std::memcpy(out.data(), "PLANSCHD", 8);
  writeLE(out, 8, version, 4);
  writeLE(out, 16, body.size(), 8);
  writeLE(out, 24, referenceCrc32(body), 4);
  out += body;
  return out;
}

Json bodyOf(const std::string &file) {
  return Json::parse(file.begin() + kHeader, file.end());
}

/// The tiny plan with `overrides` (--set), imported.
mlir::OwningOpRef<mlir::ModuleOp>
importTiny(mlir::MLIRContext &context,
           const std::vector<std::string> &overrides) {
  llvm::SourceMgr sourceMgr;
  std::string path = std::string(PLAN_EXAMPLES_DIR) + "/tiny_llama_cpu.plan";
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    throw std::runtime_error("cannot read " + path);
  unsigned id = sourceMgr.AddNewSourceBuffer(std::move(*buffer), llvm::SMLoc());
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  plan::DiagEmitter diag(&context, &sourceMgr,
                         mlir::FileLineColLoc::get(&context, path, 1, 1));
  std::optional<plan::PlanSpec> spec =
      plan::loadPlan(sourceMgr, id, overrides, "tiny_llama_cpu", diag);
  if (!spec)
    throw std::runtime_error("the plan has errors");
  mlir::OwningOpRef<mlir::ModuleOp> module = plan::importPlan(*spec, diag);
  if (!module)
    throw std::runtime_error("the plan does not import");
  return module;
}

/// The tiny plan with `overrides` (--set), through the lowering pipeline
/// (`roll`: with gradient accumulation's middle micro-batches a repeat;
/// `tasks`: a pipeline stage's micro-batch loop as a sched.tasks, the
/// default, or written out).
mlir::OwningOpRef<mlir::ModuleOp>
lower(mlir::MLIRContext &context, const std::vector<std::string> &overrides,
      bool roll = true, bool tasks = true) {
  mlir::OwningOpRef<mlir::ModuleOp> module = importTiny(context, overrides);
  mlir::PassManager pm(&context);
  plan::buildPlanLowerPipeline(pm, roll, tasks);
  if (mlir::failed(pm.run(*module)))
    throw std::runtime_error("lowering failed");
  return module;
}

std::unique_ptr<mlir::MLIRContext> newContext() {
  mlir::DialectRegistry registry;
  plan::registerPlanDialects(registry);
  return std::make_unique<mlir::MLIRContext>(registry);
}

/// The tiny plan lowered and exported, with `overrides` (--set); `roll` and
/// `tasks` as lower's.
Schedule compile(std::vector<std::string> overrides = {}, bool roll = true,
                 bool tasks = true) {
  std::unique_ptr<mlir::MLIRContext> context = newContext();
  mlir::OwningOpRef<mlir::ModuleOp> module =
      lower(*context, overrides, roll, tasks);
  mlir::FailureOr<Schedule> schedule = plan::exportSchedule(*module);
  if (mlir::failed(schedule))
    throw std::runtime_error("export failed");
  return std::move(*schedule);
}

const Schedule &tiny() {
  static const Schedule schedule = compile();
  return schedule;
}

/// One field of an op, as the generated op table visits it (enumerations
/// as their index): what a lossless writer and reader must preserve.
using FieldValue = std::variant<int64_t, double, bool, std::vector<int64_t>>;
using FieldValues = std::vector<std::pair<std::string, FieldValue>>;

FieldValues fieldValues(const Op &op) {
  FieldValues out;
  std::visit(
      [&](const auto &o) {
        using T = std::decay_t<decltype(o)>;
        T::fields(o, [&](auto descriptor, const auto &value) {
          using V = std::decay_t<decltype(value)>;
          if constexpr (std::is_enum_v<V>)
            out.emplace_back(descriptor.name, int64_t(value));
          else
            out.emplace_back(descriptor.name, FieldValue(value));
        });
      },
      op.body);
  return out;
}

/// "kind(name=value, ...) line N", for failure messages.
std::string describe(const Op &op) {
  std::ostringstream out;
  out.precision(17);
  out << toString(op.kind()) << "(";
  bool first = true;
  for (const auto &[name, value] : fieldValues(op)) {
    out << (first ? "" : ", ") << name << "=";
    first = false;
    std::visit(
        [&](const auto &v) {
          if constexpr (std::is_same_v<std::decay_t<decltype(v)>,
                                       std::vector<int64_t>>) {
            out << "[";
            for (size_t i = 0; i < v.size(); ++i)
              out << (i ? "," : "") << v[i];
            out << "]";
          } else {
            out << v;
          }
        },
        value);
  }
  out << ") line " << op.line;
  return out.str();
}

bool sameOp(const Op &x, const Op &y) {
  return x.kind() == y.kind() && x.line == y.line &&
         fieldValues(x) == fieldValues(y);
}

/// The first op of type T in `s`, and its index.
template <typename T> std::pair<size_t, T *> firstOf(Schedule &s) {
  for (size_t i = 0; i < s.programs.front().ops.size(); ++i)
    if (T *op = s.programs.front().ops[i].as<T>())
      return {i, op};
  throw std::runtime_error(std::string("no ") + toString(T::kind));
}

/// The message parseSchedule gives for `bytes`, "" if it accepts them.
std::string parseError(std::string_view bytes) {
  try {
    parseSchedule(bytes, "t.sched");
  } catch (const ScheduleFileError &e) {
    std::string what = e.what();
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    EXPECT_EQ(what.rfind("t.sched: ", 0), 0u) << what;
    return what;
  }
  return "";
}

std::string validateError(const Schedule &s) {
  try {
    validateSchedule(s, "t.sched");
  } catch (const ScheduleFileError &e) {
    std::string what = e.what();
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    return what;
  }
  return "";
}

#define EXPECT_HAS(text, part)                                                 \
  EXPECT_NE(std::string(text).find(part), std::string::npos)                   \
      << "'" << (text) << "' lacks '" << (part) << "'"

//===----------------------------------------------------------------------===//
// Layout and round trip
//===----------------------------------------------------------------------===//

TEST(ScheduleFile, Crc32IsZlibs) {
  EXPECT_EQ(referenceCrc32("123456789"), 0xcbf43926u);
}

TEST(ScheduleFile, HeaderIsTheDocumentedLayout) {
  std::string file = serializeSchedule(tiny());
  ASSERT_GT(file.size(), kHeader);
  EXPECT_EQ(file.substr(0, 8), "PLANSCHD");
  EXPECT_EQ(readLE(file, 8, 4), kScheduleFormatVersion);
  EXPECT_EQ(readLE(file, 12, 4), 0u);
  EXPECT_EQ(readLE(file, 16, 8), file.size() - kHeader);
  EXPECT_EQ(readLE(file, 24, 4),
            referenceCrc32(std::string_view(file).substr(kHeader)));
  EXPECT_EQ(readLE(file, 28, 4), 0u);
  EXPECT_EQ(file, wrap(std::string_view(file).substr(kHeader)));
}

TEST(ScheduleFile, RoundTripsEveryStrategy) {
  std::vector<std::vector<std::string>> variants = {
      {},
      {"parallel.sharding=no_shard", "train.grad_accum=2"},
      {"parallel.sharding=zero1", "train.grad_clip=1.0"},
      {"parallel.sharding=shard_grad_op", "train.precision=bf16_mixed"},
      {"parallel.sharding=hybrid_shard", "cluster.nodes=2"},
      {"train.precision=fp16_mixed", "parallel.offload.optimizer=cpu",
       "parallel.offload.params=cpu", "train.grad_accum=2",
       "train.grad_clip=1.0"},
      {"train.activation_checkpointing=full"},
      {"model=gpt2_tiny"},
      {"train.optimizer=sgd(lr=0.1,momentum=0.9)"},
  };
  for (const auto &variant : variants) {
    SCOPED_TRACE(variant.empty() ? "default" : variant.front());
    Schedule original = compile(variant);
    std::string file = serializeSchedule(original);
    Schedule parsed = parseSchedule(file, "t.sched").get();
    EXPECT_EQ(serializeSchedule(parsed), file);

    // Field by field where a lossy writer would most likely go wrong.
    EXPECT_EQ(parsed.version, kScheduleFormatVersion);
    EXPECT_EQ(parsed.producer, original.producer);
    EXPECT_EQ(parsed.sharding, original.sharding);
    EXPECT_EQ(parsed.model.family, original.model.family);
    EXPECT_EQ(parsed.train.precision, original.train.precision);
    EXPECT_EQ(parsed.train.optimizer.kind, original.train.optimizer.kind);
    EXPECT_EQ(parsed.replicate, original.replicate);
    EXPECT_EQ(parsed.shard, original.shard);
    EXPECT_EQ(parsed.train.optimizer.lr, original.train.optimizer.lr);
    EXPECT_EQ(parsed.train.optimizer.momentum,
              original.train.optimizer.momentum);
    EXPECT_EQ(parsed.model.normEps, original.model.normEps);
    EXPECT_EQ(parsed.cluster.device.hbmBandwidth,
              original.cluster.device.hbmBandwidth);
    EXPECT_EQ(parsed.programs.front().arenaBytes,
              original.programs.front().arenaBytes);
    EXPECT_EQ(parsed.programs.front().persistentBytes,
              original.programs.front().persistentBytes);
    EXPECT_EQ(parsed.programs.front().workspaceBytes,
              original.programs.front().workspaceBytes);
    EXPECT_GT(parsed.programs.front().workspaceBytes, 0);
    ASSERT_EQ(parsed.units.size(), original.units.size());
    for (size_t u = 0; u < parsed.units.size(); ++u) {
      ASSERT_EQ(parsed.units[u].params.size(), original.units[u].params.size());
      for (size_t p = 0; p < parsed.units[u].params.size(); ++p) {
        EXPECT_EQ(parsed.units[u].params[p].shape,
                  original.units[u].params[p].shape);
        EXPECT_EQ(parsed.units[u].params[p].tiedTo,
                  original.units[u].params[p].tiedTo);
      }
    }
    ASSERT_EQ(parsed.programs.front().buffers.size(),
              original.programs.front().buffers.size());
    for (size_t b = 0; b < parsed.programs.front().buffers.size(); ++b) {
      const Buffer &x = parsed.programs.front().buffers[b],
                   &y = original.programs.front().buffers[b];
      EXPECT_TRUE(x.kind == y.kind && x.type == y.type && x.space == y.space &&
                  x.numel == y.numel && x.name == y.name && x.role == y.role &&
                  x.persistent == y.persistent && x.offset == y.offset &&
                  x.group == y.group && x.sharded == y.sharded &&
                  x.source == y.source && x.viewOffset == y.viewOffset &&
                  x.axis == y.axis)
          << "buffer " << b;
    }
    ASSERT_EQ(parsed.programs.front().ops.size(),
              original.programs.front().ops.size());
    for (size_t i = 0; i < parsed.programs.front().ops.size(); ++i) {
      const Op &x = parsed.programs.front().ops[i],
               &y = original.programs.front().ops[i];
      EXPECT_TRUE(sameOp(x, y))
          << "op " << i << ": " << describe(x) << " vs " << describe(y);
    }
  }
}

TEST(ScheduleFile, ExportsGroupsShardsAndTiedParameters) {
  const Schedule &s = tiny();
  EXPECT_EQ(s.replicate * s.shard, 2);
  ASSERT_EQ(s.groups.size(), 3u);
  EXPECT_EQ(s.groups[0].name, "fsdp.root");
  EXPECT_EQ(s.groups[0].shardNumel * s.shard, s.groups[0].paddedNumel);
  const ops::Alloc *first = s.programs.front().ops[0].as<ops::Alloc>();
  ASSERT_NE(first, nullptr) << describe(s.programs.front().ops[0]);
  const Buffer &param = s.programs.front().buffers[first->buffer];
  EXPECT_EQ(param.name, "fsdp.root.param");
  EXPECT_EQ(param.group, "fsdp.root");
  EXPECT_TRUE(param.sharded);

  // no_shard keeps full state: sharded is false.
  Schedule ddp = compile({"parallel.sharding=no_shard"});
  int64_t groupState = 0;
  for (const Buffer &b : ddp.programs.front().buffers) {
    if (b.group.empty())
      continue;
    ++groupState;
    EXPECT_FALSE(b.sharded) << b.name;
  }
  EXPECT_GT(groupState, 0);

  // GPT-2 ties lm_head to wte: no storage in the head, the embedding's offset.
  Schedule gpt2 = compile({"model=gpt2_tiny"});
  const Unit &head = gpt2.units.back();
  const Param &tied = head.params.back();
  EXPECT_EQ(tied.name, "lm_head.weight");
  EXPECT_EQ(tied.tiedTo, "transformer.wte.weight");
  EXPECT_EQ(tied.offset, gpt2.units.front().params.front().offset);
  int64_t stored = 0;
  for (const Param &p : head.params)
    if (p.tiedTo.empty())
      stored += p.shape.size() == 1 ? p.shape[0] : p.shape[0] * p.shape[1];
  EXPECT_EQ(head.numel, stored);
}

/// Every value of E has a distinct keyword that parses back to it; `last` is
/// E's last enumerator, so a keyword table shorter than the enumeration fails.
template <typename E> void expectKeywordsRoundTrip(E last) {
  SCOPED_TRACE(typeid(E).name());
  const auto &keywords = EnumKeywords<E>::keywords;
  EXPECT_EQ(keywords.size(), size_t(last) + 1);
  std::set<std::string> seen;
  for (size_t i = 0; i < keywords.size(); ++i) {
    E value = static_cast<E>(i);
    EXPECT_STREQ(toString(value), keywords[i]);
    EXPECT_TRUE(parseKeyword<E>(toString(value)) == value) << keywords[i];
    EXPECT_TRUE(seen.insert(keywords[i]).second) << "twice: " << keywords[i];
  }
  EXPECT_FALSE(parseKeyword<E>(""));
  EXPECT_FALSE(parseKeyword<E>(std::string(keywords[0]) + "x"));
}

TEST(ScheduleFile, EnumKeywordsRoundTrip) {
  expectKeywordsRoundTrip(OpKind::UpdateLossScale);
  expectKeywordsRoundTrip(BufferRole::Exchange);
  expectKeywordsRoundTrip(Space::PinnedHost);
  expectKeywordsRoundTrip(ElementType::I8);
  expectKeywordsRoundTrip(BaseStorage::F32);
  expectKeywordsRoundTrip(GroupAxis::Embedding);
  expectKeywordsRoundTrip(Peer::Prev);
  expectKeywordsRoundTrip(ReduceKind::Max);
  expectKeywordsRoundTrip(Buffer::Kind::Slot);
  expectKeywordsRoundTrip(ModelFamily::Bert);
  expectKeywordsRoundTrip(BertHead::SequenceClassification);
  expectKeywordsRoundTrip(UnitKind::BertHead);
  expectKeywordsRoundTrip(OptimizerKind::SGD);
  expectKeywordsRoundTrip(Precision::FP16Mixed);
  expectKeywordsRoundTrip(DType::F16);
  expectKeywordsRoundTrip(LossScaleKind::Static);
  expectKeywordsRoundTrip(Checkpointing::Full);
  expectKeywordsRoundTrip(LRScheduleKind::Linear);
  expectKeywordsRoundTrip(Sharding::HybridShard);
  EXPECT_FALSE(parseKeyword<Space>("gpu"));
  EXPECT_FALSE(parseKeyword<OpKind>(""));
  EXPECT_FALSE(parseKeyword<OpKind>("Alloc")); // keywords are exact
  // An op's OpKind is the index of its struct in OpBody.
  EXPECT_EQ(std::variant_size_v<OpBody>, EnumKeywords<OpKind>::keywords.size());
  auto expectKindAt = []<size_t I>(std::integral_constant<size_t, I>) {
    using T = std::variant_alternative_t<I, OpBody>;
    EXPECT_EQ(T::kind, OpKind(I));
    EXPECT_EQ(Op{T{}}.kind(), OpKind(I));
  };
  [&]<size_t... I>(std::index_sequence<I...>) {
    (expectKindAt(std::integral_constant<size_t, I>()), ...);
  }
  (std::make_index_sequence<std::variant_size_v<OpBody>>());
}

/// One op of every kind, every field away from its default (ids need not
/// make a valid schedule: opToJson/opFromJson check no relations).
std::vector<Op> handMadeOps() {
  return {
      Op{ops::Alloc{.buffer = 3}, 11},
      Op{ops::Free{.buffer = 4}, 12},
      Op{ops::Wait{.event = 5}, 13},
      Op{ops::AllGather{.src = 1,
                        .dst = 2,
                        .group = GroupAxis::Replicate,
                        .after = {0, 3},
                        .done = 4},
         14},
      Op{ops::ReduceScatter{.src = 2,
                            .dst = 1,
                            .group = GroupAxis::World,
                            .reduce = ReduceKind::Avg,
                            .accumulate = true,
                            .after = {1},
                            .done = 2},
         15},
      Op{ops::AllReduce{.buffer = 6,
                        .group = GroupAxis::Replicate,
                        .reduce = ReduceKind::Max,
                        .after = {},
                        .done = 7},
         16},
      Op{ops::Broadcast{.buffer = 6,
                        .group = GroupAxis::World,
                        .root = 3,
                        .after = {2, 5},
                        .done = 8},
         17},
      Op{ops::Copy{.src = 7, .dst = 8, .after = {9}, .done = 10}, 18},
      Op{ops::Send{.buffer = 7,
                   .peer = Peer::Next,
                   .unit = 2,
                   .microBatch = 1,
                   .after = {3},
                   .done = 11},
         18},
      Op{ops::Recv{.buffer = 8,
                   .peer = Peer::Prev,
                   .unit = 1,
                   .microBatch = 0,
                   .after = {},
                   .done = 12},
         18},
      Op{ops::Cast{.src = 8, .dst = 9}, 19},
      Op{ops::Dequantize{.unit = 1, .src = 9, .dst = 8}, 19},
      Op{ops::Zero{.buffer = 10}, 20},
      Op{ops::Accumulate{.src = 11, .dst = 12}, 21},
      Op{ops::Forward{
             .unit = 2, .microBatch = 1, .params = 13, .tied = 14, .saves = 15},
         22},
      Op{ops::Recompute{.unit = 3,
                        .microBatch = 2,
                        .params = 13,
                        .tied = -1,
                        .input = 16,
                        .saves = 17},
         23},
      Op{ops::Loss{
             .unit = 3, .microBatch = 1, .scale = 1.0 / 3, .lossScale = 18},
         24},
      Op{ops::Backward{.unit = 2,
                       .microBatch = 0,
                       .params = 13,
                       .tied = 14,
                       .activations = 15,
                       .grads = 19,
                       .tiedGrads = 20},
         25},
      Op{ops::GradNorm{.grads = 19, .norm = 21}, 26},
      Op{ops::CheckFinite{.buffer = 19, .foundInf = 22}, 27},
      Op{ops::OptimizerStep{.group = 1,
                            .params = 23,
                            .grads = 24,
                            .state = {25, 26},
                            .norm = 21,
                            .foundInf = 22,
                            .lossScale = 18},
         28},
      Op{ops::UpdateLossScale{.lossScale = 18, .foundInf = 22},
         std::numeric_limits<uint32_t>::max()},
  };
}

/// Each op's keys in docs/generated/schedule-ops.md, in order: the rows of
/// the table under "## `kind`".
std::map<std::string, std::vector<std::string>> documentedKeys() {
  std::string path =
      std::string(PLAN_EXAMPLES_DIR) + "/../docs/generated/schedule-ops.md";
  std::ifstream in(path);
  if (!in)
    throw std::runtime_error("cannot read " + path);
  std::map<std::string, std::vector<std::string>> keys;
  std::string line, kind;
  while (std::getline(in, line)) {
    if (line.rfind("## `", 0) == 0) {
      kind = line.substr(4, line.find('`', 4) - 4);
      keys[kind];
    } else if (!kind.empty() && line.rfind("| `", 0) == 0) {
      keys[kind].push_back(line.substr(3, line.find('`', 3) - 3));
    }
  }
  return keys;
}

// Every op kind survives opToJson and opFromJson unchanged (through JSON
// text too), under the keys the generated documentation lists: one
// hand-made op of each kind, and every op of three compiled schedules
// (which have every kind but broadcast; dequantize in the QLoRA one).
TEST(ScheduleFile, EveryOpKindRoundTrips) {
  std::vector<Op> all = handMadeOps();
  std::set<OpKind> kinds;
  for (const Op &op : all)
    kinds.insert(op.kind());
  EXPECT_EQ(kinds.size(), EnumKeywords<OpKind>::keywords.size());
  for (const Schedule &s :
       {tiny(),
        compile({"train.precision=fp16_mixed", "parallel.offload.optimizer=cpu",
                 "train.grad_accum=2", "train.grad_clip=1.0",
                 "train.activation_checkpointing=full"}),
        compile({"model.lora.rank=4", "model.base=nf4"})})
    all.insert(all.end(), s.programs.front().ops.begin(),
               s.programs.front().ops.end());

  std::map<std::string, std::vector<std::string>> documented = documentedKeys();
  EXPECT_EQ(documented.size(), EnumKeywords<OpKind>::keywords.size());
  JsonReader reader("op.json");
  for (size_t i = 0; i < all.size(); ++i) {
    const Op &op = all[i];
    SCOPED_TRACE(describe(op));
    Json json = opToJson(op);
    std::vector<std::string> keys;
    for (auto it = json.begin(); it != json.end(); ++it)
      keys.push_back(it.key());
    std::vector<std::string> expected = {"op"};
    for (const std::string &key : documented[toString(op.kind())])
      expected.push_back(key);
    expected.push_back("line");
    EXPECT_EQ(keys, expected);
    EXPECT_EQ(json["op"], toString(op.kind()));

    JsonPath at = JsonPath().member("ops").element(i);
    Op back = opFromJson(reader, json, at);
    EXPECT_TRUE(sameOp(back, op)) << describe(back);
    Op viaText = opFromJson(reader, Json::parse(json.dump()), at);
    EXPECT_TRUE(sameOp(viaText, op)) << describe(viaText);
    EXPECT_EQ(opToJson(viaText), json);
  }
}

/// The exporter's error for the tiny module after `edit`, "" if it exports.
std::string exportError(const std::function<void(mlir::ModuleOp)> &edit) {
  std::unique_ptr<mlir::MLIRContext> context = newContext();
  mlir::OwningOpRef<mlir::ModuleOp> module = lower(*context, {});
  edit(*module);
  std::string messages;
  mlir::ScopedDiagnosticHandler handler(context.get(),
                                        [&](mlir::Diagnostic &d) {
                                          messages += d.str();
                                          return mlir::success();
                                        });
  if (mlir::succeeded(plan::exportSchedule(*module)))
    return "";
  return messages.empty() ? "(failed without a message)" : messages;
}

sched::ProgramOp programOf(mlir::ModuleOp module) {
  return *module.getOps<sched::ProgramOp>().begin();
}

sched::AllocOp allocNamed(mlir::ModuleOp module, llvm::StringRef name) {
  for (auto alloc : programOf(module).getBody().getOps<sched::AllocOp>())
    if (alloc.getName() == name)
      return alloc;
  throw std::runtime_error("no alloc " + name.str());
}

TEST(ExportSchedule, RefusesWhatTheFormatCannotSay) {
  EXPECT_EQ(exportError([](mlir::ModuleOp) {}), "");
  EXPECT_HAS(exportError([](mlir::ModuleOp m) { programOf(m).erase(); }),
             "no sched.program to export");
  EXPECT_HAS(exportError([](mlir::ModuleOp m) {
               allocNamed(m, "fsdp.root.grad").removeOffsetAttr();
             }),
             "'fsdp.root.grad' has no arena offset: run sched-plan-memory");
  EXPECT_HAS(exportError([](mlir::ModuleOp m) {
               allocNamed(m, "fsdp.root.param").setName("root.param");
             }),
             "persistent param buffer 'root.param' is not named "
             "'<group>.param' after a group of the plan");
  EXPECT_HAS(exportError([](mlir::ModuleOp m) {
               programOf(m)->removeAttr("arena_bytes");
             }),
             "has no arena_bytes: run sched-plan-memory");
  EXPECT_HAS(exportError([](mlir::ModuleOp m) {
               programOf(m)->removeAttr("workspace_bytes");
             }),
             "has no workspace_bytes: run sched-plan-workspace");
  // An op the format has no kind for is an error, never dropped.
  EXPECT_HAS(
      exportError([](mlir::ModuleOp m) {
        mlir::MLIRContext *context = m.getContext();
        context->allowUnregisteredDialects();
        mlir::OpBuilder builder(context);
        builder.setInsertionPointToStart(&programOf(m).getBody().front());
        mlir::OperationState state(builder.getUnknownLoc(), "mystery.op");
        builder.create(state);
      }),
      "the schedule file has no op 'mystery.op'");
}

//===----------------------------------------------------------------------===//
// Damaged files
//===----------------------------------------------------------------------===//

TEST(ScheduleFile, EveryProperPrefixIsTruncated) {
  std::string file = serializeSchedule(tiny());
  for (size_t n = 0; n < file.size(); ++n) {
    std::string error = parseError(std::string_view(file).substr(0, n));
    ASSERT_NE(error.find("truncated"), std::string::npos)
        << n << " bytes: " << error;
  }
  EXPECT_EQ(parseError(file), "");
}

TEST(ScheduleFile, TrailingBytesAreASizeMismatch) {
  std::string file = serializeSchedule(tiny()) + "x";
  EXPECT_HAS(parseError(file), "size mismatch");
}

TEST(ScheduleFile, EveryBodyByteFlipIsACorruption) {
  std::string file = serializeSchedule(tiny());
  for (size_t at = kHeader; at < file.size(); ++at)
    for (unsigned char mask : {0x01, 0x80, 0xff}) {
      std::string bad = file;
      bad[at] = static_cast<char>(bad[at] ^ mask);
      std::string error = parseError(bad);
      ASSERT_NE(error.find("checksum mismatch"), std::string::npos)
          << "byte " << at << ": " << error;
    }
}

TEST(ScheduleFile, EveryHeaderByteFlipIsRejected) {
  std::string file = serializeSchedule(tiny());
  const char *expected[] = {"magic",     "version",  "flags",
                            "truncated", "checksum", "reserved"};
  for (size_t at = 0; at < kHeader; ++at) {
    std::string bad = file;
    bad[at] = static_cast<char>(bad[at] ^ 0x01);
    std::string error = parseError(bad);
    ASSERT_NE(error, "") << "byte " << at;
    // Low bit of the body size: one byte more is "truncated", one less a
    // size mismatch; higher bytes make it far larger than the file.
    const char *field = at < 8    ? expected[0]
                        : at < 12 ? expected[1]
                        : at < 16 ? expected[2]
                        : at < 24 ? (readLE(bad, 16, 8) > file.size() - kHeader
                                         ? expected[3]
                                         : "size mismatch")
                        : at < 28 ? expected[4]
                                  : expected[5];
    EXPECT_HAS(error, field);
  }
}

TEST(ScheduleFile, NewerVersionAsksForANewerReader) {
  std::string file = serializeSchedule(tiny());
  writeLE(file, 8, kScheduleFormatVersion + 1, 4);
  std::string error = parseError(file);
  EXPECT_HAS(error, "t.sched: schedule format version " +
                        std::to_string(kScheduleFormatVersion + 1) +
                        " is newer");
  EXPECT_HAS(error, "rebuild plan-run");
  writeLE(file, 8, 0, 4);
  EXPECT_HAS(parseError(file), "version 0 is not supported");
}

// Older files (version 1: ops with keys such as "axis" and "event"; version
// 2: no optimizer decay scope, so every parameter was decayed; version 3:
// compute ops without `frozen`; version 4: no frozen layout; version 5: no
// frozen storage, no bytes, no dequantize; version 6: compute ops without
// `part` and exchange buffers; version 7: no tensor axis in the mesh;
// version 8: no pipeline axis, one program; version 9: no embedding group;
// version 10: no tasks; version 11: no slots; version 12: no picked slots;
// version 13: no held buffers)
// are refused by their header,
// before their body is read: the plan must be compiled again.
TEST(ScheduleFile, OlderVersionsAskToRecompile) {
  ASSERT_EQ(kScheduleFormatVersion, 14u);
  std::string body(std::string_view(serializeSchedule(tiny())).substr(kHeader));
  std::string error = parseError(wrap(body, 1));
  EXPECT_HAS(error, "t.sched: schedule format version 1 is not supported");
  EXPECT_HAS(error, "this reader reads version 14");
  EXPECT_HAS(error, "recompile the plan with planc");
  EXPECT_HAS(parseError(wrap(body, 2)),
             "schedule format version 2 is not supported");
  EXPECT_HAS(parseError(wrap(body, 3)),
             "schedule format version 3 is not supported");
  EXPECT_HAS(parseError(wrap(body, 4)),
             "schedule format version 4 is not supported");
  EXPECT_HAS(parseError(wrap(body, 5)),
             "schedule format version 5 is not supported");
  EXPECT_HAS(parseError(wrap(body, 6)),
             "schedule format version 6 is not supported");
  EXPECT_HAS(parseError(wrap(body, 7)),
             "schedule format version 7 is not supported");
  EXPECT_HAS(parseError(wrap(body, 8)),
             "schedule format version 8 is not supported");
  EXPECT_HAS(parseError(wrap(body, 9)),
             "schedule format version 9 is not supported");
  EXPECT_HAS(parseError(wrap(body, 10)),
             "schedule format version 10 is not supported");
  EXPECT_HAS(parseError(wrap(body, 11)),
             "schedule format version 11 is not supported");
  EXPECT_HAS(parseError(wrap(body, 12)),
             "schedule format version 12 is not supported");
  EXPECT_HAS(parseError(wrap(body, 13)),
             "schedule format version 13 is not supported");
  // Even with a body that a version 1 reader would have read.
  EXPECT_HAS(parseError(wrap("{}", 1)), "recompile the plan with planc");
  // In memory, a schedule of another version is neither valid nor written.
  Schedule old = tiny();
  old.version = 1;
  EXPECT_HAS(validateError(old), "schedule version 1 is not this reader's 14");
  EXPECT_THROW(serializeSchedule(old), ScheduleFileError);
}

//===----------------------------------------------------------------------===//
// Tasks: a sched.repeat's body written once
//===----------------------------------------------------------------------===//

/// Gradient accumulation past four micro-batches is a sched.repeat, which
/// the file holds as one task and its runs: the reader's expansion is the
/// program lowered without the repeat, id for id and name for name.
TEST(ScheduleTasks, ExpandToTheUnrolledProgram) {
  const std::vector<std::vector<std::string>> plans = {
      {"train.grad_accum=8"},
      {"train.grad_accum=5", "parallel.sharding=shard_grad_op"},
      {"train.grad_accum=6", "parallel.tensor=2"},
      {"train.grad_accum=7", "train.precision=bf16_mixed",
       "parallel.offload.optimizer=cpu"},
      {"train.grad_accum=6", "train.activation_checkpointing=full",
       "parallel.forward_prefetch=true"},
  };
  for (const std::vector<std::string> &sets : plans) {
    std::string what = sets.front() + (sets.size() > 1 ? " " + sets[1] : "");
    Schedule rolled = compile(sets);
    ASSERT_EQ(rolled.programs.front().tasks.size(), 1u) << what;
    ASSERT_EQ(rolled.programs.front().runs.size(), 1u) << what;
    const TaskRuns &runs = rolled.programs.front().runs.front();
    EXPECT_EQ(int64_t(runs.order.size()), rolled.microBatches - 2) << what;
    Schedule unrolled = compile(sets, /*roll=*/false);
    EXPECT_TRUE(unrolled.programs.front().tasks.empty()) << what;
    ValidSchedule valid = validateSchedule(rolled, "rolled");
    EXPECT_TRUE(valid->programs.front().tasks.empty()) << what;
    EXPECT_EQ(serializeSchedule(valid.get()), serializeSchedule(unrolled))
        << what;
    // The file holds the tasks; reading it gives the same expansion.
    std::string file = serializeSchedule(valid.file());
    EXPECT_LT(file.size(), serializeSchedule(unrolled).size()) << what;
    ValidSchedule read = parseSchedule(file, "t.sched");
    EXPECT_EQ(serializeSchedule(read.file()), file) << what;
    EXPECT_EQ(serializeSchedule(read.get()), serializeSchedule(unrolled))
        << what;
  }
}

TEST(ScheduleTasks, MalformedTablesAreOneLineErrors) {
  static const Schedule rolled = compile({"train.grad_accum=8"});
  auto errorIn = [](const std::function<void(Program &)> &edit) {
    Schedule s = rolled;
    edit(s.programs.front());
    return validateError(s);
  };
  EXPECT_EQ(errorIn([](Program &) {}), "");
  int64_t P = int64_t(rolled.programs.front().buffers.size());
  EXPECT_HAS(errorIn([](Program &p) { p.runs.front().order[2].first = 1; }),
             "t.sched: runs 0: task 1 is not one of the 1 tasks");
  EXPECT_HAS(errorIn([](Program &p) { p.runs.front().order[0].second = 8; }),
             "t.sched: runs 0: micro-batch 8 is not one of the step's 8");
  EXPECT_HAS(errorIn([](Program &p) {
               p.runs.front().at = int64_t(p.ops.size()) + 1;
             }),
             "runs 0: at " +
                 std::to_string(rolled.programs.front().ops.size() + 1) +
                 " is not an op index in program order");
  EXPECT_HAS(errorIn([&](Program &p) { p.runs.front().buffersBefore = P + 1; }),
             "runs 0: buffers_before " + std::to_string(P + 1) +
                 " is not in program order");
  EXPECT_HAS(errorIn([](Program &p) { p.runs.front().eventsBefore = -1; }),
             "runs 0: events_before -1 is not in program order");
  EXPECT_HAS(errorIn([](Program &p) { p.tasks.front().microBatch = 9; }),
             "t.sched: task 0: micro_batch 9 is not one of the step's 8");
  EXPECT_HAS(errorIn([](Program &p) { p.tasks.front().numEvents = -1; }),
             "task 0: num_events -1 is negative or more than its ops");
  EXPECT_HAS(errorIn([](Program &p) {
               p.tasks.front().buffers.front().persistent = true;
             }),
             "is persistent: a task's buffers live in one run");
  EXPECT_HAS(errorIn([&](Program &p) {
               Buffer view = p.tasks.front().buffers.front();
               view.kind = Buffer::Kind::View;
               view.source = P + 5;
               p.tasks.front().buffers.insert(p.tasks.front().buffers.begin(),
                                              view);
             }),
             "task 0: buffer " + std::to_string(P) + " is a view of " +
                 std::to_string(P + 5) + ", which is not an earlier buffer");
  // An id past the task's own is out of range.
  EXPECT_HAS(errorIn([&](Program &p) {
               for (Op &op : p.tasks.front().ops)
                 if (auto *alloc = op.as<ops::Alloc>()) {
                   alloc->buffer = P + 1000;
                   break;
                 }
             }),
             "task buffer id " + std::to_string(P + 1000) + " is out of range");
  // A program id past the program's stays past the expanded program's,
  // rather than naming a run's buffer or event.
  EXPECT_HAS(errorIn([&](Program &p) {
               for (Op &op : p.ops)
                 if (auto *alloc = op.as<ops::Alloc>()) {
                   alloc->buffer = P;
                   break;
                 }
             }),
             "is no buffer");
  EXPECT_HAS(errorIn([&](Program &p) {
               for (Op &op : p.ops)
                 if (auto *wait = op.as<ops::Wait>()) {
                   wait->event = p.numEvents;
                   break;
                 }
             }),
             "out of range (num_events");
  // What the expansion then holds is the program's checks': runs placed
  // before the program allocates what they use.
  EXPECT_HAS(errorIn([](Program &p) { p.runs.front().at = 0; }),
             "before its alloc");
  // Runs of nothing are a table without tasks.
  EXPECT_HAS(errorIn([](Program &p) { p.tasks.clear(); }),
             "runs 0: task 0 is not one of the 0 tasks");
  // A file that asks for billions of ops is refused before it allocates.
  EXPECT_HAS(errorIn([](Program &p) {
               p.runs.front().order.assign(int64_t{1} << 22, {0, 1});
             }),
             "expands the program past 67108864 ops, buffers or events");
}

/// Edits the JSON body of `file` (the tiny schedule's by default) and
/// returns the reader's error.
std::string errorAfterEdit(const std::function<void(Json &)> &edit,
                           const std::string &file = "") {
  Json body = bodyOf(file.empty() ? serializeSchedule(tiny()) : file);
  edit(body);
  return parseError(wrap(body.dump()));
}

TEST(ScheduleTasks, MalformedJsonIsRejected) {
  static const std::string file = serializeSchedule(
      validateSchedule(compile({"train.grad_accum=8"}), "x").file());
  auto errorAfterEditOf = [](const std::function<void(Json &)> &edit) {
    return errorAfterEdit(edit, file);
  };
  EXPECT_EQ(errorAfterEditOf([](Json &) {}), "");
  EXPECT_HAS(errorAfterEditOf([](Json &j) { j.erase("tasks"); }),
             "t.sched: missing field 'tasks'");
  EXPECT_HAS(errorAfterEditOf([](Json &j) { j["runs"][0]["order"][1] = 3; }),
             "t.sched: runs[0].order[1]: expected an array");
  EXPECT_HAS(errorAfterEditOf([](Json &j) {
               j["runs"][0]["order"][1] = Json::array({0, 1, 2});
             }),
             "t.sched: runs[0].order[1]: must be [task, micro-batch]");
  EXPECT_HAS(errorAfterEditOf([](Json &j) {
               j["runs"][0]["order"][1][1] = uint64_t(1) << 63;
             }),
             "t.sched: runs[0].order[1][1]: integer out of range");
  EXPECT_HAS(errorAfterEditOf([](Json &j) { j["tasks"][0] = 1; }),
             "t.sched: tasks[0]: expected an object");
  EXPECT_HAS(errorAfterEditOf([](Json &j) { j["tasks"][0].erase("ops"); }),
             "t.sched: tasks[0]: missing field 'ops'");
  EXPECT_HAS(errorAfterEditOf(
                 [](Json &j) { j["tasks"][0]["buffers"][0]["numel"] = "1"; }),
             "tasks[0].buffers[0].numel: expected an integer");
}

//===----------------------------------------------------------------------===//
// Slots: a task's buffers and events that another run names
//===----------------------------------------------------------------------===//

/// Appends a transient f32 allocation of `numel` elements in `space` past
/// everything else in its arena, at index `at` of the program's buffers
/// (every id from `at` on, and a task's own, moves up by one); returns its
/// id.
int64_t insertAlloc(Program &p, int64_t at, const std::string &name,
                    int64_t numel, Space space = Space::Device) {
  auto up = [at](int64_t id) { return id >= at ? id + 1 : id; };
  auto same = [](int64_t id) { return id; };
  for (Op &op : p.ops)
    remapOp(op, up, same, 0);
  for (Buffer &b : p.buffers)
    if (b.kind != Buffer::Kind::Alloc)
      b.source = up(b.source);
  for (Task &task : p.tasks) {
    for (Op &op : task.ops)
      remapOp(op, up, same, 0);
    for (Buffer &b : task.buffers)
      if (b.kind != Buffer::Kind::Alloc)
        b.source = up(b.source);
  }
  for (TaskRuns &runs : p.runs)
    if (runs.buffersBefore >= at)
      ++runs.buffersBefore;
  Buffer b;
  b.name = name;
  b.role = BufferRole::Activations;
  b.numel = numel;
  b.space = space;
  int64_t &arena = p.arenaBytes[space];
  b.offset = (arena + 63) / 64 * 64;
  arena = b.offset + numel * 4;
  p.buffers.insert(p.buffers.begin() + at, b);
  return at;
}

Op op(OpBody body) { return Op{std::move(body), 0}; }

/// Gradient accumulation's task with each of its runs' first allocation
/// in a slot of one program buffer of `slots` slots instead (`shift`:
/// micro-batch `mb`'s in slot `(mb + shift) mod slots`).
Schedule withSlots(int64_t slots, int64_t shift, int64_t *slotBuffer,
                   int64_t *local) {
  Schedule s = compile({"train.grad_accum=8"});
  Program &p = s.programs.front();
  Task &task = p.tasks.front();
  auto P = int64_t(p.buffers.size());
  size_t i = 0;
  while (task.buffers[i].kind != Buffer::Kind::Alloc)
    ++i;
  int64_t numel = task.buffers[i].numel;
  TaskRuns &runs = p.runs.front();
  int64_t S = insertAlloc(p, runs.buffersBefore, "slots", slots * numel);
  p.ops.insert(p.ops.begin() + runs.at, op(ops::Alloc{S}));
  p.ops.insert(p.ops.begin() + runs.at + 1, op(ops::Free{S}));
  ++runs.at;
  // The task's buffer P + i (now P + 1 + i) is no allocation any more.
  int64_t id = P + 1 + int64_t(i);
  std::erase_if(task.ops, [&](const Op &o) {
    const auto *alloc = o.as<ops::Alloc>();
    const auto *free = o.as<ops::Free>();
    return (alloc && alloc->buffer == id) || (free && free->buffer == id);
  });
  Buffer &b = task.buffers[i];
  b.kind = Buffer::Kind::Slot;
  b.source = S;
  b.slots = slots;
  b.shift = shift;
  *slotBuffer = S;
  *local = int64_t(i);
  return s;
}

/// A slot holds one run's buffer at a time: the expansion is each run's
/// view of the slot its micro-batch takes, which the program's checks
/// accept as they accepted the allocation; the file holds the slot once.
TEST(ScheduleSlots, ARunsBufferInASlot) {
  for (auto [slots, shift] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 0}, {2, 0}, {3, 1}, {3, -8}}) {
    SCOPED_TRACE(std::to_string(slots) + " slots, shift " +
                 std::to_string(shift));
    int64_t S = 0, i = 0;
    Schedule s = withSlots(slots, shift, &S, &i);
    ValidSchedule valid = validateSchedule(s, "t.sched");
    const Program &file = valid.file().programs.front();
    const Program &expanded = valid->programs.front();
    const Buffer &slot = file.tasks.front().buffers[size_t(i)];
    // Each run's buffer `i` is a view of S at its micro-batch's slot.
    int64_t views = 0;
    for (const Buffer &b : expanded.buffers)
      if (b.kind == Buffer::Kind::View && b.source == S) {
        int64_t mb = 1 + views++;
        EXPECT_EQ(b.viewOffset,
                  (((mb + shift) % slots) + slots) % slots * slot.numel);
        EXPECT_EQ(b.numel, slot.numel);
      }
    EXPECT_EQ(views, 6);
    EXPECT_EQ(expanded.buffers[size_t(S)].numel, slots * slot.numel);
    // Written and read back, the same.
    std::string bytes = serializeSchedule(valid.file());
    EXPECT_NE(bytes.find("\"kind\":\"slot\""), std::string::npos);
    ValidSchedule read = parseSchedule(bytes, "t.sched");
    EXPECT_EQ(serializeSchedule(read.get()), serializeSchedule(valid.get()));
    EXPECT_EQ(serializeSchedule(read.file()), bytes);
  }
}

/// A two-task program over three micro-batches: `forward` zeroes its
/// micro-batch's slot of S (on the device) and copies it into its slot of T
/// (on the host), signalling a slot event; `backward` waits for that event
/// and copies T's slot back into S's. `order` is the runs' (task,
/// micro-batch) pairs.
Schedule forwardBackward(int64_t slotsOfS, int64_t slotsOfT,
                         std::vector<std::pair<int64_t, int64_t>> order,
                         int64_t waitShift = 0) {
  Schedule s = compile({"train.grad_accum=3"});
  Program &p = s.programs.front();
  auto P0 = int64_t(p.buffers.size());
  int64_t S = insertAlloc(p, P0, "S", 4 * slotsOfS);
  int64_t T = insertAlloc(p, P0 + 1, "T", 4 * slotsOfT, Space::Host);
  int64_t P = P0 + 2, E = p.numEvents;
  p.ops.push_back(op(ops::Alloc{S}));
  p.ops.push_back(op(ops::Alloc{T}));
  TaskRuns runs;
  runs.at = int64_t(p.ops.size());
  runs.buffersBefore = P;
  runs.eventsBefore = E;
  runs.order = std::move(order);
  p.runs.push_back(runs);
  p.ops.push_back(op(ops::Free{S}));
  p.ops.push_back(op(ops::Free{T}));
  p.slotEventFamilies = 1;
  auto slot = [&](int64_t source, int64_t slots) {
    Buffer b;
    b.kind = Buffer::Kind::Slot;
    b.space = p.buffers[size_t(source)].space;
    b.numel = 4;
    b.source = source;
    b.slots = slots;
    return b;
  };
  Task forward;
  forward.buffers = {slot(S, slotsOfS), slot(T, slotsOfT)};
  forward.slotEvents = {{0, 0}};
  forward.ops = {op(ops::Zero{P}), op(ops::Copy{P, P + 1, {}, E})};
  Task backward;
  backward.numEvents = 1;
  backward.buffers = forward.buffers;
  backward.slotEvents = {{0, waitShift}};
  backward.ops = {op(ops::Wait{E + 1}), op(ops::Copy{P + 1, P, {}, E}),
                  op(ops::Wait{E})};
  p.tasks = {forward, backward};
  return s;
}

std::vector<std::pair<int64_t, int64_t>> gpipe() {
  return {{0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1}, {1, 2}};
}
std::vector<std::pair<int64_t, int64_t>> oneForwardOneBackward() {
  return {{0, 0}, {0, 1}, {1, 0}, {0, 2}, {1, 1}, {1, 2}};
}

/// Slot events are one event per instance, signalled in one run and
/// waited in another; slots are as many as the micro-batches in flight.
TEST(ScheduleSlots, EventsAndSlotsAcrossRuns) {
  ValidSchedule valid =
      validateSchedule(forwardBackward(3, 3, gpipe()), "t.sched");
  const Program &p = valid->programs.front();
  int64_t E = valid.file().programs.front().numEvents;
  // Three forward instances and three backward events.
  EXPECT_EQ(p.numEvents, E + 6);
  // Forward of micro-batch 0 signals the event backward of 0 waits for.
  std::vector<int64_t> signalled, waited;
  for (const Op &o : p.ops) {
    if (const auto *copy = o.as<ops::Copy>())
      signalled.push_back(copy->done);
    if (const auto *wait = o.as<ops::Wait>())
      waited.push_back(wait->event);
  }
  ASSERT_GE(signalled.size(), 6u);
  ASSERT_GE(waited.size(), 6u);
  std::vector<int64_t> forwardEvents(signalled.end() - 6, signalled.end() - 3);
  EXPECT_EQ(forwardEvents, (std::vector<int64_t>{E, E + 1, E + 2}));
  // backward 0: its wait for the slot event, then its own event's.
  std::vector<int64_t> lastWaits(waited.end() - 6, waited.end());
  EXPECT_EQ(lastWaits,
            (std::vector<int64_t>{E, E + 3, E + 1, E + 4, E + 2, E + 5}));
  // 1F1B keeps two micro-batches in flight: two slots are enough.
  EXPECT_EQ(validateError(forwardBackward(2, 2, oneForwardOneBackward())), "");
  std::string bytes = serializeSchedule(
      validateSchedule(forwardBackward(2, 2, oneForwardOneBackward()), "x")
          .file());
  ValidSchedule read = parseSchedule(bytes, "t.sched");
  EXPECT_EQ(serializeSchedule(read.file()), bytes);
}

TEST(ScheduleSlots, MalformedSlotsAreOneLineErrors) {
  // GPipe keeps three micro-batches in flight: forward of micro-batch 2
  // takes slot 0 of S before backward of 0 has read it.
  EXPECT_HAS(
      validateError(forwardBackward(2, 3, gpipe())),
      "t.sched: runs 0: task 1 for micro-batch 0: slot 0 of buffer " +
          std::to_string(
              compile({"train.grad_accum=3"}).programs.front().buffers.size()) +
          " ('S') is used for micro-batch 0 after micro-batch 2 took "
          "it: its slots are fewer than the micro-batches in flight");
  // A wait for an instance no run signals before it (the previous
  // micro-batch's, -1 for the first) is the expanded program's error.
  EXPECT_HAS(validateError(forwardBackward(3, 3, gpipe(), -1)),
             "is waited before any op signals it");
  auto edited = [](const std::function<void(Program &)> &edit) {
    Schedule s = forwardBackward(3, 3, gpipe());
    edit(s.programs.front());
    return validateError(s);
  };
  EXPECT_EQ(edited([](Program &) {}), "");
  const Schedule valid = forwardBackward(3, 3, gpipe());
  const Program &good = valid.programs.front();
  auto P = int64_t(good.buffers.size());
  EXPECT_HAS(edited([](Program &p) {
               p.buffers.back() = p.tasks.front().buffers.front();
             }),
             "t.sched: buffer " + std::to_string(P - 1) +
                 " is a slot: only a task's buffers are");
  EXPECT_HAS(edited([](Program &p) {
               p.tasks[0].buffers[1].source = int64_t(p.buffers.size());
             }),
             "t.sched: task 0: buffer " + std::to_string(P + 1) +
                 " is a slot of " + std::to_string(P) +
                 ", which is not a program buffer (0 to " +
                 std::to_string(P - 1) + ")");
  EXPECT_HAS(edited([](Program &p) { p.tasks[1].buffers[0].slots = 4; }),
             "t.sched: task 1: buffer " + std::to_string(P) +
                 ": 4 slots of 4 elements are not in buffer " +
                 std::to_string(P - 2) + "'s 12");
  EXPECT_HAS(edited([](Program &p) { p.tasks[1].buffers[0].slots = 0; }),
             ": 0 slots of 4 elements are not in buffer");
  EXPECT_HAS(edited([](Program &p) { p.tasks[0].buffers[0].shift = 4; }),
             ": shift 4 is outside [-3, 3], the step's micro-batches");
  EXPECT_HAS(edited([](Program &p) {
               p.tasks[1].slotEvents[0] = {1, 0};
             }),
             "task 1: slot event ");
  EXPECT_HAS(edited([](Program &p) {
               p.tasks[1].slotEvents[0] = {1, 0};
             }),
             ": family 1 is not one of the program's 1 slot event families");
  EXPECT_HAS(edited([](Program &p) {
               p.tasks[1].slotEvents[0] = {0, -4};
             }),
             ": shift -4 is outside [-3, 3], the step's micro-batches");
  EXPECT_HAS(edited([](Program &p) { p.slotEventFamilies = -1; }),
             "t.sched: slot_event_families is negative");
  // An event id past the task's own and slot events.
  EXPECT_HAS(edited([](Program &p) {
               p.tasks[1].ops[0].as<ops::Wait>()->event = p.numEvents + 2;
             }),
             "t.sched: task event id " + std::to_string(good.numEvents + 2) +
                 " is out of range (" + std::to_string(good.numEvents + 2) +
                 " ids)");
  // A slot of another type than its buffer's is a view's error.
  EXPECT_HAS(edited([](Program &p) {
               p.tasks[0].buffers[0].type = ElementType::BF16;
             }),
             "differs from its source");
}

/// The sched dialect's form of forwardBackward(3, 3, order): the lowered
/// tiny program with S and T allocated at its end, around a sched.tasks of
/// the two bodies, placed in the arenas as insertAlloc places them.
mlir::OwningOpRef<mlir::ModuleOp>
forwardBackwardInIR(mlir::MLIRContext &context,
                    const std::vector<std::pair<int64_t, int64_t>> &order) {
  mlir::OwningOpRef<mlir::ModuleOp> module =
      lower(context, {"train.grad_accum=3"});
  auto program = *module->getOps<sched::ProgramOp>().begin();
  mlir::OpBuilder b = mlir::OpBuilder::atBlockEnd(&program.getBody().front());
  mlir::Location loc = b.getUnknownLoc();
  llvm::StringMap<int64_t> arena;
  for (mlir::NamedAttribute entry :
       program->getAttrOfType<mlir::DictionaryAttr>("arena_bytes"))
    arena[entry.getName()] =
        mlir::cast<mlir::IntegerAttr>(entry.getValue()).getInt();
  auto bufferOf = [&](int64_t numel, sched::MemorySpace space) {
    return sched::getBufferType(&context, numel, b.getF32Type(), space);
  };
  auto alloc = [&](const char *name, sched::MemorySpace space) {
    int64_t &end = arena[sched::stringifyMemorySpace(space)];
    int64_t offset = (end + 63) / 64 * 64;
    end = offset + 12 * 4;
    return sched::AllocOp::create(
        b, loc, bufferOf(12, space), b.getStringAttr(name),
        sched::BufferRoleAttr::get(&context, sched::BufferRole::Activations),
        mlir::UnitAttr(), b.getI64IntegerAttr(offset));
  };
  mlir::Value S = alloc("S", sched::MemorySpace::Device);
  mlir::Value T = alloc("T", sched::MemorySpace::Host);
  llvm::SmallVector<mlir::NamedAttribute> sizes;
  for (const auto &entry : arena)
    sizes.push_back(
        b.getNamedAttr(entry.getKey(), b.getI64IntegerAttr(entry.getValue())));
  program->setAttr("arena_bytes", b.getDictionaryAttr(sizes));
  llvm::SmallVector<int64_t> flat;
  for (auto [task, mb] : order)
    flat.append({task, mb});
  auto tasks = sched::TasksOp::create(b, loc, /*event_families=*/1, flat);
  mlir::Block &tasksBody = tasks.getBody().emplaceBlock();
  auto eventType = sched::EventType::get(&context);
  auto body = [&](auto fill) {
    b.setInsertionPointToEnd(&tasksBody);
    auto task = sched::TaskOp::create(b, loc, /*micro_batch=*/0);
    b.setInsertionPointToEnd(&task.getBody().emplaceBlock());
    mlir::Value s = sched::SlotOp::create(
        b, loc, bufferOf(4, sched::MemorySpace::Device), S,
        b.getI64IntegerAttr(0), b.getI64IntegerAttr(3));
    mlir::Value t =
        sched::SlotOp::create(b, loc, bufferOf(4, sched::MemorySpace::Host), T,
                              b.getI64IntegerAttr(0), b.getI64IntegerAttr(3));
    fill(s, t);
  };
  body([&](mlir::Value s, mlir::Value t) {
    sched::ZeroOp::create(b, loc, s);
    mlir::Value copied =
        sched::CopyOp::create(b, loc, eventType, s, t, mlir::ValueRange());
    sched::SlotSignalOp::create(b, loc, copied, 0, 0);
  });
  body([&](mlir::Value s, mlir::Value t) {
    mlir::Value ready = sched::SlotEventOp::create(b, loc, eventType, 0, 0);
    sched::WaitOp::create(b, loc, ready);
    mlir::Value back =
        sched::CopyOp::create(b, loc, eventType, t, s, mlir::ValueRange());
    sched::WaitOp::create(b, loc, back);
  });
  b.setInsertionPointToEnd(&program.getBody().front());
  sched::FreeOp::create(b, loc, S);
  sched::FreeOp::create(b, loc, T);
  return module;
}

/// Where a held buffer's consumer places its own buffer at the held bytes.
enum class Overlap { AfterTheWait, BeforeTheRead, WhileTheReadIsInFlight };

/// Two tasks over three micro-batches in 1F1B-like order (produce 0,
/// consume 0, produce 1, ...): `produce` zeroes its micro-batch's slot of
/// the held buffer H; `consume` copies it into the program's X
/// asynchronously and waits, and zeroes a buffer L of its own that lies at
/// H's bytes, placed as `overlap` says.
Schedule heldSlots(Overlap overlap) {
  Schedule s = compile({"train.grad_accum=3"});
  Program &p = s.programs.front();
  auto P0 = int64_t(p.buffers.size());
  int64_t H = insertAlloc(p, P0, "H", 4);
  int64_t X = insertAlloc(p, P0 + 1, "X", 4);
  p.buffers[size_t(H)].held = true;
  int64_t P = P0 + 2, E = p.numEvents;
  p.ops.push_back(op(ops::Alloc{H}));
  p.ops.push_back(op(ops::Alloc{X}));
  TaskRuns runs;
  runs.at = int64_t(p.ops.size());
  runs.buffersBefore = P;
  runs.eventsBefore = E;
  runs.order = {{0, 0}, {1, 0}, {0, 1}, {1, 1}, {0, 2}, {1, 2}};
  p.runs.push_back(runs);
  p.ops.push_back(op(ops::Free{H}));
  p.ops.push_back(op(ops::Free{X}));
  Buffer slot;
  slot.kind = Buffer::Kind::Slot;
  slot.numel = 4;
  slot.source = H;
  slot.slots = 1;
  Buffer local = p.buffers[size_t(H)];
  local.held = false;
  local.name = "L.mb0";
  Task produce;
  produce.buffers = {slot};
  produce.ops = {op(ops::Zero{P})};
  Task consume;
  consume.numEvents = 1;
  consume.buffers = {slot, local};
  std::vector<Op> read = {op(ops::Copy{P, X, {}, E}), op(ops::Wait{E})};
  std::vector<Op> own = {op(ops::Alloc{P + 1}), op(ops::Zero{P + 1}),
                         op(ops::Free{P + 1})};
  switch (overlap) {
  case Overlap::AfterTheWait:
    consume.ops = {read[0], read[1], own[0], own[1], own[2]};
    break;
  case Overlap::BeforeTheRead:
    consume.ops = {own[0], own[1], own[2], read[0], read[1]};
    break;
  case Overlap::WhileTheReadIsInFlight:
    consume.ops = {read[0], own[0], own[1], own[2], read[1]};
    break;
  }
  p.tasks = {produce, consume};
  return s;
}

/// A held buffer claims its bytes only while a micro-batch holds its slot:
/// the expansion gives each holder an alloc of its own at those bytes, from
/// its first use to its last or to the wait of an asynchronous op using it,
/// so a task's own buffer may lie there outside those spans and not within.
TEST(ScheduleSlots, AHeldBufferClaimsItsBytesOnlyWhileHeld) {
  ValidSchedule valid =
      validateSchedule(heldSlots(Overlap::AfterTheWait), "t.sched");
  const Program &file = valid.file().programs.front();
  const Program &p = valid->programs.front();
  int64_t H = 0;
  while (file.buffers[size_t(H)].name != "H")
    ++H;
  // One holder a micro-batch, at H's bytes.
  std::vector<int64_t> holders;
  for (size_t b = 0; b < p.buffers.size(); ++b)
    if (p.buffers[b].kind == Buffer::Kind::Alloc &&
        p.buffers[b].name.rfind("H.mb", 0) == 0) {
      holders.push_back(int64_t(b));
      EXPECT_EQ(p.buffers[b].offset, file.buffers[size_t(H)].offset);
      EXPECT_EQ(p.buffers[b].numel, 4);
      EXPECT_FALSE(p.buffers[b].held);
    }
  ASSERT_EQ(holders.size(), 3u);
  EXPECT_EQ(p.buffers[size_t(holders[0])].name, "H.mb0");
  EXPECT_EQ(p.buffers[size_t(holders[2])].name, "H.mb2");
  // Micro-batch 0's holder: allocated right before produce's zero, freed
  // right after consume's wait; nothing but views of it uses it between.
  auto at = [&](auto match) {
    for (size_t i = 0; i < p.ops.size(); ++i)
      if (match(p.ops[i]))
        return int64_t(i);
    return int64_t(-1);
  };
  int64_t alloc = at([&](const Op &o) {
    const auto *a = o.as<ops::Alloc>();
    return a && a->buffer == holders[0];
  });
  int64_t free = at([&](const Op &o) {
    const auto *f = o.as<ops::Free>();
    return f && f->buffer == holders[0];
  });
  ASSERT_GE(alloc, 0);
  ASSERT_GT(free, alloc);
  EXPECT_EQ(p.ops[size_t(alloc + 1)].kind(), OpKind::Zero);
  EXPECT_EQ(p.ops[size_t(free - 1)].kind(), OpKind::Wait);
  EXPECT_EQ(p.ops[size_t(free + 1)].kind(), OpKind::Alloc); // L's
  // Written and read back, the same.
  std::string bytes = serializeSchedule(valid.file());
  EXPECT_NE(bytes.find("\"held\":true"), std::string::npos);
  ValidSchedule read = parseSchedule(bytes, "t.sched");
  EXPECT_EQ(serializeSchedule(read.get()), serializeSchedule(valid.get()));
  EXPECT_EQ(serializeSchedule(read.file()), bytes);
}

TEST(ScheduleSlots, HeldBuffersBrokenAreOneLineErrors) {
  // L at H's bytes while micro-batch 0 still holds them: before consume
  // reads them, and while its copy of them is in flight.
  for (Overlap overlap :
       {Overlap::BeforeTheRead, Overlap::WhileTheReadIsInFlight}) {
    std::string error = validateError(heldSlots(overlap));
    EXPECT_HAS(error, "('L.mb0') at bytes [");
    EXPECT_HAS(error, "('H.mb0'), which is alive");
  }
  auto edited = [](const std::function<void(Program &, int64_t)> &edit) {
    Schedule s = heldSlots(Overlap::AfterTheWait);
    Program &p = s.programs.front();
    int64_t H = 0;
    while (p.buffers[size_t(H)].name != "H")
      ++H;
    edit(p, H);
    return validateError(s);
  };
  EXPECT_HAS(edited([](Program &p, int64_t H) {
               p.buffers[size_t(H)].persistent = true;
             }),
             "('H') is held and persistent: only a transient buffer is held");
  EXPECT_HAS(
      edited([](Program &p, int64_t) { p.tasks[0].buffers[0].slots = 2; }),
      "is a slot of held buffer");
  // The program's own ops may only allocate and free it.
  EXPECT_HAS(edited([](Program &p, int64_t H) {
               p.ops.insert(p.ops.end() - 2, op(ops::Zero{H}));
             }),
             "('H') lies in a held buffer, which only its tasks' slots use");
  EXPECT_HAS(edited([](Program &p, int64_t H) {
               Buffer view;
               view.kind = Buffer::Kind::ShardView;
               view.numel = 2;
               view.source = H;
               p.buffers.push_back(view);
             }),
             "is a shard view of held buffer");
  // A forward's graph keeps its `in` (a recompute's its `input`) until the
  // unit's backward, which does not name it.
  EXPECT_HAS(edited([](Program &p, int64_t) {
               auto P = int64_t(p.buffers.size());
               p.tasks[0].ops.push_back(
                   op(ops::Forward{.unit = 1, .microBatch = 0, .in = P}));
             }),
             "lies in a held buffer's slot, which the graph keeps until the "
             "unit's backward");
  // Without tasks, nothing holds it.
  Schedule flat = compile();
  Program &p = flat.programs.front();
  for (Buffer &b : p.buffers)
    if (b.kind == Buffer::Kind::Alloc && !b.persistent) {
      b.held = true;
      break;
    }
  EXPECT_HAS(validateError(flat), "is held, but its program has no tasks");
}

/// The exporter writes a sched.tasks as the file's tasks, runs and slots:
/// the same file as the one built in the runtime's structures.
TEST(ScheduleSlots, ExportedFromTheIR) {
  for (const auto &order : {gpipe(), oneForwardOneBackward()}) {
    std::unique_ptr<mlir::MLIRContext> context = newContext();
    mlir::OwningOpRef<mlir::ModuleOp> module =
        forwardBackwardInIR(*context, order);
    ASSERT_TRUE(mlir::succeeded(mlir::verify(*module)));
    mlir::FailureOr<Schedule> exported = plan::exportSchedule(*module);
    ASSERT_TRUE(mlir::succeeded(exported));
    EXPECT_EQ(serializeSchedule(*exported),
              serializeSchedule(forwardBackward(3, 3, order)));
    EXPECT_EQ(validateError(*exported), "");
  }
}

/// What planc --report=json and --trace say of `module`: one string, so
/// that two forms of one step compare whole.
std::string reportOf(mlir::ModuleOp module) {
  mlir::FailureOr<plan::ScheduleReport> report =
      plan::analyzeSchedule(module, {/*time=*/true, /*timeline=*/true});
  if (mlir::failed(report))
    return "no report";
  std::string text;
  llvm::raw_string_ostream os(text);
  os << plan::reportToJson(*report) << "\n";
  plan::writeChromeTrace(*report, os);
  return text;
}

/// Runs sched-unroll-tasks on every program of `module`.
void unrollTasks(mlir::ModuleOp module) {
  mlir::PassManager pm(module.getContext());
  pm.nest<sched::ProgramOp>().addPass(plan::createSchedUnrollTasks());
  ASSERT_TRUE(mlir::succeeded(pm.run(module)));
}

/// sched-unroll-tasks writes out in the IR what the reader writes out of
/// the file: the same program, id for id.
TEST(ScheduleSlots, UnrolledInTheIRAsTheReaderExpandsTheFile) {
  for (const auto &order : {gpipe(), oneForwardOneBackward()}) {
    std::unique_ptr<mlir::MLIRContext> context = newContext();
    mlir::OwningOpRef<mlir::ModuleOp> module =
        forwardBackwardInIR(*context, order);
    mlir::FailureOr<Schedule> withTasks = plan::exportSchedule(*module);
    ASSERT_TRUE(mlir::succeeded(withTasks));
    ValidSchedule expanded = validateSchedule(*withTasks, "t.sched");
    // The report walks the table as the reader expands it: the same
    // memory, traffic and timeline as the step written out.
    std::string withTasksReport = reportOf(*module);
    EXPECT_NE(withTasksReport, "no report");
    unrollTasks(*module);
    EXPECT_EQ(reportOf(*module), withTasksReport);
    sched::ProgramOp program = *module->getOps<sched::ProgramOp>().begin();
    EXPECT_TRUE(program.getBody().getOps<sched::TasksOp>().empty());
    mlir::FailureOr<Schedule> unrolled = plan::exportSchedule(*module);
    ASSERT_TRUE(mlir::succeeded(unrolled));
    EXPECT_EQ(serializeSchedule(*unrolled), serializeSchedule(expanded.get()));
  }
}

/// Gradient accumulation's sched.repeat is a sched.tasks of one body run
/// for its micro-batches: the same file, and written out (micro-batches
/// and names counted on) the unrolled lowering.
TEST(ScheduleTasks, ARepeatAsTasks) {
  for (const char *accum : {"train.grad_accum=6", "train.grad_accum=8"}) {
    std::unique_ptr<mlir::MLIRContext> context = newContext();
    mlir::OwningOpRef<mlir::ModuleOp> module = lower(*context, {accum});
    std::string repeatFile = serializeSchedule(*plan::exportSchedule(*module));
    std::string repeatReport = reportOf(*module);
    EXPECT_NE(repeatReport, "no report");
    auto program = *module->getOps<sched::ProgramOp>().begin();
    auto repeat = *program.getBody().getOps<sched::RepeatOp>().begin();
    mlir::OpBuilder b(repeat);
    int64_t first = sched::getBodyMicroBatch(repeat);
    llvm::SmallVector<int64_t> order;
    for (int64_t run = 0; run < int64_t(repeat.getCount()); ++run)
      order.append({0, first + run});
    auto tasks = sched::TasksOp::create(b, repeat.getLoc(), 0, order);
    b.setInsertionPointToEnd(&tasks.getBody().emplaceBlock());
    auto task = sched::TaskOp::create(b, repeat.getLoc(), first);
    task.getBody().takeBody(repeat.getBody());
    repeat.erase();
    ASSERT_TRUE(mlir::succeeded(mlir::verify(*module)));
    EXPECT_EQ(serializeSchedule(*plan::exportSchedule(*module)), repeatFile)
        << accum;
    EXPECT_EQ(reportOf(*module), repeatReport) << accum;
    // sched-plan-memory places the body's buffers in a frame of their own:
    // the file's reader finds no two live buffers overlapping.
    // sched-plan-workspace walks the runs: the same workspace.
    mlir::OwningOpRef<mlir::ModuleOp> replanned = module->clone();
    mlir::PassManager pm(context.get());
    pm.nest<sched::ProgramOp>().addPass(plan::createSchedPlanMemory());
    pm.nest<sched::ProgramOp>().addPass(plan::createSchedPlanWorkspace());
    ASSERT_TRUE(mlir::succeeded(pm.run(*replanned)));
    auto workspaceOf = [](mlir::ModuleOp m) {
      auto p = *m.getOps<sched::ProgramOp>().begin();
      return std::make_pair(
          p->getAttrOfType<mlir::IntegerAttr>("workspace_bytes").getInt(),
          p->getAttrOfType<mlir::StringAttr>("workspace_at").str());
    };
    EXPECT_EQ(workspaceOf(*replanned), workspaceOf(*module)) << accum;
    mlir::FailureOr<Schedule> framed = plan::exportSchedule(*replanned);
    ASSERT_TRUE(mlir::succeeded(framed));
    EXPECT_EQ(validateError(*framed), "") << accum;
    unrollTasks(*module);
    EXPECT_EQ(reportOf(*module), repeatReport) << accum;
    EXPECT_EQ(serializeSchedule(*plan::exportSchedule(*module)),
              serializeSchedule(compile({accum}, /*roll=*/false)))
        << accum;
  }
}

/// Moves all of `program`'s ops after its leading persistent allocations
/// into one sched.task, run once for micro-batch 0: the same step, as a
/// table of one entry.
void wrapInOneTask(sched::ProgramOp program) {
  mlir::Block &body = program.getBody().front();
  auto first = llvm::find_if(body, [](mlir::Operation &op) {
    auto alloc = mlir::dyn_cast<sched::AllocOp>(op);
    return !alloc || !alloc.getPersistent();
  });
  mlir::OpBuilder b(&*first);
  auto tasks = sched::TasksOp::create(b, program.getLoc(), 0,
                                      llvm::ArrayRef<int64_t>{0, 0});
  b.setInsertionPointToEnd(&tasks.getBody().emplaceBlock());
  auto task = sched::TaskOp::create(b, program.getLoc(), 0);
  mlir::Block &inner = task.getBody().emplaceBlock();
  inner.getOperations().splice(inner.end(), body.getOperations(),
                               std::next(mlir::Block::iterator(tasks)),
                               body.end());
}

/// A pipeline's stages with a sched.tasks: sched-verify-pipeline and the
/// report's time model play their tables (the report, its file and numbers,
/// is that of the stages without one), and the file's reader expands them
/// into the same programs.
TEST(ScheduleTasks, APipelinesStagesAsTasks) {
  for (const char *schedule :
       {"parallel.schedule=1f1b", "parallel.schedule=gpipe"}) {
    std::vector<std::string> sets = {"parallel.pipeline=2", schedule,
                                     "train.grad_accum=4"};
    std::unique_ptr<mlir::MLIRContext> context = newContext();
    // Each stage's step written out, which the test wraps.
    mlir::OwningOpRef<mlir::ModuleOp> module =
        lower(*context, sets, /*roll=*/true, /*tasks=*/false);
    std::string file = serializeSchedule(*plan::exportSchedule(*module));
    std::string report = reportOf(*module);
    EXPECT_NE(report, "no report");
    for (sched::ProgramOp program : module->getOps<sched::ProgramOp>())
      wrapInOneTask(program);
    ASSERT_TRUE(mlir::succeeded(mlir::verify(*module))) << schedule;
    // sched-plan-workspace walks the task: the same workspace per stage.
    std::vector<int64_t> workspace;
    for (sched::ProgramOp program : module->getOps<sched::ProgramOp>())
      workspace.push_back(
          program->getAttrOfType<mlir::IntegerAttr>("workspace_bytes")
              .getInt());
    mlir::PassManager pm(context.get());
    pm.nest<sched::ProgramOp>().addPass(plan::createSchedPlanWorkspace());
    pm.addPass(plan::createSchedVerifyPipeline());
    EXPECT_TRUE(mlir::succeeded(pm.run(*module))) << schedule;
    std::vector<int64_t> rewalked;
    for (sched::ProgramOp program : module->getOps<sched::ProgramOp>())
      rewalked.push_back(
          program->getAttrOfType<mlir::IntegerAttr>("workspace_bytes")
              .getInt());
    EXPECT_EQ(rewalked, workspace) << schedule;
    EXPECT_EQ(reportOf(*module), report) << schedule;
    mlir::FailureOr<Schedule> withTasks = plan::exportSchedule(*module);
    ASSERT_TRUE(mlir::succeeded(withTasks));
    EXPECT_EQ(withTasks->programs.size(), 2u);
    EXPECT_EQ(withTasks->programs[1].tasks.size(), 1u);
    EXPECT_EQ(serializeSchedule(validateSchedule(*withTasks, "t.sched").get()),
              file)
        << schedule;
  }
}

/// How far lowerStages lowers: sched-lower alone, then the rewriting passes
/// that run on tasks, one more each.
enum class Through { SchedLower, Checkpointing, Collectives, Casts, All };

/// The tiny plan with `overrides` through the plan passes and sched-lower
/// (and the rewriting passes up to `through`), each stage's micro-batch loop
/// a sched.tasks with `asTasks`.
mlir::OwningOpRef<mlir::ModuleOp>
lowerStages(mlir::MLIRContext &context,
            const std::vector<std::string> &overrides, bool asTasks,
            Through through = Through::SchedLower) {
  mlir::OwningOpRef<mlir::ModuleOp> module = importTiny(context, overrides);
  mlir::PassManager pm(&context);
  pm.addPass(plan::createPlanExpandPresets());
  pm.addPass(plan::createPlanAssignStages());
  pm.addPass(plan::createPlanWrapUnits());
  pm.addPass(plan::createPlanAssignSharding());
  plan::SchedLowerOptions options;
  options.pipelineTasks = asTasks;
  pm.addPass(plan::createSchedLower(options));
  if (through >= Through::Checkpointing)
    pm.nest<sched::ProgramOp>().addPass(
        plan::createSchedActivationCheckpointing());
  if (through >= Through::Collectives)
    pm.nest<sched::ProgramOp>().addPass(plan::createSchedInsertCollectives());
  if (through >= Through::Casts)
    pm.nest<sched::ProgramOp>().addPass(plan::createSchedInsertCasts());
  if (through >= Through::All) {
    mlir::OpPassManager &program = pm.nest<sched::ProgramOp>();
    program.addPass(plan::createSchedInsertOffloadCopies());
    program.addPass(plan::createSchedPrefetch());
    program.addPass(plan::createSchedBucketGradients());
    program.addPass(plan::createSchedSplitTensorParallel());
    program.addPass(plan::createSchedDequantizeBase());
    program.addPass(plan::createSchedShareSlotBuffers());
  }
  if (mlir::failed(pm.run(*module)))
    throw std::runtime_error("sched-lower failed");
  return module;
}

std::string describe(mlir::Operation *op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  op->print(os, mlir::OpPrintingFlags().skipRegions());
  return text;
}

/// For each op of `ops` (a flat step's), the allocations whose last use it
/// is: the last op that names the buffer (through views), or the wait of an
/// asynchronous op that does. A buffer's free may come later (a prefetched
/// gather's staging buffer is freed below the next gather's issue).
std::map<size_t, std::vector<mlir::Value>>
lastUses(llvm::ArrayRef<mlir::Operation *> ops) {
  llvm::DenseMap<mlir::Value, mlir::Value> rootOf;
  llvm::DenseMap<mlir::Value, size_t> last;
  llvm::DenseMap<mlir::Value, std::vector<mlir::Value>> inFlight;
  for (auto [index, op] : llvm::enumerate(ops)) {
    if (auto alloc = mlir::dyn_cast<sched::AllocOp>(op)) {
      rootOf[alloc.getBuffer()] = alloc.getBuffer();
      continue;
    }
    if (auto view = mlir::dyn_cast<sched::ViewOp>(op)) {
      if (mlir::Value root = rootOf.lookup(view.getSource()))
        rootOf[view.getResult()] = root;
      continue;
    }
    if (mlir::isa<sched::FreeOp>(op))
      continue;
    if (auto wait = mlir::dyn_cast<sched::WaitOp>(op)) {
      for (mlir::Value root : inFlight.lookup(wait.getEvent()))
        last[root] = index;
      continue;
    }
    std::vector<mlir::Value> roots;
    for (mlir::Value operand : op->getOperands())
      if (mlir::Value root = rootOf.lookup(operand)) {
        last[root] = index;
        roots.push_back(root);
      }
    if (std::optional<sched::AsyncInfo> async = sched::getAsyncInfo(op))
      inFlight[async->done] = roots;
  }
  std::map<size_t, std::vector<mlir::Value>> at;
  for (auto [root, index] : last)
    at[index].push_back(root);
  return at;
}

/// "" when `written` (a stage whose tasks were unrolled) is `flat` (the same
/// stage lowered flat) with each buffer that crosses tasks in a slot: the
/// same ops with the same attributes and operands in the same order, but for
/// the flat allocations and frees of those buffers and the written step's
/// slot buffers, their views and frees. Each flat buffer that crosses tasks
/// is one slot, and no two of them are in use at once in the same slot
/// (from the first use to the last, lastUses: slot buffers that share an
/// allocation, sched-share-slot-buffers, hold one after the other).
/// `loopBuffers` names the other buffers of the program that the tasks'
/// bodies used directly (shard_grad_op's gathered parameters, a gradient
/// reduced once a step: allocated before the loop and freed after it): each
/// is one slot of itself, which no other flat buffer may hold.
/// Otherwise where they part.
std::string differenceModuloSlots(sched::ProgramOp flat,
                                  sched::ProgramOp written,
                                  const std::set<std::string> &loopBuffers) {
  // Buckets are counted over the step flat and per body on tasks
  // ("grad.bucket<k>.mb<m>"): their names are compared without the counts.
  auto nameOf = [](sched::AllocOp alloc) {
    static const std::regex bucket("grad\\.bucket[0-9]+(\\.mb[0-9]+)?");
    std::string name = alloc.getName().str();
    return std::regex_match(name, bucket) ? std::string("grad.bucket") : name;
  };
  auto attributesOf = [&](mlir::Operation *op) {
    auto alloc = mlir::dyn_cast<sched::AllocOp>(op);
    if (!alloc)
      return op->getAttrDictionary();
    mlir::NamedAttrList attributes(op->getAttrDictionary());
    attributes.set(alloc.getNameAttrName(),
                   mlir::StringAttr::get(op->getContext(), nameOf(alloc)));
    return attributes.getDictionary(op->getContext());
  };
  llvm::SmallVector<mlir::Operation *> a, b;
  std::set<std::string> flatNames;
  for (mlir::Operation &op : flat.getBody().front()) {
    a.push_back(&op);
    if (auto alloc = mlir::dyn_cast<sched::AllocOp>(op))
      flatNames.insert(nameOf(alloc));
  }
  for (mlir::Operation &op : written.getBody().front())
    b.push_back(&op);
  std::map<size_t, std::vector<mlir::Value>> releasedAt = lastUses(a);
  using Slot = std::pair<void *, int64_t>; // (slot buffer, offset)
  llvm::DenseMap<mlir::Value, mlir::Value> same;
  llvm::DenseSet<mlir::Value> slotBuffers;
  // A crossing buffer of the flat step (its allocation, or a view of one:
  // the buffer and the view's offset in it), and a view of a slot buffer in
  // the step written out (views of views too: the offset in the buffer).
  llvm::DenseMap<mlir::Value, std::pair<mlir::Value, int64_t>> crossing;
  llvm::DenseMap<mlir::Value, Slot> slotOfView, placed;
  std::map<Slot, mlir::Value> holder;
  size_t i = 0, j = 0;
  while (true) {
    for (; j < b.size(); ++j) {
      mlir::Operation *op = b[j];
      if (auto alloc = mlir::dyn_cast<sched::AllocOp>(op);
          alloc && !alloc.getPersistent() &&
          (!flatNames.count(nameOf(alloc)) ||
           loopBuffers.count(nameOf(alloc)))) {
        slotBuffers.insert(alloc.getBuffer());
        // Used directly: slot 0 of itself.
        slotOfView[alloc.getBuffer()] = {alloc.getBuffer().getAsOpaquePointer(),
                                         0};
      } else if (auto view = mlir::dyn_cast<sched::ViewOp>(op);
                 view && slotBuffers.count(view.getSource()))
        slotOfView[view.getResult()] = {view.getSource().getAsOpaquePointer(),
                                        static_cast<int64_t>(view.getOffset())};
      else if (auto inner =
                   view ? slotOfView.find(view.getSource()) : slotOfView.end();
               inner != slotOfView.end())
        slotOfView[view.getResult()] = {
            inner->second.first,
            inner->second.second + static_cast<int64_t>(view.getOffset())};
      else if (auto free = mlir::dyn_cast<sched::FreeOp>(op);
               !free || !slotBuffers.count(free.getBuffer()))
        break;
    }
    for (; i < a.size(); ++i) {
      mlir::Operation *op = a[i];
      auto writtenAlloc =
          j < b.size() ? mlir::dyn_cast<sched::AllocOp>(b[j]) : nullptr;
      if (auto alloc = mlir::dyn_cast<sched::AllocOp>(op);
          alloc && !alloc.getPersistent() &&
          !(writtenAlloc && nameOf(writtenAlloc) == nameOf(alloc))) {
        crossing[alloc.getBuffer()] = {alloc.getBuffer(), 0};
      } else if (auto view = mlir::dyn_cast<sched::ViewOp>(op);
                 view && crossing.count(view.getSource())) {
        auto [root, offset] = crossing.lookup(view.getSource());
        crossing[view.getResult()] = {
            root, offset + static_cast<int64_t>(view.getOffset())};
      } else if (auto free = mlir::dyn_cast<sched::FreeOp>(op);
                 free && crossing.count(free.getBuffer())) {
        auto it = placed.find(free.getBuffer());
        if (it == placed.end())
          return "crossing buffer freed unused: " + describe(op);
        if (auto held = holder.find(it->second);
            held != holder.end() && held->second == free.getBuffer())
          holder.erase(held);
      } else {
        break;
      }
    }
    if (i == a.size() || j == b.size())
      break;
    mlir::Operation *x = a[i], *y = b[j];
    if (x->getName() != y->getName() || attributesOf(x) != attributesOf(y) ||
        x->getNumOperands() != y->getNumOperands() ||
        x->getResultTypes() != y->getResultTypes())
      return "flat `" + describe(x) + "` is written `" + describe(y) + "`";
    for (unsigned k = 0; k < x->getNumOperands(); ++k) {
      mlir::Value u = x->getOperand(k), v = y->getOperand(k);
      if (auto cross = crossing.find(u); cross != crossing.end()) {
        auto view = slotOfView.find(v);
        if (view == slotOfView.end() || u.getType() != v.getType())
          return "operand " + std::to_string(k) + " of `" + describe(x) +
                 "` is in no slot in `" + describe(y) + "`";
        auto [root, offset] = cross->second;
        Slot at{view->second.first, view->second.second - offset};
        auto [it, added] = placed.try_emplace(root, at);
        if (!added && it->second != at)
          return "`" + describe(x) + "` finds its buffer in another slot";
        auto [held, free] = holder.try_emplace(at, root);
        if (!free && held->second != root)
          return "`" + describe(x) + "` uses a slot another buffer holds";
        continue;
      }
      auto it = same.find(u);
      if (it == same.end() || it->second != v)
        return "operand " + std::to_string(k) + " of `" + describe(x) +
               "` differs in `" + describe(y) + "`";
    }
    for (unsigned r = 0; r < x->getNumResults(); ++r)
      same[x->getResult(r)] = y->getResult(r);
    // A crossing buffer past its last use leaves its slot.
    for (mlir::Value root : releasedAt[i])
      if (auto at = placed.find(root); at != placed.end())
        if (auto held = holder.find(at->second);
            held != holder.end() && held->second == root)
          holder.erase(held);
    ++i;
    ++j;
  }
  if (i != a.size())
    return "flat `" + describe(a[i]) + "` is not written";
  if (j != b.size())
    return "written `" + describe(b[j]) + "` is not in the flat step";
  return "";
}

/// sched-lower's pipeline-tasks: each stage's loop as a sched.tasks whose
/// bodies are as many at 16 micro-batches as at 32, and which, written out,
/// is the flat lowering with each buffer that crosses tasks in a slot; the
/// same after each rewriting pass that runs on the bodies.
TEST(ScheduleTasks, SchedLowerWritesAStagesLoopAsTasks) {
  struct Case {
    std::vector<std::string> sets;
    // The pass that writes the loop out before it rewrites it, if any.
    std::optional<Through> writtenOutBy;
  };
  const std::vector<Case> cases = {
      {{"parallel.pipeline=2", "parallel.schedule=gpipe"}},
      {{"parallel.pipeline=2", "parallel.schedule=1f1b"}},
      {{"parallel.pipeline=4", "parallel.schedule=1f1b"}},
      {{"parallel.pipeline=2", "parallel.schedule=interleaved(2)"}},
      {{"parallel.pipeline=4", "parallel.schedule=interleaved(2)"}},
      // The received input copied into the saves and freed after the
      // forward.
      {{"parallel.pipeline=2", "train.activation_checkpointing=full"}},
      // The last stage's replica of the tied embedding.
      {{"model=gpt2_tiny", "parallel.pipeline=4",
        "parallel.schedule=interleaved(2)"}},
      // Each strategy's reductions, a forward after a backward completing
      // them: every group's all-reduce and accumulation with no_shard (and
      // under interleaving, where the forward is another chunk's), the last
      // reduce-scatter with zero1, and with hybrid_shard the replicas'
      // all-reduce in the last micro-batch.
      {{"parallel.pipeline=2", "parallel.sharding=no_shard"}},
      {{"parallel.pipeline=2", "parallel.sharding=no_shard",
        "parallel.schedule=interleaved(2)"}},
      // no_shard's buckets: a bucket of two blocks, the root group alone.
      {{"parallel.pipeline=2", "parallel.sharding=no_shard",
        "parallel.bucket=400KiB"}},
      {{"parallel.pipeline=2", "parallel.sharding=no_shard",
        "parallel.tensor=2", "parallel.sequence_parallel=true",
        "cluster.nodes=2"}},
      {{"parallel.pipeline=2", "parallel.sharding=zero1"}},
      {{"parallel.pipeline=2", "parallel.sharding=hybrid_shard",
        "parallel.mesh=(2, 2)", "cluster.nodes=2"}},
      // A sharded gradient reduced once a step: the full gradient (zeroed by
      // the first micro-batch's backward, reduce-scattered by the last's) or
      // zero1's shard (which the step reads) a buffer of the program that
      // every body uses.
      {{"parallel.pipeline=2", "parallel.grad_sync=last_micro_batch"}},
      {{"parallel.pipeline=4", "parallel.schedule=interleaved(2)",
        "parallel.grad_sync=last_micro_batch"}},
      {{"parallel.pipeline=2", "parallel.sharding=zero1",
        "parallel.grad_sync=last_micro_batch"}},
      {{"parallel.pipeline=2", "parallel.sharding=hybrid_shard",
        "parallel.mesh=(2, 2)", "cluster.nodes=2",
        "parallel.schedule=interleaved(2)",
        "parallel.grad_sync=last_micro_batch"}},
      {{"parallel.pipeline=2", "parallel.sharding=shard_grad_op",
        "parallel.grad_sync=last_micro_batch"}},
      {{"parallel.pipeline=2", "train.precision=bf16_mixed",
        "train.grad_dtype=bf16", "parallel.grad_sync=last_micro_batch"}},
      {{"parallel.pipeline=2", "train.precision=bf16_mixed",
        "train.grad_dtype=bf16", "parallel.sharding=zero1",
        "parallel.grad_sync=last_micro_batch"}},
      {{"parallel.pipeline=2", "parallel.grad_sync=last_micro_batch",
        "parallel.backward_prefetch=pre", "parallel.forward_prefetch=true",
        "parallel.offload.grads=cpu", "parallel.offload.optimizer=cpu"}},
      // shard_grad_op's parameters, gathered by the first micro-batch's
      // forward into a buffer of the program that every body reads.
      {{"parallel.pipeline=2", "parallel.sharding=shard_grad_op"}},
      {{"parallel.pipeline=4", "parallel.sharding=shard_grad_op",
        "parallel.schedule=interleaved(2)"}},
      {{"parallel.pipeline=2", "parallel.sharding=shard_grad_op",
        "train.precision=bf16_mixed", "train.grad_dtype=bf16"}},
      // Prefetched: a chunk's first gather of the step issued by the task
      // before into the program's buffer, its event a slot event; staged
      // from the host.
      {{"parallel.pipeline=4", "parallel.sharding=shard_grad_op",
        "parallel.schedule=interleaved(2)", "parallel.forward_prefetch=true"}},
      {{"parallel.pipeline=2", "parallel.sharding=shard_grad_op",
        "parallel.offload.params=cpu", "parallel.offload.optimizer=cpu",
        "parallel.forward_prefetch=true"}},
      // no_shard's gradient is persistent: reduced once, in the bodies of
      // the last micro-batch.
      {{"parallel.pipeline=2", "parallel.sharding=no_shard",
        "parallel.grad_sync=last_micro_batch"}},
      {{"parallel.pipeline=2", "parallel.sharding=no_shard",
        "parallel.schedule=interleaved(2)",
        "parallel.grad_sync=last_micro_batch"}},
      // bf16 gradients reduced in fp32: staging copies around each
      // reduction, in slots where the next forward completes it, for each
      // strategy; hybrid_shard's replica all-reduce follows the
      // reduce-scatter's wait and conversion, in the last micro-batch's
      // bodies.
      {{"parallel.pipeline=2", "train.precision=bf16_mixed",
        "train.grad_dtype=bf16", "parallel.sharding=full_shard"}},
      {{"parallel.pipeline=2", "train.precision=bf16_mixed",
        "train.grad_dtype=bf16", "parallel.sharding=no_shard",
        "parallel.schedule=interleaved(2)"}},
      {{"parallel.pipeline=2", "train.precision=bf16_mixed",
        "train.grad_dtype=bf16", "parallel.sharding=zero1"}},
      {{"parallel.pipeline=2", "train.precision=bf16_mixed",
        "train.grad_dtype=fp32", "parallel.sharding=full_shard"}},
      {{"parallel.pipeline=2", "train.precision=bf16_mixed",
        "train.grad_dtype=bf16", "parallel.sharding=hybrid_shard",
        "parallel.mesh=(2, 2)", "cluster.nodes=2"}},
      {{"parallel.pipeline=2", "train.precision=bf16_mixed",
        "train.grad_dtype=bf16", "parallel.sharding=hybrid_shard",
        "parallel.mesh=(2, 2)", "cluster.nodes=2",
        "parallel.schedule=interleaved(2)"}},
      // The tensor-parallel split, body by body: with sequence parallelism
      // each body's whole parameters summed after its own backward, also in
      // the one slot that the next forward completes the reduction of.
      {{"parallel.pipeline=2", "parallel.tensor=2"}},
      {{"parallel.pipeline=2", "parallel.tensor=2",
        "parallel.sequence_parallel=true", "parallel.sharding=zero1",
        "cluster.nodes=2"}},
      {{"parallel.pipeline=2", "parallel.tensor=2",
        "parallel.sequence_parallel=true", "parallel.schedule=interleaved(2)",
        "train.precision=bf16_mixed", "train.grad_dtype=bf16",
        "cluster.nodes=2"}},
      // A frozen NF4 base dequantized before each compute op.
      {{"parallel.pipeline=2", "model.lora.rank=4", "model.lora.alpha=8",
        "model.base=nf4"}},
      // Prefetching: a task's first gather issued by the task before, into
      // a slot, its event a slot event; each policy and in-flight limit.
      {{"parallel.pipeline=2", "parallel.backward_prefetch=pre"}},
      {{"parallel.pipeline=2", "parallel.backward_prefetch=post"}},
      {{"parallel.pipeline=2", "parallel.backward_prefetch=pre",
        "parallel.forward_prefetch=true", "parallel.max_inflight_gathers=1"}},
      {{"parallel.pipeline=4", "parallel.schedule=interleaved(2)",
        "parallel.backward_prefetch=pre", "parallel.forward_prefetch=true"}},
      {{"parallel.pipeline=2", "parallel.schedule=gpipe",
        "parallel.backward_prefetch=post", "parallel.forward_prefetch=true"}},
      {{"parallel.pipeline=2", "train.activation_checkpointing=full",
        "parallel.backward_prefetch=pre", "parallel.forward_prefetch=true"}},
      {{"parallel.pipeline=2", "parallel.sharding=hybrid_shard",
        "parallel.mesh=(2, 2)", "cluster.nodes=2",
        "parallel.backward_prefetch=pre", "parallel.forward_prefetch=true"}},
      {{"parallel.pipeline=2", "model.lora.rank=4", "model.lora.alpha=8",
        "model.base=nf4", "parallel.backward_prefetch=pre",
        "parallel.forward_prefetch=true"}},
      // Offloading, staged within each body: the optimizer state with the
      // step on the host, and the parameters too (their gathers' staging
      // copies), in fp32 and interleaved in bf16; fp32 gradients
      // reduce-scattered into host shards, the last ones of a backward into
      // a device slot that the next forward adds into the host shard.
      {{"parallel.pipeline=2", "parallel.offload.optimizer=cpu",
        "parallel.optimizer_step=cpu"}},
      {{"parallel.pipeline=2", "parallel.offload.params=cpu",
        "parallel.offload.optimizer=cpu"}},
      {{"parallel.pipeline=2", "parallel.schedule=interleaved(2)",
        "train.precision=bf16_mixed", "parallel.offload.params=cpu",
        "parallel.offload.optimizer=cpu", "parallel.optimizer_step=cpu"}},
      {{"parallel.pipeline=2", "parallel.offload.grads=cpu"}},
      // Offloaded parameters prefetched: a task's first gather issued by
      // the task before with its staging copy, each into a slot of its own
      // and with a slot event of its own.
      {{"parallel.pipeline=2", "parallel.offload.params=cpu",
        "parallel.backward_prefetch=pre", "parallel.forward_prefetch=true"}},
      {{"parallel.pipeline=4", "parallel.schedule=interleaved(2)",
        "train.precision=bf16_mixed", "parallel.offload.params=cpu",
        "parallel.offload.optimizer=cpu", "parallel.backward_prefetch=post",
        "parallel.forward_prefetch=true", "parallel.max_inflight_gathers=1"}},
      {{"parallel.pipeline=4", "parallel.schedule=interleaved(2)",
        "parallel.offload.grads=cpu", "parallel.offload.optimizer=cpu",
        "parallel.optimizer_step=cpu"}},
      // hybrid_shard's replica all-reduce of a host shard, drained after
      // the last backward of a group: the flat step waits for the drain at
      // the shard's next use, in a later task, so the loop is written out.
      {{"parallel.pipeline=2", "parallel.sharding=hybrid_shard",
        "parallel.mesh=(2, 2)", "cluster.nodes=2",
        "parallel.offload.grads=cpu"},
       Through::All},
      // In bf16 those reductions already land in a device slot, whose host
      // accumulation the next forward stages itself.
      {{"parallel.pipeline=2", "train.precision=bf16_mixed",
        "train.grad_dtype=bf16", "parallel.offload.grads=cpu",
        "parallel.offload.optimizer=cpu"}},
      // As examples/llama3_405b_3d.plan: TP with SP, interleaved, bf16,
      // checkpointing, both prefetches.
      {{"parallel.pipeline=2", "parallel.tensor=2",
        "parallel.sequence_parallel=true", "parallel.schedule=interleaved(2)",
        "train.precision=bf16_mixed", "train.activation_checkpointing=full",
        "cluster.nodes=2", "parallel.backward_prefetch=pre",
        "parallel.forward_prefetch=true"}},
  };
  for (const Case &pipeline : cases) {
    std::string name = llvm::join(pipeline.sets, " ");
    bool interleaved =
        llvm::is_contained(pipeline.sets, "parallel.schedule=interleaved(2)");
    std::map<Through, std::vector<size_t>> bodies;
    // 16: at 8, 4 interleaved stages have too short a steady state to show
    // every kind of run (73 bodies against 79 from 16 on).
    for (int64_t microBatches : {16, 32}) {
      // The case's own first (a model preset before its layers).
      std::vector<std::string> sets(pipeline.sets);
      // Without prefetching unless the case prefetches (full_shard's
      // default backward_prefetch = pre).
      sets.insert(sets.end(),
                  {"model.layers=8", "cluster.gpus_per_node=4",
                   "train.grad_accum=" + std::to_string(microBatches)});
      if (!llvm::any_of(pipeline.sets, [](llvm::StringRef set) {
            return set.starts_with("parallel.backward_prefetch=");
          }))
        sets.push_back("parallel.backward_prefetch=none");
      for (Through through :
           {Through::SchedLower, Through::Checkpointing, Through::Collectives,
            Through::Casts, Through::All}) {
        std::string what = llvm::join(sets, " ") + " through pass " +
                           std::to_string(static_cast<int>(through));
        std::unique_ptr<mlir::MLIRContext> context = newContext();
        mlir::OwningOpRef<mlir::ModuleOp> flat =
            lowerStages(*context, sets, false, through);
        mlir::OwningOpRef<mlir::ModuleOp> tasks =
            lowerStages(*context, sets, true, through);
        ASSERT_TRUE(mlir::succeeded(mlir::verify(*tasks))) << what;
        bool onTasks =
            !pipeline.writtenOutBy || through < *pipeline.writtenOutBy;
        size_t stageBodies = 0;
        for (sched::ProgramOp program : tasks->getOps<sched::ProgramOp>()) {
          auto loops =
              llvm::to_vector(program.getBody().getOps<sched::TasksOp>());
          ASSERT_EQ(loops.size(), onTasks ? 1u : 0u) << what;
          if (!onTasks)
            continue;
          size_t count = loops.front().getTasks().size();
          // Every forward and backward of the stage is one entry.
          EXPECT_EQ(loops.front().getOrder().size(),
                    size_t(4 * microBatches) * (interleaved ? 2 : 1))
              << what;
          EXPECT_LT(count, loops.front().getOrder().size() / 4) << what;
          stageBodies += count;
        }
        bodies[through].push_back(stageBodies);
        // The time model plays the stages' tables as it plays the flat
        // stages: the same times, to the last bit.
        if (onTasks && through == Through::All) {
          auto stagesOf = [](mlir::ModuleOp module) {
            return llvm::to_vector(module.getOps<sched::ProgramOp>());
          };
          mlir::FailureOr<std::vector<plan::StepTime>> played =
              plan::simulatePipeline(stagesOf(*tasks), false);
          mlir::FailureOr<std::vector<plan::StepTime>> flatPlayed =
              plan::simulatePipeline(stagesOf(*flat), false);
          ASSERT_TRUE(mlir::succeeded(played) && mlir::succeeded(flatPlayed))
              << what;
          for (auto [t, f] : llvm::zip_equal(*played, *flatPlayed)) {
            EXPECT_EQ(t.stepSeconds, f.stepSeconds) << what;
            EXPECT_EQ(t.pipelineWaitSeconds, f.pipelineWaitSeconds) << what;
            EXPECT_EQ(t.exposedCommSeconds, f.exposedCommSeconds) << what;
          }
        }
        // The buffers of each stage's program that its bodies use other
        // than through sched.slot (directly or through views).
        std::vector<std::set<std::string>> loopBuffers;
        for (sched::ProgramOp program : tasks->getOps<sched::ProgramOp>()) {
          std::set<std::string> &names = loopBuffers.emplace_back();
          for (auto loop : program.getBody().getOps<sched::TasksOp>())
            loop.walk([&](mlir::Operation *op) {
              if (mlir::isa<sched::SlotOp>(op))
                return;
              for (mlir::Value root : op->getOperands()) {
                while (auto view = root.getDefiningOp<sched::ViewOp>())
                  root = view.getSource();
                if (auto alloc = root.getDefiningOp<sched::AllocOp>();
                    alloc && !alloc.getPersistent() && !loop->isAncestor(alloc))
                  names.insert(alloc.getName().str());
              }
            });
        }
        unrollTasks(*tasks);
        ASSERT_TRUE(mlir::succeeded(mlir::verify(*tasks))) << what;
        auto flatStages = llvm::to_vector(flat->getOps<sched::ProgramOp>());
        auto writtenStages = llvm::to_vector(tasks->getOps<sched::ProgramOp>());
        ASSERT_EQ(flatStages.size(), writtenStages.size()) << what;
        // After every pass, the step written out is the flat one with its
        // crossing buffers in slots.
        for (auto [f, w, names] :
             llvm::zip(flatStages, writtenStages, loopBuffers))
          EXPECT_EQ(differenceModuloSlots(f, w, names), "")
              << what << ", " << f.getSymName().str();
      }
    }
    // As many bodies whatever the micro-batches.
    for (auto &[through, counts] : bodies)
      EXPECT_EQ(counts[0], counts[1])
          << name << " through pass " << static_cast<int>(through);
  }
}

/// sched-verify-schedule on `module`'s programs, walking every run of a
/// table or stepping over its middle's periods that repeat: what it reports
/// (its diagnostics and notes, "failed" first when it fails), and the runs
/// it stepped over.
std::pair<std::string, int64_t> verifySchedule(mlir::ModuleOp module,
                                               bool everyRun) {
  mlir::MLIRContext *context = module.getContext();
  std::string text;
  int64_t stepped = 0;
  mlir::ScopedDiagnosticHandler capture(context, [&](mlir::Diagnostic &d) {
    // "walked 6 of 24 runs: ..." at each sched.tasks.
    unsigned walked, runs;
    if (d.getSeverity() == mlir::DiagnosticSeverity::Remark) {
      if (std::sscanf(d.str().c_str(), "walked %u of %u", &walked, &runs) == 2)
        stepped += runs - walked;
      return mlir::success();
    }
    text += d.str() + "\n";
    for (const mlir::Diagnostic &note : d.getNotes())
      text += "  note: " + note.str() + "\n";
    return mlir::success();
  });
  mlir::PassManager pm(context);
  pm.enableVerifier(false);
  plan::SchedVerifyScheduleOptions options;
  options.everyRun = everyRun;
  options.remarkRuns = true;
  pm.nest<sched::ProgramOp>().addPass(plan::createSchedVerifySchedule(options));
  bool verified = mlir::succeeded(pm.run(module));
  return {(verified ? "" : "failed\n") + text, stepped};
}

// The walk that steps over a table's repeating middle finds what the walk
// of every run finds, to the word of each diagnostic: on pipeline stages
// lowered as tasks by every pass, and on each of their mutants that drops
// one op of a body, swaps two neighbouring runs of a table, or runs one
// entry for the next micro-batch (an error in the middle breaks its period,
// one after it is found again by a walk of every run).
TEST(ScheduleTasks, VerifyStepsOverOnlyWhatRepeats) {
  // Micro-batches enough for a middle of a few periods: 4 interleaved
  // stages repeat 16 runs (and their picked slots, renamed), 2 stages of
  // 1F1B 2.
  const std::vector<std::vector<std::string>> cases = {
      {"parallel.pipeline=2", "parallel.schedule=1f1b",
       "parallel.sharding=no_shard", "train.grad_accum=12"},
      {"parallel.pipeline=4", "parallel.schedule=interleaved(2)",
       "train.grad_accum=24"},
      {"parallel.pipeline=2", "parallel.offload.params=cpu",
       "parallel.offload.optimizer=cpu", "parallel.backward_prefetch=pre",
       "parallel.forward_prefetch=true", "train.grad_accum=12"},
  };
  for (const std::vector<std::string> &pipeline : cases) {
    std::vector<std::string> sets(pipeline);
    sets.insert(sets.end(), {"model.layers=8", "cluster.gpus_per_node=4"});
    std::string what = llvm::join(sets, " ");
    std::unique_ptr<mlir::MLIRContext> context = newContext();
    context->disableMultithreading(); // the diagnostics in program order
    mlir::OwningOpRef<mlir::ModuleOp> module =
        lowerStages(*context, sets, true, Through::All);
    auto stepping = verifySchedule(*module, false);
    EXPECT_EQ(stepping.first, "") << what;
    EXPECT_GT(stepping.second, 0) << what;
    EXPECT_EQ(verifySchedule(*module, true),
              std::make_pair(std::string(), int64_t(0)))
        << what;

    // sched-plan-workspace, stepping over the middle or not: the same most
    // bytes held, at the same op.
    auto workspaces = [&](bool everyRun) {
      mlir::OwningOpRef<mlir::ModuleOp> copy = module->clone();
      mlir::PassManager pm(context.get());
      plan::SchedPlanWorkspaceOptions options;
      options.everyRun = everyRun;
      pm.nest<sched::ProgramOp>().addPass(
          plan::createSchedPlanWorkspace(options));
      EXPECT_TRUE(mlir::succeeded(pm.run(*copy))) << what;
      std::vector<std::string> found;
      for (sched::ProgramOp program : copy->getOps<sched::ProgramOp>())
        found.push_back(
            std::to_string(
                program->getAttrOfType<mlir::IntegerAttr>("workspace_bytes")
                    .getInt()) +
            " at " +
            program->getAttrOfType<mlir::StringAttr>("workspace_at").str());
      return found;
    };
    EXPECT_EQ(workspaces(false), workspaces(true)) << what;

    // Mutants, each a copy of the module with one edit of the op that is
    // the `index`-th of the walk.
    std::vector<mlir::Operation *> ops;
    module->walk([&](mlir::Operation *op) { ops.push_back(op); });
    int64_t mutants = 0, rejected = 0, steppedOver = 0, pickMutants = 0;
    auto mutate = [&](size_t index,
                      const std::function<void(mlir::Operation *)> &edit) {
      mlir::OwningOpRef<mlir::ModuleOp> copy = module->clone();
      size_t at = 0;
      mlir::Operation *target = nullptr;
      copy->walk([&](mlir::Operation *op) {
        if (at++ == index)
          target = op;
      });
      edit(target);
      auto stepped = verifySchedule(*copy, false);
      auto walked = verifySchedule(*copy, true);
      ++mutants;
      rejected += !walked.first.empty();
      steppedOver += stepped.second > 0;
      EXPECT_EQ(stepped.first, walked.first)
          << what << ", mutant " << mutants << ": " << describe(ops[index]);
    };
    for (auto [index, op] : llvm::enumerate(ops)) {
      if (mlir::isa_and_nonnull<sched::TaskOp>(op->getParentOp()) &&
          op->use_empty())
        mutate(index, [](mlir::Operation *target) { target->erase(); });
      auto tasks = mlir::dyn_cast<sched::TasksOp>(op);
      if (!tasks)
        continue;
      int64_t runs = static_cast<int64_t>(tasks.getOrder().size() / 2);
      // A run that picks another slot of its pool (a picked slot: the
      // stepping walk renames the pool's slots from period to period).
      std::vector<int64_t> picks(
          tasks.getPicks().value_or(llvm::ArrayRef<int64_t>()));
      int64_t slots = 0;
      for (int64_t pick : picks)
        slots = std::max(slots, pick + 1);
      for (int64_t run = 0; run < static_cast<int64_t>(picks.size()); ++run) {
        if (picks[run] < 0 || slots < 2)
          continue;
        ++pickMutants;
        mutate(index, [&](mlir::Operation *target) {
          std::vector<int64_t> moved(picks);
          moved[run] = (moved[run] + 1) % slots;
          mlir::cast<sched::TasksOp>(target).setPicks(
              llvm::ArrayRef<int64_t>(moved));
        });
      }
      for (int64_t run = 0; run < runs; ++run) {
        mutate(index, [&](mlir::Operation *target) {
          auto copy = mlir::cast<sched::TasksOp>(target);
          std::vector<int64_t> order(copy.getOrder());
          order[2 * run + 1] += 1;
          copy.setOrder(order);
        });
        if (run + 1 < runs)
          mutate(index, [&](mlir::Operation *target) {
            auto copy = mlir::cast<sched::TasksOp>(target);
            std::vector<int64_t> order(copy.getOrder());
            std::swap(order[2 * run], order[2 * run + 2]);
            std::swap(order[2 * run + 1], order[2 * run + 3]);
            copy.setOrder(order);
          });
      }
    }
    // The mutants test both walks: most are errors, and the walk that
    // steps over a middle met many of them.
    EXPECT_GT(rejected, mutants / 2) << what;
    EXPECT_GT(steppedOver, mutants / 4) << what;
    // The interleaved stages pool their chunks' saves in picked slots.
    if (llvm::is_contained(pipeline, "parallel.schedule=interleaved(2)")) {
      EXPECT_GT(pickMutants, 0) << what;
    }
  }
}

TEST(ScheduleSlots, MalformedJsonIsRejected) {
  static const std::string file = serializeSchedule(
      validateSchedule(forwardBackward(3, 3, gpipe()), "x").file());
  auto errorAfterEditOf = [](const std::function<void(Json &)> &edit) {
    return errorAfterEdit(edit, file);
  };
  EXPECT_EQ(errorAfterEditOf([](Json &) {}), "");
  EXPECT_HAS(errorAfterEditOf([](Json &j) { j.erase("slot_event_families"); }),
             "t.sched: missing field 'slot_event_families'");
  EXPECT_HAS(
      errorAfterEditOf([](Json &j) { j["tasks"][0]["slot_events"][0] = {0}; }),
      "t.sched: tasks[0].slot_events[0]: must be [family, shift]");
  EXPECT_HAS(errorAfterEditOf(
                 [](Json &j) { j["tasks"][0]["buffers"][0].erase("slots"); }),
             "t.sched: tasks[0].buffers[0]: missing field 'slots'");
  EXPECT_HAS(errorAfterEditOf(
                 [](Json &j) { j["tasks"][0]["buffers"][0]["shift"] = 0.5; }),
             "t.sched: tasks[0].buffers[0].shift: expected an integer");
}

// What a file's checksum cannot catch: a body written with nonsense values
// (a fuzzer's, or a hand edit resealed). Each ran before, with a flat loss,
// a nan or a silent misconfiguration.
TEST(ScheduleFile, MeaningIsValidatedOnRead) {
  auto edited = [](const std::function<void(Schedule &)> &edit) {
    Schedule s = tiny();
    edit(s);
    return validateError(s);
  };
  EXPECT_EQ(edited([](Schedule &) {}), "");
  EXPECT_HAS(edited([](Schedule &s) { s.train.optimizer.lr = -1; }),
             "train.optimizer.lr is -1, outside (0, inf)");
  EXPECT_HAS(edited([](Schedule &s) { s.train.optimizer.beta1 = 1.0; }),
             "train.optimizer.beta1 is 1, outside [0, 1)");
  EXPECT_HAS(edited([](Schedule &s) { s.model.ropeTheta = 5e-324; }),
             "model.rope_theta is 4.94066e-324, outside [1, inf)");
  EXPECT_HAS(edited([](Schedule &s) { s.model.layers = 3; }),
             "model.layers is 3, but the units hold 2 layers");
  // llama_tiny has an untied head; gpt2 ties its head to the embedding.
  EXPECT_HAS(edited([](Schedule &s) { s.model.tieEmbeddings = true; }),
             "model.tie_embeddings is true, but no parameter is tied");
  Schedule gpt2 = compile({"model=gpt2_tiny"});
  gpt2.model.tieEmbeddings = false;
  EXPECT_HAS(validateError(gpt2),
             "model.tie_embeddings is false, but a parameter is tied");
  gpt2.model.tieEmbeddings = true;
  for (Unit &u : gpt2.units)
    for (Param &p : u.params)
      p.tiedTo.clear(); // `tied_to = ""`: the head would have no weights
  EXPECT_HAS(validateError(gpt2), "is at offset");
  // Every allocation at offset 0: buffers alive together would share bytes.
  EXPECT_HAS(edited([](Schedule &s) {
               for (Buffer &b : s.programs.front().buffers)
                 if (b.kind == Buffer::Kind::Alloc)
                   b.offset = 0;
             }),
             "arena overlaps buffer");
  // A dropped or a duplicated optimizer_step.
  EXPECT_HAS(edited([](Schedule &s) {
               auto [index, step] = firstOf<ops::OptimizerStep>(s);
               s.programs.front().ops.erase(s.programs.front().ops.begin() +
                                            index);
             }),
             "optimizer_step ops, not one");
  EXPECT_HAS(edited([](Schedule &s) {
               auto [index, step] = firstOf<ops::OptimizerStep>(s);
               Op copy = s.programs.front().ops[index];
               s.programs.front().ops.insert(
                   s.programs.front().ops.begin() + index + 1, copy);
             }),
             "has 2 optimizer_step ops, not one");
}

TEST(ScheduleFile, NotAScheduleFile) {
  EXPECT_HAS(parseError(std::string(64, 'x')), "not a schedule file");
  EXPECT_HAS(parseError(""), "truncated");
}

//===----------------------------------------------------------------------===//
// Well-formed files with bad contents (valid CRC)
//===----------------------------------------------------------------------===//

TEST(ScheduleFile, BadJson) {
  EXPECT_HAS(parseError(wrap("{\"producer\": ")), "not valid JSON");
  EXPECT_HAS(parseError(wrap("")), "not valid JSON");
  EXPECT_EQ(parseError(wrap("[1, 2]")),
            "t.sched: the body is not a JSON object");
  EXPECT_HAS(parseError(wrap(std::string(1000, '[') + std::string(1000, ']'))),
             "t.sched: nested deeper than 16 levels");
  std::string body = bodyOf(serializeSchedule(tiny())).dump();
  EXPECT_HAS(parseError(wrap(body + " {}")), "not valid JSON");
}

TEST(ScheduleFile, MissingFieldsAndWrongTypes) {
  EXPECT_HAS(errorAfterEdit([](Json &j) { j.erase("ops"); }),
             "t.sched: missing field 'ops'");
  EXPECT_HAS(errorAfterEdit([](Json &j) { j["buffers"][3].erase("numel"); }),
             "t.sched: buffers[3]: missing field 'numel'");
  EXPECT_HAS(errorAfterEdit([](Json &j) { j["buffers"][3]["numel"] = "12"; }),
             "buffers[3].numel: expected an integer");
  EXPECT_HAS(errorAfterEdit([](Json &j) { j["buffers"][0]["space"] = "gpu"; }),
             "buffers[0].space: unknown value 'gpu' (expected one of device, "
             "host, pinned_host)");
  EXPECT_HAS(
      errorAfterEdit([](Json &j) { j["ops"][5]["op"] = "sendrecv"; }),
      "ops[5].op: unknown value 'sendrecv' (expected one of alloc, free,");
  EXPECT_HAS(errorAfterEdit([](Json &j) { j["model"].erase("rope_theta"); }),
             "model: missing field 'rope_theta'");
  EXPECT_HAS(errorAfterEdit([](Json &j) { j["train"]["lr_schedule"] = 3; }),
             "train.lr_schedule: expected an object");
  EXPECT_HAS(errorAfterEdit(
                 [](Json &j) { j["units"][1]["params"][2]["shape"][0] = 1.5; }),
             "units[1].params[2].shape[0]: expected an integer");
  EXPECT_HAS(errorAfterEdit([](Json &j) {
               j["ops"][0]["buffer"] = 18446744073709551615ull;
             }),
             "ops[0].buffer: integer out of range");
  EXPECT_HAS(errorAfterEdit([](Json &j) { j["arena_bytes"]["gpu"] = 1; }),
             "arena_bytes: unknown memory space 'gpu'");
  EXPECT_HAS(errorAfterEdit([](Json &j) { j.erase("workspace_bytes"); }),
             "t.sched: missing field 'workspace_bytes'");
  EXPECT_HAS(errorAfterEdit([](Json &j) { j["workspace_bytes"] = "1"; }),
             "workspace_bytes: expected an integer");
  EXPECT_HAS(errorAfterEdit([](Json &j) { j["train"]["precision"] = "fp8"; }),
             "train.precision: unknown value 'fp8'");
  EXPECT_HAS(errorAfterEdit([](Json &j) { j["model"]["family"] = "mamba"; }),
             "model.family: unknown value 'mamba'");
  EXPECT_HAS(errorAfterEdit([](Json &j) { j["model"]["family"] = 0; }),
             "model.family: expected a string");
}

/// The index of the first op of kind `op` in a schedule body.
size_t firstJsonOp(const Json &body, const std::string &op) {
  const Json &ops = body["ops"];
  for (size_t i = 0; i < ops.size(); ++i)
    if (ops[i]["op"] == op)
      return i;
  throw std::runtime_error("no " + op);
}

// Each op's keys are its fields' (docs/generated/schedule-ops.md) and no
// others: a misspelt or leftover key is an error, not silently dropped.
TEST(ScheduleFile, UnknownOpFieldsAreRejected) {
  Json body = bodyOf(serializeSchedule(tiny()));
  size_t zero = firstJsonOp(body, "zero");
  size_t gather = firstJsonOp(body, "all_gather");
  EXPECT_HAS(errorAfterEdit([&](Json &j) { j["ops"][zero]["x"] = 1; }),
             "t.sched: ops[" + std::to_string(zero) +
                 "]: unknown field 'x' of zero");
  // Whatever the key's value and position.
  EXPECT_HAS(errorAfterEdit([&](Json &j) {
               Json op = Json::object();
               op["x"] = nullptr;
               for (auto it = j["ops"][zero].begin();
                    it != j["ops"][zero].end(); ++it)
                 op[it.key()] = it.value();
               j["ops"][zero] = op;
             }),
             "unknown field 'x' of zero");
  // A version 1 key next to its version 2 spelling.
  std::string leftover = errorAfterEdit(
      [&](Json &j) { j["ops"][gather]["axis"] = j["ops"][gather]["group"]; });
  EXPECT_HAS(leftover, "ops[" + std::to_string(gather) +
                           "]: unknown field 'axis' of all_gather "
                           "(docs/generated/schedule-ops.md lists its "
                           "fields)");
  // A version 1 op (axis for group, event for done) is missing its fields.
  EXPECT_HAS(errorAfterEdit([&](Json &j) {
               Json &op = j["ops"][gather];
               op["axis"] = op["group"];
               op.erase("group");
             }),
             "ops[" + std::to_string(gather) + "]: missing field 'group'");
  // A key of another op.
  EXPECT_HAS(errorAfterEdit([&](Json &j) { j["ops"][zero]["src"] = 0; }),
             "unknown field 'src' of zero");

  // opFromJson on its own.
  JsonReader reader("op.json");
  Json op = {{"op", "zero"}, {"buffer", 1}, {"line", 3}};
  EXPECT_EQ(opFromJson(reader, op, JsonPath()).as<ops::Zero>()->buffer, 1);
  op["x"] = 1;
  try {
    opFromJson(reader, op, JsonPath().member("ops").element(7));
    ADD_FAILURE() << "accepted " << op.dump();
  } catch (const support::JsonError &e) {
    EXPECT_STREQ(e.what(), "op.json: ops[7]: unknown field 'x' of zero "
                           "(docs/generated/schedule-ops.md lists its fields)");
  }
}

/// The index of the first op of `kind` in the tiny schedule.
size_t firstOp(const Schedule &s, OpKind kind) {
  for (size_t i = 0; i < s.programs.front().ops.size(); ++i)
    if (s.programs.front().ops[i].kind() == kind)
      return i;
  throw std::runtime_error(std::string("no ") + toString(kind));
}

/// Op `i` of `s`, which must be a T.
template <typename T> T &opAt(Schedule &s, size_t i) {
  if (T *op = s.programs.front().ops.at(i).as<T>())
    return *op;
  throw std::runtime_error("op " + std::to_string(i) + " is no " +
                           toString(T::kind));
}

/// Edits a copy of the tiny schedule; returns the error of the file
/// serialized from it (the writer does not validate; the reader does).
std::string errorAfter(const std::function<void(Schedule &)> &edit) {
  Schedule s = tiny();
  edit(s);
  std::string viaFile = parseError(serializeSchedule(s));
  EXPECT_EQ(viaFile, validateError(s));
  return viaFile;
}

TEST(ScheduleFile, ValidationCatchesInconsistentPrograms) {
  EXPECT_EQ(validateError(tiny()), "");
  size_t gather = firstOp(tiny(), OpKind::AllGather);
  size_t forward = firstOp(tiny(), OpKind::Forward);
  size_t wait = firstOp(tiny(), OpKind::Wait);
  size_t free = firstOp(tiny(), OpKind::Free);
  int64_t nBuffers = int64_t(tiny().programs.front().buffers.size());
  std::string gatherOp = "op " + std::to_string(gather) + " (all_gather): ";
  std::string forwardOp = "op " + std::to_string(forward) + " (forward): ";

  EXPECT_HAS(errorAfter([&](Schedule &s) {
               opAt<ops::AllGather>(s, gather).src = nBuffers;
             }),
             gatherOp + "src " + std::to_string(nBuffers) + " is no buffer");
  EXPECT_HAS(errorAfter([&](Schedule &s) {
               opAt<ops::AllGather>(s, gather).src = -1;
             }),
             gatherOp + "src -1 is no buffer");
  EXPECT_HAS(errorAfter([&](Schedule &s) {
               size_t lastAlloc = 0;
               for (size_t i = 0; i < s.programs.front().ops.size(); ++i)
                 if (s.programs.front().ops[i].kind() == OpKind::Alloc)
                   lastAlloc = i;
               ASSERT_GT(lastAlloc, forward);
               opAt<ops::Forward>(s, forward).saves =
                   opAt<ops::Alloc>(s, lastAlloc).buffer;
             }),
             "is used before its allocation");
  EXPECT_HAS(errorAfter([&](Schedule &s) {
               s.programs.front().ops.push_back(
                   Op{ops::Zero{.buffer = opAt<ops::Free>(s, free).buffer}});
             }),
             "is used after its free");
  // An event out of range, and one in range that is signalled only later.
  EXPECT_HAS(
      errorAfter([&](Schedule &s) { opAt<ops::Wait>(s, wait).event = 99; }),
      "event 99 out of range (num_events");
  EXPECT_HAS(errorAfter([&](Schedule &s) {
               int64_t event = opAt<ops::Wait>(s, wait).event;
               size_t signaller = s.programs.front().ops.size();
               for (size_t i = 0; i < wait; ++i)
                 std::visit(
                     [&](const auto &o) {
                       if constexpr (requires { o.done; })
                         if (o.done == event)
                           signaller = i;
                     },
                     s.programs.front().ops[i].body);
               ASSERT_LT(signaller, wait);
               Op waitOp = s.programs.front().ops[wait];
               s.programs.front().ops.erase(s.programs.front().ops.begin() +
                                            wait);
               s.programs.front().ops.insert(
                   s.programs.front().ops.begin() + signaller, waitOp);
             }),
             "is waited before any op signals it");
  EXPECT_HAS(errorAfter([&](Schedule &s) {
               s.programs.front().ops.insert(s.programs.front().ops.begin() +
                                                 wait + 1,
                                             s.programs.front().ops[wait]);
             }),
             "waited twice");
  // An all-reduce of a persistent gradient issued last and never waited.
  EXPECT_HAS(errorAfter([&](Schedule &s) {
               ops::AllReduce reduce;
               reduce.buffer = firstOf<ops::ReduceScatter>(s).second->dst;
               reduce.done = s.programs.front().numEvents++;
               s.programs.front().ops.push_back(Op{reduce});
             }),
             "event " + std::to_string(tiny().programs.front().numEvents) +
                 " is never waited");
  // The first wait moved to the program's end: its gather is still in
  // flight where the forward (one op earlier now) reads what it gathers.
  EXPECT_HAS(errorAfter([&](Schedule &s) {
               Op waitOp = s.programs.front().ops[wait];
               s.programs.front().ops.erase(s.programs.front().ops.begin() +
                                            wait);
               s.programs.front().ops.push_back(waitOp);
             }),
             "op " + std::to_string(forward - 1) +
                 " (forward): params, buffer 14 (view of "
                 "'fsdp.root.gathered'), is read while op " +
                 std::to_string(gather) +
                 " (all_gather) still writes it (its event 0 is not waited "
                 "for yet)");
  EXPECT_HAS(errorAfter([&](Schedule &s) {
               opAt<ops::AllGather>(s, gather).after = {5};
             }),
             gatherOp + "after event 5 that no earlier op signals");
  EXPECT_HAS(errorAfter([&](Schedule &s) {
               s.programs.front().numEvents = 1000000000;
             }),
             "num_events 1000000000 exceeds");
  EXPECT_HAS(
      errorAfter([&](Schedule &s) { opAt<ops::Forward>(s, forward).unit = 7; }),
      forwardOp + "unit 7 is no unit");
  EXPECT_HAS(errorAfter([&](Schedule &s) {
               opAt<ops::Forward>(s, forward).microBatch = 1;
             }),
             forwardOp + "micro_batch 1 is not in [0, 1)");
  EXPECT_HAS(errorAfter([&](Schedule &s) {
               ops::Forward &f = opAt<ops::Forward>(s, forward);
               f.params = opAt<ops::AllGather>(s, gather).dst; // the group
               f.unit = 1;
             }),
             "elements, unit 'layers.0' stores");
  EXPECT_HAS(errorAfter([&](Schedule &s) {
               firstOf<ops::OptimizerStep>(s).second->group = 3;
             }),
             "group 3 is no group");
  // The optimizer's state: adamw keeps two buffers, sgd with momentum one.
  EXPECT_HAS(errorAfter([&](Schedule &s) {
               firstOf<ops::OptimizerStep>(s).second->state.pop_back();
             }),
             "(optimizer_step): adamw keeps 2 state buffers, not 1");
  EXPECT_HAS(
      errorAfter([&](Schedule &s) {
        s.train.optimizer = {
            .kind = OptimizerKind::SGD, .lr = 0.1, .momentum = 0.9};
      }),
      "(optimizer_step): sgd with momentum keeps 1 state buffers, not 2");
  // Without its free, a buffer stays alive: the next one planned into its
  // bytes overlaps it; the program's last free leaves it never freed.
  EXPECT_HAS(errorAfter([&](Schedule &s) {
               s.programs.front().ops.erase(s.programs.front().ops.begin() +
                                            free);
             }),
             "arena overlaps");
  size_t lastFree = 0;
  for (size_t i = 0; i < tiny().programs.front().ops.size(); ++i)
    if (tiny().programs.front().ops[i].kind() == OpKind::Free)
      lastFree = i;
  EXPECT_HAS(errorAfter([&](Schedule &s) {
               s.programs.front().ops.erase(s.programs.front().ops.begin() +
                                            lastFree);
             }),
             "transient but never freed");
  EXPECT_HAS(errorAfter([&](Schedule &s) {
               s.programs.front().ops.push_back(
                   Op{ops::Free{.buffer = 0}}); // fsdp.root.param
             }),
             "is persistent and is never freed");
}

// Without a tensor axis each field only a tensor-parallel program has is
// refused by the reader, and recompute's `from` (optional in the op table
// for a later part) is required.
TEST(ScheduleFile, TensorParallelFieldsNeedATensorAxis) {
  auto errorWith = [](auto edit) {
    Schedule s = compile({"train.activation_checkpointing=full"});
    bool edited = false;
    for (Op &op : s.programs.front().ops)
      if (!edited)
        edited = std::visit([&](auto &o) { return edit(o); }, op.body);
    EXPECT_TRUE(edited);
    return validateError(s);
  };
  const std::string why =
      ": a tensor-parallel program, which this schedule's mesh (no tensor "
      "axis) cannot run";
  EXPECT_HAS(errorWith([](auto &o) {
               if constexpr (requires { o.part; }) {
                 o.part = 1;
                 return true;
               }
               return false;
             }),
             "part above 0" + why);
  EXPECT_HAS(
      errorWith([](auto &o) {
        if constexpr (std::is_same_v<std::decay_t<decltype(o)>, ops::Forward>) {
          o.out = o.saves;
          return true;
        }
        return false;
      }),
      "in/out" + why);
  EXPECT_HAS(errorWith([](auto &o) {
               if constexpr (std::is_same_v<std::decay_t<decltype(o)>,
                                            ops::AllGather>) {
                 o.group = GroupAxis::Tensor;
                 return true;
               }
               return false;
             }),
             "group tensor" + why);
  EXPECT_HAS(errorWith([](auto &o) {
               if constexpr (std::is_same_v<std::decay_t<decltype(o)>,
                                            ops::Recompute>) {
                 o.input = -1;
                 return true;
               }
               return false;
             }),
             "from is missing: a recompute starts from the saved input");
}

// A tensor-parallel program round-trips through a file, and the reader
// checks what the model relies on: each part of its unit's role, with the
// exchange buffers of its place, of the sizes its cut gives, and the loss's
// statistics.
// A pipeline: one program per stage, which round-trips, and the reader's
// checks of what a stage may do (on the stages' steps written out, whose
// ops the test edits; the reader expands a sched.tasks into such a step).
TEST(ScheduleFile, PipelineStagesAreChecked) {
  Schedule s = compile({"model.layers=4", "cluster.gpus_per_node=2",
                        "parallel.sharding=no_shard", "parallel.pipeline=2",
                        "train.grad_accum=2"},
                       /*roll=*/true, /*tasks=*/false);
  EXPECT_EQ(s.pipeline, 2);
  ASSERT_EQ(s.programs.size(), 2u);
  EXPECT_EQ(s.worldSize(), 2);
  EXPECT_EQ(s.units.front().stage, 0);
  EXPECT_EQ(s.units.back().stage, 1);
  Schedule back = parseSchedule(serializeSchedule(s), "t.sched").get();
  ASSERT_EQ(back.programs.size(), 2u);
  for (size_t stage = 0; stage < 2; ++stage) {
    EXPECT_EQ(back.programs[stage].ops.size(), s.programs[stage].ops.size());
    EXPECT_EQ(back.programs[stage].buffers.size(),
              s.programs[stage].buffers.size());
  }
  bool sends = false;
  for (const Op &op : s.programs.front().ops)
    sends |= op.as<ops::Send>() != nullptr;
  EXPECT_TRUE(sends);

  // A stage's program computing another stage's unit.
  Schedule other = s;
  for (Op &op : other.programs.front().ops)
    if (auto *forward = op.as<ops::Forward>())
      forward->unit = static_cast<int64_t>(s.units.size()) - 1;
  EXPECT_HAS(validateError(other),
             "stage 0: op 16 (forward): unit 'head' is computed by stage 1, "
             "not this one");
  // A send of a unit that is not the last of its chunk.
  Schedule early = s;
  for (Op &op : early.programs.front().ops)
    if (auto *send = op.as<ops::Send>())
      send->unit = 0;
  EXPECT_HAS(validateError(early),
             "unit 'embed' is not the last of a pipeline chunk");
  // The stage's input missing from its first unit.
  Schedule noInput = s;
  for (Op &op : noInput.programs.back().ops)
    if (auto *forward = op.as<ops::Forward>())
      forward->in = -1;
  EXPECT_HAS(validateError(noInput),
             "in is missing for part 0 of unit 'layers.2'");
  // A program too few.
  Schedule one = s;
  one.programs.pop_back();
  EXPECT_HAS(validateError(one),
             "the schedule has 1 programs for a pipeline of 2 stages");
}

// Tied embeddings with a pipeline: the last stage steps its replica of the
// embedding's group and adds its gradient on the embedding group, which
// round-trips; the reader refuses that group on a stage between the first
// and the last (the stages' steps written out, as above).
TEST(ScheduleFile, TiedEmbeddingAcrossStagesIsChecked) {
  Schedule s = compile({"model=gpt2_tiny", "model.layers=3",
                        "cluster.gpus_per_node=3", "parallel.sharding=no_shard",
                        "parallel.pipeline=3", "train.grad_accum=3"},
                       /*roll=*/true, /*tasks=*/false);
  ASSERT_EQ(s.programs.size(), 3u);
  auto embeddingSums = [](const Program &program) {
    int sums = 0;
    for (const Op &op : program.ops)
      if (const auto *sum = op.as<ops::AllReduce>())
        sums += sum->group == GroupAxis::Embedding;
    return sums;
  };
  EXPECT_EQ(embeddingSums(s.programs[0]), 1);
  EXPECT_EQ(embeddingSums(s.programs[1]), 0);
  EXPECT_EQ(embeddingSums(s.programs[2]), 1);
  Schedule back = parseSchedule(serializeSchedule(s), "t.sched").get();
  EXPECT_EQ(embeddingSums(back.programs[2]), 1);

  // The stage between them adds too: it is in no embedding group.
  Schedule middle = s;
  for (Op &op : middle.programs[1].ops)
    if (auto *sum = op.as<ops::AllReduce>())
      sum->group = GroupAxis::Embedding;
  EXPECT_HAS(validateError(middle),
             "group embedding on stage 1: only the pipeline's first and last "
             "stages are in it");
}

TEST(ScheduleFile, TensorParallelPartsAreChecked) {
  Schedule s =
      compile({"parallel.tensor=2", "parallel.sequence_parallel=true"});
  EXPECT_EQ(s.tensor, 2);
  EXPECT_TRUE(s.sequenceParallel);
  EXPECT_EQ(s.worldSize(), 2 * s.dataParallelSize());
  Schedule back = parseSchedule(serializeSchedule(s), "t.sched").get();
  EXPECT_EQ(back.tensor, 2);
  EXPECT_TRUE(back.sequenceParallel);
  bool split = false;
  for (const Unit &u : back.units)
    for (const Param &p : u.params)
      split |= p.split.has_value();
  EXPECT_TRUE(split);
  auto errorWith = [&](auto edit) {
    Schedule t = s;
    bool edited = false;
    for (Op &op : t.programs.front().ops)
      if (!edited)
        edited = std::visit([&](auto &o) { return edit(o); }, op.body);
    EXPECT_TRUE(edited);
    return validateError(t);
  };
  EXPECT_HAS(
      errorWith([](auto &o) {
        if constexpr (std::is_same_v<std::decay_t<decltype(o)>, ops::Forward>) {
          o.part = 7;
          return true;
        }
        return false;
      }),
      "part 7 is not one of the 2 parts of unit 'embed'");
  EXPECT_HAS(
      errorWith([](auto &o) {
        if constexpr (std::is_same_v<std::decay_t<decltype(o)>, ops::Forward>) {
          if (o.part != 1)
            return false;
          o.in = o.saves;
          return true;
        }
        return false;
      }),
      "in buffer");
  EXPECT_HAS(
      errorWith([](auto &o) {
        if constexpr (std::is_same_v<std::decay_t<decltype(o)>, ops::Loss>) {
          o.stats = -1;
          return true;
        }
        return false;
      }),
      "stats are missing");
}

// A schedule built in memory can hold what no file can spell: enumeration
// values without a keyword, persistent bytes of a space without an arena.
TEST(ScheduleFile, ValidationCatchesWhatOnlyMemoryCanHold) {
  auto errorInMemory = [](const std::function<void(Schedule &)> &edit) {
    Schedule s = tiny();
    edit(s);
    return validateError(s);
  };
  EXPECT_EQ(errorInMemory([&](Schedule &s) {
              s.programs.front().buffers[0].type = static_cast<ElementType>(7);
            }),
            "t.sched: buffer 0 type holds no value of its enumeration (7)");
  EXPECT_EQ(errorInMemory([&](Schedule &s) {
              s.model.family = static_cast<ModelFamily>(9);
            }),
            "t.sched: model.family holds no value of its enumeration (9)");
  EXPECT_HAS(errorInMemory([&](Schedule &s) {
               s.units[1].kind = static_cast<UnitKind>(200);
             }),
             "kind holds no value of its enumeration (200)");
  // The writer does not validate, but spells what has no keyword "?",
  // which no reader accepts.
  Schedule odd = tiny();
  odd.model.family = static_cast<ModelFamily>(9);
  EXPECT_HAS(parseError(serializeSchedule(odd)),
             "model.family: unknown value '?'");
  EXPECT_HAS(errorAfter([&](Schedule &s) {
               s.programs.front().persistentBytes[Space::Host] = 0;
             }),
             "t.sched: persistent_bytes of host exceed its arena_bytes");
}

TEST(ScheduleFile, ValidationCatchesBadBuffers) {
  auto viewIndex = [](const Schedule &s) {
    for (size_t i = 0; i < s.programs.front().buffers.size(); ++i)
      if (s.programs.front().buffers[i].kind == Buffer::Kind::View)
        return i;
    throw std::runtime_error("no view");
  };
  EXPECT_HAS(errorAfter([&](Schedule &s) {
               Buffer &v = s.programs.front().buffers[viewIndex(s)];
               v.viewOffset = s.programs.front().buffers[v.source].numel;
             }),
             "lie outside its source");
  EXPECT_HAS(errorAfter([&](Schedule &s) {
               Buffer &v = s.programs.front().buffers[viewIndex(s)];
               v.source = int64_t(viewIndex(s));
             }),
             "is not an earlier buffer");
  EXPECT_HAS(errorAfter([&](Schedule &s) {
               s.programs.front().buffers[0].offset =
                   s.programs.front().arenaBytes[Space::Device];
             }),
             "lie outside the device arena");
  EXPECT_HAS(errorAfter([&](Schedule &s) {
               s.programs.front().buffers[0].offset = -256;
             }),
             "lie outside the device arena");
  EXPECT_HAS(errorAfter([&](Schedule &s) {
               s.programs.front().arenaBytes.clear();
               s.programs.front().persistentBytes.clear();
             }),
             "no arena for memory space device");
  EXPECT_HAS(errorAfter([&](Schedule &s) {
               s.programs.front().persistentBytes[Space::Device] = 256;
             }),
             "outside the persistent block");
  EXPECT_HAS(
      errorAfter([&](Schedule &s) { s.programs.front().workspaceBytes = -1; }),
      "workspace_bytes is negative");
  EXPECT_HAS(errorAfter([&](Schedule &s) {
               s.programs.front().buffers[0].sharded = false;
             }),
             "all of group 'fsdp.root' must have 65600 elements, not 32800");
  EXPECT_HAS(errorAfter([&](Schedule &s) {
               s.programs.front().buffers[0].group = "fsdp.x";
             }),
             "unknown group 'fsdp.x'");
  EXPECT_HAS(
      errorAfter([&](Schedule &s) { s.programs.front().buffers[0].numel = 0; }),
      "numel 0 out of range");
}

// A backward that reads trained `tied` parameters must add into
// `tied_grads`; one whose tie is a LoRA base (frozen) must not.
TEST(ScheduleFile, ValidationCatchesATiedBackwardWithoutItsGradients) {
  Schedule gpt2 = compile({"model=gpt2_tiny"});
  bool edited = false;
  for (Op &op : gpt2.programs.front().ops)
    if (auto *backward = op.as<ops::Backward>();
        backward && backward->tied >= 0) {
      backward->tiedGrads = -1;
      edited = true;
      break;
    }
  ASSERT_TRUE(edited);
  EXPECT_HAS(validateError(gpt2),
             "tied_grads must be given exactly when tied is and the tied "
             "parameters train (these are trained)");

  Schedule lora = compile({"model=gpt2_tiny", "model.lora.rank=4"});
  EXPECT_NO_THROW(validateSchedule(lora, "lora"));
  edited = false;
  for (Op &op : lora.programs.front().ops)
    if (auto *backward = op.as<ops::Backward>();
        backward && backward->tied >= 0) {
      ASSERT_LT(backward->tiedGrads, 0);
      backward->tiedGrads = backward->tied;
      edited = true;
      break;
    }
  ASSERT_TRUE(edited);
  EXPECT_HAS(validateError(lora), "(these are a frozen base)");
}

// A LoRA schedule: frozen parameters in their own elements, groups with
// their frozen layout, frozen operands where a unit has a base.
TEST(ScheduleFile, ValidationCatchesBadLoraLayouts) {
  Schedule lora = compile({"model.lora.rank=4"});
  auto errorIn = [&](const std::function<void(Schedule &)> &edit) {
    Schedule s = lora;
    edit(s);
    return validateError(s);
  };
  EXPECT_HAS(errorIn([](Schedule &s) { s.units[1].frozenNumel += 1; }),
             "unit 'layers.0': frozen_numel");
  EXPECT_HAS(errorIn([](Schedule &s) { s.groups[0].frozenPaddedNumel += 2; }),
             "frozen_padded_numel");
  EXPECT_HAS(errorIn([](Schedule &s) {
               for (Param &p : s.units[1].params)
                 if (p.frozen) {
                   p.frozen = false;
                   break;
                 }
             }),
             "unit 'layers.0'");
  EXPECT_HAS(errorIn([](Schedule &s) { s.model.lora.reset(); }),
             "frozen parameters, but the model has no lora");
  EXPECT_HAS(errorIn([](Schedule &s) {
               for (Op &op : s.programs.front().ops)
                 if (auto *forward = op.as<ops::Forward>();
                     forward && forward->frozen >= 0) {
                   forward->frozen = -1;
                   break;
                 }
             }),
             "has no frozen");
}

// A QLoRA schedule: a block's frozen base is bytes (NF4 weights, dense
// norms), its group's sizes count bytes, and compute reads it only through
// dequantize.
TEST(ScheduleFile, ValidationCatchesBadQuantizedBases) {
  Schedule qlora = compile({"model.lora.rank=4", "model.base=nf4"});
  EXPECT_NO_THROW(validateSchedule(qlora, "qlora"));
  // The file keeps each frozen parameter's storage.
  Schedule back = parseSchedule(serializeSchedule(qlora), "q.sched").get();
  ASSERT_EQ(back.units[1].params[0].base, BaseStorage::NF4);
  EXPECT_TRUE(back.units[1].hasQuantizedBase());
  EXPECT_EQ(back.groups[1].frozenNumel, back.units[1].frozenBytes());
  auto errorIn = [&](const std::function<void(Schedule &)> &edit) {
    Schedule s = qlora;
    edit(s);
    return validateError(s);
  };
  // Another storage changes the bytes the group must hold.
  EXPECT_HAS(errorIn([](Schedule &s) {
               s.units[1].params[0].base = BaseStorage::BF16;
             }),
             "group 'fsdp.layers.0': frozen_numel");
  // Compute reading the bytes, or dequantize into another unit's size.
  EXPECT_HAS(errorIn([](Schedule &s) {
               for (Op &op : s.programs.front().ops)
                 if (auto *dq = op.as<ops::Dequantize>()) {
                   for (Op &use : s.programs.front().ops)
                     if (auto *forward = use.as<ops::Forward>();
                         forward && forward->frozen == dq->dst)
                       forward->frozen = dq->src;
                   break;
                 }
             }),
             "a base stored otherwise is converted by dequantize first");
  EXPECT_HAS(errorIn([](Schedule &s) {
               for (Op &op : s.programs.front().ops)
                 if (auto *dq = op.as<ops::Dequantize>()) {
                   dq->unit = 0;
                   break;
                 }
             }),
             "unit 'embed'");
  // Bytes are a frozen base's only.
  EXPECT_HAS(errorIn([](Schedule &s) {
               for (Buffer &b : s.programs.front().buffers)
                 if (b.role == BufferRole::Grad &&
                     b.kind == Buffer::Kind::Alloc) {
                   b.type = ElementType::I8;
                   break;
                 }
             }),
             "only a frozen base is stored in bytes (i8)");
}

TEST(ScheduleFile, ValidationCatchesBadUnitsAndGroups) {
  EXPECT_HAS(errorAfter([](Schedule &s) { s.units[1].numel += 1; }),
             "unit 'layers.0': numel 46209 is not the 46208 elements");
  EXPECT_HAS(errorAfter([](Schedule &s) { s.units[1].params[1].offset += 8; }),
             "is at offset 4104, expected 4096");
  EXPECT_HAS(
      errorAfter([](Schedule &s) { s.units[1].params.back().shape = {65}; }),
      "ends past the unit's numel");
  EXPECT_HAS(errorAfter([](Schedule &s) {
               s.units[3].params[1].tiedTo = "nowhere"; // lm_head
               s.units[3].numel -= 512 * 64;
             }),
             "tied to 'nowhere', which is no stored parameter");
  EXPECT_HAS(errorAfter([](Schedule &s) { s.groups[1].units = {"nope"}; }),
             "group 'fsdp.layers.0': unknown unit 'nope'");
  EXPECT_HAS(
      errorAfter([](Schedule &s) { s.groups[2].units.push_back("layers.0"); }),
      "numel");
  EXPECT_HAS(errorAfter([](Schedule &s) {
               s.groups[1].paddedNumel += 1;
               s.groups[1].shardNumel = s.groups[1].paddedNumel / 2;
             }),
             "is not numel rounded up to a multiple of the shard axis 2");
  EXPECT_HAS(errorAfter([](Schedule &s) { s.groups[1].shardNumel -= 1; }),
             "shard_numel 23103 x shard 2 is not padded_numel 46208");
  EXPECT_HAS(errorAfter([](Schedule &s) { s.shard = 4; }),
             "is not the cluster's 1 x 2 ranks");
  EXPECT_HAS(errorAfter([](Schedule &s) { s.microBatches = 2; }),
             "micro_batches 2 is not train.grad_accum 1");
  // model.family is an enumeration now: an unknown family can only come
  // from a file (MissingFieldsAndWrongTypes).
}

/// Every value's JSON pointer in `j`, containers included.
void collectPointers(const Json &j, const Json::json_pointer &at,
                     std::vector<Json::json_pointer> &out) {
  out.push_back(at);
  if (j.is_object())
    for (auto it = j.begin(); it != j.end(); ++it)
      collectPointers(it.value(), at / it.key(), out);
  else if (j.is_array())
    for (size_t i = 0; i < j.size(); ++i)
      collectPointers(j[i], at / i, out);
}

// Random edits of well-formed files (valid CRC): ids out of range, huge and
// negative sizes, wrong types, missing members. The reader either accepts
// the file or throws ScheduleFileError; anything else (another exception, a
// crash, a hang) fails the test.
TEST(ScheduleFile, RandomEditsAreRejectedOrAcceptedNeverACrash) {
  // The third holds a task and its runs (gradient accumulation's repeat),
  // the fourth two tasks with slot buffers and slot events.
  std::vector<Schedule> schedules = {
      tiny(),
      compile({"train.precision=fp16_mixed", "parallel.offload.optimizer=cpu",
               "train.grad_accum=2", "train.grad_clip=1.0", "model=gpt2_tiny"}),
      compile({"train.grad_accum=6", "parallel.tensor=2"}),
      forwardBackward(2, 2, oneForwardOneBackward())};
  ASSERT_EQ(schedules[2].programs.front().tasks.size(), 1u);
  ASSERT_EQ(validateError(schedules[3]), "");
  const std::vector<Json> replacements = {-1,
                                          0,
                                          1,
                                          2,
                                          3,
                                          255,
                                          int64_t(1) << 40,
                                          int64_t(1) << 62,
                                          std::numeric_limits<int64_t>::min(),
                                          std::numeric_limits<int64_t>::max(),
                                          1e300,
                                          -0.5,
                                          "",
                                          "device",
                                          "all_gather",
                                          true,
                                          nullptr,
                                          Json::array(),
                                          Json::object()};
  std::mt19937 random(1234);
  size_t rejected = 0, trials = 0;
  for (const Schedule &schedule : schedules) {
    Json body = bodyOf(serializeSchedule(schedule));
    std::vector<Json::json_pointer> pointers;
    collectPointers(body, Json::json_pointer(), pointers);
    for (int i = 0; i < 1000; ++i, ++trials) {
      Json edited = body;
      const Json::json_pointer &at =
          pointers[1 + random() % (pointers.size() - 1)];
      if (random() % 5 == 0) {
        Json &parent = edited[at.parent_pointer()];
        if (parent.is_object())
          parent.erase(at.back());
        else
          parent.erase(std::stoul(at.back()));
      } else {
        edited[at] = replacements[random() % replacements.size()];
      }
      try {
        parseSchedule(wrap(edited.dump()), "t.sched");
      } catch (const ScheduleFileError &e) {
        ++rejected;
        ASSERT_EQ(std::string(e.what()).find('\n'), std::string::npos);
      } catch (const std::exception &e) {
        FAIL() << at.to_string() << ": " << e.what();
      }
    }
  }
  // Most edits break something; a few (a line number, a name) do not.
  EXPECT_GT(rejected, trials / 2);
}

//===----------------------------------------------------------------------===//
// Files
//===----------------------------------------------------------------------===//

class ScheduleFileOnDisk : public ::testing::Test {
protected:
  void SetUp() override {
    dir = std::filesystem::temp_directory_path() /
          ("schedule-file-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
  }
  void TearDown() override { std::filesystem::remove_all(dir); }
  std::filesystem::path dir;
};

TEST_F(ScheduleFileOnDisk, WritesAtomicallyAndReadsBack) {
  std::string path = (dir / "tiny.sched").string();
  ValidSchedule valid = validateSchedule(tiny(), "tiny");
  writeScheduleFile(valid, path);
  writeScheduleFile(valid, path); // replaces
  ValidSchedule read = readScheduleFile(path);
  EXPECT_EQ(serializeSchedule(read), serializeSchedule(tiny()));
  // Only the file itself: no temporary left behind.
  size_t entries = 0;
  for (const auto &entry : std::filesystem::directory_iterator(dir)) {
    ++entries;
    EXPECT_EQ(entry.path().filename(), "tiny.sched");
  }
  EXPECT_EQ(entries, 1u);
}

TEST_F(ScheduleFileOnDisk, WriterRefusesAnInvalidSchedule) {
  // The writer takes only a ValidSchedule, and validation is the only way
  // to make one from a Schedule.
  static_assert(!std::is_constructible_v<ValidSchedule, Schedule>);
  static_assert(!std::is_constructible_v<ValidSchedule, const Schedule &>);
  static_assert(!std::is_convertible_v<const Schedule &, ValidSchedule>);
  static_assert(
      std::is_invocable_v<decltype(&writeScheduleFile), const ValidSchedule &,
                          const std::string &>);
  Schedule s = tiny();
  opAt<ops::Alloc>(s, 0).buffer = -1;
  std::string path = (dir / "bad.sched").string();
  EXPECT_THROW(writeScheduleFile(validateSchedule(s, path), path),
               ScheduleFileError);
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST_F(ScheduleFileOnDisk, OneLineErrorsForFileProblems) {
  auto readError = [](const std::string &path) -> std::string {
    try {
      readScheduleFile(path);
    } catch (const ScheduleFileError &e) {
      return e.what();
    }
    return "";
  };
  std::string missing = (dir / "missing.sched").string();
  EXPECT_EQ(readError(missing),
            missing + ": cannot open: No such file or directory");
  EXPECT_EQ(readError(dir.string()), dir.string() + ": not a regular file");
  std::string cut = (dir / "cut.sched").string();
  std::string file = serializeSchedule(tiny());
  std::ofstream(cut, std::ios::binary) << file.substr(0, file.size() / 2);
  EXPECT_HAS(readError(cut), cut + ": truncated");
  try {
    writeScheduleFile(validateSchedule(tiny(), "tiny"),
                      (dir / "no" / "such" / "x.sched").string());
    ADD_FAILURE() << "wrote into a missing directory";
  } catch (const ScheduleFileError &e) {
    EXPECT_HAS(e.what(), "cannot create a temporary file");
  }
}

} // namespace
