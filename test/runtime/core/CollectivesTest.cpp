//===- CollectivesTest.cpp - Collectives on Gloo through the Executor -----===//
//
// Every test forks one process per rank (TestSupport.h: forEachRank) that
// connects real Gloo process groups over a FileStore and runs a hand-built
// schedule. Inputs are functions of the global rank so that each rank can
// compute what its peers sent.
//
//===----------------------------------------------------------------------===//

#include "Executor.h"
#include "TestSupport.h"
#include "ToyModel.h"

#include <cstring>
#include <string>
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
    auto async = [&](OpKind kind) -> Op & {
      Op &op = b.op(kind);
      op.event = b.event();
      events.push_back(op.event);
      return op;
    };
    Op &ag = async(OpKind::AllGather);
    ag.src = agSrc, ag.dst = agDst, ag.axis = GroupAxis::Shard;
    Op &rs = async(OpKind::ReduceScatter);
    rs.src = rsSrc, rs.dst = rsAvg, rs.axis = GroupAxis::Shard,
    rs.reduce = ReduceKind::Avg;
    Op &acc = async(OpKind::ReduceScatter);
    acc.src = rsSrc, acc.dst = rsAcc, acc.axis = GroupAxis::Shard,
    acc.reduce = ReduceKind::Sum, acc.accumulate = true;
    Op &ar = async(OpKind::AllReduce);
    ar.buffer = arRep, ar.axis = GroupAxis::Replicate;
    Op &arw = async(OpKind::AllReduce);
    arw.buffer = arWorldAvg, arw.axis = GroupAxis::World,
    arw.reduce = ReduceKind::Avg;
    Op &arm = async(OpKind::AllReduce);
    arm.buffer = arMax, arm.axis = GroupAxis::World,
    arm.reduce = ReduceKind::Max;
    Op &bc = async(OpKind::Broadcast);
    bc.buffer = bcast, bc.axis = GroupAxis::Shard,
    bc.root = static_cast<int64_t>(S - 1);
    Op &ag16 = async(OpKind::AllGather);
    ag16.src = agSrc16, ag16.dst = agDst16, ag16.axis = GroupAxis::Shard;
    Op &rs16 = async(OpKind::ReduceScatter);
    rs16.src = rsSrc16, rs16.dst = rsDst16, rs16.axis = GroupAxis::Shard,
    rs16.reduce = ReduceKind::Avg;
    Op &a16 = async(OpKind::AllReduce);
    a16.buffer = ar16, a16.axis = GroupAxis::World;
    Op &half = async(OpKind::AllReduce);
    half.buffer = arHalf, half.axis = GroupAxis::World,
    half.reduce = ReduceKind::Avg;
    Op &z1 = async(OpKind::AllGather); // zero1's in-place gather
    z1.src = fullShard, z1.dst = full, z1.axis = GroupAxis::Shard;
    for (auto it = events.rbegin(); it != events.rend(); ++it)
      b.wait(*it);
    // hybrid_shard: reduce-scatter over the shard group, then all-reduce the
    // shard over the replicas `after` it; both events waited, the first last.
    Op &hrs = b.op(OpKind::ReduceScatter);
    hrs.src = rsSrc, hrs.dst = hyb, hrs.axis = GroupAxis::Shard,
    hrs.reduce = ReduceKind::Avg, hrs.event = b.event();
    int64_t first = hrs.event;
    Op &har = b.op(OpKind::AllReduce);
    har.buffer = hyb, har.axis = GroupAxis::Replicate,
    har.reduce = ReduceKind::Avg, har.after = {first}, har.event = b.event();
    b.wait(har.event);
    b.wait(first);
    b.s.microBatches = 0;
  }
};

void fill(at::Tensor t, int which, int rank) {
  at::Tensor f = at::empty({t.numel()});
  for (int64_t i = 0; i < t.numel(); ++i)
    f[i] = input(which, rank, i);
  t.copy_(f);
}

void runCollectives(int64_t replicate, int64_t shard) {
  CollectiveSchedule cs(replicate, shard);
  const Schedule &s = cs.b.s;
  forEachRank(s, [&](int rank, Comm &comm) {
    ToyModel model(0);
    Executor exec(s, model, comm, at::kCPU);
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
    StepResult r = exec.runStep(1, {});
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
// with an error that names the op and its plan line.
TEST(Collectives, TimeoutNamesTheOpAndLine) {
  ScheduleBuilder b(1, 2);
  int64_t x = b.alloc("x", 4);
  Op &ar = b.op(OpKind::AllReduce);
  ar.buffer = x, ar.axis = GroupAxis::Shard, ar.event = b.event(), ar.line = 17;
  b.wait(ar.event);
  b.s.microBatches = 0;
  forEachRank(
      b.s,
      [&](int rank, Comm &comm) {
        if (rank == 1) {
          std::this_thread::sleep_for(std::chrono::milliseconds(2500));
          return;
        }
        ToyModel model(0);
        Executor exec(b.s, model, comm, at::kCPU);
        try {
          exec.runStep(1, {});
          ADD_FAILURE() << "expected an error";
        } catch (const ExecutionError &e) {
          std::string what = e.what();
          EXPECT_EQ(what.rfind("all_reduce (op 0, line 17) failed: ", 0), 0u)
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
    s.microBatches = microBatches;
    Unit u;
    u.name = "u0";
    u.numel = 3;
    s.units.push_back(u);
    s.groups.push_back(Group{"g", {"u0"}, 3, 3, 3});
    int64_t p =
        b.alloc("g.param", 3, ElementType::F32, true, BufferRole::Param);
    s.buffers[p].group = "g";
    int64_t g = b.alloc("g.grad", 3, ElementType::F32, true, BufferRole::Grad);
    int64_t m =
        b.alloc("g.momentum", 3, ElementType::F32, true, BufferRole::Momentum);
    s.train.optimizer.momentum = 0.9;
    b.op(OpKind::Zero).buffer = g;
    for (int64_t mb = 0; mb < microBatches; ++mb) {
      Op &f = b.op(OpKind::Forward);
      f.unit = 0, f.microBatch = mb, f.params = p;
      Op &l = b.op(OpKind::Loss);
      l.unit = 0, l.microBatch = mb,
      l.scale = 1.0 / static_cast<double>(microBatches);
      Op &bw = b.op(OpKind::Backward);
      bw.unit = 0, bw.microBatch = mb, bw.params = p, bw.grads = g;
    }
    if (replicate > 1) {
      Op &ar = b.op(OpKind::AllReduce);
      ar.buffer = g, ar.axis = GroupAxis::Replicate,
      ar.reduce = ReduceKind::Avg, ar.event = b.event();
      b.wait(ar.event);
    }
    Op &step = b.op(OpKind::OptimizerStep);
    step.group = 0, step.params = p, step.grads = g, step.state = {m};
    return s;
  };
  std::vector<MicroBatch> both = {toyBatch({1, 2, 3}, {0, 5, 1}),
                                  toyBatch({4, -1, 2}, {3, 3, 3})};
  Schedule single = build(1, 2), ddp = build(2, 1);
  ToyModel model(1);
  MeshPositionComm one(0, 1, 1);
  Executor reference(single, model, one, at::kCPU);
  reference.initState(5);
  std::vector<double> losses;
  for (int step = 1; step <= 2; ++step)
    losses.push_back(reference.runStep(step, both).loss);
  at::Tensor expected = reference.buffer(0).clone();

  SharedFloats out(2 * 3 + 2);
  forEachRank(ddp, [&](int rank, Comm &comm) {
    ToyModel m(1);
    Executor exec(ddp, m, comm, at::kCPU);
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

Schedule build(int64_t shard) {
  ScheduleBuilder b(1, shard);
  Schedule &s = b.s;
  int64_t microBatches = shard == 1 ? 2 : 1, n = kPadded / shard;
  s.microBatches = microBatches;
  s.train.gradClip = 0.05;
  s.train.optimizer.kind = "adamw";
  s.train.optimizer.lr = 0.01;
  s.train.optimizer.weightDecay = 0.1;
  Unit u;
  u.name = "u0";
  u.numel = kUnit;
  s.units.push_back(u);
  s.groups.push_back(Group{"g", {"u0"}, kUnit, kPadded, n});
  auto state = [&](const char *name, BufferRole role) {
    int64_t id = b.alloc(name, n, ElementType::F32, true, role);
    s.buffers[id].group = "g";
    s.buffers[id].sharded = shard > 1;
    return id;
  };
  int64_t p = state("g.param", BufferRole::Param);
  int64_t g = state("g.grad", BufferRole::Grad);
  int64_t m = state("g.exp_avg", BufferRole::ExpAvg);
  int64_t v = state("g.exp_avg_sq", BufferRole::ExpAvgSq);
  b.op(OpKind::Zero).buffer = g;
  for (int64_t mb = 0; mb < microBatches; ++mb) {
    int64_t params = p, grads = g, gathered = -1, full = -1;
    if (shard > 1) {
      gathered = b.alloc("g.gathered", kPadded, ElementType::F32, false,
                         BufferRole::Gathered);
      b.op(OpKind::Alloc).buffer = gathered;
      Op &ag = b.op(OpKind::AllGather);
      ag.src = p, ag.dst = gathered, ag.event = b.event();
      b.wait(ag.event);
      full = b.alloc("g.grad.full", kPadded, ElementType::F32, false,
                     BufferRole::UnshardedGrad);
      b.op(OpKind::Alloc).buffer = full;
      b.op(OpKind::Zero).buffer = full;
      params = gathered, grads = full;
    }
    int64_t pu = b.view(params, 0, kUnit), gu = b.view(grads, 0, kUnit);
    Op &f = b.op(OpKind::Forward);
    f.unit = 0, f.microBatch = mb, f.params = pu;
    Op &l = b.op(OpKind::Loss);
    l.unit = 0, l.microBatch = mb,
    l.scale = 1.0 / static_cast<double>(microBatches);
    Op &bw = b.op(OpKind::Backward);
    bw.unit = 0, bw.microBatch = mb, bw.params = pu, bw.grads = gu;
    if (shard > 1) {
      b.op(OpKind::Free).buffer = gathered;
      Op &rs = b.op(OpKind::ReduceScatter);
      rs.src = full, rs.dst = g, rs.reduce = ReduceKind::Avg,
      rs.accumulate = true, rs.event = b.event();
      b.wait(rs.event);
      b.op(OpKind::Free).buffer = full;
    }
  }
  int64_t norm =
      b.alloc("grad_norm", 1, ElementType::F32, false, BufferRole::Scalar);
  b.op(OpKind::Alloc).buffer = norm;
  b.op(OpKind::Zero).buffer = norm;
  Op &gn = b.op(OpKind::GradNorm);
  gn.src = g, gn.scalar = norm;
  if (shard > 1) {
    Op &ar = b.op(OpKind::AllReduce);
    ar.buffer = norm, ar.event = b.event();
    b.wait(ar.event);
  }
  Op &step = b.op(OpKind::OptimizerStep);
  step.group = 0, step.params = p, step.grads = g, step.state = {m, v},
  step.norm = norm;
  b.op(OpKind::Free).buffer = norm;
  return s;
}

} // namespace fsdp

TEST(Collectives, FullShardMatchesOneRank) {
  std::vector<MicroBatch> both = {toyBatch({1, 2, 3}, {0, 5, 1}),
                                  toyBatch({4, -1, 2}, {3, 3, 3})};
  Schedule single = fsdp::build(1), sharded = fsdp::build(2);
  ToyModel model(1);
  MeshPositionComm one(0, 1, 1);
  Executor reference(single, model, one, at::kCPU);
  reference.initState(9);
  std::vector<StepResult> expected;
  for (int step = 1; step <= 3; ++step)
    expected.push_back(reference.runStep(step, both));
  ASSERT_GT(expected[0].gradNorm, 0.05); // clipping is active
  at::Tensor weights = reference.buffer(0).clone();

  SharedFloats out(fsdp::kPadded);
  forEachRank(sharded, [&](int rank, Comm &comm) {
    ToyModel m(1);
    Executor exec(sharded, m, comm, at::kCPU);
    exec.initState(9);
    for (int step = 1; step <= 3; ++step) {
      StepResult r = exec.runStep(step, {both[rank]});
      EXPECT_NEAR(r.loss, expected[step - 1].loss, 1e-6);
      EXPECT_NEAR(r.gradNorm, expected[step - 1].gradNorm, 1e-6);
    }
    std::memcpy(out.data() + rank * 2, exec.buffer(0).data_ptr<float>(),
                2 * sizeof(float));
  });
  for (int64_t i = 0; i < fsdp::kPadded; ++i)
    EXPECT_NEAR(out[i], weights[i].item<float>(), 1e-6) << "element " << i;
}
