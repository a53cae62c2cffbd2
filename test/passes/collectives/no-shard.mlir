// sched-insert-collectives, no_shard (DDP): parameters, gradients and
// optimizer state stay full; gradients are averaged over every rank with
// all_reduce. Inputs: sched-lower's single-rank program for a 3-unit model in
// two groups (root = embed + head, and layers.0) on a 2x1 mesh.
//
// RUN: split-file %s %t
// RUN: plan-opt %t/one-clip.mlir -sched-insert-collectives | FileCheck %s --check-prefix=ONE
// RUN: plan-opt %t/last-tied.mlir -sched-insert-collectives | FileCheck %s --check-prefix=LAST
// RUN: plan-opt %t/every-tied.mlir -sched-insert-collectives | FileCheck %s --check-prefix=EVERY

// One micro-batch: each group's gradient is all-reduced in place right after
// the group's backward and waited before the optimizer section. Clipping
// needs no collective: every rank holds the full, averaged gradient.
// ONE-LABEL: sched.program @tiny.step
// ONE-NEXT:  [[RP:%.*]] = sched.alloc "fsdp.root.param" role param persistent : memref<132xf32
// ONE-NEXT:  [[RG:%.*]] = sched.alloc "fsdp.root.grad" role grad persistent : memref<132xf32
// ONE-NEXT:  sched.alloc "fsdp.root.exp_avg" role exp_avg persistent : memref<132xf32
// ONE-NEXT:  sched.alloc "fsdp.root.exp_avg_sq" role exp_avg_sq persistent : memref<132xf32
// ONE-NEXT:  [[LP:%.*]] = sched.alloc "fsdp.layers.0.param" role param persistent : memref<32xf32
// ONE-NEXT:  [[LG:%.*]] = sched.alloc "fsdp.layers.0.grad" role grad persistent : memref<32xf32
// ONE:       [[EP:%.*]] = sched.view [[RP]][0]
// ONE-NEXT:  [[HP:%.*]] = sched.view [[RP]][64]
// ONE-NEXT:  [[BP:%.*]] = sched.view [[LP]][0]
// ONE-NEXT:  [[EG:%.*]] = sched.view [[RG]][0]
// ONE-NEXT:  [[HG:%.*]] = sched.view [[RG]][64]
// ONE-NEXT:  [[BG:%.*]] = sched.view [[LG]][0]
// ONE-NOT:   sched.all_gather
// ONE:       sched.forward @tiny::@embed mb 0 params([[EP]] :
// ONE:       sched.loss
// ONE-NEXT:  sched.backward @tiny::@head mb 0 params([[HP]] : {{.*}} grads([[HG]] :
// ONE-NEXT:  sched.free
// ONE-NEXT:  sched.backward @tiny::@layers.0 mb 0 params([[BP]] : {{.*}} grads([[BG]] :
// ONE-NEXT:  [[EL:%.*]] = sched.all_reduce [[LG]] group world reduce avg : memref<32xf32
// ONE-NEXT:  sched.free
// ONE-NEXT:  sched.backward @tiny::@embed mb 0 params([[EP]] : {{.*}} grads([[EG]] :
// ONE-NEXT:  [[ER:%.*]] = sched.all_reduce [[RG]] group world reduce avg : memref<132xf32
// ONE-NEXT:  sched.free
// ONE-NEXT:  sched.wait [[EL]]
// ONE-NEXT:  sched.wait [[ER]]
// ONE-NEXT:  [[N:%.*]] = sched.alloc "grad_norm"
// ONE-NEXT:  sched.zero [[N]]
// ONE-NEXT:  sched.grad_norm [[RG]] into [[N]]
// ONE-NEXT:  sched.grad_norm [[LG]] into [[N]]
// ONE-NEXT:  sched.optimizer_step @tiny::@fsdp.root params([[RP]] : {{.*}}) grads([[RG]] : {{.*}}) state({{.*}}) norm([[N]]
// ONE-NEXT:  sched.optimizer_step @tiny::@fsdp.layers.0 params([[LP]] : {{.*}}) grads([[LG]] : {{.*}}) state({{.*}}) norm([[N]]
// ONE-NEXT:  sched.free [[N]]
// ONE-NEXT:  }

// grad_sync = last_micro_batch (no_sync): backward accumulates into the
// persistent gradients; one all-reduce per group after the last micro-batch.
// The tied head's gradient goes into the embedding's view of the root group.
// LAST-LABEL: sched.program @tiny.step for @tiny micro_batches 2
// LAST:       [[RG:%.*]] = sched.alloc "fsdp.root.grad" role grad persistent : memref<68xf32
// LAST:       [[LG:%.*]] = sched.alloc "fsdp.layers.0.grad" role grad persistent : memref<32xf32
// LAST:       [[EG:%.*]] = sched.view [[RG]][0]
// LAST-NOT:   sched.all_reduce
// LAST:       sched.backward @tiny::@head mb 0 {{.*}} tied_grads([[EG]] :
// LAST-NOT:   sched.all_reduce
// LAST:       sched.loss @tiny::@head mb 1
// LAST-NOT:   sched.all_reduce
// LAST:       sched.backward @tiny::@layers.0 mb 1
// LAST-NEXT:  [[EL:%.*]] = sched.all_reduce [[LG]] group world reduce avg
// LAST-NEXT:  sched.free
// LAST-NEXT:  sched.backward @tiny::@embed mb 1
// LAST-NEXT:  [[ER:%.*]] = sched.all_reduce [[RG]] group world reduce avg
// LAST-NEXT:  sched.free
// LAST-NEXT:  sched.wait [[EL]]
// LAST-NEXT:  sched.wait [[ER]]
// LAST-NEXT:  sched.optimizer_step @tiny::@fsdp.root
// LAST-NEXT:  sched.optimizer_step @tiny::@fsdp.layers.0
// LAST-NEXT:  }

// grad_sync = every_micro_batch: each micro-batch's backward adds into a
// zeroed transient gradient that is all-reduced, then accumulated into the
// persistent gradient and freed before the next micro-batch.
// EVERY-LABEL: sched.program @tiny.step for @tiny micro_batches 2
// EVERY:       [[RG:%.*]] = sched.alloc "fsdp.root.grad" role grad persistent : memref<68xf32
// EVERY:       [[LG:%.*]] = sched.alloc "fsdp.layers.0.grad" role grad persistent : memref<32xf32
// The persistent gradients' unit views are no longer used.
// EVERY-NOT:   sched.view [[RG]]
// EVERY-NOT:   sched.view [[LG]]
// EVERY:       sched.loss @tiny::@head mb 0
// EVERY-NEXT:  [[R0:%.*]] = sched.alloc "fsdp.root.grad.mb0" role unsharded_grad : memref<68xf32
// EVERY-NEXT:  sched.zero [[R0]]
// EVERY-NEXT:  [[R0H:%.*]] = sched.view [[R0]][64]
// EVERY-NEXT:  [[R0E:%.*]] = sched.view [[R0]][0]
// EVERY-NEXT:  sched.backward @tiny::@head mb 0 {{.*}} grads([[R0H]] : {{.*}}) tied_grads([[R0E]] :
// EVERY-NEXT:  sched.free
// EVERY-NEXT:  [[L0:%.*]] = sched.alloc "fsdp.layers.0.grad.mb0" role unsharded_grad : memref<32xf32
// EVERY-NEXT:  sched.zero [[L0]]
// EVERY-NEXT:  [[L0B:%.*]] = sched.view [[L0]][0]
// EVERY-NEXT:  sched.backward @tiny::@layers.0 mb 0 {{.*}} grads([[L0B]] :
// EVERY-NEXT:  [[EL0:%.*]] = sched.all_reduce [[L0]] group world reduce avg
// EVERY-NEXT:  sched.free
// EVERY-NEXT:  sched.backward @tiny::@embed mb 0 {{.*}} grads([[R0E]] :
// EVERY-NEXT:  [[ER0:%.*]] = sched.all_reduce [[R0]] group world reduce avg
// EVERY-NEXT:  sched.free
// EVERY-NEXT:  sched.wait [[EL0]]
// EVERY-NEXT:  sched.accumulate [[L0]] into [[LG]]
// EVERY-NEXT:  sched.free [[L0]]
// EVERY-NEXT:  sched.wait [[ER0]]
// EVERY-NEXT:  sched.accumulate [[R0]] into [[RG]]
// EVERY-NEXT:  sched.free [[R0]]
// EVERY-NEXT:  sched.alloc "embed.saves.mb1"
// EVERY:       [[R1:%.*]] = sched.alloc "fsdp.root.grad.mb1" role unsharded_grad
// EVERY:       [[L1:%.*]] = sched.alloc "fsdp.layers.0.grad.mb1" role unsharded_grad
// EVERY:       [[EL1:%.*]] = sched.all_reduce [[L1]] group world reduce avg
// EVERY:       [[ER1:%.*]] = sched.all_reduce [[R1]] group world reduce avg
// EVERY-NEXT:  sched.free
// EVERY-NEXT:  sched.wait [[EL1]]
// EVERY-NEXT:  sched.accumulate [[L1]] into [[LG]]
// EVERY-NEXT:  sched.free [[L1]]
// EVERY-NEXT:  sched.wait [[ER1]]
// EVERY-NEXT:  sched.accumulate [[R1]] into [[RG]]
// EVERY-NEXT:  sched.free [[R1]]
// EVERY-NEXT:  sched.optimizer_step @tiny::@fsdp.root params({{.*}}) grads([[RG]] :
// EVERY-NEXT:  sched.optimizer_step @tiny::@fsdp.layers.0 params({{.*}}) grads([[LG]] :
// EVERY-NEXT:  }

//--- one-clip.mlir
!m1 = memref<1xf32, #sched.space<device>>
!m8 = memref<8xf32, #sched.space<device>>
!m16 = memref<16xf32, #sched.space<device>>
!m24 = memref<24xf32, #sched.space<device>>
!m32 = memref<32xf32, #sched.space<device>>
!m64 = memref<64xf32, #sched.space<device>>
!m68 = memref<68xf32, #sched.space<device>>
!m132 = memref<132xf32, #sched.space<device>>

shard.grid @mesh(shape = 1x2x1x1)
plan.plan @tiny on @mesh
    model #plan.model<family = llama, vocab = 16, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 8>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = #plan.device<name = "cpu", memory = 1073741824, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0e10>, host_memory = 1073741824, inter_node_bandwidth = 1.0e10>
    train #plan.train<optimizer = #plan.optimizer<kind = adamw, lr = 1.0e-3>, micro_batch = 1, seq_len = 8, grad_accum = 1, loss_scale = #plan.loss_scale<kind = none>, grad_clip = 1.0, lr_schedule = #plan.lr_schedule<kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>> {
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
  plan.group @fsdp.root units [@embed, @head] {numel = 132 : i64, padded_numel = 132 : i64, shard_numel = 132 : i64}
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 32 : i64, padded_numel = 32 : i64, shard_numel = 32 : i64}
}

sched.program @tiny.step for @tiny micro_batches 1
    model #plan.model<family = llama, vocab = 16, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 8>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = #plan.device<name = "cpu", memory = 1073741824, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0e10>, host_memory = 1073741824, inter_node_bandwidth = 1.0e10>
    train #plan.train<optimizer = #plan.optimizer<kind = adamw, lr = 1.0e-3>, micro_batch = 1, seq_len = 8, grad_accum = 1, loss_scale = #plan.loss_scale<kind = none>, grad_clip = 1.0, lr_schedule = #plan.lr_schedule<kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>> {
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
  sched.loss @tiny::@head mb 0 scale 1.0
  sched.backward @tiny::@head mb 0 params(%head_p : !m68) activations(%head_a0 : !m24) grads(%head_g : !m68)
  sched.free %head_a0 : !m24
  sched.backward @tiny::@layers.0 mb 0 params(%layer_p : !m32) activations(%layer_a0 : !m16) grads(%layer_g : !m32)
  sched.free %layer_a0 : !m16
  sched.backward @tiny::@embed mb 0 params(%embed_p : !m64) activations(%embed_a0 : !m8) grads(%embed_g : !m64)
  sched.free %embed_a0 : !m8
  %norm = sched.alloc "grad_norm" role scalar : !m1
  sched.zero %norm : !m1
  sched.grad_norm %rg into %norm : !m132, !m1
  sched.grad_norm %lg into %norm : !m32, !m1
  sched.optimizer_step @tiny::@fsdp.root params(%rp : !m132) grads(%rg : !m132) state(%rexp_avg, %rexp_avg_sq : !m132, !m132) norm(%norm : !m1)
  sched.optimizer_step @tiny::@fsdp.layers.0 params(%lp : !m32) grads(%lg : !m32) state(%lexp_avg, %lexp_avg_sq : !m32, !m32) norm(%norm : !m1)
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

shard.grid @mesh(shape = 1x2x1x1)
plan.plan @tiny on @mesh
    model #plan.model<family = llama, vocab = 16, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 8, tie_embeddings = true>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = #plan.device<name = "cpu", memory = 1073741824, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0e10>, host_memory = 1073741824, inter_node_bandwidth = 1.0e10>
    train #plan.train<optimizer = #plan.optimizer<kind = adamw, lr = 1.0e-3>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = #plan.loss_scale<kind = none>, lr_schedule = #plan.lr_schedule<kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>, grad_sync = last_micro_batch> {
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
  plan.group @fsdp.root units [@embed, @head] {numel = 68 : i64, padded_numel = 68 : i64, shard_numel = 68 : i64}
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 32 : i64, padded_numel = 32 : i64, shard_numel = 32 : i64}
}

sched.program @tiny.step for @tiny micro_batches 2
    model #plan.model<family = llama, vocab = 16, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 8, tie_embeddings = true>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = #plan.device<name = "cpu", memory = 1073741824, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0e10>, host_memory = 1073741824, inter_node_bandwidth = 1.0e10>
    train #plan.train<optimizer = #plan.optimizer<kind = adamw, lr = 1.0e-3>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = #plan.loss_scale<kind = none>, lr_schedule = #plan.lr_schedule<kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>, grad_sync = last_micro_batch> {
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

//--- every-tied.mlir
!m1 = memref<1xf32, #sched.space<device>>
!m4 = memref<4xf32, #sched.space<device>>
!m8 = memref<8xf32, #sched.space<device>>
!m16 = memref<16xf32, #sched.space<device>>
!m24 = memref<24xf32, #sched.space<device>>
!m32 = memref<32xf32, #sched.space<device>>
!m64 = memref<64xf32, #sched.space<device>>
!m68 = memref<68xf32, #sched.space<device>>

shard.grid @mesh(shape = 1x2x1x1)
plan.plan @tiny on @mesh
    model #plan.model<family = llama, vocab = 16, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 8, tie_embeddings = true>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = #plan.device<name = "cpu", memory = 1073741824, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0e10>, host_memory = 1073741824, inter_node_bandwidth = 1.0e10>
    train #plan.train<optimizer = #plan.optimizer<kind = adamw, lr = 1.0e-3>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = #plan.loss_scale<kind = none>, lr_schedule = #plan.lr_schedule<kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>, grad_sync = every_micro_batch> {
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
  plan.group @fsdp.root units [@embed, @head] {numel = 68 : i64, padded_numel = 68 : i64, shard_numel = 68 : i64}
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 32 : i64, padded_numel = 32 : i64, shard_numel = 32 : i64}
}

sched.program @tiny.step for @tiny micro_batches 2
    model #plan.model<family = llama, vocab = 16, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 8, tie_embeddings = true>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = #plan.device<name = "cpu", memory = 1073741824, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0e10>, host_memory = 1073741824, inter_node_bandwidth = 1.0e10>
    train #plan.train<optimizer = #plan.optimizer<kind = adamw, lr = 1.0e-3>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = #plan.loss_scale<kind = none>, lr_schedule = #plan.lr_schedule<kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>, grad_sync = every_micro_batch> {
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
