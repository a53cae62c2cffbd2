// sched-insert-collectives on a LoRA plan (GPT-2, adapters on c_attn, one
// layer): the frozen base is sharded and gathered like the parameters under
// full_shard, in its own buffer, and never reduced; only the adapters'
// gradients are reduced. Under no_shard the frozen base stays whole and
// nothing but the adapters' gradients crosses ranks.
// RUN: plan-opt %examples/tiny_llama_cpu.plan --set model=gpt2_tiny --set model.lora.rank=2 --set 'model.lora.targets=[c_attn]' --set model.layers=1 --set train.grad_accum=1 --plan-expand-presets --plan-wrap-units --plan-assign-sharding --sched-lower --sched-insert-collectives | FileCheck %s --check-prefix=FSDP
// RUN: plan-opt %examples/tiny_llama_cpu.plan --set model=gpt2_tiny --set model.lora.rank=2 --set 'model.lora.targets=[c_attn]' --set model.layers=1 --set train.grad_accum=1 --set parallel.sharding=no_shard --plan-expand-presets --plan-wrap-units --plan-assign-sharding --sched-lower --sched-insert-collectives | FileCheck %s --check-prefix=DDP
// The whole pipeline verifies (sched-verify-schedule) for every strategy.
// RUN: plan-opt %examples/tiny_llama_cpu.plan --set model.lora.rank=2 --set parallel.sharding=no_shard --plan-lower > /dev/null
// RUN: plan-opt %examples/tiny_llama_cpu.plan --set model.lora.rank=2 --set parallel.sharding=zero1 --plan-lower > /dev/null
// RUN: plan-opt %examples/tiny_llama_cpu.plan --set model.lora.rank=2 --set parallel.sharding=shard_grad_op --plan-lower > /dev/null
// RUN: plan-opt %examples/tiny_llama_cpu.plan --set model.lora.rank=2 --set parallel.sharding=hybrid_shard --set cluster.gpus_per_node=4 --set 'parallel.mesh=(2, 2)' --plan-lower > /dev/null
// RUN: plan-opt %examples/tiny_llama_cpu.plan --set model.lora.rank=2 --set train.precision=bf16_mixed --set train.activation_checkpointing=full --set parallel.offload.params=cpu --set parallel.forward_prefetch=true --plan-lower | FileCheck %s --check-prefix=MIXED

// Shards: 24640 of the root's 49280 frozen, 24992 of the block's 49984.
// FSDP-LABEL: sched.program @tiny_llama_cpu.step
// FSDP-NEXT:  [[RF:%.*]] = sched.alloc "fsdp.root.frozen" role frozen persistent : memref<24640xf32
// FSDP-NEXT:  [[LF:%.*]] = sched.alloc "fsdp.layers.0.frozen" role frozen persistent : memref<24992xf32
// FSDP-NEXT:  [[LP:%.*]] = sched.alloc "fsdp.layers.0.param" role param persistent : memref<256xf32
// FSDP-NEXT:  [[LG:%.*]] = sched.alloc "fsdp.layers.0.grad" role grad persistent : memref<256xf32
// FSDP:       [[RG:%.*]] = sched.alloc "fsdp.root.frozen.gathered" role gathered : memref<49280xf32
// FSDP-NEXT:  sched.all_gather [[RF]] into [[RG]] group shard
// FSDP:       sched.forward @tiny_llama_cpu::@embed
// FSDP:       sched.all_gather [[LP]] into
// FSDP:       sched.all_gather [[LF]] into
// FSDP:       sched.forward @tiny_llama_cpu::@layers.0
// FSDP:       sched.forward @tiny_llama_cpu::@head
// FSDP:       sched.backward @tiny_llama_cpu::@layers.0
// FSDP:       sched.reduce_scatter {{.*}} into [[LG]] group shard reduce avg accumulate
// FSDP-NOT:   sched.reduce_scatter
// FSDP-NOT:   sched.all_reduce
// FSDP:       sched.optimizer_step @tiny_llama_cpu::@fsdp.layers.0

// DDP-NOT:    sched.all_gather
// DDP:        sched.all_reduce {{.*}} group world reduce avg : memref<512xf32
// DDP-NOT:    sched.all_reduce
// DDP-NOT:    sched.all_gather

// bf16: the frozen base is kept in bf16 with no master copy or cast;
// offloaded with the parameters, it is copied to the device to be gathered.
// MIXED:      sched.alloc "fsdp.root.frozen" role frozen persistent offset {{[0-9]+}} : memref<32800xbf16, #sched.space<pinned_host>>
// MIXED-NOT:  sched.alloc "fsdp.root.master"
// MIXED-NOT:  "fsdp.{{.*}}.frozen.master"
// MIXED:      sched.copy {{.*}} : memref<32800xbf16, #sched.space<pinned_host>>, memref<32800xbf16, #sched.space<device>>
