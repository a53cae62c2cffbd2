// sched.dequantize: a unit's frozen base from how it is stored (bytes when
// part of it is NF4) into its frozen elements in a float type; and compute
// ops reading a base of bytes before it is converted.
// RUN: plan-opt %s -split-input-file -verify-diagnostics

#dev = #sched.space<device>
#host = #sched.space<host>
shard.grid @mesh(shape = 1x1x1x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16, lora = <rank = 1, alpha = 2.0, targets = ["q_proj"], base = nf4>>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 1, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<8x4xf32> frozen fp32
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.q_proj.weight" : tensor<4x4xf32> frozen nf4
    plan.param "model.layers.0.q_proj.lora_A.weight" : tensor<1x4xf32>
    plan.param "model.layers.0.q_proj.lora_B.weight" : tensor<4x1xf32>
    plan.param "model.layers.0.input_layernorm.weight" : tensor<4xf32> frozen fp32
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32> frozen fp32
    plan.param "lm_head.weight" : tensor<8x4xf32> tied_to "model.embed_tokens.weight"
  }
}
sched.program @p.step for @p micro_batches 1
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16, lora = <rank = 1, alpha = 2.0, targets = ["q_proj"], base = nf4>>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 1, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  // The valid forms: the NF4 unit's 17 + 16 bytes (q_proj 4x4 in NF4: 8
  // packed, 1 absmax index, 4 scale, 4 offset; the norm in fp32) into its
  // 20 elements; compute reads the stored bytes only before
  // sched-dequantize-base, and then the working type.
  %b = sched.alloc "b" role frozen persistent : memref<33xi8, #dev>
  %w = sched.alloc "w" role staging : memref<20xf32, #dev>
  %lp = sched.alloc "lp" role param persistent : memref<8xf32, #dev>
  %a = sched.alloc "a" role activations : memref<64xf32, #dev>
  sched.dequantize @p::@layers.0 %b into %w : memref<33xi8, #dev>, memref<20xf32, #dev>
  sched.forward @p::@layers.0 mb 0 params(%lp : memref<8xf32, #dev>) frozen(%w : memref<20xf32, #dev>) saves(%a : memref<64xf32, #dev>)
  sched.forward @p::@layers.0 mb 0 params(%lp : memref<8xf32, #dev>) frozen(%b : memref<33xi8, #dev>) saves(%a : memref<64xf32, #dev>)
  sched.free %w : memref<20xf32, #dev>
  sched.free %a : memref<64xf32, #dev>
}

// -----

#dev = #sched.space<device>
#host = #sched.space<host>
shard.grid @mesh(shape = 1x1x1x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16, lora = <rank = 1, alpha = 2.0, targets = ["q_proj"], base = nf4>>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 1, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<8x4xf32> frozen fp32
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.q_proj.weight" : tensor<4x4xf32> frozen nf4
    plan.param "model.layers.0.q_proj.lora_A.weight" : tensor<1x4xf32>
    plan.param "model.layers.0.q_proj.lora_B.weight" : tensor<4x1xf32>
    plan.param "model.layers.0.input_layernorm.weight" : tensor<4xf32> frozen fp32
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32> frozen fp32
    plan.param "lm_head.weight" : tensor<8x4xf32> tied_to "model.embed_tokens.weight"
  }
}
sched.program @p.step for @p micro_batches 1
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16, lora = <rank = 1, alpha = 2.0, targets = ["q_proj"], base = nf4>>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 1, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  %b = sched.alloc "b" role frozen persistent : memref<32xi8, #dev>
  %w = sched.alloc "w" role staging : memref<20xf32, #dev>
  // expected-error @below {{unit 'layers.0' stores 33 frozen bytes, `src` has 32}}
  sched.dequantize @p::@layers.0 %b into %w : memref<32xi8, #dev>, memref<20xf32, #dev>
}

// -----

#dev = #sched.space<device>
#host = #sched.space<host>
shard.grid @mesh(shape = 1x1x1x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16, lora = <rank = 1, alpha = 2.0, targets = ["q_proj"], base = nf4>>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 1, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<8x4xf32> frozen fp32
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.q_proj.weight" : tensor<4x4xf32> frozen nf4
    plan.param "model.layers.0.q_proj.lora_A.weight" : tensor<1x4xf32>
    plan.param "model.layers.0.q_proj.lora_B.weight" : tensor<4x1xf32>
    plan.param "model.layers.0.input_layernorm.weight" : tensor<4xf32> frozen fp32
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32> frozen fp32
    plan.param "lm_head.weight" : tensor<8x4xf32> tied_to "model.embed_tokens.weight"
  }
}
sched.program @p.step for @p micro_batches 1
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16, lora = <rank = 1, alpha = 2.0, targets = ["q_proj"], base = nf4>>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 1, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  %b = sched.alloc "b" role frozen persistent : memref<20xbf16, #dev>
  %w = sched.alloc "w" role staging : memref<20xf32, #dev>
  // expected-error @below {{unit 'layers.0' stores part of its base in NF4: `src` must hold bytes (i8)}}
  sched.dequantize @p::@layers.0 %b into %w : memref<20xbf16, #dev>, memref<20xf32, #dev>
}

// -----

#dev = #sched.space<device>
#host = #sched.space<host>
shard.grid @mesh(shape = 1x1x1x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16, lora = <rank = 1, alpha = 2.0, targets = ["q_proj"], base = nf4>>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 1, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<8x4xf32> frozen fp32
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.q_proj.weight" : tensor<4x4xf32> frozen nf4
    plan.param "model.layers.0.q_proj.lora_A.weight" : tensor<1x4xf32>
    plan.param "model.layers.0.q_proj.lora_B.weight" : tensor<4x1xf32>
    plan.param "model.layers.0.input_layernorm.weight" : tensor<4xf32> frozen fp32
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32> frozen fp32
    plan.param "lm_head.weight" : tensor<8x4xf32> tied_to "model.embed_tokens.weight"
  }
}
sched.program @p.step for @p micro_batches 1
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16, lora = <rank = 1, alpha = 2.0, targets = ["q_proj"], base = nf4>>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 1, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  %b = sched.alloc "b" role frozen persistent : memref<33xi8, #dev>
  %w = sched.alloc "w" role staging : memref<20xi8, #dev>
  // expected-error @below {{`dst` must hold floats: the frozen base in the working type}}
  sched.dequantize @p::@layers.0 %b into %w : memref<33xi8, #dev>, memref<20xi8, #dev>
}

// -----

#dev = #sched.space<device>
#host = #sched.space<host>
shard.grid @mesh(shape = 1x1x1x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16, lora = <rank = 1, alpha = 2.0, targets = ["q_proj"], base = nf4>>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 1, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<8x4xf32> frozen fp32
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.q_proj.weight" : tensor<4x4xf32> frozen nf4
    plan.param "model.layers.0.q_proj.lora_A.weight" : tensor<1x4xf32>
    plan.param "model.layers.0.q_proj.lora_B.weight" : tensor<4x1xf32>
    plan.param "model.layers.0.input_layernorm.weight" : tensor<4xf32> frozen fp32
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32> frozen fp32
    plan.param "lm_head.weight" : tensor<8x4xf32> tied_to "model.embed_tokens.weight"
  }
}
sched.program @p.step for @p micro_batches 1
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16, lora = <rank = 1, alpha = 2.0, targets = ["q_proj"], base = nf4>>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 1, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  %b = sched.alloc "b" role frozen persistent : memref<33xi8, #dev>
  %w = sched.alloc "w" role staging : memref<16xf32, #dev>
  // expected-error @below {{unit 'layers.0' has 20 frozen elements, `dst` has 16}}
  sched.dequantize @p::@layers.0 %b into %w : memref<33xi8, #dev>, memref<16xf32, #dev>
}

// -----

#dev = #sched.space<device>
#host = #sched.space<host>
shard.grid @mesh(shape = 1x1x1x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16, lora = <rank = 1, alpha = 2.0, targets = ["q_proj"], base = nf4>>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 1, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<8x4xf32> frozen fp32
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.q_proj.weight" : tensor<4x4xf32> frozen nf4
    plan.param "model.layers.0.q_proj.lora_A.weight" : tensor<1x4xf32>
    plan.param "model.layers.0.q_proj.lora_B.weight" : tensor<4x1xf32>
    plan.param "model.layers.0.input_layernorm.weight" : tensor<4xf32> frozen fp32
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32> frozen fp32
    plan.param "lm_head.weight" : tensor<8x4xf32> tied_to "model.embed_tokens.weight"
  }
}
sched.program @p.step for @p micro_batches 1
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16, lora = <rank = 1, alpha = 2.0, targets = ["q_proj"], base = nf4>>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 1, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  %b = sched.alloc "b" role frozen persistent : memref<33xi8, #host>
  %w = sched.alloc "w" role staging : memref<20xf32, #dev>
  // expected-error @below {{`src` and `dst` must be in one memory space}}
  sched.dequantize @p::@layers.0 %b into %w : memref<33xi8, #host>, memref<20xf32, #dev>
}

// -----

#dev = #sched.space<device>
#host = #sched.space<host>
shard.grid @mesh(shape = 1x1x1x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16, lora = <rank = 1, alpha = 2.0, targets = ["q_proj"], base = nf4>>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 1, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<8x4xf32> frozen fp32
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.q_proj.weight" : tensor<4x4xf32> frozen nf4
    plan.param "model.layers.0.q_proj.lora_A.weight" : tensor<1x4xf32>
    plan.param "model.layers.0.q_proj.lora_B.weight" : tensor<4x1xf32>
    plan.param "model.layers.0.input_layernorm.weight" : tensor<4xf32> frozen fp32
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32> frozen fp32
    plan.param "lm_head.weight" : tensor<8x4xf32> tied_to "model.embed_tokens.weight"
  }
}
sched.program @p.step for @p micro_batches 1
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16, lora = <rank = 1, alpha = 2.0, targets = ["q_proj"], base = nf4>>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 1, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  %b = sched.alloc "b" role frozen persistent : memref<33xi8, #dev>
  %w = sched.alloc "w" role staging : memref<33xf32, #dev>
  // expected-error @below {{works on floats; a base stored in bytes (NF4) is read by sched.dequantize}}
  sched.cast %b into %w : memref<33xi8, #dev>, memref<33xf32, #dev>
}

// -----

#dev = #sched.space<device>
#host = #sched.space<host>
shard.grid @mesh(shape = 1x1x1x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16, lora = <rank = 1, alpha = 2.0, targets = ["q_proj"], base = nf4>>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 1, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<8x4xf32> frozen fp32
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.q_proj.weight" : tensor<4x4xf32> frozen nf4
    plan.param "model.layers.0.q_proj.lora_A.weight" : tensor<1x4xf32>
    plan.param "model.layers.0.q_proj.lora_B.weight" : tensor<4x1xf32>
    plan.param "model.layers.0.input_layernorm.weight" : tensor<4xf32> frozen fp32
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32> frozen fp32
    plan.param "lm_head.weight" : tensor<8x4xf32> tied_to "model.embed_tokens.weight"
  }
}
sched.program @p.step for @p micro_batches 1
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16, lora = <rank = 1, alpha = 2.0, targets = ["q_proj"], base = nf4>>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 1, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  %b = sched.alloc "b" role frozen persistent : memref<32xi8, #dev>
  %lp = sched.alloc "lp" role param persistent : memref<8xf32, #dev>
  %a = sched.alloc "a" role activations : memref<64xf32, #dev>
  // expected-error @below {{unit 'layers.0' stores 33 frozen bytes, its frozen buffer has 32}}
  sched.forward @p::@layers.0 mb 0 params(%lp : memref<8xf32, #dev>) frozen(%b : memref<32xi8, #dev>) saves(%a : memref<64xf32, #dev>)
}
