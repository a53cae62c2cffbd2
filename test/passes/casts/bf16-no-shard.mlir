// bf16_mixed with no_shard (DDP): full bf16 working parameters, fp32 masters
// and state, the all-reduces in fp32 on a converted copy of the bf16 gradient.
// RUN: plan-opt %s -sched-insert-casts | FileCheck %s
// With grad_dtype = fp32 (Megatron's main_grad): backward adds into fp32
// gradients, the all-reduce runs on them in place and the step reads them.
// RUN: sed 's/precision = bf16_mixed,/precision = bf16_mixed, grad_dtype = fp32,/' %s \
// RUN:   | plan-opt -sched-insert-casts | FileCheck %s --check-prefix=F32

#dev = #sched.space<device>
shard.grid @mesh(shape = 1x2x1x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = adamw, lr = 0.001>, micro_batch = 1, seq_len = 8, precision = bf16_mixed, loss_scale = <kind = none>, grad_clip = 1.0, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
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
  plan.group @fsdp.root units [@embed, @head] {numel = 36 : i64, padded_numel = 36 : i64, shard_numel = 36 : i64}
  plan.group @fsdp.layers.0 units [@"layers.0"] {numel = 16 : i64, padded_numel = 16 : i64, shard_numel = 16 : i64}
}
sched.program @p.step for @p micro_batches 1
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 2, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = adamw, lr = 0.001>, micro_batch = 1, seq_len = 8, precision = bf16_mixed, loss_scale = <kind = none>, grad_clip = 1.0, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  %p0 = sched.alloc "fsdp.root.param" role param persistent : memref<36xf32, #dev>
  %g0 = sched.alloc "fsdp.root.grad" role grad persistent : memref<36xf32, #dev>
  %m0 = sched.alloc "fsdp.root.exp_avg" role exp_avg persistent : memref<36xf32, #dev>
  %v0 = sched.alloc "fsdp.root.exp_avg_sq" role exp_avg_sq persistent : memref<36xf32, #dev>
  %p1 = sched.alloc "fsdp.layers.0.param" role param persistent : memref<16xf32, #dev>
  %g1 = sched.alloc "fsdp.layers.0.grad" role grad persistent : memref<16xf32, #dev>
  %m1 = sched.alloc "fsdp.layers.0.exp_avg" role exp_avg persistent : memref<16xf32, #dev>
  %v1 = sched.alloc "fsdp.layers.0.exp_avg_sq" role exp_avg_sq persistent : memref<16xf32, #dev>
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
  %e0 = sched.all_reduce %g1 group world reduce avg : memref<16xf32, #dev>
  sched.backward @p::@embed mb 0 params(%embed : memref<32xf32, #dev>) activations(%a0 : memref<8xf32, #dev>) grads(%ge : memref<32xf32, #dev>)
  sched.free %a0 : memref<8xf32, #dev>
  %e1 = sched.all_reduce %g0 group world reduce avg : memref<36xf32, #dev>
  sched.wait %e0
  sched.wait %e1
  %n = sched.alloc "grad_norm" role scalar : memref<1xf32, #dev>
  sched.zero %n : memref<1xf32, #dev>
  sched.grad_norm %g0 into %n : memref<36xf32, #dev>, memref<1xf32, #dev>
  sched.grad_norm %g1 into %n : memref<16xf32, #dev>, memref<1xf32, #dev>
  sched.optimizer_step @p::@fsdp.root params(%p0 : memref<36xf32, #dev>) grads(%g0 : memref<36xf32, #dev>) state(%m0, %v0 : memref<36xf32, #dev>, memref<36xf32, #dev>) norm(%n : memref<1xf32, #dev>)
  sched.optimizer_step @p::@"fsdp.layers.0" params(%p1 : memref<16xf32, #dev>) grads(%g1 : memref<16xf32, #dev>) state(%m1, %v1 : memref<16xf32, #dev>, memref<16xf32, #dev>) norm(%n : memref<1xf32, #dev>)
  sched.free %n : memref<1xf32, #dev>
}

// CHECK-LABEL: sched.program @p.step
// CHECK:      [[P0:%.+]] = sched.alloc "fsdp.root.param" role {{ *}}param persistent : memref<36xbf16
// CHECK-NEXT: [[M0:%.+]] = sched.alloc "fsdp.root.master" role {{ *}}master persistent : memref<36xf32
// CHECK-NEXT: [[G0:%.+]] = sched.alloc "fsdp.root.grad" role {{ *}}grad persistent : memref<36xbf16
// CHECK-NEXT: sched.alloc "fsdp.root.exp_avg" {{.*}} : memref<36xf32
// Unit views follow their buffer into bf16, tied ones included.
// CHECK:      [[EMB:%.+]] = sched.view [[P0]][0] : memref<36xbf16, {{.*}}> to memref<32xbf16
// CHECK:      sched.forward @p::@head mb 0 params({{%.+}} : memref<4xbf16, {{.*}}>) tied([[EMB]] : memref<32xbf16
// The all-reduce runs on an fp32 copy of the bf16 gradient, cast back once
// waited for.
// CHECK:      [[R0:%.+]] = sched.alloc "fsdp.root.grad.reduce" role {{ *}}staging : memref<36xf32
// CHECK-NEXT: sched.cast [[G0]] into [[R0]] : memref<36xbf16, {{.*}}>, memref<36xf32
// CHECK-NEXT: [[E0:%.+]] = sched.all_reduce [[R0]] group {{ *}}world reduce {{ *}}avg : memref<36xf32
// CHECK:      sched.wait [[E0]]
// CHECK-NEXT: sched.cast [[R0]] into [[G0]] : memref<36xf32, {{.*}}>, memref<36xbf16
// CHECK-NEXT: sched.free [[R0]]
// The norm reads the bf16 gradients; each step's fp32 copy is made right
// before it and freed after it, so one group's copy is alive at a time.
// CHECK:      sched.grad_norm [[G0]] into {{.*}} : memref<36xbf16
// CHECK-NEXT: sched.grad_norm [[G1:%.+]] into {{.*}} : memref<16xbf16
// CHECK-NEXT: [[G32:%.+]] = sched.alloc "fsdp.root.grad.fp32" role {{ *}}staging : memref<36xf32
// CHECK-NEXT: sched.cast [[G0]] into [[G32]]
// CHECK-NEXT: sched.optimizer_step @p::@fsdp.root params([[M0]] : memref<36xf32, {{.*}}) grads([[G32]] : memref<36xf32
// CHECK-NEXT: sched.cast [[M0]] into [[P0]] : memref<36xf32, {{.*}}>, memref<36xbf16
// CHECK-NEXT: sched.free [[G32]]
// CHECK-NEXT: [[G132:%.+]] = sched.alloc "fsdp.layers.0.grad.fp32" role {{ *}}staging : memref<16xf32
// CHECK-NEXT: sched.cast [[G1]] into [[G132]]
// CHECK-NEXT: sched.optimizer_step @p::@fsdp.layers.0 {{.*}} grads([[G132]] : memref<16xf32
// CHECK-NEXT: sched.cast
// CHECK-NEXT: sched.free [[G132]]

// F32-LABEL: sched.program @p.step
// F32:      [[P0:%.+]] = sched.alloc "fsdp.root.param" role {{ *}}param persistent : memref<36xbf16
// F32-NEXT: [[M0:%.+]] = sched.alloc "fsdp.root.master" role {{ *}}master persistent : memref<36xf32
// F32-NEXT: [[G0:%.+]] = sched.alloc "fsdp.root.grad" role {{ *}}grad persistent : memref<36xf32
// F32:      [[GH:%.+]] = sched.view [[G0]][32] : memref<36xf32, {{.*}}> to memref<4xf32
// F32:      sched.backward @p::@head mb 0 params({{%.+}} : memref<4xbf16, {{.*}}) {{.*}} grads([[GH]] : memref<4xf32
// F32-NOT:  sched.cast
// F32:      [[E0:%.+]] = sched.all_reduce [[G0]] group {{ *}}world reduce {{ *}}avg : memref<36xf32
// F32-NOT:  sched.cast
// F32:      sched.grad_norm [[G0]] into {{.*}} : memref<36xf32
// F32-NOT:  .fp32
// F32:      sched.optimizer_step @p::@fsdp.root params([[M0]] : memref<36xf32, {{.*}}) grads([[G0]] : memref<36xf32
// F32-NEXT: sched.cast [[M0]] into [[P0]] : memref<36xf32, {{.*}}>, memref<36xbf16
