// sched-verify-schedule steps over the middle of a table that repeats: the
// 1F1B of tasks.mlir's first case at 12 micro-batches repeats a forward and
// a backward from the second run to the second last. Its state repeats from
// the run of the forward of micro-batch 3 (two periods walked, the slots
// each held by the micro-batch before), so the walk steps over 9 periods,
// 18 runs, to the last backward; walking every run finds the same.
// RUN: plan-opt %s -sched-verify-schedule=remark-runs=1 -o /dev/null 2>&1 | FileCheck %s
// RUN: plan-opt %s '-sched-verify-schedule=every-run=1 remark-runs=1' -o /dev/null 2>&1 | FileCheck %s --check-prefix=EVERY

// CHECK: remark: walked 6 of 24 runs: stepped over runs 5 to 22, 9 periods of 2 runs that repeat the one before
// EVERY: remark: walked all 24 runs

#dev = #sched.space<device>
#host = #sched.space<host>
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 12, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 12
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 12, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
  %s = sched.alloc "S" role activations : memref<8xf32, #dev>
  %t = sched.alloc "T" role activations : memref<8xf32, #host>
  sched.tasks event_families 1 order [0, 0, 0, 1, 1, 0, 0, 2, 1, 1, 0, 3, 1, 2, 0, 4, 1, 3, 0, 5, 1, 4, 0, 6, 1, 5, 0, 7, 1, 6, 0, 8, 1, 7, 0, 9, 1, 8, 0, 10, 1, 9, 0, 11, 1, 10, 1, 11] {
    sched.task micro_batch 0 {
      %a = sched.slot %s[0] slots 2 : memref<8xf32, #dev> to memref<4xf32, #dev>
      %b = sched.slot %t[0] slots 2 : memref<8xf32, #host> to memref<4xf32, #host>
      sched.zero %a : memref<4xf32, #dev>
      %copied = sched.copy %a into %b : memref<4xf32, #dev>, memref<4xf32, #host>
      sched.slot_signal %copied family 0 shift 0
    }
    sched.task micro_batch 0 {
      %ready = sched.slot_event family 0 shift 0
      sched.wait %ready
      %a = sched.slot %s[0] slots 2 : memref<8xf32, #dev> to memref<4xf32, #dev>
      %b = sched.slot %t[0] slots 2 : memref<8xf32, #host> to memref<4xf32, #host>
      %back = sched.copy %b into %a : memref<4xf32, #host>, memref<4xf32, #dev>
      sched.wait %back
    }
  }
  sched.free %s : memref<8xf32, #dev>
  sched.free %t : memref<8xf32, #host>
}
