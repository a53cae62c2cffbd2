// zero1 with bf16_mixed: the fp32 master and the state are shards, the working
// parameters full bf16; the step updates the master and casts it into the
// bf16 shard the in-place all-gather then spreads.
// RUN: plan-opt %s -sched-insert-casts | FileCheck %s
// With reduce_dtype = bf16 the gradient shard is bf16 and cast for the step.
// RUN: sed "s/loss_scale = <kind = none>/loss_scale = <kind = none>, reduce_dtype = bf16/" %s | plan-opt -sched-insert-casts | FileCheck %s --check-prefix=BF16

#dev = #sched.space<device>
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = adamw, lr = 0.001>, micro_batch = 1, seq_len = 8, precision = bf16_mixed, loss_scale = <kind = none>, grad_clip = 1.0, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = zero1, wrap = <kind = transformer_block>, offload = <>> {
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
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = adamw, lr = 0.001>, micro_batch = 1, seq_len = 8, precision = bf16_mixed, loss_scale = <kind = none>, grad_clip = 1.0, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = zero1, wrap = <kind = transformer_block>, offload = <>> {
  %p0 = sched.alloc "fsdp.root.param" role param persistent : memref<36xf32, #dev>
  %g0 = sched.alloc "fsdp.root.grad" role grad persistent : memref<36xf32, #dev>
  %m0 = sched.alloc "fsdp.root.exp_avg" role exp_avg persistent : memref<18xf32, #dev>
  %v0 = sched.alloc "fsdp.root.exp_avg_sq" role exp_avg_sq persistent : memref<18xf32, #dev>
  %p1 = sched.alloc "fsdp.layers.0.param" role param persistent : memref<16xf32, #dev>
  %g1 = sched.alloc "fsdp.layers.0.grad" role grad persistent : memref<16xf32, #dev>
  %m1 = sched.alloc "fsdp.layers.0.exp_avg" role exp_avg persistent : memref<8xf32, #dev>
  %v1 = sched.alloc "fsdp.layers.0.exp_avg_sq" role exp_avg_sq persistent : memref<8xf32, #dev>
  %embed = sched.view %p0[0] : memref<36xf32, #dev> to memref<32xf32, #dev>
  %head = sched.view %p0[32] : memref<36xf32, #dev> to memref<4xf32, #dev>
  %ge = sched.view %g0[0] : memref<36xf32, #dev> to memref<32xf32, #dev>
  %gh = sched.view %g0[32] : memref<36xf32, #dev> to memref<4xf32, #dev>
  %l0 = sched.view %p1[0] : memref<16xf32, #dev> to memref<16xf32, #dev>
  %gl = sched.view %g1[0] : memref<16xf32, #dev> to memref<16xf32, #dev>
  sched.zero %g0 : memref<36xf32, #dev>
  sched.zero %g1 : memref<16xf32, #dev>
  %a0 = sched.alloc "embed.saves.mb0" role activations : memref<8xf32, #dev>
  sched.forward @p::@embed mb 0 params(%embed : memref<32xf32, #dev>) saves(%a0 : memref<8xf32, #dev>)
  %a1 = sched.alloc "layers.0.saves.mb0" role activations : memref<64xf32, #dev>
  sched.forward @p::@"layers.0" mb 0 params(%l0 : memref<16xf32, #dev>) saves(%a1 : memref<64xf32, #dev>)
  %a2 = sched.alloc "head.saves.mb0" role activations : memref<40xf32, #dev>
  sched.forward @p::@head mb 0 params(%head : memref<4xf32, #dev>) tied(%embed : memref<32xf32, #dev>) saves(%a2 : memref<40xf32, #dev>)
  sched.loss @p::@head mb 0 scale 1.0
  sched.backward @p::@head mb 0 params(%head : memref<4xf32, #dev>) tied(%embed : memref<32xf32, #dev>) activations(%a2 : memref<40xf32, #dev>) grads(%gh : memref<4xf32, #dev>) tied_grads(%ge : memref<32xf32, #dev>)
  sched.free %a2 : memref<40xf32, #dev>
  sched.backward @p::@"layers.0" mb 0 params(%l0 : memref<16xf32, #dev>) activations(%a1 : memref<64xf32, #dev>) grads(%gl : memref<16xf32, #dev>)
  sched.free %a1 : memref<64xf32, #dev>
  %s1 = sched.alloc "fsdp.layers.0.grad.shard" role grad : memref<8xf32, #dev>
  %e0 = sched.reduce_scatter %g1 into %s1 group shard reduce avg : memref<16xf32, #dev>, memref<8xf32, #dev>
  sched.backward @p::@embed mb 0 params(%embed : memref<32xf32, #dev>) activations(%a0 : memref<8xf32, #dev>) grads(%ge : memref<32xf32, #dev>)
  sched.free %a0 : memref<8xf32, #dev>
  %s0 = sched.alloc "fsdp.root.grad.shard" role grad : memref<18xf32, #dev>
  %e1 = sched.reduce_scatter %g0 into %s0 group shard reduce avg : memref<36xf32, #dev>, memref<18xf32, #dev>
  sched.wait %e0
  sched.wait %e1
  %n = sched.alloc "grad_norm" role scalar : memref<1xf32, #dev>
  sched.zero %n : memref<1xf32, #dev>
  sched.grad_norm %s0 into %n : memref<18xf32, #dev>, memref<1xf32, #dev>
  sched.grad_norm %s1 into %n : memref<8xf32, #dev>, memref<1xf32, #dev>
  %e2 = sched.all_reduce %n group shard reduce sum : memref<1xf32, #dev>
  sched.wait %e2
  %ps0 = sched.shard_view %p0 group shard : memref<36xf32, #dev> to memref<18xf32, #dev>
  sched.optimizer_step @p::@fsdp.root params(%ps0 : memref<18xf32, #dev>) grads(%s0 : memref<18xf32, #dev>) state(%m0, %v0 : memref<18xf32, #dev>, memref<18xf32, #dev>) norm(%n : memref<1xf32, #dev>)
  %ps1 = sched.shard_view %p1 group shard : memref<16xf32, #dev> to memref<8xf32, #dev>
  sched.optimizer_step @p::@"fsdp.layers.0" params(%ps1 : memref<8xf32, #dev>) grads(%s1 : memref<8xf32, #dev>) state(%m1, %v1 : memref<8xf32, #dev>, memref<8xf32, #dev>) norm(%n : memref<1xf32, #dev>)
  sched.free %n : memref<1xf32, #dev>
  sched.free %s0 : memref<18xf32, #dev>
  sched.free %s1 : memref<8xf32, #dev>
  %e3 = sched.all_gather %ps0 into %p0 group shard : memref<18xf32, #dev>, memref<36xf32, #dev>
  %e4 = sched.all_gather %ps1 into %p1 group shard : memref<8xf32, #dev>, memref<16xf32, #dev>
  sched.wait %e3
  sched.wait %e4
}

// The master and the state are shards; the working parameters stay full.
// CHECK-LABEL: sched.program @p.step
// CHECK:      [[P0:%.+]] = sched.alloc "fsdp.root.param" role {{ *}}param persistent : memref<36xbf16
// CHECK-NEXT: [[M0:%.+]] = sched.alloc "fsdp.root.master" role {{ *}}master persistent : memref<18xf32
// CHECK-NEXT: [[G0:%.+]] = sched.alloc "fsdp.root.grad" role {{ *}}grad persistent : memref<36xbf16
// CHECK-NEXT: sched.alloc "fsdp.root.exp_avg" {{.*}} : memref<18xf32
// The reduce-scatter's transient shard holds the fp32 (reduce_dtype) result,
// which the step reads as it is.
// CHECK:      [[S0:%.+]] = sched.alloc "fsdp.root.grad.shard" role {{ *}}grad : memref<18xf32
// CHECK-NEXT: [[R0:%.+]] = sched.alloc "fsdp.root.grad.reduce" role {{ *}}staging : memref<36xf32
// CHECK-NEXT: sched.cast [[G0]] into [[R0]] : memref<36xbf16, {{.*}}>, memref<36xf32
// CHECK-NEXT: [[E0:%.+]] = sched.reduce_scatter [[R0]] into [[S0]] group {{ *}}shard reduce {{ *}}avg : memref<36xf32, {{.*}}>, memref<18xf32
// CHECK:      sched.wait [[E0]]
// CHECK-NEXT: sched.free [[R0]]
// CHECK:      sched.grad_norm [[S0]] into
// CHECK:      [[PS0:%.+]] = sched.shard_view [[P0]] group {{ *}}shard : memref<36xbf16, {{.*}}> to memref<18xbf16
// CHECK-NEXT: sched.optimizer_step @p::@fsdp.root params([[M0]] : memref<18xf32, {{.*}}) grads([[S0]] : memref<18xf32
// CHECK-NEXT: sched.cast [[M0]] into [[PS0]] : memref<18xf32, {{.*}}>, memref<18xbf16
// CHECK:      sched.free [[S0]]
// CHECK:      sched.all_gather [[PS0]] into [[P0]] group {{ *}}shard : memref<18xbf16, {{.*}}>, memref<36xbf16

// BF16-LABEL: sched.program @p.step
// BF16:       [[G0:%.+]] = sched.alloc "fsdp.root.grad" {{.*}} : memref<36xbf16
// BF16:       [[S0:%.+]] = sched.alloc "fsdp.root.grad.shard" role {{ *}}grad : memref<18xbf16
// BF16-NEXT:  [[E0:%.+]] = sched.reduce_scatter [[G0]] into [[S0]] group {{ *}}shard reduce {{ *}}avg : memref<36xbf16, {{.*}}>, memref<18xbf16
// BF16:       sched.grad_norm [[S0]] into {{.*}} : memref<18xbf16
// BF16:       [[S32:%.+]] = sched.alloc "fsdp.root.grad.shard.fp32" role {{ *}}staging : memref<18xf32
// BF16-NEXT:  sched.cast [[S0]] into [[S32]] : memref<18xbf16, {{.*}}>, memref<18xf32
// BF16-NEXT:  sched.optimizer_step @p::@fsdp.root params({{%.+}} : memref<18xf32, {{.*}}) grads([[S32]] : memref<18xf32
// BF16-NEXT:  sched.cast
// BF16-NEXT:  sched.free [[S32]]
