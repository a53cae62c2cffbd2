// The whole chain up to sched-insert-collectives on the tiny full_shard
// example: three groups (root = embed + head, layers.0, layers.1) on a 1x2
// mesh, each gathered around its forward and backward spans, each gradient
// reduce-scattered after its backward, and a schedule the verifier accepts.
//
// RUN: plan-opt %examples/tiny_llama_cpu.plan --plan-expand-presets --plan-wrap-units --plan-assign-sharding --sched-lower --sched-activation-checkpointing --sched-insert-collectives | FileCheck %s
// RUN: plan-opt %examples/tiny_llama_cpu.plan --plan-expand-presets --plan-wrap-units --plan-assign-sharding --sched-lower --sched-activation-checkpointing --sched-insert-collectives --sched-verify-schedule -o /dev/null

// CHECK-LABEL: sched.program @tiny_llama_cpu.step
// CHECK:       [[RP:%.*]] = sched.alloc "fsdp.root.param" role param persistent : memref<32800xf32
// CHECK:       [[P0:%.*]] = sched.alloc "fsdp.layers.0.param" role param persistent : memref<23104xf32
// CHECK:       [[G0:%.*]] = sched.alloc "fsdp.layers.0.grad" role grad persistent : memref<23104xf32
// CHECK:       [[P1:%.*]] = sched.alloc "fsdp.layers.1.param" role param persistent : memref<23104xf32
// CHECK:       [[G1:%.*]] = sched.alloc "fsdp.layers.1.grad" role grad persistent : memref<23104xf32
// CHECK:       sched.all_gather [[RP]] into {{.*}} group shard : memref<32800xf32, {{.*}}>, memref<65600xf32
// CHECK:       sched.forward @tiny_llama_cpu::@embed mb 0
// CHECK:       sched.all_gather [[P0]] into
// CHECK:       sched.forward @tiny_llama_cpu::@layers.0 mb 0
// CHECK:       sched.all_gather [[P1]] into
// CHECK:       sched.forward @tiny_llama_cpu::@layers.1 mb 0
// CHECK:       sched.forward @tiny_llama_cpu::@head mb 0
// CHECK:       sched.all_gather [[RP]] into
// CHECK:       sched.backward @tiny_llama_cpu::@head mb 0
// CHECK:       sched.all_gather [[P1]] into
// CHECK:       sched.backward @tiny_llama_cpu::@layers.1 mb 0
// CHECK:       sched.reduce_scatter {{%.*}} into [[G1]] group shard reduce avg accumulate
// CHECK:       sched.all_gather [[P0]] into
// CHECK:       sched.backward @tiny_llama_cpu::@layers.0 mb 0
// CHECK:       sched.reduce_scatter {{%.*}} into [[G0]] group shard reduce avg accumulate
// CHECK:       sched.backward @tiny_llama_cpu::@embed mb 0
// CHECK:       sched.reduce_scatter
// CHECK:       sched.optimizer_step @tiny_llama_cpu::@fsdp.root params([[RP]] :
// CHECK-NEXT:  sched.optimizer_step @tiny_llama_cpu::@fsdp.layers.0 params([[P0]] : {{.*}}) grads([[G0]] :
// CHECK-NEXT:  sched.optimizer_step @tiny_llama_cpu::@fsdp.layers.1 params([[P1]] : {{.*}}) grads([[G1]] :
