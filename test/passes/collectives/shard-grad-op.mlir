// sched-insert-collectives, shard_grad_op (ZeRO-2): the state is sharded;
// each group's parameters are all-gathered once, before its first forward of
// the step, and freed after its last backward; gradients go through a
// transient full buffer reduce-scattered (accumulating) into the persistent
// shard. Inputs: sched-lower's single-rank program for a 3-unit model in two
// groups (root = embed + head, and layers.0) on a 1x2 mesh.
//
// RUN: split-file %s %t
// RUN: plan-opt %t/every.mlir -sched-insert-collectives | FileCheck %s --check-prefix=EVERY
// RUN: plan-opt %t/last-clip.mlir -sched-insert-collectives | FileCheck %s --check-prefix=LAST

// grad_sync = every_micro_batch, two micro-batches: one gather per group for
// the whole step; one reduce-scatter per group per micro-batch.
// EVERY-LABEL: sched.program @tiny.step for @tiny micro_batches 2
// EVERY-NEXT:  [[RP:%.*]] = sched.alloc "fsdp.root.param" role param persistent : memref<66xf32
// EVERY-NEXT:  [[RG:%.*]] = sched.alloc "fsdp.root.grad" role grad persistent : memref<66xf32
// EVERY-NEXT:  sched.alloc "fsdp.root.exp_avg" role exp_avg persistent : memref<66xf32
// EVERY-NEXT:  sched.alloc "fsdp.root.exp_avg_sq" role exp_avg_sq persistent : memref<66xf32
// EVERY-NEXT:  [[LP:%.*]] = sched.alloc "fsdp.layers.0.param" role param persistent : memref<16xf32
// EVERY-NEXT:  [[LG:%.*]] = sched.alloc "fsdp.layers.0.grad" role grad persistent : memref<16xf32
// EVERY-NEXT:  sched.alloc "fsdp.layers.0.exp_avg" role exp_avg persistent : memref<16xf32
// EVERY-NEXT:  sched.alloc "fsdp.layers.0.exp_avg_sq" role exp_avg_sq persistent : memref<16xf32
// EVERY-NEXT:  sched.zero [[RG]]
// EVERY-NEXT:  sched.zero [[LG]]
// EVERY-NEXT:  sched.alloc "embed.saves.mb0"
// EVERY-NEXT:  [[RF:%.*]] = sched.alloc "fsdp.root.gathered" role gathered : memref<132xf32
// EVERY-NEXT:  [[ER:%.*]] = sched.all_gather [[RP]] into [[RF]] group shard
// EVERY-NEXT:  [[FE:%.*]] = sched.view [[RF]][0]
// EVERY-NEXT:  [[FH:%.*]] = sched.view [[RF]][64]
// EVERY-NEXT:  sched.wait [[ER]]
// EVERY-NEXT:  sched.forward @tiny::@embed mb 0 params([[FE]] :
// EVERY-NEXT:  sched.alloc "layers.0.saves.mb0"
// EVERY-NEXT:  [[LF:%.*]] = sched.alloc "fsdp.layers.0.gathered" role gathered : memref<32xf32
// EVERY-NEXT:  [[EL:%.*]] = sched.all_gather [[LP]] into [[LF]] group shard
// EVERY-NEXT:  [[FL:%.*]] = sched.view [[LF]][0]
// EVERY-NEXT:  sched.wait [[EL]]
// EVERY-NEXT:  sched.forward @tiny::@layers.0 mb 0 params([[FL]] :
// EVERY-NEXT:  sched.alloc "head.saves.mb0"
// EVERY-NEXT:  sched.forward @tiny::@head mb 0 params([[FH]] :
// EVERY-NEXT:  sched.loss @tiny::@head mb 0
// EVERY-NEXT:  [[RGF0:%.*]] = sched.alloc "fsdp.root.grad.full" role unsharded_grad : memref<132xf32
// EVERY-NEXT:  sched.zero [[RGF0]]
// EVERY-NEXT:  sched.view [[RGF0]][64]
// EVERY-NEXT:  sched.view [[RGF0]][0]
// EVERY-NEXT:  sched.backward @tiny::@head mb 0 params([[FH]] :
// EVERY-NEXT:  sched.free
// EVERY-NEXT:  [[LGF0:%.*]] = sched.alloc "fsdp.layers.0.grad.full" role unsharded_grad : memref<32xf32
// EVERY-NEXT:  sched.zero [[LGF0]]
// EVERY-NEXT:  sched.view [[LGF0]][0]
// EVERY-NEXT:  sched.backward @tiny::@layers.0 mb 0 params([[FL]] :
// EVERY-NEXT:  [[SL0:%.*]] = sched.reduce_scatter [[LGF0]] into [[LG]] group shard reduce avg accumulate
// EVERY-NEXT:  sched.free
// The layer's reduction is waited and its full gradient freed before the
// root's is issued: one unsharded gradient in flight at a time.
// EVERY-NEXT:  sched.backward @tiny::@embed mb 0 params([[FE]] :
// EVERY-NEXT:  sched.wait [[SL0]]
// EVERY-NEXT:  sched.free [[LGF0]]
// EVERY-NEXT:  [[SR0:%.*]] = sched.reduce_scatter [[RGF0]] into [[RG]] group shard reduce avg accumulate
// EVERY-NEXT:  sched.free
// EVERY-NEXT:  sched.wait [[SR0]]
// EVERY-NEXT:  sched.free [[RGF0]]
// The second micro-batch reads the same gathered buffers.
// EVERY-NOT:   sched.all_gather
// EVERY:       sched.forward @tiny::@embed mb 1 params([[FE]] :
// EVERY:       sched.forward @tiny::@layers.0 mb 1 params([[FL]] :
// EVERY:       [[RGF1:%.*]] = sched.alloc "fsdp.root.grad.full"
// EVERY:       [[LGF1:%.*]] = sched.alloc "fsdp.layers.0.grad.full"
// EVERY:       sched.backward @tiny::@layers.0 mb 1 params([[FL]] :
// EVERY-NEXT:  sched.free [[LF]]
// EVERY-NEXT:  [[SL1:%.*]] = sched.reduce_scatter [[LGF1]] into [[LG]] group shard reduce avg accumulate
// EVERY-NEXT:  sched.free
// EVERY-NEXT:  sched.backward @tiny::@embed mb 1 params([[FE]] :
// EVERY-NEXT:  sched.free [[RF]]
// EVERY-NEXT:  sched.wait [[SL1]]
// EVERY-NEXT:  sched.free [[LGF1]]
// EVERY-NEXT:  [[SR1:%.*]] = sched.reduce_scatter [[RGF1]] into [[RG]] group shard reduce avg accumulate
// EVERY-NEXT:  sched.free
// EVERY-NEXT:  sched.wait [[SR1]]
// EVERY-NEXT:  sched.free [[RGF1]]
// EVERY-NEXT:  sched.optimizer_step @tiny::@fsdp.root params([[RP]] : {{.*}}) grads([[RG]] :
// EVERY-NEXT:  sched.optimizer_step @tiny::@fsdp.layers.0 params([[LP]] : {{.*}}) grads([[LG]] :
// EVERY-NEXT:  }

// grad_sync = last_micro_batch with clipping: the full gradients live across
// both micro-batches and are reduce-scattered once; the norm of the shards is
// summed over the shard group before the steps.
// LAST-LABEL: sched.program @tiny.step for @tiny micro_batches 2
// LAST:       [[RG:%.*]] = sched.alloc "fsdp.root.grad" role grad persistent : memref<66xf32
// LAST:       [[LG:%.*]] = sched.alloc "fsdp.layers.0.grad" role grad persistent : memref<16xf32
// LAST:       [[RF:%.*]] = sched.alloc "fsdp.root.gathered"
// LAST:       [[LF:%.*]] = sched.alloc "fsdp.layers.0.gathered"
// LAST:       sched.loss @tiny::@head mb 0
// LAST-NEXT:  [[RGF:%.*]] = sched.alloc "fsdp.root.grad.full"
// LAST:       [[LGF:%.*]] = sched.alloc "fsdp.layers.0.grad.full"
// LAST-NOT:   sched.reduce_scatter
// LAST-NOT:   sched.alloc "fsdp.{{.*}}.grad.full"
// LAST-NOT:   sched.free [[LF]]
// LAST:       sched.backward @tiny::@layers.0 mb 1
// LAST-NEXT:  sched.free [[LF]]
// LAST-NEXT:  [[SL:%.*]] = sched.reduce_scatter [[LGF]] into [[LG]] group shard reduce avg accumulate
// LAST-NEXT:  sched.free
// LAST-NEXT:  sched.backward @tiny::@embed mb 1
// LAST-NEXT:  sched.free [[RF]]
// LAST-NEXT:  sched.wait [[SL]]
// LAST-NEXT:  sched.free [[LGF]]
// LAST-NEXT:  [[SR:%.*]] = sched.reduce_scatter [[RGF]] into [[RG]] group shard reduce avg accumulate
// LAST-NEXT:  sched.free
// LAST-NEXT:  sched.wait [[SR]]
// LAST-NEXT:  sched.free [[RGF]]
// LAST-NEXT:  [[N:%.*]] = sched.alloc "grad_norm"
// LAST-NEXT:  sched.zero [[N]]
// LAST-NEXT:  sched.grad_norm [[RG]] into [[N]]
// LAST-NEXT:  sched.grad_norm [[LG]] into [[N]]
// LAST-NEXT:  [[EN:%.*]] = sched.all_reduce [[N]] group shard reduce sum
// LAST-NEXT:  sched.wait [[EN]]
// LAST-NEXT:  sched.optimizer_step @tiny::@fsdp.root {{.*}} norm([[N]]
// LAST-NEXT:  sched.optimizer_step @tiny::@fsdp.layers.0 {{.*}} norm([[N]]
// LAST-NEXT:  sched.free [[N]]
// LAST-NEXT:  }

//--- every.mlir
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
    train #plan.train<optimizer = #plan.optimizer<kind = adamw, lr = 1.0e-3>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = #plan.loss_scale<kind = none>, lr_schedule = #plan.lr_schedule<kind = constant>>
    parallel #plan.parallel<sharding = shard_grad_op, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>, grad_sync = every_micro_batch> {
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
    train #plan.train<optimizer = #plan.optimizer<kind = adamw, lr = 1.0e-3>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = #plan.loss_scale<kind = none>, lr_schedule = #plan.lr_schedule<kind = constant>>
    parallel #plan.parallel<sharding = shard_grad_op, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>, grad_sync = every_micro_batch> {
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

//--- last-clip.mlir
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
    train #plan.train<optimizer = #plan.optimizer<kind = adamw, lr = 1.0e-3>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = #plan.loss_scale<kind = none>, grad_clip = 1.0, lr_schedule = #plan.lr_schedule<kind = constant>>
    parallel #plan.parallel<sharding = shard_grad_op, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>, grad_sync = last_micro_batch> {
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
    train #plan.train<optimizer = #plan.optimizer<kind = adamw, lr = 1.0e-3>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = #plan.loss_scale<kind = none>, grad_clip = 1.0, lr_schedule = #plan.lr_schedule<kind = constant>>
    parallel #plan.parallel<sharding = shard_grad_op, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>, grad_sync = last_micro_batch> {
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
