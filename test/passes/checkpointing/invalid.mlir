// sched-activation-checkpointing rewrites the single-rank program of
// sched-lower, before collectives; anything else is an error, not a wrong
// program.
// RUN: plan-opt %s -split-input-file -verify-diagnostics -sched-activation-checkpointing

// Collectives: the program was already distributed.
#dev = #sched.space<device>
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, activation_checkpointing = full, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 16 : i64, padded_numel = 16 : i64, shard_numel = 8 : i64}
}
sched.program @p.step for @p micro_batches 1
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, activation_checkpointing = full, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "fsdp.layers.0.param" role param persistent : memref<16xf32, #dev>
  // expected-error @below {{is already in the program: sched-activation-checkpointing expects the single-rank program of sched-lower}}
  %e = sched.all_reduce %p group shard reduce sum : memref<16xf32, #dev>
  sched.wait %e
}

// -----

// A block's saves that are a view of another buffer, not a buffer of their
// own the pass could resize and move.
#dev = #sched.space<device>
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, activation_checkpointing = full, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 16 : i64, padded_numel = 16 : i64, shard_numel = 8 : i64}
}
sched.program @p.step for @p micro_batches 1
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, activation_checkpointing = full, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "fsdp.layers.0.param" role param persistent : memref<16xf32, #dev>
  %g = sched.alloc "fsdp.layers.0.grad" role grad persistent : memref<16xf32, #dev>
  %a = sched.alloc "layers.0.saves.mb0" role activations : memref<64xf32, #dev>
  %s = sched.view %a[0] : memref<64xf32, #dev> to memref<32xf32, #dev>
  // expected-error @below {{saves are not a buffer of its own that its backward reads and a free ends}}
  sched.forward @p::@layers.0 mb 0 params(%p : memref<16xf32, #dev>) saves(%s : memref<32xf32, #dev>)
  sched.backward @p::@layers.0 mb 0 params(%p : memref<16xf32, #dev>) activations(%s : memref<32xf32, #dev>) grads(%g : memref<16xf32, #dev>)
  sched.free %a : memref<64xf32, #dev>
}
