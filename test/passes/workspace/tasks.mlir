// sched-plan-workspace walks a sched.tasks' runs in the order of its table:
// what an asynchronous op holds until its wait goes with its slot event from
// the run that signals it to the run that waits for it.
// RUN: plan-opt %s -sched-plan-workspace | FileCheck %s
// The walk of every run (what stepping over a table's repeating middle,
// which two micro-batches do not have, must equal: ScheduleFileTest's
// ScheduleTasks.VerifyStepsOverOnlyWhatRepeats).
// RUN: plan-opt %s -sched-plan-workspace=every-run=1 | FileCheck %s

// On a CPU device, as runtime-ops.mlir but for two micro-batches: their ids
// and targets, 2 * 2 * 8 tokens * 8 = 256 B, and the rope tables' 256 B are
// alive all step. The first run's reduce-scatter holds its staging copy
// (1000 * 4) and Gloo's flat copy of its source (2000 * 4) until the second
// run waits for it (its slot event is named after the check_finite, so
// the bytes are held by the instance, between the runs, until then), with
// the check_finite's 1000 booleans: 512 + 12000 + 1000 = 13512 there.
// CHECK-LABEL: sched.program @p.step
// CHECK-SAME:    workspace_at = "check_finite a.grad", workspace_bytes = 13512 : i64
#dev = #sched.space<device>
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, grad_clip = 1.0, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @x kind llama_block {
    plan.param "w" : tensor<2000xf32>
  }
  plan.group @a units [@x] {numel = 2000 : i64, padded_numel = 2000 : i64, shard_numel = 1000 : i64}
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, grad_clip = 1.0, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "a.param" role param persistent : memref<1000xf32, #dev>
  %g = sched.alloc "a.grad" role grad persistent : memref<1000xf32, #dev>
  %u = sched.alloc "a.grad.full" role unsharded_grad : memref<2000xf32, #dev>
  %inf = sched.alloc "found_inf" role scalar : memref<1xf32, #dev>
  sched.zero %u : memref<2000xf32, #dev>
  sched.tasks event_families 1 order [0, 0, 1, 0] {
    sched.task micro_batch 0 {
      %r = sched.reduce_scatter %u into %g group shard reduce avg accumulate : memref<2000xf32, #dev>, memref<1000xf32, #dev>
      sched.slot_signal %r family 0 shift 0
    }
    sched.task micro_batch 0 {
      sched.zero %inf : memref<1xf32, #dev>
      sched.check_finite %g into %inf : memref<1000xf32, #dev>, memref<1xf32, #dev>
      %done = sched.slot_event family 0 shift 0
      sched.wait %done
    }
  }
  sched.free %u : memref<2000xf32, #dev>
  sched.free %inf : memref<1xf32, #dev>
}
