// A plan that already has units is left alone, so expanding twice is the same
// as expanding once.
// RUN: plan-opt %s --plan-expand-presets | FileCheck %s
// RUN: plan-opt %examples/tiny_llama_cpu.plan --plan-expand-presets > %t.once.mlir
// RUN: plan-opt %examples/tiny_llama_cpu.plan --plan-expand-presets --plan-expand-presets > %t.twice.mlir
// RUN: diff %t.once.mlir %t.twice.mlir

// CHECK:      plan.unit @embed kind embedding {
// CHECK-NEXT:   plan.param "model.embed_tokens.weight" : tensor<512x64xf32>
// CHECK-NEXT: }
// CHECK-NEXT: plan.unit @head kind llama_head {
// CHECK-NEXT:   plan.param "lm_head.weight" : tensor<512x64xf32> tied_to "model.embed_tokens.weight"
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NOT: plan.unit

shard.grid @mesh(shape = 1x1x2x1)
plan.plan @hand_written on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 512, hidden = 64, intermediate = 176, layers = 2, heads = 4, kv_heads = 2, max_seq_len = 256>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 0.5, fp16_tflops = 0.5, fp32_tflops = 0.5, hbm_bandwidth = 5.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0e10>, host_memory = 17179869184, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = adamw, lr = 0.001>, micro_batch = 4, seq_len = 128, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<512x64xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "lm_head.weight" : tensor<512x64xf32> tied_to "model.embed_tokens.weight"
  }
}
