// forward_prefetch: each group's forward all-gather (with its allocation)
// moves into the previous group's forward; the waits stay. With room for two
// gathers in flight it goes above the previous group's wait as well, so the
// gathers run back to back; with one it stays below that wait.
// RUN: sed -e 's/SHARDING/full_shard/' -e 's/PREFETCH/, forward_prefetch = true, backward_prefetch = none/' %S/Inputs/full_shard.mlir \
// RUN:   | plan-opt -sched-prefetch | FileCheck %s --check-prefix=LIMIT2
// RUN: sed -e 's/SHARDING/full_shard/' -e 's/PREFETCH/, forward_prefetch = true, backward_prefetch = none, max_inflight_gathers = 1/' %S/Inputs/full_shard.mlir \
// RUN:   | plan-opt -sched-prefetch | FileCheck %s --check-prefix=LIMIT1
//
// forward_prefetch off (and backward none), or a strategy that gathers
// nothing before compute: the program is unchanged.
// RUN: sed -e 's/SHARDING/full_shard/' -e 's/PREFETCH/, backward_prefetch = none/' %S/Inputs/full_shard.mlir | plan-opt > %t.off.in
// RUN: plan-opt %t.off.in -sched-prefetch > %t.off.out
// RUN: diff %t.off.in %t.off.out
// RUN: sed -e 's/SHARDING/zero1/' -e 's/PREFETCH/, forward_prefetch = true/' %S/Inputs/full_shard.mlir | plan-opt > %t.zero1.in
// RUN: plan-opt %t.zero1.in -sched-prefetch > %t.zero1.out
// RUN: diff %t.zero1.in %t.zero1.out

// The root group's gather has no group before it and stays in place.
// LIMIT2:      %[[DR:.*]] = sched.alloc "fsdp.root.gathered"
// LIMIT2-NEXT: %[[ER:.*]] = sched.all_gather %{{.*}} into %[[DR]]
// LIMIT2:      sched.alloc "embed.saves.mb0"
// LIMIT2-NEXT: %[[D0:.*]] = sched.alloc "fsdp.layers.0.gathered"
// LIMIT2-NEXT: %[[E0:.*]] = sched.all_gather %{{.*}} into %[[D0]]
// LIMIT2-NEXT: sched.wait %[[ER]]
// LIMIT2-NEXT: sched.forward @t::@embed
// LIMIT2-NEXT: sched.alloc "layers.0.saves.mb0"
// LIMIT2-NEXT: %[[D1:.*]] = sched.alloc "fsdp.layers.1.gathered"
// LIMIT2-NEXT: %[[E1:.*]] = sched.all_gather %{{.*}} into %[[D1]]
// LIMIT2-NEXT: sched.wait %[[E0]]
// LIMIT2-NEXT: sched.forward @t::@layers.0
// LIMIT2-NEXT: sched.free %[[D0]]
// LIMIT2-NEXT: sched.alloc "layers.1.saves.mb0"
// LIMIT2-NEXT: %[[D2:.*]] = sched.alloc "fsdp.layers.2.gathered"
// LIMIT2-NEXT: %[[E2:.*]] = sched.all_gather %{{.*}} into %[[D2]]
// LIMIT2-NEXT: sched.wait %[[E1]]
// LIMIT2-NEXT: sched.forward @t::@layers.1
// LIMIT2-NEXT: sched.free %[[D1]]
// LIMIT2-NEXT: sched.alloc "layers.2.saves.mb0"
// LIMIT2-NEXT: sched.wait %[[E2]]
// LIMIT2-NEXT: sched.forward @t::@layers.2
// Backward gathers stay right before their spans.
// LIMIT2:      sched.loss
// LIMIT2-NEXT: %[[BR:.*]] = sched.alloc "fsdp.root.gathered"
// LIMIT2-NEXT: sched.all_gather %{{.*}} into %[[BR]]
// LIMIT2:      sched.free %{{.*}} : memref<64xf32
// LIMIT2-NEXT: %[[B2:.*]] = sched.alloc "fsdp.layers.2.gathered"
// LIMIT2-NEXT: sched.all_gather %{{.*}} into %[[B2]]
// LIMIT2-NEXT: sched.alloc "fsdp.layers.2.grad.full"

// LIMIT1:      %[[ER:.*]] = sched.all_gather
// LIMIT1:      sched.alloc "embed.saves.mb0"
// LIMIT1-NEXT: sched.wait %[[ER]]
// LIMIT1-NEXT: %[[D0:.*]] = sched.alloc "fsdp.layers.0.gathered"
// LIMIT1-NEXT: %[[E0:.*]] = sched.all_gather %{{.*}} into %[[D0]]
// LIMIT1-NEXT: sched.forward @t::@embed
// LIMIT1-NEXT: sched.alloc "layers.0.saves.mb0"
// LIMIT1-NEXT: sched.wait %[[E0]]
// LIMIT1-NEXT: %[[D1:.*]] = sched.alloc "fsdp.layers.1.gathered"
// LIMIT1-NEXT: %[[E1:.*]] = sched.all_gather %{{.*}} into %[[D1]]
// LIMIT1-NEXT: sched.forward @t::@layers.0
// LIMIT1-NEXT: sched.free %[[D0]]
// LIMIT1-NEXT: sched.alloc "layers.1.saves.mb0"
// LIMIT1-NEXT: sched.wait %[[E1]]
// LIMIT1-NEXT: %[[D2:.*]] = sched.alloc "fsdp.layers.2.gathered"
// LIMIT1-NEXT: %[[E2:.*]] = sched.all_gather %{{.*}} into %[[D2]]
// LIMIT1-NEXT: sched.forward @t::@layers.1
// LIMIT1-NEXT: sched.free %[[D1]]
// LIMIT1-NEXT: sched.alloc "layers.2.saves.mb0"
// LIMIT1-NEXT: sched.wait %[[E2]]
// LIMIT1-NEXT: sched.forward @t::@layers.2
