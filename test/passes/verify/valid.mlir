// Valid schedules pass sched-verify-schedule unchanged.
// RUN: plan-opt %s -split-input-file -sched-verify-schedule | FileCheck %s

// One full_shard step: gathers waited before use, reduce-scatters waited
// before their buffers are freed, a tied head, clipping, the steps.
// CHECK-LABEL: sched.program @p.step
// CHECK:         sched.optimizer_step @p::@fsdp.layers.0
// CHECK-NEXT:    sched.free
// CHECK-NEXT:  }
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, grad_clip = 1.0, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
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
  plan.group @fsdp.root units [@embed, @head] {numel = 36 : i64, padded_numel = 36 : i64, shard_numel = 18 : i64}
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 16 : i64, padded_numel = 16 : i64, shard_numel = 8 : i64}
}
sched.program @p.step for @p micro_batches 1
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, grad_clip = 1.0, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p0 = sched.alloc "fsdp.root.param" role param persistent : memref<18xf32, #dev>
  %g0 = sched.alloc "fsdp.root.grad" role grad persistent : memref<18xf32, #dev>
  %p1 = sched.alloc "fsdp.layers.0.param" role param persistent : memref<8xf32, #dev>
  %g1 = sched.alloc "fsdp.layers.0.grad" role grad persistent : memref<8xf32, #dev>
  sched.zero %g0 : memref<18xf32, #dev>
  sched.zero %g1 : memref<8xf32, #dev>
  %f0 = sched.alloc "fsdp.root.gathered" role gathered : memref<36xf32, #dev>
  %e0 = sched.all_gather %p0 into %f0 group shard : memref<18xf32, #dev>, memref<36xf32, #dev>
  %embed = sched.view %f0[0] : memref<36xf32, #dev> to memref<32xf32, #dev>
  %head = sched.view %f0[32] : memref<36xf32, #dev> to memref<4xf32, #dev>
  %a0 = sched.alloc "embed.saves.mb0" role activations : memref<8xf32, #dev>
  sched.wait %e0
  sched.forward @p::@embed mb 0 params(%embed : memref<32xf32, #dev>) saves(%a0 : memref<8xf32, #dev>)
  %f1 = sched.alloc "fsdp.layers.0.gathered" role gathered : memref<16xf32, #dev>
  %e1 = sched.all_gather %p1 into %f1 group shard : memref<8xf32, #dev>, memref<16xf32, #dev>
  %a1 = sched.alloc "layers.0.saves.mb0" role activations : memref<64xf32, #dev>
  sched.wait %e1
  sched.forward @p::@layers.0 mb 0 params(%f1 : memref<16xf32, #dev>) saves(%a1 : memref<64xf32, #dev>)
  %a2 = sched.alloc "head.saves.mb0" role activations : memref<40xf32, #dev>
  sched.forward @p::@head mb 0 params(%head : memref<4xf32, #dev>) tied(%embed : memref<32xf32, #dev>) saves(%a2 : memref<40xf32, #dev>)
  sched.loss @p::@head mb 0 scale 1.0
  %u0 = sched.alloc "fsdp.root.grad.full" role unsharded_grad : memref<36xf32, #dev>
  sched.zero %u0 : memref<36xf32, #dev>
  %ue = sched.view %u0[0] : memref<36xf32, #dev> to memref<32xf32, #dev>
  %uh = sched.view %u0[32] : memref<36xf32, #dev> to memref<4xf32, #dev>
  sched.backward @p::@head mb 0 params(%head : memref<4xf32, #dev>) tied(%embed : memref<32xf32, #dev>) activations(%a2 : memref<40xf32, #dev>) grads(%uh : memref<4xf32, #dev>) tied_grads(%ue : memref<32xf32, #dev>)
  sched.free %a2 : memref<40xf32, #dev>
  %u1 = sched.alloc "fsdp.layers.0.grad.full" role unsharded_grad : memref<16xf32, #dev>
  sched.zero %u1 : memref<16xf32, #dev>
  sched.backward @p::@layers.0 mb 0 params(%f1 : memref<16xf32, #dev>) activations(%a1 : memref<64xf32, #dev>) grads(%u1 : memref<16xf32, #dev>)
  sched.free %a1 : memref<64xf32, #dev>
  sched.free %f1 : memref<16xf32, #dev>
  %r1 = sched.reduce_scatter %u1 into %g1 group shard reduce avg accumulate : memref<16xf32, #dev>, memref<8xf32, #dev>
  sched.backward @p::@embed mb 0 params(%embed : memref<32xf32, #dev>) activations(%a0 : memref<8xf32, #dev>) grads(%ue : memref<32xf32, #dev>)
  sched.free %a0 : memref<8xf32, #dev>
  sched.free %f0 : memref<36xf32, #dev>
  %r0 = sched.reduce_scatter %u0 into %g0 group shard reduce avg accumulate : memref<36xf32, #dev>, memref<18xf32, #dev>
  sched.wait %r1
  sched.free %u1 : memref<16xf32, #dev>
  sched.wait %r0
  sched.free %u0 : memref<36xf32, #dev>
  %n = sched.alloc "grad_norm" role scalar : memref<1xf32, #dev>
  sched.zero %n : memref<1xf32, #dev>
  sched.grad_norm %g0 into %n : memref<18xf32, #dev>, memref<1xf32, #dev>
  sched.grad_norm %g1 into %n : memref<8xf32, #dev>, memref<1xf32, #dev>
  %en = sched.all_reduce %n group shard reduce sum : memref<1xf32, #dev>
  sched.wait %en
  sched.optimizer_step @p::@fsdp.root params(%p0 : memref<18xf32, #dev>) grads(%g0 : memref<18xf32, #dev>) state() norm(%n : memref<1xf32, #dev>)
  sched.optimizer_step @p::@fsdp.layers.0 params(%p1 : memref<8xf32, #dev>) grads(%g1 : memref<8xf32, #dev>) state() norm(%n : memref<1xf32, #dev>)
  sched.free %n : memref<1xf32, #dev>
}

// -----

// A host-to-device copy that an all-gather starts after: the gather may read
// the staging buffer the un-waited copy writes, and waiting for the gather
// completes the copy too. The copy's event is still waited once.
// CHECK-LABEL: sched.program @p.offload
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, grad_clip = 1.0, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.offload for @p micro_batches 1
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, grad_clip = 1.0, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
  %h = sched.alloc "fsdp.layers.0.param" role param persistent : memref<8xf32, #host>
  %s = sched.alloc "fsdp.layers.0.param.staging" role staging : memref<8xf32, #dev>
  %c = sched.copy %h into %s : memref<8xf32, #host>, memref<8xf32, #dev>
  %f = sched.alloc "fsdp.layers.0.gathered" role gathered : memref<16xf32, #dev>
  %e = sched.all_gather %s into %f group shard after %c : memref<8xf32, #dev>, memref<16xf32, #dev>
  sched.wait %e
  sched.free %s : memref<8xf32, #dev>
  %o = sched.alloc "out" role staging : memref<16xf32, #host>
  %d = sched.copy %f into %o : memref<16xf32, #dev>, memref<16xf32, #host>
  sched.wait %c
  sched.wait %d
  sched.free %f : memref<16xf32, #dev>
  sched.free %o : memref<16xf32, #host>
}

// -----

// zero1's in-place all-gather of the shard into the full buffer, and a bucket
// whose halves are reduced separately: zeroing the second half while the
// first is in flight touches other elements.
// CHECK-LABEL: sched.program @p.zero1
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, grad_clip = 1.0, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.zero1 for @p micro_batches 1
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, grad_clip = 1.0, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p = sched.alloc "fsdp.root.param" role param persistent : memref<36xf32, #dev>
  %ps = sched.shard_view %p group shard : memref<36xf32, #dev> to memref<18xf32, #dev>
  %ea = sched.all_gather %ps into %p group shard : memref<18xf32, #dev>, memref<36xf32, #dev>
  %b = sched.alloc "bucket.0" role bucket : memref<32xf32, #dev>
  %b0 = sched.view %b[0] : memref<32xf32, #dev> to memref<16xf32, #dev>
  %b1 = sched.view %b[16] : memref<32xf32, #dev> to memref<16xf32, #dev>
  sched.zero %b0 : memref<16xf32, #dev>
  %r0 = sched.all_reduce %b0 group world reduce avg : memref<16xf32, #dev>
  sched.zero %b1 : memref<16xf32, #dev>
  %r1 = sched.all_reduce %b1 group world reduce avg : memref<16xf32, #dev>
  sched.wait %r0
  sched.wait %r1
  %t = sched.alloc "bucket.bf16" role staging : memref<32xbf16, #dev>
  sched.cast %b into %t : memref<32xf32, #dev>, memref<32xbf16, #dev>
  sched.free %t : memref<32xbf16, #dev>
  sched.free %b : memref<32xf32, #dev>
  sched.wait %ea
}

// -----

// Checkpointing, loss scaling, a broadcast and accumulation: recompute reads
// the saved input, check_finite and grad_norm update zeroed scalars.
// CHECK-LABEL: sched.program @p.ckpt
// CHECK:         sched.update_loss_scale
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, grad_clip = 1.0, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
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
  plan.group @fsdp.root units [@embed, @head] {numel = 36 : i64, padded_numel = 36 : i64, shard_numel = 18 : i64}
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 16 : i64, padded_numel = 16 : i64, shard_numel = 8 : i64}
}
sched.program @p.ckpt for @p micro_batches 1
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, grad_clip = 1.0, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
  %ls = sched.alloc "loss_scale" role scalar persistent : memref<1xf32, #dev>
  %p1 = sched.alloc "fsdp.layers.0.param" role param persistent : memref<16xf32, #dev>
  %g1 = sched.alloc "fsdp.layers.0.grad" role grad persistent : memref<16xf32, #dev>
  %eb = sched.broadcast %p1 group world root 0 : memref<16xf32, #dev>
  sched.wait %eb
  %in = sched.alloc "layers.0.input.mb0" role activations : memref<32xf32, #dev>
  sched.forward @p::@layers.0 mb 0 params(%p1 : memref<16xf32, #dev>) saves(%in : memref<32xf32, #dev>)
  sched.loss @p::@head mb 0 scale 1.0 loss_scale(%ls : memref<1xf32, #dev>)
  %a = sched.alloc "layers.0.saves.mb0" role activations : memref<64xf32, #dev>
  sched.recompute @p::@layers.0 mb 0 params(%p1 : memref<16xf32, #dev>) from(%in : memref<32xf32, #dev>) saves(%a : memref<64xf32, #dev>)
  %u = sched.alloc "fsdp.layers.0.grad.mb0" role unsharded_grad : memref<16xf32, #dev>
  sched.zero %u : memref<16xf32, #dev>
  sched.backward @p::@layers.0 mb 0 params(%p1 : memref<16xf32, #dev>) activations(%a : memref<64xf32, #dev>) grads(%u : memref<16xf32, #dev>)
  sched.free %a : memref<64xf32, #dev>
  sched.free %in : memref<32xf32, #dev>
  sched.accumulate %u into %g1 : memref<16xf32, #dev>, memref<16xf32, #dev>
  sched.free %u : memref<16xf32, #dev>
  %f = sched.alloc "found_inf" role scalar : memref<1xf32, #dev>
  sched.zero %f : memref<1xf32, #dev>
  sched.check_finite %g1 into %f : memref<16xf32, #dev>, memref<1xf32, #dev>
  %ef = sched.all_reduce %f group world reduce max : memref<1xf32, #dev>
  sched.wait %ef
  sched.optimizer_step @p::@fsdp.layers.0 params(%p1 : memref<16xf32, #dev>) grads(%g1 : memref<16xf32, #dev>) state() found_inf(%f : memref<1xf32, #dev>) loss_scale(%ls : memref<1xf32, #dev>)
  sched.update_loss_scale %ls found_inf %f : memref<1xf32, #dev>, memref<1xf32, #dev>
  sched.free %f : memref<1xf32, #dev>
}

// -----

// What a shard view wrote, a shard view of the same buffer and group reads.
// CHECK-LABEL: sched.program @p.shard
#dev = #sched.space<device>
#host = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, grad_clip = 1.0, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
}
sched.program @p.shard for @p micro_batches 1
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, grad_clip = 1.0, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
  %t = sched.alloc "t" role staging : memref<8xf32, #dev>
  %s = sched.shard_view %t group shard : memref<8xf32, #dev> to memref<4xf32, #dev>
  sched.zero %s : memref<4xf32, #dev>
  %s2 = sched.shard_view %t group shard : memref<8xf32, #dev> to memref<4xf32, #dev>
  %u = sched.alloc "u" role staging : memref<4xbf16, #dev>
  sched.cast %s2 into %u : memref<4xf32, #dev>, memref<4xbf16, #dev>
  sched.free %u : memref<4xbf16, #dev>
  sched.free %t : memref<8xf32, #dev>
}
