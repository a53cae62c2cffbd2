// sched-plan-memory on a program with a sched.tasks: each body packed on its
// own, all of them in one frame per space that is live where the sched.tasks
// stands, placed with the program's buffers.
// RUN: plan-opt %s -sched-plan-memory | FileCheck %s

// The persistent 400 bytes at 0. The bodies: task 0 allocates 256 bytes,
// frees them, then 512 (packed to 512 together), task 1 128: a 512-byte
// frame, above the persistent block at 512. The slots' 32 bytes live across
// the runs, so beside the frame: at 1024. Each body's buffers are at the
// frame's offset plus theirs.
// CHECK-LABEL: sched.program @p.step
// CHECK-SAME:    attributes {arena_bytes = {device = 1056 : i64}, persistent_bytes = {device = 400 : i64}}
// CHECK:         sched.alloc "p.param" role param persistent offset 0
// CHECK:         sched.alloc "S" role activations offset 1024
// CHECK:         sched.alloc "a.mb0" role activations offset 512
// CHECK:         sched.alloc "b.mb0" role activations offset 512
// CHECK:         sched.alloc "c.mb0" role activations offset 512
#dev = #sched.space<device>
#host = #sched.space<host>
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 3, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 3
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 3, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "p.param" role param persistent : memref<100xf32, #dev>
  %s = sched.alloc "S" role activations : memref<8xf32, #dev>
  sched.tasks event_families 0 order [0, 0, 1, 0, 0, 1, 1, 1] {
    sched.task micro_batch 0 {
      %slot = sched.slot %s[0] slots 2 : memref<8xf32, #dev> to memref<4xf32, #dev>
      %a = sched.alloc "a.mb0" role activations : memref<64xf32, #dev>
      sched.zero %a : memref<64xf32, #dev>
      sched.free %a : memref<64xf32, #dev>
      %b = sched.alloc "b.mb0" role activations : memref<128xf32, #dev>
      sched.zero %b : memref<128xf32, #dev>
      sched.free %b : memref<128xf32, #dev>
      sched.zero %slot : memref<4xf32, #dev>
    }
    sched.task micro_batch 0 {
      %c = sched.alloc "c.mb0" role activations : memref<32xf32, #dev>
      sched.zero %c : memref<32xf32, #dev>
      sched.free %c : memref<32xf32, #dev>
    }
  }
  sched.free %s : memref<8xf32, #dev>
}
