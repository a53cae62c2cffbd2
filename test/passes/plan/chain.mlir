// The three plan passes on presets, from the .plan files.
// RUN: plan-opt %examples/tiny_llama_cpu.plan --plan-expand-presets --plan-wrap-units --plan-assign-sharding | FileCheck %s --check-prefix=LLAMA
// RUN: plan-opt %examples/tiny_llama_cpu.plan --set model=gpt2_tiny --plan-expand-presets --plan-wrap-units --plan-assign-sharding | FileCheck %s --check-prefix=GPT2
// RUN: plan-opt %examples/tiny_llama_cpu.plan --set model=llama3_405b --plan-expand-presets --plan-wrap-units --plan-assign-sharding | FileCheck %s --check-prefix=BIG
// Wrapping again keeps the groups; the whole chain twice is the chain once.
// RUN: plan-opt %examples/tiny_llama_cpu.plan --plan-expand-presets --plan-wrap-units --plan-assign-sharding > %t.once.mlir
// RUN: plan-opt %examples/tiny_llama_cpu.plan --plan-expand-presets --plan-wrap-units --plan-assign-sharding --plan-expand-presets --plan-wrap-units --plan-assign-sharding > %t.twice.mlir
// RUN: diff %t.once.mlir %t.twice.mlir

// llama_tiny on 2 ranks: embed 32768 + norm 64 + lm_head 32768 = 65600;
// a block 46208.
// LLAMA:      plan.group @fsdp.root units [@embed, @head] {numel = 65600 : i64, padded_numel = 65600 : i64, shard_numel = 32800 : i64}
// LLAMA-NEXT: plan.group @fsdp.layers.0 units [@layers.0] {numel = 46208 : i64, padded_numel = 46208 : i64, shard_numel = 23104 : i64}
// LLAMA-NEXT: plan.group @fsdp.layers.1 units [@layers.1] {numel = 46208 : i64, padded_numel = 46208 : i64, shard_numel = 23104 : i64}
// LLAMA-NEXT: }

// gpt2_tiny: lm_head is tied to wte, so the root stores wte 32768 + wpe 16384
// + ln_f 128 = 49280.
// GPT2:      plan.group @fsdp.root units [@embed, @head] {numel = 49280 : i64, padded_numel = 49280 : i64, shard_numel = 24640 : i64}
// GPT2-NEXT: plan.group @fsdp.layers.0 units [@layers.0] {numel = 49984 : i64
// GPT2-NEXT: plan.group @fsdp.layers.1 units [@layers.1] {numel = 49984 : i64

// Llama 3.1 405B: sizes past 2^32 stay exact.
// BIG:      plan.group @fsdp.root units [@embed, @head] {numel = 4202708992 : i64, padded_numel = 4202708992 : i64, shard_numel = 2101354496 : i64}
// BIG-NEXT: plan.group @fsdp.layers.0 units [@layers.0] {numel = 3187703808 : i64, padded_numel = 3187703808 : i64, shard_numel = 1593851904 : i64}
// BIG:      plan.group @fsdp.layers.125 units [@layers.125] {numel = 3187703808 : i64, padded_numel = 3187703808 : i64, shard_numel = 1593851904 : i64}
// BIG-NEXT: }
