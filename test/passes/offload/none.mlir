// Without offload the pass changes nothing.
// RUN: plan-opt %s > %t.in.mlir
// RUN: plan-opt %s -sched-insert-offload-copies > %t.out.mlir
// RUN: diff %t.in.mlir %t.out.mlir
// RUN: FileCheck %s < %t.out.mlir
// CHECK-NOT: sched.copy
// CHECK-NOT: pinned_host
// CHECK: sched.optimizer_step @p::@fsdp.root params({{%.+}} : memref<18xf32, #sched.space<device>>)
// CHECK-NOT: sched.copy

#dev = #sched.space<device>
shard.grid @mesh(shape = 1x1x2x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = adamw, lr = 0.001>, micro_batch = 1, seq_len = 8, precision = bf16_mixed, loss_scale = <kind = none>, grad_clip = 1.0, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
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
    parallel #plan.parallel<sharding = full_shard, wrap = <kind = transformer_block>, offload = <>> {
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
  sched.free %15 : memref<16xbf16, #dev>
  %19 = sched.alloc "head.saves.mb0" role activations : memref<40xbf16, #dev>
  sched.forward @p::@head mb 0 params(%13 : memref<4xbf16, #dev>) tied(%12 : memref<32xbf16, #dev>) saves(%19 : memref<40xbf16, #dev>)
  sched.free %10 : memref<36xbf16, #dev>
  sched.loss @p::@head mb 0 scale 1.000000e+00
  %20 = sched.alloc "fsdp.root.gathered" role gathered : memref<36xbf16, #dev>
  %21 = sched.all_gather %0 into %20 group shard : memref<18xbf16, #dev>, memref<36xbf16, #dev>
  %22 = sched.view %20[0] : memref<36xbf16, #dev> to memref<32xbf16, #dev>
  %23 = sched.view %20[32] : memref<36xbf16, #dev> to memref<4xbf16, #dev>
  %24 = sched.alloc "fsdp.root.grad.full" role unsharded_grad : memref<36xbf16, #dev>
  sched.zero %24 : memref<36xbf16, #dev>
  %25 = sched.view %24[0] : memref<36xbf16, #dev> to memref<32xbf16, #dev>
  %26 = sched.view %24[32] : memref<36xbf16, #dev> to memref<4xbf16, #dev>
  sched.wait %21
  sched.backward @p::@head mb 0 params(%23 : memref<4xbf16, #dev>) tied(%22 : memref<32xbf16, #dev>) activations(%19 : memref<40xbf16, #dev>) grads(%26 : memref<4xbf16, #dev>) tied_grads(%25 : memref<32xbf16, #dev>)
  sched.free %19 : memref<40xbf16, #dev>
  %27 = sched.alloc "fsdp.layers.0.gathered" role gathered : memref<16xbf16, #dev>
  %28 = sched.all_gather %5 into %27 group shard : memref<8xbf16, #dev>, memref<16xbf16, #dev>
  %29 = sched.view %27[0] : memref<16xbf16, #dev> to memref<16xbf16, #dev>
  %30 = sched.alloc "fsdp.layers.0.grad.full" role unsharded_grad : memref<16xbf16, #dev>
  sched.zero %30 : memref<16xbf16, #dev>
  %31 = sched.view %30[0] : memref<16xbf16, #dev> to memref<16xbf16, #dev>
  sched.wait %28
  sched.backward @p::@layers.0 mb 0 params(%29 : memref<16xbf16, #dev>) activations(%18 : memref<64xbf16, #dev>) grads(%31 : memref<16xbf16, #dev>)
  sched.free %18 : memref<64xbf16, #dev>
  sched.free %27 : memref<16xbf16, #dev>
  %32 = sched.alloc "fsdp.layers.0.grad.full.reduce" role staging : memref<16xf32, #dev>
  sched.cast %30 into %32 : memref<16xbf16, #dev>, memref<16xf32, #dev>
  %33 = sched.alloc "fsdp.layers.0.grad.reduce" role staging : memref<8xf32, #dev>
  %34 = sched.reduce_scatter %32 into %33 group shard reduce avg : memref<16xf32, #dev>, memref<8xf32, #dev>
  sched.backward @p::@embed mb 0 params(%22 : memref<32xbf16, #dev>) activations(%14 : memref<8xbf16, #dev>) grads(%25 : memref<32xbf16, #dev>)
  sched.free %14 : memref<8xbf16, #dev>
  sched.free %20 : memref<36xbf16, #dev>
  %35 = sched.alloc "fsdp.root.grad.full.reduce" role staging : memref<36xf32, #dev>
  sched.cast %24 into %35 : memref<36xbf16, #dev>, memref<36xf32, #dev>
  %36 = sched.alloc "fsdp.root.grad.reduce" role staging : memref<18xf32, #dev>
  %37 = sched.reduce_scatter %35 into %36 group shard reduce avg : memref<36xf32, #dev>, memref<18xf32, #dev>
  sched.wait %34
  sched.accumulate %33 into %7 : memref<8xf32, #dev>, memref<8xbf16, #dev>
  sched.free %33 : memref<8xf32, #dev>
  sched.free %32 : memref<16xf32, #dev>
  sched.free %30 : memref<16xbf16, #dev>
  sched.wait %37
  sched.accumulate %36 into %2 : memref<18xf32, #dev>, memref<18xbf16, #dev>
  sched.free %36 : memref<18xf32, #dev>
  sched.free %35 : memref<36xf32, #dev>
  sched.free %24 : memref<36xbf16, #dev>
  %38 = sched.alloc "grad_norm" role scalar : memref<1xf32, #dev>
  sched.zero %38 : memref<1xf32, #dev>
  %39 = sched.alloc "fsdp.root.grad.fp32" role staging : memref<18xf32, #dev>
  sched.cast %2 into %39 : memref<18xbf16, #dev>, memref<18xf32, #dev>
  sched.grad_norm %39 into %38 : memref<18xf32, #dev>, memref<1xf32, #dev>
  %40 = sched.alloc "fsdp.layers.0.grad.fp32" role staging : memref<8xf32, #dev>
  sched.cast %7 into %40 : memref<8xbf16, #dev>, memref<8xf32, #dev>
  sched.grad_norm %40 into %38 : memref<8xf32, #dev>, memref<1xf32, #dev>
  %41 = sched.all_reduce %38 group shard reduce sum : memref<1xf32, #dev>
  sched.wait %41
  sched.optimizer_step @p::@fsdp.root params(%1 : memref<18xf32, #dev>) grads(%39 : memref<18xf32, #dev>) state(%3, %4 : memref<18xf32, #dev>, memref<18xf32, #dev>) norm(%38 : memref<1xf32, #dev>)
  sched.cast %1 into %0 : memref<18xf32, #dev>, memref<18xbf16, #dev>
  sched.free %39 : memref<18xf32, #dev>
  sched.optimizer_step @p::@fsdp.layers.0 params(%6 : memref<8xf32, #dev>) grads(%40 : memref<8xf32, #dev>) state(%8, %9 : memref<8xf32, #dev>, memref<8xf32, #dev>) norm(%38 : memref<1xf32, #dev>)
  sched.cast %6 into %5 : memref<8xf32, #dev>, memref<8xbf16, #dev>
  sched.free %40 : memref<8xf32, #dev>
  sched.free %38 : memref<1xf32, #dev>
}
