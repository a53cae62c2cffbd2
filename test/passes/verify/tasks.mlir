// sched-verify-schedule on a program with a sched.tasks: the step it stands
// for is checked, its table walked entry by entry on the ops as written
// (sched::StepCursor), which also finds a slot taken by one micro-batch while
// another's data is still in it.
// RUN: plan-opt %s -split-input-file -verify-diagnostics -sched-verify-schedule

// 1F1B keeps two micro-batches in flight: two slots each are enough, and
// the step written out is race-free.
#dev = #sched.space<device>
#host = #sched.space<host>
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
  %s = sched.alloc "S" role activations : memref<8xf32, #dev>
  %t = sched.alloc "T" role activations : memref<8xf32, #host>
  sched.tasks event_families 1 order [0, 0, 0, 1, 1, 0, 0, 2, 1, 1, 1, 2] {
    sched.task micro_batch 0 {
      %a = sched.slot %s[0] slots 2 : memref<8xf32, #dev> to memref<4xf32, #dev>
      %b = sched.slot %t[0] slots 2 : memref<8xf32, #host> to memref<4xf32, #host>
      sched.zero %a : memref<4xf32, #dev>
      %copied = sched.copy %a into %b : memref<4xf32, #dev>, memref<4xf32, #host>
      sched.slot_signal %copied family 0 shift 0
    }
    sched.task micro_batch 0 {
      %ready = sched.slot_event family 0 shift 0
      sched.wait %ready
      %a = sched.slot %s[0] slots 2 : memref<8xf32, #dev> to memref<4xf32, #dev>
      %b = sched.slot %t[0] slots 2 : memref<8xf32, #host> to memref<4xf32, #host>
      %back = sched.copy %b into %a : memref<4xf32, #host>, memref<4xf32, #dev>
      sched.wait %back
    }
  }
  sched.free %s : memref<8xf32, #dev>
  sched.free %t : memref<8xf32, #host>
}

// -----

// GPipe keeps all three in flight: with two slots of S, the forward of
// micro-batch 2 takes slot 0 before the backward of micro-batch 0 has read
// it back. (Had the forward copied out of its slot asynchronously, the race
// with micro-batch 2's write would be the error, where it happens.)
#dev = #sched.space<device>
#host = #sched.space<host>
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
  %s = sched.alloc "S" role activations : memref<8xf32, #dev>
  %t = sched.alloc "T" role activations : memref<12xf32, #host>
  sched.tasks event_families 0 order [0, 0, 0, 1, 0, 2, 1, 0, 1, 1, 1, 2] {
    sched.task micro_batch 0 {
      %a = sched.slot %s[0] slots 2 : memref<8xf32, #dev> to memref<4xf32, #dev>
      sched.zero %a : memref<4xf32, #dev>
    }
    sched.task micro_batch 0 {
      %a = sched.slot %s[0] slots 2 : memref<8xf32, #dev> to memref<4xf32, #dev>
      %b = sched.slot %t[0] slots 3 : memref<12xf32, #host> to memref<4xf32, #host>
      // expected-error @below {{in the run of micro-batch 0 uses slot 0 of 'S' for micro-batch 0 after micro-batch 2 took it: its slots are fewer than the micro-batches in flight}}
      %back = sched.copy %a into %b : memref<4xf32, #dev>, memref<4xf32, #host>
      sched.wait %back
    }
  }
  sched.free %s : memref<8xf32, #dev>
  sched.free %t : memref<12xf32, #host>
}

// -----

// Two slot buffers that share one allocation (sched-share-slot-buffers
// makes such views): the forward of micro-batch 0 fills A's slot, then B's,
// which lies at the same place, and the backward of micro-batch 0 reads A's
// back: B took the slot in between, for the same micro-batch.
#dev = #sched.space<device>
#host = #sched.space<host>
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
  %pool = sched.alloc "slots.activations.0" role activations : memref<4xf32, #dev>
  %sa = sched.view %pool[0] : memref<4xf32, #dev> to memref<4xf32, #dev>
  %sb = sched.view %pool[0] : memref<4xf32, #dev> to memref<4xf32, #dev>
  %t = sched.alloc "T" role activations : memref<4xf32, #host>
  sched.tasks event_families 0 order [0, 0, 1, 0, 0, 1, 1, 1] {
    sched.task micro_batch 0 {
      %a = sched.slot %sa[0] slots 1 : memref<4xf32, #dev> to memref<4xf32, #dev>
      sched.zero %a : memref<4xf32, #dev>
      %b = sched.slot %sb[0] slots 1 : memref<4xf32, #dev> to memref<4xf32, #dev>
      sched.zero %b : memref<4xf32, #dev>
    }
    sched.task micro_batch 0 {
      %a = sched.slot %sa[0] slots 1 : memref<4xf32, #dev> to memref<4xf32, #dev>
      // expected-error @below {{in the run of micro-batch 0 uses slot 0 of 'slots.activations.0' for micro-batch 0 after another slot buffer in it took it for micro-batch 0: slot buffers that share an allocation must not be in use at once}}
      %back = sched.copy %a into %t : memref<4xf32, #dev>, memref<4xf32, #host>
      sched.wait %back
    }
  }
  sched.free %pool : memref<4xf32, #dev>
  sched.free %t : memref<4xf32, #host>
}

// -----

// One slot of S, which only the forward uses: the forward of micro-batch 1
// zeroes it while micro-batch 0's copy out of it is still in flight (its
// event is waited in the backward): a race in the step written out, at the
// op where it is written.
#dev = #sched.space<device>
#host = #sched.space<host>
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
  %s = sched.alloc "S" role activations : memref<4xf32, #dev>
  %t = sched.alloc "T" role activations : memref<8xf32, #host>
  sched.tasks event_families 1 order [0, 0, 0, 1, 1, 0, 1, 1] {
    sched.task micro_batch 0 {
      %a = sched.slot %s[0] slots 1 : memref<4xf32, #dev> to memref<4xf32, #dev>
      %b = sched.slot %t[0] slots 2 : memref<8xf32, #host> to memref<4xf32, #host>
      // expected-error @below {{writes buffer 'S' while sched.copy still reads it}}
      sched.zero %a : memref<4xf32, #dev>
      // expected-note @below {{issued here; not waited yet}}
      %copied = sched.copy %a into %b : memref<4xf32, #dev>, memref<4xf32, #host>
      sched.slot_signal %copied family 0 shift 0
    }
    sched.task micro_batch 0 {
      %ready = sched.slot_event family 0 shift 0
      sched.wait %ready
      %a = sched.slot %s[0] slots 1 : memref<4xf32, #dev> to memref<4xf32, #dev>
      %b = sched.slot %t[0] slots 2 : memref<8xf32, #host> to memref<4xf32, #host>
      %fresh = sched.alloc "fresh.mb0" role activations : memref<4xf32, #dev>
      %back = sched.copy %b into %fresh : memref<4xf32, #host>, memref<4xf32, #dev>
      sched.wait %back
      sched.free %fresh : memref<4xf32, #dev>
    }
  }
  sched.free %s : memref<4xf32, #dev>
  sched.free %t : memref<8xf32, #host>
}

// -----

// A sched.repeat is sched-roll-micro-batches', which runs after this pass:
// a clear error, also behind a sched.tasks.
#dev = #sched.space<device>
#host = #sched.space<host>
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
  // expected-error @below {{is not for sched-verify-schedule, which works on a program whose micro-batches are written out one after the other}}
  sched.repeat count 2 {
  }
}

// -----

#dev = #sched.space<device>
#host = #sched.space<host>
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
  sched.tasks event_families 0 order [] {
  }
  // expected-error @below {{is not for sched-verify-schedule, which works on a program whose micro-batches are written out one after the other}}
  sched.repeat count 2 {
  }
}

// -----

// A slot event names an instance of its family that no run before it has
// signalled: here micro-batch 2's copy, which runs later.
#dev = #sched.space<device>
#host = #sched.space<host>
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
  %s = sched.alloc "S" role activations : memref<8xf32, #dev>
  %t = sched.alloc "T" role activations : memref<8xf32, #host>
  sched.tasks event_families 1 order [0, 0, 0, 1, 1, 0, 0, 2, 1, 1, 1, 2] {
    sched.task micro_batch 0 {
      %a = sched.slot %s[0] slots 2 : memref<8xf32, #dev> to memref<4xf32, #dev>
      %b = sched.slot %t[0] slots 2 : memref<8xf32, #host> to memref<4xf32, #host>
      sched.zero %a : memref<4xf32, #dev>
      %copied = sched.copy %a into %b : memref<4xf32, #dev>, memref<4xf32, #host>
      sched.slot_signal %copied family 0 shift 0
    }
    sched.task micro_batch 0 {
      // expected-error @below {{in the run of micro-batch 0 names instance 2 of family 0, which no run before it signals}}
      %ready = sched.slot_event family 0 shift 2
      sched.wait %ready
      %a = sched.slot %s[0] slots 2 : memref<8xf32, #dev> to memref<4xf32, #dev>
      %b = sched.slot %t[0] slots 2 : memref<8xf32, #host> to memref<4xf32, #host>
      %back = sched.copy %b into %a : memref<4xf32, #host>, memref<4xf32, #dev>
      sched.wait %back
    }
  }
  sched.free %s : memref<8xf32, #dev>
  sched.free %t : memref<8xf32, #host>
}

// -----

// An instance signalled twice: the backward's copy signals the instance its
// forward's copy already gave.
#dev = #sched.space<device>
#host = #sched.space<host>
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
  %s = sched.alloc "S" role activations : memref<8xf32, #dev>
  %t = sched.alloc "T" role activations : memref<8xf32, #host>
  sched.tasks event_families 1 order [0, 0, 0, 1, 1, 0, 0, 2, 1, 1, 1, 2] {
    sched.task micro_batch 0 {
      %a = sched.slot %s[0] slots 2 : memref<8xf32, #dev> to memref<4xf32, #dev>
      %b = sched.slot %t[0] slots 2 : memref<8xf32, #host> to memref<4xf32, #host>
      sched.zero %a : memref<4xf32, #dev>
      %copied = sched.copy %a into %b : memref<4xf32, #dev>, memref<4xf32, #host>
      sched.slot_signal %copied family 0 shift 0
    }
    sched.task micro_batch 0 {
      %ready = sched.slot_event family 0 shift 0
      sched.wait %ready
      %a = sched.slot %s[0] slots 2 : memref<8xf32, #dev> to memref<4xf32, #dev>
      %b = sched.slot %t[0] slots 2 : memref<8xf32, #host> to memref<4xf32, #host>
      %back = sched.copy %b into %a : memref<4xf32, #host>, memref<4xf32, #dev>
      // expected-error @below {{in the run of micro-batch 0 signals instance 0 of family 0, which a run before it signalled}}
      sched.slot_signal %back family 0 shift 0
    }
  }
  sched.free %s : memref<8xf32, #dev>
  sched.free %t : memref<8xf32, #host>
}


// -----

// An error after the middle the walk steps over is found again by a walk of
// every run, which names the run's own micro-batch: the last backward of
// the 1F1B at 12 micro-batches (tasks-periods.mlir) names the instance of a
// micro-batch the step does not have.
#dev = #sched.space<device>
#host = #sched.space<host>
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 12, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 12
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 12, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
  %s = sched.alloc "S" role activations : memref<8xf32, #dev>
  %t = sched.alloc "T" role activations : memref<8xf32, #host>
  sched.tasks event_families 1 order [0, 0, 0, 1, 1, 0, 0, 2, 1, 1, 0, 3, 1, 2, 0, 4, 1, 3, 0, 5, 1, 4, 0, 6, 1, 5, 0, 7, 1, 6, 0, 8, 1, 7, 0, 9, 1, 8, 0, 10, 1, 9, 0, 11, 1, 10, 2, 11] {
    sched.task micro_batch 0 {
      %a = sched.slot %s[0] slots 2 : memref<8xf32, #dev> to memref<4xf32, #dev>
      %b = sched.slot %t[0] slots 2 : memref<8xf32, #host> to memref<4xf32, #host>
      sched.zero %a : memref<4xf32, #dev>
      %copied = sched.copy %a into %b : memref<4xf32, #dev>, memref<4xf32, #host>
      sched.slot_signal %copied family 0 shift 0
    }
    sched.task micro_batch 0 {
      %ready = sched.slot_event family 0 shift 0
      sched.wait %ready
      %a = sched.slot %s[0] slots 2 : memref<8xf32, #dev> to memref<4xf32, #dev>
      %b = sched.slot %t[0] slots 2 : memref<8xf32, #host> to memref<4xf32, #host>
      %back = sched.copy %b into %a : memref<4xf32, #host>, memref<4xf32, #dev>
      sched.wait %back
    }
    sched.task micro_batch 0 {
      // expected-error @below {{in the run of micro-batch 11 names instance 12 of family 0, which no run before it signals}}
      %ready = sched.slot_event family 0 shift 1
      sched.wait %ready
    }
  }
  sched.free %s : memref<8xf32, #dev>
  sched.free %t : memref<8xf32, #host>
}

// -----

// Picked slots: two groups' forwards and backwards share a pool of two
// slots, each group at its offset in a slot. Group 1's forward of
// micro-batch 0 picks the slot group 0's micro-batch 0 still holds (its
// backward reads it after), so the picks give one slot to two
// micro-batches in flight at once. (The valid picks, [0, 1, 0, 1, 0, 0],
// are sched-unroll-tasks' test.)
#dev = #sched.space<device>
#host = #sched.space<host>
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
  %pool = sched.alloc "P" role activations : memref<16xf32, #dev>
  %t = sched.alloc "T" role activations : memref<4xf32, #host>
  sched.tasks event_families 0 order [0, 0, 2, 0, 1, 0, 3, 0, 0, 1, 1, 1] picks [0, 0, 0, 0, 1, 1] {
    sched.task micro_batch 0 {
      %a = sched.slot %pool[0] slots 2 group 0 stride 8 offset 0 : memref<16xf32, #dev> to memref<4xf32, #dev>
      sched.zero %a : memref<4xf32, #dev>
    }
    sched.task micro_batch 0 {
      %a = sched.slot %pool[0] slots 2 group 0 stride 8 offset 0 : memref<16xf32, #dev> to memref<4xf32, #dev>
      // expected-error @below {{in the run of micro-batch 0 uses slot 0 of 'P' for group 0's micro-batch 0 after group 1 took it for micro-batch 0: the table's picks give one slot to two micro-batches in flight at once}}
      %back = sched.copy %a into %t : memref<4xf32, #dev>, memref<4xf32, #host>
      sched.wait %back
    }
    sched.task micro_batch 0 {
      %b = sched.slot %pool[0] slots 2 group 1 stride 8 offset 4 : memref<16xf32, #dev> to memref<4xf32, #dev>
      sched.zero %b : memref<4xf32, #dev>
    }
    sched.task micro_batch 0 {
      %b = sched.slot %pool[0] slots 2 group 1 stride 8 offset 4 : memref<16xf32, #dev> to memref<4xf32, #dev>
      %back = sched.copy %b into %t : memref<4xf32, #dev>, memref<4xf32, #host>
      sched.wait %back
    }
  }
  sched.free %pool : memref<16xf32, #dev>
  sched.free %t : memref<4xf32, #host>
}
