// The example plan through the plan passes and sched-lower: llama_tiny
// (2 blocks, untied lm_head) under transformer_block wrapping, AdamW, one
// micro-batch of 4 x 128 tokens.
// RUN: plan-opt %examples/tiny_llama_cpu.plan --plan-expand-presets --plan-wrap-units --plan-assign-sharding --sched-lower | FileCheck %s

// CHECK-LABEL: sched.program @tiny_llama_cpu.step for @tiny_llama_cpu micro_batches 1 model {{.*}} {
// CHECK-NEXT:  [[RP:%.*]] = sched.alloc "fsdp.root.param" role param persistent : memref<65600xf32
// CHECK-NEXT:  [[RG:%.*]] = sched.alloc "fsdp.root.grad" role grad persistent : memref<65600xf32
// CHECK-NEXT:  sched.alloc "fsdp.root.exp_avg" role exp_avg persistent
// CHECK-NEXT:  sched.alloc "fsdp.root.exp_avg_sq" role exp_avg_sq persistent
// CHECK-NEXT:  [[EP:%.*]] = sched.view [[RP]][0] : {{.*}} to memref<32768xf32
// CHECK-NEXT:  [[EG:%.*]] = sched.view [[RG]][0] : {{.*}} to memref<32768xf32
// CHECK-NEXT:  [[HP:%.*]] = sched.view [[RP]][32768] : {{.*}} to memref<32832xf32
// CHECK-NEXT:  [[HG:%.*]] = sched.view [[RG]][32768] : {{.*}} to memref<32832xf32
// CHECK-NEXT:  [[P0:%.*]] = sched.alloc "fsdp.layers.0.param" role param persistent : memref<46208xf32
// CHECK:       [[P1:%.*]] = sched.alloc "fsdp.layers.1.param" role param persistent : memref<46208xf32
// CHECK:       sched.zero
// CHECK-NEXT:  sched.zero
// CHECK-NEXT:  sched.zero
// CHECK-NEXT:  sched.alloc "embed.saves.mb0" role activations : memref<32784xf32
// CHECK-NEXT:  sched.forward @tiny_llama_cpu::@embed mb 0 params([[EP]] :
// CHECK-NEXT:  sched.alloc "layers.0.saves.mb0" role activations : memref<691504xf32
// CHECK-NEXT:  sched.forward @tiny_llama_cpu::@layers.0 mb 0
// CHECK-NEXT:  sched.alloc "layers.1.saves.mb0" role activations : memref<691504xf32
// CHECK-NEXT:  sched.forward @tiny_llama_cpu::@layers.1 mb 0
// CHECK-NEXT:  sched.alloc "head.saves.mb0" role activations : memref<328273xf32
// CHECK-NEXT:  sched.forward @tiny_llama_cpu::@head mb 0 params([[HP]] :
// CHECK-NEXT:  sched.loss @tiny_llama_cpu::@head mb 0 scale 1.0{{0*}}e+00
// CHECK-NEXT:  sched.backward @tiny_llama_cpu::@head mb 0 params([[HP]] : {{.*}}) grads([[HG]] :
// CHECK-NEXT:  sched.free
// CHECK-NEXT:  sched.backward @tiny_llama_cpu::@layers.1 mb 0
// CHECK-NEXT:  sched.free
// CHECK-NEXT:  sched.backward @tiny_llama_cpu::@layers.0 mb 0
// CHECK-NEXT:  sched.free
// CHECK-NEXT:  sched.backward @tiny_llama_cpu::@embed mb 0 params([[EP]] : {{.*}}) grads([[EG]] :
// CHECK-NEXT:  sched.free
// CHECK-NEXT:  sched.optimizer_step @tiny_llama_cpu::@fsdp.root params([[RP]] :
// CHECK-NEXT:  sched.optimizer_step @tiny_llama_cpu::@fsdp.layers.0 params([[P0]] :
// CHECK-NEXT:  sched.optimizer_step @tiny_llama_cpu::@fsdp.layers.1 params([[P1]] :
// CHECK-NEXT:  }
