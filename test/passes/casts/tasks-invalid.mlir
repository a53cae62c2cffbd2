// sched-insert-casts on a pipeline stage's sched.tasks (tasks.test): a
// reduction that a later task completes reaches what it converts back through
// slots and the waits of its slot event, or the pass says why it cannot.
// RUN: plan-opt %s -split-input-file -verify-diagnostics -sched-insert-casts

// The gradient a later task completes the reduction of is the body's own
// allocation (freed while the reduction is in flight), not a slot.
#dev = #sched.space<device>
shard.grid @mesh(shape = 1x2x1x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, precision = bf16_mixed, grad_dtype = working, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 16 : i64, padded_numel = 16 : i64, shard_numel = 16 : i64}
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, precision = bf16_mixed, grad_dtype = working, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "fsdp.layers.0.param" role param persistent : memref<16xf32, #dev>
  %g = sched.alloc "fsdp.layers.0.grad" role grad persistent : memref<16xf32, #dev>
  %a = sched.alloc "layers.0.saves" role activations : memref<64xf32, #dev>
  sched.tasks event_families 1 order [0, 0, 1, 0, 2, 1] {
    sched.task micro_batch 0 {
      %s = sched.slot %a[0] slots 2 : memref<64xf32, #dev> to memref<32xf32, #dev>
      sched.forward @p::@layers.0 mb 0 params(%p : memref<16xf32, #dev>) saves(%s : memref<32xf32, #dev>)
    }
    sched.task micro_batch 0 {
      %s = sched.slot %a[0] slots 2 : memref<64xf32, #dev> to memref<32xf32, #dev>
      // expected-error @below {{is read by a reduction that a later task completes, and is not a slot}}
      %m = sched.alloc "fsdp.layers.0.grad.mb0" role unsharded_grad : memref<16xf32, #dev>
      sched.zero %m : memref<16xf32, #dev>
      sched.backward @p::@layers.0 mb 0 params(%p : memref<16xf32, #dev>) activations(%s : memref<32xf32, #dev>) grads(%m : memref<16xf32, #dev>)
      %e = sched.all_reduce %m group world reduce avg : memref<16xf32, #dev>
      sched.slot_signal %e family 0 shift 0
      sched.free %m : memref<16xf32, #dev>
    }
    sched.task micro_batch 1 {
      %s = sched.slot %a[0] slots 2 : memref<64xf32, #dev> to memref<32xf32, #dev>
      sched.forward @p::@layers.0 mb 1 params(%p : memref<16xf32, #dev>) saves(%s : memref<32xf32, #dev>)
      %w = sched.slot_event family 0 shift -1
      sched.wait %w
    }
  }
  sched.free %a : memref<64xf32, #dev>
  sched.optimizer_step @p::@fsdp.layers.0 params(%p : memref<16xf32, #dev>) grads(%g : memref<16xf32, #dev>) state()
}

// -----

// The slot event that names the reduction's event is followed by an
// all-gather instead of only waited.
#dev = #sched.space<device>
shard.grid @mesh(shape = 1x2x1x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, precision = bf16_mixed, grad_dtype = working, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 16 : i64, padded_numel = 16 : i64, shard_numel = 16 : i64}
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, precision = bf16_mixed, grad_dtype = working, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "fsdp.layers.0.param" role param persistent : memref<16xf32, #dev>
  %g = sched.alloc "fsdp.layers.0.grad" role grad persistent : memref<16xf32, #dev>
  %a = sched.alloc "layers.0.saves" role activations : memref<64xf32, #dev>
  sched.tasks event_families 1 order [0, 0, 1, 0, 2, 1] {
    sched.task micro_batch 0 {
      %s = sched.slot %a[0] slots 2 : memref<64xf32, #dev> to memref<32xf32, #dev>
      sched.forward @p::@layers.0 mb 0 params(%p : memref<16xf32, #dev>) saves(%s : memref<32xf32, #dev>)
    }
    sched.task micro_batch 0 {
      %s = sched.slot %a[0] slots 2 : memref<64xf32, #dev> to memref<32xf32, #dev>
      %m = sched.alloc "fsdp.layers.0.grad.mb0" role unsharded_grad : memref<16xf32, #dev>
      sched.zero %m : memref<16xf32, #dev>
      sched.backward @p::@layers.0 mb 0 params(%p : memref<16xf32, #dev>) activations(%s : memref<32xf32, #dev>) grads(%m : memref<16xf32, #dev>)
      // expected-error @below {{event is named in a later task by a slot event that is not only waited}}
      %e = sched.all_reduce %m group world reduce avg : memref<16xf32, #dev>
      sched.slot_signal %e family 0 shift 0
      sched.free %m : memref<16xf32, #dev>
    }
    sched.task micro_batch 1 {
      %s = sched.slot %a[0] slots 2 : memref<64xf32, #dev> to memref<32xf32, #dev>
      sched.forward @p::@layers.0 mb 1 params(%p : memref<16xf32, #dev>) saves(%s : memref<32xf32, #dev>)
      %w = sched.slot_event family 0 shift -1
      %x = sched.alloc "x" role scalar : memref<16xf32, #dev>
      %f = sched.all_gather %p into %x group shard after %w : memref<16xf32, #dev>, memref<16xf32, #dev>
      sched.wait %f
      sched.free %x : memref<16xf32, #dev>
    }
  }
  sched.free %a : memref<64xf32, #dev>
  sched.optimizer_step @p::@fsdp.layers.0 params(%p : memref<16xf32, #dev>) grads(%g : memref<16xf32, #dev>) state()
}
