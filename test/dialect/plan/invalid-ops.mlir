// The op verifiers: mesh, sequence length, units and parameters.
// RUN: plan-opt %s -split-input-file -verify-diagnostics

#model = #plan.model<family = llama, vocab = 8, hidden = 8, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 64>
#device = #plan.device<name = "x", memory = 1, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0>
#cluster = #plan.cluster<nodes = 2, gpus_per_node = 4, device = #device, host_memory = 1, inter_node_bandwidth = 1.0>
#train = #plan.train<optimizer = #plan.optimizer<kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 64, loss_scale = #plan.loss_scale<kind = none>, lr_schedule = #plan.lr_schedule<kind = constant>>
#fsdp = #plan.parallel<sharding = full_shard, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>>

shard.grid @mesh(shape = 1x1x4x1)
// expected-error @below {{mesh 'mesh' has 1x1x4x1 = 4 ranks but the cluster has 8 (2 nodes x 4 gpus_per_node)}}
plan.plan @p on @mesh model #model cluster #cluster train #train parallel #fsdp {
}

// -----

// Sequence parallelism splits over the tensor axis, which must be above 1.
#model = #plan.model<family = llama, vocab = 8, hidden = 8, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 64>
#device = #plan.device<name = "x", memory = 1, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0>
#cluster = #plan.cluster<nodes = 1, gpus_per_node = 4, device = #device, host_memory = 1, inter_node_bandwidth = 1.0>
#train = #plan.train<optimizer = #plan.optimizer<kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 64, loss_scale = #plan.loss_scale<kind = none>, lr_schedule = #plan.lr_schedule<kind = constant>>
#sp = #plan.parallel<sharding = full_shard, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>, sequence_parallel = true>

shard.grid @mesh(shape = 1x1x4x1)
// expected-error @below {{sequence_parallel splits along the sequence over the tensor axis, which is 1}}
plan.plan @p on @mesh model #model cluster #cluster train #train parallel #sp {
}

// -----

// The tensor axis counts in the world size: 1 x 2 x 2 on 4 ranks.
#model = #plan.model<family = llama, vocab = 8, hidden = 8, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 64>
#device = #plan.device<name = "x", memory = 1, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0>
#cluster = #plan.cluster<nodes = 1, gpus_per_node = 4, device = #device, host_memory = 1, inter_node_bandwidth = 1.0>
#train = #plan.train<optimizer = #plan.optimizer<kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 64, loss_scale = #plan.loss_scale<kind = none>, lr_schedule = #plan.lr_schedule<kind = constant>>
#fsdp = #plan.parallel<sharding = full_shard, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>>

shard.grid @mesh(shape = 1x1x4x2)
// expected-error @below {{mesh 'mesh' has 1x1x4x2 = 8 ranks but the cluster has 4 (1 nodes x 4 gpus_per_node)}}
plan.plan @p on @mesh model #model cluster #cluster train #train parallel #fsdp {
}

// -----

#model = #plan.model<family = llama, vocab = 8, hidden = 8, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 64>
#device = #plan.device<name = "x", memory = 1, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0>
#cluster = #plan.cluster<nodes = 1, gpus_per_node = 4, device = #device, host_memory = 1, inter_node_bandwidth = 1.0>
#train = #plan.train<optimizer = #plan.optimizer<kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 64, loss_scale = #plan.loss_scale<kind = none>, lr_schedule = #plan.lr_schedule<kind = constant>>
#fsdp = #plan.parallel<sharding = full_shard, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>>

// expected-error @below {{mesh 'nowhere' does not name a shard.grid}}
plan.plan @p on @nowhere model #model cluster #cluster train #train parallel #fsdp {
}

// -----

#model = #plan.model<family = llama, vocab = 8, hidden = 8, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 64>
#device = #plan.device<name = "x", memory = 1, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0>
#cluster = #plan.cluster<nodes = 1, gpus_per_node = 4, device = #device, host_memory = 1, inter_node_bandwidth = 1.0>
#train = #plan.train<optimizer = #plan.optimizer<kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 64, loss_scale = #plan.loss_scale<kind = none>, lr_schedule = #plan.lr_schedule<kind = constant>>
#fsdp = #plan.parallel<sharding = full_shard, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>>

shard.grid @mesh(shape = 4)
// expected-error @below {{mesh 'mesh' must have 4 axes (pipeline, replicate, shard, tensor), got 1}}
plan.plan @p on @mesh model #model cluster #cluster train #train parallel #fsdp {
}

// -----

#model = #plan.model<family = llama, vocab = 8, hidden = 8, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 64>
#device = #plan.device<name = "x", memory = 1, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0>
#cluster = #plan.cluster<nodes = 1, gpus_per_node = 4, device = #device, host_memory = 1, inter_node_bandwidth = 1.0>
#train = #plan.train<optimizer = #plan.optimizer<kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 64, loss_scale = #plan.loss_scale<kind = none>, lr_schedule = #plan.lr_schedule<kind = constant>>
#ddp = #plan.parallel<sharding = no_shard, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>>

shard.grid @mesh(shape = 1x1x4x1)
// expected-error @below {{no_shard does not shard: the mesh's shard axis must be 1, got 4}}
plan.plan @p on @mesh model #model cluster #cluster train #train parallel #ddp {
}

// -----

#model = #plan.model<family = llama, vocab = 8, hidden = 8, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 64>
#device = #plan.device<name = "x", memory = 1, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0>
#cluster = #plan.cluster<nodes = 1, gpus_per_node = 4, device = #device, host_memory = 1, inter_node_bandwidth = 1.0>
#train = #plan.train<optimizer = #plan.optimizer<kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 128, loss_scale = #plan.loss_scale<kind = none>, lr_schedule = #plan.lr_schedule<kind = constant>>
#fsdp = #plan.parallel<sharding = full_shard, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>>

shard.grid @mesh(shape = 1x1x4x1)
// expected-error @below {{seq_len 128 exceeds the model's max_seq_len 64}}
plan.plan @p on @mesh model #model cluster #cluster train #train parallel #fsdp {
}

// -----

#model = #plan.model<family = llama, vocab = 8, hidden = 8, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 64>
#device = #plan.device<name = "x", memory = 1, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0>
#cluster = #plan.cluster<nodes = 1, gpus_per_node = 4, device = #device, host_memory = 1, inter_node_bandwidth = 1.0>
#train = #plan.train<optimizer = #plan.optimizer<kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 64, loss_scale = #plan.loss_scale<kind = none>, lr_schedule = #plan.lr_schedule<kind = constant>>
#hsdp = #plan.parallel<sharding = hybrid_shard, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>>

shard.grid @mesh(shape = 1x1x4x1)
// expected-error @below {{hybrid_shard needs at least 2 replica groups, the mesh has 1}}
plan.plan @p on @mesh model #model cluster #cluster train #train parallel #hsdp {
}

// -----

#model = #plan.model<family = llama, vocab = 8, hidden = 8, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 64>
#device = #plan.device<name = "x", memory = 1, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0>
#cluster = #plan.cluster<nodes = 1, gpus_per_node = 1, device = #device, host_memory = 1, inter_node_bandwidth = 1.0>
#train = #plan.train<optimizer = #plan.optimizer<kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 64, loss_scale = #plan.loss_scale<kind = none>, lr_schedule = #plan.lr_schedule<kind = constant>>
#ddp = #plan.parallel<sharding = no_shard, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>>

shard.grid @mesh(shape = 1x1x1x1)
plan.plan @p on @mesh model #model cluster #cluster train #train parallel #ddp {
  plan.unit @a kind embedding {
    plan.param "w" : tensor<8x8xf32>
  }
  plan.unit @b kind llama_head {
    // expected-error @below {{duplicate parameter name 'w'}}
    plan.param "w" : tensor<8x8xf32>
  }
}

// -----

#model = #plan.model<family = llama, vocab = 8, hidden = 8, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 64>
#device = #plan.device<name = "x", memory = 1, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0>
#cluster = #plan.cluster<nodes = 1, gpus_per_node = 2, device = #device, host_memory = 1, inter_node_bandwidth = 1.0>
#train = #plan.train<optimizer = #plan.optimizer<kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 64, loss_scale = #plan.loss_scale<kind = none>, lr_schedule = #plan.lr_schedule<kind = constant>>
#fsdp = #plan.parallel<sharding = full_shard, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>>

shard.grid @mesh(shape = 1x1x2x1)
plan.plan @p on @mesh model #model cluster #cluster train #train parallel #fsdp {
  plan.unit @a kind embedding {
    plan.param "w" : tensor<3x8xf32>
  }
  plan.unit @b kind llama_head {
    plan.param "v" : tensor<8xf32>
    plan.param "t" : tensor<3x8xf32> tied_to "w"
  }
  plan.group @g1 units [@a, @b]
  // expected-error @below {{unit 'a' is already in group 'g1'}}
  plan.group @g2 units [@a]
}

// -----

#model = #plan.model<family = llama, vocab = 8, hidden = 8, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 64>
#device = #plan.device<name = "x", memory = 1, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0>
#cluster = #plan.cluster<nodes = 1, gpus_per_node = 2, device = #device, host_memory = 1, inter_node_bandwidth = 1.0>
#train = #plan.train<optimizer = #plan.optimizer<kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 64, loss_scale = #plan.loss_scale<kind = none>, lr_schedule = #plan.lr_schedule<kind = constant>>
#fsdp = #plan.parallel<sharding = full_shard, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>>

shard.grid @mesh(shape = 1x1x2x1)
plan.plan @p on @mesh model #model cluster #cluster train #train parallel #fsdp {
  plan.unit @a kind embedding {
    plan.param "w" : tensor<3x8xf32>
  }
  plan.unit @b kind llama_head {
    plan.param "v" : tensor<8xf32>
    plan.param "t" : tensor<3x8xf32> tied_to "w"
  }
  // expected-error @below {{'nowhere' is not a plan.unit}}
  plan.group @g units [@nowhere]
}

// -----

#model = #plan.model<family = llama, vocab = 8, hidden = 8, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 64>
#device = #plan.device<name = "x", memory = 1, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0>
#cluster = #plan.cluster<nodes = 1, gpus_per_node = 2, device = #device, host_memory = 1, inter_node_bandwidth = 1.0>
#train = #plan.train<optimizer = #plan.optimizer<kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 64, loss_scale = #plan.loss_scale<kind = none>, lr_schedule = #plan.lr_schedule<kind = constant>>
#fsdp = #plan.parallel<sharding = full_shard, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>>

shard.grid @mesh(shape = 1x1x2x1)
plan.plan @p on @mesh model #model cluster #cluster train #train parallel #fsdp {
  plan.unit @a kind embedding {
    plan.param "w" : tensor<3x8xf32>
  }
  plan.unit @b kind llama_head {
    plan.param "v" : tensor<8xf32>
    plan.param "t" : tensor<3x8xf32> tied_to "w"
  }
  // expected-error @below {{numel 33 is not the 32 elements its units store}}
  plan.group @g units [@a, @b] {numel = 33 : i64}
}

// -----

#model = #plan.model<family = llama, vocab = 8, hidden = 8, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 64>
#device = #plan.device<name = "x", memory = 1, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0>
#cluster = #plan.cluster<nodes = 1, gpus_per_node = 2, device = #device, host_memory = 1, inter_node_bandwidth = 1.0>
#train = #plan.train<optimizer = #plan.optimizer<kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 64, loss_scale = #plan.loss_scale<kind = none>, lr_schedule = #plan.lr_schedule<kind = constant>>
#fsdp = #plan.parallel<sharding = full_shard, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>>

shard.grid @mesh(shape = 1x1x2x1)
plan.plan @p on @mesh model #model cluster #cluster train #train parallel #fsdp {
  plan.unit @a kind embedding {
    plan.param "w" : tensor<3x8xf32>
  }
  plan.unit @b kind llama_head {
    plan.param "v" : tensor<8xf32>
    plan.param "t" : tensor<3x8xf32> tied_to "w"
  }
  // expected-error @below {{padded_numel / shard_numel = 4 shards, but the mesh's shard axis has 2 ranks}}
  plan.group @g units [@a, @b] {numel = 32 : i64, padded_numel = 32 : i64, shard_numel = 8 : i64}
}

// -----

#model = #plan.model<family = llama, vocab = 8, hidden = 8, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 64>
#device = #plan.device<name = "x", memory = 1, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0>
#cluster = #plan.cluster<nodes = 1, gpus_per_node = 2, device = #device, host_memory = 1, inter_node_bandwidth = 1.0>
#train = #plan.train<optimizer = #plan.optimizer<kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 64, loss_scale = #plan.loss_scale<kind = none>, lr_schedule = #plan.lr_schedule<kind = constant>>
#fsdp = #plan.parallel<sharding = full_shard, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>>

shard.grid @mesh(shape = 1x1x2x1)
plan.plan @p on @mesh model #model cluster #cluster train #train parallel #fsdp {
  plan.unit @a kind embedding {
    plan.param "w" : tensor<3x8xf32>
  }
  plan.unit @b kind llama_head {
    plan.param "v" : tensor<8xf32>
    // expected-error @below {{is tied to 'x', which is not a parameter of this plan}}
    plan.param "t" : tensor<3x8xf32> tied_to "x"
  }
}

// -----

#model = #plan.model<family = llama, vocab = 8, hidden = 8, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 64>
#device = #plan.device<name = "x", memory = 1, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0>
#cluster = #plan.cluster<nodes = 1, gpus_per_node = 1, device = #device, host_memory = 1, inter_node_bandwidth = 1.0>
#train = #plan.train<optimizer = #plan.optimizer<kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 64, loss_scale = #plan.loss_scale<kind = none>, lr_schedule = #plan.lr_schedule<kind = constant>>
#ddp = #plan.parallel<sharding = no_shard, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>>

shard.grid @mesh(shape = 1x1x1x1)
plan.plan @p on @mesh model #model cluster #cluster train #train parallel #ddp {
  plan.unit @a kind embedding {
    // expected-error @below {{parameter 'w' must have a static shape}}
    plan.param "w" : tensor<?x8xf32>
  }
}

// -----

#model = #plan.model<family = llama, vocab = 8, hidden = 8, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 64>
#device = #plan.device<name = "x", memory = 1, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0>
#cluster = #plan.cluster<nodes = 1, gpus_per_node = 1, device = #device, host_memory = 1, inter_node_bandwidth = 1.0>
#train = #plan.train<optimizer = #plan.optimizer<kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 64, loss_scale = #plan.loss_scale<kind = none>, lr_schedule = #plan.lr_schedule<kind = constant>>
#ddp = #plan.parallel<sharding = no_shard, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>>

shard.grid @mesh(shape = 1x1x1x1)
plan.plan @p on @mesh model #model cluster #cluster train #train parallel #ddp {
  plan.unit @a kind embedding {
    // expected-error @below {{parameter 'v' has an empty dimension}}
    plan.param "v" : tensor<0x8xf32>
  }
}

// -----

#model = #plan.model<family = llama, vocab = 8, hidden = 8, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 64>
#device = #plan.device<name = "x", memory = 1, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0>
#cluster = #plan.cluster<nodes = 1, gpus_per_node = 1, device = #device, host_memory = 1, inter_node_bandwidth = 1.0>
#train = #plan.train<optimizer = #plan.optimizer<kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 64, loss_scale = #plan.loss_scale<kind = none>, lr_schedule = #plan.lr_schedule<kind = constant>>
#ddp = #plan.parallel<sharding = no_shard, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>>

shard.grid @mesh(shape = 1x1x1x1)
plan.plan @p on @mesh model #model cluster #cluster train #train parallel #ddp {
  plan.unit @a kind embedding {
    // expected-error @below {{parameter 'i' must have a floating-point element type}}
    plan.param "i" : tensor<8xi32>
  }
}

// -----

#model = #plan.model<family = llama, vocab = 8, hidden = 8, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 64>
#device = #plan.device<name = "x", memory = 1, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0>
#cluster = #plan.cluster<nodes = 1, gpus_per_node = 1, device = #device, host_memory = 1, inter_node_bandwidth = 1.0>
#train = #plan.train<optimizer = #plan.optimizer<kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 64, loss_scale = #plan.loss_scale<kind = none>, lr_schedule = #plan.lr_schedule<kind = constant>>
#ddp = #plan.parallel<sharding = no_shard, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>>

shard.grid @mesh(shape = 1x1x1x1)
plan.plan @p on @mesh model #model cluster #cluster train #train parallel #ddp {
  plan.unit @a kind embedding {
    // expected-error @below {{parameter 't' cannot be tied to itself}}
    plan.param "t" : tensor<8xf32> tied_to "t"
  }
}

// -----

// expected-error @below {{expected one of [embedding, llama_block, gpt2_block, bert_block, llama_head, gpt2_head, bert_head] for kind of model unit, got: transformer}}
plan.unit @a kind transformer {
}

// -----

#model = #plan.model<family = llama, vocab = 8, hidden = 8, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 64, lora = <rank = 2, alpha = 4.0, targets = ["q_proj"], base = bf16>>
#device = #plan.device<name = "x", memory = 1, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0>
#cluster = #plan.cluster<nodes = 1, gpus_per_node = 2, device = #device, host_memory = 1, inter_node_bandwidth = 1.0>
#train = #plan.train<optimizer = #plan.optimizer<kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 64, loss_scale = #plan.loss_scale<kind = none>, lr_schedule = #plan.lr_schedule<kind = constant>>
#fsdp = #plan.parallel<sharding = full_shard, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>>

shard.grid @mesh(shape = 1x1x2x1)
plan.plan @p on @mesh model #model cluster #cluster train #train parallel #fsdp {
  plan.unit @a kind embedding {
    plan.param "w" : tensor<3x8xf32> frozen bf16
  }
  plan.unit @b kind llama_head {
    // expected-error @below {{tied parameter 't' cannot say how it is stored: it is stored as 'w' is}}
    plan.param "t" : tensor<3x8xf32> tied_to "w" frozen bf16
  }
}

// -----

#model = #plan.model<family = llama, vocab = 8, hidden = 8, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 64, lora = <rank = 2, alpha = 4.0, targets = ["q_proj"], base = bf16>>
#device = #plan.device<name = "x", memory = 1, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0>
#cluster = #plan.cluster<nodes = 1, gpus_per_node = 2, device = #device, host_memory = 1, inter_node_bandwidth = 1.0>
#train = #plan.train<optimizer = #plan.optimizer<kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 64, loss_scale = #plan.loss_scale<kind = none>, lr_schedule = #plan.lr_schedule<kind = constant>>
#fsdp = #plan.parallel<sharding = full_shard, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>>

shard.grid @mesh(shape = 1x1x2x1)
plan.plan @p on @mesh model #model cluster #cluster train #train parallel #fsdp {
  plan.unit @a kind embedding {
    plan.param "w" : tensor<3x8xf32> frozen bf16
    plan.param "w.lora_A.weight" : tensor<2x8xf32>
  }
  // expected-error @below {{frozen_numel 20 is not the 24 elements its units store frozen}}
  plan.group @g units [@a] {numel = 16, padded_numel = 16, shard_numel = 8, frozen_numel = 20, frozen_padded_numel = 20, frozen_shard_numel = 10}
}

// -----

#model = #plan.model<family = llama, vocab = 8, hidden = 8, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 64, lora = <rank = 2, alpha = 4.0, targets = ["q_proj"], base = bf16>>
#device = #plan.device<name = "x", memory = 1, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0>
#cluster = #plan.cluster<nodes = 1, gpus_per_node = 2, device = #device, host_memory = 1, inter_node_bandwidth = 1.0>
#train = #plan.train<optimizer = #plan.optimizer<kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 64, loss_scale = #plan.loss_scale<kind = none>, lr_schedule = #plan.lr_schedule<kind = constant>>
#fsdp = #plan.parallel<sharding = full_shard, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>>

shard.grid @mesh(shape = 1x1x2x1)
plan.plan @p on @mesh model #model cluster #cluster train #train parallel #fsdp {
  plan.unit @a kind embedding {
    plan.param "w" : tensor<3x8xf32> frozen bf16
  }
  // expected-error @below {{frozen_padded_numel / frozen_shard_numel = 3 shards, but the mesh's shard axis has 2 ranks}}
  plan.group @g units [@a] {numel = 0, padded_numel = 0, shard_numel = 0, frozen_numel = 24, frozen_padded_numel = 24, frozen_shard_numel = 8}
}

// -----

// A split names a dimension the parameter has.
#model = #plan.model<family = llama, vocab = 8, hidden = 8, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 64>
#device = #plan.device<name = "x", memory = 1, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0>
#cluster = #plan.cluster<nodes = 1, gpus_per_node = 2, device = #device, host_memory = 1, inter_node_bandwidth = 1.0>
#train = #plan.train<optimizer = #plan.optimizer<kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 64, loss_scale = #plan.loss_scale<kind = none>, lr_schedule = #plan.lr_schedule<kind = constant>>
#ddp = #plan.parallel<sharding = no_shard, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>>

shard.grid @mesh(shape = 1x1x1x2)
plan.plan @p on @mesh model #model cluster #cluster train #train parallel #ddp {
  plan.unit @a kind embedding {
    // expected-error @below {{parameter 'w' is split along dim 2 but has 2 dims}}
    plan.param "w" : tensor<8x8xf32> split <dim = 2>
  }
}

// -----

// GPT-2's fused c_attn is 3 equal parts; 8 rows are not.
#model = #plan.model<family = llama, vocab = 8, hidden = 8, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 64>
#device = #plan.device<name = "x", memory = 1, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0>
#cluster = #plan.cluster<nodes = 1, gpus_per_node = 2, device = #device, host_memory = 1, inter_node_bandwidth = 1.0>
#train = #plan.train<optimizer = #plan.optimizer<kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 64, loss_scale = #plan.loss_scale<kind = none>, lr_schedule = #plan.lr_schedule<kind = constant>>
#ddp = #plan.parallel<sharding = no_shard, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>>

shard.grid @mesh(shape = 1x1x1x2)
plan.plan @p on @mesh model #model cluster #cluster train #train parallel #ddp {
  plan.unit @a kind embedding {
    // expected-error @below {{parameter 'w' dim 1 (8) is not 3 equal parts}}
    plan.param "w" : tensor<8x8xf32> split <dim = 1, chunks = 3>
  }
}

// -----

// A tied parameter is divided as its owner is.
#model = #plan.model<family = llama, vocab = 8, hidden = 8, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 64>
#device = #plan.device<name = "x", memory = 1, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0>
#cluster = #plan.cluster<nodes = 1, gpus_per_node = 2, device = #device, host_memory = 1, inter_node_bandwidth = 1.0>
#train = #plan.train<optimizer = #plan.optimizer<kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 64, loss_scale = #plan.loss_scale<kind = none>, lr_schedule = #plan.lr_schedule<kind = constant>>
#ddp = #plan.parallel<sharding = no_shard, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>>

shard.grid @mesh(shape = 1x1x1x2)
plan.plan @p on @mesh model #model cluster #cluster train #train parallel #ddp {
  plan.unit @a kind embedding {
    plan.param "w" : tensor<8x8xf32> split <dim = 0>
    // expected-error @below {{tied parameter 't' cannot say how it is split: it is split as 'w' is}}
    plan.param "t" : tensor<8x8xf32> tied_to "w" split <dim = 0>
  }
}

// -----

// The attribute's own verifier.
#model = #plan.model<family = llama, vocab = 8, hidden = 8, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 64>
#device = #plan.device<name = "x", memory = 1, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0>
#cluster = #plan.cluster<nodes = 1, gpus_per_node = 2, device = #device, host_memory = 1, inter_node_bandwidth = 1.0>
#train = #plan.train<optimizer = #plan.optimizer<kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 64, loss_scale = #plan.loss_scale<kind = none>, lr_schedule = #plan.lr_schedule<kind = constant>>
#ddp = #plan.parallel<sharding = no_shard, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<>>

shard.grid @mesh(shape = 1x1x1x2)
plan.plan @p on @mesh model #model cluster #cluster train #train parallel #ddp {
  plan.unit @a kind embedding {
    // expected-error @below {{chunks must be >= 1, got 0}}
    plan.param "w" : tensor<8x8xf32> split <dim = 0, chunks = 0>
  }
}
