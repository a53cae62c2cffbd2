// sched-verify-pipeline checks a pipeline's stage programs together: sends
// meet their receives in order (same unit, micro-batch, size and type),
// every stage issues the same pipeline collectives, the first and the last
// the same embedding collectives, and the stages cannot deadlock. One case
// per rule; the first is a valid GPipe exchange.
// RUN: plan-opt %s -split-input-file -verify-diagnostics -sched-verify-pipeline

// A valid exchange: two micro-batches' outputs forward, their gradients back.
#dev = #sched.space<device>
shard.grid @mesh(shape = 2x1x1x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
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
sched.program @p.stage0 for @p stage 0 micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>, pipeline_schedule = gpipe> {
  %a0 = sched.alloc "a0" role exchange : memref<32xf32, #dev>
  sched.zero %a0 : memref<32xf32, #dev>
  %a0e = sched.send %a0 to next for @p::@layers.0 mb 0 : memref<32xf32, #dev>
  %a1 = sched.alloc "a1" role exchange : memref<32xf32, #dev>
  sched.zero %a1 : memref<32xf32, #dev>
  %a1e = sched.send %a1 to next for @p::@layers.0 mb 1 : memref<32xf32, #dev>
  %g0 = sched.alloc "g0" role exchange : memref<32xf32, #dev>
  %g0e = sched.recv %g0 from next for @p::@layers.0 mb 0 : memref<32xf32, #dev>
  sched.wait %g0e
  sched.free %g0 : memref<32xf32, #dev>
  %g1 = sched.alloc "g1" role exchange : memref<32xf32, #dev>
  %g1e = sched.recv %g1 from next for @p::@layers.0 mb 1 : memref<32xf32, #dev>
  sched.wait %g1e
  sched.free %g1 : memref<32xf32, #dev>
  sched.wait %a0e
  sched.free %a0 : memref<32xf32, #dev>
  sched.wait %a1e
  sched.free %a1 : memref<32xf32, #dev>
}
sched.program @p.stage1 for @p stage 1 micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>, pipeline_schedule = gpipe> {
  %x0 = sched.alloc "x0" role exchange : memref<32xf32, #dev>
  %x0e = sched.recv %x0 from prev for @p::@layers.0 mb 0 : memref<32xf32, #dev>
  sched.wait %x0e
  sched.free %x0 : memref<32xf32, #dev>
  %x1 = sched.alloc "x1" role exchange : memref<32xf32, #dev>
  %x1e = sched.recv %x1 from prev for @p::@layers.0 mb 1 : memref<32xf32, #dev>
  sched.wait %x1e
  sched.free %x1 : memref<32xf32, #dev>
  %d0 = sched.alloc "d0" role exchange : memref<32xf32, #dev>
  sched.zero %d0 : memref<32xf32, #dev>
  %d0e = sched.send %d0 to prev for @p::@layers.0 mb 0 : memref<32xf32, #dev>
  %d1 = sched.alloc "d1" role exchange : memref<32xf32, #dev>
  sched.zero %d1 : memref<32xf32, #dev>
  %d1e = sched.send %d1 to prev for @p::@layers.0 mb 1 : memref<32xf32, #dev>
  sched.wait %d0e
  sched.free %d0 : memref<32xf32, #dev>
  sched.wait %d1e
  sched.free %d1 : memref<32xf32, #dev>
}
// -----

// Stage 0 sends micro-batch 1 first; stage 1 expects micro-batch 0.
#dev = #sched.space<device>
shard.grid @mesh(shape = 2x1x1x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
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
sched.program @p.stage0 for @p stage 0 micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>, pipeline_schedule = gpipe> {
  %a1 = sched.alloc "a1" role exchange : memref<32xf32, #dev>
  sched.zero %a1 : memref<32xf32, #dev>
  // expected-error @below {{stage 0's send to next for @p::@layers.0 mb 1 (32 x f32) meets stage 1's receive for @p::@layers.0 mb 0 (32 x f32): sends and receives between two stages pair up in program order}}
  %a1e = sched.send %a1 to next for @p::@layers.0 mb 1 : memref<32xf32, #dev>
  sched.wait %a1e
  sched.free %a1 : memref<32xf32, #dev>
}
sched.program @p.stage1 for @p stage 1 micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>, pipeline_schedule = gpipe> {
  %x0 = sched.alloc "x0" role exchange : memref<32xf32, #dev>
  // expected-note @below {{the receive}}
  %x0e = sched.recv %x0 from prev for @p::@layers.0 mb 0 : memref<32xf32, #dev>
  sched.wait %x0e
  sched.free %x0 : memref<32xf32, #dev>
}
// -----

// The two ends disagree on the element type.
#dev = #sched.space<device>
shard.grid @mesh(shape = 2x1x1x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
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
sched.program @p.stage0 for @p stage 0 micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>, pipeline_schedule = gpipe> {
  %a0 = sched.alloc "a0" role exchange : memref<32xf32, #dev>
  sched.zero %a0 : memref<32xf32, #dev>
  // expected-error @below {{stage 0's send to next for @p::@layers.0 mb 0 (32 x f32) meets stage 1's receive for @p::@layers.0 mb 0 (32 x bf16)}}
  %a0e = sched.send %a0 to next for @p::@layers.0 mb 0 : memref<32xf32, #dev>
  sched.wait %a0e
  sched.free %a0 : memref<32xf32, #dev>
}
sched.program @p.stage1 for @p stage 1 micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>, pipeline_schedule = gpipe> {
  %x0 = sched.alloc "x0" role exchange : memref<32xbf16, #dev>
  // expected-note @below {{the receive}}
  %x0e = sched.recv %x0 from prev for @p::@layers.0 mb 0 : memref<32xbf16, #dev>
  sched.wait %x0e
  sched.free %x0 : memref<32xbf16, #dev>
}
// -----

// Each stage waits for what the other sends only after its own wait.
#dev = #sched.space<device>
shard.grid @mesh(shape = 2x1x1x1)
// expected-error @below {{the pipeline stages of plan 'p' deadlock: each waits for another}}
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
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
sched.program @p.stage0 for @p stage 0 micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>, pipeline_schedule = gpipe> {
  %g0 = sched.alloc "g0" role exchange : memref<32xf32, #dev>
  %g0e = sched.recv %g0 from next for @p::@layers.0 mb 0 : memref<32xf32, #dev>
  // expected-note @below {{stage 0 waits for its receive from next for @p::@layers.0 mb 0, which its neighbour has not reached}}
  sched.wait %g0e
  sched.free %g0 : memref<32xf32, #dev>
  %a0 = sched.alloc "a0" role exchange : memref<32xf32, #dev>
  sched.zero %a0 : memref<32xf32, #dev>
  %a0e = sched.send %a0 to next for @p::@layers.0 mb 0 : memref<32xf32, #dev>
  sched.wait %a0e
  sched.free %a0 : memref<32xf32, #dev>
}
sched.program @p.stage1 for @p stage 1 micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>, pipeline_schedule = gpipe> {
  %x0 = sched.alloc "x0" role exchange : memref<32xf32, #dev>
  %x0e = sched.recv %x0 from prev for @p::@layers.0 mb 0 : memref<32xf32, #dev>
  // expected-note @below {{stage 1 waits for its receive from prev for @p::@layers.0 mb 0, which its neighbour has not reached}}
  sched.wait %x0e
  sched.free %x0 : memref<32xf32, #dev>
  %d0 = sched.alloc "d0" role exchange : memref<32xf32, #dev>
  sched.zero %d0 : memref<32xf32, #dev>
  %d0e = sched.send %d0 to prev for @p::@layers.0 mb 0 : memref<32xf32, #dev>
  sched.wait %d0e
  sched.free %d0 : memref<32xf32, #dev>
}

// -----

// Stage 0 sends a second micro-batch that stage 1 never receives.
#dev = #sched.space<device>
shard.grid @mesh(shape = 2x1x1x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
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
sched.program @p.stage0 for @p stage 0 micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>, pipeline_schedule = gpipe> {
  %a0 = sched.alloc "a0" role exchange : memref<32xf32, #dev>
  sched.zero %a0 : memref<32xf32, #dev>
  %a0e = sched.send %a0 to next for @p::@layers.0 mb 0 : memref<32xf32, #dev>
  sched.wait %a0e
  sched.free %a0 : memref<32xf32, #dev>
  %a1 = sched.alloc "a1" role exchange : memref<32xf32, #dev>
  sched.zero %a1 : memref<32xf32, #dev>
  // expected-error @below {{stage 0 waits for its send to next for @p::@layers.0 mb 1, but stage 1 ends its program without receiving it: it has no partner}}
  %a1e = sched.send %a1 to next for @p::@layers.0 mb 1 : memref<32xf32, #dev>
  sched.wait %a1e
  sched.free %a1 : memref<32xf32, #dev>
}
sched.program @p.stage1 for @p stage 1 micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>, pipeline_schedule = gpipe> {
  %x0 = sched.alloc "x0" role exchange : memref<32xf32, #dev>
  %x0e = sched.recv %x0 from prev for @p::@layers.0 mb 0 : memref<32xf32, #dev>
  sched.wait %x0e
  sched.free %x0 : memref<32xf32, #dev>
}

// -----

// Stage 0 sums a norm over the pipeline; stage 1 does not.
#dev = #sched.space<device>
shard.grid @mesh(shape = 2x1x1x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
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
sched.program @p.stage0 for @p stage 0 micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>, pipeline_schedule = gpipe> {
  %n = sched.alloc "n" role scalar : memref<1xf32, #dev>
  sched.zero %n : memref<1xf32, #dev>
  // expected-error @below {{stage 0 waits for its 'sched.all_reduce' on the pipeline group, but stage 1 ends its program without issuing it: it has no partner}}
  %ne = sched.all_reduce %n group pipeline reduce sum : memref<1xf32, #dev>
  sched.wait %ne
  sched.free %n : memref<1xf32, #dev>
}
sched.program @p.stage1 for @p stage 1 micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>, pipeline_schedule = gpipe> {
}

// -----

// The stages reduce the norm differently.
#dev = #sched.space<device>
shard.grid @mesh(shape = 2x1x1x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
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
sched.program @p.stage0 for @p stage 0 micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>, pipeline_schedule = gpipe> {
  %n = sched.alloc "n" role scalar : memref<1xf32, #dev>
  sched.zero %n : memref<1xf32, #dev>
  // expected-note @below {{stage 0's}}
  %ne = sched.all_reduce %n group pipeline reduce sum : memref<1xf32, #dev>
  sched.wait %ne
  sched.free %n : memref<1xf32, #dev>
}
sched.program @p.stage1 for @p stage 1 micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>, pipeline_schedule = gpipe> {
  %n = sched.alloc "n" role scalar : memref<1xf32, #dev>
  sched.zero %n : memref<1xf32, #dev>
  // expected-error @below {{stage 1's pipeline collective #0 differs from stage 0's: every stage issues the same collectives on the pipeline group, in the same order}}
  %ne = sched.all_reduce %n group pipeline reduce max : memref<1xf32, #dev>
  sched.wait %ne
  sched.free %n : memref<1xf32, #dev>
}

// -----

// A tied embedding's gradient: the first and the last of three stages add it
// on the embedding group; the stage between them is in none. Valid.
#dev = #sched.space<device>
shard.grid @mesh(shape = 3x1x1x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 3, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 3, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>, pipeline_schedule = gpipe> {
  plan.unit @embed kind embedding stage 0 {
  }
  plan.unit @layers.0 kind llama_block stage 0 {
  }
  plan.unit @layers.1 kind llama_block stage 1 {
  }
  plan.unit @layers.2 kind llama_block stage 2 {
  }
  plan.unit @head kind llama_head stage 2 {
  }
}
sched.program @p.stage0 for @p stage 0 micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 3, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 3, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>, pipeline_schedule = gpipe> {
  %g = sched.alloc "g" role scalar : memref<4xf32, #dev>
  sched.zero %g : memref<4xf32, #dev>
  %ge = sched.all_reduce %g group embedding reduce sum : memref<4xf32, #dev>
  sched.wait %ge
  sched.free %g : memref<4xf32, #dev>
}
sched.program @p.stage1 for @p stage 1 micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 3, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 3, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>, pipeline_schedule = gpipe> {
}
sched.program @p.stage2 for @p stage 2 micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 3, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 3, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>, pipeline_schedule = gpipe> {
  %g = sched.alloc "g" role scalar : memref<4xf32, #dev>
  sched.zero %g : memref<4xf32, #dev>
  %ge = sched.all_reduce %g group embedding reduce sum : memref<4xf32, #dev>
  sched.wait %ge
  sched.free %g : memref<4xf32, #dev>
}

// -----

// The stage between the first and the last issues an embedding collective.
#dev = #sched.space<device>
shard.grid @mesh(shape = 3x1x1x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 3, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 3, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>, pipeline_schedule = gpipe> {
  plan.unit @embed kind embedding stage 0 {
  }
  plan.unit @layers.0 kind llama_block stage 0 {
  }
  plan.unit @layers.1 kind llama_block stage 1 {
  }
  plan.unit @layers.2 kind llama_block stage 2 {
  }
  plan.unit @head kind llama_head stage 2 {
  }
}
sched.program @p.stage0 for @p stage 0 micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 3, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 3, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>, pipeline_schedule = gpipe> {
  %g = sched.alloc "g" role scalar : memref<4xf32, #dev>
  sched.zero %g : memref<4xf32, #dev>
  %ge = sched.all_reduce %g group embedding reduce sum : memref<4xf32, #dev>
  sched.wait %ge
  sched.free %g : memref<4xf32, #dev>
}
sched.program @p.stage1 for @p stage 1 micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 3, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 3, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>, pipeline_schedule = gpipe> {
  %g = sched.alloc "g" role scalar : memref<4xf32, #dev>
  sched.zero %g : memref<4xf32, #dev>
  // expected-error @below {{stage 1 issues a collective on the embedding group, which only the pipeline's first and last stages are in}}
  %ge = sched.all_reduce %g group embedding reduce sum : memref<4xf32, #dev>
  sched.wait %ge
  sched.free %g : memref<4xf32, #dev>
}
sched.program @p.stage2 for @p stage 2 micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 3, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 3, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>, pipeline_schedule = gpipe> {
  %g = sched.alloc "g" role scalar : memref<4xf32, #dev>
  sched.zero %g : memref<4xf32, #dev>
  %ge = sched.all_reduce %g group embedding reduce sum : memref<4xf32, #dev>
  sched.wait %ge
  sched.free %g : memref<4xf32, #dev>
}

// -----

// The last stage never adds the tied gradient: the first waits for it.
#dev = #sched.space<device>
shard.grid @mesh(shape = 3x1x1x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 3, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 3, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>, pipeline_schedule = gpipe> {
  plan.unit @embed kind embedding stage 0 {
  }
  plan.unit @layers.0 kind llama_block stage 0 {
  }
  plan.unit @layers.1 kind llama_block stage 1 {
  }
  plan.unit @layers.2 kind llama_block stage 2 {
  }
  plan.unit @head kind llama_head stage 2 {
  }
}
sched.program @p.stage0 for @p stage 0 micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 3, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 3, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>, pipeline_schedule = gpipe> {
  %g = sched.alloc "g" role scalar : memref<4xf32, #dev>
  sched.zero %g : memref<4xf32, #dev>
  // expected-error @below {{stage 0 waits for its 'sched.all_reduce' on the embedding group, but stage 2 ends its program without issuing it: it has no partner}}
  %ge = sched.all_reduce %g group embedding reduce sum : memref<4xf32, #dev>
  sched.wait %ge
  sched.free %g : memref<4xf32, #dev>
}
sched.program @p.stage1 for @p stage 1 micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 3, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 3, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>, pipeline_schedule = gpipe> {
}
sched.program @p.stage2 for @p stage 2 micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 3, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 3, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>, pipeline_schedule = gpipe> {
}

// -----

// The first and the last stage reduce the tied gradient differently.
#dev = #sched.space<device>
shard.grid @mesh(shape = 3x1x1x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 3, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 3, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>, pipeline_schedule = gpipe> {
  plan.unit @embed kind embedding stage 0 {
  }
  plan.unit @layers.0 kind llama_block stage 0 {
  }
  plan.unit @layers.1 kind llama_block stage 1 {
  }
  plan.unit @layers.2 kind llama_block stage 2 {
  }
  plan.unit @head kind llama_head stage 2 {
  }
}
sched.program @p.stage0 for @p stage 0 micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 3, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 3, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>, pipeline_schedule = gpipe> {
  %g = sched.alloc "g" role scalar : memref<4xf32, #dev>
  sched.zero %g : memref<4xf32, #dev>
  // expected-note @below {{stage 0's}}
  %ge = sched.all_reduce %g group embedding reduce sum : memref<4xf32, #dev>
  sched.wait %ge
  sched.free %g : memref<4xf32, #dev>
}
sched.program @p.stage1 for @p stage 1 micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 3, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 3, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>, pipeline_schedule = gpipe> {
}
sched.program @p.stage2 for @p stage 2 micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 3, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 3, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>, pipeline_schedule = gpipe> {
  %g = sched.alloc "g" role scalar : memref<4xf32, #dev>
  sched.zero %g : memref<4xf32, #dev>
  // expected-error @below {{stage 2's embedding collective #0 differs from stage 0's: the first and the last stage issue the same collectives on the embedding group, in the same order}}
  %ge = sched.all_reduce %g group embedding reduce max : memref<4xf32, #dev>
  sched.wait %ge
  sched.free %g : memref<4xf32, #dev>
}

// -----

// The play walks each stage's ops in order: a stage's sched.repeat is a
// clear error (a sched.tasks is played written out).
#dev = #sched.space<device>
shard.grid @mesh(shape = 2x1x1x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
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
sched.program @p.stage0 for @p stage 0 micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>, pipeline_schedule = gpipe> {
}
sched.program @p.stage1 for @p stage 1 micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>, pipeline_schedule = gpipe> {
  // expected-error @below {{is not for sched-verify-pipeline, which works on a program whose micro-batches are written out one after the other}}
  sched.repeat count 2 {
  }
}

// -----

// A stage with a sched.tasks is played with every table written out, and
// the error at another stage's sched.repeat still points at it.
#dev = #sched.space<device>
shard.grid @mesh(shape = 2x1x1x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
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
sched.program @p.stage0 for @p stage 0 micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>, pipeline_schedule = gpipe> {
  sched.tasks event_families 0 order [] {
  }
}
sched.program @p.stage1 for @p stage 1 micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>, pipeline_schedule = gpipe> {
  // expected-error @below {{is not for sched-verify-pipeline, which works on a program whose micro-batches are written out one after the other}}
  sched.repeat count 2 {
  }
}

// -----

// A stage's sends in a sched.tasks, played in the order of its table: a wait
// for a slot event instance that no run before it signalled (the first
// run's wait for the send before it) cannot be played.
#dev = #sched.space<device>
shard.grid @mesh(shape = 2x1x1x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
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
sched.program @p.stage0 for @p stage 0 micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>, pipeline_schedule = gpipe> {
  %a = sched.alloc "a" role exchange : memref<64xf32, #dev>
  sched.tasks event_families 1 order [0, 0, 0, 1] {
    sched.task micro_batch 0 {
      %s = sched.slot %a[0] slots 2 : memref<64xf32, #dev> to memref<32xf32, #dev>
      sched.zero %s : memref<32xf32, #dev>
      %e = sched.send %s to next for @p::@layers.0 mb 0 : memref<32xf32, #dev>
      // expected-error @below {{in the run of micro-batch 0 names instance -1 of family 0, which no run before it signals}}
      %before = sched.slot_event family 0 shift -1
      sched.wait %before
      sched.slot_signal %e family 0 shift 0
    }
  }
  %g0 = sched.alloc "g0" role exchange : memref<32xf32, #dev>
  %g0e = sched.recv %g0 from next for @p::@layers.0 mb 0 : memref<32xf32, #dev>
  sched.wait %g0e
  sched.free %g0 : memref<32xf32, #dev>
  %g1 = sched.alloc "g1" role exchange : memref<32xf32, #dev>
  %g1e = sched.recv %g1 from next for @p::@layers.0 mb 1 : memref<32xf32, #dev>
  sched.wait %g1e
  sched.free %g1 : memref<32xf32, #dev>
  sched.free %a : memref<64xf32, #dev>
}
sched.program @p.stage1 for @p stage 1 micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>, pipeline_schedule = gpipe> {
  %x0 = sched.alloc "x0" role exchange : memref<32xf32, #dev>
  %x0e = sched.recv %x0 from prev for @p::@layers.0 mb 0 : memref<32xf32, #dev>
  sched.wait %x0e
  sched.free %x0 : memref<32xf32, #dev>
  %x1 = sched.alloc "x1" role exchange : memref<32xf32, #dev>
  %x1e = sched.recv %x1 from prev for @p::@layers.0 mb 1 : memref<32xf32, #dev>
  sched.wait %x1e
  sched.free %x1 : memref<32xf32, #dev>
  %d0 = sched.alloc "d0" role exchange : memref<32xf32, #dev>
  sched.zero %d0 : memref<32xf32, #dev>
  %d0e = sched.send %d0 to prev for @p::@layers.0 mb 0 : memref<32xf32, #dev>
  %d1 = sched.alloc "d1" role exchange : memref<32xf32, #dev>
  sched.zero %d1 : memref<32xf32, #dev>
  %d1e = sched.send %d1 to prev for @p::@layers.0 mb 1 : memref<32xf32, #dev>
  sched.wait %d0e
  sched.free %d0 : memref<32xf32, #dev>
  sched.wait %d1e
  sched.free %d1 : memref<32xf32, #dev>
}

// -----

// A deadlock's message names the run's micro-batch, not the one the body is
// written for: the run of micro-batch 1 waits for its send, which stage 1
// never receives.
#dev = #sched.space<device>
shard.grid @mesh(shape = 2x1x1x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
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
sched.program @p.stage0 for @p stage 0 micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>, pipeline_schedule = gpipe> {
  sched.tasks event_families 0 order [0, 0, 0, 1] {
    sched.task micro_batch 0 {
      %s = sched.alloc "s" role exchange : memref<32xf32, #dev>
      sched.zero %s : memref<32xf32, #dev>
      // expected-error @below {{stage 0 waits for its send to next for @p::@layers.0 mb 1, but stage 1 ends its program without receiving it: it has no partner}}
      %e = sched.send %s to next for @p::@layers.0 mb 0 : memref<32xf32, #dev>
      sched.wait %e
      sched.free %s : memref<32xf32, #dev>
    }
  }
}
sched.program @p.stage1 for @p stage 1 micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>, pipeline_schedule = gpipe> {
  %x0 = sched.alloc "x0" role exchange : memref<32xf32, #dev>
  %x0e = sched.recv %x0 from prev for @p::@layers.0 mb 0 : memref<32xf32, #dev>
  sched.wait %x0e
  sched.free %x0 : memref<32xf32, #dev>
}
