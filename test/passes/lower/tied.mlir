// GPT-2's lm_head is tied to wte: stored once, in the embedding unit, so the
// head's params view holds only ln_f (128 elements); its forward and backward
// get the embedding unit's parameters as `tied` and its backward that unit's
// gradients as `tied_grads`, wherever the embedding's group is.
// RUN: plan-opt %s -split-input-file -sched-lower | FileCheck %s

shard.grid @mesh(shape = 1x1x2x1)
plan.plan @gpt2 on @mesh
    model #plan.model<family = gpt2, preset = "gpt2_tiny", vocab = 512, hidden = 64, intermediate = 256,
                      layers = 2, heads = 4, kv_heads = 4, max_seq_len = 256, tie_embeddings = true>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2,
        device = #plan.device<name = "cpu", memory = 17179869184, bf16_tflops = 1.0,
                              fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10,
                              nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>,
        host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = #plan.optimizer<kind = adamw, lr = 1.0e-3>,
                      micro_batch = 1, seq_len = 16,
                      loss_scale = #plan.loss_scale<kind = none>,
                      lr_schedule = #plan.lr_schedule<kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = #plan.wrap<kind = transformer_block>,
                            offload = #plan.offload<>> {
  plan.unit @embed kind embedding {
    plan.param "transformer.wte.weight" : tensor<512x64xf32>
    plan.param "transformer.wpe.weight" : tensor<256x64xf32>
  }
  plan.unit @layers.0 kind gpt2_block {
    plan.param "transformer.h.0.ln_1.weight" : tensor<64xf32>
    plan.param "transformer.h.0.ln_1.bias" : tensor<64xf32>
    plan.param "transformer.h.0.attn.c_attn.weight" : tensor<64x192xf32>
    plan.param "transformer.h.0.attn.c_attn.bias" : tensor<192xf32>
    plan.param "transformer.h.0.attn.c_proj.weight" : tensor<64x64xf32>
    plan.param "transformer.h.0.attn.c_proj.bias" : tensor<64xf32>
    plan.param "transformer.h.0.ln_2.weight" : tensor<64xf32>
    plan.param "transformer.h.0.ln_2.bias" : tensor<64xf32>
    plan.param "transformer.h.0.mlp.c_fc.weight" : tensor<64x256xf32>
    plan.param "transformer.h.0.mlp.c_fc.bias" : tensor<256xf32>
    plan.param "transformer.h.0.mlp.c_proj.weight" : tensor<256x64xf32>
    plan.param "transformer.h.0.mlp.c_proj.bias" : tensor<64xf32>
  }
  plan.unit @layers.1 kind gpt2_block {
    plan.param "transformer.h.1.ln_1.weight" : tensor<64xf32>
    plan.param "transformer.h.1.ln_1.bias" : tensor<64xf32>
    plan.param "transformer.h.1.attn.c_attn.weight" : tensor<64x192xf32>
    plan.param "transformer.h.1.attn.c_attn.bias" : tensor<192xf32>
    plan.param "transformer.h.1.attn.c_proj.weight" : tensor<64x64xf32>
    plan.param "transformer.h.1.attn.c_proj.bias" : tensor<64xf32>
    plan.param "transformer.h.1.ln_2.weight" : tensor<64xf32>
    plan.param "transformer.h.1.ln_2.bias" : tensor<64xf32>
    plan.param "transformer.h.1.mlp.c_fc.weight" : tensor<64x256xf32>
    plan.param "transformer.h.1.mlp.c_fc.bias" : tensor<256xf32>
    plan.param "transformer.h.1.mlp.c_proj.weight" : tensor<256x64xf32>
    plan.param "transformer.h.1.mlp.c_proj.bias" : tensor<64xf32>
  }
  plan.unit @head kind gpt2_head {
    plan.param "transformer.ln_f.weight" : tensor<64xf32>
    plan.param "transformer.ln_f.bias" : tensor<64xf32>
    plan.param "lm_head.weight" : tensor<512x64xf32> tied_to "transformer.wte.weight"
  }
  plan.group @fsdp.root units [@embed, @head] {numel = 49280 : i64, padded_numel = 49280 : i64, shard_numel = 24640 : i64}
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 49984 : i64, padded_numel = 49984 : i64, shard_numel = 24992 : i64}
  plan.group @fsdp.layers.1 units [@layers.1] {numel = 49984 : i64, padded_numel = 49984 : i64, shard_numel = 24992 : i64}
}

// wte + wpe = 512*64 + 256*64 elements, then ln_f's weight and bias.
// CHECK-LABEL: sched.program @gpt2.step for @gpt2 micro_batches 1 model {{.*}} {
// CHECK-NEXT:  [[RP:%.*]] = sched.alloc "fsdp.root.param" role param persistent : memref<49280xf32
// CHECK-NEXT:  [[RG:%.*]] = sched.alloc "fsdp.root.grad" role grad persistent : memref<49280xf32
// CHECK-NEXT:  sched.alloc "fsdp.root.exp_avg"
// CHECK-NEXT:  sched.alloc "fsdp.root.exp_avg_sq"
// CHECK-NEXT:  [[EP:%.*]] = sched.view [[RP]][0] : {{.*}} to memref<49152xf32
// CHECK-NEXT:  [[EG:%.*]] = sched.view [[RG]][0] : {{.*}} to memref<49152xf32
// CHECK-NEXT:  [[HP:%.*]] = sched.view [[RP]][49152] : {{.*}} to memref<128xf32
// CHECK-NEXT:  [[HG:%.*]] = sched.view [[RG]][49152] : {{.*}} to memref<128xf32

// Activations, bytes (fp32, w = 4; a quarter as many elements): embedding
// T wh + 8s + 2 * 64 = 4352 (its output, the position ids), gpt2_block
// T(w(8h + 2I) + 16) + 4H b ceil32(s) + 15 * 64 = 16 * 4112 + 512 + 960,
// gpt2_head T(wh + 8 + 4V) + 4 + 5 * 64 = 16 * 2312 + 324.
// CHECK:       [[AE:%.*]] = sched.alloc "embed.saves.mb0" role activations : memref<1088xf32
// CHECK-NEXT:  sched.forward @gpt2::@embed mb 0 params([[EP]] : {{.*}}) saves([[AE]] :
// CHECK-NEXT:  sched.alloc "layers.0.saves.mb0" role activations : memref<16816xf32
// CHECK-NEXT:  sched.forward @gpt2::@layers.0 mb 0 params
// CHECK-NOT:   tied
// CHECK:       [[AH:%.*]] = sched.alloc "head.saves.mb0" role activations : memref<9329xf32
// CHECK-NEXT:  sched.forward @gpt2::@head mb 0 params([[HP]] : memref<128xf32, {{.*}}) tied([[EP]] : memref<49152xf32, {{.*}}) saves([[AH]] :
// CHECK-NEXT:  sched.loss @gpt2::@head mb 0
// CHECK-NEXT:  sched.backward @gpt2::@head mb 0 params([[HP]] : {{.*}}) tied([[EP]] : {{.*}}) activations([[AH]] : {{.*}}) grads([[HG]] : {{.*}}) tied_grads([[EG]] : memref<49152xf32, {{[^)]*}}){{$}}
// CHECK-NEXT:  sched.free [[AH]]
// CHECK-NOT:   tied
// CHECK:       sched.backward @gpt2::@embed mb 0 params([[EP]] : {{.*}}) activations([[AE]] : {{.*}}) grads([[EG]] : {{[^)]*}}){{$}}

// -----

// A grouping that puts the head alone: the tied views are still the
// embedding unit's, in the other group's buffers.
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @apart on @mesh
    model #plan.model<family = gpt2, preset = "gpt2_tiny", vocab = 512, hidden = 64, intermediate = 256,
                      layers = 2, heads = 4, kv_heads = 4, max_seq_len = 256, tie_embeddings = true>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2,
        device = #plan.device<name = "cpu", memory = 17179869184, bf16_tflops = 1.0,
                              fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10,
                              nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>,
        host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = #plan.optimizer<kind = adamw, lr = 1.0e-3>,
                      micro_batch = 1, seq_len = 16,
                      loss_scale = #plan.loss_scale<kind = none>,
                      lr_schedule = #plan.lr_schedule<kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = #plan.wrap<kind = transformer_block>,
                            offload = #plan.offload<>> {
  plan.unit @embed kind embedding {
    plan.param "transformer.wte.weight" : tensor<512x64xf32>
    plan.param "transformer.wpe.weight" : tensor<256x64xf32>
  }
  plan.unit @layers.0 kind gpt2_block {
    plan.param "transformer.h.0.ln_1.weight" : tensor<64xf32>
    plan.param "transformer.h.0.ln_1.bias" : tensor<64xf32>
    plan.param "transformer.h.0.attn.c_attn.weight" : tensor<64x192xf32>
    plan.param "transformer.h.0.attn.c_attn.bias" : tensor<192xf32>
    plan.param "transformer.h.0.attn.c_proj.weight" : tensor<64x64xf32>
    plan.param "transformer.h.0.attn.c_proj.bias" : tensor<64xf32>
    plan.param "transformer.h.0.ln_2.weight" : tensor<64xf32>
    plan.param "transformer.h.0.ln_2.bias" : tensor<64xf32>
    plan.param "transformer.h.0.mlp.c_fc.weight" : tensor<64x256xf32>
    plan.param "transformer.h.0.mlp.c_fc.bias" : tensor<256xf32>
    plan.param "transformer.h.0.mlp.c_proj.weight" : tensor<256x64xf32>
    plan.param "transformer.h.0.mlp.c_proj.bias" : tensor<64xf32>
  }
  plan.unit @layers.1 kind gpt2_block {
    plan.param "transformer.h.1.ln_1.weight" : tensor<64xf32>
    plan.param "transformer.h.1.ln_1.bias" : tensor<64xf32>
    plan.param "transformer.h.1.attn.c_attn.weight" : tensor<64x192xf32>
    plan.param "transformer.h.1.attn.c_attn.bias" : tensor<192xf32>
    plan.param "transformer.h.1.attn.c_proj.weight" : tensor<64x64xf32>
    plan.param "transformer.h.1.attn.c_proj.bias" : tensor<64xf32>
    plan.param "transformer.h.1.ln_2.weight" : tensor<64xf32>
    plan.param "transformer.h.1.ln_2.bias" : tensor<64xf32>
    plan.param "transformer.h.1.mlp.c_fc.weight" : tensor<64x256xf32>
    plan.param "transformer.h.1.mlp.c_fc.bias" : tensor<256xf32>
    plan.param "transformer.h.1.mlp.c_proj.weight" : tensor<256x64xf32>
    plan.param "transformer.h.1.mlp.c_proj.bias" : tensor<64xf32>
  }
  plan.unit @head kind gpt2_head {
    plan.param "transformer.ln_f.weight" : tensor<64xf32>
    plan.param "transformer.ln_f.bias" : tensor<64xf32>
    plan.param "lm_head.weight" : tensor<512x64xf32> tied_to "transformer.wte.weight"
  }
  plan.group @fsdp.embed units [@embed] {numel = 49152 : i64, padded_numel = 49152 : i64, shard_numel = 24576 : i64}
  plan.group @fsdp.layers units [@layers.0, @layers.1] {numel = 99968 : i64, padded_numel = 99968 : i64, shard_numel = 49984 : i64}
  plan.group @fsdp.head units [@head] {numel = 128 : i64, padded_numel = 128 : i64, shard_numel = 64 : i64}
}

// CHECK-LABEL: sched.program @apart.step for @apart micro_batches 1 model {{.*}} {
// CHECK-NEXT:  [[EMBP:%.*]] = sched.alloc "fsdp.embed.param"
// CHECK-NEXT:  [[EMBG:%.*]] = sched.alloc "fsdp.embed.grad"
// CHECK:       [[EP:%.*]] = sched.view [[EMBP]][0]
// CHECK-NEXT:  [[EG:%.*]] = sched.view [[EMBG]][0]
// CHECK-NEXT:  [[LP:%.*]] = sched.alloc "fsdp.layers.param" role param persistent : memref<99968xf32
// CHECK-NEXT:  [[LG:%.*]] = sched.alloc "fsdp.layers.grad"
// CHECK:       sched.view [[LP]][0] : {{.*}} to memref<49984xf32
// CHECK-NEXT:  sched.view [[LG]][0] : {{.*}} to memref<49984xf32
// CHECK-NEXT:  sched.view [[LP]][49984] : {{.*}} to memref<49984xf32
// CHECK-NEXT:  sched.view [[LG]][49984] : {{.*}} to memref<49984xf32
// CHECK-NEXT:  [[HEADP:%.*]] = sched.alloc "fsdp.head.param"
// CHECK-NEXT:  [[HEADG:%.*]] = sched.alloc "fsdp.head.grad"
// CHECK:       [[HP:%.*]] = sched.view [[HEADP]][0]
// CHECK-NEXT:  [[HG:%.*]] = sched.view [[HEADG]][0]
// CHECK:       sched.forward @apart::@head mb 0 params([[HP]] : {{.*}}) tied([[EP]] :
// CHECK:       sched.backward @apart::@head mb 0 params([[HP]] : {{.*}}) tied([[EP]] : {{.*}}) grads([[HG]] : {{.*}}) tied_grads([[EG]] :
