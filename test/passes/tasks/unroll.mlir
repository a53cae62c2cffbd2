// sched-unroll-tasks (passes/sched/UnrollTasks.cpp): a sched.tasks' runs
// written out in the order of its table, what the schedule file's reader
// does with a file's tasks.
// RUN: plan-opt %s -split-input-file -verify-diagnostics -sched-unroll-tasks | FileCheck %s

// 1F1B over three micro-batches with two slots: the forward of micro-batch
// 2 takes slot 0 again (elements 0-3), after the backward of micro-batch 0
// has read it. A body's own buffer is named for the run's micro-batch; a
// slot event is the event of the copy that signalled it.
// CHECK-LABEL: sched.program
// CHECK:      %[[S:.*]] = sched.alloc "S"
// CHECK:      %[[T:.*]] = sched.alloc "T"
// CHECK-NOT:  sched.tasks
// CHECK:      %[[A0:.*]] = sched.view %[[S]][0]
// CHECK-NEXT: %[[B0:.*]] = sched.view %[[T]][0]
// CHECK-NEXT: sched.alloc "x.mb0"
// CHECK:      %[[C0:.*]] = sched.copy %[[A0]] into %[[B0]]
// CHECK-NEXT: %[[A1:.*]] = sched.view %[[S]][4]
// CHECK-NEXT: %[[B1:.*]] = sched.view %[[T]][4]
// CHECK-NEXT: sched.alloc "x.mb1"
// CHECK:      %[[C1:.*]] = sched.copy %[[A1]] into %[[B1]]
// CHECK-NEXT: sched.wait %[[C0]]
// CHECK-NEXT: %[[A0B:.*]] = sched.view %[[S]][0]
// CHECK-NEXT: %[[B0B:.*]] = sched.view %[[T]][0]
// CHECK-NEXT: %[[R0:.*]] = sched.copy %[[B0B]] into %[[A0B]]
// CHECK-NEXT: sched.wait %[[R0]]
// CHECK-NEXT: %[[A2:.*]] = sched.view %[[S]][0]
// CHECK-NEXT: %[[B2:.*]] = sched.view %[[T]][0]
// CHECK-NEXT: sched.alloc "x.mb2"
// CHECK:      sched.wait %[[C1]]
// CHECK:      sched.free %[[S]]
// CHECK-NOT:  sched.slot
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
      %x = sched.alloc "x.mb0" role activations : memref<4xf32, #dev>
      sched.zero %x : memref<4xf32, #dev>
      sched.free %x : memref<4xf32, #dev>
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

// A wait for an instance no earlier run signals.
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
  sched.tasks event_families 1 order [0, 0] {
    sched.task micro_batch 0 {
      // expected-error @below {{in the run of micro-batch 0 names instance 0 of family 0, which no run before it signals}}
      %ready = sched.slot_event family 0 shift 0
      sched.wait %ready
    }
  }
}

// -----

// One instance signalled by two runs (micro-batch 0 run twice).
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
  sched.tasks event_families 1 order [0, 0, 0, 0] {
    sched.task micro_batch 0 {
      %a = sched.slot %s[0] slots 2 : memref<8xf32, #dev> to memref<4xf32, #dev>
      %b = sched.slot %t[0] slots 2 : memref<8xf32, #host> to memref<4xf32, #host>
      %copied = sched.copy %a into %b : memref<4xf32, #dev>, memref<4xf32, #host>
      // expected-error @below {{in the run of micro-batch 0 signals instance 0 of family 0, which a run before it signalled}}
      sched.slot_signal %copied family 0 shift 0
    }
  }
  sched.free %s : memref<8xf32, #dev>
  sched.free %t : memref<8xf32, #host>
}

// -----

// Picked slots: each run's slot of the pool is the one its entry picks, at
// its group's offset in a slot of 8 elements: group 0's micro-batch 0 in
// slot 0 (elements 0-3), group 1's in slot 1 at offset 4 (elements 12-15),
// and micro-batch 1 of group 0 in slot 0 again once its backward of
// micro-batch 0 is done.
// CHECK-LABEL: sched.program
// CHECK:      %[[P:.*]] = sched.alloc "P"
// CHECK:      sched.view %[[P]][0] :
// CHECK:      sched.view %[[P]][12] :
// CHECK:      sched.view %[[P]][0] :
// CHECK:      sched.view %[[P]][12] :
// CHECK:      sched.view %[[P]][0] :
// CHECK:      sched.view %[[P]][0] :
// CHECK-NOT:  sched.slot
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
  sched.tasks event_families 0 order [0, 0, 2, 0, 1, 0, 3, 0, 0, 1, 1, 1] picks [0, 1, 0, 1, 0, 0] {
    sched.task micro_batch 0 {
      %a = sched.slot %pool[0] slots 2 group 0 stride 8 offset 0 : memref<16xf32, #dev> to memref<4xf32, #dev>
      sched.zero %a : memref<4xf32, #dev>
    }
    sched.task micro_batch 0 {
      %a = sched.slot %pool[0] slots 2 group 0 stride 8 offset 0 : memref<16xf32, #dev> to memref<4xf32, #dev>
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
