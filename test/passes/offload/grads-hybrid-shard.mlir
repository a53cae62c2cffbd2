// hybrid_shard in fp32 with offload.grads = cpu (the step on the device): the
// reduce-scatter lands on the device and is added into the host shard; the
// replica all-reduce then works on a device copy of the host shard, written back.
// RUN: plan-opt %s -sched-insert-offload-copies | FileCheck %s

#dev = #sched.space<device>
shard.grid @mesh(shape = 1x2x2x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = adamw, lr = 0.001>, micro_batch = 1, seq_len = 8, precision = fp32, loss_scale = <kind = none>, grad_clip = 1.0, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <grads = cpu>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<8x4xf32>
  }
  plan.unit @"layers.0" kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32>
    plan.param "lm_head.weight" : tensor<8x4xf32> tied_to "model.embed_tokens.weight"
  }
  plan.group @fsdp.root units [@embed, @head] {numel = 36 : i64, padded_numel = 36 : i64, shard_numel = 18 : i64}
  plan.group @fsdp.layers.0 units [@"layers.0"] {numel = 16 : i64, padded_numel = 16 : i64, shard_numel = 8 : i64}
}
sched.program @p.step for @p micro_batches 1
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = adamw, lr = 0.001>, micro_batch = 1, seq_len = 8, precision = fp32, loss_scale = <kind = none>, grad_clip = 1.0, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <grads = cpu>> {
  %p0 = sched.alloc "fsdp.root.param" role param persistent : memref<18xf32, #dev>
  %g0 = sched.alloc "fsdp.root.grad" role grad persistent : memref<18xf32, #dev>
  %m0 = sched.alloc "fsdp.root.exp_avg" role exp_avg persistent : memref<18xf32, #dev>
  %v0 = sched.alloc "fsdp.root.exp_avg_sq" role exp_avg_sq persistent : memref<18xf32, #dev>
  %p1 = sched.alloc "fsdp.layers.0.param" role param persistent : memref<8xf32, #dev>
  %g1 = sched.alloc "fsdp.layers.0.grad" role grad persistent : memref<8xf32, #dev>
  %m1 = sched.alloc "fsdp.layers.0.exp_avg" role exp_avg persistent : memref<8xf32, #dev>
  %v1 = sched.alloc "fsdp.layers.0.exp_avg_sq" role exp_avg_sq persistent : memref<8xf32, #dev>
  sched.zero %g0 : memref<18xf32, #dev>
  sched.zero %g1 : memref<8xf32, #dev>
  %f0 = sched.alloc "fsdp.root.gathered" role gathered : memref<36xf32, #dev>
  %e0 = sched.all_gather %p0 into %f0 group shard : memref<18xf32, #dev>, memref<36xf32, #dev>
  %embed = sched.view %f0[0] : memref<36xf32, #dev> to memref<32xf32, #dev>
  %head = sched.view %f0[32] : memref<36xf32, #dev> to memref<4xf32, #dev>
  %a0 = sched.alloc "embed.saves.mb0" role activations : memref<8xf32, #dev>
  sched.wait %e0
  sched.forward @p::@embed mb 0 params(%embed : memref<32xf32, #dev>) saves(%a0 : memref<8xf32, #dev>)
  %f1 = sched.alloc "fsdp.layers.0.gathered" role gathered : memref<16xf32, #dev>
  %e1 = sched.all_gather %p1 into %f1 group shard : memref<8xf32, #dev>, memref<16xf32, #dev>
  %l0 = sched.view %f1[0] : memref<16xf32, #dev> to memref<16xf32, #dev>
  %a1 = sched.alloc "layers.0.saves.mb0" role activations : memref<64xf32, #dev>
  sched.wait %e1
  sched.forward @p::@"layers.0" mb 0 params(%l0 : memref<16xf32, #dev>) saves(%a1 : memref<64xf32, #dev>)
  sched.free %f1 : memref<16xf32, #dev>
  %a2 = sched.alloc "head.saves.mb0" role activations : memref<40xf32, #dev>
  sched.forward @p::@head mb 0 params(%head : memref<4xf32, #dev>) tied(%embed : memref<32xf32, #dev>) saves(%a2 : memref<40xf32, #dev>)
  sched.free %f0 : memref<36xf32, #dev>
  sched.loss @p::@head mb 0 scale 1.0
  %f2 = sched.alloc "fsdp.root.gathered" role gathered : memref<36xf32, #dev>
  %e2 = sched.all_gather %p0 into %f2 group shard : memref<18xf32, #dev>, memref<36xf32, #dev>
  %embed2 = sched.view %f2[0] : memref<36xf32, #dev> to memref<32xf32, #dev>
  %head2 = sched.view %f2[32] : memref<36xf32, #dev> to memref<4xf32, #dev>
  %u0 = sched.alloc "fsdp.root.grad.full" role unsharded_grad : memref<36xf32, #dev>
  sched.zero %u0 : memref<36xf32, #dev>
  %ge = sched.view %u0[0] : memref<36xf32, #dev> to memref<32xf32, #dev>
  %gh = sched.view %u0[32] : memref<36xf32, #dev> to memref<4xf32, #dev>
  sched.wait %e2
  sched.backward @p::@head mb 0 params(%head2 : memref<4xf32, #dev>) tied(%embed2 : memref<32xf32, #dev>) activations(%a2 : memref<40xf32, #dev>) grads(%gh : memref<4xf32, #dev>) tied_grads(%ge : memref<32xf32, #dev>)
  sched.free %a2 : memref<40xf32, #dev>
  %f3 = sched.alloc "fsdp.layers.0.gathered" role gathered : memref<16xf32, #dev>
  %e3 = sched.all_gather %p1 into %f3 group shard : memref<8xf32, #dev>, memref<16xf32, #dev>
  %l3 = sched.view %f3[0] : memref<16xf32, #dev> to memref<16xf32, #dev>
  %u1 = sched.alloc "fsdp.layers.0.grad.full" role unsharded_grad : memref<16xf32, #dev>
  sched.zero %u1 : memref<16xf32, #dev>
  %gl = sched.view %u1[0] : memref<16xf32, #dev> to memref<16xf32, #dev>
  sched.wait %e3
  sched.backward @p::@"layers.0" mb 0 params(%l3 : memref<16xf32, #dev>) activations(%a1 : memref<64xf32, #dev>) grads(%gl : memref<16xf32, #dev>)
  sched.free %a1 : memref<64xf32, #dev>
  sched.free %f3 : memref<16xf32, #dev>
  %e4 = sched.reduce_scatter %u1 into %g1 group shard reduce avg accumulate : memref<16xf32, #dev>, memref<8xf32, #dev>
  %e4r = sched.all_reduce %g1 group replicate reduce avg after %e4 : memref<8xf32, #dev>
  sched.backward @p::@embed mb 0 params(%embed2 : memref<32xf32, #dev>) activations(%a0 : memref<8xf32, #dev>) grads(%ge : memref<32xf32, #dev>)
  sched.free %a0 : memref<8xf32, #dev>
  sched.free %f2 : memref<36xf32, #dev>
  %e5 = sched.reduce_scatter %u0 into %g0 group shard reduce avg accumulate : memref<36xf32, #dev>, memref<18xf32, #dev>
  %e5r = sched.all_reduce %g0 group replicate reduce avg after %e5 : memref<18xf32, #dev>
  sched.wait %e4
  sched.free %u1 : memref<16xf32, #dev>
  sched.wait %e4r
  sched.wait %e5
  sched.free %u0 : memref<36xf32, #dev>
  sched.wait %e5r
  %n = sched.alloc "grad_norm" role scalar : memref<1xf32, #dev>
  sched.zero %n : memref<1xf32, #dev>
  sched.grad_norm %g0 into %n : memref<18xf32, #dev>, memref<1xf32, #dev>
  sched.grad_norm %g1 into %n : memref<8xf32, #dev>, memref<1xf32, #dev>
  %e6 = sched.all_reduce %n group shard reduce sum : memref<1xf32, #dev>
  sched.wait %e6
  sched.optimizer_step @p::@fsdp.root params(%p0 : memref<18xf32, #dev>) grads(%g0 : memref<18xf32, #dev>) state(%m0, %v0 : memref<18xf32, #dev>, memref<18xf32, #dev>) norm(%n : memref<1xf32, #dev>)
  sched.optimizer_step @p::@"fsdp.layers.0" params(%p1 : memref<8xf32, #dev>) grads(%g1 : memref<8xf32, #dev>) state(%m1, %v1 : memref<8xf32, #dev>, memref<8xf32, #dev>) norm(%n : memref<1xf32, #dev>)
  sched.free %n : memref<1xf32, #dev>
}

// CHECK-LABEL: sched.program @p.step
// CHECK:      [[G1:%.+]] = sched.alloc "fsdp.layers.0.grad" {{.*}} : memref<8xf32, #sched.space<pinned_host>>
// CHECK:      [[D1:%.+]] = sched.alloc "fsdp.layers.0.grad.staging" role {{ *}}staging : memref<8xf32, #sched.space<device>>
// CHECK-NEXT: [[E4:%.+]] = sched.reduce_scatter {{%.+}} into [[D1]] group {{ *}}shard reduce {{ *}}avg :
// CHECK-NOT:  sched.all_reduce
// CHECK:      sched.wait [[E4]]
// CHECK-NEXT: [[H1:%.+]] = sched.alloc "fsdp.layers.0.grad.staging" role {{ *}}staging : memref<8xf32, #sched.space<pinned_host>>
// CHECK-NEXT: [[C1:%.+]] = sched.copy [[D1]] into [[H1]]
// CHECK-NEXT: sched.wait [[C1]]
// CHECK-NEXT: sched.accumulate [[H1]] into [[G1]] : memref<8xf32, #sched.space<pinned_host>>, memref<8xf32, #sched.space<pinned_host>>
// CHECK-NEXT: sched.free [[H1]]
// CHECK-NEXT: sched.free [[D1]]
// The replica all-reduce follows the host accumulation, on a device copy.
// CHECK-NEXT: [[A1:%.+]] = sched.alloc "fsdp.layers.0.grad.staging" role {{ *}}staging : memref<8xf32, #sched.space<device>>
// CHECK-NEXT: [[IN:%.+]] = sched.copy [[G1]] into [[A1]]
// CHECK-NEXT: [[E4R:%.+]] = sched.all_reduce [[A1]] group {{ *}}replicate reduce {{ *}}avg after [[IN]] :
// CHECK:      sched.wait [[IN]]
// CHECK-NEXT: sched.wait [[E4R]]
// CHECK-NEXT: [[OUT:%.+]] = sched.copy [[A1]] into [[G1]]
// CHECK:      sched.wait [[OUT]]
// CHECK-NEXT: sched.free [[A1]]
// CHECK:      sched.grad_norm [[G1]] into
// The device step reads a device copy of the host shard.
// CHECK:      [[SG:%.+]] = sched.alloc "fsdp.layers.0.grad.staging" {{.*}} #sched.space<device>>
// CHECK-NEXT: [[CG:%.+]] = sched.copy [[G1]] into [[SG]]
// CHECK-NEXT: sched.wait [[CG]]
// CHECK-NEXT: sched.optimizer_step @p::@fsdp.layers.0 {{.*}} grads([[SG]] : memref<8xf32, #sched.space<device>>)
// CHECK-NEXT: sched.free [[SG]]
