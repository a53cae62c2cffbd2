// sched-plan-memory on a program with a held buffer: a one-slot buffer of
// the program that only the bodies' sched.slots use lies in the tasks'
// frame, and each body's own buffers go around it only where some run of
// the body has it in use (from its sched.slot to its last use, across runs).
// RUN: plan-opt %s -sched-plan-memory | FileCheck %s

// H (256 bytes) is in use from body 0's sched.slot to body 1's zero of it:
// body 0's ops 3-4, body 1's ops 0-2. The persistent 400 bytes at 0, the
// frame above them at 512, H at its bottom. Body 0's `a` (512 bytes, ops
// 0-2) and body 1's `c` (ops 5-9) lie at H's bytes; body 1's `d` (ops 1-4)
// meets H and goes above it. The frame is 512 bytes, where H beside it
// would make it 768; S, of two slots, is no held buffer and stays beside
// the frame.
// CHECK-LABEL: sched.program @p.step
// CHECK-SAME:    attributes {arena_bytes = {device = 1280 : i64}, persistent_bytes = {device = 400 : i64}}
// CHECK:         sched.alloc "p.param" role param persistent offset 0 :
// CHECK:         sched.alloc "H" role activations offset 512 held :
// CHECK:         sched.alloc "S" role activations offset 1024 :
// CHECK:         sched.alloc "a.mb0" role activations offset 512 :
// CHECK:         sched.alloc "d.mb0" role activations offset 768 :
// CHECK:         sched.alloc "c.mb0" role activations offset 512 :
#dev = #sched.space<device>
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "p.param" role param persistent : memref<100xf32, #dev>
  %h = sched.alloc "H" role activations : memref<64xf32, #dev>
  %s = sched.alloc "S" role activations : memref<64xf32, #dev>
  sched.tasks event_families 0 order [0, 0, 1, 0, 0, 1, 1, 1] {
    sched.task micro_batch 0 {
      %a = sched.alloc "a.mb0" role activations : memref<128xf32, #dev>
      sched.zero %a : memref<128xf32, #dev>
      sched.free %a : memref<128xf32, #dev>
      %slot = sched.slot %h[0] slots 1 : memref<64xf32, #dev> to memref<64xf32, #dev>
      sched.zero %slot : memref<64xf32, #dev>
    }
    sched.task micro_batch 0 {
      %slot = sched.slot %h[0] slots 1 : memref<64xf32, #dev> to memref<64xf32, #dev>
      %d = sched.alloc "d.mb0" role activations : memref<64xf32, #dev>
      sched.zero %slot : memref<64xf32, #dev>
      sched.zero %d : memref<64xf32, #dev>
      sched.free %d : memref<64xf32, #dev>
      %c = sched.alloc "c.mb0" role activations : memref<64xf32, #dev>
      %two = sched.slot %s[0] slots 2 : memref<64xf32, #dev> to memref<32xf32, #dev>
      sched.zero %c : memref<64xf32, #dev>
      sched.zero %two : memref<32xf32, #dev>
      sched.free %c : memref<64xf32, #dev>
    }
  }
  sched.free %h : memref<64xf32, #dev>
  sched.free %s : memref<64xf32, #dev>
}
