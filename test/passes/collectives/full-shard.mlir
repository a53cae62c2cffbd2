// sched-insert-collectives, full_shard (ZeRO-3): the state is sharded; each
// group's parameters are all-gathered before, and freed after, every forward
// and every backward span; each backward span adds into a transient full
// gradient that is reduce-scattered (accumulating) into the persistent shard.
// Inputs: the single-rank program sched-lower makes for a 3-unit model in two
// groups (root = embed + head, and layers.0) on a 1x2 mesh.
//
// RUN: split-file %s %t
// RUN: plan-opt %t/tied-clip.mlir -sched-insert-collectives | FileCheck %s --check-prefix=ONE
// RUN: plan-opt %t/every.mlir -sched-insert-collectives | FileCheck %s --check-prefix=EVERY
// RUN: plan-opt %t/every.mlir -sched-insert-collectives | grep -c sched.all_gather | FileCheck %s --check-prefix=EVERY-GATHERS
// RUN: plan-opt %t/last.mlir -sched-insert-collectives | FileCheck %s --check-prefix=LAST
// RUN: plan-opt %t/checkpoint.mlir -sched-insert-collectives | FileCheck %s --check-prefix=CKPT

// One micro-batch, GPT-2-like tied head, clipping. The state is Sg elements.
// ONE-LABEL: sched.program @tiny.step
// ONE-NEXT:  [[RP:%.*]] = sched.alloc "fsdp.root.param" role param persistent : memref<34xf32
// ONE-NEXT:  [[RG:%.*]] = sched.alloc "fsdp.root.grad" role grad persistent : memref<34xf32
// ONE-NEXT:  [[RM:%.*]] = sched.alloc "fsdp.root.exp_avg" role exp_avg persistent : memref<34xf32
// ONE-NEXT:  [[RV:%.*]] = sched.alloc "fsdp.root.exp_avg_sq" role exp_avg_sq persistent : memref<34xf32
// ONE-NEXT:  [[LP:%.*]] = sched.alloc "fsdp.layers.0.param" role param persistent : memref<16xf32
// ONE-NEXT:  [[LG:%.*]] = sched.alloc "fsdp.layers.0.grad" role grad persistent : memref<16xf32
// ONE-NEXT:  [[LM:%.*]] = sched.alloc "fsdp.layers.0.exp_avg" role exp_avg persistent : memref<16xf32
// ONE-NEXT:  [[LV:%.*]] = sched.alloc "fsdp.layers.0.exp_avg_sq" role exp_avg_sq persistent : memref<16xf32
// The unit views of the persistent buffers are gone.
// ONE-NOT:   sched.view
// ONE-NEXT:  sched.zero [[RG]]
// ONE-NEXT:  sched.zero [[LG]]
//
// Root forward: from the embedding's forward to the head's.
// ONE-NEXT:  [[EA:%.*]] = sched.alloc "embed.saves.mb0"
// ONE-NEXT:  [[RF:%.*]] = sched.alloc "fsdp.root.gathered" role gathered : memref<68xf32
// ONE-NEXT:  [[E1:%.*]] = sched.all_gather [[RP]] into [[RF]] group shard : memref<34xf32, {{.*}}>, memref<68xf32
// ONE-NEXT:  [[FE:%.*]] = sched.view [[RF]][0] : {{.*}} to memref<64xf32
// ONE-NEXT:  [[FH:%.*]] = sched.view [[RF]][64] : {{.*}} to memref<4xf32
// ONE-NEXT:  sched.wait [[E1]]
// ONE-NEXT:  sched.forward @tiny::@embed mb 0 params([[FE]] : {{.*}}) saves([[EA]]
// ONE-NEXT:  [[LA:%.*]] = sched.alloc "layers.0.saves.mb0"
// ONE-NEXT:  [[LF:%.*]] = sched.alloc "fsdp.layers.0.gathered" role gathered : memref<32xf32
// ONE-NEXT:  [[E2:%.*]] = sched.all_gather [[LP]] into [[LF]] group shard
// ONE-NEXT:  [[FL:%.*]] = sched.view [[LF]][0]
// ONE-NEXT:  sched.wait [[E2]]
// ONE-NEXT:  sched.forward @tiny::@layers.0 mb 0 params([[FL]] : {{.*}}) saves([[LA]]
// ONE-NEXT:  sched.free [[LF]]
// ONE-NEXT:  [[HA:%.*]] = sched.alloc "head.saves.mb0"
// The tied embedding comes from the root group's gathered buffer.
// ONE-NEXT:  sched.forward @tiny::@head mb 0 params([[FH]] : {{.*}}) tied([[FE]] : {{.*}}) saves([[HA]]
// ONE-NEXT:  sched.free [[RF]]
// ONE-NEXT:  sched.loss @tiny::@head mb 0
//
// Root backward: from the head's backward to the embedding's, gathered again.
// ONE-NEXT:  [[RGF:%.*]] = sched.alloc "fsdp.root.grad.full" role unsharded_grad : memref<68xf32
// ONE-NEXT:  sched.zero [[RGF]]
// ONE-NEXT:  [[GH:%.*]] = sched.view [[RGF]][64]
// ONE-NEXT:  [[GE:%.*]] = sched.view [[RGF]][0]
// ONE-NEXT:  [[RB:%.*]] = sched.alloc "fsdp.root.gathered" role gathered : memref<68xf32
// ONE-NEXT:  [[E3:%.*]] = sched.all_gather [[RP]] into [[RB]] group shard
// ONE-NEXT:  [[BH:%.*]] = sched.view [[RB]][64]
// ONE-NEXT:  [[BE:%.*]] = sched.view [[RB]][0]
// ONE-NEXT:  sched.wait [[E3]]
// ONE-NEXT:  sched.backward @tiny::@head mb 0 params([[BH]] : {{.*}}) tied([[BE]] : {{.*}}) activations([[HA]] : {{.*}}) grads([[GH]] : {{.*}}) tied_grads([[GE]] :
// ONE-NEXT:  sched.free [[HA]]
// ONE-NEXT:  [[LGF:%.*]] = sched.alloc "fsdp.layers.0.grad.full" role unsharded_grad : memref<32xf32
// ONE-NEXT:  sched.zero [[LGF]]
// ONE-NEXT:  [[GL:%.*]] = sched.view [[LGF]][0]
// ONE-NEXT:  [[LB:%.*]] = sched.alloc "fsdp.layers.0.gathered"
// ONE-NEXT:  [[E4:%.*]] = sched.all_gather [[LP]] into [[LB]] group shard
// ONE-NEXT:  [[BL:%.*]] = sched.view [[LB]][0]
// ONE-NEXT:  sched.wait [[E4]]
// ONE-NEXT:  sched.backward @tiny::@layers.0 mb 0 params([[BL]] : {{.*}}) activations([[LA]] : {{.*}}) grads([[GL]] :
// ONE-NEXT:  sched.free [[LB]]
// ONE-NEXT:  [[E5:%.*]] = sched.reduce_scatter [[LGF]] into [[LG]] group shard reduce avg accumulate : memref<32xf32, {{.*}}>, memref<16xf32
// ONE-NEXT:  sched.free [[LA]]
// ONE-NEXT:  sched.backward @tiny::@embed mb 0 params([[BE]] : {{.*}}) activations([[EA]] : {{.*}}) grads([[GE]] :
// ONE-NEXT:  sched.free [[RB]]
// A reduction completes, and its full gradient is freed, before the next one
// is issued: one unsharded gradient in flight at a time.
// ONE-NEXT:  sched.wait [[E5]]
// ONE-NEXT:  sched.free [[LGF]]
// ONE-NEXT:  [[E6:%.*]] = sched.reduce_scatter [[RGF]] into [[RG]] group shard reduce avg accumulate : memref<68xf32, {{.*}}>, memref<34xf32
// ONE-NEXT:  sched.free [[EA]]
// ONE-NEXT:  sched.wait [[E6]]
// ONE-NEXT:  sched.free [[RGF]]
// Each rank's norm covers its shards; the sum over the shard group is global.
// ONE-NEXT:  [[N:%.*]] = sched.alloc "grad_norm" role scalar
// ONE-NEXT:  sched.zero [[N]]
// ONE-NEXT:  sched.grad_norm [[RG]] into [[N]] : memref<34xf32
// ONE-NEXT:  sched.grad_norm [[LG]] into [[N]] : memref<16xf32
// ONE-NEXT:  [[E7:%.*]] = sched.all_reduce [[N]] group shard reduce sum
// ONE-NEXT:  sched.wait [[E7]]
// ONE-NEXT:  sched.optimizer_step @tiny::@fsdp.root params([[RP]] : {{.*}}) grads([[RG]] : {{.*}}) state([[RM]], [[RV]] : {{.*}}) norm([[N]]
// ONE-NEXT:  sched.optimizer_step @tiny::@fsdp.layers.0 params([[LP]] : {{.*}}) grads([[LG]] : {{.*}}) state([[LM]], [[LV]] : {{.*}}) norm([[N]]
// ONE-NEXT:  sched.free [[N]]
// ONE-NEXT:  }

// Two micro-batches, grad_sync = every_micro_batch: every micro-batch gathers
// per span and reduce-scatters its own full gradient, completed before the
// next micro-batch starts.
// EVERY-LABEL: sched.program @tiny.step for @tiny micro_batches 2
// EVERY:       [[RP:%.*]] = sched.alloc "fsdp.root.param" role param persistent : memref<66xf32
// EVERY:       [[RG:%.*]] = sched.alloc "fsdp.root.grad" role grad persistent : memref<66xf32
// EVERY:       [[LP:%.*]] = sched.alloc "fsdp.layers.0.param" role param persistent : memref<16xf32
// EVERY:       [[LG:%.*]] = sched.alloc "fsdp.layers.0.grad" role grad persistent : memref<16xf32
// EVERY:       [[F0:%.*]] = sched.alloc "fsdp.root.gathered"
// EVERY-NEXT:  [[E0:%.*]] = sched.all_gather [[RP]] into [[F0]] group shard
// EVERY:       sched.wait [[E0]]
// EVERY-NEXT:  sched.forward @tiny::@embed mb 0
// EVERY:       sched.forward @tiny::@head mb 0
// EVERY-NEXT:  sched.free [[F0]]
// EVERY:       sched.loss @tiny::@head mb 0
// EVERY:       [[RGF0:%.*]] = sched.alloc "fsdp.root.grad.full" role unsharded_grad : memref<132xf32
// EVERY:       sched.backward @tiny::@layers.0 mb 0
// EVERY:       [[L0:%.*]] = sched.reduce_scatter {{%.*}} into [[LG]] group shard reduce avg accumulate
// EVERY:       sched.backward @tiny::@embed mb 0
// EVERY-NEXT:  sched.free
// EVERY-NEXT:  sched.wait [[L0]]
// EVERY-NEXT:  sched.free
// EVERY-NEXT:  [[R0:%.*]] = sched.reduce_scatter [[RGF0]] into [[RG]] group shard reduce avg accumulate
// EVERY-NEXT:  sched.free
// EVERY-NEXT:  sched.wait [[R0]]
// EVERY-NEXT:  sched.free [[RGF0]]
// EVERY-NEXT:  sched.alloc "embed.saves.mb1"
// EVERY-NEXT:  [[F1:%.*]] = sched.alloc "fsdp.root.gathered"
// EVERY-NEXT:  [[E1:%.*]] = sched.all_gather [[RP]] into [[F1]] group shard
// EVERY:       sched.wait [[E1]]
// EVERY-NEXT:  sched.forward @tiny::@embed mb 1
// EVERY:       sched.loss @tiny::@head mb 1
// EVERY:       [[RGF1:%.*]] = sched.alloc "fsdp.root.grad.full"
// EVERY:       [[L1:%.*]] = sched.reduce_scatter {{%.*}} into [[LG]] group shard reduce avg accumulate
// EVERY:       sched.backward @tiny::@embed mb 1
// EVERY:       sched.wait [[L1]]
// EVERY:       [[R1:%.*]] = sched.reduce_scatter [[RGF1]] into [[RG]] group shard reduce avg accumulate
// EVERY:       sched.wait [[R1]]
// EVERY-NEXT:  sched.free [[RGF1]]
// EVERY-NEXT:  sched.optimizer_step @tiny::@fsdp.root params([[RP]] : {{.*}}) grads([[RG]] :
// EVERY-NEXT:  sched.optimizer_step @tiny::@fsdp.layers.0 params([[LP]] : {{.*}}) grads([[LG]] :
// EVERY-NOT:   sched.all_reduce
// EVERY:       }
// Two spans per group per micro-batch: eight gathers in all.
// EVERY-GATHERS: {{^}}8{{$}}

// grad_sync = last_micro_batch: gathers stay per span, but each group's full
// gradient lives from its first backward to its last and is reduce-scattered
// once.
// LAST-LABEL: sched.program @tiny.step for @tiny micro_batches 2
// LAST:       [[RG:%.*]] = sched.alloc "fsdp.root.grad" role grad persistent
// LAST:       [[LG:%.*]] = sched.alloc "fsdp.layers.0.grad" role grad persistent
// LAST:       sched.loss @tiny::@head mb 0
// LAST-NEXT:  [[RGF:%.*]] = sched.alloc "fsdp.root.grad.full"
// LAST-NEXT:  sched.zero [[RGF]]
// LAST-NEXT:  [[GH:%.*]] = sched.view [[RGF]][64]
// LAST-NEXT:  [[GE:%.*]] = sched.view [[RGF]][0]
// LAST:       sched.backward @tiny::@head mb 0 {{.*}} grads([[GH]]
// LAST:       [[LGF:%.*]] = sched.alloc "fsdp.layers.0.grad.full"
// LAST:       sched.backward @tiny::@layers.0 mb 0 {{.*}} grads([[GL:%.*]] :
// LAST:       sched.backward @tiny::@embed mb 0 {{.*}} grads([[GE]]
// LAST-NOT:   sched.reduce_scatter
// LAST-NOT:   sched.alloc "fsdp.{{.*}}.grad.full"
// LAST:       sched.backward @tiny::@head mb 1 {{.*}} grads([[GH]]
// LAST:       sched.backward @tiny::@layers.0 mb 1 {{.*}} grads([[GL]]
// LAST-NEXT:  sched.free
// LAST-NEXT:  [[L:%.*]] = sched.reduce_scatter [[LGF]] into [[LG]] group shard reduce avg accumulate
// LAST:       sched.backward @tiny::@embed mb 1 {{.*}} grads([[GE]]
// LAST-NEXT:  sched.free
// LAST-NEXT:  sched.wait [[L]]
// LAST-NEXT:  sched.free [[LGF]]
// LAST-NEXT:  [[R:%.*]] = sched.reduce_scatter [[RGF]] into [[RG]] group shard reduce avg accumulate
// LAST-NEXT:  sched.free
// LAST-NEXT:  sched.wait [[R]]
// LAST-NEXT:  sched.free [[RGF]]
// LAST-NEXT:  sched.optimizer_step @tiny::@fsdp.root
// LAST-NEXT:  sched.optimizer_step @tiny::@fsdp.layers.0
// LAST-NEXT:  }

// Activation checkpointing: the block's backward span starts at its
// recompute, so the gather and the full gradient precede the recompute.
// CKPT-LABEL: sched.program @tiny.step
// CKPT:       sched.loss @tiny::@head mb 0
// CKPT:       [[S:%.*]] = sched.alloc "layers.0.saves.mb0"
// CKPT-NEXT:  [[LGF:%.*]] = sched.alloc "fsdp.layers.0.grad.full"
// CKPT-NEXT:  sched.zero [[LGF]]
// CKPT-NEXT:  [[GL:%.*]] = sched.view [[LGF]][0]
// CKPT-NEXT:  [[LB:%.*]] = sched.alloc "fsdp.layers.0.gathered"
// CKPT-NEXT:  [[E:%.*]] = sched.all_gather {{%.*}} into [[LB]] group shard
// CKPT-NEXT:  [[BL:%.*]] = sched.view [[LB]][0]
// CKPT-NEXT:  sched.wait [[E]]
// CKPT-NEXT:  sched.recompute @tiny::@layers.0 mb 0 params([[BL]] : {{.*}}) from({{.*}}) saves([[S]]
// CKPT-NEXT:  sched.backward @tiny::@layers.0 mb 0 params([[BL]] : {{.*}}) activations([[S]] : {{.*}}) grads([[GL]] :
// CKPT-NEXT:  sched.free [[LB]]
// CKPT-NEXT:  sched.reduce_scatter [[LGF]] into

//--- tied-clip.mlir
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
    train #plan.train<optimizer = #plan.optimizer<kind = adamw, lr = 1.0e-3>, micro_batch = 1, seq_len = 8, grad_accum = 1, loss_scale = #plan.loss_scale<kind = none>, grad_clip = 1.0, lr_schedule = #plan.lr_schedule<kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>> {
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

sched.program @tiny.step for @tiny micro_batches 1
    model #plan.model<family = llama, vocab = 16, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 8, tie_embeddings = true>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = #plan.device<name = "cpu", memory = 1073741824, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0e10>, host_memory = 1073741824, inter_node_bandwidth = 1.0e10>
    train #plan.train<optimizer = #plan.optimizer<kind = adamw, lr = 1.0e-3>, micro_batch = 1, seq_len = 8, grad_accum = 1, loss_scale = #plan.loss_scale<kind = none>, grad_clip = 1.0, lr_schedule = #plan.lr_schedule<kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>> {
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
  sched.loss @tiny::@head mb 0 scale 1.0
  sched.backward @tiny::@head mb 0 params(%head_p : !m4) tied(%embed_p : !m64) activations(%head_a0 : !m24) grads(%head_g : !m4) tied_grads(%embed_g : !m64)
  sched.free %head_a0 : !m24
  sched.backward @tiny::@layers.0 mb 0 params(%layer_p : !m32) activations(%layer_a0 : !m16) grads(%layer_g : !m32)
  sched.free %layer_a0 : !m16
  sched.backward @tiny::@embed mb 0 params(%embed_p : !m64) activations(%embed_a0 : !m8) grads(%embed_g : !m64)
  sched.free %embed_a0 : !m8
  %norm = sched.alloc "grad_norm" role scalar : !m1
  sched.zero %norm : !m1
  sched.grad_norm %rg into %norm : !m68, !m1
  sched.grad_norm %lg into %norm : !m32, !m1
  sched.optimizer_step @tiny::@fsdp.root params(%rp : !m68) grads(%rg : !m68) state(%rexp_avg, %rexp_avg_sq : !m68, !m68) norm(%norm : !m1)
  sched.optimizer_step @tiny::@fsdp.layers.0 params(%lp : !m32) grads(%lg : !m32) state(%lexp_avg, %lexp_avg_sq : !m32, !m32) norm(%norm : !m1)
  sched.free %norm : !m1
}

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
    parallel #plan.parallel<sharding = full_shard, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>, grad_sync = every_micro_batch> {
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
    parallel #plan.parallel<sharding = full_shard, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>, grad_sync = every_micro_batch> {
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

//--- last.mlir
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
    parallel #plan.parallel<sharding = full_shard, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>, grad_sync = last_micro_batch> {
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
    parallel #plan.parallel<sharding = full_shard, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>, grad_sync = last_micro_batch> {
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

//--- checkpoint.mlir
!m1 = memref<1xf32, #sched.space<device>>
!m4 = memref<4xf32, #sched.space<device>>
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
    train #plan.train<optimizer = #plan.optimizer<kind = adamw, lr = 1.0e-3>, micro_batch = 1, seq_len = 8, grad_accum = 1, loss_scale = #plan.loss_scale<kind = none>, lr_schedule = #plan.lr_schedule<kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>> {
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

sched.program @tiny.step for @tiny micro_batches 1
    model #plan.model<family = llama, vocab = 16, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 8>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = #plan.device<name = "cpu", memory = 1073741824, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0e10>, host_memory = 1073741824, inter_node_bandwidth = 1.0e10>
    train #plan.train<optimizer = #plan.optimizer<kind = adamw, lr = 1.0e-3>, micro_batch = 1, seq_len = 8, grad_accum = 1, loss_scale = #plan.loss_scale<kind = none>, lr_schedule = #plan.lr_schedule<kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>> {
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
  %layer_a0 = sched.alloc "layers.0.input.mb0" role activations : !m4
  sched.forward @tiny::@layers.0 mb 0 params(%layer_p : !m32) saves(%layer_a0 : !m4)
  %head_a0 = sched.alloc "head.saves.mb0" role activations : !m24
  sched.forward @tiny::@head mb 0 params(%head_p : !m68) saves(%head_a0 : !m24)
  sched.loss @tiny::@head mb 0 scale 1.0
  sched.backward @tiny::@head mb 0 params(%head_p : !m68) activations(%head_a0 : !m24) grads(%head_g : !m68)
  sched.free %head_a0 : !m24
  %layer_s0 = sched.alloc "layers.0.saves.mb0" role activations : !m16
  sched.recompute @tiny::@layers.0 mb 0 params(%layer_p : !m32) from(%layer_a0 : !m4) saves(%layer_s0 : !m16)
  sched.backward @tiny::@layers.0 mb 0 params(%layer_p : !m32) activations(%layer_s0 : !m16) grads(%layer_g : !m32)
  sched.free %layer_s0 : !m16
  sched.free %layer_a0 : !m4
  sched.backward @tiny::@embed mb 0 params(%embed_p : !m64) activations(%embed_a0 : !m8) grads(%embed_g : !m64)
  sched.free %embed_a0 : !m8
  sched.optimizer_step @tiny::@fsdp.root params(%rp : !m132) grads(%rg : !m132) state(%rexp_avg, %rexp_avg_sq : !m132, !m132)
  sched.optimizer_step @tiny::@fsdp.layers.0 params(%lp : !m32) grads(%lg : !m32) state(%lexp_avg, %lexp_avg_sq : !m32, !m32)
}
