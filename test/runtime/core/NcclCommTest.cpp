//===- NcclCommTest.cpp - NCCL process groups (Comm::createNccl) ----------===//
//
// Built with the CUDA backend only. Everything that touches CUDA runs in
// forked children (one per rank, device cuda:rank, a FileStore for the NCCL
// unique id): a process that has initialised CUDA cannot fork ranks that use
// it, so even the device count is taken in a child. Without a CUDA device the
// GPU tests skip ("no CUDA device"); the error paths run everywhere.
//
//===----------------------------------------------------------------------===//

#include "Comm.h"
#include "Schedule.h"
#include "TestSupport.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAFunctions.h>
#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/FileStore.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace plan::rt;
using namespace std::chrono_literals;
using plan::rt::test::forkRanks;

namespace {

Schedule mesh(int64_t replicate, int64_t shard) {
  Schedule s;
  s.replicate = replicate;
  s.shard = shard;
  return s;
}

/// CUDA devices, counted in a child process (see the file comment).
int cudaDevices() {
  static int count = [] {
    std::fflush(stdout);
    std::fflush(stderr);
    pid_t pid = fork();
    if (pid == 0)
      _exit(std::min<int>(c10::cuda::device_count(), 100));
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
      return 0;
    return WEXITSTATUS(status);
  }();
  return count;
}

/// A FileStore path for one test (removed by the destructor).
class StoreDir {
public:
  StoreDir() {
    if (!mkdtemp(dir_))
      throw std::runtime_error("mkdtemp failed");
  }
  ~StoreDir() {
    ::unlink(path().c_str());
    ::rmdir(dir_);
  }
  std::string path() const { return std::string(dir_) + "/store"; }

private:
  char dir_[32] = "/tmp/plan-nccl-test-XXXXXX";
};

std::unique_ptr<Comm> connect(const std::string &storePath, int rank,
                              const Schedule &s,
                              std::chrono::milliseconds timeout = 30s) {
  int world = static_cast<int>(s.worldSize());
  auto store = c10::make_intrusive<c10d::FileStore>(storePath, world);
  return Comm::createNccl(store, rank, world, s, timeout,
                          at::Device(at::kCUDA, rank));
}

/// Rank r's input: small integers (exact in bf16 and under averaging by 2).
at::Tensor input(int r, int64_t n, at::ScalarType type, at::Device device) {
  return (at::arange(n, at::kFloat) + 1 + 2 * r)
      .mul(2)
      .to(device.is_cuda() ? at::TensorOptions(device).dtype(type)
                           : at::TensorOptions(type));
}

void expectEqual(const at::Tensor &got, const at::Tensor &want,
                 const std::string &what) {
  at::Tensor g = got.to(at::kCPU).to(at::kFloat),
             w = want.to(at::kCPU).to(at::kFloat);
  EXPECT_TRUE(at::equal(g, w)) << what << ": got " << g << " want " << w;
}

/// Every collective of `group` with results checked against what each rank
/// computes from the group members' global ranks.
void checkGroup(Comm &comm, GroupAxis axis, at::Device device,
                at::ScalarType type) {
  constexpr int64_t n = 6;
  c10d::Backend &group = comm.group(axis);
  int size = comm.groupSize(axis), me = comm.groupRank(axis);
  int rank = comm.rank();
  // Global rank of group member i.
  int shard = comm.groupSize(GroupAxis::Shard);
  auto member = [&](int i) {
    if (axis == GroupAxis::World)
      return i;
    if (axis == GroupAxis::Shard)
      return rank / shard * shard + i;
    return rank % shard + i * shard;
  };
  std::string tag = std::string(c10::toString(type)) + " on " + device.str() +
                    " axis " + std::to_string(static_cast<int>(axis));
  ASSERT_EQ(group.getSize(), size);
  ASSERT_EQ(group.getRank(), me);

  // all_gather
  at::Tensor in = input(rank, n, type, device);
  at::Tensor out = at::zeros({n * size}, in.options());
  group._allgather_base(out, in)->wait();
  std::vector<at::Tensor> parts;
  for (int i = 0; i < size; ++i)
    parts.push_back(input(member(i), n, type, at::kCPU));
  expectEqual(out, at::cat(parts), "all_gather " + tag);

  // reduce_scatter sum / avg / max
  at::Tensor big = input(rank, n * size, type, device);
  at::Tensor sum = at::zeros({n * size}, at::kFloat);
  at::Tensor max = at::full({n * size}, -1e9, at::kFloat);
  for (int i = 0; i < size; ++i) {
    at::Tensor x = input(member(i), n * size, at::kFloat, at::kCPU);
    sum += x;
    max = at::maximum(max, x);
  }
  for (auto [op, want] : {std::pair{c10d::ReduceOp::SUM, sum},
                          std::pair{c10d::ReduceOp::AVG, sum / size},
                          std::pair{c10d::ReduceOp::MAX, max}}) {
    c10d::ReduceScatterOptions options;
    options.reduceOp = op;
    at::Tensor shardOut = at::zeros({n}, big.options());
    group._reduce_scatter_base(shardOut, big, options)->wait();
    expectEqual(shardOut, want.slice(0, me * n, (me + 1) * n),
                "reduce_scatter op " + std::to_string(op) + " " + tag);

    c10d::AllreduceOptions arOptions;
    arOptions.reduceOp = op;
    std::vector<at::Tensor> tensors{big.clone()};
    group.allreduce(tensors, arOptions)->wait();
    expectEqual(tensors[0], want,
                "all_reduce op " + std::to_string(op) + " " + tag);
  }

  // broadcast from the last member
  c10d::BroadcastOptions bOptions;
  bOptions.rootRank = size - 1;
  std::vector<at::Tensor> bcast{input(rank, n, type, device)};
  group.broadcast(bcast, bOptions)->wait();
  expectEqual(bcast[0], input(member(size - 1), n, type, at::kCPU),
              "broadcast " + tag);
}

/// The control values the executor, plan-run and checkpoints all-reduce on
/// the CPU: a double (metrics), int64 (SUM) and a MAX.
void checkCpuStaging(Comm &comm) {
  c10d::Backend &world = comm.group(GroupAxis::World);
  int n = comm.world(), rank = comm.rank();
  std::vector<at::Tensor> value{at::full({1}, 0.5 + rank, at::kDouble)};
  world.allreduce(value)->wait();
  EXPECT_TRUE(value[0].is_cpu());
  EXPECT_EQ(value[0].item<double>(), 0.5 * n + n * (n - 1) / 2.0);

  std::vector<at::Tensor> counts{at::tensor({int64_t{1}, int64_t{rank}})};
  world.allreduce(counts)->wait();
  EXPECT_EQ(counts[0][0].item<int64_t>(), n);
  EXPECT_EQ(counts[0][1].item<int64_t>(), n * (n - 1) / 2);

  c10d::AllreduceOptions maxOptions;
  maxOptions.reduceOp = c10d::ReduceOp::MAX;
  std::vector<at::Tensor> flag{at::full({1}, rank == 0 ? 7 : 3, at::kLong)};
  world.allreduce(flag, maxOptions)->wait();
  EXPECT_EQ(flag[0].item<int64_t>(), 7);

  // CPU all_gather is staged too.
  at::Tensor in = at::full({2}, static_cast<float>(rank), at::kFloat);
  at::Tensor out = at::zeros({2 * n}, at::kFloat);
  world._allgather_base(out, in)->wait();
  for (int r = 0; r < n; ++r)
    EXPECT_EQ(out[2 * r].item<float>(), r);
}

void runMesh(int64_t replicate, int64_t shard) {
  Schedule s = mesh(replicate, shard);
  StoreDir dir;
  std::string path = dir.path();
  forkRanks(static_cast<int>(s.worldSize()), [&](int rank) {
    auto comm = connect(path, rank, s);
    at::Device device(at::kCUDA, rank);
    for (at::ScalarType type : {at::kFloat, at::kBFloat16})
      for (GroupAxis axis :
           {GroupAxis::World, GroupAxis::Shard, GroupAxis::Replicate})
        checkGroup(*comm, axis, device, type);
    checkCpuStaging(*comm);
  });
}

#define REQUIRE_DEVICES(n)                                                     \
  do {                                                                         \
    if (cudaDevices() == 0)                                                    \
      GTEST_SKIP() << "no CUDA device";                                        \
    if (cudaDevices() < (n))                                                   \
      GTEST_SKIP() << "needs " << (n) << " CUDA devices, found "               \
                   << cudaDevices();                                           \
  } while (0)

TEST(NcclCommTest, RejectsBadMeshAndNonCudaDevice) {
  StoreDir dir;
  auto store = c10::make_intrusive<c10d::FileStore>(dir.path(), 1);
  try {
    Comm::createNccl(store, 0, 2, mesh(1, 1), 1s, at::Device(at::kCUDA, 0));
    ADD_FAILURE() << "a world of 2 for a 1x1 mesh was accepted";
  } catch (const std::runtime_error &e) {
    EXPECT_NE(std::string(e.what()).find("but 2 were launched"),
              std::string::npos)
        << e.what();
  }
  try {
    Comm::createNccl(store, 0, 1, mesh(1, 1), 1s, at::Device(at::kCPU));
    ADD_FAILURE() << "a CPU device was accepted";
  } catch (const std::runtime_error &e) {
    EXPECT_NE(std::string(e.what()).find("needs a CUDA device, got cpu"),
              std::string::npos)
        << e.what();
  }
}

// No visible device (none on the machine, or CUDA_VISIBLE_DEVICES=""): a
// one-line error, not a crash. Runs in a child, where hiding the devices
// works because CUDA is not initialised yet.
TEST(NcclCommTest, NoDeviceIsAOneLineError) {
  StoreDir dir;
  std::string path = dir.path();
  forkRanks(1, [&](int) {
    setenv("CUDA_VISIBLE_DEVICES", "", 1);
    auto store = c10::make_intrusive<c10d::FileStore>(path, 1);
    try {
      Comm::createNccl(store, 0, 1, mesh(1, 1), 1s, at::Device(at::kCUDA, 0));
      ADD_FAILURE() << "createNccl succeeded without a visible device";
    } catch (const std::runtime_error &e) {
      std::string what = e.what();
      EXPECT_EQ(what.rfind("no CUDA device", 0), 0u) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  });
}

TEST(NcclCommTest, DeviceOutOfRange) {
  REQUIRE_DEVICES(1);
  StoreDir dir;
  std::string path = dir.path();
  forkRanks(1, [&](int) {
    auto store = c10::make_intrusive<c10d::FileStore>(path, 1);
    try {
      Comm::createNccl(store, 0, 1, mesh(1, 1), 1s, at::Device(at::kCUDA, 99));
      ADD_FAILURE() << "cuda:99 was accepted";
    } catch (const std::runtime_error &e) {
      EXPECT_NE(std::string(e.what()).find("cuda:99 does not exist"),
                std::string::npos)
          << e.what();
    }
  });
}

TEST(NcclCommTest, World1Collectives) {
  REQUIRE_DEVICES(1);
  runMesh(1, 1);
}

TEST(NcclCommTest, World2ShardMesh) {
  REQUIRE_DEVICES(2);
  runMesh(1, 2);
}

TEST(NcclCommTest, World2ReplicateMesh) {
  REQUIRE_DEVICES(2);
  runMesh(2, 1);
}

// Ops on the communication stream are ordered after the caller's stream and
// the caller's stream after the work (and temporaries handed to an op are
// not reused before it ran): a chain of dependent out-of-place collectives
// between kernels on the current stream gives exact results.
TEST(NcclCommTest, StreamOrdering) {
  REQUIRE_DEVICES(1);
  StoreDir dir;
  std::string path = dir.path();
  forkRanks(1, [&](int rank) {
    auto comm = connect(path, rank, mesh(1, 1));
    at::Device device(at::kCUDA, rank);
    c10d::Backend &group = comm->group(GroupAxis::World);
    at::Tensor x = at::zeros({1 << 22}, at::TensorOptions(device));
    for (int i = 0; i < 20; ++i) {
      at::Tensor doubled = x.mul(2); // on the current stream
      at::Tensor gathered = at::empty_like(doubled);
      group._allgather_base(gathered, doubled)->wait();
      x = gathered.add(1); // x = 2x + 1
    }
    EXPECT_EQ(x.min().item<float>(), 1048575.0f);
    EXPECT_EQ(x.max().item<float>(), 1048575.0f);
  });
}

// Rank 1 never joins: the staged (CPU) all-reduce and Work::wait with a
// timeout throw one line; the watchdog aborts the communicators after the
// collective timeout, and later ops throw its message.
TEST(NcclCommTest, CollectiveTimeout) {
  REQUIRE_DEVICES(2);
  StoreDir dir;
  std::string path = dir.path();
  Schedule s = mesh(1, 2);
  forkRanks(2, [&](int rank) {
    auto comm = connect(path, rank, s, 1500ms);
    if (rank == 1) {
      std::this_thread::sleep_for(8s);
      std::fflush(stderr);
      _exit(0); // the peer aborted: skip the communicators' teardown
    }
    c10d::Backend &group = comm->group(GroupAxis::Shard);
    std::vector<at::Tensor> onDevice{
        at::ones({4}, at::TensorOptions(at::Device(at::kCUDA, 0)))};
    auto work = group.allreduce(onDevice);
    try {
      work->wait(300ms);
      ADD_FAILURE() << "wait(300ms) returned for a collective without peer";
    } catch (const std::runtime_error &e) {
      EXPECT_NE(std::string(e.what()).find("did not complete within 300 ms"),
                std::string::npos)
          << e.what();
    }
    std::this_thread::sleep_for(3s); // the watchdog's timeout is 1.5 s
    try {
      std::vector<at::Tensor> onHost{at::ones({1}, at::kDouble)};
      group.allreduce(onHost)->wait();
      ADD_FAILURE() << "an op on an aborted communicator succeeded";
    } catch (const std::runtime_error &e) {
      std::string what = e.what();
      EXPECT_NE(what.find("did not complete within 1500 ms"), std::string::npos)
          << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
    std::fflush(stderr);
    _exit(::testing::Test::HasFailure() ? 1 : 0);
  });
}

} // namespace
