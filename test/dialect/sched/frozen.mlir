// The compute ops of a LoRA plan: `frozen` holds exactly a unit's frozen
// elements and `params` its trainable ones, each given exactly when there
// are some; a tie to a frozen parameter reads the owner's frozen base and
// gets no gradient.
// RUN: plan-opt %s -split-input-file -verify-diagnostics

#dev = #sched.space<device>
shard.grid @mesh(shape = 1x1x1x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16, lora = <rank = 1, alpha = 2.0, targets = ["q_proj"], base = fp32>>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 1, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<8x4xf32> frozen fp32
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.q_proj.weight" : tensor<4x4xf32> frozen fp32
    plan.param "model.layers.0.q_proj.lora_A.weight" : tensor<1x4xf32>
    plan.param "model.layers.0.q_proj.lora_B.weight" : tensor<4x1xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32> frozen fp32
    plan.param "lm_head.weight" : tensor<8x4xf32> tied_to "model.embed_tokens.weight"
  }
}
sched.program @p.step for @p micro_batches 1
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16, lora = <rank = 1, alpha = 2.0, targets = ["q_proj"], base = fp32>>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 1, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  %ef = sched.alloc "ef" role frozen persistent : memref<32xf32, #dev>
  %lf = sched.alloc "lf" role frozen persistent : memref<16xf32, #dev>
  %hf = sched.alloc "hf" role frozen persistent : memref<4xf32, #dev>
  %lp = sched.alloc "lp" role param persistent : memref<8xf32, #dev>
  %lg = sched.alloc "lg" role grad persistent : memref<8xf32, #dev>
  %a = sched.alloc "a" role activations : memref<64xf32, #dev>
  // The valid forms: a frozen unit, a unit with both, a head tied to a frozen embedding.
  sched.forward @p::@embed mb 0 frozen(%ef : memref<32xf32, #dev>) saves(%a : memref<64xf32, #dev>)
  sched.forward @p::@layers.0 mb 0 params(%lp : memref<8xf32, #dev>) frozen(%lf : memref<16xf32, #dev>) saves(%a : memref<64xf32, #dev>)
  sched.backward @p::@head mb 0 tied(%ef : memref<32xf32, #dev>) frozen(%hf : memref<4xf32, #dev>) activations(%a : memref<64xf32, #dev>)
  sched.backward @p::@layers.0 mb 0 params(%lp : memref<8xf32, #dev>) frozen(%lf : memref<16xf32, #dev>) activations(%a : memref<64xf32, #dev>) grads(%lg : memref<8xf32, #dev>)
}

// -----

#dev = #sched.space<device>
shard.grid @mesh(shape = 1x1x1x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16, lora = <rank = 1, alpha = 2.0, targets = ["q_proj"], base = fp32>>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 1, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<8x4xf32> frozen fp32
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.q_proj.weight" : tensor<4x4xf32> frozen fp32
    plan.param "model.layers.0.q_proj.lora_A.weight" : tensor<1x4xf32>
    plan.param "model.layers.0.q_proj.lora_B.weight" : tensor<4x1xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32> frozen fp32
    plan.param "lm_head.weight" : tensor<8x4xf32> tied_to "model.embed_tokens.weight"
  }
}
sched.program @p.step for @p micro_batches 1
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16, lora = <rank = 1, alpha = 2.0, targets = ["q_proj"], base = fp32>>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 1, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  %ef = sched.alloc "ef" role frozen persistent : memref<32xf32, #dev>
  %lf = sched.alloc "lf" role frozen persistent : memref<16xf32, #dev>
  %hf = sched.alloc "hf" role frozen persistent : memref<4xf32, #dev>
  %lp = sched.alloc "lp" role param persistent : memref<8xf32, #dev>
  %lg = sched.alloc "lg" role grad persistent : memref<8xf32, #dev>
  %a = sched.alloc "a" role activations : memref<64xf32, #dev>
  // expected-error @below {{unit 'layers.0' stores 16 frozen elements: `frozen` is given exactly when it stores some}}
  sched.forward @p::@layers.0 mb 0 params(%lp : memref<8xf32, #dev>) saves(%a : memref<64xf32, #dev>)
}

// -----

#dev = #sched.space<device>
shard.grid @mesh(shape = 1x1x1x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16, lora = <rank = 1, alpha = 2.0, targets = ["q_proj"], base = fp32>>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 1, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<8x4xf32> frozen fp32
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.q_proj.weight" : tensor<4x4xf32> frozen fp32
    plan.param "model.layers.0.q_proj.lora_A.weight" : tensor<1x4xf32>
    plan.param "model.layers.0.q_proj.lora_B.weight" : tensor<4x1xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32> frozen fp32
    plan.param "lm_head.weight" : tensor<8x4xf32> tied_to "model.embed_tokens.weight"
  }
}
sched.program @p.step for @p micro_batches 1
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16, lora = <rank = 1, alpha = 2.0, targets = ["q_proj"], base = fp32>>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 1, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  %ef = sched.alloc "ef" role frozen persistent : memref<32xf32, #dev>
  %lf = sched.alloc "lf" role frozen persistent : memref<16xf32, #dev>
  %hf = sched.alloc "hf" role frozen persistent : memref<4xf32, #dev>
  %lp = sched.alloc "lp" role param persistent : memref<8xf32, #dev>
  %lg = sched.alloc "lg" role grad persistent : memref<8xf32, #dev>
  %a = sched.alloc "a" role activations : memref<64xf32, #dev>
  // expected-error @below {{unit 'embed' stores 0 elements that train: `params` is given exactly when it stores some}}
  sched.forward @p::@embed mb 0 params(%lp : memref<8xf32, #dev>) frozen(%ef : memref<32xf32, #dev>) saves(%a : memref<64xf32, #dev>)
}

// -----

#dev = #sched.space<device>
shard.grid @mesh(shape = 1x1x1x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16, lora = <rank = 1, alpha = 2.0, targets = ["q_proj"], base = fp32>>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 1, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<8x4xf32> frozen fp32
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.q_proj.weight" : tensor<4x4xf32> frozen fp32
    plan.param "model.layers.0.q_proj.lora_A.weight" : tensor<1x4xf32>
    plan.param "model.layers.0.q_proj.lora_B.weight" : tensor<4x1xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32> frozen fp32
    plan.param "lm_head.weight" : tensor<8x4xf32> tied_to "model.embed_tokens.weight"
  }
}
sched.program @p.step for @p micro_batches 1
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16, lora = <rank = 1, alpha = 2.0, targets = ["q_proj"], base = fp32>>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 1, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  %ef = sched.alloc "ef" role frozen persistent : memref<32xf32, #dev>
  %lf = sched.alloc "lf" role frozen persistent : memref<16xf32, #dev>
  %hf = sched.alloc "hf" role frozen persistent : memref<4xf32, #dev>
  %lp = sched.alloc "lp" role param persistent : memref<8xf32, #dev>
  %lg = sched.alloc "lg" role grad persistent : memref<8xf32, #dev>
  %a = sched.alloc "a" role activations : memref<64xf32, #dev>
  // expected-error @below {{unit 'layers.0' stores 16 frozen elements, its frozen buffer has 32}}
  sched.forward @p::@layers.0 mb 0 params(%lp : memref<8xf32, #dev>) frozen(%ef : memref<32xf32, #dev>) saves(%a : memref<64xf32, #dev>)
}

// -----

#dev = #sched.space<device>
shard.grid @mesh(shape = 1x1x1x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16, lora = <rank = 1, alpha = 2.0, targets = ["q_proj"], base = fp32>>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 1, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<8x4xf32> frozen fp32
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.q_proj.weight" : tensor<4x4xf32> frozen fp32
    plan.param "model.layers.0.q_proj.lora_A.weight" : tensor<1x4xf32>
    plan.param "model.layers.0.q_proj.lora_B.weight" : tensor<4x1xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32> frozen fp32
    plan.param "lm_head.weight" : tensor<8x4xf32> tied_to "model.embed_tokens.weight"
  }
}
sched.program @p.step for @p micro_batches 1
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16, lora = <rank = 1, alpha = 2.0, targets = ["q_proj"], base = fp32>>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 1, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  %ef = sched.alloc "ef" role frozen persistent : memref<32xf32, #dev>
  %lf = sched.alloc "lf" role frozen persistent : memref<16xf32, #dev>
  %hf = sched.alloc "hf" role frozen persistent : memref<4xf32, #dev>
  %lp = sched.alloc "lp" role param persistent : memref<8xf32, #dev>
  %lg = sched.alloc "lg" role grad persistent : memref<8xf32, #dev>
  %a = sched.alloc "a" role activations : memref<64xf32, #dev>
  %tg = sched.alloc "tg" role unsharded_grad : memref<32xf32, #dev>
  // expected-error @below {{`tied` is frozen: it gets no `tied_grads`}}
  sched.backward @p::@head mb 0 tied(%ef : memref<32xf32, #dev>) frozen(%hf : memref<4xf32, #dev>) activations(%a : memref<64xf32, #dev>) tied_grads(%tg : memref<32xf32, #dev>)
}

// -----

#dev = #sched.space<device>
shard.grid @mesh(shape = 1x1x1x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16, lora = <rank = 1, alpha = 2.0, targets = ["q_proj"], base = fp32>>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 1, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<8x4xf32> frozen fp32
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.q_proj.weight" : tensor<4x4xf32> frozen fp32
    plan.param "model.layers.0.q_proj.lora_A.weight" : tensor<1x4xf32>
    plan.param "model.layers.0.q_proj.lora_B.weight" : tensor<4x1xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32> frozen fp32
    plan.param "lm_head.weight" : tensor<8x4xf32> tied_to "model.embed_tokens.weight"
  }
}
sched.program @p.step for @p micro_batches 1
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16, lora = <rank = 1, alpha = 2.0, targets = ["q_proj"], base = fp32>>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 1, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  %ef = sched.alloc "ef" role frozen persistent : memref<32xf32, #dev>
  %lf = sched.alloc "lf" role frozen persistent : memref<16xf32, #dev>
  %hf = sched.alloc "hf" role frozen persistent : memref<4xf32, #dev>
  %lp = sched.alloc "lp" role param persistent : memref<8xf32, #dev>
  %lg = sched.alloc "lg" role grad persistent : memref<8xf32, #dev>
  %a = sched.alloc "a" role activations : memref<64xf32, #dev>
  // expected-error @below {{`grads` goes with `params`}}
  sched.backward @p::@layers.0 mb 0 params(%lp : memref<8xf32, #dev>) frozen(%lf : memref<16xf32, #dev>) activations(%a : memref<64xf32, #dev>)
}
