// sched-lower of a LoRA plan (GPT-2, adapters on c_attn, one layer): each
// group's frozen base is a persistent buffer of role frozen, viewed per unit
// and read by compute as `frozen`; only what trains has params, grads,
// optimizer state and a step. The tied head reads the embedding's frozen
// base as `tied` and gets no `tied_grads`; the root group (embeddings and
// head) trains nothing.
// RUN: plan-opt %examples/tiny_llama_cpu.plan --set model=gpt2_tiny --set model.lora.rank=2 --set 'model.lora.targets=[c_attn]' --set model.layers=1 --set train.grad_accum=1 --plan-expand-presets --plan-wrap-units --plan-assign-sharding --sched-lower | FileCheck %s

// CHECK-LABEL: sched.program @tiny_llama_cpu.step
// wte 512x64 + wpe 256x64 = 49152, ln_f 128: the root's 49280 frozen.
// CHECK-NEXT:  [[RF:%.*]] = sched.alloc "fsdp.root.frozen" role frozen persistent : memref<49280xf32
// CHECK-NEXT:  [[EMBED:%.*]] = sched.view [[RF]][0] : {{.*}} to memref<49152xf32
// CHECK-NEXT:  [[HEAD:%.*]] = sched.view [[RF]][49152] : {{.*}} to memref<128xf32
// The block: 49984 frozen; c_attn's lora_A 2x64 and lora_B 192x2 train.
// CHECK-NEXT:  [[LF:%.*]] = sched.alloc "fsdp.layers.0.frozen" role frozen persistent : memref<49984xf32
// CHECK-NEXT:  [[BLOCK:%.*]] = sched.view [[LF]][0]
// CHECK-NEXT:  [[LP:%.*]] = sched.alloc "fsdp.layers.0.param" role param persistent : memref<512xf32
// CHECK-NEXT:  [[LG:%.*]] = sched.alloc "fsdp.layers.0.grad" role grad persistent : memref<512xf32
// CHECK-NEXT:  sched.alloc "fsdp.layers.0.exp_avg"
// CHECK-NEXT:  sched.alloc "fsdp.layers.0.exp_avg_sq"
// CHECK-NEXT:  [[PV:%.*]] = sched.view [[LP]][0]
// CHECK-NEXT:  [[GV:%.*]] = sched.view [[LG]][0]
// The root trains nothing: no state, and one zero (the block's gradient).
// CHECK-NEXT:  sched.zero [[LG]]
// CHECK-NEXT:  sched.alloc "embed.saves.mb0"
// CHECK:       sched.forward @tiny_llama_cpu::@embed mb 0 frozen([[EMBED]] : {{.*}}) saves(
// CHECK:       sched.forward @tiny_llama_cpu::@layers.0 mb 0 params([[PV]] : {{.*}}) frozen([[BLOCK]] : {{.*}}) saves(
// CHECK:       sched.forward @tiny_llama_cpu::@head mb 0 tied([[EMBED]] : {{.*}}) frozen([[HEAD]] : {{.*}}) saves(
// CHECK:       sched.backward @tiny_llama_cpu::@head mb 0 tied([[EMBED]] : {{.*}}) frozen([[HEAD]] : {{.*}}) activations({{[^)]*}}){{$}}
// CHECK:       sched.backward @tiny_llama_cpu::@layers.0 mb 0 params([[PV]] : {{.*}}) frozen([[BLOCK]] : {{.*}}) activations({{[^)]*}}) grads([[GV]] : {{.*}}){{$}}
// CHECK:       sched.backward @tiny_llama_cpu::@embed mb 0 frozen([[EMBED]] : {{.*}}) activations({{[^)]*}}){{$}}
// One step, for the group that trains.
// CHECK:       sched.optimizer_step @tiny_llama_cpu::@fsdp.layers.0 params([[LP]]
// CHECK-NOT:   sched.optimizer_step
