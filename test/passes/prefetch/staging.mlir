// shard_grad_op with offloaded parameters: a forward gather moves together
// with the host-to-device copy that stages its shard and both allocations,
// in their order; the staging buffer's release stays after the wait.
// RUN: sed -e 's/PREFETCH/, forward_prefetch = true/' %S/Inputs/offload.mlir \
// RUN:   | plan-opt -sched-prefetch | FileCheck %s --check-prefix=LIMIT2
// RUN: sed -e 's/PREFETCH/, forward_prefetch = true, max_inflight_gathers = 1/' %S/Inputs/offload.mlir \
// RUN:   | plan-opt -sched-prefetch | FileCheck %s --check-prefix=LIMIT1
//
// Nothing moves above a write of what it reads: with layers.1's host shard
// rewritten right before layers.0's forward, layers.1's copy and gather stay
// below that write.
// RUN: sed -e 's/PREFETCH/, forward_prefetch = true/' \
// RUN:     -e 's/^  sched.forward @t::@layers.0 /  sched.zero %%p1 : !host16\n&/' %S/Inputs/offload.mlir \
// RUN:   | plan-opt -sched-prefetch | FileCheck %s --check-prefix=WRITTEN

// LIMIT2:      %[[ER:.*]] = sched.all_gather
// LIMIT2:      sched.alloc "embed.saves.mb0"
// LIMIT2-NEXT: %[[S0:.*]] = sched.alloc "fsdp.layers.0.param.staging"
// LIMIT2-NEXT: %[[C0:.*]] = sched.copy %{{.*}} into %[[S0]]
// LIMIT2-NEXT: %[[D0:.*]] = sched.alloc "fsdp.layers.0.gathered"
// LIMIT2-NEXT: %[[E0:.*]] = sched.all_gather %[[S0]] into %[[D0]] group shard after %[[C0]]
// LIMIT2-NEXT: sched.wait %[[ER]]
// LIMIT2-NEXT: sched.free
// LIMIT2-NEXT: sched.forward @t::@embed
// LIMIT2-NEXT: sched.alloc "layers.0.saves.mb0"
// LIMIT2-NEXT: %[[S1:.*]] = sched.alloc "fsdp.layers.1.param.staging"
// LIMIT2-NEXT: %[[C1:.*]] = sched.copy %{{.*}} into %[[S1]]
// LIMIT2-NEXT: %[[D1:.*]] = sched.alloc "fsdp.layers.1.gathered"
// LIMIT2-NEXT: %[[E1:.*]] = sched.all_gather %[[S1]] into %[[D1]] group shard after %[[C1]]
// LIMIT2-NEXT: sched.wait %[[E0]]
// LIMIT2-NEXT: sched.free %[[S0]]
// LIMIT2-NEXT: sched.forward @t::@layers.0
// LIMIT2-NEXT: sched.alloc "layers.1.saves.mb0"
// LIMIT2-NEXT: sched.wait %[[E1]]
// LIMIT2-NEXT: sched.free %[[S1]]
// LIMIT2-NEXT: sched.forward @t::@layers.1

// LIMIT1:      %[[ER:.*]] = sched.all_gather
// LIMIT1:      sched.wait %[[ER]]
// LIMIT1-NEXT: %[[S0:.*]] = sched.alloc "fsdp.layers.0.param.staging"
// LIMIT1-NEXT: %[[C0:.*]] = sched.copy %{{.*}} into %[[S0]]
// LIMIT1-NEXT: %[[D0:.*]] = sched.alloc "fsdp.layers.0.gathered"
// LIMIT1-NEXT: %[[E0:.*]] = sched.all_gather %[[S0]] into %[[D0]] group shard after %[[C0]]
// LIMIT1-NEXT: sched.free
// LIMIT1-NEXT: sched.forward @t::@embed
// LIMIT1-NEXT: sched.alloc "layers.0.saves.mb0"
// LIMIT1-NEXT: sched.wait %[[E0]]
// LIMIT1-NEXT: %[[S1:.*]] = sched.alloc "fsdp.layers.1.param.staging"
// LIMIT1-NEXT: sched.copy
// LIMIT1-NEXT: sched.alloc "fsdp.layers.1.gathered"
// LIMIT1-NEXT: sched.all_gather %[[S1]]
// LIMIT1-NEXT: sched.free %[[S0]]
// LIMIT1-NEXT: sched.forward @t::@layers.0

// WRITTEN:      sched.alloc "layers.0.saves.mb0"
// WRITTEN-NEXT: sched.wait
// WRITTEN-NEXT: sched.free
// WRITTEN-NEXT: sched.zero %{{.*}} : memref<16xf32, #sched.space<pinned_host>>
// WRITTEN-NEXT: %[[S1:.*]] = sched.alloc "fsdp.layers.1.param.staging"
// WRITTEN-NEXT: sched.copy
// WRITTEN-NEXT: sched.alloc "fsdp.layers.1.gathered"
// WRITTEN-NEXT: sched.all_gather %[[S1]]
// WRITTEN-NEXT: sched.forward @t::@layers.0
