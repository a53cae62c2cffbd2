// Picked slots (dialects/sched/SchedOps.cpp): a sched.slot with group,
// stride and offset is the slot its run's entry picks in the sched.tasks'
// `picks`, so that several groups' buffers share one pool of slots
// (docs/sched.md, "sched-share-slot-buffers"). One case per rule.
// RUN: plan-opt %s -split-input-file -verify-diagnostics | FileCheck %s

// Two groups' forwards and backwards (tasks 0-1 and 2-3) over three
// micro-batches, their saves in one pool of two slots of 8 elements, group 1
// at offset 4 of a slot: each run takes the slot its entry picks. Valid,
// and printed back as parsed.
// CHECK:      sched.tasks event_families 0 order [0, 0, 2, 0, 1, 0, 0, 1, 3, 0, 1, 1, 2, 1, 3, 1, 0, 2, 1, 2] picks [0, 1, 0, 0, 1, 0, 1, 1, 1, 1] {
// CHECK-NEXT:   sched.task micro_batch 0 {
// CHECK-NEXT:     sched.slot %{{.*}}[0] slots 2 group 0 stride 8 offset 0 : memref<16xf32, #sched.space<device>> to memref<4xf32, #sched.space<device>>
// CHECK:        sched.slot %{{.*}}[0] slots 2 group 1 stride 8 offset 4 :
#dev = #sched.space<device>
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 3, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 3
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 3, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
  %s = sched.alloc "S" role activations : memref<16xf32, #dev>
  sched.tasks event_families 0 order [0, 0, 2, 0, 1, 0, 0, 1, 3, 0, 1, 1, 2, 1, 3, 1, 0, 2, 1, 2] picks [0, 1, 0, 0, 1, 0, 1, 1, 1, 1] {
    sched.task micro_batch 0 {
      %a = sched.slot %s[0] slots 2 group 0 stride 8 offset 0 : memref<16xf32, #dev> to memref<4xf32, #dev>
      sched.zero %a : memref<4xf32, #dev>
    }
    sched.task micro_batch 0 {
      %a = sched.slot %s[0] slots 2 group 0 stride 8 offset 0 : memref<16xf32, #dev> to memref<4xf32, #dev>
      sched.zero %a : memref<4xf32, #dev>
    }
    sched.task micro_batch 0 {
      %a = sched.slot %s[0] slots 2 group 1 stride 8 offset 4 : memref<16xf32, #dev> to memref<4xf32, #dev>
      sched.zero %a : memref<4xf32, #dev>
    }
    sched.task micro_batch 0 {
      %a = sched.slot %s[0] slots 2 group 1 stride 8 offset 4 : memref<16xf32, #dev> to memref<4xf32, #dev>
      sched.zero %a : memref<4xf32, #dev>
    }
  }
  sched.free %s : memref<16xf32, #dev>
}

// -----

// Picks that are not one per entry.
#dev = #sched.space<device>
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 3, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 3
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 3, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
  %s = sched.alloc "S" role activations : memref<16xf32, #dev>
  // expected-error @below {{picks must hold one slot per order entry (2), got 1}}
  sched.tasks event_families 0 order [0, 0, 0, 1] picks [0] {
    sched.task micro_batch 0 {
      %a = sched.slot %s[0] slots 2 group 0 stride 8 offset 0 : memref<16xf32, #dev> to memref<4xf32, #dev>
      sched.zero %a : memref<4xf32, #dev>
    }
  }
  sched.free %s : memref<16xf32, #dev>
}

// -----

// A table without picks for a task with picked slots.
#dev = #sched.space<device>
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 3, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 3
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 3, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
  %s = sched.alloc "S" role activations : memref<16xf32, #dev>
  // expected-error @below {{task 0 has picked slots, so the table needs picks}}
  sched.tasks event_families 0 order [0, 0] {
    sched.task micro_batch 0 {
      %a = sched.slot %s[0] slots 2 group 0 stride 8 offset 0 : memref<16xf32, #dev> to memref<4xf32, #dev>
      sched.zero %a : memref<4xf32, #dev>
    }
  }
  sched.free %s : memref<16xf32, #dev>
}

// -----

// A pick past the pool's slots.
#dev = #sched.space<device>
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 3, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 3
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 3, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
  %s = sched.alloc "S" role activations : memref<16xf32, #dev>
  // expected-error @below {{order entry 1 picks slot 2, not one of the 2 of its task's picked slots}}
  sched.tasks event_families 0 order [0, 0, 0, 1] picks [0, 2] {
    sched.task micro_batch 0 {
      %a = sched.slot %s[0] slots 2 group 0 stride 8 offset 0 : memref<16xf32, #dev> to memref<4xf32, #dev>
      sched.zero %a : memref<4xf32, #dev>
    }
  }
  sched.free %s : memref<16xf32, #dev>
}

// -----

// A pick for a run whose task has no picked slot.
#dev = #sched.space<device>
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 3, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 3
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 3, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
  %s = sched.alloc "S" role activations : memref<16xf32, #dev>
  // expected-error @below {{order entry 1 picks slot 0, but its task 1 has no picked slot (-1)}}
  sched.tasks event_families 0 order [0, 0, 1, 0] picks [0, 0] {
    sched.task micro_batch 0 {
      %a = sched.slot %s[0] slots 2 group 0 stride 8 offset 0 : memref<16xf32, #dev> to memref<4xf32, #dev>
      sched.zero %a : memref<4xf32, #dev>
    }
    sched.task micro_batch 0 {
    }
  }
  sched.free %s : memref<16xf32, #dev>
}

// -----

// A picked slot without its stride and offset.
#dev = #sched.space<device>
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 3, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 3
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 3, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
  %s = sched.alloc "S" role activations : memref<16xf32, #dev>
  sched.tasks event_families 0 order [0, 0] picks [0] {
    sched.task micro_batch 0 {
      // expected-error @below {{a picked slot needs group, stride and offset}}
      %a = "sched.slot"(%s) <{shift = 0 : i64, slots = 2 : i64, group = 0 : i64}> : (memref<16xf32, #dev>) -> memref<4xf32, #dev>
    }
  }
  sched.free %s : memref<16xf32, #dev>
}

// -----

// A picked slot's elements past its slot.
#dev = #sched.space<device>
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 3, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 3
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 3, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
  %s = sched.alloc "S" role activations : memref<16xf32, #dev>
  sched.tasks event_families 0 order [0, 0] picks [0] {
    sched.task micro_batch 0 {
      // expected-error @below {{elements [6, 10) are not in a slot of 8 elements}}
      %a = sched.slot %s[0] slots 2 group 0 stride 8 offset 6 : memref<16xf32, #dev> to memref<4xf32, #dev>
    }
  }
  sched.free %s : memref<16xf32, #dev>
}

// -----

// More picked slots than the pool holds.
#dev = #sched.space<device>
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 3, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 3
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 3, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
  %s = sched.alloc "S" role activations : memref<16xf32, #dev>
  sched.tasks event_families 0 order [0, 0] picks [0] {
    sched.task micro_batch 0 {
      // expected-error @below {{3 slots of 8 elements are not in the 16 elements of the source}}
      %a = sched.slot %s[0] slots 3 group 0 stride 8 offset 0 : memref<16xf32, #dev> to memref<4xf32, #dev>
    }
  }
  sched.free %s : memref<16xf32, #dev>
}

// -----

// A picked slot of another micro-batch's.
#dev = #sched.space<device>
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 3, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 3
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 3, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
  %s = sched.alloc "S" role activations : memref<16xf32, #dev>
  sched.tasks event_families 0 order [0, 0] picks [0] {
    sched.task micro_batch 0 {
      // expected-error @below {{a picked slot is its run's own: shift must be 0, got 1}}
      %a = sched.slot %s[1] slots 2 group 0 stride 8 offset 0 : memref<16xf32, #dev> to memref<4xf32, #dev>
    }
  }
  sched.free %s : memref<16xf32, #dev>
}

// -----

// A negative group.
#dev = #sched.space<device>
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 3, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 3
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 3, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
  %s = sched.alloc "S" role activations : memref<16xf32, #dev>
  sched.tasks event_families 0 order [0, 0] picks [0] {
    sched.task micro_batch 0 {
      // expected-error @below {{group must be >= 0, got -1}}
      %a = sched.slot %s[0] slots 2 group -1 stride 8 offset 0 : memref<16xf32, #dev> to memref<4xf32, #dev>
    }
  }
  sched.free %s : memref<16xf32, #dev>
}
