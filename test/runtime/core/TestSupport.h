//===- TestSupport.h - Hand-built schedules and forked ranks ----*- C++ -*-===//

#ifndef PLAN_TEST_RUNTIME_CORE_TESTSUPPORT_H
#define PLAN_TEST_RUNTIME_CORE_TESTSUPPORT_H

#include "Comm.h"
#include "Model.h"
#include "ScheduleFile.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <algorithm>
#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/FileStore.hpp>

#include <dirent.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace plan::rt::test {

/// Builds small schedules that validateSchedule accepts: a mesh of
/// replicate x shard ranks on as many devices, one micro-batch of one
/// sequence unless set, SGD at lr 0.1. Every alloc gets its own
/// 256-byte-aligned offset (no reuse), the arenas grow to fit, and every
/// buffer counts as persistent memory (the check that persistent buffers
/// sit in the persistent block then holds for any order of allocation).
class ScheduleBuilder {
public:
  explicit ScheduleBuilder(int64_t replicate = 1, int64_t shard = 1) {
    s.replicate = replicate;
    s.shard = shard;
    s.cluster.gpusPerNode = replicate * shard;
    s.train.optimizer.kind = OptimizerKind::SGD;
    s.train.optimizer.lr = 0.1;
    s.train.microBatch = 1;
    s.train.seqLen = 1;
    setMicroBatches(1);
  }

  void setMicroBatches(int64_t n) {
    s.microBatches = n;
    s.train.gradAccum = n;
  }

  /// A unit of `numel` stored elements: one parameter "<name>.w".
  int64_t unit(const std::string &name, int64_t numel,
               UnitKind kind = UnitKind::LlamaBlock) {
    Unit u;
    u.name = name;
    u.kind = kind;
    u.numel = numel;
    u.params.push_back(Param{name + ".w", {numel}, 0, ""});
    s.units.push_back(u);
    return static_cast<int64_t>(s.units.size()) - 1;
  }
  /// A group of `units` (names), padded to a multiple of the shard axis.
  int64_t group(const std::string &name, std::vector<std::string> units) {
    Group g;
    g.name = name;
    g.units = std::move(units);
    for (const std::string &unit : g.units)
      for (const Unit &u : s.units)
        if (u.name == unit)
          g.numel += u.numel;
    g.paddedNumel = (g.numel + s.shard - 1) / s.shard * s.shard;
    g.shardNumel = g.paddedNumel / s.shard;
    s.groups.push_back(g);
    return static_cast<int64_t>(s.groups.size()) - 1;
  }

  /// A buffer; a persistent one is allocated at once (its alloc op comes
  /// first), a transient one by op(ops::Alloc{id}) where the test wants it.
  int64_t alloc(const std::string &name, int64_t numel,
                ElementType type = ElementType::F32, bool persistent = true,
                BufferRole role = BufferRole::Staging,
                Space space = Space::Device) {
    Buffer b;
    b.kind = Buffer::Kind::Alloc;
    b.name = name;
    b.numel = numel;
    b.type = type;
    b.persistent = persistent;
    b.role = role;
    b.space = space;
    int64_t &end = s.programs.front().arenaBytes[space];
    b.offset = (end + 255) / 256 * 256;
    end = b.offset + numel * static_cast<int64_t>(elementBytes(type));
    s.programs.front().persistentBytes[space] = end;
    s.programs.front().buffers.push_back(b);
    int64_t id = static_cast<int64_t>(s.programs.front().buffers.size()) - 1;
    if (persistent)
      op(ops::Alloc{id});
    return id;
  }
  /// A persistent buffer holding group `group`'s `role` (all of it, or this
  /// rank's shard): what the exporter makes of "<group>.<role>".
  int64_t state(const std::string &group, BufferRole role,
                ElementType type = ElementType::F32, bool sharded = false,
                Space space = Space::Device) {
    const Group *g = nullptr;
    for (const Group &candidate : s.groups)
      if (candidate.name == group)
        g = &candidate;
    int64_t id = alloc(group + "." + toString(role),
                       sharded ? g->shardNumel : g->paddedNumel, type, true,
                       role, space);
    s.programs.front().buffers[id].group = group;
    s.programs.front().buffers[id].sharded = sharded;
    return id;
  }
  int64_t view(int64_t source, int64_t offset, int64_t numel) {
    Buffer b = s.programs.front().buffers[source];
    b.kind = Buffer::Kind::View;
    b.source = source;
    b.viewOffset = offset;
    b.numel = numel;
    b.group.clear();
    b.sharded = false;
    s.programs.front().buffers.push_back(b);
    return static_cast<int64_t>(s.programs.front().buffers.size()) - 1;
  }
  int64_t shardView(int64_t source, GroupAxis axis, int64_t groupSize) {
    Buffer b = s.programs.front().buffers[source];
    b.kind = Buffer::Kind::ShardView;
    b.source = source;
    b.axis = axis;
    b.numel = b.numel / groupSize;
    b.group.clear();
    b.sharded = false;
    s.programs.front().buffers.push_back(b);
    return static_cast<int64_t>(s.programs.front().buffers.size()) - 1;
  }
  int64_t event() { return s.programs.front().numEvents++; }
  /// Appends `o` (an ops:: struct) on line ops + 1 and returns it as stored.
  template <typename T> T &op(T o) {
    Op added;
    added.body = std::move(o);
    added.line = static_cast<uint32_t>(s.programs.front().ops.size() + 1);
    s.programs.front().ops.push_back(std::move(added));
    return std::get<T>(s.programs.front().ops.back().body);
  }
  void wait(int64_t event) { op(ops::Wait{event}); }
  void free(int64_t buffer) { op(ops::Free{buffer}); }

  /// The schedule, validated as a reader would (a test mistake is a
  /// ScheduleFileError naming it).
  /// The schedule, checked as the reader checks a file. A toy model has no
  /// sizes of its own: while they are unset it gets the smallest consistent
  /// ones, with its block units as its layers.
  ValidSchedule valid() const {
    Schedule checked = s;
    ModelConfig &m = checked.model;
    if (m.hidden == 0) {
      for (int64_t *size :
           {&m.vocab, &m.hidden, &m.intermediate, &m.heads, &m.kvHeads})
        *size = std::max<int64_t>(*size, 1);
      m.maxSeqLen = std::max<int64_t>({m.maxSeqLen, checked.train.seqLen, 1});
      m.layers =
          std::count_if(checked.units.begin(), checked.units.end(),
                        [](const Unit &u) { return isBlockKind(u.kind); });
    }
    return validateSchedule(std::move(checked), "test schedule");
  }

  Schedule s;
};

/// A Comm for tests that need a rank's place in the mesh but no collective.
class MeshPositionComm : public Comm {
public:
  MeshPositionComm(int rank, int64_t replicate, int64_t shard)
      : Comm(rank, replicate, shard) {}
  c10d::Backend &group(GroupAxis) override {
    throw std::runtime_error("MeshPositionComm has no process groups");
  }
  c10d::Backend &everyone() override { return group(GroupAxis::World); }
};

/// Floats that forked ranks write and the parent reads.
class SharedFloats {
public:
  explicit SharedFloats(size_t count) : count_(count) {
    data_ = static_cast<float *>(mmap(nullptr, count * sizeof(float),
                                      PROT_READ | PROT_WRITE,
                                      MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    if (data_ == MAP_FAILED)
      throw std::runtime_error("mmap failed");
  }
  ~SharedFloats() { munmap(data_, count_ * sizeof(float)); }
  float *data() { return data_; }
  float &operator[](size_t i) { return data_[i]; }

private:
  size_t count_;
  float *data_;
};

/// Runs `body(rank)` in `world` forked processes and expects each to exit
/// cleanly (no gtest failure, no exception: exit 1 or 2) within `limit`; a
/// child still running then is killed and reported.
inline void forkRanks(int world, const std::function<void(int)> &body,
                      std::chrono::seconds limit = std::chrono::seconds(120)) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids;
  for (int rank = 0; rank < world; ++rank) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int code = 0;
      try {
        body(rank);
        code = ::testing::Test::HasFailure() ? 1 : 0;
      } catch (const std::exception &e) {
        std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
        code = 2;
      }
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(code);
    }
    pids.push_back(pid);
  }
  auto deadline = std::chrono::steady_clock::now() + limit;
  for (int rank = 0; rank < world; ++rank) {
    int status = 0;
    while (waitpid(pids[rank], &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        kill(pids[rank], SIGKILL);
        waitpid(pids[rank], &status, 0);
        ADD_FAILURE() << "rank " << rank << " did not finish in time";
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "rank " << rank << " failed (status " << status << ")";
  }
}

/// Runs `body(rank, comm)` in `world` forked processes connected by Gloo over
/// a FileStore (forkRanks). LibTorch's intra-op pool is pinned to one thread
/// first: an OpenMP pool used before fork() would hang the children.
inline void forEachRank(
    const Schedule &schedule, const std::function<void(int, Comm &)> &body,
    std::chrono::milliseconds collectiveTimeout = std::chrono::seconds(10),
    std::chrono::seconds limit = std::chrono::seconds(30)) {
  at::set_num_threads(1);
  int world = static_cast<int>(schedule.worldSize());
  char dirTemplate[] = "/tmp/plan-core-test-XXXXXX";
  ASSERT_NE(mkdtemp(dirTemplate), nullptr);
  std::string storePath = std::string(dirTemplate) + "/store";
  forkRanks(
      world,
      [&](int rank) {
        auto store = c10::make_intrusive<c10d::FileStore>(storePath, world);
        auto comm =
            Comm::createGloo(store, rank, world, schedule, collectiveTimeout);
        body(rank, *comm);
      },
      limit);
  // POSIX, not std::filesystem::remove_all: libtorch exports its own copies
  // of some std::filesystem symbols, and the call crashed (intermittently,
  // once the CUDA libraries were linked too).
  if (DIR *dir = ::opendir(dirTemplate)) {
    while (dirent *entry = ::readdir(dir)) {
      std::string name = entry->d_name;
      if (name != "." && name != "..")
        ::unlink((std::string(dirTemplate) + "/" + name).c_str());
    }
    ::closedir(dir);
  }
  ::rmdir(dirTemplate);
}

inline MicroBatch toyBatch(const std::vector<int64_t> &inputs,
                           const std::vector<int64_t> &targets) {
  MicroBatch b;
  b.tokens = at::tensor(inputs, at::kLong).reshape({1, -1});
  b.targets = at::tensor(targets, at::kLong).reshape({1, -1});
  return b;
}

} // namespace plan::rt::test

#endif // PLAN_TEST_RUNTIME_CORE_TESTSUPPORT_H
