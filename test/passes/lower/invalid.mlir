// What sched-lower rejects: plans the plan passes have not finished, plans
// it cannot store, and plans lowered already.
// RUN: plan-opt %s -split-input-file -verify-diagnostics -sched-lower

// A plan without units.
shard.grid @mesh(shape = 1x1x2x1)
// expected-error @+1 {{plan 'empty' has no plan.unit: run plan-expand-presets first}}
plan.plan @empty on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 512, hidden = 64,
                      intermediate = 176, layers = 1, heads = 4, kv_heads = 2, max_seq_len = 256>
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
}

// -----

// Units, but no groups yet.
shard.grid @mesh(shape = 1x1x2x1)
// expected-error @+1 {{plan 'ungrouped' has no plan.group: run plan-wrap-units and plan-assign-sharding first}}
plan.plan @ungrouped on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 512, hidden = 64,
                      intermediate = 176, layers = 1, heads = 4, kv_heads = 2, max_seq_len = 256>
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
    plan.param "model.embed_tokens.weight" : tensor<512x64xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<64xf32>
    plan.param "lm_head.weight" : tensor<512x64xf32>
  }
}

// -----

// Groups without their sizes.
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @unsized on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 512, hidden = 64,
                      intermediate = 176, layers = 1, heads = 4, kv_heads = 2, max_seq_len = 256>
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
    plan.param "model.embed_tokens.weight" : tensor<512x64xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<64xf32>
    plan.param "lm_head.weight" : tensor<512x64xf32>
  }
  // expected-error @+1 {{group 'fsdp.root' has no padded_numel: run plan-assign-sharding first}}
  plan.group @fsdp.root units [@embed, @head]
}

// -----

// A unit no group stores.
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @orphan on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 512, hidden = 64,
                      intermediate = 176, layers = 1, heads = 4, kv_heads = 2, max_seq_len = 256>
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
    plan.param "model.embed_tokens.weight" : tensor<512x64xf32>
  }
  // expected-error @+1 {{unit 'layers.0' is in no plan.group: its parameters have no storage}}
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.self_attn.q_proj.weight" : tensor<64x64xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<64xf32>
    plan.param "lm_head.weight" : tensor<512x64xf32>
  }
  plan.group @fsdp.root units [@embed, @head] {numel = 65600 : i64, padded_numel = 65600 : i64, shard_numel = 32800 : i64}
}

// -----

// The loss needs a head at the end.
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @headless on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 512, hidden = 64,
                      intermediate = 176, layers = 1, heads = 4, kv_heads = 2, max_seq_len = 256>
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
    plan.param "model.embed_tokens.weight" : tensor<512x64xf32>
  }
  // expected-error @+1 {{the last unit 'layers.0' is a llama_block, not a head: the loss needs the head's logits}}
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.self_attn.q_proj.weight" : tensor<64x64xf32>
  }
  plan.group @fsdp.root units [@embed, @layers.0] {numel = 36864 : i64, padded_numel = 36864 : i64, shard_numel = 18432 : i64}
}

// -----

// A unit tied to its own parameter.
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @selftied on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 512, hidden = 64,
                      intermediate = 176, layers = 1, heads = 4, kv_heads = 2, max_seq_len = 256>
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
    plan.param "model.embed_tokens.weight" : tensor<512x64xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<64xf32>
    // expected-error @+1 {{parameter 'lm_head.weight' is tied to 'model.norm.weight' of its own unit}}
    plan.param "lm_head.weight" : tensor<64xf32> tied_to "model.norm.weight"
  }
  plan.group @fsdp.root units [@embed, @head] {numel = 32832 : i64, padded_numel = 32832 : i64, shard_numel = 16416 : i64}
}

// -----

// A tie to a parameter that is itself tied.
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @chain on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 512, hidden = 64,
                      intermediate = 176, layers = 1, heads = 4, kv_heads = 2, max_seq_len = 256>
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
    plan.param "model.embed_tokens.weight" : tensor<512x64xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "lm_head.weight" : tensor<512x64xf32> tied_to "model.embed_tokens.weight"
    // expected-error @+1 {{parameter 'lm_head.bias' is tied to 'lm_head.weight', which is itself tied: tie it to the stored parameter}}
    plan.param "lm_head.bias" : tensor<512x64xf32> tied_to "lm_head.weight"
  }
  plan.group @fsdp.root units [@embed, @head] {numel = 32768 : i64, padded_numel = 32768 : i64, shard_numel = 16384 : i64}
}

// -----

// One unit tying parameters of two units.
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @twoties on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 512, hidden = 64,
                      intermediate = 176, layers = 1, heads = 4, kv_heads = 2, max_seq_len = 256>
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
    plan.param "model.embed_tokens.weight" : tensor<512x64xf32>
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.self_attn.q_proj.weight" : tensor<64x64xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "lm_head.weight" : tensor<512x64xf32> tied_to "model.embed_tokens.weight"
    // expected-error @+1 {{unit 'head' ties parameters of two other units; a unit may tie parameters of one}}
    plan.param "lm_head.q" : tensor<64x64xf32> tied_to "model.layers.0.self_attn.q_proj.weight"
  }
  plan.group @fsdp.root units [@embed, @layers.0, @head] {numel = 36864 : i64, padded_numel = 36864 : i64, shard_numel = 18432 : i64}
}

// -----

// A plan lowered already.
shard.grid @mesh(shape = 1x1x2x1)
// expected-error @+1 {{plan 'twice' is already lowered}}
plan.plan @twice on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 512, hidden = 64,
                      intermediate = 176, layers = 1, heads = 4, kv_heads = 2, max_seq_len = 256>
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
    plan.param "model.embed_tokens.weight" : tensor<512x64xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<64xf32>
    plan.param "lm_head.weight" : tensor<512x64xf32>
  }
  plan.group @fsdp.root units [@embed, @head] {numel = 65600 : i64, padded_numel = 65600 : i64, shard_numel = 32800 : i64}
}
// expected-note @+1 {{its program}}
sched.program @twice.step for @twice micro_batches 1
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 512, hidden = 64,
                      intermediate = 176, layers = 1, heads = 4, kv_heads = 2, max_seq_len = 256>
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
}

// -----

// The program's name is taken.
shard.grid @mesh(shape = 1x1x2x1)
// expected-error @+1 {{the program of plan 'taken' would be named 'taken.step', which is taken}}
plan.plan @taken on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 512, hidden = 64,
                      intermediate = 176, layers = 1, heads = 4, kv_heads = 2, max_seq_len = 256>
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
    plan.param "model.embed_tokens.weight" : tensor<512x64xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<64xf32>
    plan.param "lm_head.weight" : tensor<512x64xf32>
  }
  plan.group @fsdp.root units [@embed, @head] {numel = 65600 : i64, padded_numel = 65600 : i64, shard_numel = 32800 : i64}
}
// expected-note @+1 {{by this symbol}}
shard.grid @taken.step(shape = 1x1x1x1)

// -----

// A tie across pipeline stages other than from the last to the first: only
// those two stages share an embedding group to add the tied gradients on.
shard.grid @mesh(shape = 3x1x1x1)
plan.plan @across on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4,
                      intermediate = 8, layers = 3, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 3,
        device = #plan.device<name = "cpu", memory = 17179869184, bf16_tflops = 1.0,
                              fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10,
                              nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>,
        host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = #plan.optimizer<kind = adamw, lr = 1.0e-3>,
                      micro_batch = 1, seq_len = 8,
                      loss_scale = #plan.loss_scale<kind = none>,
                      lr_schedule = #plan.lr_schedule<kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = #plan.wrap<kind = transformer_block>,
                            offload = #plan.offload<>, pipeline_schedule = gpipe> {
  plan.unit @embed kind embedding stage 0 {
    plan.param "model.embed_tokens.weight" : tensor<8x4xf32>
  }
  plan.unit @layers.0 kind llama_block stage 0 {
    plan.param "model.layers.0.w" : tensor<4xf32>
  }
  plan.unit @layers.1 kind llama_block stage 1 {
    plan.param "model.layers.1.w" : tensor<4xf32>
    // expected-error @+1 {{parameter 'model.layers.1.tied' of pipeline stage 1 is tied to 'model.embed_tokens.weight' of stage 0: a tie across stages must go from the last stage to the first (the head to the input embedding), whose ranks share the embedding group}}
    plan.param "model.layers.1.tied" : tensor<8x4xf32> tied_to "model.embed_tokens.weight"
  }
  plan.unit @layers.2 kind llama_block stage 2 {
    plan.param "model.layers.2.w" : tensor<4xf32>
  }
  plan.unit @head kind llama_head stage 2 {
    plan.param "model.norm.weight" : tensor<4xf32>
  }
  plan.group @fsdp.stage0.root units [@embed] {numel = 32 : i64, padded_numel = 32 : i64, shard_numel = 32 : i64}
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 4 : i64, padded_numel = 4 : i64, shard_numel = 4 : i64}
  plan.group @fsdp.layers.1 units [@layers.1] {numel = 4 : i64, padded_numel = 4 : i64, shard_numel = 4 : i64}
  plan.group @fsdp.layers.2 units [@layers.2] {numel = 4 : i64, padded_numel = 4 : i64, shard_numel = 4 : i64}
  plan.group @fsdp.stage2.root units [@head] {numel = 4 : i64, padded_numel = 4 : i64, shard_numel = 4 : i64}
}
