//===- TestSupport.h - Hand-built schedules and forked ranks ----*- C++ -*-===//

#ifndef PLAN_TEST_RUNTIME_CORE_TESTSUPPORT_H
#define PLAN_TEST_RUNTIME_CORE_TESTSUPPORT_H

#include "Comm.h"
#include "Model.h"
#include "Schedule.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
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

/// Appends buffers and ops to a Schedule and places every alloc at its own
/// 256-byte-aligned offset (no reuse), sizing the arenas to fit.
class ScheduleBuilder {
public:
  explicit ScheduleBuilder(int64_t replicate = 1, int64_t shard = 1) {
    s.replicate = replicate;
    s.shard = shard;
    s.train.optimizer.kind = "sgd";
    s.train.optimizer.lr = 0.1;
  }

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
    int64_t &end = s.arenaBytes[toString(space)];
    b.offset = (end + 255) / 256 * 256;
    end = b.offset + numel * static_cast<int64_t>(elementBytes(type));
    s.buffers.push_back(b);
    return static_cast<int64_t>(s.buffers.size()) - 1;
  }
  int64_t view(int64_t source, int64_t offset, int64_t numel) {
    Buffer b = s.buffers[source];
    b.kind = Buffer::Kind::View;
    b.source = source;
    b.viewOffset = offset;
    b.numel = numel;
    s.buffers.push_back(b);
    return static_cast<int64_t>(s.buffers.size()) - 1;
  }
  int64_t shardView(int64_t source, GroupAxis axis, int64_t groupSize) {
    Buffer b = s.buffers[source];
    b.kind = Buffer::Kind::ShardView;
    b.source = source;
    b.axis = axis;
    b.numel = b.numel / groupSize;
    s.buffers.push_back(b);
    return static_cast<int64_t>(s.buffers.size()) - 1;
  }
  int64_t event() { return s.numEvents++; }
  Op &op(OpKind kind) {
    Op o;
    o.kind = kind;
    o.line = static_cast<uint32_t>(s.ops.size() + 1);
    s.ops.push_back(o);
    return s.ops.back();
  }
  void wait(int64_t event) { op(OpKind::Wait).waitEvent = event; }

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
