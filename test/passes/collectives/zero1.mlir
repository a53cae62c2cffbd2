// sched-insert-collectives, zero1: parameters stay full; each rank steps its
// shard of the parameters with sharded optimizer state (SGD momentum here),
// and the updated shards are gathered back into the full parameters in
// place, waited at the end of the program. Gradients follow grad_sync: with
// every_micro_batch (this first case) each micro-batch's gradient goes
// through a transient full buffer reduce-scattered into the persistent
// gradient, which becomes a shard (sharded accumulation); with
// last_micro_batch the full gradient accumulates and is reduced once.
// Inputs: sched-lower's single-rank program for a 3-unit model in two groups
// (root = embed + head, and layers.0) on a 1x2 mesh.
//
// RUN: split-file %s %t
// RUN: plan-opt %t/every-clip.mlir -sched-insert-collectives | FileCheck %s
// RUN: plan-opt %t/last-tied.mlir -sched-insert-collectives | FileCheck %s --check-prefix=TIED

// CHECK-LABEL: sched.program @tiny.step for @tiny micro_batches 2
// CHECK-NEXT:  [[RP:%.*]] = sched.alloc "fsdp.root.param" role param persistent : memref<132xf32
// The persistent gradients are shards: accumulation happens after reduction.
// CHECK-NEXT:  [[RG:%.*]] = sched.alloc "fsdp.root.grad" role grad persistent : memref<66xf32
// CHECK-NEXT:  [[RM:%.*]] = sched.alloc "fsdp.root.momentum" role momentum persistent : memref<66xf32
// CHECK-NEXT:  [[LP:%.*]] = sched.alloc "fsdp.layers.0.param" role param persistent : memref<32xf32
// CHECK-NEXT:  [[LG:%.*]] = sched.alloc "fsdp.layers.0.grad" role grad persistent : memref<16xf32
// CHECK-NEXT:  [[LM:%.*]] = sched.alloc "fsdp.layers.0.momentum" role momentum persistent : memref<16xf32
// Compute reads the full parameters through the unit views; no gathers.
// CHECK-NEXT:  [[EP:%.*]] = sched.view [[RP]][0]
// CHECK-NOT:   sched.all_gather
// CHECK:       sched.zero [[RG]]
// CHECK-NEXT:  sched.zero [[LG]]
// CHECK:       sched.forward @tiny::@embed mb 0 params([[EP]] :
// Micro-batch 0: each group's gradient is reduce-scattered as soon as its
// backward is done, accumulating into the persistent shard.
// CHECK:       [[RF0:%.*]] = sched.alloc "fsdp.root.grad.mb0" role unsharded_grad : memref<132xf32
// CHECK-NEXT:  sched.zero [[RF0]]
// CHECK:       sched.backward @tiny::@head mb 0
// CHECK:       [[LF0:%.*]] = sched.alloc "fsdp.layers.0.grad.mb0" role unsharded_grad : memref<32xf32
// CHECK:       sched.backward @tiny::@layers.0 mb 0
// CHECK-NEXT:  [[EL0:%.*]] = sched.reduce_scatter [[LF0]] into [[LG]] group shard reduce avg accumulate
// The previous reduction is waited, and its full gradient freed, right before
// the next one is issued: one unsharded gradient in flight at a time.
// CHECK:       sched.backward @tiny::@embed mb 0
// CHECK-NEXT:  sched.wait [[EL0]]
// CHECK-NEXT:  sched.free [[LF0]]
// CHECK-NEXT:  [[ER0:%.*]] = sched.reduce_scatter [[RF0]] into [[RG]] group shard reduce avg accumulate
// CHECK:       sched.wait [[ER0]]
// CHECK-NEXT:  sched.free [[RF0]]
// CHECK:       sched.forward @tiny::@embed mb 1
// CHECK:       [[RF1:%.*]] = sched.alloc "fsdp.root.grad.mb1" role unsharded_grad : memref<132xf32
// CHECK:       sched.backward @tiny::@layers.0 mb 1
// CHECK-NEXT:  [[EL1:%.*]] = sched.reduce_scatter {{%.*}} into [[LG]] group shard reduce avg accumulate
// CHECK:       sched.backward @tiny::@embed mb 1
// CHECK-NEXT:  sched.wait [[EL1]]
// CHECK-NEXT:  sched.free
// CHECK-NEXT:  [[ER1:%.*]] = sched.reduce_scatter [[RF1]] into [[RG]] group shard reduce avg accumulate
// CHECK:       sched.wait [[ER1]]
// CHECK-NEXT:  sched.free [[RF1]]
// The norm covers this rank's gradient shards and is summed over the shards.
// CHECK-NEXT:  [[N:%.*]] = sched.alloc "grad_norm"
// CHECK-NEXT:  sched.zero [[N]]
// CHECK-NEXT:  sched.grad_norm [[RG]] into [[N]] : memref<66xf32
// CHECK-NEXT:  sched.grad_norm [[LG]] into [[N]] : memref<16xf32
// CHECK-NEXT:  [[EN:%.*]] = sched.all_reduce [[N]] group shard reduce sum
// CHECK-NEXT:  [[RPS:%.*]] = sched.shard_view [[RP]] group shard : memref<132xf32, {{.*}}> to memref<66xf32
// CHECK-NEXT:  sched.wait [[EN]]
// CHECK-NEXT:  sched.optimizer_step @tiny::@fsdp.root params([[RPS]] : {{.*}}) grads([[RG]] : {{.*}}) state([[RM]] : {{.*}}) norm([[N]]
// CHECK-NEXT:  [[GR:%.*]] = sched.all_gather [[RPS]] into [[RP]] group shard : memref<66xf32, {{.*}}>, memref<132xf32
// CHECK-NEXT:  [[LPS:%.*]] = sched.shard_view [[LP]] group shard : memref<32xf32, {{.*}}> to memref<16xf32
// CHECK-NEXT:  sched.optimizer_step @tiny::@fsdp.layers.0 params([[LPS]] : {{.*}}) grads([[LG]] : {{.*}}) state([[LM]] : {{.*}}) norm([[N]]
// CHECK-NEXT:  [[GL:%.*]] = sched.all_gather [[LPS]] into [[LP]] group shard
// CHECK-NEXT:  sched.free [[N]]
// CHECK-NEXT:  sched.wait [[GR]]
// CHECK-NEXT:  sched.wait [[GL]]
// CHECK-NEXT:  }

// last_micro_batch: one reduction after the last micro-batch; the tied head's
// gradient accumulates in the full root gradient that is reduce-scattered.
// TIED-LABEL: sched.program @tiny.step for @tiny micro_batches 2
// TIED:       [[RG:%.*]] = sched.alloc "fsdp.root.grad" role grad persistent : memref<68xf32
// TIED:       [[EG:%.*]] = sched.view [[RG]][0]
// TIED:       sched.backward @tiny::@head mb 1 {{.*}} tied_grads([[EG]] :
// TIED:       [[RS:%.*]] = sched.alloc "fsdp.root.grad.shard" role grad : memref<34xf32
// The layer's reduction completes before the root's is issued.
// TIED-NEXT:  sched.wait
// TIED-NEXT:  sched.reduce_scatter [[RG]] into [[RS]] group shard reduce avg
// TIED:       sched.optimizer_step @tiny::@fsdp.root params({{.*}} : memref<34xf32{{.*}}) grads([[RS]] :
// TIED-COUNT-1: sched.optimizer_step
// TIED-NOT:   sched.reduce_scatter

//--- every-clip.mlir
!m1 = memref<1xf32, #sched.space<device>>
!m8 = memref<8xf32, #sched.space<device>>
!m16 = memref<16xf32, #sched.space<device>>
!m24 = memref<24xf32, #sched.space<device>>
!m32 = memref<32xf32, #sched.space<device>>
!m64 = memref<64xf32, #sched.space<device>>
!m68 = memref<68xf32, #sched.space<device>>
!m132 = memref<132xf32, #sched.space<device>>

shard.grid @mesh(shape = 1x1x2x1)
plan.plan @tiny on @mesh
    model #plan.model<family = llama, vocab = 16, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 8>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = #plan.device<name = "cpu", memory = 1073741824, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0e10>, host_memory = 1073741824, inter_node_bandwidth = 1.0e10>
    train #plan.train<optimizer = #plan.optimizer<kind = sgd, lr = 0.1, momentum = 0.9>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = #plan.loss_scale<kind = none>, grad_clip = 1.0, lr_schedule = #plan.lr_schedule<kind = constant>>
    parallel #plan.parallel<sharding = zero1, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>, grad_sync = every_micro_batch> {
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
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = #plan.device<name = "cpu", memory = 1073741824, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0e10>, host_memory = 1073741824, inter_node_bandwidth = 1.0e10>
    train #plan.train<optimizer = #plan.optimizer<kind = sgd, lr = 0.1, momentum = 0.9>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = #plan.loss_scale<kind = none>, grad_clip = 1.0, lr_schedule = #plan.lr_schedule<kind = constant>>
    parallel #plan.parallel<sharding = zero1, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>, grad_sync = every_micro_batch> {
  %rp = sched.alloc "fsdp.root.param" role param persistent : !m132
  %rg = sched.alloc "fsdp.root.grad" role grad persistent : !m132
  %rmomentum = sched.alloc "fsdp.root.momentum" role momentum persistent : !m132
  %lp = sched.alloc "fsdp.layers.0.param" role param persistent : !m32
  %lg = sched.alloc "fsdp.layers.0.grad" role grad persistent : !m32
  %lmomentum = sched.alloc "fsdp.layers.0.momentum" role momentum persistent : !m32
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
  sched.optimizer_step @tiny::@fsdp.root params(%rp : !m132) grads(%rg : !m132) state(%rmomentum : !m132) norm(%norm : !m1)
  sched.optimizer_step @tiny::@fsdp.layers.0 params(%lp : !m32) grads(%lg : !m32) state(%lmomentum : !m32) norm(%norm : !m1)
  sched.free %norm : !m1
}

//--- last-tied.mlir
!m1 = memref<1xf32, #sched.space<device>>
!m4 = memref<4xf32, #sched.space<device>>
!m8 = memref<8xf32, #sched.space<device>>
!m16 = memref<16xf32, #sched.space<device>>
!m24 = memref<24xf32, #sched.space<device>>
!m32 = memref<32xf32, #sched.space<device>>
!m64 = memref<64xf32, #sched.space<device>>
!m68 = memref<68xf32, #sched.space<device>>

shard.grid @mesh(shape = 1x1x2x1)
plan.plan @tiny on @mesh
    model #plan.model<family = llama, vocab = 16, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 8, tie_embeddings = true>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = #plan.device<name = "cpu", memory = 1073741824, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0e10>, host_memory = 1073741824, inter_node_bandwidth = 1.0e10>
    train #plan.train<optimizer = #plan.optimizer<kind = adamw, lr = 1.0e-3>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = #plan.loss_scale<kind = none>, lr_schedule = #plan.lr_schedule<kind = constant>>
    parallel #plan.parallel<sharding = zero1, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>, grad_sync = last_micro_batch> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<16x4xf32>
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.self_attn.q_proj.weight" : tensor<4x4xf32>
    plan.param "model.layers.0.self_attn.k_proj.weight" : tensor<4x4xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32>
    plan.param "lm_head.weight" : tensor<16x4xf32> tied_to "model.embed_tokens.weight"
  }
  plan.group @fsdp.root units [@embed, @head] {numel = 68 : i64, padded_numel = 68 : i64, shard_numel = 34 : i64}
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 32 : i64, padded_numel = 32 : i64, shard_numel = 16 : i64}
}

sched.program @tiny.step for @tiny micro_batches 2
    model #plan.model<family = llama, vocab = 16, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 8, tie_embeddings = true>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = #plan.device<name = "cpu", memory = 1073741824, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0e10>, host_memory = 1073741824, inter_node_bandwidth = 1.0e10>
    train #plan.train<optimizer = #plan.optimizer<kind = adamw, lr = 1.0e-3>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = #plan.loss_scale<kind = none>, lr_schedule = #plan.lr_schedule<kind = constant>>
    parallel #plan.parallel<sharding = zero1, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>, grad_sync = last_micro_batch> {
  %rp = sched.alloc "fsdp.root.param" role param persistent : !m68
  %rg = sched.alloc "fsdp.root.grad" role grad persistent : !m68
  %rexp_avg = sched.alloc "fsdp.root.exp_avg" role exp_avg persistent : !m68
  %rexp_avg_sq = sched.alloc "fsdp.root.exp_avg_sq" role exp_avg_sq persistent : !m68
  %lp = sched.alloc "fsdp.layers.0.param" role param persistent : !m32
  %lg = sched.alloc "fsdp.layers.0.grad" role grad persistent : !m32
  %lexp_avg = sched.alloc "fsdp.layers.0.exp_avg" role exp_avg persistent : !m32
  %lexp_avg_sq = sched.alloc "fsdp.layers.0.exp_avg_sq" role exp_avg_sq persistent : !m32
  %embed_p = sched.view %rp[0] : !m68 to !m64
  %head_p = sched.view %rp[64] : !m68 to !m4
  %layer_p = sched.view %lp[0] : !m32 to !m32
  %embed_g = sched.view %rg[0] : !m68 to !m64
  %head_g = sched.view %rg[64] : !m68 to !m4
  %layer_g = sched.view %lg[0] : !m32 to !m32
  sched.zero %rg : !m68
  sched.zero %lg : !m32
  %embed_a0 = sched.alloc "embed.saves.mb0" role activations : !m8
  sched.forward @tiny::@embed mb 0 params(%embed_p : !m64) saves(%embed_a0 : !m8)
  %layer_a0 = sched.alloc "layers.0.saves.mb0" role activations : !m16
  sched.forward @tiny::@layers.0 mb 0 params(%layer_p : !m32) saves(%layer_a0 : !m16)
  %head_a0 = sched.alloc "head.saves.mb0" role activations : !m24
  sched.forward @tiny::@head mb 0 params(%head_p : !m4) tied(%embed_p : !m64) saves(%head_a0 : !m24)
  sched.loss @tiny::@head mb 0 scale 0.5
  sched.backward @tiny::@head mb 0 params(%head_p : !m4) tied(%embed_p : !m64) activations(%head_a0 : !m24) grads(%head_g : !m4) tied_grads(%embed_g : !m64)
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
  sched.forward @tiny::@head mb 1 params(%head_p : !m4) tied(%embed_p : !m64) saves(%head_a1 : !m24)
  sched.loss @tiny::@head mb 1 scale 0.5
  sched.backward @tiny::@head mb 1 params(%head_p : !m4) tied(%embed_p : !m64) activations(%head_a1 : !m24) grads(%head_g : !m4) tied_grads(%embed_g : !m64)
  sched.free %head_a1 : !m24
  sched.backward @tiny::@layers.0 mb 1 params(%layer_p : !m32) activations(%layer_a1 : !m16) grads(%layer_g : !m32)
  sched.free %layer_a1 : !m16
  sched.backward @tiny::@embed mb 1 params(%embed_p : !m64) activations(%embed_a1 : !m8) grads(%embed_g : !m64)
  sched.free %embed_a1 : !m8
  sched.optimizer_step @tiny::@fsdp.root params(%rp : !m68) grads(%rg : !m68) state(%rexp_avg, %rexp_avg_sq : !m68, !m68)
  sched.optimizer_step @tiny::@fsdp.layers.0 params(%lp : !m32) grads(%lg : !m32) state(%lexp_avg, %lexp_avg_sq : !m32, !m32)
}
