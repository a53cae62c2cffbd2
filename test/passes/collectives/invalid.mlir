// sched-insert-collectives rejects programs that are not in sched-lower's
// single-rank form, with an error that says what is missing.
// RUN: plan-opt %s -split-input-file -verify-diagnostics -sched-insert-collectives

// The layers group's parameters are missing: the form is not sched-lower's.
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

// expected-error @+1 {{has no persistent 'fsdp.layers.0.param' buffer (role param): not the single-rank program of sched-lower}}
sched.program @tiny.step for @tiny micro_batches 1
    model #plan.model<family = llama, vocab = 16, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 8>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = #plan.device<name = "cpu", memory = 1073741824, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0e10>, host_memory = 1073741824, inter_node_bandwidth = 1.0e10>
    train #plan.train<optimizer = #plan.optimizer<kind = adamw, lr = 1.0e-3>, micro_batch = 1, seq_len = 8, grad_accum = 1, loss_scale = #plan.loss_scale<kind = none>, lr_schedule = #plan.lr_schedule<kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>> {
  %rp = sched.alloc "fsdp.root.param" role param persistent : !m132
  %rg = sched.alloc "fsdp.root.grad" role grad persistent : !m132
  %rexp_avg = sched.alloc "fsdp.root.exp_avg" role exp_avg persistent : !m132
  %rexp_avg_sq = sched.alloc "fsdp.root.exp_avg_sq" role exp_avg_sq persistent : !m132
  %lp = sched.alloc "layers.0.weights" role param persistent : !m32
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
  sched.optimizer_step @tiny::@fsdp.root params(%rp : !m132) grads(%rg : !m132) state(%rexp_avg, %rexp_avg_sq : !m132, !m132)
  sched.optimizer_step @tiny::@fsdp.layers.0 params(%lp : !m32) grads(%lg : !m32) state(%lexp_avg, %lexp_avg_sq : !m32, !m32)
}

// -----

// A gradient that is not persistent.
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
// expected-error @+1 {{'fsdp.root.grad' must be a persistent buffer of role grad}}
  %rg = sched.alloc "fsdp.root.grad" role grad : !m132
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
  sched.optimizer_step @tiny::@fsdp.root params(%rp : !m132) grads(%rg : !m132) state(%rexp_avg, %rexp_avg_sq : !m132, !m132)
  sched.optimizer_step @tiny::@fsdp.layers.0 params(%lp : !m32) grads(%lg : !m32) state(%lexp_avg, %lexp_avg_sq : !m32, !m32)
}

// -----

// The state is not padded_numel elements.
!m34 = memref<34xf32, #sched.space<device>>
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
// expected-error @+1 {{'fsdp.layers.0.param' has 34 elements, the group's padded_numel is 32}}
  %lp = sched.alloc "fsdp.layers.0.param" role param persistent : !m34
  %lg = sched.alloc "fsdp.layers.0.grad" role grad persistent : !m34
  %lexp_avg = sched.alloc "fsdp.layers.0.exp_avg" role exp_avg persistent : !m34
  %lexp_avg_sq = sched.alloc "fsdp.layers.0.exp_avg_sq" role exp_avg_sq persistent : !m34
  %embed_p = sched.view %rp[0] : !m132 to !m64
  %head_p = sched.view %rp[64] : !m132 to !m68
  %layer_p = sched.view %lp[0] : !m34 to !m32
  %embed_g = sched.view %rg[0] : !m132 to !m64
  %head_g = sched.view %rg[64] : !m132 to !m68
  %layer_g = sched.view %lg[0] : !m34 to !m32
  sched.zero %rg : !m132
  sched.zero %lg : !m34
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
  sched.optimizer_step @tiny::@fsdp.root params(%rp : !m132) grads(%rg : !m132) state(%rexp_avg, %rexp_avg_sq : !m132, !m132)
  sched.optimizer_step @tiny::@fsdp.layers.0 params(%lp : !m34) grads(%lg : !m34) state(%lexp_avg, %lexp_avg_sq : !m34, !m34)
}

// -----

// Already distributed.
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
// expected-error @+1 {{program already has collectives: sched-insert-collectives expects the single-rank program of sched-lower}}
  %e = sched.all_reduce %lg group world reduce avg : !m32
  sched.wait %e
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
  sched.optimizer_step @tiny::@fsdp.root params(%rp : !m132) grads(%rg : !m132) state(%rexp_avg, %rexp_avg_sq : !m132, !m132)
  sched.optimizer_step @tiny::@fsdp.layers.0 params(%lp : !m32) grads(%lg : !m32) state(%lexp_avg, %lexp_avg_sq : !m32, !m32)
}

// -----

// Sizes not assigned.
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
// expected-error @+1 {{has no padded_numel / shard_numel: run plan-assign-sharding first}}
  plan.group @fsdp.layers.0 units [@layers.0]
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
  sched.optimizer_step @tiny::@fsdp.root params(%rp : !m132) grads(%rg : !m132) state(%rexp_avg, %rexp_avg_sq : !m132, !m132)
  sched.optimizer_step @tiny::@fsdp.layers.0 params(%lp : !m32) grads(%lg : !m32) state(%lexp_avg, %lexp_avg_sq : !m32, !m32)
}

// -----

// A group without its optimizer step.
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

// expected-error @+1 {{has no sched.optimizer_step for group 'fsdp.layers.0'}}
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
  sched.optimizer_step @tiny::@fsdp.root params(%rp : !m132) grads(%rg : !m132) state(%rexp_avg, %rexp_avg_sq : !m132, !m132)
}

// -----

// A unit view used by something other than compute.
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
// expected-error @+1 {{uses a unit view of 'fsdp.layers.0.grad'; only forward, recompute and backward may}}
  sched.zero %layer_g : !m32
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
  sched.optimizer_step @tiny::@fsdp.root params(%rp : !m132) grads(%rg : !m132) state(%rexp_avg, %rexp_avg_sq : !m132, !m132)
  sched.optimizer_step @tiny::@fsdp.layers.0 params(%lp : !m32) grads(%lg : !m32) state(%lexp_avg, %lexp_avg_sq : !m32, !m32)
}

// -----

// Compute that reads parameters from somewhere else.
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

sched.program @tiny.step for @tiny micro_batches 2
    model #plan.model<family = llama, vocab = 16, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 8>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = #plan.device<name = "cpu", memory = 1073741824, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0e10>, host_memory = 1073741824, inter_node_bandwidth = 1.0e10>
    train #plan.train<optimizer = #plan.optimizer<kind = adamw, lr = 1.0e-3>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = #plan.loss_scale<kind = none>, lr_schedule = #plan.lr_schedule<kind = constant>>
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
  %extra = sched.alloc "extra" role param persistent : !m32
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
// expected-error @+1 {{'params' must be a unit view of a group's '.param' buffer, as sched-lower makes it}}
  sched.forward @tiny::@layers.0 mb 1 params(%extra : !m32) saves(%layer_a1 : !m16)
  %head_a1 = sched.alloc "head.saves.mb1" role activations : !m24
  sched.forward @tiny::@head mb 1 params(%head_p : !m68) saves(%head_a1 : !m24)
  sched.loss @tiny::@head mb 1 scale 0.5
  sched.backward @tiny::@head mb 1 params(%head_p : !m68) activations(%head_a1 : !m24) grads(%head_g : !m68)
  sched.free %head_a1 : !m24
  sched.backward @tiny::@layers.0 mb 1 params(%extra : !m32) activations(%layer_a1 : !m16) grads(%layer_g : !m32)
  sched.free %layer_a1 : !m16
  sched.backward @tiny::@embed mb 1 params(%embed_p : !m64) activations(%embed_a1 : !m8) grads(%embed_g : !m64)
  sched.free %embed_a1 : !m8
  sched.optimizer_step @tiny::@fsdp.root params(%rp : !m132) grads(%rg : !m132) state(%rexp_avg, %rexp_avg_sq : !m132, !m132)
  sched.optimizer_step @tiny::@fsdp.layers.0 params(%lp : !m32) grads(%lg : !m32) state(%lexp_avg, %lexp_avg_sq : !m32, !m32)
}

// -----

// A group the program never computes backward in a micro-batch.
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

// expected-error @+1 {{group 'fsdp.layers.0' has no forward or no backward in micro-batch 1}}
sched.program @tiny.step for @tiny micro_batches 2
    model #plan.model<family = llama, vocab = 16, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 8>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = #plan.device<name = "cpu", memory = 1073741824, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0e10>, host_memory = 1073741824, inter_node_bandwidth = 1.0e10>
    train #plan.train<optimizer = #plan.optimizer<kind = adamw, lr = 1.0e-3>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = #plan.loss_scale<kind = none>, lr_schedule = #plan.lr_schedule<kind = constant>>
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
  sched.free %layer_a1 : !m16
  sched.backward @tiny::@embed mb 1 params(%embed_p : !m64) activations(%embed_a1 : !m8) grads(%embed_g : !m64)
  sched.free %embed_a1 : !m8
  sched.optimizer_step @tiny::@fsdp.root params(%rp : !m132) grads(%rg : !m132) state(%rexp_avg, %rexp_avg_sq : !m132, !m132)
  sched.optimizer_step @tiny::@fsdp.layers.0 params(%lp : !m32) grads(%lg : !m32) state(%lexp_avg, %lexp_avg_sq : !m32, !m32)
}

// -----

// The norm is taken before the gradients are complete.
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
    plan.param "lm_head.weight" : tensor<16x4xf32>
  }
  plan.group @fsdp.root units [@embed, @head] {numel = 132 : i64, padded_numel = 132 : i64, shard_numel = 66 : i64}
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 32 : i64, padded_numel = 32 : i64, shard_numel = 16 : i64}
}

sched.program @tiny.step for @tiny micro_batches 1
    model #plan.model<family = llama, vocab = 16, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 8>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = #plan.device<name = "cpu", memory = 1073741824, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0e10>, host_memory = 1073741824, inter_node_bandwidth = 1.0e10>
    train #plan.train<optimizer = #plan.optimizer<kind = adamw, lr = 1.0e-3>, micro_batch = 1, seq_len = 8, grad_accum = 1, loss_scale = #plan.loss_scale<kind = none>, grad_clip = 1.0, lr_schedule = #plan.lr_schedule<kind = constant>>
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
  %layer_a0 = sched.alloc "layers.0.saves.mb0" role activations : !m16
  sched.forward @tiny::@layers.0 mb 0 params(%layer_p : !m32) saves(%layer_a0 : !m16)
  %head_a0 = sched.alloc "head.saves.mb0" role activations : !m24
  sched.forward @tiny::@head mb 0 params(%head_p : !m68) saves(%head_a0 : !m24)
  %norm = sched.alloc "grad_norm" role scalar : !m1
  sched.zero %norm : !m1
// expected-error @+1 {{must follow the last backward of the step}}
  sched.grad_norm %lg into %norm : !m32, !m1
  sched.loss @tiny::@head mb 0 scale 1.0
  sched.backward @tiny::@head mb 0 params(%head_p : !m68) activations(%head_a0 : !m24) grads(%head_g : !m68)
  sched.free %head_a0 : !m24
  sched.backward @tiny::@layers.0 mb 0 params(%layer_p : !m32) activations(%layer_a0 : !m16) grads(%layer_g : !m32)
  sched.free %layer_a0 : !m16
  sched.backward @tiny::@embed mb 0 params(%embed_p : !m64) activations(%embed_a0 : !m8) grads(%embed_g : !m64)
  sched.free %embed_a0 : !m8
  sched.grad_norm %rg into %norm : !m132, !m1
  sched.optimizer_step @tiny::@fsdp.root params(%rp : !m132) grads(%rg : !m132) state(%rexp_avg, %rexp_avg_sq : !m132, !m132) norm(%norm : !m1)
  sched.optimizer_step @tiny::@fsdp.layers.0 params(%lp : !m32) grads(%lg : !m32) state(%lexp_avg, %lexp_avg_sq : !m32, !m32) norm(%norm : !m1)
  sched.free %norm : !m1
}
