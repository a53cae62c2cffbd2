// plan-wrap-units, one case per policy; groups are listed in the order of
// their first unit and the root group holds the embedding and the head.
// RUN: plan-opt %s -split-input-file --plan-wrap-units | FileCheck %s

// transformer_block: one group per block; the tied head shares the root group
// with the embedding it ties to.
// CHECK-LABEL: plan.plan @per_block
// CHECK:       plan.group @fsdp.root units [@embed, @head]{{$}}
// CHECK-NEXT:  plan.group @fsdp.layers.0 units [@layers.0]{{$}}
// CHECK-NEXT:  plan.group @fsdp.layers.1 units [@layers.1]{{$}}
// CHECK-NEXT:  plan.group @fsdp.layers.2 units [@layers.2]{{$}}
// CHECK-NEXT:  }
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @per_block on @mesh
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
  plan.unit @layers.1 kind llama_block {
    plan.param "layers.1.weight" : tensor<100xf32>
  }
  plan.unit @layers.2 kind llama_block {
    plan.param "layers.2.weight" : tensor<100xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "norm.weight" : tensor<8xf32>
    plan.param "lm_head.weight" : tensor<40xf32> tied_to "embed.weight"
  }
}

// -----

// min_params(250) over blocks of 100 elements: three blocks reach 250; the
// two left before the head form a smaller group of their own.
// CHECK-LABEL: plan.plan @min_params
// CHECK:       plan.group @fsdp.root units [@embed, @head]{{$}}
// CHECK-NEXT:  plan.group @"fsdp.layers.0-2" units [@layers.0, @layers.1, @layers.2]{{$}}
// CHECK-NEXT:  plan.group @"fsdp.layers.3-4" units [@layers.3, @layers.4]{{$}}
// CHECK-NEXT:  }
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @min_params on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 512, hidden = 64, intermediate = 176, layers = 2, heads = 4, kv_heads = 2, max_seq_len = 256>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 0.5, fp16_tflops = 0.5, fp32_tflops = 0.5, hbm_bandwidth = 5.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0e10>, host_memory = 17179869184, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = adamw, lr = 0.001>, micro_batch = 4, seq_len = 128, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = min_params, min_params = 250>, offload = <>> {
  plan.unit @embed kind embedding {
    plan.param "embed.weight" : tensor<40xf32>
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "layers.0.weight" : tensor<100xf32>
  }
  plan.unit @layers.1 kind llama_block {
    plan.param "layers.1.weight" : tensor<100xf32>
  }
  plan.unit @layers.2 kind llama_block {
    plan.param "layers.2.weight" : tensor<100xf32>
  }
  plan.unit @layers.3 kind llama_block {
    plan.param "layers.3.weight" : tensor<100xf32>
  }
  plan.unit @layers.4 kind llama_block {
    plan.param "layers.4.weight" : tensor<100xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "norm.weight" : tensor<8xf32>
    plan.param "lm_head.weight" : tensor<40xf32>
  }
}

// -----

// min_params below one block's size: every block is its own group.
// CHECK-LABEL: plan.plan @min_params_small
// CHECK:       plan.group @fsdp.root units [@embed, @head]{{$}}
// CHECK-NEXT:  plan.group @fsdp.layers.0 units [@layers.0]{{$}}
// CHECK-NEXT:  plan.group @fsdp.layers.1 units [@layers.1]{{$}}
// CHECK-NEXT:  }
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @min_params_small on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 512, hidden = 64, intermediate = 176, layers = 2, heads = 4, kv_heads = 2, max_seq_len = 256>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 0.5, fp16_tflops = 0.5, fp32_tflops = 0.5, hbm_bandwidth = 5.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0e10>, host_memory = 17179869184, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = adamw, lr = 0.001>, micro_batch = 4, seq_len = 128, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = min_params, min_params = 50>, offload = <>> {
  plan.unit @embed kind embedding {
    plan.param "embed.weight" : tensor<40xf32>
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "layers.0.weight" : tensor<100xf32>
  }
  plan.unit @layers.1 kind llama_block {
    plan.param "layers.1.weight" : tensor<100xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "norm.weight" : tensor<8xf32>
    plan.param "lm_head.weight" : tensor<40xf32>
  }
}

// -----

// whole_model: one root group with every unit, in unit order.
// CHECK-LABEL: plan.plan @whole
// CHECK:       plan.group @fsdp.root units [@embed, @layers.0, @layers.1, @head]{{$}}
// CHECK-NEXT:  }
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @whole on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 512, hidden = 64, intermediate = 176, layers = 2, heads = 4, kv_heads = 2, max_seq_len = 256>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 0.5, fp16_tflops = 0.5, fp32_tflops = 0.5, hbm_bandwidth = 5.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0e10>, host_memory = 17179869184, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = adamw, lr = 0.001>, micro_batch = 4, seq_len = 128, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = whole_model>, offload = <>> {
  plan.unit @embed kind embedding {
    plan.param "embed.weight" : tensor<40xf32>
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "layers.0.weight" : tensor<100xf32>
  }
  plan.unit @layers.1 kind llama_block {
    plan.param "layers.1.weight" : tensor<100xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "norm.weight" : tensor<8xf32>
    plan.param "lm_head.weight" : tensor<40xf32>
  }
}

// -----

// Groups already there (by hand, or from an earlier run) are kept as they are.
// CHECK-LABEL: plan.plan @grouped
// CHECK:       plan.group @mine units [@embed, @layers.0, @layers.1, @head]{{$}}
// CHECK-NEXT:  }
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @grouped on @mesh
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
  plan.unit @layers.1 kind llama_block {
    plan.param "layers.1.weight" : tensor<100xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "norm.weight" : tensor<8xf32>
    plan.param "lm_head.weight" : tensor<40xf32>
  }
  plan.group @mine units [@embed, @layers.0, @layers.1, @head]
}

// min_params counts frozen elements too (a LoRA base, as PyTorch's
// size_based_auto_wrap_policy does): each llama_tiny block stores 46208
// frozen elements, enough for a group of its own at 40000.
// RUN: plan-opt %examples/tiny_llama_cpu.plan --set model.lora.rank=2 --set 'parallel.wrap=min_params(40000)' --plan-expand-presets --plan-wrap-units | FileCheck %s --check-prefix=LORA
// LORA: plan.group @fsdp.root units [@embed, @head]
// LORA-NEXT: plan.group @fsdp.layers.0 units [@layers.0]
// LORA-NEXT: plan.group @fsdp.layers.1 units [@layers.1]
