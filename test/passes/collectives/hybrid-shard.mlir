// sched-insert-collectives, hybrid_shard (HSDP): full_shard over the shard
// group of a 2x2 mesh; after the last micro-batch's reduce-scatter, the
// gradient shard is averaged over the replicas (after the reduce-scatter's
// event) and waited before the optimizer section. Inputs: sched-lower's
// single-rank program for a 3-unit model in two groups (root = embed + head,
// and layers.0).
//
// RUN: split-file %s %t
// RUN: plan-opt %t/every-clip.mlir -sched-insert-collectives | FileCheck %s
// RUN: plan-opt %t/last.mlir -sched-insert-collectives | FileCheck %s --check-prefix=LAST

// CHECK-LABEL: sched.program @tiny.step for @tiny micro_batches 2
// CHECK-NEXT:  [[RP:%.*]] = sched.alloc "fsdp.root.param" role param persistent : memref<66xf32
// CHECK-NEXT:  [[RG:%.*]] = sched.alloc "fsdp.root.grad" role grad persistent : memref<66xf32
// CHECK:       [[LP:%.*]] = sched.alloc "fsdp.layers.0.param" role param persistent : memref<16xf32
// CHECK-NEXT:  [[LG:%.*]] = sched.alloc "fsdp.layers.0.grad" role grad persistent : memref<16xf32
// CHECK:       [[RF:%.*]] = sched.alloc "fsdp.root.gathered"
// CHECK-NEXT:  sched.all_gather [[RP]] into [[RF]] group shard
// CHECK:       sched.forward @tiny::@head mb 0
// CHECK-NEXT:  sched.free [[RF]]
// The first micro-batch reduce-scatters over the shard group only.
// CHECK-NOT:   sched.all_reduce
// CHECK:       [[SL0:%.*]] = sched.reduce_scatter {{%.*}} into [[LG]] group shard reduce avg accumulate
// CHECK-NOT:   sched.all_reduce
// CHECK:       sched.wait [[SL0]]
// CHECK-NOT:   sched.all_reduce
// CHECK:       [[SR0:%.*]] = sched.reduce_scatter {{%.*}} into [[RG]] group shard reduce avg accumulate
// CHECK-NOT:   sched.all_reduce
// CHECK:       sched.wait [[SR0]]
// CHECK-NOT:   sched.all_reduce
// CHECK:       sched.backward @tiny::@layers.0 mb 1
// CHECK-NEXT:  sched.free
// CHECK-NEXT:  [[SL1:%.*]] = sched.reduce_scatter [[LGF:%.*]] into [[LG]] group shard reduce avg accumulate
// CHECK-NEXT:  [[AL:%.*]] = sched.all_reduce [[LG]] group replicate reduce avg after [[SL1]] : memref<16xf32
// CHECK-NEXT:  sched.free
// The layer's reduce-scatter and the replica all-reduce that follows it
// complete before the root's reduce-scatter is issued: one group's
// reduction in flight at a time.
// CHECK-NEXT:  sched.backward @tiny::@embed mb 1
// CHECK-NEXT:  sched.free
// CHECK-NEXT:  sched.wait [[SL1]]
// CHECK-NEXT:  sched.free [[LGF]]
// CHECK-NEXT:  sched.wait [[AL]]
// CHECK-NEXT:  [[SR1:%.*]] = sched.reduce_scatter [[RGF:%.*]] into [[RG]] group shard reduce avg accumulate
// CHECK-NEXT:  [[AR:%.*]] = sched.all_reduce [[RG]] group replicate reduce avg after [[SR1]] : memref<66xf32
// CHECK-NEXT:  sched.free
// CHECK-NEXT:  sched.wait [[SR1]]
// CHECK-NEXT:  sched.free [[RGF]]
// CHECK-NEXT:  sched.wait [[AR]]
// The replicas hold equal shards; the norm is summed over the shard group.
// CHECK-NEXT:  [[N:%.*]] = sched.alloc "grad_norm"
// CHECK-NEXT:  sched.zero [[N]]
// CHECK-NEXT:  sched.grad_norm [[RG]] into [[N]]
// CHECK-NEXT:  sched.grad_norm [[LG]] into [[N]]
// CHECK-NEXT:  [[EN:%.*]] = sched.all_reduce [[N]] group shard reduce sum
// CHECK-NEXT:  sched.wait [[EN]]
// CHECK-NEXT:  sched.optimizer_step @tiny::@fsdp.root params([[RP]] : {{.*}}) grads([[RG]] :
// CHECK-NEXT:  sched.optimizer_step @tiny::@fsdp.layers.0 params([[LP]] : {{.*}}) grads([[LG]] :
// CHECK-NEXT:  sched.free [[N]]
// CHECK-NEXT:  }

// last_micro_batch: one reduce-scatter and one replica all-reduce per group.
// LAST-LABEL: sched.program @tiny.step for @tiny micro_batches 2
// LAST-NOT:   sched.reduce_scatter
// LAST:       sched.loss @tiny::@head mb 1
// LAST:       [[SL:%.*]] = sched.reduce_scatter
// LAST-NEXT:  sched.all_reduce {{%.*}} group replicate reduce avg after [[SL]]
// LAST:       [[SR:%.*]] = sched.reduce_scatter
// LAST-NEXT:  sched.all_reduce {{%.*}} group replicate reduce avg after [[SR]]
// LAST-NOT:   sched.reduce_scatter
// LAST:       sched.optimizer_step

//--- every-clip.mlir
!m1 = memref<1xf32, #sched.space<device>>
!m8 = memref<8xf32, #sched.space<device>>
!m16 = memref<16xf32, #sched.space<device>>
!m24 = memref<24xf32, #sched.space<device>>
!m32 = memref<32xf32, #sched.space<device>>
!m64 = memref<64xf32, #sched.space<device>>
!m68 = memref<68xf32, #sched.space<device>>
!m132 = memref<132xf32, #sched.space<device>>

shard.grid @mesh(shape = 1x2x2x1)
plan.plan @tiny on @mesh
    model #plan.model<family = llama, vocab = 16, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 8>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 2, device = #plan.device<name = "cpu", memory = 1073741824, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0e10>, host_memory = 1073741824, inter_node_bandwidth = 1.0e10>
    train #plan.train<optimizer = #plan.optimizer<kind = adamw, lr = 1.0e-3>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = #plan.loss_scale<kind = none>, grad_clip = 1.0, lr_schedule = #plan.lr_schedule<kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<16x4xf32>
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.self_attn.q_proj.weight" : tensor<4x4xf32>
    plan.param "model.layers.0.self_attn.k_proj.weight" : tensor<4x4xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32>
    plan.param "lm_head.weight" : tensor<16x4xf32>
  }
  plan.group @fsdp.root units [@embed, @head] {numel = 132 : i64, padded_numel = 132 : i64, shard_numel = 66 : i64}
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 32 : i64, padded_numel = 32 : i64, shard_numel = 16 : i64}
}

sched.program @tiny.step for @tiny micro_batches 2
    model #plan.model<family = llama, vocab = 16, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 8>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 2, device = #plan.device<name = "cpu", memory = 1073741824, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0e10>, host_memory = 1073741824, inter_node_bandwidth = 1.0e10>
    train #plan.train<optimizer = #plan.optimizer<kind = adamw, lr = 1.0e-3>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = #plan.loss_scale<kind = none>, grad_clip = 1.0, lr_schedule = #plan.lr_schedule<kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>> {
  %rp = sched.alloc "fsdp.root.param" role param persistent : !m132
  %rg = sched.alloc "fsdp.root.grad" role grad persistent : !m132
  %rexp_avg = sched.alloc "fsdp.root.exp_avg" role exp_avg persistent : !m132
  %rexp_avg_sq = sched.alloc "fsdp.root.exp_avg_sq" role exp_avg_sq persistent : !m132
  %lp = sched.alloc "fsdp.layers.0.param" role param persistent : !m32
  %lg = sched.alloc "fsdp.layers.0.grad" role grad persistent : !m32
  %lexp_avg = sched.alloc "fsdp.layers.0.exp_avg" role exp_avg persistent : !m32
  %lexp_avg_sq = sched.alloc "fsdp.layers.0.exp_avg_sq" role exp_avg_sq persistent : !m32
  %embed_p = sched.view %rp[0] : !m132 to !m64
  %head_p = sched.view %rp[64] : !m132 to !m68
  %layer_p = sched.view %lp[0] : !m32 to !m32
  %embed_g = sched.view %rg[0] : !m132 to !m64
  %head_g = sched.view %rg[64] : !m132 to !m68
  %layer_g = sched.view %lg[0] : !m32 to !m32
  sched.zero %rg : !m132
  sched.zero %lg : !m32
  %embed_a0 = sched.alloc "embed.saves.mb0" role activations : !m8
  sched.forward @tiny::@embed mb 0 params(%embed_p : !m64) saves(%embed_a0 : !m8)
  %layer_a0 = sched.alloc "layers.0.saves.mb0" role activations : !m16
  sched.forward @tiny::@layers.0 mb 0 params(%layer_p : !m32) saves(%layer_a0 : !m16)
  %head_a0 = sched.alloc "head.saves.mb0" role activations : !m24
  sched.forward @tiny::@head mb 0 params(%head_p : !m68) saves(%head_a0 : !m24)
  sched.loss @tiny::@head mb 0 scale 0.5
  sched.backward @tiny::@head mb 0 params(%head_p : !m68) activations(%head_a0 : !m24) grads(%head_g : !m68)
  sched.free %head_a0 : !m24
  sched.backward @tiny::@layers.0 mb 0 params(%layer_p : !m32) activations(%layer_a0 : !m16) grads(%layer_g : !m32)
  sched.free %layer_a0 : !m16
  sched.backward @tiny::@embed mb 0 params(%embed_p : !m64) activations(%embed_a0 : !m8) grads(%embed_g : !m64)
  sched.free %embed_a0 : !m8
  %embed_a1 = sched.alloc "embed.saves.mb1" role activations : !m8
  sched.forward @tiny::@embed mb 1 params(%embed_p : !m64) saves(%embed_a1 : !m8)
  %layer_a1 = sched.alloc "layers.0.saves.mb1" role activations : !m16
  sched.forward @tiny::@layers.0 mb 1 params(%layer_p : !m32) saves(%layer_a1 : !m16)
  %head_a1 = sched.alloc "head.saves.mb1" role activations : !m24
  sched.forward @tiny::@head mb 1 params(%head_p : !m68) saves(%head_a1 : !m24)
  sched.loss @tiny::@head mb 1 scale 0.5
  sched.backward @tiny::@head mb 1 params(%head_p : !m68) activations(%head_a1 : !m24) grads(%head_g : !m68)
  sched.free %head_a1 : !m24
  sched.backward @tiny::@layers.0 mb 1 params(%layer_p : !m32) activations(%layer_a1 : !m16) grads(%layer_g : !m32)
  sched.free %layer_a1 : !m16
  sched.backward @tiny::@embed mb 1 params(%embed_p : !m64) activations(%embed_a1 : !m8) grads(%embed_g : !m64)
  sched.free %embed_a1 : !m8
  %norm = sched.alloc "grad_norm" role scalar : !m1
  sched.zero %norm : !m1
  sched.grad_norm %rg into %norm : !m132, !m1
  sched.grad_norm %lg into %norm : !m32, !m1
  sched.optimizer_step @tiny::@fsdp.root params(%rp : !m132) grads(%rg : !m132) state(%rexp_avg, %rexp_avg_sq : !m132, !m132) norm(%norm : !m1)
  sched.optimizer_step @tiny::@fsdp.layers.0 params(%lp : !m32) grads(%lg : !m32) state(%lexp_avg, %lexp_avg_sq : !m32, !m32) norm(%norm : !m1)
  sched.free %norm : !m1
}

//--- last.mlir
!m1 = memref<1xf32, #sched.space<device>>
!m8 = memref<8xf32, #sched.space<device>>
!m16 = memref<16xf32, #sched.space<device>>
!m24 = memref<24xf32, #sched.space<device>>
!m32 = memref<32xf32, #sched.space<device>>
!m64 = memref<64xf32, #sched.space<device>>
!m68 = memref<68xf32, #sched.space<device>>
!m132 = memref<132xf32, #sched.space<device>>

shard.grid @mesh(shape = 1x2x2x1)
plan.plan @tiny on @mesh
    model #plan.model<family = llama, vocab = 16, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 8>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 2, device = #plan.device<name = "cpu", memory = 1073741824, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0e10>, host_memory = 1073741824, inter_node_bandwidth = 1.0e10>
    train #plan.train<optimizer = #plan.optimizer<kind = adamw, lr = 1.0e-3>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = #plan.loss_scale<kind = none>, lr_schedule = #plan.lr_schedule<kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>, grad_sync = last_micro_batch> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<16x4xf32>
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.self_attn.q_proj.weight" : tensor<4x4xf32>
    plan.param "model.layers.0.self_attn.k_proj.weight" : tensor<4x4xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32>
    plan.param "lm_head.weight" : tensor<16x4xf32>
  }
  plan.group @fsdp.root units [@embed, @head] {numel = 132 : i64, padded_numel = 132 : i64, shard_numel = 66 : i64}
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 32 : i64, padded_numel = 32 : i64, shard_numel = 16 : i64}
}

sched.program @tiny.step for @tiny micro_batches 2
    model #plan.model<family = llama, vocab = 16, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 8>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 2, device = #plan.device<name = "cpu", memory = 1073741824, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0e10>, host_memory = 1073741824, inter_node_bandwidth = 1.0e10>
    train #plan.train<optimizer = #plan.optimizer<kind = adamw, lr = 1.0e-3>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = #plan.loss_scale<kind = none>, lr_schedule = #plan.lr_schedule<kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>, grad_sync = last_micro_batch> {
  %rp = sched.alloc "fsdp.root.param" role param persistent : !m132
  %rg = sched.alloc "fsdp.root.grad" role grad persistent : !m132
  %rexp_avg = sched.alloc "fsdp.root.exp_avg" role exp_avg persistent : !m132
  %rexp_avg_sq = sched.alloc "fsdp.root.exp_avg_sq" role exp_avg_sq persistent : !m132
  %lp = sched.alloc "fsdp.layers.0.param" role param persistent : !m32
  %lg = sched.alloc "fsdp.layers.0.grad" role grad persistent : !m32
  %lexp_avg = sched.alloc "fsdp.layers.0.exp_avg" role exp_avg persistent : !m32
  %lexp_avg_sq = sched.alloc "fsdp.layers.0.exp_avg_sq" role exp_avg_sq persistent : !m32
  %embed_p = sched.view %rp[0] : !m132 to !m64
  %head_p = sched.view %rp[64] : !m132 to !m68
  %layer_p = sched.view %lp[0] : !m32 to !m32
  %embed_g = sched.view %rg[0] : !m132 to !m64
  %head_g = sched.view %rg[64] : !m132 to !m68
  %layer_g = sched.view %lg[0] : !m32 to !m32
  sched.zero %rg : !m132
  sched.zero %lg : !m32
  %embed_a0 = sched.alloc "embed.saves.mb0" role activations : !m8
  sched.forward @tiny::@embed mb 0 params(%embed_p : !m64) saves(%embed_a0 : !m8)
  %layer_a0 = sched.alloc "layers.0.saves.mb0" role activations : !m16
  sched.forward @tiny::@layers.0 mb 0 params(%layer_p : !m32) saves(%layer_a0 : !m16)
  %head_a0 = sched.alloc "head.saves.mb0" role activations : !m24
  sched.forward @tiny::@head mb 0 params(%head_p : !m68) saves(%head_a0 : !m24)
  sched.loss @tiny::@head mb 0 scale 0.5
  sched.backward @tiny::@head mb 0 params(%head_p : !m68) activations(%head_a0 : !m24) grads(%head_g : !m68)
  sched.free %head_a0 : !m24
  sched.backward @tiny::@layers.0 mb 0 params(%layer_p : !m32) activations(%layer_a0 : !m16) grads(%layer_g : !m32)
  sched.free %layer_a0 : !m16
  sched.backward @tiny::@embed mb 0 params(%embed_p : !m64) activations(%embed_a0 : !m8) grads(%embed_g : !m64)
  sched.free %embed_a0 : !m8
  %embed_a1 = sched.alloc "embed.saves.mb1" role activations : !m8
  sched.forward @tiny::@embed mb 1 params(%embed_p : !m64) saves(%embed_a1 : !m8)
  %layer_a1 = sched.alloc "layers.0.saves.mb1" role activations : !m16
  sched.forward @tiny::@layers.0 mb 1 params(%layer_p : !m32) saves(%layer_a1 : !m16)
  %head_a1 = sched.alloc "head.saves.mb1" role activations : !m24
  sched.forward @tiny::@head mb 1 params(%head_p : !m68) saves(%head_a1 : !m24)
  sched.loss @tiny::@head mb 1 scale 0.5
  sched.backward @tiny::@head mb 1 params(%head_p : !m68) activations(%head_a1 : !m24) grads(%head_g : !m68)
  sched.free %head_a1 : !m24
  sched.backward @tiny::@layers.0 mb 1 params(%layer_p : !m32) activations(%layer_a1 : !m16) grads(%layer_g : !m32)
  sched.free %layer_a1 : !m16
  sched.backward @tiny::@embed mb 1 params(%embed_p : !m64) activations(%embed_a1 : !m8) grads(%embed_g : !m64)
  sched.free %embed_a1 : !m8
  sched.optimizer_step @tiny::@fsdp.root params(%rp : !m132) grads(%rg : !m132) state(%rexp_avg, %rexp_avg_sq : !m132, !m132)
  sched.optimizer_step @tiny::@fsdp.layers.0 params(%lp : !m32) grads(%lg : !m32) state(%lexp_avg, %lexp_avg_sq : !m32, !m32)
}
