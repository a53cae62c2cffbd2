// Every verifier of the sched dialect rejects what it must, with its message:
// the op verifiers (dialects/sched/SchedOps.cpp), the buffer, scalar and event
// type constraints (SchedOps.td), and the dialect's attribute and type
// parsers. Each case is valid but for the one error; group sizes come from
// the plan's 2x4 mesh (shard 4, replicate 2, world 8). The errors of findWait
// and moveBelowAfterEvents (SchedDialect.cpp) are not verifier errors: the
// passes that call them report them, events.mlir tests them.
// RUN: plan-opt %s -split-input-file -verify-diagnostics

// The plan a program runs must resolve...
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
// expected-error @below {{'nowhere' does not name a plan.plan}}
sched.program @p.step for @nowhere micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}

// -----

// ...to a plan.plan, not any symbol.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
// expected-error @below {{'mesh' does not name a plan.plan}}
sched.program @p.step for @mesh micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}

// -----

// At least one micro-batch.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
// expected-error @below {{micro_batches must be >= 1, got 0}}
sched.program @p.step for @p micro_batches 0
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}

// -----

// The recipe on the program is the plan's (sched-lower copies it; a pass
// reads it there).
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
// expected-error @below {{its train differs from plan 'p''s}}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.2>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}

// -----

// A buffer needs a name.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  // expected-error @below {{needs a name}}
  %a = sched.alloc "" role staging : memref<8xf32, #dev>
  sched.free %a : memref<8xf32, #dev>
}

// -----

// An empty buffer.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  // expected-error @below {{buffer must hold at least one element}}
  %a = sched.alloc "a" role staging : memref<0xf32, #dev>
  sched.free %a : memref<0xf32, #dev>
}

// -----

// A negative arena offset (the memory planner's).
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  // expected-error @below {{offset must be >= 0}}
  %a = sched.alloc "a" role param persistent offset -8 : memref<8xf32, #dev>
}

// -----

// A held buffer is transient: its bytes are its slots' while held.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  // expected-error @below {{a held buffer is transient, not persistent}}
  %a = sched.alloc "a" role param persistent held : memref<8xf32, #dev>
}

// -----

// Only its free, its views and one-slot, unpicked sched.slots use a held
// buffer.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  // expected-error @below {{held buffer 'h' is used by 'sched.zero': only its free, its views and one-slot, unpicked sched.slots of it may use it}}
  %h = sched.alloc "h" role activations held : memref<8xf32, #dev>
  %v = sched.view %h[0] : memref<8xf32, #dev> to memref<4xf32, #dev>
  sched.zero %v : memref<4xf32, #dev>
  sched.free %h : memref<8xf32, #dev>
}

// -----

// sched.free takes an alloc, not a view of one.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %a = sched.alloc "a" role staging : memref<8xf32, #dev>
  %v = sched.view %a[0] : memref<8xf32, #dev> to memref<4xf32, #dev>
  // expected-error @below {{frees a buffer that sched.alloc did not create}}
  sched.free %v : memref<4xf32, #dev>
}

// -----

// A persistent buffer lives across steps.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %a = sched.alloc "layers.0.param" role param persistent : memref<8xf32, #dev>
  // expected-error @below {{frees persistent buffer 'layers.0.param', which lives across steps}}
  sched.free %a : memref<8xf32, #dev>
}

// -----

// A view keeps the element type...
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %a = sched.alloc "a" role staging : memref<8xf32, #dev>
  // expected-error @below {{view must keep the element type and memory space}}
  %v = sched.view %a[0] : memref<8xf32, #dev> to memref<4xbf16, #dev>
  sched.free %a : memref<8xf32, #dev>
}

// -----

// ...and the memory space.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %a = sched.alloc "a" role staging : memref<8xf32, #dev>
  // expected-error @below {{view must keep the element type and memory space}}
  %v = sched.view %a[0] : memref<8xf32, #dev> to memref<4xf32, #host>
  sched.free %a : memref<8xf32, #dev>
}

// -----

// A view past the end of its source.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %a = sched.alloc "a" role staging : memref<16xf32, #dev>
  // expected-error @below {{8 elements at offset 12 are outside the 16 elements of the source}}
  %v = sched.view %a[12] : memref<16xf32, #dev> to memref<8xf32, #dev>
  sched.free %a : memref<16xf32, #dev>
}

// -----

// A view before the start of its source.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %a = sched.alloc "a" role staging : memref<16xf32, #dev>
  // expected-error @below {{4 elements at offset -1 are outside the 16 elements of the source}}
  %v = sched.view %a[-1] : memref<16xf32, #dev> to memref<4xf32, #dev>
  sched.free %a : memref<16xf32, #dev>
}

// -----

// A shard view keeps the element type and memory space.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %a = sched.alloc "a" role staging : memref<16xf32, #dev>
  // expected-error @below {{view must keep the element type and memory space}}
  %s = sched.shard_view %a group shard : memref<16xf32, #dev> to memref<4xf16, #dev>
  sched.free %a : memref<16xf32, #dev>
}

// -----

// A shard is 1/n of its source, n the group size from the mesh (2x4: shard 4).
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %a = sched.alloc "a" role staging : memref<16xf32, #dev>
  // expected-error @below {{a shard of 16 elements over 4 ranks has 4 elements, not 8}}
  %s = sched.shard_view %a group shard : memref<16xf32, #dev> to memref<8xf32, #dev>
  sched.free %a : memref<16xf32, #dev>
}

// -----

// The world group of the 2x4 mesh has 8 ranks.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %a = sched.alloc "a" role staging : memref<16xf32, #dev>
  // expected-error @below {{a shard of 16 elements over 8 ranks has 2 elements, not 4}}
  %s = sched.shard_view %a group world : memref<16xf32, #dev> to memref<4xf32, #dev>
  sched.free %a : memref<16xf32, #dev>
}

// -----

// Collectives and copies move one element type: all_gather...
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %s = sched.alloc "s" role param persistent : memref<4xf32, #dev>
  %d = sched.alloc "d" role gathered : memref<16xbf16, #dev>
  // expected-error @below {{element types differ: 'f32' and 'bf16'}}
  %e = sched.all_gather %s into %d group shard : memref<4xf32, #dev>, memref<16xbf16, #dev>
  sched.wait %e
  sched.free %d : memref<16xbf16, #dev>
}

// -----

// ...reduce_scatter...
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %s = sched.alloc "s" role unsharded_grad : memref<16xbf16, #dev>
  sched.zero %s : memref<16xbf16, #dev>
  %d = sched.alloc "d" role grad persistent : memref<4xf32, #dev>
  // expected-error @below {{element types differ: 'bf16' and 'f32'}}
  %e = sched.reduce_scatter %s into %d group shard reduce avg : memref<16xbf16, #dev>, memref<4xf32, #dev>
  sched.wait %e
  sched.free %s : memref<16xbf16, #dev>
}

// -----

// ...and copy.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %s = sched.alloc "s" role param persistent : memref<4xf32, #host>
  %d = sched.alloc "d" role staging : memref<4xf16, #dev>
  // expected-error @below {{element types differ: 'f32' and 'f16'}}
  %e = sched.copy %s into %d : memref<4xf32, #host>, memref<4xf16, #dev>
  sched.wait %e
  sched.free %d : memref<4xf16, #dev>
}

// -----

// An all-gather over the shard group (4 ranks) fills 4x its input.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %s = sched.alloc "s" role param persistent : memref<4xf32, #dev>
  %d = sched.alloc "d" role gathered : memref<8xf32, #dev>
  // expected-error @below {{gathering 4 elements from each of 4 ranks needs 16 elements, the destination has 8}}
  %e = sched.all_gather %s into %d group shard : memref<4xf32, #dev>, memref<8xf32, #dev>
  sched.wait %e
  sched.free %d : memref<8xf32, #dev>
}

// -----

// A reduce-scatter over the replicate group (2 ranks) keeps half.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %s = sched.alloc "s" role unsharded_grad : memref<16xf32, #dev>
  sched.zero %s : memref<16xf32, #dev>
  %d = sched.alloc "d" role grad persistent : memref<4xf32, #dev>
  // expected-error @below {{scattering 16 elements over 2 ranks gives 8 each, the destination has 4}}
  %e = sched.reduce_scatter %s into %d group replicate reduce avg : memref<16xf32, #dev>, memref<4xf32, #dev>
  sched.wait %e
  sched.free %s : memref<16xf32, #dev>
}

// -----

// Accumulating a max into the destination is not a reduction.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %s = sched.alloc "s" role unsharded_grad : memref<16xf32, #dev>
  sched.zero %s : memref<16xf32, #dev>
  %d = sched.alloc "d" role grad persistent : memref<4xf32, #dev>
  // expected-error @below {{cannot accumulate a max reduction}}
  %e = sched.reduce_scatter %s into %d group shard reduce max accumulate : memref<16xf32, #dev>, memref<4xf32, #dev>
  sched.wait %e
  sched.free %s : memref<16xf32, #dev>
}

// -----

// The root of a broadcast is a rank of its group (world: 0..7)...
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %b = sched.alloc "b" role param persistent : memref<4xf32, #dev>
  // expected-error @below {{root 8 is not a rank of the world group}}
  %e = sched.broadcast %b group world root 8 : memref<4xf32, #dev>
  sched.wait %e
}

// -----

// ...and not negative.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %b = sched.alloc "b" role param persistent : memref<4xf32, #dev>
  // expected-error @below {{root -1 is not a rank of the replicate group}}
  %e = sched.broadcast %b group replicate root -1 : memref<4xf32, #dev>
  sched.wait %e
}

// -----

// A copy moves every element.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %s = sched.alloc "s" role param persistent : memref<8xf32, #host>
  %d = sched.alloc "d" role staging : memref<4xf32, #dev>
  // expected-error @below {{copies 8 elements into 4}}
  %e = sched.copy %s into %d : memref<8xf32, #host>, memref<4xf32, #dev>
  sched.wait %e
  sched.free %d : memref<4xf32, #dev>
}

// -----

// A copy crosses between host and device: not device to device...
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %s = sched.alloc "s" role param persistent : memref<4xf32, #dev>
  %d = sched.alloc "d" role staging : memref<4xf32, #dev>
  // expected-error @below {{copies between host and device; both buffers are on the device}}
  %e = sched.copy %s into %d : memref<4xf32, #dev>, memref<4xf32, #dev>
  sched.wait %e
  sched.free %d : memref<4xf32, #dev>
}

// -----

// ...nor between host spaces (pageable and pinned are both the host).
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %s = sched.alloc "s" role param persistent : memref<4xf32, #sched.space<host>>
  %d = sched.alloc "d" role staging : memref<4xf32, #host>
  // expected-error @below {{copies between host and device; both buffers are on the host}}
  %e = sched.copy %s into %d : memref<4xf32, #sched.space<host>>, memref<4xf32, #host>
  sched.wait %e
  sched.free %d : memref<4xf32, #host>
}

// -----

// A cast converts every element.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %s = sched.alloc "s" role master persistent : memref<8xf32, #dev>
  %d = sched.alloc "d" role param persistent : memref<4xbf16, #dev>
  // expected-error @below {{casts 8 elements into 4}}
  sched.cast %s into %d : memref<8xf32, #dev>, memref<4xbf16, #dev>
}

// -----

// A cast stays in one memory space.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %s = sched.alloc "s" role master persistent : memref<4xf32, #host>
  %d = sched.alloc "d" role param persistent : memref<4xbf16, #dev>
  // expected-error @below {{casts within one memory space; sched.copy moves data}}
  sched.cast %s into %d : memref<4xf32, #host>, memref<4xbf16, #dev>
}

// -----

// A cast changes the element type.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %s = sched.alloc "s" role master persistent : memref<4xf32, #dev>
  %d = sched.alloc "d" role param persistent : memref<4xf32, #dev>
  // expected-error @below {{casts to the same element type 'f32'}}
  sched.cast %s into %d : memref<4xf32, #dev>, memref<4xf32, #dev>
}

// -----

// Accumulation adds element-wise.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %s = sched.alloc "s" role unsharded_grad : memref<8xbf16, #dev>
  sched.zero %s : memref<8xbf16, #dev>
  %d = sched.alloc "d" role grad persistent : memref<4xf32, #dev>
  // expected-error @below {{adds 8 elements into 4}}
  sched.accumulate %s into %d : memref<8xbf16, #dev>, memref<4xf32, #dev>
  sched.free %s : memref<8xbf16, #dev>
}

// -----

// Accumulation stays in one memory space.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %s = sched.alloc "s" role unsharded_grad : memref<4xf32, #dev>
  sched.zero %s : memref<4xf32, #dev>
  %d = sched.alloc "d" role grad persistent : memref<4xf32, #host>
  // expected-error @below {{adds within one memory space; sched.copy moves data}}
  sched.accumulate %s into %d : memref<4xf32, #dev>, memref<4xf32, #host>
  sched.free %s : memref<4xf32, #dev>
}

// -----

// Compute names a plan.unit (the plan's units nest in it: @p::@unit).
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<8x4xf32>
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32>
    plan.param "lm_head.weight" : tensor<8x4xf32> tied_to "model.embed_tokens.weight"
  }
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "p" role param persistent : memref<16xf32, #dev>
  %s = sched.alloc "s" role activations : memref<32xf32, #dev>
  // expected-error @below {{'@p::@nowhere' does not name a plan.unit}}
  sched.forward @p::@nowhere mb 0 params(%p : memref<16xf32, #dev>) saves(%s : memref<32xf32, #dev>)
  sched.free %s : memref<32xf32, #dev>
}

// -----

// A micro-batch index is below micro_batches.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<8x4xf32>
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32>
    plan.param "lm_head.weight" : tensor<8x4xf32> tied_to "model.embed_tokens.weight"
  }
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "p" role param persistent : memref<16xf32, #dev>
  %s = sched.alloc "s" role activations : memref<32xf32, #dev>
  // expected-error @below {{micro-batch 2 is not in [0, 2)}}
  sched.forward @p::@layers.0 mb 2 params(%p : memref<16xf32, #dev>) saves(%s : memref<32xf32, #dev>)
  sched.free %s : memref<32xf32, #dev>
}

// -----

// A negative micro-batch (recompute checks like forward).
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<8x4xf32>
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32>
    plan.param "lm_head.weight" : tensor<8x4xf32> tied_to "model.embed_tokens.weight"
  }
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "p" role param persistent : memref<16xf32, #dev>
  %i = sched.alloc "i" role activations : memref<32xf32, #dev>
  sched.zero %i : memref<32xf32, #dev>
  %s = sched.alloc "s" role activations : memref<64xf32, #dev>
  // expected-error @below {{micro-batch -1 is not in [0, 2)}}
  sched.recompute @p::@layers.0 mb -1 params(%p : memref<16xf32, #dev>) from(%i : memref<32xf32, #dev>) saves(%s : memref<64xf32, #dev>)
  sched.free %s : memref<64xf32, #dev>
  sched.free %i : memref<32xf32, #dev>
}

// -----

// params holds exactly the elements the unit stores.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<8x4xf32>
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32>
    plan.param "lm_head.weight" : tensor<8x4xf32> tied_to "model.embed_tokens.weight"
  }
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "p" role param persistent : memref<8xf32, #dev>
  %s = sched.alloc "s" role activations : memref<32xf32, #dev>
  // expected-error @below {{unit 'layers.0' stores 16 elements, its params buffer has 8}}
  sched.forward @p::@layers.0 mb 0 params(%p : memref<8xf32, #dev>) saves(%s : memref<32xf32, #dev>)
  sched.free %s : memref<32xf32, #dev>
}

// -----

// The head ties lm_head.weight to the embedding's: it needs `tied`.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<8x4xf32>
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32>
    plan.param "lm_head.weight" : tensor<8x4xf32> tied_to "model.embed_tokens.weight"
  }
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "p" role param persistent : memref<4xf32, #dev>
  %s = sched.alloc "s" role activations : memref<40xf32, #dev>
  // expected-error @below {{unit 'head' ties a parameter stored in another unit: it needs `tied`}}
  sched.forward @p::@head mb 0 params(%p : memref<4xf32, #dev>) saves(%s : memref<40xf32, #dev>)
  sched.free %s : memref<40xf32, #dev>
}

// -----

// A unit that ties nothing takes no `tied`.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<8x4xf32>
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32>
    plan.param "lm_head.weight" : tensor<8x4xf32> tied_to "model.embed_tokens.weight"
  }
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "p" role param persistent : memref<16xf32, #dev>
  %t = sched.alloc "t" role param persistent : memref<32xf32, #dev>
  %s = sched.alloc "s" role activations : memref<32xf32, #dev>
  // expected-error @below {{unit 'layers.0' ties no parameter, but `tied` is given}}
  sched.forward @p::@layers.0 mb 0 params(%p : memref<16xf32, #dev>) tied(%t : memref<32xf32, #dev>) saves(%s : memref<32xf32, #dev>)
  sched.free %s : memref<32xf32, #dev>
}

// -----

// `tied` is all of the stored elements of the unit that holds the tied parameter (embed: 32).
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<8x4xf32>
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32>
    plan.param "lm_head.weight" : tensor<8x4xf32> tied_to "model.embed_tokens.weight"
  }
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "p" role param persistent : memref<4xf32, #dev>
  %t = sched.alloc "t" role param persistent : memref<36xf32, #dev>
  %s = sched.alloc "s" role activations : memref<40xf32, #dev>
  // expected-error @below {{the unit holding the tied parameter stores 32 elements, `tied` has 36}}
  sched.forward @p::@head mb 0 params(%p : memref<4xf32, #dev>) tied(%t : memref<36xf32, #dev>) saves(%s : memref<40xf32, #dev>)
  sched.free %s : memref<40xf32, #dev>
}

// -----

// `tied` is in the element type of `params`.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<8x4xf32>
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32>
    plan.param "lm_head.weight" : tensor<8x4xf32> tied_to "model.embed_tokens.weight"
  }
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "p" role param persistent : memref<4xbf16, #dev>
  %t = sched.alloc "t" role param persistent : memref<32xf32, #dev>
  %s = sched.alloc "s" role activations : memref<40xbf16, #dev>
  // expected-error @below {{`tied` and `params` must share an element type}}
  sched.forward @p::@head mb 0 params(%p : memref<4xbf16, #dev>) tied(%t : memref<32xf32, #dev>) saves(%s : memref<40xbf16, #dev>)
  sched.free %s : memref<40xbf16, #dev>
}

// -----

// backward checks its unit like forward.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<8x4xf32>
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32>
    plan.param "lm_head.weight" : tensor<8x4xf32> tied_to "model.embed_tokens.weight"
  }
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "p" role param persistent : memref<16xf32, #dev>
  %a = sched.alloc "a" role activations : memref<64xf32, #dev>
  sched.zero %a : memref<64xf32, #dev>
  %g = sched.alloc "g" role unsharded_grad : memref<16xf32, #dev>
  sched.zero %g : memref<16xf32, #dev>
  // expected-error @below {{'@p::@embed::@weight' does not name a plan.unit}}
  sched.backward @p::@embed::@weight mb 0 params(%p : memref<16xf32, #dev>) activations(%a : memref<64xf32, #dev>) grads(%g : memref<16xf32, #dev>)
  sched.free %a : memref<64xf32, #dev>
  sched.free %g : memref<16xf32, #dev>
}

// -----

// Gradients have the layout of the parameters.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<8x4xf32>
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32>
    plan.param "lm_head.weight" : tensor<8x4xf32> tied_to "model.embed_tokens.weight"
  }
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "p" role param persistent : memref<16xf32, #dev>
  %a = sched.alloc "a" role activations : memref<64xf32, #dev>
  sched.zero %a : memref<64xf32, #dev>
  %g = sched.alloc "g" role unsharded_grad : memref<8xf32, #dev>
  sched.zero %g : memref<8xf32, #dev>
  // expected-error @below {{grads must have the layout of params: 8 elements, not 16}}
  sched.backward @p::@layers.0 mb 0 params(%p : memref<16xf32, #dev>) activations(%a : memref<64xf32, #dev>) grads(%g : memref<8xf32, #dev>)
  sched.free %a : memref<64xf32, #dev>
  sched.free %g : memref<8xf32, #dev>
}

// -----

// A tied unit's backward also writes the tied parameter's gradient...
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<8x4xf32>
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32>
    plan.param "lm_head.weight" : tensor<8x4xf32> tied_to "model.embed_tokens.weight"
  }
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "p" role param persistent : memref<4xf32, #dev>
  %t = sched.alloc "t" role param persistent : memref<32xf32, #dev>
  %a = sched.alloc "a" role activations : memref<40xf32, #dev>
  sched.zero %a : memref<40xf32, #dev>
  %g = sched.alloc "g" role unsharded_grad : memref<4xf32, #dev>
  sched.zero %g : memref<4xf32, #dev>
  // expected-error @below {{`tied_grads` goes with `tied`}}
  sched.backward @p::@head mb 0 params(%p : memref<4xf32, #dev>) tied(%t : memref<32xf32, #dev>) activations(%a : memref<40xf32, #dev>) grads(%g : memref<4xf32, #dev>)
  sched.free %a : memref<40xf32, #dev>
  sched.free %g : memref<4xf32, #dev>
}

// -----

// ...and an untied one has none.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<8x4xf32>
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32>
    plan.param "lm_head.weight" : tensor<8x4xf32> tied_to "model.embed_tokens.weight"
  }
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "p" role param persistent : memref<16xf32, #dev>
  %a = sched.alloc "a" role activations : memref<64xf32, #dev>
  sched.zero %a : memref<64xf32, #dev>
  %g = sched.alloc "g" role unsharded_grad : memref<16xf32, #dev>
  sched.zero %g : memref<16xf32, #dev>
  %tg = sched.alloc "tg" role unsharded_grad : memref<32xf32, #dev>
  sched.zero %tg : memref<32xf32, #dev>
  // expected-error @below {{`tied_grads` goes with `tied`}}
  sched.backward @p::@layers.0 mb 0 params(%p : memref<16xf32, #dev>) activations(%a : memref<64xf32, #dev>) grads(%g : memref<16xf32, #dev>) tied_grads(%tg : memref<32xf32, #dev>)
  sched.free %a : memref<64xf32, #dev>
  sched.free %g : memref<16xf32, #dev>
  sched.free %tg : memref<32xf32, #dev>
}

// -----

// `tied_grads` has the layout of `tied`.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<8x4xf32>
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32>
    plan.param "lm_head.weight" : tensor<8x4xf32> tied_to "model.embed_tokens.weight"
  }
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "p" role param persistent : memref<4xf32, #dev>
  %t = sched.alloc "t" role param persistent : memref<32xf32, #dev>
  %a = sched.alloc "a" role activations : memref<40xf32, #dev>
  sched.zero %a : memref<40xf32, #dev>
  %g = sched.alloc "g" role unsharded_grad : memref<4xf32, #dev>
  sched.zero %g : memref<4xf32, #dev>
  %tg = sched.alloc "tg" role unsharded_grad : memref<8xf32, #dev>
  sched.zero %tg : memref<8xf32, #dev>
  // expected-error @below {{`tied_grads` must have the layout of `tied`}}
  sched.backward @p::@head mb 0 params(%p : memref<4xf32, #dev>) tied(%t : memref<32xf32, #dev>) activations(%a : memref<40xf32, #dev>) grads(%g : memref<4xf32, #dev>) tied_grads(%tg : memref<8xf32, #dev>)
  sched.free %a : memref<40xf32, #dev>
  sched.free %g : memref<4xf32, #dev>
  sched.free %tg : memref<8xf32, #dev>
}

// -----

// The step looks its group up through its program.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1, momentum = 0.9>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 16 : i64, padded_numel = 16 : i64, shard_numel = 4 : i64}
}
%p = sched.alloc "p" role param persistent : memref<4xf32, #dev>
%g = sched.alloc "g" role grad persistent : memref<4xf32, #dev>
%m = sched.alloc "m" role momentum persistent : memref<4xf32, #dev>
// expected-error @below {{must be inside a sched.program}}
sched.optimizer_step @p::@fsdp.layers.0 params(%p : memref<4xf32, #dev>) grads(%g : memref<4xf32, #dev>) state(%m : memref<4xf32, #dev>)

// -----

// The step names a plan.group (not a unit).
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1, momentum = 0.9>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 16 : i64, padded_numel = 16 : i64, shard_numel = 4 : i64}
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1, momentum = 0.9>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "p" role param persistent : memref<4xf32, #dev>
  %g = sched.alloc "g" role grad persistent : memref<4xf32, #dev>
  %m = sched.alloc "m" role momentum persistent : memref<4xf32, #dev>
  // expected-error @below {{'@p::@layers.0' does not name a plan.group}}
  sched.optimizer_step @p::@layers.0 params(%p : memref<4xf32, #dev>) grads(%g : memref<4xf32, #dev>) state(%m : memref<4xf32, #dev>)
}

// -----

// The step updates fp32 parameters (the master copy under mixed precision).
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1, momentum = 0.9>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 16 : i64, padded_numel = 16 : i64, shard_numel = 4 : i64}
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1, momentum = 0.9>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "p" role param persistent : memref<4xbf16, #dev>
  %g = sched.alloc "g" role grad persistent : memref<4xf32, #dev>
  %m = sched.alloc "m" role momentum persistent : memref<4xf32, #dev>
  // expected-error @below {{steps fp32 parameters (the master copy), got 'bf16'}}
  sched.optimizer_step @p::@fsdp.layers.0 params(%p : memref<4xbf16, #dev>) grads(%g : memref<4xf32, #dev>) state(%m : memref<4xf32, #dev>)
}

// -----

// params, grads and state are one size...
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1, momentum = 0.9>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 16 : i64, padded_numel = 16 : i64, shard_numel = 4 : i64}
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1, momentum = 0.9>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "p" role param persistent : memref<4xf32, #dev>
  %g = sched.alloc "g" role grad persistent : memref<4xf32, #dev>
  %m = sched.alloc "m" role momentum persistent : memref<8xf32, #dev>
  // expected-error @below {{params, grads and state must have the same size}}
  sched.optimizer_step @p::@fsdp.layers.0 params(%p : memref<4xf32, #dev>) grads(%g : memref<4xf32, #dev>) state(%m : memref<8xf32, #dev>)
}

// -----

// ...in one memory space (an offloaded step has all of them on the host).
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1, momentum = 0.9>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 16 : i64, padded_numel = 16 : i64, shard_numel = 4 : i64}
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1, momentum = 0.9>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "p" role param persistent : memref<4xf32, #host>
  %g = sched.alloc "g" role grad persistent : memref<4xf32, #dev>
  %m = sched.alloc "m" role momentum persistent : memref<4xf32, #host>
  // expected-error @below {{params, grads and state must be in one memory space: the step runs where they live}}
  sched.optimizer_step @p::@fsdp.layers.0 params(%p : memref<4xf32, #host>) grads(%g : memref<4xf32, #dev>) state(%m : memref<4xf32, #host>)
}

// -----

// Optimizer state is fp32.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1, momentum = 0.9>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 16 : i64, padded_numel = 16 : i64, shard_numel = 4 : i64}
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1, momentum = 0.9>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "p" role param persistent : memref<4xf32, #dev>
  %g = sched.alloc "g" role grad persistent : memref<4xf32, #dev>
  %m = sched.alloc "m" role momentum persistent : memref<4xbf16, #dev>
  // expected-error @below {{optimizer state must be fp32}}
  sched.optimizer_step @p::@fsdp.layers.0 params(%p : memref<4xf32, #dev>) grads(%g : memref<4xf32, #dev>) state(%m : memref<4xbf16, #dev>)
}

// -----

// Gradients are fp32 by the time of the step.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1, momentum = 0.9>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 16 : i64, padded_numel = 16 : i64, shard_numel = 4 : i64}
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1, momentum = 0.9>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "p" role param persistent : memref<4xf32, #dev>
  %g = sched.alloc "g" role grad persistent : memref<4xbf16, #dev>
  %m = sched.alloc "m" role momentum persistent : memref<4xf32, #dev>
  // expected-error @below {{steps with fp32 gradients, got 'bf16'}}
  sched.optimizer_step @p::@fsdp.layers.0 params(%p : memref<4xf32, #dev>) grads(%g : memref<4xbf16, #dev>) state(%m : memref<4xf32, #dev>)
}

// -----

// SGD with momentum keeps one state buffer...
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1, momentum = 0.9>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 16 : i64, padded_numel = 16 : i64, shard_numel = 4 : i64}
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1, momentum = 0.9>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "p" role param persistent : memref<4xf32, #dev>
  %g = sched.alloc "g" role grad persistent : memref<4xf32, #dev>
  // expected-error @below {{sgd keeps 1 state buffers, got 0}}
  sched.optimizer_step @p::@fsdp.layers.0 params(%p : memref<4xf32, #dev>) grads(%g : memref<4xf32, #dev>) state()
}

// -----

// ...SGD without momentum none...
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 16 : i64, padded_numel = 16 : i64, shard_numel = 4 : i64}
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "p" role param persistent : memref<4xf32, #dev>
  %g = sched.alloc "g" role grad persistent : memref<4xf32, #dev>
  %m = sched.alloc "m" role momentum persistent : memref<4xf32, #dev>
  // expected-error @below {{sgd keeps 0 state buffers, got 1}}
  sched.optimizer_step @p::@fsdp.layers.0 params(%p : memref<4xf32, #dev>) grads(%g : memref<4xf32, #dev>) state(%m : memref<4xf32, #dev>)
}

// -----

// ...and AdamW two (exp_avg, exp_avg_sq).
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = adamw, lr = 0.001>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 16 : i64, padded_numel = 16 : i64, shard_numel = 4 : i64}
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = adamw, lr = 0.001>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "p" role param persistent : memref<4xf32, #dev>
  %g = sched.alloc "g" role grad persistent : memref<4xf32, #dev>
  %m = sched.alloc "m" role exp_avg persistent : memref<4xf32, #dev>
  // expected-error @below {{adamw keeps 2 state buffers, got 1}}
  sched.optimizer_step @p::@fsdp.layers.0 params(%p : memref<4xf32, #dev>) grads(%g : memref<4xf32, #dev>) state(%m : memref<4xf32, #dev>)
}

// -----

// Buffers (Sched_Buffer) are 1-D...
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  // expected-error @below {{result #0 must be flat buffer (static 1-D float or i8 memref in a #sched.space), but got 'memref<2x4xf32, #sched.space<device>>'}}
  %a = sched.alloc "a" role param persistent : memref<2x4xf32, #dev>
}

// -----

// ...static...
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  // expected-error @below {{result #0 must be flat buffer (static 1-D float or i8 memref in a #sched.space), but got 'memref<?xf32, #sched.space<device>>'}}
  %a = sched.alloc "a" role param persistent : memref<?xf32, #dev>
}

// -----

// ...of floats...
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  // expected-error @below {{result #0 must be flat buffer (static 1-D float or i8 memref in a #sched.space), but got 'memref<8xi32, #sched.space<device>>'}}
  %a = sched.alloc "a" role param persistent : memref<8xi32, #dev>
}

// -----

// ...in a #sched.space...
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  // expected-error @below {{result #0 must be flat buffer (static 1-D float or i8 memref in a #sched.space), but got 'memref<8xf32>'}}
  %a = sched.alloc "a" role param persistent : memref<8xf32>
}

// -----

// ...not any other memory space.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  // expected-error @below {{result #0 must be flat buffer (static 1-D float or i8 memref in a #sched.space), but got 'memref<8xf32, 1>'}}
  %a = sched.alloc "a" role param persistent : memref<8xf32, 1>
}

// -----

// Operands are buffers too.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %a = sched.alloc "a" role staging : memref<8xf32, #dev>
  %v = memref.cast %a : memref<8xf32, #dev> to memref<?xf32, #dev>
  // expected-error @below {{operand #0 must be flat buffer (static 1-D float or i8 memref in a #sched.space), but got 'memref<?xf32, #sched.space<device>>'}}
  sched.zero %v : memref<?xf32, #dev>
  sched.free %a : memref<8xf32, #dev>
}

// -----

// Scalars (Sched_Scalar: norm, found_inf, loss_scale) hold one element...
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %g = sched.alloc "g" role grad persistent : memref<8xf32, #dev>
  %n = sched.alloc "n" role scalar : memref<2xf32, #dev>
  sched.zero %n : memref<2xf32, #dev>
  // expected-error @below {{operand #1 must be one-element f32 buffer, but got 'memref<2xf32, #sched.space<device>>'}}
  sched.grad_norm %g into %n : memref<8xf32, #dev>, memref<2xf32, #dev>
  sched.free %n : memref<2xf32, #dev>
}

// -----

// ...of fp32.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %s = sched.alloc "loss_scale" role scalar persistent : memref<1xf16, #dev>
  %f = sched.alloc "found_inf" role scalar persistent : memref<1xf32, #dev>
  // expected-error @below {{operand #0 must be one-element f32 buffer, but got 'memref<1xf16, #sched.space<device>>'}}
  sched.update_loss_scale %s found_inf %f : memref<1xf16, #dev>, memref<1xf32, #dev>
}

// -----

// sched.wait waits for an event.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %a = sched.alloc "a" role staging : memref<8xf32, #dev>
  // expected-error @below {{operand #0 must be Completion of an asynchronous op (a CUDA event), but got 'memref<8xf32, #sched.space<device>>'}}
  "sched.wait"(%a) : (memref<8xf32, #dev>) -> ()
  sched.free %a : memref<8xf32, #dev>
}

// -----

// An asynchronous op returns an event.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %a = sched.alloc "a" role grad persistent : memref<8xf32, #dev>
  // expected-error @below {{result #0 must be Completion of an asynchronous op (a CUDA event), but got 'memref<8xf32, #sched.space<device>>'}}
  %e = "sched.all_reduce"(%a) <{group = #sched<group world>, reduce = #sched<reduce sum>}> : (memref<8xf32, #dev>) -> memref<8xf32, #dev>
}

// -----

// In the generic form the attributes are the enum attributes themselves.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %a = sched.alloc "a" role grad persistent : memref<8xf32, #dev>
  // expected-error @below {{attribute 'group' failed to satisfy constraint: process group of the mesh}}
  %e = "sched.all_reduce"(%a) {group = #sched<reduce sum>, reduce = #sched<reduce sum>} : (memref<8xf32, #dev>) -> !sched.event
  sched.wait %e
}

// -----

// The types of the dialect: !sched.event only.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  // expected-error @below {{unknown  type `buffer` in dialect `sched`}}
  %a = sched.alloc "a" role staging : !sched.buffer
}

// -----

// Its attributes: space, group, reduce, role.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %a = sched.alloc "a" role staging : memref<8xf32, #dev>
  // expected-error @below {{unknown attribute `stream` in dialect `sched`}}
  sched.zero %a {stream = #sched.stream<comm>} : memref<8xf32, #dev>
}

// -----

// A memory space is one of device, host, pinned_host.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  // expected-error @below {{expected ::sched::MemorySpace to be one of: device, host, pinned_host}}
  // expected-error @below {{failed to parse Sched_MemorySpaceAttr parameter 'value' which is to be a `::sched::MemorySpace`}}
  %a = sched.alloc "a" role staging : memref<8xf32, #sched.space<gpu>>
}

// -----

// The roles of a buffer, in the custom form (the list of roles left out).
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  // expected-error @below {{for what a buffer holds, got: weights}}
  %a = sched.alloc "a" role weights : memref<8xf32, #dev>
}

// -----

// The process groups.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %a = sched.alloc "a" role grad persistent : memref<8xf32, #dev>
  // expected-error @below {{expected one of [shard, replicate, world, tensor, pipeline, embedding] for process group of the mesh, got: node}}
  %e = sched.all_reduce %a group node reduce sum : memref<8xf32, #dev>
}

// -----

// The reductions.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %a = sched.alloc "a" role grad persistent : memref<8xf32, #dev>
  // expected-error @below {{expected one of [sum, avg, max] for reduction, got: min}}
  %e = sched.all_reduce %a group world reduce min : memref<8xf32, #dev>
}

// -----

// A negative count of micro-batches (the attribute reads back unsigned).
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1, momentum = 0.9>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32>
  }
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 16 : i64, padded_numel = 16 : i64, shard_numel = 4 : i64}
  plan.group @fsdp.head units [@head] {numel = 4 : i64, padded_numel = 4 : i64, shard_numel = 1 : i64}
}
// expected-error @below {{micro_batches must be >= 1, got -1}}
sched.program @p.step for @p micro_batches -1
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1, momentum = 0.9>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
}

// -----

// A view whose offset is so large that offset + size overflows.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1, momentum = 0.9>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32>
  }
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 16 : i64, padded_numel = 16 : i64, shard_numel = 4 : i64}
  plan.group @fsdp.head units [@head] {numel = 4 : i64, padded_numel = 4 : i64, shard_numel = 1 : i64}
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1, momentum = 0.9>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %a = sched.alloc "a" role staging : memref<16xf32, #dev>
  // expected-error @below {{4 elements at offset 9223372036854775806 are outside the 16 elements of the source}}
  %v = sched.view %a[9223372036854775806] : memref<16xf32, #dev> to memref<4xf32, #dev>
  sched.free %a : memref<16xf32, #dev>
}

// -----

// Compute outside a program has no plan to find its unit in.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1, momentum = 0.9>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32>
  }
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 16 : i64, padded_numel = 16 : i64, shard_numel = 4 : i64}
  plan.group @fsdp.head units [@head] {numel = 4 : i64, padded_numel = 4 : i64, shard_numel = 1 : i64}
}
%p = sched.alloc "p" role param persistent : memref<16xf32, #dev>
%s = sched.alloc "s" role activations : memref<32xf32, #dev>
// expected-error @below {{must be inside a sched.program}}
sched.forward @p::@layers.0 mb 0 params(%p : memref<16xf32, #dev>) saves(%s : memref<32xf32, #dev>)

// -----

// A unit of another plan is not this program's.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1, momentum = 0.9>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32>
  }
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 16 : i64, padded_numel = 16 : i64, shard_numel = 4 : i64}
  plan.group @fsdp.head units [@head] {numel = 4 : i64, padded_numel = 4 : i64, shard_numel = 1 : i64}
}
plan.plan @q on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1, momentum = 0.9>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 16 : i64, padded_numel = 16 : i64, shard_numel = 4 : i64}
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1, momentum = 0.9>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "p" role param persistent : memref<16xf32, #dev>
  %s = sched.alloc "s" role activations : memref<32xf32, #dev>
  // expected-error @below {{'@q::@layers.0' does not name a plan.unit of plan 'p'}}
  sched.forward @q::@layers.0 mb 0 params(%p : memref<16xf32, #dev>) saves(%s : memref<32xf32, #dev>)
  sched.free %s : memref<32xf32, #dev>
}

// -----

// A group of another plan is not this program's.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1, momentum = 0.9>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32>
  }
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 16 : i64, padded_numel = 16 : i64, shard_numel = 4 : i64}
  plan.group @fsdp.head units [@head] {numel = 4 : i64, padded_numel = 4 : i64, shard_numel = 1 : i64}
}
plan.plan @q on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1, momentum = 0.9>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 16 : i64, padded_numel = 16 : i64, shard_numel = 4 : i64}
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1, momentum = 0.9>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "p" role param persistent : memref<4xf32, #dev>
  %g = sched.alloc "g" role grad persistent : memref<4xf32, #dev>
  %m = sched.alloc "m" role momentum persistent : memref<4xf32, #dev>
  // expected-error @below {{'@q::@fsdp.layers.0' does not name a plan.group of plan 'p'}}
  sched.optimizer_step @q::@fsdp.layers.0 params(%p : memref<4xf32, #dev>) grads(%g : memref<4xf32, #dev>) state(%m : memref<4xf32, #dev>)
}

// -----

// A program for a symbol that is no plan: its ops are not checked against
// a plan, and the program's error is the only one (no crash).
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1, momentum = 0.9>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32>
  }
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 16 : i64, padded_numel = 16 : i64, shard_numel = 4 : i64}
  plan.group @fsdp.head units [@head] {numel = 4 : i64, padded_numel = 4 : i64, shard_numel = 1 : i64}
}
// expected-error @below {{'mesh' does not name a plan.plan}}
sched.program @p.step for @mesh micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1, momentum = 0.9>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "p" role param persistent : memref<4xf32, #dev>
  %g = sched.alloc "g" role grad persistent : memref<4xf32, #dev>
  %m = sched.alloc "m" role momentum persistent : memref<4xf32, #dev>
  sched.optimizer_step @p::@fsdp.layers.0 params(%p : memref<4xf32, #dev>) grads(%g : memref<4xf32, #dev>) state(%m : memref<4xf32, #dev>)
  sched.loss @p::@head mb 0 scale 5.000000e-01
}

// -----

// The loss names a unit of the plan.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1, momentum = 0.9>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32>
  }
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 16 : i64, padded_numel = 16 : i64, shard_numel = 4 : i64}
  plan.group @fsdp.head units [@head] {numel = 4 : i64, padded_numel = 4 : i64, shard_numel = 1 : i64}
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1, momentum = 0.9>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  // expected-error @below {{'@p::@nowhere' does not name a plan.unit of plan 'p'}}
  sched.loss @p::@nowhere mb 0 scale 5.000000e-01
}

// -----

// The loss is of the head's logits.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1, momentum = 0.9>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32>
  }
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 16 : i64, padded_numel = 16 : i64, shard_numel = 4 : i64}
  plan.group @fsdp.head units [@head] {numel = 4 : i64, padded_numel = 4 : i64, shard_numel = 1 : i64}
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1, momentum = 0.9>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  // expected-error @below {{the loss is of the model's head; 'layers.0' is a llama_block unit}}
  sched.loss @p::@layers.0 mb 0 scale 5.000000e-01
}

// -----

// The loss's micro-batch is one of the program's.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1, momentum = 0.9>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32>
  }
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 16 : i64, padded_numel = 16 : i64, shard_numel = 4 : i64}
  plan.group @fsdp.head units [@head] {numel = 4 : i64, padded_numel = 4 : i64, shard_numel = 1 : i64}
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1, momentum = 0.9>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  // expected-error @below {{micro-batch 2 is not in [0, 2)}}
  sched.loss @p::@head mb 2 scale 5.000000e-01
}

// -----

// The loss seeds backward with a positive, finite scale.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1, momentum = 0.9>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32>
  }
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 16 : i64, padded_numel = 16 : i64, shard_numel = 4 : i64}
  plan.group @fsdp.head units [@head] {numel = 4 : i64, padded_numel = 4 : i64, shard_numel = 1 : i64}
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1, momentum = 0.9>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  // expected-error @below {{scale must be positive and finite, got 0}}
  sched.loss @p::@head mb 0 scale 0.000000e+00
}

// -----

// Outside a program the loss has no plan either.
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1, momentum = 0.9>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32>
  }
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 16 : i64, padded_numel = 16 : i64, shard_numel = 4 : i64}
  plan.group @fsdp.head units [@head] {numel = 4 : i64, padded_numel = 4 : i64, shard_numel = 1 : i64}
}
// expected-error @below {{must be inside a sched.program}}
sched.loss @p::@head mb 0 scale 5.000000e-01

// -----

// Tensor-parallel parts need a tensor axis.
#dev = #sched.space<device>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<8x4xf32>
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32>
    plan.param "lm_head.weight" : tensor<8x4xf32>
  }
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "p" role param persistent : memref<16xf32, #dev>
  %s = sched.alloc "s" role activations : memref<32xf32, #dev>
  %x = sched.alloc "x" role exchange : memref<32xf32, #dev>
  // expected-error @below {{`part`, `in` and `out` split a unit at its tensor-parallel collectives: they need a mesh with a tensor axis above 1}}
  sched.forward @p::@layers.0 mb 0 part 1 params(%p : memref<16xf32, #dev>) in(%x : memref<32xf32, #dev>) saves(%s : memref<32xf32, #dev>)
}

// -----

// So do the loss's statistics...
#dev = #sched.space<device>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<8x4xf32>
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32>
    plan.param "lm_head.weight" : tensor<8x4xf32>
  }
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %st = sched.alloc "st" role exchange : memref<24xf32, #dev>
  // expected-error @below {{has `stats`, but the mesh has no tensor axis}}
  sched.loss @p::@head mb 0 scale 0.5 stats(%st : memref<24xf32, #dev>)
}

// -----

// ...and a norm that weighs tensor replicas.
#dev = #sched.space<device>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<8x4xf32>
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32>
    plan.param "lm_head.weight" : tensor<8x4xf32>
  }
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %g = sched.alloc "g" role grad persistent : memref<8xf32, #dev>
  %n = sched.alloc "n" role scalar : memref<1xf32, #dev>
  // expected-error @below {{`tensor_replicas` weighs what every tensor rank holds: it needs a mesh with a tensor axis above 1}}
  sched.grad_norm %g into %n tensor_replicas : memref<8xf32, #dev>, memref<1xf32, #dev>
}

// -----

// A block has parts 0 to 4.
#dev = #sched.space<device>
shard.grid @mesh(shape = 1x2x2x2)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<8x4xf32>
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32>
    plan.param "lm_head.weight" : tensor<8x4xf32>
  }
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "p" role param persistent : memref<16xf32, #dev>
  %s = sched.alloc "s" role activations : memref<32xf32, #dev>
  %x = sched.alloc "x" role exchange : memref<32xf32, #dev>
  // expected-error @below {{part 5 is not in [0, 5) of unit 'layers.0'}}
  sched.forward @p::@layers.0 mb 0 part 5 params(%p : memref<16xf32, #dev>) in(%x : memref<32xf32, #dev>) saves(%s : memref<32xf32, #dev>)
}

// -----

// A later part reads what the collective before it left.
#dev = #sched.space<device>
shard.grid @mesh(shape = 1x2x2x2)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<8x4xf32>
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32>
    plan.param "lm_head.weight" : tensor<8x4xf32>
  }
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "p" role param persistent : memref<32xf32, #dev>
  %s = sched.alloc "s" role activations : memref<32xf32, #dev>
  // expected-error @below {{part 1 of unit 'embed' needs `in`}}
  sched.forward @p::@embed mb 0 part 1 params(%p : memref<32xf32, #dev>) saves(%s : memref<32xf32, #dev>)
}

// -----

// What a part exchanges has the cut's size: the embedding's partial sums are 8 tokens x 4.
#dev = #sched.space<device>
shard.grid @mesh(shape = 1x2x2x2)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<8x4xf32>
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32>
    plan.param "lm_head.weight" : tensor<8x4xf32>
  }
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "p" role param persistent : memref<32xf32, #dev>
  %s = sched.alloc "s" role activations : memref<32xf32, #dev>
  %x = sched.alloc "x" role exchange : memref<16xf32, #dev>
  // expected-error @below {{`out` of part 0 of unit 'embed' has 16 elements, not 32}}
  sched.forward @p::@embed mb 0 params(%p : memref<32xf32, #dev>) saves(%s : memref<32xf32, #dev>) out(%x : memref<16xf32, #dev>)
}

// -----

// Nothing flows back from the loss's statistics.
#dev = #sched.space<device>
shard.grid @mesh(shape = 1x2x2x2)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<8x4xf32>
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32>
    plan.param "lm_head.weight" : tensor<8x4xf32>
  }
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "p" role param persistent : memref<36xf32, #dev>
  %s = sched.alloc "s" role activations : memref<32xf32, #dev>
  %dy = sched.alloc "dy" role exchange : memref<24xf32, #dev>
  %dx = sched.alloc "dx" role exchange : memref<32xf32, #dev>
  // expected-error @below {{part 1 of unit 'head' has no `out_grad`}}
  sched.backward @p::@head mb 0 part 1 params(%p : memref<36xf32, #dev>) activations(%s : memref<32xf32, #dev>) out_grad(%dy : memref<24xf32, #dev>) grads(%p : memref<36xf32, #dev>) in_grad(%dx : memref<32xf32, #dev>)
}

// -----

// A recompute's later part starts from `in`, not the saved input.
#dev = #sched.space<device>
shard.grid @mesh(shape = 1x2x2x2)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<8x4xf32>
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32>
    plan.param "lm_head.weight" : tensor<8x4xf32>
  }
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "p" role param persistent : memref<16xf32, #dev>
  %s = sched.alloc "s" role activations : memref<32xf32, #dev>
  %x = sched.alloc "x" role exchange : memref<32xf32, #dev>
  // expected-error @below {{part 1 reads `in`, not `from`}}
  sched.recompute @p::@layers.0 mb 0 part 1 params(%p : memref<16xf32, #dev>) from(%s : memref<32xf32, #dev>) in(%x : memref<32xf32, #dev>) saves(%s : memref<32xf32, #dev>)
}

// -----

// The loss reads every tensor rank's statistics: 2 x 3 x 8.
#dev = #sched.space<device>
shard.grid @mesh(shape = 1x2x2x2)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<8x4xf32>
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32>
    plan.param "lm_head.weight" : tensor<8x4xf32>
  }
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %st = sched.alloc "st" role exchange : memref<24xf32, #dev>
  // expected-error @below {{`stats` has 24 elements, not 48}}
  sched.loss @p::@head mb 0 scale 0.5 stats(%st : memref<24xf32, #dev>)
}

// -----

// A pipeline's program needs its stage.
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
// expected-error @below {{is for plan 'p', whose pipeline has 2 stages: it needs a `stage` below 2}}
sched.program @p.stage0 for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>, pipeline_schedule = gpipe> {
}


// -----

// A stage beyond the pipeline.
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
// expected-error @below {{is for plan 'p', whose pipeline has 2 stages: it needs a `stage` below 2}}
sched.program @p.stage0 for @p stage 2 micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>, pipeline_schedule = gpipe> {
}


// -----

// Only a chunk's last unit's output crosses stages.
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
  %y = sched.alloc "y" role exchange : memref<32xf32, #dev>
  sched.zero %y : memref<32xf32, #dev>
  // expected-error @below {{unit 'layers.1' is not the last unit of a pipeline chunk: only those outputs cross to another stage}}
  %e = sched.send %y to next for @p::@layers.1 mb 0 : memref<32xf32, #dev>
  sched.wait %e
  sched.free %y : memref<32xf32, #dev>
}


// -----

// Stage 0 computes layers.0: it sends its output, stage 1 receives it.
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
  %x = sched.alloc "x" role exchange : memref<32xf32, #dev>
  // expected-error @below {{stage 0 receives the output of unit 'layers.0' (chunk 0) from prev, which stage 1 does}}
  %e = sched.recv %x from prev for @p::@layers.0 mb 0 : memref<32xf32, #dev>
  sched.wait %e
  sched.free %x : memref<32xf32, #dev>
}


// -----

// One micro-batch's hidden states: micro_batch x seq_len x hidden.
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
  %y = sched.alloc "y" role exchange : memref<16xf32, #dev>
  sched.zero %y : memref<16xf32, #dev>
  // expected-error @below {{buffer has 16 elements, not the 32 of one micro-batch's hidden states}}
  %e = sched.send %y to next for @p::@layers.0 mb 0 : memref<16xf32, #dev>
  sched.wait %e
  sched.free %y : memref<16xf32, #dev>
}

