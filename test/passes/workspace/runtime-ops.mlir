// sched-plan-workspace on the runtime's own temporaries: a reduce-scatter
// that accumulates stages its result until its wait, the gradient norm's
// fp32 squares, check_finite's booleans, the optimizer's fp32 gradient when
// it clips.
// RUN: plan-opt %s -split-input-file -sched-plan-workspace | FileCheck %s

// On a CPU device. Alive all step: the ids 2 * 8 tokens * 8 = 128 B and the
// rope tables 2 * 8 * 4 * 4 = 256 B. The second reduce-scatter is issued
// while the first is in flight: their staging copies, 1000 * 4 + 500 * 4 =
// 6000 B, and Gloo's flat copies of their sources, 2000 * 4 + 1000 * 4 =
// 12000 B, are the most at once (grad_norm 4000, check_finite 1000, the
// clipping step's fp32 gradient 4000). 384 + 6000 + 12000 = 18384.
// CHECK-LABEL: sched.program @p.step
// CHECK-SAME:    workspace_at = "reduce_scatter b.grad.full", workspace_bytes = 18384 : i64
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
sched.program @p.step for @p micro_batches 1
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, grad_clip = 1.0, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "a.param" role param persistent : memref<1000xf32, #dev>
  %g = sched.alloc "a.grad" role grad persistent : memref<1000xf32, #dev>
  %g2 = sched.alloc "b.grad" role grad persistent : memref<500xf32, #dev>
  %u = sched.alloc "a.grad.full" role unsharded_grad : memref<2000xf32, #dev>
  %u2 = sched.alloc "b.grad.full" role unsharded_grad : memref<1000xf32, #dev>
  sched.zero %u : memref<2000xf32, #dev>
  sched.zero %u2 : memref<1000xf32, #dev>
  %r = sched.reduce_scatter %u into %g group shard reduce avg accumulate : memref<2000xf32, #dev>, memref<1000xf32, #dev>
  %r2 = sched.reduce_scatter %u2 into %g2 group shard reduce avg accumulate : memref<1000xf32, #dev>, memref<500xf32, #dev>
  sched.wait %r
  sched.wait %r2
  sched.free %u : memref<2000xf32, #dev>
  sched.free %u2 : memref<1000xf32, #dev>
  %n = sched.alloc "grad_norm" role scalar : memref<1xf32, #dev>
  %inf = sched.alloc "found_inf" role scalar : memref<1xf32, #dev>
  sched.zero %n : memref<1xf32, #dev>
  sched.zero %inf : memref<1xf32, #dev>
  sched.grad_norm %g into %n : memref<1000xf32, #dev>, memref<1xf32, #dev>
  sched.check_finite %g into %inf : memref<1000xf32, #dev>, memref<1xf32, #dev>
  sched.optimizer_step @p::@a params(%p : memref<1000xf32, #dev>) grads(%g : memref<1000xf32, #dev>) state() norm(%n : memref<1xf32, #dev>)
  sched.free %n : memref<1xf32, #dev>
  sched.free %inf : memref<1xf32, #dev>
}

// -----

// The same ops on a GPU, with the first group's gradient and step on the
// host (offloaded): the cuda backend measures device memory, so only the
// device's staging copy (500 * 4 = 2000 B, at the second reduce-scatter)
// counts; alive all step the ids, the rope tables and two cuBLAS workspaces
// of 32 MiB on Hopper: 384 + 67108864 + 2000 = 67111248.
// CHECK-LABEL: sched.program @g.step
// CHECK-SAME:    workspace_at = "reduce_scatter b.grad.full", workspace_bytes = 67111248 : i64
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @g on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "h100_sxm", memory = 85899345920, bf16_tflops = 989.0, fp16_tflops = 989.0, fp32_tflops = 67.0, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, pcie_bandwidth = 6.4e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, grad_clip = 1.0, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @x kind llama_block {
    plan.param "w" : tensor<2000xf32>
  }
  plan.group @a units [@x] {numel = 2000 : i64, padded_numel = 2000 : i64, shard_numel = 1000 : i64}
}
sched.program @g.step for @g micro_batches 1
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "h100_sxm", memory = 85899345920, bf16_tflops = 989.0, fp16_tflops = 989.0, fp32_tflops = 67.0, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, pcie_bandwidth = 6.4e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, grad_clip = 1.0, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "a.param" role param persistent : memref<1000xf32, #host>
  %g = sched.alloc "a.grad" role grad persistent : memref<1000xf32, #host>
  %g2 = sched.alloc "b.grad" role grad persistent : memref<500xf32, #dev>
  %u = sched.alloc "a.grad.full" role unsharded_grad : memref<2000xf32, #host>
  %u2 = sched.alloc "b.grad.full" role unsharded_grad : memref<1000xf32, #dev>
  %r = sched.reduce_scatter %u into %g group shard reduce avg accumulate : memref<2000xf32, #host>, memref<1000xf32, #host>
  %r2 = sched.reduce_scatter %u2 into %g2 group shard reduce avg accumulate : memref<1000xf32, #dev>, memref<500xf32, #dev>
  sched.wait %r
  sched.wait %r2
  sched.free %u : memref<2000xf32, #host>
  sched.free %u2 : memref<1000xf32, #dev>
  %n = sched.alloc "grad_norm" role scalar : memref<1xf32, #host>
  sched.zero %n : memref<1xf32, #host>
  sched.grad_norm %g into %n : memref<1000xf32, #host>, memref<1xf32, #host>
  sched.optimizer_step @g::@a params(%p : memref<1000xf32, #host>) grads(%g : memref<1000xf32, #host>) state() norm(%n : memref<1xf32, #host>)
  sched.free %n : memref<1xf32, #host>
}

// -----

// A GPT-2 on an A100: no rope tables (ids 128 B); cuBLAS's workspaces are
// 8 MiB + 128 KiB before Hopper, and with biased linears cuBLASLt keeps 1 MiB
// per handle too: 2 * (8519680 + 1048576) = 19136512; 128 + 19136512 + 2000 =
// 19138640.
// CHECK-LABEL: sched.program @g.step
// CHECK-SAME:    workspace_at = "reduce_scatter b.grad.full", workspace_bytes = 19138640 : i64
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @g on @mesh
    model #plan.model<family = gpt2, preset = "gpt2_tiny", vocab = 8, hidden = 4, intermediate = 16, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16, tie_embeddings = true>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "a100_80g", memory = 85899345920, bf16_tflops = 989.0, fp16_tflops = 989.0, fp32_tflops = 67.0, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, pcie_bandwidth = 6.4e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, grad_clip = 1.0, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @x kind llama_block {
    plan.param "w" : tensor<2000xf32>
  }
  plan.group @a units [@x] {numel = 2000 : i64, padded_numel = 2000 : i64, shard_numel = 1000 : i64}
}
sched.program @g.step for @g micro_batches 1
    model #plan.model<family = gpt2, preset = "gpt2_tiny", vocab = 8, hidden = 4, intermediate = 16, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16, tie_embeddings = true>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "a100_80g", memory = 85899345920, bf16_tflops = 989.0, fp16_tflops = 989.0, fp32_tflops = 67.0, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, pcie_bandwidth = 6.4e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, grad_clip = 1.0, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "a.param" role param persistent : memref<1000xf32, #host>
  %g = sched.alloc "a.grad" role grad persistent : memref<1000xf32, #host>
  %g2 = sched.alloc "b.grad" role grad persistent : memref<500xf32, #dev>
  %u = sched.alloc "a.grad.full" role unsharded_grad : memref<2000xf32, #host>
  %u2 = sched.alloc "b.grad.full" role unsharded_grad : memref<1000xf32, #dev>
  %r = sched.reduce_scatter %u into %g group shard reduce avg accumulate : memref<2000xf32, #host>, memref<1000xf32, #host>
  %r2 = sched.reduce_scatter %u2 into %g2 group shard reduce avg accumulate : memref<1000xf32, #dev>, memref<500xf32, #dev>
  sched.wait %r
  sched.wait %r2
  sched.free %u : memref<2000xf32, #host>
  sched.free %u2 : memref<1000xf32, #dev>
  %n = sched.alloc "grad_norm" role scalar : memref<1xf32, #host>
  sched.zero %n : memref<1xf32, #host>
  sched.grad_norm %g into %n : memref<1000xf32, #host>, memref<1xf32, #host>
  sched.optimizer_step @g::@a params(%p : memref<1000xf32, #host>) grads(%g : memref<1000xf32, #host>) state() norm(%n : memref<1xf32, #host>)
  sched.free %n : memref<1xf32, #host>
}
