// Every op of the sched dialect, in each of its optional forms, prints and
// parses back: the custom form, and the generic one with the enum attributes
// in their full form (#sched<role param>, #sched<group shard>).
// RUN: plan-opt %s | plan-opt | FileCheck %s
// RUN: plan-opt %s --mlir-print-op-generic | plan-opt | FileCheck %s
// RUN: plan-opt %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// GENERIC-LABEL: "sched.program"() <{cluster = #plan.cluster<{{.*}}>, micro_batches = 2 : i64, model = #plan.model<{{.*}}>, parallel = #plan.parallel<{{.*}}>, plan = @p, sym_name = "p.step", train = #plan.train<{{.*}}>}> ({
// GENERIC:         "sched.alloc"() <{name = "fsdp.root.param", offset = 0 : i64, persistent, role = #sched<role param>}> : () -> memref<9xbf16, #sched.space<device>>
// GENERIC:         "sched.all_gather"({{.*}}) <{group = #sched<group shard>}> : (memref<4xbf16, #sched.space<device>>, memref<16xbf16, #sched.space<device>>, !sched.event) -> !sched.event
// GENERIC:         "sched.loss"() <{micro_batch = 0 : i64, operandSegmentSizes = array<i32: 0, 0>, scale = 5.000000e-01 : f64, unit = @p::@head}> : () -> ()
// GENERIC:         "sched.backward"({{.*}}) <{micro_batch = 0 : i64, operandSegmentSizes = array<i32: 1, 1, 0, 1, 0, 1, 1, 0>, part = 0 : i64, unit = @p::@head}>
// GENERIC:         "sched.backward"({{.*}}) <{micro_batch = 0 : i64, operandSegmentSizes = array<i32: 1, 0, 0, 1, 0, 1, 0, 0>, part = 0 : i64, unit = @p::@embed}>
// GENERIC:         "sched.reduce_scatter"({{.*}}) <{accumulate, group = #sched<group shard>, reduce = #sched<reduce avg>}>
// GENERIC:         "sched.broadcast"({{.*}}) <{group = #sched<group world>, root = 7 : i64}>
// GENERIC:         "sched.optimizer_step"({{.*}}) <{group = @p::@fsdp.root, operandSegmentSizes = array<i32: 1, 1, 2, 1, 1, 1>}>
// GENERIC-LABEL: "sched.program"() <{cluster = #plan.cluster<{{.*}}>, micro_batches = 1 : i64, model = #plan.model<{{.*}}>, parallel = #plan.parallel<{{.*}}>, plan = @q, sym_name = "q.step", train = #plan.train<{{.*}}>}> ({
// GENERIC:         "sched.optimizer_step"({{.*}}) <{group = @q::@fsdp.layers.0, operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0>}>
// GENERIC:       }) {note = "sgd without momentum keeps no state"} : () -> ()

// Two plans on a 2x4 mesh (groups: shard 4, replicate 2, world 8): @p steps
// with AdamW (two state buffers), @q with SGD without momentum (none).
#dev = #sched.space<device>
#host = #sched.space<host>
#pinned = #sched.space<pinned_host>
shard.grid @mesh(shape = 1x2x4x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = adamw, lr = 0.001>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, grad_clip = 1.0, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @embed kind embedding {
    plan.param "model.embed_tokens.weight" : tensor<8x4xf32>
  }
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.unit @head kind llama_head {
    plan.param "model.norm.weight" : tensor<4xf32>
    plan.param "lm_head.weight" : tensor<8x4xf32> tied_to "model.embed_tokens.weight"
  }
  plan.group @fsdp.root units [@embed, @head] {numel = 36 : i64, padded_numel = 36 : i64, shard_numel = 9 : i64}
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 16 : i64, padded_numel = 16 : i64, shard_numel = 4 : i64}
}
plan.plan @q on @mesh
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @layers.0 kind llama_block {
    plan.param "model.layers.0.mlp.weight" : tensor<4x4xf32>
  }
  plan.group @fsdp.layers.0 units [@layers.0] {numel = 16 : i64, padded_numel = 16 : i64, shard_numel = 4 : i64}
}

// One step of @p: every op, with and without its optional operands and
// attributes (persistent, offset, after, accumulate, tied, tied_grads,
// loss_scale, norm, found_inf).
// CHECK-LABEL: sched.program @p.step for @p micro_batches 2 model {{.*}} {
// CHECK-NEXT:    [[LS:%[0-9]+]] = sched.alloc "loss_scale" role loss_scale persistent : memref<1xf32, #sched.space<device>>
// CHECK-NEXT:    [[ROOT:%[0-9]+]] = sched.alloc "fsdp.root.param" role param persistent offset 0 : memref<9xbf16, #sched.space<device>>
// CHECK-NEXT:    [[MASTER:%[0-9]+]] = sched.alloc "fsdp.root.master" role master persistent offset 64 : memref<9xf32, #sched.space<device>>
// CHECK-NEXT:    [[GRAD:%[0-9]+]] = sched.alloc "fsdp.root.grad" role grad persistent : memref<9xf32, #sched.space<device>>
// CHECK-NEXT:    [[M:%[0-9]+]] = sched.alloc "fsdp.root.exp_avg" role exp_avg persistent : memref<9xf32, #sched.space<device>>
// CHECK-NEXT:    [[V:%[0-9]+]] = sched.alloc "fsdp.root.exp_avg_sq" role exp_avg_sq persistent : memref<9xf32, #sched.space<device>>
// CHECK-NEXT:    [[HOST:%[0-9]+]] = sched.alloc "fsdp.layers.0.param" role param persistent : memref<4xbf16, #sched.space<pinned_host>>
// CHECK-NEXT:    [[STAGE:%[0-9]+]] = sched.alloc "fsdp.layers.0.param.staging" role staging offset 32 : memref<4xbf16, #sched.space<device>>
// CHECK-NEXT:    [[C0:%[0-9]+]] = sched.copy [[HOST]] into [[STAGE]] : memref<4xbf16, #sched.space<pinned_host>>, memref<4xbf16, #sched.space<device>>
// CHECK-NEXT:    [[FULL:%[0-9]+]] = sched.alloc "fsdp.layers.0.gathered" role gathered : memref<16xbf16, #sched.space<device>>
// CHECK-NEXT:    [[E0:%[0-9]+]] = sched.all_gather [[STAGE]] into [[FULL]] group shard after [[C0]] : memref<4xbf16, #sched.space<device>>, memref<16xbf16, #sched.space<device>>
// CHECK-NEXT:    [[RFULL:%[0-9]+]] = sched.alloc "fsdp.root.gathered" role gathered : memref<36xbf16, #sched.space<device>>
// CHECK-NEXT:    [[E1:%[0-9]+]] = sched.all_gather [[ROOT]] into [[RFULL]] group shard : memref<9xbf16, #sched.space<device>>, memref<36xbf16, #sched.space<device>>
// CHECK-NEXT:    sched.wait [[C0]]
// CHECK-NEXT:    sched.wait [[E0]]
// CHECK-NEXT:    sched.wait [[E1]]
// CHECK-NEXT:    sched.free [[STAGE]] : memref<4xbf16, #sched.space<device>>
// CHECK-NEXT:    [[EMBED:%[0-9]+]] = sched.view [[RFULL]][0] : memref<36xbf16, #sched.space<device>> to memref<32xbf16, #sched.space<device>>
// CHECK-NEXT:    [[HEAD:%[0-9]+]] = sched.view [[RFULL]][32] : memref<36xbf16, #sched.space<device>> to memref<4xbf16, #sched.space<device>>
// CHECK-NEXT:    [[MINE:%[0-9]+]] = sched.shard_view [[RFULL]] group shard : memref<36xbf16, #sched.space<device>> to memref<9xbf16, #sched.space<device>>
// CHECK-NEXT:    [[HALF:%[0-9]+]] = sched.shard_view [[FULL]] group replicate : memref<16xbf16, #sched.space<device>> to memref<8xbf16, #sched.space<device>>
// CHECK-NEXT:    [[EIGHTH:%[0-9]+]] = sched.shard_view [[FULL]] group world : memref<16xbf16, #sched.space<device>> to memref<2xbf16, #sched.space<device>>
// CHECK-NEXT:    [[A0:%[0-9]+]] = sched.alloc "embed.saves.mb0" role activations : memref<8xbf16, #sched.space<device>>
// CHECK-NEXT:    sched.forward @p::@embed mb 0 params([[EMBED]] : memref<32xbf16, #sched.space<device>>) saves([[A0]] : memref<8xbf16, #sched.space<device>>)
// CHECK-NEXT:    [[IN:%[0-9]+]] = sched.alloc "layers.0.input.mb1" role activations : memref<32xbf16, #sched.space<device>>
// CHECK-NEXT:    sched.forward @p::@layers.0 mb 1 params([[FULL]] : memref<16xbf16, #sched.space<device>>) saves([[IN]] : memref<32xbf16, #sched.space<device>>)
// CHECK-NEXT:    [[A2:%[0-9]+]] = sched.alloc "head.saves.mb0" role activations : memref<40xbf16, #sched.space<device>>
// CHECK-NEXT:    sched.forward @p::@head mb 0 params([[HEAD]] : memref<4xbf16, #sched.space<device>>) tied([[EMBED]] : memref<32xbf16, #sched.space<device>>) saves([[A2]] : memref<40xbf16, #sched.space<device>>)
// CHECK-NEXT:    sched.loss @p::@head mb 0 scale 5.000000e-01
// CHECK-NEXT:    sched.loss @p::@head mb 1 scale 5.000000e-01 loss_scale([[LS]] : memref<1xf32, #sched.space<device>>)
// CHECK-NEXT:    [[A1:%[0-9]+]] = sched.alloc "layers.0.saves.mb1" role activations : memref<64xbf16, #sched.space<device>>
// CHECK-NEXT:    sched.recompute @p::@layers.0 mb 1 params([[FULL]] : memref<16xbf16, #sched.space<device>>) from([[IN]] : memref<32xbf16, #sched.space<device>>) saves([[A1]] : memref<64xbf16, #sched.space<device>>)
// CHECK-NEXT:    [[A3:%[0-9]+]] = sched.alloc "head.saves.mb1" role activations : memref<40xbf16, #sched.space<device>>
// CHECK-NEXT:    sched.recompute @p::@head mb 1 params([[HEAD]] : memref<4xbf16, #sched.space<device>>) tied([[EMBED]] : memref<32xbf16, #sched.space<device>>) from([[A2]] : memref<40xbf16, #sched.space<device>>) saves([[A3]] : memref<40xbf16, #sched.space<device>>)
// CHECK-NEXT:    [[U:%[0-9]+]] = sched.alloc "fsdp.root.grad.full" role unsharded_grad : memref<36xbf16, #sched.space<device>>
// CHECK-NEXT:    sched.zero [[U]] : memref<36xbf16, #sched.space<device>>
// CHECK-NEXT:    [[UE:%[0-9]+]] = sched.view [[U]][0] : memref<36xbf16, #sched.space<device>> to memref<32xbf16, #sched.space<device>>
// CHECK-NEXT:    [[UH:%[0-9]+]] = sched.view [[U]][32] : memref<36xbf16, #sched.space<device>> to memref<4xbf16, #sched.space<device>>
// CHECK-NEXT:    sched.backward @p::@head mb 0 params([[HEAD]] : memref<4xbf16, #sched.space<device>>) tied([[EMBED]] : memref<32xbf16, #sched.space<device>>) activations([[A2]] : memref<40xbf16, #sched.space<device>>) grads([[UH]] : memref<4xbf16, #sched.space<device>>) tied_grads([[UE]] : memref<32xbf16, #sched.space<device>>)
// CHECK-NEXT:    sched.backward @p::@embed mb 0 params([[EMBED]] : memref<32xbf16, #sched.space<device>>) activations([[A0]] : memref<8xbf16, #sched.space<device>>) grads([[UE]] : memref<32xbf16, #sched.space<device>>)
// CHECK-NEXT:    [[GS:%[0-9]+]] = sched.alloc "fsdp.root.grad.shard" role staging : memref<9xbf16, #sched.space<device>>
// CHECK-NEXT:    [[R0:%[0-9]+]] = sched.reduce_scatter [[U]] into [[GS]] group shard reduce sum : memref<36xbf16, #sched.space<device>>, memref<9xbf16, #sched.space<device>>
// CHECK-NEXT:    [[R1:%[0-9]+]] = sched.reduce_scatter [[U]] into [[GS]] group shard reduce avg accumulate after [[R0]] : memref<36xbf16, #sched.space<device>>, memref<9xbf16, #sched.space<device>>
// CHECK-NEXT:    [[R2:%[0-9]+]] = sched.all_reduce [[GS]] group replicate reduce avg after [[R0]], [[R1]] : memref<9xbf16, #sched.space<device>>
// CHECK-NEXT:    sched.wait [[R0]]
// CHECK-NEXT:    sched.wait [[R1]]
// CHECK-NEXT:    sched.wait [[R2]]
// CHECK-NEXT:    sched.accumulate [[GS]] into [[GRAD]] : memref<9xbf16, #sched.space<device>>, memref<9xf32, #sched.space<device>>
// CHECK-NEXT:    [[HG:%[0-9]+]] = sched.alloc "fsdp.root.grad.host" role staging : memref<9xf32, #sched.space<host>>
// CHECK-NEXT:    [[C1:%[0-9]+]] = sched.copy [[GRAD]] into [[HG]] : memref<9xf32, #sched.space<device>>, memref<9xf32, #sched.space<host>>
// CHECK-NEXT:    sched.wait [[C1]]
// CHECK-NEXT:    [[N:%[0-9]+]] = sched.alloc "grad_norm" role scalar : memref<1xf32, #sched.space<device>>
// CHECK-NEXT:    sched.zero [[N]] : memref<1xf32, #sched.space<device>>
// CHECK-NEXT:    sched.grad_norm [[GRAD]] into [[N]] : memref<9xf32, #sched.space<device>>, memref<1xf32, #sched.space<device>>
// CHECK-NEXT:    [[R3:%[0-9]+]] = sched.all_reduce [[N]] group world reduce sum : memref<1xf32, #sched.space<device>>
// CHECK-NEXT:    [[F:%[0-9]+]] = sched.alloc "found_inf" role scalar : memref<1xf32, #sched.space<device>>
// CHECK-NEXT:    sched.zero [[F]] : memref<1xf32, #sched.space<device>>
// CHECK-NEXT:    sched.check_finite [[GRAD]] into [[F]] : memref<9xf32, #sched.space<device>>, memref<1xf32, #sched.space<device>>
// CHECK-NEXT:    [[R4:%[0-9]+]] = sched.all_reduce [[F]] group world reduce max after [[R3]] : memref<1xf32, #sched.space<device>>
// CHECK-NEXT:    [[B0:%[0-9]+]] = sched.broadcast [[LS]] group world root 7 : memref<1xf32, #sched.space<device>>
// CHECK-NEXT:    [[B1:%[0-9]+]] = sched.broadcast [[M]] group replicate root 1 after [[B0]] : memref<9xf32, #sched.space<device>>
// CHECK-NEXT:    sched.wait [[R3]]
// CHECK-NEXT:    sched.wait [[R4]]
// CHECK-NEXT:    sched.wait [[B0]]
// CHECK-NEXT:    sched.wait [[B1]]
// CHECK-NEXT:    sched.optimizer_step @p::@fsdp.root params([[MASTER]] : memref<9xf32, #sched.space<device>>) grads([[GRAD]] : memref<9xf32, #sched.space<device>>) state([[M]], [[V]] : memref<9xf32, #sched.space<device>>, memref<9xf32, #sched.space<device>>) norm([[N]] : memref<1xf32, #sched.space<device>>) found_inf([[F]] : memref<1xf32, #sched.space<device>>) loss_scale([[LS]] : memref<1xf32, #sched.space<device>>)
// CHECK-NEXT:    sched.cast [[MASTER]] into [[ROOT]] : memref<9xf32, #sched.space<device>>, memref<9xbf16, #sched.space<device>>
// CHECK-NEXT:    sched.update_loss_scale [[LS]] found_inf [[F]] : memref<1xf32, #sched.space<device>>, memref<1xf32, #sched.space<device>>
// CHECK-NEXT:    sched.free [[N]] : memref<1xf32, #sched.space<device>>
// CHECK-NEXT:    sched.free [[F]] : memref<1xf32, #sched.space<device>>
// CHECK-NEXT:  }
sched.program @p.step for @p micro_batches 2
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = adamw, lr = 0.001>, micro_batch = 1, seq_len = 8, grad_accum = 2, loss_scale = <kind = none>, grad_clip = 1.0, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> {
  %ls = sched.alloc "loss_scale" role loss_scale persistent : memref<1xf32, #dev>
  %root = sched.alloc "fsdp.root.param" role param persistent offset 0 : memref<9xbf16, #dev>
  %master = sched.alloc "fsdp.root.master" role master persistent offset 64 : memref<9xf32, #dev>
  %grad = sched.alloc "fsdp.root.grad" role grad persistent : memref<9xf32, #dev>
  %m = sched.alloc "fsdp.root.exp_avg" role exp_avg persistent : memref<9xf32, #dev>
  %v = sched.alloc "fsdp.root.exp_avg_sq" role exp_avg_sq persistent : memref<9xf32, #dev>
  %host = sched.alloc "fsdp.layers.0.param" role param persistent : memref<4xbf16, #pinned>
  %stage = sched.alloc "fsdp.layers.0.param.staging" role staging offset 32 : memref<4xbf16, #dev>
  %c0 = sched.copy %host into %stage : memref<4xbf16, #pinned>, memref<4xbf16, #dev>
  %full = sched.alloc "fsdp.layers.0.gathered" role gathered : memref<16xbf16, #dev>
  %e0 = sched.all_gather %stage into %full group shard after %c0 : memref<4xbf16, #dev>, memref<16xbf16, #dev>
  %rfull = sched.alloc "fsdp.root.gathered" role gathered : memref<36xbf16, #dev>
  %e1 = sched.all_gather %root into %rfull group shard : memref<9xbf16, #dev>, memref<36xbf16, #dev>
  sched.wait %c0
  sched.wait %e0
  sched.wait %e1
  sched.free %stage : memref<4xbf16, #dev>
  %embed = sched.view %rfull[0] : memref<36xbf16, #dev> to memref<32xbf16, #dev>
  %head = sched.view %rfull[32] : memref<36xbf16, #dev> to memref<4xbf16, #dev>
  %mine = sched.shard_view %rfull group shard : memref<36xbf16, #dev> to memref<9xbf16, #dev>
  %half = sched.shard_view %full group replicate : memref<16xbf16, #dev> to memref<8xbf16, #dev>
  %eighth = sched.shard_view %full group world : memref<16xbf16, #dev> to memref<2xbf16, #dev>
  %a0 = sched.alloc "embed.saves.mb0" role activations : memref<8xbf16, #dev>
  sched.forward @p::@embed mb 0 params(%embed : memref<32xbf16, #dev>) saves(%a0 : memref<8xbf16, #dev>)
  %in = sched.alloc "layers.0.input.mb1" role activations : memref<32xbf16, #dev>
  sched.forward @p::@layers.0 mb 1 params(%full : memref<16xbf16, #dev>) saves(%in : memref<32xbf16, #dev>)
  %a2 = sched.alloc "head.saves.mb0" role activations : memref<40xbf16, #dev>
  sched.forward @p::@head mb 0 params(%head : memref<4xbf16, #dev>) tied(%embed : memref<32xbf16, #dev>) saves(%a2 : memref<40xbf16, #dev>)
  sched.loss @p::@head mb 0 scale 0.5
  sched.loss @p::@head mb 1 scale 0.5 loss_scale(%ls : memref<1xf32, #dev>)
  %a1 = sched.alloc "layers.0.saves.mb1" role activations : memref<64xbf16, #dev>
  sched.recompute @p::@layers.0 mb 1 params(%full : memref<16xbf16, #dev>) from(%in : memref<32xbf16, #dev>) saves(%a1 : memref<64xbf16, #dev>)
  %a3 = sched.alloc "head.saves.mb1" role activations : memref<40xbf16, #dev>
  sched.recompute @p::@head mb 1 params(%head : memref<4xbf16, #dev>) tied(%embed : memref<32xbf16, #dev>) from(%a2 : memref<40xbf16, #dev>) saves(%a3 : memref<40xbf16, #dev>)
  %u = sched.alloc "fsdp.root.grad.full" role unsharded_grad : memref<36xbf16, #dev>
  sched.zero %u : memref<36xbf16, #dev>
  %ue = sched.view %u[0] : memref<36xbf16, #dev> to memref<32xbf16, #dev>
  %uh = sched.view %u[32] : memref<36xbf16, #dev> to memref<4xbf16, #dev>
  sched.backward @p::@head mb 0 params(%head : memref<4xbf16, #dev>) tied(%embed : memref<32xbf16, #dev>) activations(%a2 : memref<40xbf16, #dev>) grads(%uh : memref<4xbf16, #dev>) tied_grads(%ue : memref<32xbf16, #dev>)
  sched.backward @p::@embed mb 0 params(%embed : memref<32xbf16, #dev>) activations(%a0 : memref<8xbf16, #dev>) grads(%ue : memref<32xbf16, #dev>)
  %gs = sched.alloc "fsdp.root.grad.shard" role staging : memref<9xbf16, #dev>
  %r0 = sched.reduce_scatter %u into %gs group shard reduce sum : memref<36xbf16, #dev>, memref<9xbf16, #dev>
  %r1 = sched.reduce_scatter %u into %gs group shard reduce avg accumulate after %r0 : memref<36xbf16, #dev>, memref<9xbf16, #dev>
  %r2 = sched.all_reduce %gs group replicate reduce avg after %r0, %r1 : memref<9xbf16, #dev>
  sched.wait %r0
  sched.wait %r1
  sched.wait %r2
  sched.accumulate %gs into %grad : memref<9xbf16, #dev>, memref<9xf32, #dev>
  %hg = sched.alloc "fsdp.root.grad.host" role staging : memref<9xf32, #host>
  %c1 = sched.copy %grad into %hg : memref<9xf32, #dev>, memref<9xf32, #host>
  sched.wait %c1
  %n = sched.alloc "grad_norm" role scalar : memref<1xf32, #dev>
  sched.zero %n : memref<1xf32, #dev>
  sched.grad_norm %grad into %n : memref<9xf32, #dev>, memref<1xf32, #dev>
  %r3 = sched.all_reduce %n group world reduce sum : memref<1xf32, #dev>
  %f = sched.alloc "found_inf" role scalar : memref<1xf32, #dev>
  sched.zero %f : memref<1xf32, #dev>
  sched.check_finite %grad into %f : memref<9xf32, #dev>, memref<1xf32, #dev>
  %r4 = sched.all_reduce %f group world reduce max after %r3 : memref<1xf32, #dev>
  %b0 = sched.broadcast %ls group world root 7 : memref<1xf32, #dev>
  %b1 = sched.broadcast %m group replicate root 1 after %b0 : memref<9xf32, #dev>
  sched.wait %r3
  sched.wait %r4
  sched.wait %b0
  sched.wait %b1
  sched.optimizer_step @p::@fsdp.root params(%master : memref<9xf32, #dev>) grads(%grad : memref<9xf32, #dev>) state(%m, %v : memref<9xf32, #dev>, memref<9xf32, #dev>) norm(%n : memref<1xf32, #dev>) found_inf(%f : memref<1xf32, #dev>) loss_scale(%ls : memref<1xf32, #dev>)
  sched.cast %master into %root : memref<9xf32, #dev>, memref<9xbf16, #dev>
  sched.update_loss_scale %ls found_inf %f : memref<1xf32, #dev>, memref<1xf32, #dev>
  sched.free %n : memref<1xf32, #dev>
  sched.free %f : memref<1xf32, #dev>
}

// An empty state() and a program's own attributes.
// CHECK-LABEL: sched.program @q.step for @q micro_batches 1 model {{.*}} attributes {note = "sgd without momentum keeps no state"} {
// CHECK-NEXT:    [[P:%[0-9]+]] = sched.alloc "fsdp.layers.0.param" role param persistent : memref<4xf32, #sched.space<device>>
// CHECK-NEXT:    [[G:%[0-9]+]] = sched.alloc "fsdp.layers.0.grad" role grad persistent : memref<4xf32, #sched.space<device>>
// CHECK-NEXT:    sched.optimizer_step @q::@fsdp.layers.0 params([[P]] : memref<4xf32, #sched.space<device>>) grads([[G]] : memref<4xf32, #sched.space<device>>) state()
// CHECK-NEXT:  }
sched.program @q.step for @q micro_batches 1
    model #plan.model<family = llama, preset = "llama_tiny", vocab = 8, hidden = 4, intermediate = 8, layers = 1, heads = 1, kv_heads = 1, max_seq_len = 16>
    cluster #plan.cluster<nodes = 2, gpus_per_node = 4, device = <name = "cpu", memory = 17179869184, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 2.0e10>, host_memory = 34359738368, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = hybrid_shard, wrap = <kind = transformer_block>, offload = <>> attributes {note = "sgd without momentum keeps no state"} {
  %p = sched.alloc "fsdp.layers.0.param" role param persistent : memref<4xf32, #dev>
  %g = sched.alloc "fsdp.layers.0.grad" role grad persistent : memref<4xf32, #dev>
  sched.optimizer_step @q::@fsdp.layers.0 params(%p : memref<4xf32, #dev>) grads(%g : memref<4xf32, #dev>) state()
}
