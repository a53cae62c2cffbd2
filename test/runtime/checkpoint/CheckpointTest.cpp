//===- CheckpointTest.cpp - Save, restore, reshard, export checkpoints ----===//
//
// Hand-built schedules of the tiny Llama / GPT-2 models (units as the
// compiler lays them out, ModelTestSupport.h) with only persistent state
// buffers: the test fills them from a per-unit "truth", saves, and restores
// into the same or another layout (mesh, sharding, wrapping, precision). The
// ranks of a mesh are threads with Gloo process groups over one HashStore.
//
//===----------------------------------------------------------------------===//

#include "Checkpoint.h"
#include "DeviceBackend.h"
#include "Files.h"
#include "ModelTestSupport.h"
#include "SafeTensors.h"
#include "TempDir.h"
#include "TestSupport.h"
#include "ToyModel.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace plan::rt::test {
namespace {

// Every executor of these tests runs on the host.
const std::unique_ptr<DeviceBackend> cpu = DeviceBackend::createCpu();

//===----------------------------------------------------------------------===//
// Files
//===----------------------------------------------------------------------===//

void removeAll(const std::string &path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0)
    return;
  if (S_ISDIR(st.st_mode)) {
    if (DIR *d = ::opendir(path.c_str())) {
      std::vector<std::string> children;
      while (dirent *e = ::readdir(d)) {
        std::string n = e->d_name;
        if (n != "." && n != "..")
          children.push_back(n);
      }
      ::closedir(d);
      for (const std::string &c : children)
        removeAll(path + "/" + c);
    }
    ::rmdir(path.c_str());
  } else {
    ::unlink(path.c_str());
  }
}

/// A scratch directory removed with everything below it.
class TempTree {
public:
  TempTree() : path_(dir_.path()) {}
  ~TempTree() {
    // TempDir removes the directory itself once it is empty.
    for (const std::string &name : list(path_))
      removeAll(path_ + "/" + name);
  }
  const std::string &path() const { return path_; }
  std::string at(const std::string &name) const { return path_ + "/" + name; }

  static std::vector<std::string> list(const std::string &dir) {
    std::vector<std::string> names;
    if (DIR *d = ::opendir(dir.c_str())) {
      while (dirent *e = ::readdir(d)) {
        std::string n = e->d_name;
        if (n != "." && n != "..")
          names.push_back(n);
      }
      ::closedir(d);
    }
    std::sort(names.begin(), names.end());
    return names;
  }

private:
  TempDir dir_;
  std::string path_;
};

bool exists(const std::string &path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void writeFile(const std::string &path, const std::string &text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

//===----------------------------------------------------------------------===//
// Layouts
//===----------------------------------------------------------------------===//

struct Layout {
  int64_t replicate = 1, shard = 1;
  bool sharded = false;
  Precision precision = Precision::FP32;
  OptimizerKind optimizer = OptimizerKind::AdamW;
  bool oneGroup = false; // all units in one group, else one group per unit
  ModelFamily family = ModelFamily::Llama;
};

// The layouts below spell their settings without the enumerations' names.
using enum Precision;
using enum OptimizerKind;
using enum ModelFamily;

int64_t numelOf(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// The schedule of `layout`: its persistent state buffers (ScheduleBuilder:
/// each at its own 256-byte-aligned offset, arenas sized to fit), validated.
ValidSchedule makeSchedule(const Layout &layout) {
  ModelConfig model = layout.family == ModelFamily::GPT2 ? tinyGpt2Config()
                      : layout.family == ModelFamily::Bert
                          ? tinyBertConfig(BertHead::MaskedLM)
                          : tinyLlamaConfig();
  Schedule base = layout.family == ModelFamily::GPT2   ? gpt2Schedule(model)
                  : layout.family == ModelFamily::Bert ? bertSchedule(model)
                                                       : llamaSchedule(model);
  ScheduleBuilder b(layout.replicate, layout.shard);
  Schedule &s = b.s;
  s.planName = "checkpoint_test";
  s.model = base.model;
  s.units = base.units;
  s.train.precision = layout.precision;
  s.train.optimizer.kind = layout.optimizer;
  // SGD keeps a momentum buffer only with momentum.
  if (layout.optimizer == OptimizerKind::SGD)
    s.train.optimizer.momentum = 0.9;
  s.sharding = layout.sharded ? Sharding::FullShard : Sharding::NoShard;
  if (layout.precision == Precision::FP16Mixed)
    s.train.lossScale.kind = LossScaleKind::Dynamic;

  std::vector<std::vector<std::string>> wrapping;
  if (layout.oneGroup) {
    wrapping.emplace_back();
    for (const Unit &u : s.units)
      wrapping.back().push_back(u.name);
  } else {
    for (const Unit &u : s.units)
      wrapping.push_back({u.name});
  }
  const ElementType low =
      layout.precision == Precision::BF16Mixed   ? ElementType::BF16
      : layout.precision == Precision::FP16Mixed ? ElementType::F16
                                                 : ElementType::F32;
  const bool mixed = layout.precision != Precision::FP32;
  for (const auto &units : wrapping) {
    // Padded to a multiple of the shard axis (ScheduleBuilder::group).
    const std::string name =
        "fsdp." + (layout.oneGroup ? std::string("root") : units.front());
    b.group(name, units);
    auto state = [&](ElementType type, BufferRole role) {
      b.state(name, role, type, layout.sharded);
    };
    state(low, BufferRole::Param);
    if (mixed)
      state(ElementType::F32, BufferRole::Master);
    state(low, BufferRole::Grad);
    if (layout.optimizer == OptimizerKind::AdamW) {
      state(ElementType::F32, BufferRole::ExpAvg);
      state(ElementType::F32, BufferRole::ExpAvgSq);
    } else {
      state(ElementType::F32, BufferRole::Momentum);
    }
  }
  if (layout.precision == Precision::FP16Mixed) {
    int64_t scale =
        b.alloc("loss_scale", 1, ElementType::F32, true, BufferRole::LossScale);
    int64_t found =
        b.alloc("found_inf", 1, ElementType::F32, true, BufferRole::Scalar);
    b.op(ops::UpdateLossScale{.lossScale = scale, .foundInf = found});
  }
  return b.valid();
}

/// The model's state as full per-unit fp32 vectors: "weights" (params and
/// master weights) and one per optimizer moment.
using Truth = std::map<std::string, std::map<std::string, at::Tensor>>;

Truth makeTruth(const Schedule &s, uint64_t seed) {
  Truth truth;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  for (const Unit &u : s.units)
    for (const char *key : {"weights", "exp_avg", "exp_avg_sq", "momentum"})
      truth[u.name][key] = at::randn({u.numel}, gen, at::kFloat);
  return truth;
}

/// What buffer `b` of a rank with shard index `shardIndex` holds when the
/// model's state is `truth`.
at::Tensor expectedContents(const Schedule &s, const Buffer &b, int shardIndex,
                            const Truth &truth) {
  std::string key =
      (b.role == BufferRole::Param || b.role == BufferRole::Master)
          ? "weights"
          : toString(b.role);
  const Group *group = nullptr;
  for (const Group &g : s.groups)
    if (g.name == b.group)
      group = &g;
  at::Tensor flat = at::zeros({group->paddedNumel}, at::kFloat);
  int64_t offset = 0;
  for (const std::string &u : group->units) {
    const at::Tensor &values = truth.at(u).at(key);
    flat.narrow(0, offset, values.numel()).copy_(values);
    offset += values.numel();
  }
  if (b.sharded)
    flat = flat.narrow(0, shardIndex * group->shardNumel, group->shardNumel);
  at::ScalarType type = b.type == ElementType::BF16  ? at::kBFloat16
                        : b.type == ElementType::F16 ? at::kHalf
                                                     : at::kFloat;
  return flat.to(type);
}

bool isState(const Buffer &b) {
  return b.kind == Buffer::Kind::Alloc && b.persistent && !b.group.empty();
}

bool bitwiseEqual(const at::Tensor &a, const at::Tensor &b) {
  if (a.scalar_type() != b.scalar_type() || a.numel() != b.numel())
    return false;
  at::Tensor x = a.contiguous(), y = b.contiguous();
  return std::memcmp(x.data_ptr(), y.data_ptr(),
                     x.numel() * x.element_size()) == 0;
}

/// Fills every state buffer from `truth` and gradients with garbage.
void fillState(const Schedule &s, Executor &executor, Comm &comm,
               const Truth &truth) {
  for (size_t id = 0; id < s.programs.front().buffers.size(); ++id) {
    const Buffer &b = s.programs.front().buffers[id];
    if (!isState(b))
      continue;
    at::Tensor t = executor.buffer(static_cast<int64_t>(id));
    if (b.role == BufferRole::Grad)
      t.fill_(3.0);
    else
      t.copy_(expectedContents(s, b, comm.groupRank(GroupAxis::Shard), truth));
  }
}

/// Expects every state buffer to hold what `truth` says (gradients zero).
void expectState(const Schedule &s, Executor &executor, Comm &comm,
                 const Truth &truth) {
  for (size_t id = 0; id < s.programs.front().buffers.size(); ++id) {
    const Buffer &b = s.programs.front().buffers[id];
    if (!isState(b))
      continue;
    at::Tensor t = executor.buffer(static_cast<int64_t>(id));
    if (b.role == BufferRole::Grad) {
      EXPECT_EQ(t.abs().sum().item<double>(), 0.0) << b.name;
      continue;
    }
    at::Tensor want =
        expectedContents(s, b, comm.groupRank(GroupAxis::Shard), truth);
    EXPECT_TRUE(bitwiseEqual(t, want))
        << "rank " << comm.rank() << ": " << b.name << " differs";
  }
}

/// Runs `body(rank, comm)` for every rank of `s`'s mesh: in this process at
/// world 1, else in one forked process per rank (TestSupport.h's
/// forEachRank). Threads would share LibTorch's process-wide collective
/// recorder, which is not made for several process groups of one world in
/// one process.
void runRanks(const Schedule &s, const std::function<void(int, Comm &)> &body) {
  const int world = static_cast<int>(s.worldSize());
  if (world == 1) {
    auto store = c10::make_intrusive<c10d::HashStore>();
    auto comm = Comm::createGloo(store, 0, 1, s, std::chrono::seconds(20));
    body(0, *comm);
    return;
  }
  test::forEachRank(s, body, std::chrono::seconds(20),
                    std::chrono::seconds(60));
}

CheckpointInfo infoAt(int64_t step) {
  CheckpointInfo info;
  info.step = step;
  info.seed = 1234;
  info.data = "synthetic";
  info.sequencesConsumed = step * 8;
  info.globalBatch = 8;
  return info;
}

/// Saves `truth` in `layout` at `step` (counters as given) under `root`.
void saveLayout(const Layout &layout, const Truth &truth,
                const std::string &root, int64_t step,
                const ExecutorCounters &counters = {},
                const SaveOptions &options = {}) {
  const ValidSchedule s = makeSchedule(layout);
  runRanks(s, [&](int, Comm &comm) {
    ToyModel model(static_cast<int64_t>(s->units.size()));
    Executor executor(s, model, comm, *cpu);
    executor.clearState();
    fillState(s, executor, comm, truth);
    ExecutorCounters c = counters;
    if (!executor.counters().lossScale)
      c.lossScale.reset();
    executor.setCounters(c);
    saveCheckpoint(root, infoAt(step), s, executor, comm, options);
  });
}

/// Restores the newest checkpoint under `root` into `layout` and checks the
/// state against `truth` (in the target's dtypes).
void restoreAndExpect(const Layout &layout, const Truth &truth,
                      const std::string &root,
                      const ExecutorCounters &counters) {
  const ValidSchedule s = makeSchedule(layout);
  auto dir = findCheckpoint(root);
  ASSERT_TRUE(dir.has_value());
  runRanks(s, [&](int, Comm &comm) {
    ToyModel model(static_cast<int64_t>(s->units.size()));
    Executor executor(s, model, comm, *cpu);
    executor.initState(99); // something else than the checkpoint
    Checkpoint::open(*dir).restore(s, executor, comm);
    expectState(s, executor, comm, truth);
    ExecutorCounters got = executor.counters();
    EXPECT_EQ(got.optimizerSteps, counters.optimizerSteps);
    EXPECT_EQ(got.growthTracker, counters.growthTracker);
    if (got.lossScale && counters.lossScale) {
      EXPECT_EQ(*got.lossScale, *counters.lossScale);
    }
  });
}

//===----------------------------------------------------------------------===//
// SafeTensors extensions the checkpoints use
//===----------------------------------------------------------------------===//

TEST(SafeTensorsFile, MetadataAndRangesInTheStoredDtype) {
  TempDir dir;
  at::Tensor f = at::arange(10, at::kFloat);
  at::Tensor h = at::arange(6, at::kFloat).to(at::kHalf).reshape({2, 3});
  writeSafeTensors(dir.file("a.safetensors"), {{"f", f}, {"h", h}},
                   {{"plan.step", "7"}});
  SafeTensorsFile file(dir.file("a.safetensors"));
  EXPECT_EQ(file.metadata().at("plan.step"), "7");
  EXPECT_EQ(file.metadata().at("format"), "pt");
  EXPECT_EQ(file.names(), (std::vector<std::string>{"f", "h"}));
  EXPECT_EQ(file.dtype("h"), "F16");
  EXPECT_EQ(file.shape("h"), (std::vector<int64_t>{2, 3}));
  EXPECT_TRUE(bitwiseEqual(file.read("f", 3, 4), f.narrow(0, 3, 4)));
  EXPECT_TRUE(bitwiseEqual(file.read("h"), h.reshape(-1)));
  EXPECT_TRUE(bitwiseEqual(file.readFloat("h"), h.to(at::kFloat)));
  EXPECT_THROW(file.read("f", 8, 3), WeightsError);
  EXPECT_THROW(file.read("nope"), WeightsError);
  // The old signature still writes {"format": "pt"} only.
  writeSafeTensors(dir.file("b.safetensors"), {{"f", f}});
  SafeTensorsFile plain(dir.file("b.safetensors"));
  EXPECT_EQ(plain.metadata().size(), 1u);
}

//===----------------------------------------------------------------------===//
// Same layout: bitwise
//===----------------------------------------------------------------------===//

class SameLayout : public ::testing::TestWithParam<Layout> {};

TEST_P(SameLayout, RestoreIsBitwise) {
  const Layout layout = GetParam();
  const ValidSchedule s = makeSchedule(layout);
  Truth truth = makeTruth(s, 7);
  TempTree root;
  ExecutorCounters counters;
  counters.optimizerSteps = 7;
  counters.lossScale = 1024.0;
  counters.growthTracker = 3;
  runRanks(s, [&](int rank, Comm &comm) {
    ToyModel model(static_cast<int64_t>(s->units.size()));
    Executor executor(s, model, comm, *cpu);
    executor.clearState();
    fillState(s, executor, comm, truth);
    ExecutorCounters c = counters;
    if (!executor.counters().lossScale)
      c.lossScale.reset();
    executor.setCounters(c);
    std::map<std::string, at::Tensor> before;
    for (size_t id = 0; id < s->programs.front().buffers.size(); ++id)
      if (isState(s->programs.front().buffers[id]))
        before[s->programs.front().buffers[id].name] =
            executor.buffer(static_cast<int64_t>(id)).clone();
    SaveResult r =
        saveCheckpoint(root.path(), infoAt(5), s, executor, comm, {});
    EXPECT_EQ(r.directory, root.at("step-00000005"));
    EXPECT_GT(r.bytes, 0);

    // A second executor of the same schedule gets the same bits back.
    Executor other(s, model, comm, *cpu);
    other.initState(42);
    Checkpoint c2 = Checkpoint::open(r.directory);
    c2.restore(s, other, comm);
    for (size_t id = 0; id < s->programs.front().buffers.size(); ++id) {
      const Buffer &b = s->programs.front().buffers[id];
      if (!isState(b))
        continue;
      at::Tensor got = other.buffer(static_cast<int64_t>(id));
      if (b.role == BufferRole::Grad)
        EXPECT_EQ(got.abs().sum().item<double>(), 0.0) << b.name;
      else
        EXPECT_TRUE(bitwiseEqual(got, before[b.name]))
            << "rank " << rank << ": " << b.name;
    }
    ExecutorCounters got = other.counters();
    EXPECT_EQ(got.optimizerSteps, 7);
    EXPECT_EQ(got.growthTracker, 3);
    EXPECT_EQ(got.lossScale, c.lossScale);
  });
  // checkpoint.json describes the run.
  Checkpoint c = Checkpoint::open(root.at("step-00000005"));
  EXPECT_EQ(c.info().step, 5);
  EXPECT_EQ(c.info().seed, 1234u);
  EXPECT_EQ(c.info().data, "synthetic");
  EXPECT_EQ(c.info().sequencesConsumed, 40);
  EXPECT_EQ(c.info().globalBatch, 8);
  EXPECT_EQ(c.replicate(), layout.replicate);
  EXPECT_EQ(c.shard(), layout.shard);
  EXPECT_EQ(c.optimizer(), layout.optimizer);
  EXPECT_EQ(c.precision(), layout.precision);
  EXPECT_EQ(c.files().size(), static_cast<size_t>(s->worldSize()));
  EXPECT_NO_THROW(c.verify());
  EXPECT_EQ(c.counters().optimizerSteps, 7);
  EXPECT_EQ(c.counters().lossScale.has_value(),
            layout.precision == Precision::FP16Mixed);
  // Only replicate index 0 holds sharded state; only rank 0 unsharded state.
  for (const CheckpointFile &f : c.files()) {
    SafeTensorsFile file(f.path);
    bool holds = !file.names().empty();
    bool owner = layout.sharded ? f.rank < layout.shard : f.rank == 0;
    EXPECT_EQ(holds, owner) << f.path;
    EXPECT_TRUE(file.metadata().count("plan.rng_state")) << f.path;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, SameLayout,
    ::testing::Values(Layout{1, 1, false, FP32, AdamW, false, Llama},
                      Layout{1, 2, true, BF16Mixed, AdamW, false, Llama},
                      Layout{2, 2, true, FP16Mixed, AdamW, true, Llama},
                      Layout{2, 1, false, BF16Mixed, SGD, false, GPT2},
                      Layout{1, 3, true, FP16Mixed, SGD, true, GPT2}));

TEST(Checkpoint, RestoresTheRngStateAtTheSameWorldSize) {
  Layout layout;
  const ValidSchedule s = makeSchedule(layout);
  Truth truth = makeTruth(s, 1);
  TempTree root;
  saveLayout(layout, truth, root.path(), 1);
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  // The state saved is the one at the save; draw from it to know the next
  // numbers, then move the generator on and restore.
  Checkpoint c = Checkpoint::open(*findCheckpoint(root.path()));
  SafeTensorsFile file(c.files()[0].path);
  ASSERT_TRUE(file.metadata().count("plan.rng_state"));
  runRanks(s, [&](int, Comm &comm) {
    ToyModel model(static_cast<int64_t>(s->units.size()));
    Executor executor(s, model, comm, *cpu);
    c.restore(s, executor, comm);
  });
  at::Tensor first = at::randn({16}, gen);
  (void)at::randn({100}, gen);
  runRanks(s, [&](int, Comm &comm) {
    ToyModel model(static_cast<int64_t>(s->units.size()));
    Executor executor(s, model, comm, *cpu);
    c.restore(s, executor, comm);
  });
  at::Tensor again = at::randn({16}, gen);
  EXPECT_TRUE(bitwiseEqual(first, again));
}

//===----------------------------------------------------------------------===//
// Resharding
//===----------------------------------------------------------------------===//

TEST(Checkpoint, ReshardsTwoShardedRanksToOneUnshardedRank) {
  Layout from{1, 2, true, BF16Mixed, AdamW, false, Llama};
  Layout to{1, 1, false, FP32, AdamW, true, Llama};
  Truth truth = makeTruth(makeSchedule(from), 11);
  TempTree root;
  ExecutorCounters counters{9, std::nullopt, 0};
  saveLayout(from, truth, root.path(), 9, counters);
  // The fp32 params come from the fp32 master weights: exactly the truth.
  restoreAndExpect(to, truth, root.path(), counters);
}

TEST(Checkpoint, ReshardsOneUnshardedRankToTwoByTwoSharded) {
  Layout from{1, 1, false, FP32, AdamW, true, Llama};
  Layout to{2, 2, true, BF16Mixed, AdamW, false, Llama};
  Truth truth = makeTruth(makeSchedule(from), 12);
  TempTree root;
  ExecutorCounters counters{4, std::nullopt, 0};
  saveLayout(from, truth, root.path(), 4, counters);
  restoreAndExpect(to, truth, root.path(), counters);
}

TEST(Checkpoint, ReshardsFourShardsToTwoAndFullShardToNoShard) {
  Layout from{1, 4, true, FP16Mixed, SGD, false, GPT2};
  Truth truth = makeTruth(makeSchedule(from), 13);
  TempTree root;
  ExecutorCounters counters{6, 2048.0, 17};
  saveLayout(from, truth, root.path(), 6, counters);
  restoreAndExpect({1, 2, true, FP16Mixed, SGD, true, GPT2}, truth, root.path(),
                   counters);
  restoreAndExpect({2, 1, false, FP16Mixed, SGD, false, GPT2}, truth,
                   root.path(), counters);
  // bf16 has no loss scale: the saved one is dropped.
  restoreAndExpect({1, 3, true, BF16Mixed, SGD, false, GPT2}, truth,
                   root.path(), counters);
}

TEST(Checkpoint, WeightsAreTheFullModel) {
  Layout from{1, 2, true, BF16Mixed, AdamW, false, Llama};
  const ValidSchedule s = makeSchedule(from);
  Truth truth = makeTruth(s, 14);
  TempTree root;
  saveLayout(from, truth, root.path(), 1);
  Checkpoint c = Checkpoint::open(*findCheckpoint(root.path()));
  auto weights = c.weights();
  auto params = c.params();
  ASSERT_EQ(weights.size(), params.size());
  size_t i = 0;
  for (const Unit &u : s->units)
    for (const Param &p : u.params) {
      if (!p.tiedTo.empty())
        continue;
      ASSERT_EQ(weights[i].first, p.name);
      EXPECT_EQ(params[i].shape, p.shape);
      at::Tensor want = truth[u.name]["weights"]
                            .narrow(0, p.offset, numelOf(p.shape))
                            .reshape(p.shape);
      EXPECT_TRUE(bitwiseEqual(weights[i].second, want)) << p.name;
      ++i;
    }
}

//===----------------------------------------------------------------------===//
// Atomicity, pruning
//===----------------------------------------------------------------------===//

TEST(Checkpoint, AFailedSaveLeavesThePreviousCheckpoint) {
  Layout layout{1, 2, true, BF16Mixed, AdamW, false, Llama};
  const ValidSchedule s = makeSchedule(layout);
  Truth truth = makeTruth(s, 21), other = makeTruth(s, 22);
  TempTree root;
  ExecutorCounters counters{1, std::nullopt, 0};
  saveLayout(layout, truth, root.path(), 1, counters);

  // Rank 1 "crashes" mid-save: its shard is truncated and the hook throws.
  runRanks(s, [&](int rank, Comm &comm) {
    ToyModel model(static_cast<int64_t>(s->units.size()));
    Executor executor(s, model, comm, *cpu);
    fillState(s, executor, comm, other);
    SaveOptions options;
    options.afterShardWritten = [rank](const std::string &tmp) {
      if (rank != 1)
        return;
      struct stat st {};
      ::stat(tmp.c_str(), &st);
      if (::truncate(tmp.c_str(), st.st_size / 2) != 0)
        throw std::runtime_error("truncate failed");
      throw std::runtime_error("injected fault");
    };
    std::string error;
    try {
      saveCheckpoint(root.path(), infoAt(2), s, executor, comm, options);
      ADD_FAILURE() << "rank " << rank << ": the save succeeded";
    } catch (const CheckpointError &e) {
      error = e.what();
    }
    if (rank == 1) {
      EXPECT_NE(error.find("rank 1 could not write its checkpoint shard"),
                std::string::npos)
          << error;
      EXPECT_NE(error.find("injected fault"), std::string::npos) << error;
    } else {
      EXPECT_NE(error.find("rank 1 could not write"), std::string::npos)
          << error;
    }
  });
  EXPECT_TRUE(exists(root.at(".step-00000002.partial")));
  EXPECT_FALSE(exists(root.at("step-00000002")));
  EXPECT_EQ(findCheckpoint(root.path()), root.at("step-00000001"));
  restoreAndExpect(layout, truth, root.path(), counters);

  // The next save cleans the partial directory up.
  saveLayout(layout, other, root.path(), 3, counters);
  EXPECT_FALSE(exists(root.at(".step-00000002.partial")));
  EXPECT_EQ(findCheckpoint(root.path()), root.at("step-00000003"));
  EXPECT_EQ(TempTree::list(root.path()),
            (std::vector<std::string>{"step-00000001", "step-00000003"}));
}

TEST(Checkpoint, AnInterruptedSaveIsIgnoredAndCleanedUp) {
  Layout layout;
  const ValidSchedule s = makeSchedule(layout);
  Truth truth = makeTruth(s, 23);
  TempTree root;
  saveLayout(layout, truth, root.path(), 4);
  // What a crash after the shard files, before checkpoint.json, leaves.
  ASSERT_EQ(::mkdir(root.at(".step-00000005.partial").c_str(), 0777), 0);
  writeFile(root.at(".step-00000005.partial/rank-00000.safetensors"), "x");
  ASSERT_EQ(::mkdir(root.at("step-00000006").c_str(), 0777), 0); // no json
  EXPECT_EQ(findCheckpoint(root.path()), root.at("step-00000004"));
  EXPECT_EQ(findCheckpoint(root.at("step-00000004")), root.at("step-00000004"));
  EXPECT_EQ(findCheckpoint(root.at("nothing-here")), std::nullopt);
  saveLayout(layout, truth, root.path(), 5);
  EXPECT_FALSE(exists(root.at(".step-00000005.partial")));
  EXPECT_EQ(findCheckpoint(root.path()), root.at("step-00000005"));
}

TEST(Checkpoint, KeepPrunesOlderCheckpoints) {
  Layout layout{1, 2, true, FP32, SGD, false, Llama};
  const ValidSchedule s = makeSchedule(layout);
  Truth truth = makeTruth(s, 31);
  TempTree root;
  SaveOptions keep2;
  keep2.keep = 2;
  for (int64_t step : {1, 2, 3, 4})
    saveLayout(layout, truth, root.path(), step, {}, keep2);
  EXPECT_EQ(TempTree::list(root.path()),
            (std::vector<std::string>{"step-00000003", "step-00000004"}));
  // Saving a step again replaces it.
  saveLayout(layout, truth, root.path(), 4, {}, keep2);
  EXPECT_EQ(TempTree::list(root.path()),
            (std::vector<std::string>{"step-00000003", "step-00000004"}));
  // keep 0 keeps everything.
  saveLayout(layout, truth, root.path(), 7);
  EXPECT_EQ(TempTree::list(root.path()).size(), 3u);
}

//===----------------------------------------------------------------------===//
// Bad checkpoints
//===----------------------------------------------------------------------===//

/// Gives an edited checkpoint.json the checksum of its new contents, as the
/// writer computes it, so that the reader's other checks are what see the
/// edit.
void resealMetadata(nlohmann::ordered_json &j) {
  j.erase("checksum");
  char hex[16];
  std::snprintf(hex, sizeof hex, "%08x", support::crc32(j.dump(1)));
  j["checksum"] = hex;
}

class BadCheckpoint : public ::testing::Test {
protected:
  void SetUp() override {
    const ValidSchedule s = makeSchedule(layout);
    truth = makeTruth(s, 41);
    saveLayout(layout, truth, root.path(), 3);
    dir = root.at("step-00000003");
  }
  /// The one-line CheckpointError that opening and restoring gives.
  std::string error(const Layout &target) {
    const ValidSchedule s = makeSchedule(target);
    std::string message;
    try {
      Checkpoint c = Checkpoint::open(dir);
      c.verify();
      c.checkCompatible(s);
    } catch (const CheckpointError &e) {
      message = e.what();
    }
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    return message;
  }
  std::string error() { return error(layout); }

  Layout layout{1, 2, true, BF16Mixed, AdamW, false, Llama};
  Truth truth;
  TempTree root;
  std::string dir;
};

TEST_F(BadCheckpoint, TheGoodOneIsFine) { EXPECT_EQ(error(), ""); }

TEST_F(BadCheckpoint, MissingShardFile) {
  ASSERT_EQ(::unlink((dir + "/rank-00001.safetensors").c_str()), 0);
  std::string e = error();
  EXPECT_NE(e.find("rank-00001.safetensors"), std::string::npos) << e;
  EXPECT_NE(e.find("missing"), std::string::npos) << e;
}

TEST_F(BadCheckpoint, TruncatedShardFile) {
  std::string path = dir + "/rank-00000.safetensors";
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  ASSERT_EQ(::truncate(path.c_str(), st.st_size / 2), 0);
  std::string e = error();
  EXPECT_NE(e.find("rank-00000.safetensors"), std::string::npos) << e;
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;
  // Every rank sees it when opening, before reading anything: a file's
  // size is checked by open(), its CRC-32 when it is first read.
  const ValidSchedule s = makeSchedule(layout);
  runRanks(s, [&](int, Comm &) {
    std::string openError;
    try {
      Checkpoint::open(dir);
    } catch (const CheckpointError &err) {
      openError = err.what();
    }
    EXPECT_NE(openError.find("truncated"), std::string::npos) << openError;
  });
}

TEST_F(BadCheckpoint, CrcMismatch) {
  std::string path = dir + "/rank-00001.safetensors";
  std::string bytes = readFile(path);
  bytes[bytes.size() - 3] ^= 0x5a;
  writeFile(path, bytes);
  std::string e = error();
  EXPECT_NE(e.find("rank-00001.safetensors"), std::string::npos) << e;
  EXPECT_NE(e.find("CRC-32"), std::string::npos) << e;
}

TEST_F(BadCheckpoint, MalformedMetadata) {
  writeFile(dir + "/checkpoint.json", "{\"format\": \"plan-checkpoint\", ");
  std::string e = error();
  EXPECT_NE(e.find("checkpoint.json"), std::string::npos) << e;
  EXPECT_NE(e.find("not valid JSON"), std::string::npos) << e;
}

TEST_F(BadCheckpoint, MetadataMissingAKey) {
  auto j = nlohmann::ordered_json::parse(readFile(dir + "/checkpoint.json"));
  j["groups"][0].erase("shard_numel");
  resealMetadata(j);
  writeFile(dir + "/checkpoint.json", j.dump());
  std::string e = error();
  // The file, the path of the object that lacks the key, and the key.
  EXPECT_NE(e.find(dir + "/checkpoint.json: groups[0]: missing field "
                         "'shard_numel'"),
            std::string::npos)
      << e;
}

TEST_F(BadCheckpoint, EditedMetadata) {
  auto j = nlohmann::ordered_json::parse(readFile(dir + "/checkpoint.json"));
  j["optimizer"]["kind"] = "sgd";
  writeFile(dir + "/checkpoint.json", j.dump(1));
  std::string e = error();
  EXPECT_NE(e.find("checkpoint.json: checksum: is "), std::string::npos) << e;
  EXPECT_NE(e.find("edited or damaged"), std::string::npos) << e;
  // With a checksum that matches, the tensors contradict the optimizer.
  resealMetadata(j);
  writeFile(dir + "/checkpoint.json", j.dump(1));
  e = error();
  EXPECT_NE(e.find("optimizer: says sgd without momentum, but the tensors "
                   "hold exp_avg state"),
            std::string::npos)
      << e;
}

TEST_F(BadCheckpoint, MetadataOfAnotherVersion) {
  auto j = nlohmann::json::parse(readFile(dir + "/checkpoint.json"));
  j["version"] = 99;
  writeFile(dir + "/checkpoint.json", j.dump());
  std::string e = error();
  EXPECT_NE(e.find("version 99"), std::string::npos) << e;
}

TEST_F(BadCheckpoint, MissingMetadata) {
  ASSERT_EQ(::unlink((dir + "/checkpoint.json").c_str()), 0);
  std::string e = error();
  EXPECT_NE(e.find("has no checkpoint.json"), std::string::npos) << e;
  EXPECT_EQ(findCheckpoint(root.path()), std::nullopt);
}

TEST_F(BadCheckpoint, AnotherModel) {
  Layout gpt2 = layout;
  gpt2.family = ModelFamily::GPT2;
  std::string e = error(gpt2);
  EXPECT_NE(e.find("another model"), std::string::npos) << e;
  EXPECT_NE(e.find("family"), std::string::npos) << e;

  // Same family, other sizes.
  Schedule s = makeSchedule(layout);
  ModelConfig bigger = s.model;
  bigger.hidden = 64;
  Schedule wider = llamaSchedule(bigger);
  s.model = wider.model;
  s.units = wider.units;
  std::string message;
  try {
    Checkpoint::open(dir).checkCompatible(s);
  } catch (const CheckpointError &err) {
    message = err.what();
  }
  EXPECT_NE(message.find("hidden is 32 in the checkpoint but 64"),
            std::string::npos)
      << message;
}

TEST_F(BadCheckpoint, AnotherOptimizer) {
  Layout sgd = layout;
  sgd.optimizer = OptimizerKind::SGD;
  std::string e = error(sgd);
  EXPECT_NE(e.find("momentum"), std::string::npos) << e;
  EXPECT_NE(e.find("adamw"), std::string::npos) << e;
}

//===----------------------------------------------------------------------===//
// Export
//===----------------------------------------------------------------------===//

class Export : public ::testing::TestWithParam<ModelFamily> {};

TEST_P(Export, RoundTripsThroughOpenTensorSource) {
  Layout layout{1, 2, true, BF16Mixed, AdamW, false, GetParam()};
  const ValidSchedule s = makeSchedule(layout);
  Truth truth = makeTruth(s, 51);
  TempTree root;
  saveLayout(layout, truth, root.path(), 2);
  Checkpoint c = Checkpoint::open(*findCheckpoint(root.path()));
  std::string out = root.at("hf");
  exportHuggingFace(c, out, at::kFloat);
  auto source = openTensorSource(out, s->model); // checks config.json too
  for (const Unit &u : s->units)
    for (const Param &p : u.params) {
      if (!p.tiedTo.empty()) {
        EXPECT_FALSE(source->contains(p.name)) << p.name;
        continue;
      }
      at::Tensor want = truth[u.name]["weights"]
                            .narrow(0, p.offset, numelOf(p.shape))
                            .reshape(p.shape);
      EXPECT_TRUE(bitwiseEqual(source->get(p.name, p.shape), want)) << p.name;
    }
  auto config = nlohmann::json::parse(readFile(out + "/config.json"));
  EXPECT_EQ(config["dtype"], "float32");
  EXPECT_FALSE(config.contains("torch_dtype")); // deprecated in transformers
  if (GetParam() == ModelFamily::Llama) {
    EXPECT_EQ(config["architectures"][0], "LlamaForCausalLM");
    EXPECT_EQ(config["model_type"], "llama");
    EXPECT_EQ(config["num_key_value_heads"], s->model.kvHeads);
    EXPECT_EQ(config["hidden_act"], "silu");
    EXPECT_EQ(config["tie_word_embeddings"], false);
  } else if (GetParam() == ModelFamily::Bert) {
    EXPECT_EQ(config["architectures"][0], "BertForMaskedLM");
    EXPECT_EQ(config["model_type"], "bert");
    EXPECT_EQ(config["hidden_act"], "gelu");
    EXPECT_EQ(config["pad_token_id"], 0);
    EXPECT_EQ(config["type_vocab_size"], s->model.typeVocab);
  } else {
    EXPECT_EQ(config["architectures"][0], "GPT2LMHeadModel");
    EXPECT_EQ(config["n_embd"], s->model.hidden);
    EXPECT_TRUE(config["n_inner"].is_null()); // 4 * hidden
    EXPECT_EQ(config["activation_function"], "gelu_new");
  }

  // bf16: the weights rounded once.
  std::string outBf16 = root.at("hf-bf16");
  exportHuggingFace(c, outBf16, at::kBFloat16);
  SafeTensorsFile file(outBf16 + "/model.safetensors");
  const Param &first = s->units[0].params[0];
  EXPECT_EQ(file.dtype(first.name), "BF16");
  at::Tensor want = truth[s->units[0].name]["weights"]
                        .narrow(0, first.offset, numelOf(first.shape))
                        .reshape(first.shape)
                        .to(at::kBFloat16)
                        .to(at::kFloat);
  EXPECT_TRUE(bitwiseEqual(file.readFloat(first.name), want));
}

INSTANTIATE_TEST_SUITE_P(Families, Export,
                         ::testing::Values(ModelFamily::Llama,
                                           ModelFamily::GPT2,
                                           ModelFamily::Bert));

} // namespace
} // namespace plan::rt::test
