// Programs sched-insert-offload-copies cannot place are rejected at the op.
// RUN: plan-opt %s -split-input-file -verify-diagnostics -allow-unregistered-dialect -sched-insert-offload-copies

#dev = #sched.space<device>
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = adamw, lr = 0.001>, micro_batch = 1, seq_len = 8, precision = fp32, loss_scale = <kind = none>, grad_clip = 1.0, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <params = cpu>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<8x4xf32>
  }
  plan.unit @"layers.0" kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32>
    plan.param "lm_head.weight" : tensor<8x4xf32> tied_to "model.embed_tokens.weight"
  }
  plan.group @fsdp.root units [@embed, @head] {numel = 36 : i64, padded_numel = 36 : i64, shard_numel = 18 : i64}
  plan.group @fsdp.layers.0 units [@"layers.0"] {numel = 16 : i64, padded_numel = 16 : i64, shard_numel = 8 : i64}
}
// An op whose buffer accesses the pass does not know.
sched.program @p.step for @p micro_batches 1
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = adamw, lr = 0.001>, micro_batch = 1, seq_len = 8, precision = fp32, loss_scale = <kind = none>, grad_clip = 1.0, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <params = cpu>> {
  %p0 = sched.alloc "fsdp.root.param" role param persistent : memref<18xf32, #dev>
  // expected-error @+1 {{sched-insert-offload-copies does not know how this op accesses its buffers}}
  "test.touch"(%p0) : (memref<18xf32, #dev>) -> ()
}

// -----

#dev = #sched.space<device>
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = adamw, lr = 0.001>, micro_batch = 1, seq_len = 8, precision = fp32, loss_scale = <kind = none>, grad_clip = 1.0, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <params = cpu>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<8x4xf32>
  }
  plan.unit @"layers.0" kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32>
    plan.param "lm_head.weight" : tensor<8x4xf32> tied_to "model.embed_tokens.weight"
  }
  plan.group @fsdp.root units [@embed, @head] {numel = 36 : i64, padded_numel = 36 : i64, shard_numel = 18 : i64}
  plan.group @fsdp.layers.0 units [@"layers.0"] {numel = 16 : i64, padded_numel = 16 : i64, shard_numel = 8 : i64}
}
// Staging a gather's input needs the gather's wait.
sched.program @p.step for @p micro_batches 1
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = adamw, lr = 0.001>, micro_batch = 1, seq_len = 8, precision = fp32, loss_scale = <kind = none>, grad_clip = 1.0, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <params = cpu>> {
  %p0 = sched.alloc "fsdp.root.param" role param persistent : memref<18xf32, #dev>
  %f0 = sched.alloc "fsdp.root.gathered" role gathered : memref<36xf32, #dev>
  // expected-error @+1 {{event is never waited}}
  %e0 = sched.all_gather %p0 into %f0 group shard : memref<18xf32, #dev>, memref<36xf32, #dev>
  sched.free %f0 : memref<36xf32, #dev>
}
