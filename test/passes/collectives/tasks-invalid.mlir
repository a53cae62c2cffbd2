// sched-insert-collectives on a pipeline stage's sched.tasks (tasks.test):
// what is not sched-lower's loop is an error, not a misplaced reduction.
// RUN: plan-opt %s -split-input-file -verify-diagnostics -sched-insert-collectives
// A forward outside the tasks, which run the stage's micro-batches.
#dev = #sched.space<device>
shard.grid @mesh(shape = 1x2x1x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 16 : i64, padded_numel = 16 : i64, shard_numel = 16 : i64}
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "fsdp.layers.0.param" role param persistent : memref<16xf32, #dev>
  %g = sched.alloc "fsdp.layers.0.grad" role grad persistent : memref<16xf32, #dev>
  %p0 = sched.view %p[0] : memref<16xf32, #dev> to memref<16xf32, #dev>
  %g0 = sched.view %g[0] : memref<16xf32, #dev> to memref<16xf32, #dev>
  %a = sched.alloc "layers.0.saves" role activations : memref<64xf32, #dev>
  // expected-error @below {{is outside the program's sched.tasks, which runs its micro-batches}}
  sched.forward @p::@layers.0 mb 0 params(%p0 : memref<16xf32, #dev>) saves(%a : memref<64xf32, #dev>)
  sched.tasks event_families 0 order [0, 0, 1, 0, 0, 1, 1, 1] {
    sched.task micro_batch 0 {
      %s = sched.slot %a[0] slots 2 : memref<64xf32, #dev> to memref<32xf32, #dev>
      sched.forward @p::@layers.0 mb 0 params(%p0 : memref<16xf32, #dev>) saves(%s : memref<32xf32, #dev>)
    }
    sched.task micro_batch 0 {
      %s = sched.slot %a[0] slots 2 : memref<64xf32, #dev> to memref<32xf32, #dev>
      sched.backward @p::@layers.0 mb 0 params(%p0 : memref<16xf32, #dev>) activations(%s : memref<32xf32, #dev>) grads(%g0 : memref<16xf32, #dev>)
    }
  }
  sched.optimizer_step @p::@fsdp.layers.0 params(%p : memref<16xf32, #dev>) grads(%g : memref<16xf32, #dev>) state()
  sched.free %a : memref<64xf32, #dev>
}

// -----

// The optimizer steps before the gradients are made.
#dev = #sched.space<device>
shard.grid @mesh(shape = 1x2x1x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 16 : i64, padded_numel = 16 : i64, shard_numel = 16 : i64}
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "fsdp.layers.0.param" role param persistent : memref<16xf32, #dev>
  %g = sched.alloc "fsdp.layers.0.grad" role grad persistent : memref<16xf32, #dev>
  %p0 = sched.view %p[0] : memref<16xf32, #dev> to memref<16xf32, #dev>
  %g0 = sched.view %g[0] : memref<16xf32, #dev> to memref<16xf32, #dev>
  // expected-error @below {{must follow the last backward of the step}}
  sched.optimizer_step @p::@fsdp.layers.0 params(%p : memref<16xf32, #dev>) grads(%g : memref<16xf32, #dev>) state()
  %a = sched.alloc "layers.0.saves" role activations : memref<64xf32, #dev>
  sched.tasks event_families 0 order [0, 0, 1, 0, 0, 1, 1, 1] {
    sched.task micro_batch 0 {
      %s = sched.slot %a[0] slots 2 : memref<64xf32, #dev> to memref<32xf32, #dev>
      sched.forward @p::@layers.0 mb 0 params(%p0 : memref<16xf32, #dev>) saves(%s : memref<32xf32, #dev>)
    }
    sched.task micro_batch 0 {
      %s = sched.slot %a[0] slots 2 : memref<64xf32, #dev> to memref<32xf32, #dev>
      sched.backward @p::@layers.0 mb 0 params(%p0 : memref<16xf32, #dev>) activations(%s : memref<32xf32, #dev>) grads(%g0 : memref<16xf32, #dev>)
    }
  }
  sched.free %a : memref<64xf32, #dev>
}

// -----

// Two loops in one program.
#dev = #sched.space<device>
shard.grid @mesh(shape = 1x2x1x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 16 : i64, padded_numel = 16 : i64, shard_numel = 16 : i64}
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "fsdp.layers.0.param" role param persistent : memref<16xf32, #dev>
  %g = sched.alloc "fsdp.layers.0.grad" role grad persistent : memref<16xf32, #dev>
  %p0 = sched.view %p[0] : memref<16xf32, #dev> to memref<16xf32, #dev>
  %g0 = sched.view %g[0] : memref<16xf32, #dev> to memref<16xf32, #dev>
  %a = sched.alloc "layers.0.saves" role activations : memref<64xf32, #dev>
  sched.tasks event_families 0 order [0, 0, 1, 0] {
    sched.task micro_batch 0 {
      %s = sched.slot %a[0] slots 2 : memref<64xf32, #dev> to memref<32xf32, #dev>
      sched.forward @p::@layers.0 mb 0 params(%p0 : memref<16xf32, #dev>) saves(%s : memref<32xf32, #dev>)
    }
    sched.task micro_batch 0 {
      %s = sched.slot %a[0] slots 2 : memref<64xf32, #dev> to memref<32xf32, #dev>
      sched.backward @p::@layers.0 mb 0 params(%p0 : memref<16xf32, #dev>) activations(%s : memref<32xf32, #dev>) grads(%g0 : memref<16xf32, #dev>)
    }
  }
  // expected-error @below {{is not for sched-insert-collectives, which works on a program whose micro-batches are written out one after the other}}
  sched.tasks event_families 0 order [0, 1, 1, 1] {
    sched.task micro_batch 0 {
      %s = sched.slot %a[0] slots 2 : memref<64xf32, #dev> to memref<32xf32, #dev>
      sched.forward @p::@layers.0 mb 0 params(%p0 : memref<16xf32, #dev>) saves(%s : memref<32xf32, #dev>)
    }
    sched.task micro_batch 0 {
      %s = sched.slot %a[0] slots 2 : memref<64xf32, #dev> to memref<32xf32, #dev>
      sched.backward @p::@layers.0 mb 0 params(%p0 : memref<16xf32, #dev>) activations(%s : memref<32xf32, #dev>) grads(%g0 : memref<16xf32, #dev>)
    }
  }
  sched.optimizer_step @p::@fsdp.layers.0 params(%p : memref<16xf32, #dev>) grads(%g : memref<16xf32, #dev>) state()
  sched.free %a : memref<64xf32, #dev>
}

// -----

// A body after a backward that has no compute op to overlap the backward's
// reductions with.
#dev = #sched.space<device>
shard.grid @mesh(shape = 1x2x1x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 16 : i64, padded_numel = 16 : i64, shard_numel = 16 : i64}
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "fsdp.layers.0.param" role param persistent : memref<16xf32, #dev>
  %g = sched.alloc "fsdp.layers.0.grad" role grad persistent : memref<16xf32, #dev>
  %p0 = sched.view %p[0] : memref<16xf32, #dev> to memref<16xf32, #dev>
  %g0 = sched.view %g[0] : memref<16xf32, #dev> to memref<16xf32, #dev>
  %a = sched.alloc "layers.0.saves" role activations : memref<64xf32, #dev>
  sched.tasks event_families 0 order [0, 0, 1, 0, 2, 1, 0, 1, 1, 1] {
    sched.task micro_batch 0 {
      %s = sched.slot %a[0] slots 2 : memref<64xf32, #dev> to memref<32xf32, #dev>
      sched.forward @p::@layers.0 mb 0 params(%p0 : memref<16xf32, #dev>) saves(%s : memref<32xf32, #dev>)
    }
    sched.task micro_batch 0 {
      %s = sched.slot %a[0] slots 2 : memref<64xf32, #dev> to memref<32xf32, #dev>
      sched.backward @p::@layers.0 mb 0 params(%p0 : memref<16xf32, #dev>) activations(%s : memref<32xf32, #dev>) grads(%g0 : memref<16xf32, #dev>)
    }
    // expected-error @below {{follows a backward and has no compute op to overlap its reductions with}}
    sched.task micro_batch 0 {
    }
  }
  sched.optimizer_step @p::@fsdp.layers.0 params(%p : memref<16xf32, #dev>) grads(%g : memref<16xf32, #dev>) state()
  sched.free %a : memref<64xf32, #dev>
}
// -----

// shard_grad_op gathers a group's parameters once a step, in the body of the
// step's first micro-batch's forward: a table that never runs micro-batch 0
// has none.
#dev = #sched.space<device>
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = shard_grad_op, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 16 : i64, padded_numel = 16 : i64, shard_numel = 8 : i64}
}
// expected-error @below {{group 'fsdp.layers.0' is not in a body that only the step's first or last micro-batch runs}}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 2, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = shard_grad_op, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "fsdp.layers.0.param" role param persistent : memref<16xf32, #dev>
  %g = sched.alloc "fsdp.layers.0.grad" role grad persistent : memref<16xf32, #dev>
  %p0 = sched.view %p[0] : memref<16xf32, #dev> to memref<16xf32, #dev>
  %g0 = sched.view %g[0] : memref<16xf32, #dev> to memref<16xf32, #dev>
  %a = sched.alloc "layers.0.saves" role activations : memref<64xf32, #dev>
  sched.tasks event_families 0 order [0, 1, 1, 1] {
    sched.task micro_batch 1 {
      %s = sched.slot %a[0] slots 2 : memref<64xf32, #dev> to memref<32xf32, #dev>
      sched.forward @p::@layers.0 mb 1 params(%p0 : memref<16xf32, #dev>) saves(%s : memref<32xf32, #dev>)
    }
    sched.task micro_batch 1 {
      %s = sched.slot %a[0] slots 2 : memref<64xf32, #dev> to memref<32xf32, #dev>
      sched.backward @p::@layers.0 mb 1 params(%p0 : memref<16xf32, #dev>) activations(%s : memref<32xf32, #dev>) grads(%g0 : memref<16xf32, #dev>)
    }
  }
  sched.optimizer_step @p::@fsdp.layers.0 params(%p : memref<16xf32, #dev>) grads(%g : memref<16xf32, #dev>) state()
  sched.free %a : memref<64xf32, #dev>
}
