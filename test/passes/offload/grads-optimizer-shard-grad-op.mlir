// shard_grad_op in bf16_mixed with offload { grads = cpu  optimizer = cpu } and
// the step on the CPU (DeepSpeed ZeRO-Offload): the gradient shards, masters and
// state live on the host; each reduce-scatter lands on the device and is added
// into the host shard; the step reads host fp32 gradients; the updated master
// is cast on the host and copied to the device parameters.
// RUN: plan-opt %s -sched-insert-offload-copies | FileCheck %s

#dev = #sched.space<device>
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = adamw, lr = 0.001>, micro_batch = 1, seq_len = 8, precision = bf16_mixed, loss_scale = <kind = none>, grad_clip = 1.0, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = shard_grad_op, wrap = <kind = transformer_block>, offload = <grads = cpu, optimizer = cpu>, optimizer_step = cpu> {
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
    parallel #plan.parallel<sharding = shard_grad_op, wrap = <kind = transformer_block>, offload = <grads = cpu, optimizer = cpu>, optimizer_step = cpu> {
  %0 = sched.alloc "fsdp.root.param" role param persistent : memref<18xbf16, #dev>
  %1 = sched.alloc "fsdp.root.master" role master persistent : memref<18xf32, #dev>
  %2 = sched.alloc "fsdp.root.grad" role grad persistent : memref<18xbf16, #dev>
  %3 = sched.alloc "fsdp.root.exp_avg" role exp_avg persistent : memref<18xf32, #dev>
  %4 = sched.alloc "fsdp.root.exp_avg_sq" role exp_avg_sq persistent : memref<18xf32, #dev>
  %5 = sched.alloc "fsdp.layers.0.param" role param persistent : memref<8xbf16, #dev>
  %6 = sched.alloc "fsdp.layers.0.master" role master persistent : memref<8xf32, #dev>
  %7 = sched.alloc "fsdp.layers.0.grad" role grad persistent : memref<8xbf16, #dev>
  %8 = sched.alloc "fsdp.layers.0.exp_avg" role exp_avg persistent : memref<8xf32, #dev>
  %9 = sched.alloc "fsdp.layers.0.exp_avg_sq" role exp_avg_sq persistent : memref<8xf32, #dev>
  sched.zero %2 : memref<18xbf16, #dev>
  sched.zero %7 : memref<8xbf16, #dev>
  %10 = sched.alloc "fsdp.root.gathered" role gathered : memref<36xbf16, #dev>
  %11 = sched.all_gather %0 into %10 group shard : memref<18xbf16, #dev>, memref<36xbf16, #dev>
  %12 = sched.view %10[0] : memref<36xbf16, #dev> to memref<32xbf16, #dev>
  %13 = sched.view %10[32] : memref<36xbf16, #dev> to memref<4xbf16, #dev>
  %14 = sched.alloc "embed.saves.mb0" role activations : memref<8xbf16, #dev>
  sched.wait %11
  sched.forward @p::@embed mb 0 params(%12 : memref<32xbf16, #dev>) saves(%14 : memref<8xbf16, #dev>)
  %15 = sched.alloc "fsdp.layers.0.gathered" role gathered : memref<16xbf16, #dev>
  %16 = sched.all_gather %5 into %15 group shard : memref<8xbf16, #dev>, memref<16xbf16, #dev>
  %17 = sched.view %15[0] : memref<16xbf16, #dev> to memref<16xbf16, #dev>
  %18 = sched.alloc "layers.0.saves.mb0" role activations : memref<64xbf16, #dev>
  sched.wait %16
  sched.forward @p::@layers.0 mb 0 params(%17 : memref<16xbf16, #dev>) saves(%18 : memref<64xbf16, #dev>)
  %19 = sched.alloc "head.saves.mb0" role activations : memref<40xbf16, #dev>
  sched.forward @p::@head mb 0 params(%13 : memref<4xbf16, #dev>) tied(%12 : memref<32xbf16, #dev>) saves(%19 : memref<40xbf16, #dev>)
  sched.loss @p::@head mb 0 scale 1.000000e+00
  %20 = sched.alloc "fsdp.root.grad.full" role unsharded_grad : memref<36xbf16, #dev>
  sched.zero %20 : memref<36xbf16, #dev>
  %21 = sched.view %20[0] : memref<36xbf16, #dev> to memref<32xbf16, #dev>
  %22 = sched.view %20[32] : memref<36xbf16, #dev> to memref<4xbf16, #dev>
  sched.backward @p::@head mb 0 params(%13 : memref<4xbf16, #dev>) tied(%12 : memref<32xbf16, #dev>) activations(%19 : memref<40xbf16, #dev>) grads(%22 : memref<4xbf16, #dev>) tied_grads(%21 : memref<32xbf16, #dev>)
  sched.free %19 : memref<40xbf16, #dev>
  %23 = sched.alloc "fsdp.layers.0.grad.full" role unsharded_grad : memref<16xbf16, #dev>
  sched.zero %23 : memref<16xbf16, #dev>
  %24 = sched.view %23[0] : memref<16xbf16, #dev> to memref<16xbf16, #dev>
  sched.backward @p::@layers.0 mb 0 params(%17 : memref<16xbf16, #dev>) activations(%18 : memref<64xbf16, #dev>) grads(%24 : memref<16xbf16, #dev>)
  sched.free %18 : memref<64xbf16, #dev>
  sched.free %15 : memref<16xbf16, #dev>
  %25 = sched.alloc "fsdp.layers.0.grad.full.reduce" role staging : memref<16xf32, #dev>
  sched.cast %23 into %25 : memref<16xbf16, #dev>, memref<16xf32, #dev>
  %26 = sched.alloc "fsdp.layers.0.grad.reduce" role staging : memref<8xf32, #dev>
  %27 = sched.reduce_scatter %25 into %26 group shard reduce avg : memref<16xf32, #dev>, memref<8xf32, #dev>
  sched.backward @p::@embed mb 0 params(%12 : memref<32xbf16, #dev>) activations(%14 : memref<8xbf16, #dev>) grads(%21 : memref<32xbf16, #dev>)
  sched.free %14 : memref<8xbf16, #dev>
  sched.free %10 : memref<36xbf16, #dev>
  %28 = sched.alloc "fsdp.root.grad.full.reduce" role staging : memref<36xf32, #dev>
  sched.cast %20 into %28 : memref<36xbf16, #dev>, memref<36xf32, #dev>
  %29 = sched.alloc "fsdp.root.grad.reduce" role staging : memref<18xf32, #dev>
  %30 = sched.reduce_scatter %28 into %29 group shard reduce avg : memref<36xf32, #dev>, memref<18xf32, #dev>
  sched.wait %27
  sched.accumulate %26 into %7 : memref<8xf32, #dev>, memref<8xbf16, #dev>
  sched.free %26 : memref<8xf32, #dev>
  sched.free %25 : memref<16xf32, #dev>
  sched.free %23 : memref<16xbf16, #dev>
  sched.wait %30
  sched.accumulate %29 into %2 : memref<18xf32, #dev>, memref<18xbf16, #dev>
  sched.free %29 : memref<18xf32, #dev>
  sched.free %28 : memref<36xf32, #dev>
  sched.free %20 : memref<36xbf16, #dev>
  %31 = sched.alloc "grad_norm" role scalar : memref<1xf32, #dev>
  sched.zero %31 : memref<1xf32, #dev>
  %32 = sched.alloc "fsdp.root.grad.fp32" role staging : memref<18xf32, #dev>
  sched.cast %2 into %32 : memref<18xbf16, #dev>, memref<18xf32, #dev>
  sched.grad_norm %32 into %31 : memref<18xf32, #dev>, memref<1xf32, #dev>
  %33 = sched.alloc "fsdp.layers.0.grad.fp32" role staging : memref<8xf32, #dev>
  sched.cast %7 into %33 : memref<8xbf16, #dev>, memref<8xf32, #dev>
  sched.grad_norm %33 into %31 : memref<8xf32, #dev>, memref<1xf32, #dev>
  %34 = sched.all_reduce %31 group shard reduce sum : memref<1xf32, #dev>
  sched.wait %34
  sched.optimizer_step @p::@fsdp.root params(%1 : memref<18xf32, #dev>) grads(%32 : memref<18xf32, #dev>) state(%3, %4 : memref<18xf32, #dev>, memref<18xf32, #dev>) norm(%31 : memref<1xf32, #dev>)
  sched.cast %1 into %0 : memref<18xf32, #dev>, memref<18xbf16, #dev>
  sched.free %32 : memref<18xf32, #dev>
  sched.optimizer_step @p::@fsdp.layers.0 params(%6 : memref<8xf32, #dev>) grads(%33 : memref<8xf32, #dev>) state(%8, %9 : memref<8xf32, #dev>, memref<8xf32, #dev>) norm(%31 : memref<1xf32, #dev>)
  sched.cast %6 into %5 : memref<8xf32, #dev>, memref<8xbf16, #dev>
  sched.free %33 : memref<8xf32, #dev>
  sched.free %31 : memref<1xf32, #dev>
}

// CHECK-LABEL: sched.program @p.step
// CHECK:      [[P0:%.+]] = sched.alloc "fsdp.root.param" {{.*}} : memref<18xbf16, #sched.space<device>>
// CHECK-NEXT: [[M0:%.+]] = sched.alloc "fsdp.root.master" {{.*}} : memref<18xf32, #sched.space<pinned_host>>
// CHECK-NEXT: [[G0:%.+]] = sched.alloc "fsdp.root.grad" {{.*}} : memref<18xbf16, #sched.space<pinned_host>>
// CHECK-NEXT: [[A0:%.+]] = sched.alloc "fsdp.root.exp_avg" {{.*}} : memref<18xf32, #sched.space<pinned_host>>
// CHECK-NEXT: [[B0:%.+]] = sched.alloc "fsdp.root.exp_avg_sq" {{.*}} : memref<18xf32, #sched.space<pinned_host>>
// CHECK:      sched.zero [[G0]] : memref<18xbf16, #sched.space<pinned_host>>
// Parameters stay on the device: their gathers need no copy.
// CHECK-NOT:  sched.copy
// CHECK:      sched.loss

// The fp32 reduce-scatter lands on the device; once waited, it is copied to
// the host and added into the host bf16 shard.
// CHECK:      [[R0:%.+]] = sched.alloc "fsdp.root.grad.reduce" {{.*}} : memref<18xf32, #sched.space<device>>
// CHECK-NEXT: [[E0:%.+]] = sched.reduce_scatter {{%.+}} into [[R0]]
// CHECK:      sched.wait [[E0]]
// CHECK-NEXT: [[H0:%.+]] = sched.alloc "fsdp.root.grad.reduce" role {{ *}}staging : memref<18xf32, #sched.space<pinned_host>>
// CHECK-NEXT: [[C0:%.+]] = sched.copy [[R0]] into [[H0]] : memref<18xf32, #sched.space<device>>, memref<18xf32, #sched.space<pinned_host>>
// CHECK-NEXT: sched.wait [[C0]]
// CHECK-NEXT: sched.accumulate [[H0]] into [[G0]] : memref<18xf32, #sched.space<pinned_host>>, memref<18xbf16, #sched.space<pinned_host>>
// CHECK-NEXT: sched.free [[H0]]
// CHECK-NEXT: sched.free [[R0]]

// The step's fp32 gradient is made on the host, its norm computed there into a
// host copy of the device norm.
// CHECK:      [[N:%.+]] = sched.alloc "grad_norm" {{.*}} #sched.space<device>>
// CHECK:      [[G32:%.+]] = sched.alloc "fsdp.root.grad.fp32" {{.*}} : memref<18xf32, #sched.space<pinned_host>>
// CHECK-NEXT: sched.cast [[G0]] into [[G32]] : memref<18xbf16, #sched.space<pinned_host>>, memref<18xf32, #sched.space<pinned_host>>
// CHECK-NEXT: [[NH:%.+]] = sched.alloc "grad_norm.staging" {{.*}} #sched.space<pinned_host>>
// CHECK-NEXT: [[NC:%.+]] = sched.copy [[N]] into [[NH]]
// CHECK-NEXT: sched.wait [[NC]]
// CHECK-NEXT: sched.grad_norm [[G32]] into [[NH]]
// CHECK-NEXT: [[NB:%.+]] = sched.copy [[NH]] into [[N]]
// CHECK:      sched.wait [[NB]]
// CHECK-NEXT: sched.free [[NH]]
// CHECK:      sched.all_reduce [[N]] group {{ *}}shard reduce {{ *}}sum

// The step runs on the host; the master is cast to bf16 on the host and the
// result copied to the device parameters.
// CHECK:      [[NS:%.+]] = sched.alloc "grad_norm.staging"
// CHECK-NEXT: [[NSC:%.+]] = sched.copy [[N]] into [[NS]]
// CHECK-NEXT: sched.wait [[NSC]]
// CHECK-NEXT: sched.optimizer_step @p::@fsdp.root params([[M0]] : memref<18xf32, #sched.space<pinned_host>>) grads([[G32]] : memref<18xf32, #sched.space<pinned_host>>) state([[A0]], [[B0]] : {{.*}}) norm([[NS]] : memref<1xf32, #sched.space<pinned_host>>)
// CHECK-NEXT: sched.free [[NS]]
// CHECK-NEXT: [[W0:%.+]] = sched.alloc "fsdp.root.param.staging" role {{ *}}staging : memref<18xbf16, #sched.space<pinned_host>>
// CHECK-NEXT: sched.cast [[M0]] into [[W0]] : memref<18xf32, #sched.space<pinned_host>>, memref<18xbf16, #sched.space<pinned_host>>
// CHECK-NEXT: [[UP:%.+]] = sched.copy [[W0]] into [[P0]] : memref<18xbf16, #sched.space<pinned_host>>, memref<18xbf16, #sched.space<device>>
// CHECK-NEXT: sched.free [[G32]]
// CHECK:      sched.optimizer_step @p::@fsdp.layers.0
// CHECK:      sched.wait [[UP]]
// CHECK-NEXT: sched.free [[W0]]
