// Full activation checkpointing: a block's forward saves only its input
// (T*h = 16*64 elements); before its backward the activations are allocated
// again and recomputed from that input, and both are freed after the
// backward. The embedding and the head are not checkpointed; the head keeps
// its input itself (the last block, checkpointed, kept no copy of its
// output): 1040 more elements than without checkpointing (10337).
// sched-lower alone saves everything (LOWER); sched-activation-checkpointing
// rewrites that program.
// RUN: plan-opt %s -sched-lower | FileCheck %s --check-prefix=LOWER
// RUN: plan-opt %s -sched-lower -sched-activation-checkpointing | FileCheck %s
// RUN: plan-opt %s -sched-lower -sched-activation-checkpointing -sched-verify-schedule -o /dev/null

// LOWER:     sched.alloc "layers.0.saves.mb0" role activations : memref<21968xf32
// LOWER:     sched.alloc "layers.1.saves.mb0" role activations : memref<21968xf32
// LOWER:     sched.alloc "head.saves.mb0" role activations : memref<10337xf32
// LOWER-NOT: sched.recompute

shard.grid @mesh(shape = 1x1x2x1)
plan.plan @ckpt on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 512, hidden = 64,
                      intermediate = 176, layers = 2, heads = 4, kv_heads = 2, max_seq_len = 256>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2,
        device = #plan.device<name = "cpu", memory = 17179869184, bf16_tflops = 1.0,
                              fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10,
                              nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>,
        host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = #plan.optimizer<kind = adamw, lr = 1.0e-3>,
                      micro_batch = 1, seq_len = 16, activation_checkpointing = full,
                      loss_scale = #plan.loss_scale<kind = none>,
                      lr_schedule = #plan.lr_schedule<kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = #plan.wrap<kind = transformer_block>,
                            offload = #plan.offload<>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<512x64xf32>
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.self_attn.q_proj.weight" : tensor<64x64xf32>
    plan.param "model.layers.0.self_attn.k_proj.weight" : tensor<32x64xf32>
    plan.param "model.layers.0.self_attn.v_proj.weight" : tensor<32x64xf32>
    plan.param "model.layers.0.self_attn.o_proj.weight" : tensor<64x64xf32>
    plan.param "model.layers.0.mlp.gate_proj.weight" : tensor<176x64xf32>
    plan.param "model.layers.0.mlp.up_proj.weight" : tensor<176x64xf32>
    plan.param "model.layers.0.mlp.down_proj.weight" : tensor<64x176xf32>
    plan.param "model.layers.0.input_layernorm.weight" : tensor<64xf32>
    plan.param "model.layers.0.post_attention_layernorm.weight" : tensor<64xf32>
  }
  plan.unit @layers.1 kind llama_block {
    plan.param "model.layers.1.self_attn.q_proj.weight" : tensor<64x64xf32>
    plan.param "model.layers.1.self_attn.k_proj.weight" : tensor<32x64xf32>
    plan.param "model.layers.1.self_attn.v_proj.weight" : tensor<32x64xf32>
    plan.param "model.layers.1.self_attn.o_proj.weight" : tensor<64x64xf32>
    plan.param "model.layers.1.mlp.gate_proj.weight" : tensor<176x64xf32>
    plan.param "model.layers.1.mlp.up_proj.weight" : tensor<176x64xf32>
    plan.param "model.layers.1.mlp.down_proj.weight" : tensor<64x176xf32>
    plan.param "model.layers.1.input_layernorm.weight" : tensor<64xf32>
    plan.param "model.layers.1.post_attention_layernorm.weight" : tensor<64xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<64xf32>
    plan.param "lm_head.weight" : tensor<512x64xf32>
  }
  plan.group @fsdp.root units [@embed, @head] {numel = 65600 : i64, padded_numel = 65600 : i64, shard_numel = 32800 : i64}
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 46208 : i64, padded_numel = 46208 : i64, shard_numel = 23104 : i64}
  plan.group @fsdp.layers.1 units [@layers.1] {numel = 46208 : i64, padded_numel = 46208 : i64, shard_numel = 23104 : i64}
}

// CHECK-LABEL: sched.program @ckpt.step for @ckpt micro_batches 1 model {{.*}} {
// CHECK:       [[EP:%.*]] = sched.view {{.*}}[0] : {{.*}} to memref<32768xf32
// CHECK:       [[HP:%.*]] = sched.view {{.*}}[32768] : {{.*}} to memref<32832xf32
// CHECK:       sched.alloc "fsdp.layers.0.exp_avg_sq"
// CHECK-NEXT:  [[L0P:%.*]] = sched.view
// CHECK-NEXT:  [[L0G:%.*]] = sched.view
// CHECK:       sched.alloc "fsdp.layers.1.exp_avg_sq"
// CHECK-NEXT:  [[L1P:%.*]] = sched.view
// CHECK-NEXT:  [[L1G:%.*]] = sched.view
// CHECK:       sched.zero

// CHECK:       [[AE:%.*]] = sched.alloc "embed.saves.mb0" role activations : memref<1040xf32
// CHECK-NEXT:  sched.forward @ckpt::@embed mb 0 params([[EP]] : {{.*}}) saves([[AE]] :
// CHECK-NEXT:  [[IN0:%.*]] = sched.alloc "layers.0.input.mb0" role activations : memref<1024xf32
// CHECK-NEXT:  sched.forward @ckpt::@layers.0 mb 0 params([[L0P]] : {{.*}}) saves([[IN0]] :
// CHECK-NEXT:  [[IN1:%.*]] = sched.alloc "layers.1.input.mb0" role activations : memref<1024xf32
// CHECK-NEXT:  sched.forward @ckpt::@layers.1 mb 0 params([[L1P]] : {{.*}}) saves([[IN1]] :
// CHECK-NEXT:  [[AH:%.*]] = sched.alloc "head.saves.mb0" role activations : memref<11377xf32
// CHECK-NEXT:  sched.forward @ckpt::@head mb 0 params([[HP]] : {{.*}}) saves([[AH]] :
// CHECK-NEXT:  sched.loss @ckpt::@head mb 0

// CHECK-NEXT:  sched.backward @ckpt::@head mb 0 params([[HP]] : {{.*}}) activations([[AH]] :
// CHECK-NEXT:  sched.free [[AH]]
// CHECK-NEXT:  [[A1:%.*]] = sched.alloc "layers.1.saves.mb0" role activations : memref<21968xf32
// CHECK-NEXT:  sched.recompute @ckpt::@layers.1 mb 0 params([[L1P]] : {{.*}}) from([[IN1]] : {{.*}}) saves([[A1]] :
// CHECK-NEXT:  sched.backward @ckpt::@layers.1 mb 0 params([[L1P]] : {{.*}}) activations([[A1]] : {{.*}}) grads([[L1G]] :
// CHECK-NEXT:  sched.free [[A1]]
// CHECK-NEXT:  sched.free [[IN1]]
// CHECK-NEXT:  [[A0:%.*]] = sched.alloc "layers.0.saves.mb0" role activations : memref<21968xf32
// CHECK-NEXT:  sched.recompute @ckpt::@layers.0 mb 0 params([[L0P]] : {{.*}}) from([[IN0]] : {{.*}}) saves([[A0]] :
// CHECK-NEXT:  sched.backward @ckpt::@layers.0 mb 0 params([[L0P]] : {{.*}}) activations([[A0]] : {{.*}}) grads([[L0G]] :
// CHECK-NEXT:  sched.free [[A0]]
// CHECK-NEXT:  sched.free [[IN0]]
// CHECK-NEXT:  sched.backward @ckpt::@embed mb 0 params([[EP]] : {{.*}}) activations([[AE]] :
// CHECK-NEXT:  sched.free [[AE]]
// CHECK-NEXT:  sched.optimizer_step @ckpt::@fsdp.root
// CHECK-NOT:   sched.recompute
