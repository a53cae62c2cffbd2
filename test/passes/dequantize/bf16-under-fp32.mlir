// A frozen base stored in bf16 under precision = fp32: the lowering keeps
// it in bf16 (the group's frozen buffer and its view), and
// sched-dequantize-base converts it to fp32 before each compute op that
// reads it.
// RUN: plan-opt %s --sched-lower --sched-dequantize-base --sched-verify-schedule | FileCheck %s
shard.grid @mesh(shape = 1x1x1x1)
plan.plan @p on @mesh
    model #plan.model<family = llama, vocab = 16, hidden = 8, intermediate = 16, layers = 1, heads = 2, kv_heads = 2, max_seq_len = 16, lora = <rank = 2, alpha = 4.0, targets = ["q_proj"], base = bf16>>
    cluster #plan.cluster<nodes = 1, gpus_per_node = 1, device = <name = "cpu", memory = 17179869184, bf16_tflops = 0.1, fp16_tflops = 0.1, fp32_tflops = 0.1, hbm_bandwidth = 1.0e10, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0e10>, host_memory = 17179869184, inter_node_bandwidth = 2.5e10>
    train #plan.train<optimizer = <kind = adamw, lr = 0.001>, micro_batch = 1, seq_len = 8, loss_scale = <kind = none>, lr_schedule = <kind = constant>>
    parallel #plan.parallel<sharding = no_shard, wrap = <kind = transformer_block>, offload = <>> {
  plan.unit @head kind llama_head {
    plan.param "lm_head.weight" : tensor<16x8xf32> frozen bf16
  }
  plan.group @g units [@head] {numel = 0, padded_numel = 0, shard_numel = 0, frozen_numel = 128, frozen_padded_numel = 128, frozen_shard_numel = 128}
}
// CHECK:      [[F:%.+]] = sched.alloc "g.frozen" role frozen persistent : memref<128xbf16
// CHECK-NEXT: [[V:%.+]] = sched.view [[F]][0] : memref<128xbf16, #sched.space<device>> to memref<128xbf16
// CHECK:      [[B:%.+]] = sched.alloc "head.base" role staging : memref<128xf32
// CHECK-NEXT: sched.dequantize @p::@head [[V]] into [[B]] : memref<128xbf16, #sched.space<device>>, memref<128xf32
// CHECK-NEXT: sched.forward @p::@head mb 0 frozen([[B]] : memref<128xf32
// CHECK-NEXT: sched.free [[B]]
// CHECK:      sched.dequantize @p::@head [[V]] into
// CHECK-NEXT: sched.backward @p::@head mb 0 frozen(
