//===- ReportTest.cpp - The report's communication and time models --------===//
//
// The ring convention and group placement of CommModel.h, and the stream
// semantics of the time model (issue order, `after`, `sched.wait`, one op at
// a time per stream) on a hand-written schedule whose timeline is derived
// in the comments. The lit tests in test/report/ check whole plans.
//
//===----------------------------------------------------------------------===//

#include "report/Report.h"
#include "frontend/Frontend.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"

#include "gtest/gtest.h"

using namespace plan;

namespace {

/// An MLIR context with the plan dialects, to parse test IR in.
struct PlanContext {
  PlanContext() : context(registry()) {}
  mlir::OwningOpRef<mlir::ModuleOp> parse(llvm::StringRef ir) {
    return mlir::parseSourceString<mlir::ModuleOp>(ir, &context);
  }
  static mlir::DialectRegistry registry() {
    mlir::DialectRegistry r;
    registerPlanDialects(r);
    return r;
  }
  mlir::MLIRContext context;
};

TEST(RingConvention, BytesSentPerRank) {
  // tiny_llama_cpu: a block's gathered buffer, 46208 f32 on 2 ranks.
  EXPECT_EQ(ringSendBytes(CollectiveKind::AllGather, 184832, 2), 92416u);
  EXPECT_EQ(ringSendBytes(CollectiveKind::ReduceScatter, 184832, 2), 92416u);
  // all_reduce = reduce-scatter + all-gather: 2 (n-1)/n.
  EXPECT_EQ(ringSendBytes(CollectiveKind::AllReduce, 800, 8), 1400u);
  EXPECT_EQ(ringSendBytes(CollectiveKind::AllGather, 800, 8), 700u);
  // A pipelined broadcast forwards the whole buffer.
  EXPECT_EQ(ringSendBytes(CollectiveKind::Broadcast, 800, 8), 800u);
  // One rank sends nothing.
  for (CollectiveKind kind :
       {CollectiveKind::AllGather, CollectiveKind::ReduceScatter,
        CollectiveKind::AllReduce, CollectiveKind::Broadcast})
    EXPECT_EQ(ringSendBytes(kind, 800, 1), 0u);
  EXPECT_EQ(ringSteps(CollectiveKind::AllGather, 8), 7);
  EXPECT_EQ(ringSteps(CollectiveKind::AllReduce, 8), 14);
  EXPECT_EQ(ringSteps(CollectiveKind::Broadcast, 1), 0);
}

class PlacementTest : public ::testing::Test {
protected:
  PlacementTest() { context.loadDialect<PlanDialect>(); }
  ClusterAttr cluster(int64_t nodes, int64_t perNode, double nvlink) {
    DeviceAttr device = DeviceAttr::get(&context, "test", 80ll << 30, 1000.0,
                                        1000.0, 60.0, 3e12, nvlink, 50e9, 7e-6);
    return ClusterAttr::get(&context, nodes, perNode, device, 1ll << 40, 25e9,
                            409.6e9, 128);
  }
  mlir::MLIRContext context;
};

TEST_F(PlacementTest, GroupsFollowTheRankLayout) {
  // 2 nodes x 8, mesh (2, 8): shard = ranks 0-7 (node 0), replicate {0, 8}.
  ClusterAttr twoNodes = cluster(2, 8, 450e9);
  GroupPlacement shard = placeGroup(twoNodes, 2, 8, 1, sched::Group::Shard);
  EXPECT_EQ(shard.size, 8);
  EXPECT_TRUE(shard.intraNode);
  EXPECT_EQ(shard.bandwidth, 450e9);
  EXPECT_EQ(shard.stepLatency, 7e-6); // the device's link_latency
  GroupPlacement replicate =
      placeGroup(twoNodes, 2, 8, 1, sched::Group::Replicate);
  EXPECT_EQ(replicate.size, 2);
  EXPECT_FALSE(replicate.intraNode);
  EXPECT_EQ(replicate.bandwidth, 25e9);
  EXPECT_EQ(replicate.stepLatency, kInterNodeStepLatency);
  EXPECT_FALSE(placeGroup(twoNodes, 2, 8, 1, sched::Group::World).intraNode);
  // mesh (1, 16): the shard group spans both nodes.
  EXPECT_FALSE(placeGroup(twoNodes, 1, 16, 1, sched::Group::Shard).intraNode);
  // mesh (4, 4) on nodes of 8: replicate {0, 4, 8, 12} leaves node 0,
  // mesh (2, 4) on one node of 8 does not.
  EXPECT_FALSE(
      placeGroup(twoNodes, 4, 4, 1, sched::Group::Replicate).intraNode);
  ClusterAttr oneNode = cluster(1, 8, 0);
  GroupPlacement pcie = placeGroup(oneNode, 2, 4, 1, sched::Group::Replicate);
  EXPECT_TRUE(pcie.intraNode);
  // No NVLink: peers talk over PCIe.
  EXPECT_EQ(pcie.bandwidth, 50e9);
}

// A tensor axis: tensor groups are consecutive ranks, the data-parallel
// groups strided by T (rank = (r S + s) T + t).
TEST_F(PlacementTest, TensorAxis) {
  ClusterAttr twoNodes = cluster(2, 8, 450e9);
  // mesh (1, 2, 8): tensor = ranks 0-7 (node 0), shard {0, 8} across.
  GroupPlacement tensor = placeGroup(twoNodes, 1, 2, 8, sched::Group::Tensor);
  EXPECT_EQ(tensor.size, 8);
  EXPECT_TRUE(tensor.intraNode);
  EXPECT_EQ(tensor.bandwidth, 450e9);
  GroupPlacement shard = placeGroup(twoNodes, 1, 2, 8, sched::Group::Shard);
  EXPECT_EQ(shard.size, 2);
  EXPECT_FALSE(shard.intraNode);
  EXPECT_FALSE(placeGroup(twoNodes, 1, 2, 8, sched::Group::World).intraNode);
  // mesh (2, 2, 4): shard {0, 4} inside node 0, replicate {0, 8} across,
  // world (data-parallel) {0, 4, 8, 12} across.
  EXPECT_TRUE(placeGroup(twoNodes, 2, 2, 4, sched::Group::Shard).intraNode);
  EXPECT_FALSE(
      placeGroup(twoNodes, 2, 2, 4, sched::Group::Replicate).intraNode);
  EXPECT_EQ(placeGroup(twoNodes, 2, 2, 4, sched::Group::World).size, 4);
  // A tensor group wider than a node crosses it.
  EXPECT_FALSE(placeGroup(twoNodes, 1, 1, 16, sched::Group::Tensor).intraNode);
}

TEST_F(PlacementTest, CollectiveSeconds) {
  GroupPlacement shard =
      placeGroup(cluster(1, 8, 400e9), 1, 8, 1, sched::Group::Shard);
  // 7 steps of the device's 7 us + 7/8 of 8e9 B at 0.8 * 400e9 B/s.
  EXPECT_DOUBLE_EQ(
      collectiveSeconds(CollectiveKind::AllGather, 8000000000ull, shard),
      7 * 7e-6 + 7e9 / 320e9);
  GroupPlacement alone =
      placeGroup(cluster(1, 8, 400e9), 8, 1, 1, sched::Group::Shard);
  EXPECT_EQ(collectiveSeconds(CollectiveKind::AllReduce, 1000, alone), 0);
}

// One node of 4 ranks, mesh (1, 4); NVLink 100 GB/s, PCIe 10 GB/s.
constexpr const char *kSchedule = R"mlir(
shard.grid @mesh(shape = 1x1x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 512, hidden = 64, intermediate = 176, layers = 2, heads = 4, kv_heads = 2, max_seq_len = 256>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 4, device = <name = "test", memory = 1000000000, bf16_tflops = 100.0, fp16_tflops = 100.0, fp32_tflops = 10.0, hbm_bandwidth = 1.0e12, nvlink_bandwidth = 1.0e11, pcie_bandwidth = 1.0e10>, host_memory = 100000000000, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = adamw, lr = 0.001>, micro_batch = 1, seq_len = 128, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 1
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 512, hidden = 64, intermediate = 176, layers = 2, heads = 4, kv_heads = 2, max_seq_len = 256>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 4, device = <name = "test", memory = 1000000000, bf16_tflops = 100.0, fp16_tflops = 100.0, fp32_tflops = 10.0, hbm_bandwidth = 1.0e12, nvlink_bandwidth = 1.0e11, pcie_bandwidth = 1.0e10>, host_memory = 100000000000, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = adamw, lr = 0.001>, micro_batch = 1, seq_len = 128, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> attributes {arena_bytes = {device = 20000000 : i64, pinned_host = 2000000 : i64}, persistent_bytes = {device = 0 : i64, pinned_host = 2000000 : i64}, workspace_bytes = 3000000 : i64, workspace_at = "all_gather v.gathered"} {
  %h = sched.alloc "w.param" role param persistent : memref<1000000xbf16, #sched.space<pinned_host>>
  %s = sched.alloc "w.param.staging" role staging : memref<1000000xbf16, #sched.space<device>>
  %c = sched.copy %h into %s : memref<1000000xbf16, #sched.space<pinned_host>>, memref<1000000xbf16, #sched.space<device>>
  %g = sched.alloc "w.gathered" role gathered : memref<4000000xbf16, #sched.space<device>>
  %e = sched.all_gather %s into %g group shard after %c : memref<1000000xbf16, #sched.space<device>>, memref<4000000xbf16, #sched.space<device>>
  %g2 = sched.alloc "v.gathered" role gathered : memref<4000000xbf16, #sched.space<device>>
  %e2 = sched.all_gather %s into %g2 group shard : memref<1000000xbf16, #sched.space<device>>, memref<4000000xbf16, #sched.space<device>>
  sched.wait %c
  sched.wait %e
  sched.wait %e2
  sched.zero %g : memref<4000000xbf16, #sched.space<device>>
  sched.free %g2 : memref<4000000xbf16, #sched.space<device>>
  sched.free %g : memref<4000000xbf16, #sched.space<device>>
  sched.free %s : memref<1000000xbf16, #sched.space<device>>
}
)mlir";

TEST(TimeModel, StreamsFollowIssueOrderAfterAndWaits) {
  PlanContext ir;
  mlir::OwningOpRef<mlir::ModuleOp> module = ir.parse(kSchedule);
  ASSERT_TRUE(module);
  mlir::FailureOr<ScheduleReport> report = analyzeSchedule(*module);
  ASSERT_TRUE(mlir::succeeded(report));
  const StepTime &time = report->time;

  // The copy: 2e6 B at 0.8 * 10 GB/s = 250 us on h2d, from 0.
  // The first gather follows it (`after`): 3 ring steps of 5 us + 6e6 B sent
  // at 0.8 * 100 GB/s = 90 us, from 250 to 340 us.
  // The second gather was issued at 0 but the comm stream is busy until 340:
  // 340 to 430 us.
  // Compute waits for the copy (250 us exposed copy), then for each gather
  // (90 + 90 us exposed communication), then zeroes 8e6 B at 0.8 TB/s (10 us).
  EXPECT_NEAR(time.busySeconds[static_cast<int>(Stream::HostToDevice)], 250e-6,
              1e-12);
  EXPECT_NEAR(time.busySeconds[static_cast<int>(Stream::Comm)], 180e-6, 1e-12);
  EXPECT_NEAR(time.exposedCopySeconds, 250e-6, 1e-12);
  EXPECT_NEAR(time.exposedCommSeconds, 180e-6, 1e-12);
  EXPECT_NEAR(time.memoryBoundSeconds, 10e-6, 1e-12);
  EXPECT_NEAR(time.stepSeconds, 440e-6, 1e-12);

  ASSERT_EQ(time.slices.size(), 7u);
  EXPECT_EQ(time.slices[0].name, "copy w.param into w.param.staging");
  EXPECT_EQ(time.slices[0].stream, Stream::HostToDevice);
  EXPECT_EQ(time.slices[1].name, "all_gather w.gathered (shard)");
  EXPECT_NEAR(time.slices[1].start, 250e-6, 1e-12);
  EXPECT_EQ(time.slices[2].name, "all_gather v.gathered (shard)");
  EXPECT_NEAR(time.slices[2].start, 340e-6, 1e-12);
  EXPECT_EQ(time.slices[3].name, "wait copy w.param into w.param.staging");
  EXPECT_EQ(time.slices[6].name, "zero w.gathered");
  EXPECT_NEAR(time.slices[6].start, 430e-6, 1e-12);

  // Memory: the most is live from the second alloc of a gathered buffer to
  // the first free: 2e6 + 8e6 + 8e6 device bytes; the arena attribute says
  // 2e7, so 2e6 of slack count as `other`.
  const SpaceMemory &device = report->memory.device();
  EXPECT_EQ(device.livePeakBytes, 18000000u);
  EXPECT_EQ(device.peakAt, "alloc v.gathered");
  EXPECT_EQ(device.atPeak[static_cast<int>(MemoryCategory::Params)], 16000000u);
  EXPECT_EQ(device.atPeak[static_cast<int>(MemoryCategory::CommBuffers)],
            2000000u);
  EXPECT_EQ(device.atPeak[static_cast<int>(MemoryCategory::Other)], 2000000u);
  EXPECT_EQ(report->memory.modelStatesBytes, 0u);
  // The workspace is read from the program; the device's peak adds it.
  EXPECT_EQ(report->memory.workspaceBytes, 3000000u);
  EXPECT_EQ(report->memory.workspaceAt, "all_gather v.gathered");
  EXPECT_EQ(report->memory.devicePeakBytes(), 23000000u);
  // 1e9 B of device memory, 20 MB arena + 3 MB workspace + 1 GiB reserve:
  // does not fit.
  EXPECT_FALSE(report->memory.deviceFits);
  EXPECT_TRUE(report->memory.hostFits);
  EXPECT_EQ(report->memory.hostBytesPerNode, 4u * 2000000u);

  // Communication: 2 gathers of 8e6 B on 4 ranks, 6e6 B sent each.
  const CommTotals &gathers =
      report->comm.perKind[static_cast<int>(CollectiveKind::AllGather)];
  EXPECT_EQ(gathers.count, 2);
  EXPECT_EQ(gathers.bytes, 12000000u);
  EXPECT_EQ(report->comm.intraNodeBytes, 12000000u);
}

// Two pipeline stages on one node: stage 0 zeroes 4e6 B (5 us at 0.8 x
// 1 TB/s) and sends its 32-element output; stage 1 receives it, then zeroes
// as much.
constexpr const char *kPipeline = R"mlir(
#dev = #sched.space<device>
shard.grid @mesh(shape = 2x1x1x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "test", memory = 1000000000, bf16_tflops = 100.0, fp16_tflops = 100.0, fp32_tflops = 10.0, hbm_bandwidth = 1.0e12, nvlink_bandwidth = 1.0e11, pcie_bandwidth = 1.0e10>, host_memory = 100000000000, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 1, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>, pipeline_schedule = gpipe> {
  plan.unit @embed kind embedding stage 0 {
  }
  plan.unit @layers.0 kind llama_block stage 0 {
  }
  plan.unit @layers.1 kind llama_block stage 1 {
  }
  plan.unit @head kind llama_head stage 1 {
  }
}
sched.program @p.stage0 for @p stage 0 micro_batches 1
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "test", memory = 1000000000, bf16_tflops = 100.0, fp16_tflops = 100.0, fp32_tflops = 10.0, hbm_bandwidth = 1.0e12, nvlink_bandwidth = 1.0e11, pcie_bandwidth = 1.0e10>, host_memory = 100000000000, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 1, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>, pipeline_schedule = gpipe> {
  %w = sched.alloc "w" role activations : memref<1000000xf32, #dev>
  sched.zero %w : memref<1000000xf32, #dev>
  sched.free %w : memref<1000000xf32, #dev>
  %y = sched.alloc "y" role exchange : memref<32xf32, #dev>
  %e = sched.send %y to next for @p::@layers.0 mb 0 : memref<32xf32, #dev>
  sched.wait %e
  sched.free %y : memref<32xf32, #dev>
}
sched.program @p.stage1 for @p stage 1 micro_batches 1
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "test", memory = 1000000000, bf16_tflops = 100.0, fp16_tflops = 100.0, fp32_tflops = 10.0, hbm_bandwidth = 1.0e12, nvlink_bandwidth = 1.0e11, pcie_bandwidth = 1.0e10>, host_memory = 100000000000, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 1, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>, pipeline_schedule = gpipe> {
  %x = sched.alloc "x" role exchange : memref<32xf32, #dev>
  %e = sched.recv %x from prev for @p::@layers.0 mb 0 : memref<32xf32, #dev>
  sched.wait %e
  sched.free %x : memref<32xf32, #dev>
  %w = sched.alloc "w" role activations : memref<1000000xf32, #dev>
  sched.zero %w : memref<1000000xf32, #dev>
  sched.free %w : memref<1000000xf32, #dev>
}
)mlir";

TEST(TimeModel, PipelineStagesWaitForTheirNeighbours) {
  PlanContext ir;
  mlir::OwningOpRef<mlir::ModuleOp> module = ir.parse(kPipeline);
  ASSERT_TRUE(module);
  llvm::SmallVector<sched::ProgramOp> stages(
      module->getOps<sched::ProgramOp>());
  ASSERT_EQ(stages.size(), 2u);

  // Each stage alone: stage 1's receive starts at once.
  mlir::FailureOr<StepTime> alone = simulateStep(stages[1]);
  ASSERT_TRUE(mlir::succeeded(alone));
  double transfer = alone->stepSeconds - 5e-6; // one hop of 128 B
  EXPECT_GT(transfer, 0);
  EXPECT_EQ(alone->pipelineWaitSeconds, 0);

  // Together: the transfer starts when stage 0 sends, after its zero (5
  // us). Stage 0 waits for the transfer; stage 1 for the zero and the
  // transfer, then zeroes.
  mlir::FailureOr<std::vector<StepTime>> together = simulatePipeline(stages);
  ASSERT_TRUE(mlir::succeeded(together));
  const StepTime &first = (*together)[0], &second = (*together)[1];
  EXPECT_NEAR(first.pipelineWaitSeconds, transfer, 1e-12);
  EXPECT_NEAR(first.stepSeconds, 5e-6 + transfer, 1e-12);
  EXPECT_NEAR(second.pipelineWaitSeconds, 5e-6 + transfer, 1e-12);
  EXPECT_NEAR(second.stepSeconds, 10e-6 + transfer, 1e-12);
  EXPECT_EQ(first.exposedCommSeconds, 0);
  EXPECT_EQ(second.exposedCommSeconds, 0);
  // The transfer is on both timelines, at the same time.
  auto transferSlice = [](const StepTime &t) {
    for (const TimelineSlice &slice : t.slices)
      if (slice.stream == Stream::Comm)
        return slice;
    return TimelineSlice{};
  };
  EXPECT_EQ(transferSlice(first).name, "send y (next)");
  EXPECT_EQ(transferSlice(second).name, "recv x (prev)");
  EXPECT_NEAR(transferSlice(first).start, 5e-6, 1e-12);
  EXPECT_NEAR(transferSlice(second).start, 5e-6, 1e-12);
}

// Two nodes of 2 ranks, mesh shard 2 x tensor 2: the tensor group is rank
// 0's node (NVLink 100 GB/s), the shard group crosses nodes. A big shard
// gather is issued first, then a tensor gather the compute stream waits for
// at once.
constexpr const char *kTwoLinks = R"mlir(
#dev = #sched.space<device>
shard.grid @mesh(shape = 1x1x2x2)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 512, hidden = 64, intermediate = 176, layers = 2, heads = 4, kv_heads = 2, max_seq_len = 256>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 2, device = <name = "test", memory = 1000000000, bf16_tflops = 100.0, fp16_tflops = 100.0, fp32_tflops = 10.0, hbm_bandwidth = 1.0e12, nvlink_bandwidth = 1.0e11, pcie_bandwidth = 1.0e10>, host_memory = 100000000000, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = adamw, lr = 0.001>, micro_batch = 1, seq_len = 128, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 1
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 512, hidden = 64, intermediate = 176, layers = 2, heads = 4, kv_heads = 2, max_seq_len = 256>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 2, device = <name = "test", memory = 1000000000, bf16_tflops = 100.0, fp16_tflops = 100.0, fp32_tflops = 10.0, hbm_bandwidth = 1.0e12, nvlink_bandwidth = 1.0e11, pcie_bandwidth = 1.0e10>, host_memory = 100000000000, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = adamw, lr = 0.001>, micro_batch = 1, seq_len = 128, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
  %s = sched.alloc "w.shard" role param : memref<1000000xbf16, #dev>
  %g = sched.alloc "w.gathered" role gathered : memref<2000000xbf16, #dev>
  %e = sched.all_gather %s into %g group shard : memref<1000000xbf16, #dev>, memref<2000000xbf16, #dev>
  %x = sched.alloc "x" role activations : memref<1000xbf16, #dev>
  %y = sched.alloc "y" role activations : memref<2000xbf16, #dev>
  %e2 = sched.all_gather %x into %y group tensor : memref<1000xbf16, #dev>, memref<2000xbf16, #dev>
  sched.wait %e2
  sched.wait %e
  sched.free %y : memref<2000xbf16, #dev>
  sched.free %x : memref<1000xbf16, #dev>
  sched.free %g : memref<2000000xbf16, #dev>
  sched.free %s : memref<1000000xbf16, #dev>
}
)mlir";

TEST(TimeModel, GroupsOnDifferentLinksRunTogether) {
  PlanContext ir;
  mlir::OwningOpRef<mlir::ModuleOp> module = ir.parse(kTwoLinks);
  ASSERT_TRUE(module);
  auto program = *module->getOps<sched::ProgramOp>().begin();
  mlir::FailureOr<StepTime> time = simulateStep(program);
  ASSERT_TRUE(mlir::succeeded(time));

  // Each gather starts when issued, on its own link: the tensor group's does
  // not queue behind the shard group's, as it would on one stream.
  ASSERT_EQ(time->slices.size(), 4u);
  const TimelineSlice &shard = time->slices[0], &tensor = time->slices[1];
  EXPECT_EQ(shard.name, "all_gather w.gathered (shard)");
  EXPECT_EQ(shard.stream, Stream::Network);
  EXPECT_EQ(tensor.name, "all_gather y (tensor)");
  EXPECT_EQ(tensor.stream, Stream::Comm);
  EXPECT_EQ(shard.start, 0);
  EXPECT_EQ(tensor.start, 0);
  // One ring step of 5 us and 2,000 B sent at 0.8 x 100 GB/s.
  EXPECT_NEAR(tensor.duration, 5e-6 + 2000 / 80e9, 1e-12);
  EXPECT_GT(shard.duration, tensor.duration);

  // The compute stream waits for the tensor gather, then for the rest of
  // the shard gather: each wait is its own group's.
  EXPECT_NEAR(time->exposedCommSeconds, shard.duration, 1e-12);
  int tensorGroup = static_cast<int>(sched::Group::Tensor);
  int shardGroup = static_cast<int>(sched::Group::Shard);
  EXPECT_NEAR(time->groupExposedSeconds[tensorGroup], tensor.duration, 1e-12);
  EXPECT_NEAR(time->groupExposedSeconds[shardGroup],
              shard.duration - tensor.duration, 1e-12);
  EXPECT_NEAR(time->busySeconds[static_cast<int>(Stream::Network)],
              shard.duration, 1e-12);
  EXPECT_NEAR(time->commBusySeconds(), shard.duration + tensor.duration, 1e-12);
  EXPECT_NEAR(time->stepSeconds, shard.duration, 1e-12);
}

TEST(MemoryReport, NeedsTheWorkspacePlan) {
  // A program that sched-plan-workspace did not run on is an error, not a
  // report that silently leaves the workspace out of the peak.
  std::string text = kSchedule;
  const std::string attr =
      ", workspace_bytes = 3000000 : i64, workspace_at = \"all_gather "
      "v.gathered\"";
  size_t at = text.find(attr);
  ASSERT_NE(at, std::string::npos);
  text.erase(at, attr.size());
  PlanContext ir;
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler(&ir.context, [&](mlir::Diagnostic &d) {
    diagnostics += d.str();
    return mlir::success();
  });
  mlir::OwningOpRef<mlir::ModuleOp> module = ir.parse(text);
  ASSERT_TRUE(module);
  EXPECT_TRUE(mlir::failed(analyzeSchedule(*module)));
  EXPECT_NE(diagnostics.find("has no workspace plan: the report reads the "
                             "workspace_bytes that sched-plan-workspace sets"),
            std::string::npos)
      << diagnostics;
}

TEST(TimeModel, FlopsOfAUnit) {
  PlanContext ir;
  // A llama block of llama_tiny: 46208 parameters; b = 2, s = 8, h = 64.
  mlir::OwningOpRef<mlir::ModuleOp> module = ir.parse(R"mlir(
shard.grid @mesh(shape = 1x1x1x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 512, hidden = 64, intermediate = 176, layers = 2, heads = 4, kv_heads = 2, max_seq_len = 256>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 1, device = <name = "cpu", memory = 1000000000, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0e10>, host_memory = 1000000000, inter_node_bandwidth = 1.0e10>
    train #plan.train<optimizer = <kind = adamw, lr = 0.001>, micro_batch = 2, seq_len = 8, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<512x64xf32>
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.self_attn.q_proj.weight" : tensor<64x64xf32>
    plan.param "model.layers.0.self_attn.k_proj.weight" : tensor<32x64xf32>
    plan.param "model.layers.0.self_attn.v_proj.weight" : tensor<32x64xf32>
    plan.param "model.layers.0.self_attn.o_proj.weight" : tensor<64x64xf32>
    plan.param "model.layers.0.mlp.gate_proj.weight" : tensor<176x64xf32>
    plan.param "model.layers.0.mlp.up_proj.weight" : tensor<176x64xf32>
    plan.param "model.layers.0.mlp.down_proj.weight" : tensor<64x176xf32>
    plan.param "model.layers.0.input_layernorm.weight" : tensor<64xf32>
    plan.param "model.layers.0.post_attention_layernorm.weight" : tensor<64xf32>
  }
}
)mlir");
  ASSERT_TRUE(module);
  PlanOp plan = *module->getOps<PlanOp>().begin();
  UnitFlops block =
      unitForwardFlops(plan.lookupUnit("layers.0"), plan.getModel(), 2, 8);
  // 2 * 46208 * 16 tokens; attention 4 b s^2 h = 4 * 2 * 64 * 64 = 32768,
  // causal: half of it executed, and half of it counted for MFU (the kernels'
  // work; PaLM's formula counts all of it).
  EXPECT_EQ(block.model, 2.0 * 46208 * 16 + 16384);
  EXPECT_EQ(block.executed, 2.0 * 46208 * 16 + 16384);
  EXPECT_EQ(block.frozen, 0);
  EXPECT_EQ(block.backward(), 2 * block.executed);
  UnitFlops embed =
      unitForwardFlops(plan.lookupUnit("embed"), plan.getModel(), 2, 8);
  EXPECT_EQ(embed.model, 0);
  EXPECT_EQ(embed.executed, 0);
}

// Tensor parallelism: a rank multiplies by its slices and computes its
// heads' attention; each part of the unit counts what it computes with, and
// the parts add up to the unit.
TEST(TimeModel, TensorParallelPartsAddUpToARanksShare) {
  PlanContext ir;
  mlir::OwningOpRef<mlir::ModuleOp> module = ir.parse(R"mlir(
shard.grid @mesh(shape = 1x1x1x2)
plan.plan @p on @mesh
    model #plan.model<family = llama, vocab = 512, hidden = 64, intermediate = 176, layers = 1, heads = 4, kv_heads = 2, max_seq_len = 256>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 1000000000, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0e10>, host_memory = 1000000000, inter_node_bandwidth = 1.0e10>
    train #plan.train<optimizer = <kind = adamw, lr = 0.001>, micro_batch = 2, seq_len = 8, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.self_attn.q_proj.weight" : tensor<64x64xf32> split <dim = 0>
    plan.param "model.layers.0.self_attn.k_proj.weight" : tensor<32x64xf32> split <dim = 0>
    plan.param "model.layers.0.self_attn.v_proj.weight" : tensor<32x64xf32> split <dim = 0>
    plan.param "model.layers.0.self_attn.o_proj.weight" : tensor<64x64xf32> split <dim = 1>
    plan.param "model.layers.0.mlp.gate_proj.weight" : tensor<176x64xf32> split <dim = 0>
    plan.param "model.layers.0.mlp.up_proj.weight" : tensor<176x64xf32> split <dim = 0>
    plan.param "model.layers.0.mlp.down_proj.weight" : tensor<64x176xf32> split <dim = 1>
    plan.param "model.layers.0.input_layernorm.weight" : tensor<64xf32>
    plan.param "model.layers.0.post_attention_layernorm.weight" : tensor<64xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<64xf32>
    plan.param "lm_head.weight" : tensor<512x64xf32> split <dim = 0>
  }
}
)mlir");
  ASSERT_TRUE(module);
  PlanOp plan = *module->getOps<PlanOp>().begin();
  UnitOp block = plan.lookupUnit("layers.0");
  // 16 tokens: the divided weights' 46080 elements / 2 and the norms' 128;
  // the attention of 2 of the 4 heads, causal: 4 b s^2 h / 2 / 2.
  UnitFlops whole = unitForwardFlops(block, plan.getModel(), 2, 8);
  EXPECT_EQ(whole.executed, 2.0 * (23040 + 128) * 16 + 8192);
  double parts = 0;
  for (int64_t part = 0; part < 5; ++part)
    parts += unitForwardFlops(block, plan.getModel(), 2, 8, part).executed;
  EXPECT_EQ(parts, whole.executed);
  // Part 1: q, k, v, o (6144 elements of the rank) and the attention; part
  // 3: gate, up, down (16896); the norms in 0 and 2; the residual none.
  EXPECT_EQ(unitForwardFlops(block, plan.getModel(), 2, 8, 1).executed,
            2.0 * 6144 * 16 + 8192);
  EXPECT_EQ(unitForwardFlops(block, plan.getModel(), 2, 8, 3).executed,
            2.0 * 16896 * 16);
  EXPECT_EQ(unitForwardFlops(block, plan.getModel(), 2, 8, 2).executed,
            2.0 * 64 * 16);
  EXPECT_EQ(unitForwardFlops(block, plan.getModel(), 2, 8, 4).executed, 0);
  // The head: lm_head's 256 rows of the rank in part 1.
  EXPECT_EQ(unitForwardFlops(plan.lookupUnit("head"), plan.getModel(), 2, 8, 1)
                .executed,
            2.0 * 256 * 64 * 16);
}

// LoRA: a frozen weight's backward computes the input's gradient only, one
// pass where a trained weight takes two; the head tied to a frozen
// embedding multiplies by frozen weights too.
TEST(TimeModel, FrozenWeightsHaveNoWeightGradients) {
  PlanContext ir;
  mlir::OwningOpRef<mlir::ModuleOp> module = ir.parse(R"mlir(
shard.grid @mesh(shape = 1x1x1x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16, tie_embeddings = true, lora = <rank = 1, alpha = 2.0, targets = ["q_proj"], base = fp32>>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 1, device = <name = "cpu", memory = 1000000000, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0e10>, host_memory = 1000000000, inter_node_bandwidth = 1.0e10>
    train #plan.train<optimizer = <kind = adamw, lr = 0.001>, micro_batch = 1, seq_len = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<8x4xf32> frozen fp32
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.self_attn.q_proj.weight" : tensor<4x4xf32> frozen fp32
    plan.param "model.layers.0.self_attn.q_proj.lora_A.weight" : tensor<1x4xf32>
    plan.param "model.layers.0.self_attn.q_proj.lora_B.weight" : tensor<4x1xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32> frozen fp32
    plan.param "lm_head.weight" : tensor<8x4xf32> tied_to "model.embed_tokens.weight"
  }
}
)mlir");
  ASSERT_TRUE(module);
  PlanOp plan = *module->getOps<PlanOp>().begin();
  // 2 tokens: the frozen q_proj 16 elements, the adapters 4 + 4.
  UnitFlops block =
      unitForwardFlops(plan.lookupUnit("layers.0"), plan.getModel(), 1, 2);
  EXPECT_EQ(block.frozen, 2.0 * 16 * 2);
  EXPECT_EQ(block.backward(), 2 * block.executed - 2.0 * 16 * 2);
  // The head: the norm and the tied lm_head, 4 + 32, all frozen.
  UnitFlops head =
      unitForwardFlops(plan.lookupUnit("head"), plan.getModel(), 1, 2);
  EXPECT_EQ(head.frozen, 2.0 * 36 * 2);
  EXPECT_EQ(head.backward(), head.executed);
}

} // namespace
