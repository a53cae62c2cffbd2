// plan-assign-sharding sizes each group on the mesh's shard axis.
// RUN: plan-opt %s -split-input-file --plan-wrap-units --plan-assign-sharding | FileCheck %s
// Running it again rewrites the same numbers.
// RUN: plan-opt %s -split-input-file --plan-wrap-units --plan-assign-sharding --plan-assign-sharding | FileCheck %s

// Shard axis 3: root 40 + 8 + 40 = 88 pads to 90 (30 each); a block of 100
// pads to 102 (34 each).
// CHECK-LABEL: plan.plan @padded
// CHECK:       plan.group @fsdp.root units [@embed, @head] {numel = 88 : i64, padded_numel = 90 : i64, shard_numel = 30 : i64}
// CHECK-NEXT:  plan.group @fsdp.layers.0 units [@layers.0] {numel = 100 : i64, padded_numel = 102 : i64, shard_numel = 34 : i64}
shard.grid @mesh(shape = 1x1x3x1)
plan.plan @padded on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 512, hidden = 64, intermediate = 176, layers = 2, heads = 4, kv_heads = 2, max_seq_len = 256>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 3, device = <name = "cpu", memory = 17179869184, bf16_tflops = 0.5, fp16_tflops = 0.5, fp32_tflops = 0.5, hbm_bandwidth = 5.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0e10>, host_memory = 17179869184, inter_node_bandwidth = 2.5e10>
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

// -----

// A tied parameter is stored once: the root holds 40 + 8 elements. Shard axis
// 2 divides both groups, so nothing is padded.
// CHECK-LABEL: plan.plan @tied
// CHECK:       plan.group @fsdp.root units [@embed, @head] {numel = 48 : i64, padded_numel = 48 : i64, shard_numel = 24 : i64}
// CHECK-NEXT:  plan.group @fsdp.layers.0 units [@layers.0] {numel = 100 : i64, padded_numel = 100 : i64, shard_numel = 50 : i64}
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @tied on @mesh
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
    plan.param "lm_head.weight" : tensor<40xf32> tied_to "embed.weight"
  }
}

// -----

// no_shard: the shard axis is 1; the shard is the whole buffer.
// CHECK-LABEL: plan.plan @ddp
// CHECK:       plan.group @fsdp.root units [@embed, @layers.0, @head] {numel = 188 : i64, padded_numel = 188 : i64, shard_numel = 188 : i64}
shard.grid @mesh(shape = 1x2x1x1)
plan.plan @ddp on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 512, hidden = 64, intermediate = 176, layers = 2, heads = 4, kv_heads = 2, max_seq_len = 256>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 0.5, fp16_tflops = 0.5, fp32_tflops = 0.5, hbm_bandwidth = 5.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0e10>, host_memory = 17179869184, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = adamw, lr = 0.001>, micro_batch = 4, seq_len = 128, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = whole_model>, offload = <>> {
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

// -----

// LoRA: frozen parameters are a second flat buffer, sized the same way; a
// group of frozen parameters alone trains nothing (numel 0). Shard axis 3:
// the root's 40 + 8 + 40 frozen pad to 90; the block trains 6 + 6 = 12 and
// keeps 100 frozen (pads to 102).
// CHECK-LABEL: plan.plan @lora
// CHECK:       plan.group @fsdp.root units [@embed, @head] {frozen_numel = 88 : i64, frozen_padded_numel = 90 : i64, frozen_shard_numel = 30 : i64, numel = 0 : i64, padded_numel = 0 : i64, shard_numel = 0 : i64}
// CHECK-NEXT:  plan.group @fsdp.layers.0 units [@layers.0] {frozen_numel = 100 : i64, frozen_padded_numel = 102 : i64, frozen_shard_numel = 34 : i64, numel = 12 : i64, padded_numel = 12 : i64, shard_numel = 4 : i64}
shard.grid @mesh(shape = 1x1x3x1)
plan.plan @lora on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 512, hidden = 64, intermediate = 176, layers = 2, heads = 4, kv_heads = 2, max_seq_len = 256, lora = <rank = 1, alpha = 2.0, targets = ["q_proj"], base = bf16>>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 3, device = <name = "cpu", memory = 17179869184, bf16_tflops = 0.5, fp16_tflops = 0.5, fp32_tflops = 0.5, hbm_bandwidth = 5.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0e10>, host_memory = 17179869184, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = adamw, lr = 0.001>, micro_batch = 4, seq_len = 128, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @embed kind embedding {
    plan.param "embed.weight" : tensor<40xf32> frozen bf16
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "layers.0.q_proj.weight" : tensor<100xf32> frozen bf16
    plan.param "layers.0.q_proj.lora_A.weight" : tensor<1x6xf32>
    plan.param "layers.0.q_proj.lora_B.weight" : tensor<6x1xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "norm.weight" : tensor<8xf32> frozen bf16
    plan.param "lm_head.weight" : tensor<40xf32> frozen bf16
  }
}
