// The single-rank program of a 2-block Llama under the transformer_block wrap:
// per-group state in group order (AdamW: exp_avg, exp_avg_sq), one view per
// unit at its offset in the group, gradients zeroed, forward in unit order,
// the loss after the head, backward in reverse order freeing each unit's
// activations, one step per group.
// RUN: plan-opt %s -sched-lower | FileCheck %s

shard.grid @mesh(shape = 1x1x2x1)
plan.plan @tiny on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 512, hidden = 64,
                      intermediate = 176, layers = 2, heads = 4, kv_heads = 2, max_seq_len = 256>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2,
        device = #plan.device<name = "cpu", memory = 17179869184, bf16_tflops = 1.0,
                              fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10,
                              nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>,
        host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = #plan.optimizer<kind = adamw, lr = 1.0e-3>,
                      micro_batch = 1, seq_len = 16, loss_scale = #plan.loss_scale<kind = none>,
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

// The program follows its plan.
// CHECK:      plan.group @fsdp.layers.1 {{.*}}}
// CHECK-NEXT: }
// CHECK-NEXT: sched.program @tiny.step for @tiny micro_batches 1 model {{.*}} {

// State: fp32, on the device, padded_numel elements, persistent.
// CHECK-NEXT: [[RP:%.*]] = sched.alloc "fsdp.root.param" role param persistent : memref<65600xf32, [[DEV:.*]]>
// CHECK-NEXT: [[RG:%.*]] = sched.alloc "fsdp.root.grad" role grad persistent : memref<65600xf32
// CHECK-NEXT: [[RM:%.*]] = sched.alloc "fsdp.root.exp_avg" role exp_avg persistent : memref<65600xf32
// CHECK-NEXT: [[RV:%.*]] = sched.alloc "fsdp.root.exp_avg_sq" role exp_avg_sq persistent : memref<65600xf32
// The embedding at 0, the head after the embedding's 512x64 elements.
// CHECK-NEXT: [[EP:%.*]] = sched.view [[RP]][0] : {{.*}} to memref<32768xf32
// CHECK-NEXT: [[EG:%.*]] = sched.view [[RG]][0] : {{.*}} to memref<32768xf32
// CHECK-NEXT: [[HP:%.*]] = sched.view [[RP]][32768] : {{.*}} to memref<32832xf32
// CHECK-NEXT: [[HG:%.*]] = sched.view [[RG]][32768] : {{.*}} to memref<32832xf32
// CHECK-NEXT: [[P0:%.*]] = sched.alloc "fsdp.layers.0.param" role param persistent : memref<46208xf32
// CHECK-NEXT: [[G0:%.*]] = sched.alloc "fsdp.layers.0.grad" role grad persistent
// CHECK-NEXT: [[M0:%.*]] = sched.alloc "fsdp.layers.0.exp_avg" role exp_avg persistent
// CHECK-NEXT: [[V0:%.*]] = sched.alloc "fsdp.layers.0.exp_avg_sq" role exp_avg_sq persistent
// CHECK-NEXT: [[L0P:%.*]] = sched.view [[P0]][0] : {{.*}} to memref<46208xf32
// CHECK-NEXT: [[L0G:%.*]] = sched.view [[G0]][0]
// CHECK-NEXT: [[P1:%.*]] = sched.alloc "fsdp.layers.1.param" role param persistent
// CHECK-NEXT: [[G1:%.*]] = sched.alloc "fsdp.layers.1.grad" role grad persistent
// CHECK-NEXT: [[M1:%.*]] = sched.alloc "fsdp.layers.1.exp_avg" role exp_avg persistent
// CHECK-NEXT: [[V1:%.*]] = sched.alloc "fsdp.layers.1.exp_avg_sq" role exp_avg_sq persistent
// CHECK-NEXT: [[L1P:%.*]] = sched.view [[P1]][0]
// CHECK-NEXT: [[L1G:%.*]] = sched.view [[G1]][0]

// CHECK-NEXT: sched.zero [[RG]]
// CHECK-NEXT: sched.zero [[G0]]
// CHECK-NEXT: sched.zero [[G1]]

// Forward. Activations (docs/sched.md, T = 16 tokens): embedding T,
// Bytes (docs/sched.md): embedding T wh + 64 = 16 * 256 + 64, its output;
// llama_block T(n_in + n + 4wh + 4wI + wh) + 4H b ceil32(s) + 19 * 64 =
// 16 * 5384 + 512 + 1216 (the logsumexp of 16 queries padded to 32),
// llama_head T(n_in + 4V) + 4 + 5 * 64 = 16 * 2564 + 324 (fp32: w = 4, a
// quarter as many elements).
// CHECK-NEXT: [[AE:%.*]] = sched.alloc "embed.saves.mb0" role activations : memref<1040xf32, [[DEV]]>
// CHECK-NEXT: sched.forward @tiny::@embed mb 0 params([[EP]] : {{.*}}) saves([[AE]] :
// CHECK-NEXT: [[A0:%.*]] = sched.alloc "layers.0.saves.mb0" role activations : memref<21968xf32
// CHECK-NEXT: sched.forward @tiny::@layers.0 mb 0 params([[L0P]] : {{.*}}) saves([[A0]] :
// CHECK-NEXT: [[A1:%.*]] = sched.alloc "layers.1.saves.mb0" role activations : memref<21968xf32
// CHECK-NEXT: sched.forward @tiny::@layers.1 mb 0 params([[L1P]] : {{.*}}) saves([[A1]] :
// CHECK-NEXT: [[AH:%.*]] = sched.alloc "head.saves.mb0" role activations : memref<10337xf32
// CHECK-NEXT: sched.forward @tiny::@head mb 0 params([[HP]] : {{.*}}) saves([[AH]] :
// CHECK-NEXT: sched.loss @tiny::@head mb 0 scale 1.0{{0*}}e+00

// Backward in reverse, each unit's gradients into its view of the group's.
// CHECK-NEXT: sched.backward @tiny::@head mb 0 params([[HP]] : {{.*}}) activations([[AH]] : {{.*}}) grads([[HG]] :
// CHECK-NEXT: sched.free [[AH]]
// CHECK-NEXT: sched.backward @tiny::@layers.1 mb 0 params([[L1P]] : {{.*}}) activations([[A1]] : {{.*}}) grads([[L1G]] :
// CHECK-NEXT: sched.free [[A1]]
// CHECK-NEXT: sched.backward @tiny::@layers.0 mb 0 params([[L0P]] : {{.*}}) activations([[A0]] : {{.*}}) grads([[L0G]] :
// CHECK-NEXT: sched.free [[A0]]
// CHECK-NEXT: sched.backward @tiny::@embed mb 0 params([[EP]] : {{.*}}) activations([[AE]] : {{.*}}) grads([[EG]] :
// CHECK-NEXT: sched.free [[AE]]

// No clipping: one step per group, without a norm.
// CHECK-NEXT: sched.optimizer_step @tiny::@fsdp.root params([[RP]] : {{.*}}) grads([[RG]] : {{.*}}) state([[RM]], [[RV]] : {{[^)]*}}){{$}}
// CHECK-NEXT: sched.optimizer_step @tiny::@fsdp.layers.0 params([[P0]] : {{.*}}) grads([[G0]] : {{.*}}) state([[M0]], [[V0]] : {{[^)]*}}){{$}}
// CHECK-NEXT: sched.optimizer_step @tiny::@fsdp.layers.1 params([[P1]] : {{.*}}) grads([[G1]] : {{.*}}) state([[M1]], [[V1]] : {{[^)]*}}){{$}}
// CHECK-NEXT: }
// CHECK-NEXT: }
