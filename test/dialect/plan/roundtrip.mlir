// Print -> parse -> print is identical, in the custom and the generic form.
// RUN: plan-opt %s > %t.1.mlir
// RUN: plan-opt %t.1.mlir > %t.2.mlir
// RUN: diff %t.1.mlir %t.2.mlir
// RUN: plan-opt %s -mlir-print-op-generic | plan-opt > %t.3.mlir
// RUN: diff %t.1.mlir %t.3.mlir
// RUN: FileCheck %s < %t.1.mlir

// CHECK-LABEL: shard.grid @mesh(shape = 1x1x2x1)
// CHECK-NEXT:  plan.plan @tiny on @mesh
// CHECK-NEXT:      model #plan.model<family = llama, preset = "llama_tiny", vocab = 512, hidden = 64, intermediate = 176, layers = 2, heads = 4, kv_heads = 2, max_seq_len = 256>
// CHECK-NEXT:      cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
// Defaults are elided (rope_theta, norm_eps, beta1); doubles print short and exact.
// CHECK-NEXT:      train #plan.train<optimizer = <kind = adamw, lr = 0.001, beta2 = 0.95, decay = all>, micro_batch = 2, seq_len = 128, grad_accum = 2, loss_scale = <kind = none>, grad_clip = 1.0, lr_schedule = <kind = cosine, warmup = 2, min_lr_ratio = 0.1>, seed = 7>
// CHECK-NEXT:      parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
// CHECK-NEXT:    plan.unit @embed kind embedding {
// CHECK-NEXT:      plan.param "model.embed_tokens.weight" : tensor<512x64xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    plan.unit @layers.0 kind llama_block {
// CHECK-NEXT:      plan.param "model.layers.0.self_attn.q_proj.weight" : tensor<64x64xf32>
// CHECK-NEXT:      plan.param "model.layers.0.self_attn.k_proj.weight" : tensor<32x64xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    plan.unit @head kind llama_head {
// CHECK-NEXT:      plan.param "model.norm.weight" : tensor<64xf32>
// CHECK-NEXT:      plan.param "lm_head.weight" : tensor<512x64xf32> tied_to "model.embed_tokens.weight"
// CHECK-NEXT:    }
// CHECK-NEXT:    plan.group @fsdp.root units [@embed, @head] {numel = 32832 : i64, padded_numel = 32832 : i64, shard_numel = 16416 : i64}
// CHECK-NEXT:    plan.group @fsdp.layers.0 units [@layers.0]
// CHECK-NEXT:  }

shard.grid @mesh(shape = 1x1x2x1)
plan.plan @tiny on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 512, hidden = 64,
                      intermediate = 176, layers = 2, heads = 4, kv_heads = 2,
                      max_seq_len = 256, rope_theta = 10000.0, norm_eps = 1.0e-5>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2,
        device = #plan.device<name = "cpu", memory = 17179869184, bf16_tflops = 1.0,
                              fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10,
                              nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>,
        host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = #plan.optimizer<kind = adamw, lr = 1.0e-3, beta2 = 0.95, decay = all>,
                      micro_batch = 2, seq_len = 128, grad_accum = 2,
                      loss_scale = #plan.loss_scale<kind = none>, grad_clip = 1.0,
                      lr_schedule = #plan.lr_schedule<kind = cosine, warmup = 2, min_lr_ratio = 0.1>,
                      seed = 7>
    parallel #plan.parallel<sharding = full_shard, wrap = #plan.wrap<kind = transformer_block>,
                            offload = #plan.offload<>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<512x64xf32>
  }
  plan.unit @"layers.0" kind llama_block {
    plan.param "model.layers.0.self_attn.q_proj.weight" : tensor<64x64xf32>
    plan.param "model.layers.0.self_attn.k_proj.weight" : tensor<32x64xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<64xf32>
    plan.param "lm_head.weight" : tensor<512x64xf32> tied_to "model.embed_tokens.weight"
  }
  plan.group @fsdp.root units [@embed, @head] {numel = 32832 : i64, padded_numel = 32832 : i64, shard_numel = 16416 : i64}
  plan.group @fsdp.layers.0 units [@layers.0]
}
