// sched-plan-memory places every buffer in one arena per memory space.
// RUN: plan-opt %s -split-input-file -verify-diagnostics -sched-verify-schedule -sched-plan-memory | FileCheck %s
// Rerunning gives the same plan (the stale offset below is recomputed too).
// RUN: plan-opt %s -split-input-file -verify-diagnostics -sched-plan-memory -sched-plan-memory | FileCheck %s

// Device persistent buffers, largest first from 0: 400 bytes at 0, then 256
// at the next multiple of 256 (512); they end at 768. The pinned_host one is
// alone in its arena. The 2048-byte bf16 transient goes above the persistent
// block; once freed, the 1024-byte bf16 buffer allocated after it reuses its
// place and the fp32 one live with it goes right above. The two arenas and
// their persistent parts are on the program.
// CHECK-LABEL: sched.program @p.step
// CHECK-SAME:    attributes {arena_bytes = {device = 2816 : i64, pinned_host = 400 : i64}, persistent_bytes = {device = 768 : i64, pinned_host = 400 : i64}}
// CHECK:         sched.alloc "a.param" role param persistent offset 0 : memref<100xf32, #sched.space<device>>
// CHECK:         sched.alloc "a.master" role master persistent offset 512 : memref<64xf32, #sched.space<device>>
// CHECK:         sched.alloc "a.exp_avg" role exp_avg persistent offset 0 : memref<100xf32, #sched.space<pinned_host>>
// CHECK:         sched.alloc "t0" role activations offset 768 : memref<1024xbf16, #sched.space<device>>
// CHECK:         sched.alloc "t1" role activations offset 768 : memref<512xbf16, #sched.space<device>>
// CHECK:         sched.alloc "t2" role staging offset 1792 : memref<256xf32, #sched.space<device>>
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 1
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "a.param" role param persistent : memref<100xf32, #dev>
  %m = sched.alloc "a.master" role master persistent offset 99999 : memref<64xf32, #dev>
  %h = sched.alloc "a.exp_avg" role exp_avg persistent : memref<100xf32, #host>
  sched.zero %p : memref<100xf32, #dev>
  sched.zero %m : memref<64xf32, #dev>
  sched.zero %h : memref<100xf32, #host>
  %t0 = sched.alloc "t0" role activations : memref<1024xbf16, #dev>
  sched.zero %t0 : memref<1024xbf16, #dev>
  sched.free %t0 : memref<1024xbf16, #dev>
  %t1 = sched.alloc "t1" role activations : memref<512xbf16, #dev>
  %t2 = sched.alloc "t2" role staging : memref<256xf32, #dev>
  sched.zero %t1 : memref<512xbf16, #dev>
  sched.zero %t2 : memref<256xf32, #dev>
  sched.free %t1 : memref<512xbf16, #dev>
  sched.free %t2 : memref<256xf32, #dev>
}

// -----

// A program without buffers gets empty dictionaries.
// CHECK-LABEL: sched.program @q.step
// CHECK-SAME:    attributes {arena_bytes = {}, persistent_bytes = {}}
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @q on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @q.step for @q micro_batches 1
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
}
