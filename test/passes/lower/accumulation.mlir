// Gradient accumulation over 2 micro-batches and clipping: the gradients are
// zeroed once, each micro-batch runs forward and backward with its own
// activations and seeds backward with 1/2 of its loss; after the last one the
// squared norms of every group's gradients add into one scalar that every
// step reads, and which is freed after the steps.
// RUN: plan-opt %s -sched-lower | FileCheck %s

shard.grid @mesh(shape = 1x1x2x1)
plan.plan @accum on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 512, hidden = 64,
                      intermediate = 176, layers = 1, heads = 4, kv_heads = 2, max_seq_len = 256>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2,
        device = #plan.device<name = "cpu", memory = 17179869184, bf16_tflops = 1.0,
                              fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10,
                              nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>,
        host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = #plan.optimizer<kind = adamw, lr = 1.0e-3>,
                      micro_batch = 1, seq_len = 16, grad_accum = 2, grad_clip = 1.0,
                      loss_scale = #plan.loss_scale<kind = none>,
                      lr_schedule = #plan.lr_schedule<kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = #plan.wrap<kind = transformer_block>,
                            offload = #plan.offload<>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<512x64xf32>
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.self_attn.q_proj.weight" : tensor<64x64xf32>
    plan.param "model.layers.0.input_layernorm.weight" : tensor<64xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<64xf32>
    plan.param "lm_head.weight" : tensor<512x64xf32>
  }
  plan.group @fsdp.root units [@embed, @head] {numel = 65600 : i64, padded_numel = 65600 : i64, shard_numel = 32800 : i64}
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 4160 : i64, padded_numel = 4160 : i64, shard_numel = 2080 : i64}
}

// CHECK-LABEL: sched.program @accum.step for @accum micro_batches 2 model {{.*}} {
// CHECK-NEXT:  [[RP:%.*]] = sched.alloc "fsdp.root.param"
// CHECK-NEXT:  [[RG:%.*]] = sched.alloc "fsdp.root.grad"
// CHECK-NEXT:  [[RM:%.*]] = sched.alloc "fsdp.root.exp_avg"
// CHECK-NEXT:  [[RV:%.*]] = sched.alloc "fsdp.root.exp_avg_sq"
// CHECK-NEXT:  [[EP:%.*]] = sched.view [[RP]][0]
// CHECK-NEXT:  [[EG:%.*]] = sched.view [[RG]][0]
// CHECK-NEXT:  [[HP:%.*]] = sched.view [[RP]][32768]
// CHECK-NEXT:  [[HG:%.*]] = sched.view [[RG]][32768]
// CHECK-NEXT:  [[LP:%.*]] = sched.alloc "fsdp.layers.0.param"
// CHECK-NEXT:  [[LG:%.*]] = sched.alloc "fsdp.layers.0.grad"
// CHECK-NEXT:  [[LM:%.*]] = sched.alloc "fsdp.layers.0.exp_avg"
// CHECK-NEXT:  [[LV:%.*]] = sched.alloc "fsdp.layers.0.exp_avg_sq"
// CHECK-NEXT:  [[L0P:%.*]] = sched.view [[LP]][0]
// CHECK-NEXT:  [[L0G:%.*]] = sched.view [[LG]][0]
// CHECK-NEXT:  sched.zero [[RG]]
// CHECK-NEXT:  sched.zero [[LG]]

// Micro-batch 0.
// CHECK-NEXT:  [[AE0:%.*]] = sched.alloc "embed.saves.mb0" role activations
// CHECK-NEXT:  sched.forward @accum::@embed mb 0 params([[EP]] : {{.*}}) saves([[AE0]] :
// CHECK-NEXT:  [[AL0:%.*]] = sched.alloc "layers.0.saves.mb0" role activations
// CHECK-NEXT:  sched.forward @accum::@layers.0 mb 0 params([[L0P]] : {{.*}}) saves([[AL0]] :
// CHECK-NEXT:  [[AH0:%.*]] = sched.alloc "head.saves.mb0" role activations
// CHECK-NEXT:  sched.forward @accum::@head mb 0 params([[HP]] : {{.*}}) saves([[AH0]] :
// CHECK-NEXT:  sched.loss @accum::@head mb 0 scale 5.0{{0*}}e-01
// CHECK-NEXT:  sched.backward @accum::@head mb 0 params([[HP]] : {{.*}}) activations([[AH0]] : {{.*}}) grads([[HG]] :
// CHECK-NEXT:  sched.free [[AH0]]
// CHECK-NEXT:  sched.backward @accum::@layers.0 mb 0 params([[L0P]] : {{.*}}) activations([[AL0]] : {{.*}}) grads([[L0G]] :
// CHECK-NEXT:  sched.free [[AL0]]
// CHECK-NEXT:  sched.backward @accum::@embed mb 0 params([[EP]] : {{.*}}) activations([[AE0]] : {{.*}}) grads([[EG]] :
// CHECK-NEXT:  sched.free [[AE0]]

// Micro-batch 1: new activations, the same gradient views.
// CHECK-NEXT:  [[AE1:%.*]] = sched.alloc "embed.saves.mb1" role activations
// CHECK-NEXT:  sched.forward @accum::@embed mb 1 params([[EP]] : {{.*}}) saves([[AE1]] :
// CHECK-NEXT:  [[AL1:%.*]] = sched.alloc "layers.0.saves.mb1" role activations
// CHECK-NEXT:  sched.forward @accum::@layers.0 mb 1 params([[L0P]] : {{.*}}) saves([[AL1]] :
// CHECK-NEXT:  [[AH1:%.*]] = sched.alloc "head.saves.mb1" role activations
// CHECK-NEXT:  sched.forward @accum::@head mb 1 params([[HP]] : {{.*}}) saves([[AH1]] :
// CHECK-NEXT:  sched.loss @accum::@head mb 1 scale 5.0{{0*}}e-01
// CHECK-NEXT:  sched.backward @accum::@head mb 1 params([[HP]] : {{.*}}) activations([[AH1]] : {{.*}}) grads([[HG]] :
// CHECK-NEXT:  sched.free [[AH1]]
// CHECK-NEXT:  sched.backward @accum::@layers.0 mb 1 params([[L0P]] : {{.*}}) activations([[AL1]] : {{.*}}) grads([[L0G]] :
// CHECK-NEXT:  sched.free [[AL1]]
// CHECK-NEXT:  sched.backward @accum::@embed mb 1 params([[EP]] : {{.*}}) activations([[AE1]] : {{.*}}) grads([[EG]] :
// CHECK-NEXT:  sched.free [[AE1]]

// Clipping, then the steps.
// CHECK-NEXT:  [[N:%.*]] = sched.alloc "grad_norm" role scalar : memref<1xf32
// CHECK-NEXT:  sched.zero [[N]]
// CHECK-NEXT:  sched.grad_norm [[RG]] into [[N]]
// CHECK-NEXT:  sched.grad_norm [[LG]] into [[N]]
// CHECK-NEXT:  sched.optimizer_step @accum::@fsdp.root params([[RP]] : {{.*}}) grads([[RG]] : {{.*}}) state([[RM]], [[RV]] : {{.*}}) norm([[N]] : memref<1xf32, {{[^)]*}}){{$}}
// CHECK-NEXT:  sched.optimizer_step @accum::@fsdp.layers.0 params([[LP]] : {{.*}}) grads([[LG]] : {{.*}}) state([[LM]], [[LV]] : {{.*}}) norm([[N]] : memref<1xf32, {{[^)]*}}){{$}}
// CHECK-NEXT:  sched.free [[N]]
// CHECK-NEXT:  }
