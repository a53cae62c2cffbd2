// sched-activation-checkpointing on a pipeline stage's sched.tasks
// (tasks.test): anything but the tasks of sched-lower is an error, not a
// wrong program.
// RUN: plan-opt %s -split-input-file -verify-diagnostics -sched-activation-checkpointing

// A body's saves of its own, not a slot of a program buffer that the pass
// could turn into the input's slots.
#dev = #sched.space<device>
shard.grid @mesh(shape = 1x2x1x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, activation_checkpointing = full, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.unit @layers.1 kind llama_block {
    plan.param "model.layers.1.mlp.weight" : tensor<4x4xf32>
  }
  plan.group @fsdp.layers.0 units [@layers.0, @layers.1] {numel = 32 : i64, padded_numel = 32 : i64, shard_numel = 32 : i64}
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, activation_checkpointing = full, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "fsdp.layers.0.param" role param persistent : memref<32xf32, #dev>
  %g = sched.alloc "fsdp.layers.0.grad" role grad persistent : memref<32xf32, #dev>
  %p0 = sched.view %p[0] : memref<32xf32, #dev> to memref<16xf32, #dev>
  %g0 = sched.view %g[0] : memref<32xf32, #dev> to memref<16xf32, #dev>
  %p1 = sched.view %p[16] : memref<32xf32, #dev> to memref<16xf32, #dev>
  %g1 = sched.view %g[16] : memref<32xf32, #dev> to memref<16xf32, #dev>
  sched.tasks event_families 0 order [0, 0, 0, 1] {
    sched.task micro_batch 0 {
      %a = sched.alloc "layers.0.saves.mb0" role activations : memref<32xf32, #dev>
      // expected-error @below {{saves are not a slot of a buffer of the program: sched-activation-checkpointing expects the tasks of sched-lower}}
      sched.forward @p::@layers.0 mb 0 params(%p0 : memref<16xf32, #dev>) saves(%a : memref<32xf32, #dev>)
      sched.backward @p::@layers.0 mb 0 params(%p0 : memref<16xf32, #dev>) activations(%a : memref<32xf32, #dev>) grads(%g0 : memref<16xf32, #dev>)
      sched.free %a : memref<32xf32, #dev>
    }
  }
}

// -----

// Two units saving into the slots of one buffer: their slots would hold
// two inputs.
#dev = #sched.space<device>
shard.grid @mesh(shape = 1x2x1x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, activation_checkpointing = full, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.unit @layers.1 kind llama_block {
    plan.param "model.layers.1.mlp.weight" : tensor<4x4xf32>
  }
  plan.group @fsdp.layers.0 units [@layers.0, @layers.1] {numel = 32 : i64, padded_numel = 32 : i64, shard_numel = 32 : i64}
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, activation_checkpointing = full, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "fsdp.layers.0.param" role param persistent : memref<32xf32, #dev>
  %g = sched.alloc "fsdp.layers.0.grad" role grad persistent : memref<32xf32, #dev>
  %p0 = sched.view %p[0] : memref<32xf32, #dev> to memref<16xf32, #dev>
  %g0 = sched.view %g[0] : memref<32xf32, #dev> to memref<16xf32, #dev>
  %p1 = sched.view %p[16] : memref<32xf32, #dev> to memref<16xf32, #dev>
  %g1 = sched.view %g[16] : memref<32xf32, #dev> to memref<16xf32, #dev>
  %s = sched.alloc "layers.0.saves" role activations : memref<64xf32, #dev>
  sched.tasks event_families 0 order [0, 0, 1, 0] {
    sched.task micro_batch 0 {
      %a = sched.slot %s[0] slots 2 : memref<64xf32, #dev> to memref<32xf32, #dev>
      sched.forward @p::@layers.0 mb 0 params(%p0 : memref<16xf32, #dev>) saves(%a : memref<32xf32, #dev>)
      %b = sched.slot %s[0] slots 2 : memref<64xf32, #dev> to memref<32xf32, #dev>
      // expected-error @below {{saves into the slots of 'layers.0'}}
      sched.forward @p::@layers.1 mb 0 params(%p1 : memref<16xf32, #dev>) saves(%b : memref<32xf32, #dev>)
    }
    sched.task micro_batch 0 {
      %b = sched.slot %s[0] slots 2 : memref<64xf32, #dev> to memref<32xf32, #dev>
      sched.backward @p::@layers.1 mb 0 params(%p1 : memref<16xf32, #dev>) activations(%b : memref<32xf32, #dev>) grads(%g1 : memref<16xf32, #dev>)
      sched.backward @p::@layers.0 mb 0 params(%p0 : memref<16xf32, #dev>) activations(%b : memref<32xf32, #dev>) grads(%g0 : memref<16xf32, #dev>)
    }
  }
  sched.free %s : memref<64xf32, #dev>
}

// -----

// A checkpointed block's saves read by something other than its backward:
// the recompute would not fill them for it.
#dev = #sched.space<device>
shard.grid @mesh(shape = 1x2x1x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, activation_checkpointing = full, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.unit @layers.1 kind llama_block {
    plan.param "model.layers.1.mlp.weight" : tensor<4x4xf32>
  }
  plan.group @fsdp.layers.0 units [@layers.0, @layers.1] {numel = 32 : i64, padded_numel = 32 : i64, shard_numel = 32 : i64}
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, activation_checkpointing = full, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "fsdp.layers.0.param" role param persistent : memref<32xf32, #dev>
  %g = sched.alloc "fsdp.layers.0.grad" role grad persistent : memref<32xf32, #dev>
  %p0 = sched.view %p[0] : memref<32xf32, #dev> to memref<16xf32, #dev>
  %g0 = sched.view %g[0] : memref<32xf32, #dev> to memref<16xf32, #dev>
  %p1 = sched.view %p[16] : memref<32xf32, #dev> to memref<16xf32, #dev>
  %g1 = sched.view %g[16] : memref<32xf32, #dev> to memref<16xf32, #dev>
  %s = sched.alloc "layers.0.saves" role activations : memref<64xf32, #dev>
  sched.tasks event_families 0 order [0, 0, 1, 0] {
    sched.task micro_batch 0 {
      %a = sched.slot %s[0] slots 2 : memref<64xf32, #dev> to memref<32xf32, #dev>
      sched.forward @p::@layers.0 mb 0 params(%p0 : memref<16xf32, #dev>) saves(%a : memref<32xf32, #dev>)
    }
    sched.task micro_batch 0 {
      %a = sched.slot %s[0] slots 2 : memref<64xf32, #dev> to memref<32xf32, #dev>
      // expected-error @below {{uses the saves of a checkpointed block: sched-activation-checkpointing expects the tasks of sched-lower}}
      sched.zero %a : memref<32xf32, #dev>
      sched.backward @p::@layers.0 mb 0 params(%p0 : memref<16xf32, #dev>) activations(%a : memref<32xf32, #dev>) grads(%g0 : memref<16xf32, #dev>)
    }
  }
  sched.free %s : memref<64xf32, #dev>
}

// -----

// A forward outside the program's sched.tasks, which the pass would leave
// as it is.
#dev = #sched.space<device>
shard.grid @mesh(shape = 1x2x1x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, activation_checkpointing = full, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.unit @layers.1 kind llama_block {
    plan.param "model.layers.1.mlp.weight" : tensor<4x4xf32>
  }
  plan.group @fsdp.layers.0 units [@layers.0, @layers.1] {numel = 32 : i64, padded_numel = 32 : i64, shard_numel = 32 : i64}
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, activation_checkpointing = full, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "fsdp.layers.0.param" role param persistent : memref<32xf32, #dev>
  %g = sched.alloc "fsdp.layers.0.grad" role grad persistent : memref<32xf32, #dev>
  %p0 = sched.view %p[0] : memref<32xf32, #dev> to memref<16xf32, #dev>
  %g0 = sched.view %g[0] : memref<32xf32, #dev> to memref<16xf32, #dev>
  %p1 = sched.view %p[16] : memref<32xf32, #dev> to memref<16xf32, #dev>
  %g1 = sched.view %g[16] : memref<32xf32, #dev> to memref<16xf32, #dev>
  %a = sched.alloc "layers.1.saves.mb0" role activations : memref<32xf32, #dev>
  // expected-error @below {{is outside the program's sched.tasks: sched-activation-checkpointing expects the tasks of sched-lower, which hold every forward}}
  sched.forward @p::@layers.1 mb 0 params(%p1 : memref<16xf32, #dev>) saves(%a : memref<32xf32, #dev>)
  sched.backward @p::@layers.1 mb 0 params(%p1 : memref<16xf32, #dev>) activations(%a : memref<32xf32, #dev>) grads(%g1 : memref<16xf32, #dev>)
  sched.free %a : memref<32xf32, #dev>
  sched.tasks event_families 0 order [] {
  }
}

// -----

// A sched.repeat is still an error: the pass runs before
// sched-roll-micro-batches makes one.
#dev = #sched.space<device>
shard.grid @mesh(shape = 1x2x1x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, activation_checkpointing = full, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.unit @layers.1 kind llama_block {
    plan.param "model.layers.1.mlp.weight" : tensor<4x4xf32>
  }
  plan.group @fsdp.layers.0 units [@layers.0, @layers.1] {numel = 32 : i64, padded_numel = 32 : i64, shard_numel = 32 : i64}
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, activation_checkpointing = full, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "fsdp.layers.0.param" role param persistent : memref<32xf32, #dev>
  %g = sched.alloc "fsdp.layers.0.grad" role grad persistent : memref<32xf32, #dev>
  %p0 = sched.view %p[0] : memref<32xf32, #dev> to memref<16xf32, #dev>
  %g0 = sched.view %g[0] : memref<32xf32, #dev> to memref<16xf32, #dev>
  %p1 = sched.view %p[16] : memref<32xf32, #dev> to memref<16xf32, #dev>
  %g1 = sched.view %g[16] : memref<32xf32, #dev> to memref<16xf32, #dev>
  // expected-error @below {{is not for sched-activation-checkpointing, which works on a program whose micro-batches are written out one after the other}}
  sched.repeat count 2 {
  }
}
