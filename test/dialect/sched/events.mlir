// The event helpers of the sched dialect (findWait, moveBelowAfterEvents in
// dialects/sched/SchedDialect.cpp) report at the op. Passes call them, not
// the verifiers: sched-insert-casts does on a reduction in the working type
// (bf16) that runs in the reduce type (fp32), here all_reduce on a bucket.
// RUN: plan-opt %s -split-input-file -verify-diagnostics -sched-insert-casts

// findWait: an event waited twice.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, precision = bf16_mixed, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 1
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, precision = bf16_mixed, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %b = sched.alloc "bucket.0" role bucket : memref<8xf32, #dev>
  sched.zero %b : memref<8xf32, #dev>
  // expected-error @below {{event is waited more than once}}
  %e = sched.all_reduce %b group world reduce avg : memref<8xf32, #dev>
  sched.wait %e
  sched.wait %e
  sched.free %b : memref<8xf32, #dev>
}

// -----

// findWait: an event never waited.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, precision = bf16_mixed, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 1
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, precision = bf16_mixed, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %b = sched.alloc "bucket.0" role bucket : memref<8xf32, #dev>
  sched.zero %b : memref<8xf32, #dev>
  // expected-error @below {{event is never waited}}
  %e = sched.all_reduce %b group world reduce avg : memref<8xf32, #dev>
  sched.free %b : memref<8xf32, #dev>
}

// -----

// moveBelowAfterEvents: an `after` event no op produces (the program's body
// may take block arguments).
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, precision = bf16_mixed, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 1
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, precision = bf16_mixed, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
^bb0(%start: !sched.event):
  %b = sched.alloc "bucket.0" role bucket : memref<8xf32, #dev>
  sched.zero %b : memref<8xf32, #dev>
  // expected-error @below {{follows an event no op produces}}
  %e = sched.all_reduce %b group world reduce avg after %start : memref<8xf32, #dev>
  sched.wait %e
  sched.free %b : memref<8xf32, #dev>
}

// -----

// moveBelowAfterEvents: the reduction would move below the wait of the copy it
// follows (where its cast into fp32 can read what the copy wrote), past its
// own wait.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, precision = bf16_mixed, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 1
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, precision = bf16_mixed, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %h = sched.alloc "loss_scale.host" role scalar persistent : memref<1xf32, #host>
  %s = sched.alloc "loss_scale" role scalar : memref<1xf32, #dev>
  %c = sched.copy %h into %s : memref<1xf32, #host>, memref<1xf32, #dev>
  %b = sched.alloc "bucket.0" role bucket : memref<8xf32, #dev>
  sched.zero %b : memref<8xf32, #dev>
  // expected-error @below {{is waited for before the events it follows}}
  %e = sched.all_reduce %b group world reduce avg after %c : memref<8xf32, #dev>
  sched.wait %e
  sched.wait %c
  sched.free %b : memref<8xf32, #dev>
  sched.free %s : memref<1xf32, #dev>
}
