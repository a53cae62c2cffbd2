!dev16 = memref<16xf32, #sched.space<device>>
!dev32 = memref<32xf32, #sched.space<device>>
!dev64 = memref<64xf32, #sched.space<device>>

shard.grid @mesh(shape = 1x1x2x1)
plan.plan @t on @mesh
    model #plan.model<family = llama, vocab = 8, hidden = 4, intermediate = 8, layers = 3, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = SHARDING, wrap = <kind = transformer_block>, offload = <>PREFETCH> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<8x4xf32>
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.up_proj.weight" : tensor<8x4xf32>
  }
  plan.unit @layers.1 kind llama_block {
    plan.param "model.layers.1.mlp.up_proj.weight" : tensor<8x4xf32>
  }
  plan.unit @layers.2 kind llama_block {
    plan.param "model.layers.2.mlp.up_proj.weight" : tensor<8x4xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "lm_head.weight" : tensor<8x4xf32>
  }
  plan.group @fsdp.root units [@embed, @head] {numel = 64 : i64, padded_numel = 64 : i64, shard_numel = 32 : i64}
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 32 : i64, padded_numel = 32 : i64, shard_numel = 16 : i64}
  plan.group @fsdp.layers.1 units [@layers.1] {numel = 32 : i64, padded_numel = 32 : i64, shard_numel = 16 : i64}
  plan.group @fsdp.layers.2 units [@layers.2] {numel = 32 : i64, padded_numel = 32 : i64, shard_numel = 16 : i64}
}

// full_shard, fp32, one micro-batch: the schedule sched-insert-collectives
// produces, every gather right before its span and waited right before the
// span's first compute op. PREFETCH is replaced by the test's settings.
sched.program @t.step for @t micro_batches 1
    model #plan.model<family = llama, vocab = 8, hidden = 4, intermediate = 8, layers = 3, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = SHARDING, wrap = <kind = transformer_block>, offload = <>PREFETCH> {
  %rp = sched.alloc "fsdp.root.param" role param persistent : !dev32
  %rg = sched.alloc "fsdp.root.grad" role grad persistent : !dev32
  %p0 = sched.alloc "fsdp.layers.0.param" role param persistent : !dev16
  %g0 = sched.alloc "fsdp.layers.0.grad" role grad persistent : !dev16
  %p1 = sched.alloc "fsdp.layers.1.param" role param persistent : !dev16
  %g1 = sched.alloc "fsdp.layers.1.grad" role grad persistent : !dev16
  %p2 = sched.alloc "fsdp.layers.2.param" role param persistent : !dev16
  %g2 = sched.alloc "fsdp.layers.2.grad" role grad persistent : !dev16
  sched.zero %rg : !dev32
  sched.zero %g0 : !dev16
  sched.zero %g1 : !dev16
  sched.zero %g2 : !dev16

  // forward
  %dr = sched.alloc "fsdp.root.gathered" role gathered : !dev64
  %er = sched.all_gather %rp into %dr group shard : !dev32, !dev64
  %ve = sched.view %dr[0] : !dev64 to !dev32
  %vh = sched.view %dr[32] : !dev64 to !dev32
  %ae = sched.alloc "embed.saves.mb0" role activations : !dev64
  sched.wait %er
  sched.forward @t::@embed mb 0 params(%ve : !dev32) saves(%ae : !dev64)
  %d0 = sched.alloc "fsdp.layers.0.gathered" role gathered : !dev32
  %e0 = sched.all_gather %p0 into %d0 group shard : !dev16, !dev32
  %a0 = sched.alloc "layers.0.saves.mb0" role activations : !dev64
  sched.wait %e0
  sched.forward @t::@layers.0 mb 0 params(%d0 : !dev32) saves(%a0 : !dev64)
  sched.free %d0 : !dev32
  %d1 = sched.alloc "fsdp.layers.1.gathered" role gathered : !dev32
  %e1 = sched.all_gather %p1 into %d1 group shard : !dev16, !dev32
  %a1 = sched.alloc "layers.1.saves.mb0" role activations : !dev64
  sched.wait %e1
  sched.forward @t::@layers.1 mb 0 params(%d1 : !dev32) saves(%a1 : !dev64)
  sched.free %d1 : !dev32
  %d2 = sched.alloc "fsdp.layers.2.gathered" role gathered : !dev32
  %e2 = sched.all_gather %p2 into %d2 group shard : !dev16, !dev32
  %a2 = sched.alloc "layers.2.saves.mb0" role activations : !dev64
  sched.wait %e2
  sched.forward @t::@layers.2 mb 0 params(%d2 : !dev32) saves(%a2 : !dev64)
  sched.free %d2 : !dev32
  %ah = sched.alloc "head.saves.mb0" role activations : !dev64
  sched.forward @t::@head mb 0 params(%vh : !dev32) saves(%ah : !dev64)
  sched.free %dr : !dev64
  sched.loss @t::@head mb 0 scale 1.0

  // backward
  %br = sched.alloc "fsdp.root.gathered" role gathered : !dev64
  %fr = sched.all_gather %rp into %br group shard : !dev32, !dev64
  %bve = sched.view %br[0] : !dev64 to !dev32
  %bvh = sched.view %br[32] : !dev64 to !dev32
  %gr = sched.alloc "fsdp.root.grad.full" role unsharded_grad : !dev64
  sched.zero %gr : !dev64
  %gve = sched.view %gr[0] : !dev64 to !dev32
  %gvh = sched.view %gr[32] : !dev64 to !dev32
  sched.wait %fr
  sched.backward @t::@head mb 0 params(%bvh : !dev32) activations(%ah : !dev64) grads(%gvh : !dev32)
  sched.free %ah : !dev64
  %b2 = sched.alloc "fsdp.layers.2.gathered" role gathered : !dev32
  %f2 = sched.all_gather %p2 into %b2 group shard : !dev16, !dev32
  %gf2 = sched.alloc "fsdp.layers.2.grad.full" role unsharded_grad : !dev32
  sched.zero %gf2 : !dev32
  sched.wait %f2
  sched.backward @t::@layers.2 mb 0 params(%b2 : !dev32) activations(%a2 : !dev64) grads(%gf2 : !dev32)
  sched.free %a2 : !dev64
  sched.free %b2 : !dev32
  %r2 = sched.reduce_scatter %gf2 into %g2 group shard reduce avg accumulate : !dev32, !dev16
  %b1 = sched.alloc "fsdp.layers.1.gathered" role gathered : !dev32
  %f1 = sched.all_gather %p1 into %b1 group shard : !dev16, !dev32
  %gf1 = sched.alloc "fsdp.layers.1.grad.full" role unsharded_grad : !dev32
  sched.zero %gf1 : !dev32
  sched.wait %f1
  sched.backward @t::@layers.1 mb 0 params(%b1 : !dev32) activations(%a1 : !dev64) grads(%gf1 : !dev32)
  sched.free %a1 : !dev64
  sched.free %b1 : !dev32
  %r1 = sched.reduce_scatter %gf1 into %g1 group shard reduce avg accumulate : !dev32, !dev16
  %b0 = sched.alloc "fsdp.layers.0.gathered" role gathered : !dev32
  %f0 = sched.all_gather %p0 into %b0 group shard : !dev16, !dev32
  %gf0 = sched.alloc "fsdp.layers.0.grad.full" role unsharded_grad : !dev32
  sched.zero %gf0 : !dev32
  sched.wait %f0
  sched.backward @t::@layers.0 mb 0 params(%b0 : !dev32) activations(%a0 : !dev64) grads(%gf0 : !dev32)
  sched.free %a0 : !dev64
  sched.free %b0 : !dev32
  %r0 = sched.reduce_scatter %gf0 into %g0 group shard reduce avg accumulate : !dev32, !dev16
  sched.backward @t::@embed mb 0 params(%bve : !dev32) activations(%ae : !dev64) grads(%gve : !dev32)
  sched.free %ae : !dev64
  sched.free %br : !dev64
  %rr = sched.reduce_scatter %gr into %rg group shard reduce avg accumulate : !dev64, !dev32

  // optimizer
  sched.wait %r2
  sched.free %gf2 : !dev32
  sched.wait %r1
  sched.free %gf1 : !dev32
  sched.wait %r0
  sched.free %gf0 : !dev32
  sched.wait %rr
  sched.free %gr : !dev64
  sched.optimizer_step @t::@fsdp.root params(%rp : !dev32) grads(%rg : !dev32) state()
  sched.optimizer_step @t::@fsdp.layers.0 params(%p0 : !dev16) grads(%g0 : !dev16) state()
  sched.optimizer_step @t::@fsdp.layers.1 params(%p1 : !dev16) grads(%g1 : !dev16) state()
  sched.optimizer_step @t::@fsdp.layers.2 params(%p2 : !dev16) grads(%g2 : !dev16) state()
}
