!d16 = memref<16xf32, #sched.space<device>>
!d32 = memref<32xf32, #sched.space<device>>
!d64 = memref<64xf32, #sched.space<device>>
!d96 = memref<96xf32, #sched.space<device>>

shard.grid @mesh(shape = 1x2x1x1)
plan.plan @t on @mesh
    model #plan.model<family = llama, vocab = 4, hidden = 4, intermediate = 8, layers = 3, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 1, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>, bucket = BUCKET, grad_sync = last_micro_batch> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<4x4xf32>
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.up_proj.weight" : tensor<8x4xf32>
  }
  plan.unit @layers.1 kind llama_block {
    plan.param "model.layers.1.mlp.up_proj.weight" : tensor<24x4xf32>
  }
  plan.unit @layers.2 kind llama_block {
    plan.param "model.layers.2.mlp.up_proj.weight" : tensor<8x4xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "lm_head.weight" : tensor<4x4xf32>
  }
  plan.group @fsdp.root units [@embed, @head] {numel = 32 : i64, padded_numel = 32 : i64, shard_numel = 32 : i64}
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 32 : i64, padded_numel = 32 : i64, shard_numel = 32 : i64}
  plan.group @fsdp.layers.1 units [@layers.1] {numel = 96 : i64, padded_numel = 96 : i64, shard_numel = 96 : i64}
  plan.group @fsdp.layers.2 units [@layers.2] {numel = 32 : i64, padded_numel = 32 : i64, shard_numel = 32 : i64}
}

// no_shard, fp32, two micro-batches, grad_sync = last_micro_batch, as
// sched-insert-collectives leaves it: the backward of both micro-batches adds
// into each group's persistent gradient, which is all-reduced after the group
// finishes backward in the last micro-batch and waited before the steps.
// Group sizes (f32): layers.2 32, layers.1 96, layers.0 32, root 32
// (embed 16 + head 16), reduced in that order. BUCKET is the test's bucket.
sched.program @t.step for @t micro_batches 2
    model #plan.model<family = llama, vocab = 4, hidden = 4, intermediate = 8, layers = 3, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 1, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>, bucket = BUCKET, grad_sync = last_micro_batch> {
  %p_root = sched.alloc "fsdp.root.param" role param persistent : !d32
  %g_root = sched.alloc "fsdp.root.grad" role grad persistent : !d32
  %pv_embed = sched.view %p_root[0] : !d32 to !d16
  %gv_embed = sched.view %g_root[0] : !d32 to !d16
  %pv_head = sched.view %p_root[16] : !d32 to !d16
  %gv_head = sched.view %g_root[16] : !d32 to !d16
  %p_layers0 = sched.alloc "fsdp.layers.0.param" role param persistent : !d32
  %g_layers0 = sched.alloc "fsdp.layers.0.grad" role grad persistent : !d32
  %pv_layers0 = sched.view %p_layers0[0] : !d32 to !d32
  %gv_layers0 = sched.view %g_layers0[0] : !d32 to !d32
  %p_layers1 = sched.alloc "fsdp.layers.1.param" role param persistent : !d96
  %g_layers1 = sched.alloc "fsdp.layers.1.grad" role grad persistent : !d96
  %pv_layers1 = sched.view %p_layers1[0] : !d96 to !d96
  %gv_layers1 = sched.view %g_layers1[0] : !d96 to !d96
  %p_layers2 = sched.alloc "fsdp.layers.2.param" role param persistent : !d32
  %g_layers2 = sched.alloc "fsdp.layers.2.grad" role grad persistent : !d32
  %pv_layers2 = sched.view %p_layers2[0] : !d32 to !d32
  %gv_layers2 = sched.view %g_layers2[0] : !d32 to !d32
  sched.zero %g_root : !d32
  sched.zero %g_layers0 : !d32
  sched.zero %g_layers1 : !d96
  sched.zero %g_layers2 : !d32
  // micro-batch 0
  %a_embed_0 = sched.alloc "embed.saves.mb0" role activations : !d64
  sched.forward @t::@embed mb 0 params(%pv_embed : !d16) saves(%a_embed_0 : !d64)
  %a_layers0_0 = sched.alloc "layers.0.saves.mb0" role activations : !d64
  sched.forward @t::@layers.0 mb 0 params(%pv_layers0 : !d32) saves(%a_layers0_0 : !d64)
  %a_layers1_0 = sched.alloc "layers.1.saves.mb0" role activations : !d64
  sched.forward @t::@layers.1 mb 0 params(%pv_layers1 : !d96) saves(%a_layers1_0 : !d64)
  %a_layers2_0 = sched.alloc "layers.2.saves.mb0" role activations : !d64
  sched.forward @t::@layers.2 mb 0 params(%pv_layers2 : !d32) saves(%a_layers2_0 : !d64)
  %a_head_0 = sched.alloc "head.saves.mb0" role activations : !d64
  sched.forward @t::@head mb 0 params(%pv_head : !d16) saves(%a_head_0 : !d64)
  sched.loss @t::@head mb 0 scale 5.000000e-01
  sched.backward @t::@head mb 0 params(%pv_head : !d16) activations(%a_head_0 : !d64) grads(%gv_head : !d16)
  sched.free %a_head_0 : !d64
  sched.backward @t::@layers.2 mb 0 params(%pv_layers2 : !d32) activations(%a_layers2_0 : !d64) grads(%gv_layers2 : !d32)
  sched.free %a_layers2_0 : !d64
  sched.backward @t::@layers.1 mb 0 params(%pv_layers1 : !d96) activations(%a_layers1_0 : !d64) grads(%gv_layers1 : !d96)
  sched.free %a_layers1_0 : !d64
  sched.backward @t::@layers.0 mb 0 params(%pv_layers0 : !d32) activations(%a_layers0_0 : !d64) grads(%gv_layers0 : !d32)
  sched.free %a_layers0_0 : !d64
  sched.backward @t::@embed mb 0 params(%pv_embed : !d16) activations(%a_embed_0 : !d64) grads(%gv_embed : !d16)
  sched.free %a_embed_0 : !d64
  // micro-batch 1
  %a_embed_1 = sched.alloc "embed.saves.mb1" role activations : !d64
  sched.forward @t::@embed mb 1 params(%pv_embed : !d16) saves(%a_embed_1 : !d64)
  %a_layers0_1 = sched.alloc "layers.0.saves.mb1" role activations : !d64
  sched.forward @t::@layers.0 mb 1 params(%pv_layers0 : !d32) saves(%a_layers0_1 : !d64)
  %a_layers1_1 = sched.alloc "layers.1.saves.mb1" role activations : !d64
  sched.forward @t::@layers.1 mb 1 params(%pv_layers1 : !d96) saves(%a_layers1_1 : !d64)
  %a_layers2_1 = sched.alloc "layers.2.saves.mb1" role activations : !d64
  sched.forward @t::@layers.2 mb 1 params(%pv_layers2 : !d32) saves(%a_layers2_1 : !d64)
  %a_head_1 = sched.alloc "head.saves.mb1" role activations : !d64
  sched.forward @t::@head mb 1 params(%pv_head : !d16) saves(%a_head_1 : !d64)
  sched.loss @t::@head mb 1 scale 5.000000e-01
  sched.backward @t::@head mb 1 params(%pv_head : !d16) activations(%a_head_1 : !d64) grads(%gv_head : !d16)
  sched.free %a_head_1 : !d64
  sched.backward @t::@layers.2 mb 1 params(%pv_layers2 : !d32) activations(%a_layers2_1 : !d64) grads(%gv_layers2 : !d32)
  sched.free %a_layers2_1 : !d64
  %e_layers2 = sched.all_reduce %g_layers2 group world reduce avg : !d32
  sched.backward @t::@layers.1 mb 1 params(%pv_layers1 : !d96) activations(%a_layers1_1 : !d64) grads(%gv_layers1 : !d96)
  sched.free %a_layers1_1 : !d64
  %e_layers1 = sched.all_reduce %g_layers1 group world reduce avg : !d96
  sched.backward @t::@layers.0 mb 1 params(%pv_layers0 : !d32) activations(%a_layers0_1 : !d64) grads(%gv_layers0 : !d32)
  sched.free %a_layers0_1 : !d64
  %e_layers0 = sched.all_reduce %g_layers0 group world reduce avg : !d32
  sched.backward @t::@embed mb 1 params(%pv_embed : !d16) activations(%a_embed_1 : !d64) grads(%gv_embed : !d16)
  sched.free %a_embed_1 : !d64
  %e_root = sched.all_reduce %g_root group world reduce avg : !d32
  sched.wait %e_layers2
  sched.wait %e_layers1
  sched.wait %e_layers0
  sched.wait %e_root
  sched.optimizer_step @t::@fsdp.root params(%p_root : !d32) grads(%g_root : !d32) state()
  sched.optimizer_step @t::@fsdp.layers.0 params(%p_layers0 : !d32) grads(%g_layers0 : !d32) state()
  sched.optimizer_step @t::@fsdp.layers.1 params(%p_layers1 : !d96) grads(%g_layers1 : !d96) state()
  sched.optimizer_step @t::@fsdp.layers.2 params(%p_layers2 : !d32) grads(%g_layers2 : !d32) state()
}
