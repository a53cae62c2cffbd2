//===- CollectivesTest.cpp - Collectives on Gloo through the Executor -----===//
//
// Every test forks one process per rank (TestSupport.h: forEachRank) that
// connects real Gloo process groups over a FileStore and runs a hand-built
// schedule. Inputs are functions of the global rank so that each rank can
// compute what its peers sent.
//
//===----------------------------------------------------------------------===//

#include "DeviceBackend.h"
#include "Executor.h"
#include "HostMemory.h"
#include "TestSupport.h"
#include "ToyModel.h"

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

using namespace plan::rt;
using namespace plan::rt::test;

namespace {

constexpr int64_t kN = 4; // elements per shard

// Global ranks of `rank`'s group along `axis`, in group-rank order.
std::vector<int> groupMembers(const Schedule &s, int rank, GroupAxis axis) {
  int shard = static_cast<int>(s.shard),
      world = static_cast<int>(s.worldSize());
  std::vector<int> out;
  if (axis == GroupAxis::World) {
    for (int r = 0; r < world; ++r)
      out.push_back(r);
  } else if (axis == GroupAxis::Shard) {
    for (int i = 0; i < shard; ++i)
      out.push_back(rank / shard * shard + i);
  } else {
    for (int r = rank % shard; r < world; r += shard)
      out.push_back(r);
  }
  return out;
}

// Element i of rank r's input `which`: small integers, exact in bf16.
float input(int which, int r, int64_t i) {
  return static_cast<float>(which * 16 + r * 4 + i + 1);
}

struct CollectiveSchedule {
  ScheduleBuilder b;
  int64_t agSrc, agDst, rsSrc, rsAvg, rsAcc, arRep, arWorldAvg, arMax, bcast,
      agSrc16, agDst16, rsSrc16, rsDst16, ar16, arHalf, full, hyb;

  CollectiveSchedule(int64_t replicate, int64_t shard) : b(replicate, shard) {
    int64_t S = shard;
    auto f32 = [&](const char *name, int64_t n) { return b.alloc(name, n); };
    auto bf16 = [&](const char *name, int64_t n) {
      return b.alloc(name, n, ElementType::BF16);
    };
    agSrc = f32("ag.src", kN), agDst = f32("ag.dst", kN * S);
    rsSrc = f32("rs.src", kN * S), rsAvg = f32("rs.avg", kN);
    rsAcc = f32("rs.acc", kN);
    arRep = f32("ar.rep", kN), arWorldAvg = f32("ar.world", kN);
    arMax = f32("ar.max", kN), bcast = f32("bcast", kN);
    agSrc16 = bf16("ag16.src", kN), agDst16 = bf16("ag16.dst", kN * S);
    rsSrc16 = bf16("rs16.src", kN * S), rsDst16 = bf16("rs16.dst", kN);
    ar16 = bf16("ar16", kN);
    arHalf = b.alloc("arHalf", kN, ElementType::F16);
    full = f32("zero1.full", kN * S);
    hyb = f32("hybrid", kN);
    int64_t fullShard = b.shardView(full, GroupAxis::Shard, S);

    // Issue everything first, wait in a different order: several ops in
    // flight on the same groups at once.
    std::vector<int64_t> events;
    auto async = [&](auto op) {
      op.done = b.event();
      events.push_back(op.done);
      b.op(op);
    };
    using GroupAxis::Replicate, GroupAxis::Shard, GroupAxis::World;
    async(ops::AllGather{.src = agSrc, .dst = agDst, .group = Shard});
    async(ops::ReduceScatter{
        .src = rsSrc, .dst = rsAvg, .group = Shard, .reduce = ReduceKind::Avg});
    async(ops::ReduceScatter{.src = rsSrc,
                             .dst = rsAcc,
                             .group = Shard,
                             .reduce = ReduceKind::Sum,
                             .accumulate = true});
    async(ops::AllReduce{.buffer = arRep, .group = Replicate});
    async(ops::AllReduce{
        .buffer = arWorldAvg, .group = World, .reduce = ReduceKind::Avg});
    async(ops::AllReduce{
        .buffer = arMax, .group = World, .reduce = ReduceKind::Max});
    async(ops::Broadcast{
        .buffer = bcast, .group = Shard, .root = static_cast<int64_t>(S - 1)});
    async(ops::AllGather{.src = agSrc16, .dst = agDst16, .group = Shard});
    async(ops::ReduceScatter{.src = rsSrc16,
                             .dst = rsDst16,
                             .group = Shard,
                             .reduce = ReduceKind::Avg});
    async(ops::AllReduce{.buffer = ar16, .group = World});
    async(ops::AllReduce{
        .buffer = arHalf, .group = World, .reduce = ReduceKind::Avg});
    // zero1's in-place gather
    async(ops::AllGather{.src = fullShard, .dst = full, .group = Shard});
    for (auto it = events.rbegin(); it != events.rend(); ++it)
      b.wait(*it);
    // hybrid_shard: reduce-scatter over the shard group, then all-reduce the
    // shard over the replicas `after` it; both events waited, the first last.
    int64_t first = b.op(ops::ReduceScatter{.src = rsSrc,
                                            .dst = hyb,
                                            .group = Shard,
                                            .reduce = ReduceKind::Avg,
                                            .done = b.event()})
                        .done;
    int64_t second = b.op(ops::AllReduce{.buffer = hyb,
                                         .group = Replicate,
                                         .reduce = ReduceKind::Avg,
                                         .after = {first},
                                         .done = b.event()})
                         .done;
    b.wait(second);
    b.wait(first);
  }
};

void fill(at::Tensor t, int which, int rank) {
  at::Tensor f = at::empty({t.numel()});
  for (int64_t i = 0; i < t.numel(); ++i)
    f[i] = input(which, rank, i);
  t.copy_(f);
}

// The one micro-batch a schedule without compute still takes.
std::vector<MicroBatch> oneBatch() { return {toyBatch({1}, {1})}; }

void runCollectives(int64_t replicate, int64_t shard) {
  CollectiveSchedule cs(replicate, shard);
  const ValidSchedule valid = cs.b.valid();
  const Schedule &s = valid;
  forEachRank(s, [&](int rank, Comm &comm) {
    ToyModel model(0);
    auto cpu = DeviceBackend::createCpu();
    Executor exec(valid, model, comm, *cpu);
    auto buf = [&](int64_t id) { return exec.buffer(id); };
    fill(buf(cs.agSrc), 0, rank);
    fill(buf(cs.rsSrc), 1, rank);
    buf(cs.rsAcc).fill_(100 + rank);
    fill(buf(cs.arRep), 2, rank);
    fill(buf(cs.arWorldAvg), 3, rank);
    fill(buf(cs.arMax), 4, rank);
    fill(buf(cs.bcast), 5, rank);
    fill(buf(cs.agSrc16), 0, rank);
    fill(buf(cs.rsSrc16), 1, rank);
    fill(buf(cs.ar16), 2, rank);
    fill(buf(cs.arHalf), 3, rank);
    int shardIndex = comm.groupRank(GroupAxis::Shard);
    buf(cs.full).zero_();
    buf(cs.full).narrow(0, shardIndex * kN, kN).fill_(7 + rank);
    StepResult r = exec.runStep(1, oneBatch());
    EXPECT_EQ(r.loss, 0.0);

    auto shardGroup = groupMembers(s, rank, GroupAxis::Shard);
    auto repGroup = groupMembers(s, rank, GroupAxis::Replicate);
    auto world = groupMembers(s, rank, GroupAxis::World);
    double S = static_cast<double>(shardGroup.size());
    for (int64_t i = 0; i < kN; ++i) {
      double rsSum = 0, repSum = 0, worldSum = 0, worldMax = -1e30, hybSum = 0;
      for (int peer : shardGroup)
        rsSum += input(1, peer, shardIndex * kN + i);
      for (int peer : repGroup) {
        repSum += input(2, peer, i);
        int peerShard = peer % static_cast<int>(s.shard);
        for (int j = 0; j < S; ++j)
          hybSum += input(
              1,
              peer / static_cast<int>(s.shard) * static_cast<int>(s.shard) + j,
              peerShard * kN + i);
      }
      for (int peer : world) {
        worldSum += input(3, peer, i);
        worldMax = std::max<double>(worldMax, input(4, peer, i));
      }
      double ar16Sum = 0;
      for (int peer : world)
        ar16Sum += input(2, peer, i);
      EXPECT_EQ(buf(cs.rsAvg)[i].item<double>(), rsSum / S) << i;
      EXPECT_EQ(buf(cs.rsAcc)[i].item<double>(), 100 + rank + rsSum) << i;
      EXPECT_EQ(buf(cs.arRep)[i].item<double>(), repSum) << i;
      EXPECT_DOUBLE_EQ(buf(cs.arWorldAvg)[i].item<double>(),
                       static_cast<float>(worldSum / world.size()))
          << i;
      EXPECT_EQ(buf(cs.arMax)[i].item<double>(), worldMax) << i;
      EXPECT_EQ(buf(cs.bcast)[i].item<double>(),
                input(5, shardGroup.back(), i));
      EXPECT_EQ(buf(cs.rsDst16)[i].item<double>(), rsSum / S) << i;
      EXPECT_EQ(buf(cs.ar16)[i].item<double>(), ar16Sum) << i;
      EXPECT_EQ(buf(cs.arHalf)[i].item<double>(),
                static_cast<double>(
                    at::Half(static_cast<float>(worldSum / world.size()))))
          << i;
      EXPECT_DOUBLE_EQ(buf(cs.hyb)[i].item<double>(),
                       static_cast<float>(hybSum / S / repGroup.size()))
          << i;
    }
    EXPECT_EQ(buf(cs.agDst16).scalar_type(), at::kBFloat16);
    for (size_t j = 0; j < shardGroup.size(); ++j)
      for (int64_t i = 0; i < kN; ++i) {
        int64_t at = static_cast<int64_t>(j) * kN + i;
        EXPECT_EQ(buf(cs.agDst)[at].item<double>(), input(0, shardGroup[j], i));
        EXPECT_EQ(buf(cs.agDst16)[at].item<double>(),
                  input(0, shardGroup[j], i));
        EXPECT_EQ(buf(cs.full)[at].item<double>(), 7 + shardGroup[j]);
      }
  });
}

TEST(Collectives, ShardGroupOfTwo) { runCollectives(1, 2); }
TEST(Collectives, TwoByTwoMesh) { runCollectives(2, 2); }
TEST(Collectives, ReplicasOnly) { runCollectives(2, 1); }

// A pipeline of 3 stages: the embedding group is its first and last stage,
// which add what they hold; the stage between them has none.
TEST(Collectives, EmbeddingGroupIsThePipelinesEnds) {
  ScheduleBuilder b(1, 1);
  b.s.pipeline = 3;
  b.s.cluster.gpusPerNode = 3;
  forEachRank(b.s, [&](int rank, Comm &comm) {
    const int stage = comm.groupRank(GroupAxis::Pipeline);
    EXPECT_EQ(stage, rank);
    EXPECT_EQ(comm.groupSize(GroupAxis::Embedding), 2);
    EXPECT_EQ(comm.inEmbeddingGroup(), stage != 1);
    if (stage == 1) {
      try {
        comm.group(GroupAxis::Embedding);
        ADD_FAILURE() << "stage 1 has an embedding group";
      } catch (const std::runtime_error &e) {
        EXPECT_STREQ(e.what(), "pipeline stage 1 is not the first or the "
                               "last: it is in no embedding group");
      }
      return;
    }
    EXPECT_EQ(comm.groupRank(GroupAxis::Embedding), stage == 0 ? 0 : 1);
    std::vector<at::Tensor> t{at::full({4}, rank + 1.0, at::kFloat)};
    comm.group(GroupAxis::Embedding).allreduce(t)->wait();
    EXPECT_EQ(t[0][0].item<float>(), 1.0f + 3.0f);
  });
}

// sched-plan-workspace frees what a collective allocates (Gloo's flat
// all-gather output, a reduce-scatter's copy of its source) at the op's
// wait: none of it may outlive the wait, however late Gloo's worker thread
// lets go of its work. A thread that keeps both cores busy makes that
// thread late often (before ReduceScatterWork in Comm.cpp, a third of the
// reduce-scatters here left their copy behind).
TEST(Collectives, NothingAllocatedOutlivesTheWait) {
  ScheduleBuilder b(1, 2);
  forEachRank(b.s, [&](int rank, Comm &comm) {
    host_memory::install();
    constexpr int64_t kFull = 1 << 15;
    at::Tensor full = at::full({kFull}, rank + 1.0f, at::kFloat);
    at::Tensor shard = at::full({kFull / 2}, rank + 1.0f, at::kFloat);
    std::atomic<bool> stop{false};
    std::thread busy([&] {
      while (!stop.load(std::memory_order_relaxed))
        ;
    });
    c10d::Backend &group = comm.group(GroupAxis::Shard);
    const int64_t before = host_memory::current();
    int scatters = 0, gathers = 0, reduces = 0;
    auto lagged = [&](c10::intrusive_ptr<c10d::Work> work, int &count) {
      work->wait();
      comm.awaitRelease(work);
      work.reset();
      count += host_memory::current() != before;
    };
    for (int i = 0; i < 200; ++i) {
      shard.fill_(rank + 1.0f);
      lagged(group._reduce_scatter_base(shard, full), scatters);
      EXPECT_EQ(shard[0].item<float>(), 3.0f);
      lagged(group._allgather_base(full, shard), gathers);
      EXPECT_EQ(full[kFull - 1].item<float>(), 3.0f);
      full.fill_(rank + 1.0f);
      std::vector<at::Tensor> tensors{full};
      lagged(group.allreduce(tensors), reduces);
      EXPECT_EQ(full[0].item<float>(), 3.0f);
      full.fill_(rank + 1.0f);
    }
    stop = true;
    busy.join();
    EXPECT_EQ(scatters, 0) << "of 200 reduce-scatters left memory behind";
    EXPECT_EQ(gathers, 0) << "of 200 all-gathers left memory behind";
    EXPECT_EQ(reduces, 0) << "of 200 all-reduces left memory behind";
  });
}

TEST(Collectives, WorldSizeMismatchIsOneLine) {
  ScheduleBuilder b(2, 2);
  try {
    Comm::createGloo(nullptr, 0, 3, b.s, std::chrono::seconds(1));
    FAIL() << "expected an error";
  } catch (const std::runtime_error &e) {
    EXPECT_STREQ(e.what(),
                 "schedule is for 4 ranks (2x2), but 3 were launched");
  }
}

// A rank that never joins: the other's collective fails within the timeout
// with an error that names the op and its plan line. (Op 0 is x's alloc.)
TEST(Collectives, TimeoutNamesTheOpAndLine) {
  ScheduleBuilder b(1, 2);
  int64_t x = b.alloc("x", 4);
  int64_t done =
      b.op(ops::AllReduce{
               .buffer = x, .group = GroupAxis::Shard, .done = b.event()})
          .done;
  b.s.programs.front().ops.back().line = 17;
  b.wait(done);
  const ValidSchedule valid = b.valid();
  forEachRank(
      valid,
      [&](int rank, Comm &comm) {
        if (rank == 1) {
          std::this_thread::sleep_for(std::chrono::milliseconds(2500));
          return;
        }
        ToyModel model(0);
        auto cpu = DeviceBackend::createCpu();
        Executor exec(valid, model, comm, *cpu);
        try {
          exec.runStep(1, oneBatch());
          ADD_FAILURE() << "expected an error";
        } catch (const ExecutionError &e) {
          std::string what = e.what();
          EXPECT_EQ(what.rfind("all_reduce (op 1, line 17) failed: ", 0), 0u)
              << what;
          EXPECT_EQ(what.find('\n'), std::string::npos);
        }
      },
      std::chrono::milliseconds(1000));
}

// DDP on two ranks, one micro-batch each, equals one rank accumulating both
// micro-batches: the loss and the updated weights.
TEST(Collectives, DataParallelMatchesGradientAccumulation) {
  auto build = [](int64_t replicate, int64_t microBatches) {
    ScheduleBuilder b(replicate, 1);
    Schedule &s = b.s;
    b.setMicroBatches(microBatches);
    b.unit("u0", 3);
    b.group("g", {"u0"});
    int64_t p = b.state("g", BufferRole::Param);
    int64_t g = b.state("g", BufferRole::Grad);
    int64_t m = b.state("g", BufferRole::Momentum);
    s.train.optimizer.momentum = 0.9;
    b.op(ops::Zero{g});
    for (int64_t mb = 0; mb < microBatches; ++mb) {
      int64_t saves = b.alloc("u0.saves", 3, ElementType::F32, false,
                              BufferRole::Activations);
      b.op(ops::Alloc{saves});
      b.op(ops::Forward{
          .unit = 0, .microBatch = mb, .params = p, .saves = saves});
      b.op(ops::Loss{.unit = 0,
                     .microBatch = mb,
                     .scale = 1.0 / static_cast<double>(microBatches)});
      b.op(ops::Backward{.unit = 0,
                         .microBatch = mb,
                         .params = p,
                         .activations = saves,
                         .grads = g});
      b.free(saves);
    }
    if (replicate > 1)
      b.wait(b.op(ops::AllReduce{.buffer = g,
                                 .group = GroupAxis::Replicate,
                                 .reduce = ReduceKind::Avg,
                                 .done = b.event()})
                 .done);
    b.op(ops::OptimizerStep{.group = 0, .params = p, .grads = g, .state = {m}});
    return b.valid();
  };
  std::vector<MicroBatch> both = {toyBatch({1, 2, 3}, {0, 5, 1}),
                                  toyBatch({4, -1, 2}, {3, 3, 3})};
  ValidSchedule single = build(1, 2), ddp = build(2, 1);
  ToyModel model(1);
  MeshPositionComm one(0, 1, 1);
  auto cpu = DeviceBackend::createCpu();
  Executor reference(single, model, one, *cpu);
  reference.initState(5);
  std::vector<double> losses;
  for (int step = 1; step <= 2; ++step)
    losses.push_back(reference.runStep(step, both).loss);
  at::Tensor expected = reference.buffer(0).clone();

  SharedFloats out(2 * 3 + 2);
  forEachRank(ddp, [&](int rank, Comm &comm) {
    ToyModel m(1);
    auto backend = DeviceBackend::createCpu();
    Executor exec(ddp, m, comm, *backend);
    exec.initState(5);
    for (int step = 1; step <= 2; ++step) {
      StepResult r = exec.runStep(step, {both[rank]});
      EXPECT_NEAR(r.loss, losses[step - 1], 1e-6);
      EXPECT_EQ(r.tokens, 6);
    }
    std::memcpy(out.data() + rank * 3, exec.buffer(0).data_ptr<float>(),
                3 * sizeof(float));
  });
  for (int rank = 0; rank < 2; ++rank)
    for (int64_t i = 0; i < 3; ++i)
      EXPECT_NEAR(out[rank * 3 + i], expected[i].item<float>(), 1e-6)
          << "rank " << rank << " element " << i;
}

} // namespace

// full_shard on two ranks (sharded parameters gathered for compute, the
// gradient reduce-scattered into a shard, clipping over a sharded norm)
// equals one rank with the whole group and both micro-batches.
namespace fsdp {

constexpr int64_t kUnit = 3, kPadded = 4;

ValidSchedule build(int64_t shard) {
  ScheduleBuilder b(1, shard);
  Schedule &s = b.s;
  int64_t microBatches = shard == 1 ? 2 : 1;
  b.setMicroBatches(microBatches);
  s.train.gradClip = 0.05;
  s.train.optimizer.kind = OptimizerKind::AdamW;
  s.train.optimizer.lr = 0.01;
  s.train.optimizer.weightDecay = 0.1;
  b.unit("u0", kUnit);
  // Padded to kPadded over two shards; one rank holds the kUnit elements
  // unpadded (a group of one shard needs no padding).
  b.group("g", {"u0"});
  bool sharded = shard > 1;
  int64_t p = b.state("g", BufferRole::Param, ElementType::F32, sharded);
  int64_t g = b.state("g", BufferRole::Grad, ElementType::F32, sharded);
  int64_t m = b.state("g", BufferRole::ExpAvg, ElementType::F32, sharded);
  int64_t v = b.state("g", BufferRole::ExpAvgSq, ElementType::F32, sharded);
  b.op(ops::Zero{g});
  for (int64_t mb = 0; mb < microBatches; ++mb) {
    int64_t params = p, grads = g, gathered = -1, full = -1;
    if (sharded) {
      gathered = b.alloc("g.gathered", kPadded, ElementType::F32, false,
                         BufferRole::Gathered);
      b.op(ops::Alloc{gathered});
      b.wait(b.op(ops::AllGather{.src = p,
                                 .dst = gathered,
                                 .group = GroupAxis::Shard,
                                 .done = b.event()})
                 .done);
      full = b.alloc("g.grad.full", kPadded, ElementType::F32, false,
                     BufferRole::UnshardedGrad);
      b.op(ops::Alloc{full});
      b.op(ops::Zero{full});
      params = gathered, grads = full;
    }
    int64_t pu = b.view(params, 0, kUnit), gu = b.view(grads, 0, kUnit);
    int64_t saves = b.alloc("u0.saves", kUnit, ElementType::F32, false,
                            BufferRole::Activations);
    b.op(ops::Alloc{saves});
    b.op(ops::Forward{
        .unit = 0, .microBatch = mb, .params = pu, .saves = saves});
    b.op(ops::Loss{.unit = 0,
                   .microBatch = mb,
                   .scale = 1.0 / static_cast<double>(microBatches)});
    b.op(ops::Backward{.unit = 0,
                       .microBatch = mb,
                       .params = pu,
                       .activations = saves,
                       .grads = gu});
    b.free(saves);
    if (sharded) {
      b.free(gathered);
      b.wait(b.op(ops::ReduceScatter{.src = full,
                                     .dst = g,
                                     .group = GroupAxis::Shard,
                                     .reduce = ReduceKind::Avg,
                                     .accumulate = true,
                                     .done = b.event()})
                 .done);
      b.free(full);
    }
  }
  int64_t norm =
      b.alloc("grad_norm", 1, ElementType::F32, false, BufferRole::Scalar);
  b.op(ops::Alloc{norm});
  b.op(ops::Zero{norm});
  b.op(ops::GradNorm{.grads = g, .norm = norm});
  if (sharded)
    b.wait(b.op(ops::AllReduce{.buffer = norm,
                               .group = GroupAxis::Shard,
                               .done = b.event()})
               .done);
  b.op(ops::OptimizerStep{
      .group = 0, .params = p, .grads = g, .state = {m, v}, .norm = norm});
  b.free(norm);
  return b.valid();
}

} // namespace fsdp

TEST(Collectives, FullShardMatchesOneRank) {
  std::vector<MicroBatch> both = {toyBatch({1, 2, 3}, {0, 5, 1}),
                                  toyBatch({4, -1, 2}, {3, 3, 3})};
  ValidSchedule single = fsdp::build(1), sharded = fsdp::build(2);
  ASSERT_EQ(single->groups[0].paddedNumel, fsdp::kUnit);
  ASSERT_EQ(sharded->groups[0].paddedNumel, fsdp::kPadded);
  ToyModel model(1);
  MeshPositionComm one(0, 1, 1);
  auto cpu = DeviceBackend::createCpu();
  Executor reference(single, model, one, *cpu);
  reference.initState(9);
  std::vector<StepResult> expected;
  for (int step = 1; step <= 3; ++step)
    expected.push_back(reference.runStep(step, both));
  ASSERT_GT(expected[0].gradNorm.value_or(0), 0.05); // clipping is active
  at::Tensor weights = reference.buffer(0).clone();

  SharedFloats out(fsdp::kPadded);
  forEachRank(sharded, [&](int rank, Comm &comm) {
    ToyModel m(1);
    auto backend = DeviceBackend::createCpu();
    Executor exec(sharded, m, comm, *backend);
    exec.initState(9);
    for (int step = 1; step <= 3; ++step) {
      StepResult r = exec.runStep(step, {both[rank]});
      EXPECT_NEAR(r.loss, expected[step - 1].loss, 1e-6);
      ASSERT_TRUE(r.gradNorm);
      EXPECT_NEAR(*r.gradNorm, *expected[step - 1].gradNorm, 1e-6);
    }
    std::memcpy(out.data() + rank * 2, exec.buffer(0).data_ptr<float>(),
                2 * sizeof(float));
  });
  for (int64_t i = 0; i < fsdp::kUnit; ++i)
    EXPECT_NEAR(out[i], weights[i].item<float>(), 1e-6) << "element " << i;
  // The padding (rank 1's last element) stays zero: no gradient reaches it,
  // and weight decay keeps zero at zero.
  for (int64_t i = fsdp::kUnit; i < fsdp::kPadded; ++i)
    EXPECT_EQ(out[i], 0.0f) << "padding element " << i;
}
