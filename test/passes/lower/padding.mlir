// A group padded for 3 shards: its buffers (and the optimizer step) have the
// padded_numel 69762 elements, its units' views only their stored ones, and
// the 2 elements of padding after the head belong to no unit.
// RUN: plan-opt %s -sched-lower | FileCheck %s

shard.grid @mesh(shape = 1x1x3x1)
plan.plan @padded on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 512, hidden = 64,
                      intermediate = 176, layers = 1, heads = 4, kv_heads = 2, max_seq_len = 256>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 3,
        device = #plan.device<name = "cpu", memory = 17179869184, bf16_tflops = 1.0,
                              fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10,
                              nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>,
        host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = #plan.optimizer<kind = adamw, lr = 1.0e-3>,
                      micro_batch = 1, seq_len = 16,
                      loss_scale = #plan.loss_scale<kind = none>,
                      lr_schedule = #plan.lr_schedule<kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = #plan.wrap<kind = whole_model>,
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
  plan.group @fsdp.root units [@embed, @layers.0, @head] {numel = 69760 : i64, padded_numel = 69762 : i64, shard_numel = 23254 : i64}
}

// CHECK-LABEL: sched.program @padded.step for @padded micro_batches 1 model {{.*}} {
// CHECK-NEXT:  [[P:%.*]] = sched.alloc "fsdp.root.param" role param persistent : memref<69762xf32
// CHECK-NEXT:  [[G:%.*]] = sched.alloc "fsdp.root.grad" role grad persistent : memref<69762xf32
// CHECK-NEXT:  [[M:%.*]] = sched.alloc "fsdp.root.exp_avg" role exp_avg persistent : memref<69762xf32
// CHECK-NEXT:  [[V:%.*]] = sched.alloc "fsdp.root.exp_avg_sq" role exp_avg_sq persistent : memref<69762xf32
// CHECK-NEXT:  sched.view [[P]][0] : memref<69762xf32, {{.*}}> to memref<32768xf32
// CHECK-NEXT:  sched.view [[G]][0] : memref<69762xf32, {{.*}}> to memref<32768xf32
// CHECK-NEXT:  sched.view [[P]][32768] : memref<69762xf32, {{.*}}> to memref<4160xf32
// CHECK-NEXT:  sched.view [[G]][32768] : memref<69762xf32, {{.*}}> to memref<4160xf32
// CHECK-NEXT:  sched.view [[P]][36928] : memref<69762xf32, {{.*}}> to memref<32832xf32
// CHECK-NEXT:  sched.view [[G]][36928] : memref<69762xf32, {{.*}}> to memref<32832xf32
// CHECK-NEXT:  sched.zero [[G]] : memref<69762xf32
// CHECK:       sched.optimizer_step @padded::@fsdp.root params([[P]] : memref<69762xf32, {{.*}}) grads([[G]] : memref<69762xf32, {{.*}}) state([[M]], [[V]] :
