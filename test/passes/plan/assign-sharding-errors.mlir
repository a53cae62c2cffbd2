// plan-assign-sharding needs groups.
// RUN: plan-opt %s -verify-diagnostics --plan-assign-sharding

// expected-error @+2 {{plan 'ungrouped' has no groups to shard; run plan-wrap-units first}}
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @ungrouped on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 512, hidden = 64, intermediate = 176, layers = 2, heads = 4, kv_heads = 2, max_seq_len = 256>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 0.5, fp16_tflops = 0.5, fp32_tflops = 0.5, hbm_bandwidth = 5.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0e10>, host_memory = 17179869184, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = adamw, lr = 0.001>, micro_batch = 4, seq_len = 128, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @embed kind embedding {
    plan.param "embed.weight" : tensor<40xf32>
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "layers.0.weight" : tensor<100xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "norm.weight" : tensor<8xf32>
    plan.param "lm_head.weight" : tensor<40xf32>
  }
}
