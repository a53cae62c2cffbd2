// backward_prefetch: each group's backward all-gather moves into the backward
// of the group before it (pre: to that group's start, and above its wait when
// two gathers may be in flight; post: right after it, once its gathered
// parameters are released, ahead of its reduce-scatter, FSDP's order).
// RUN: sed -e 's/SHARDING/full_shard/' -e 's/PREFETCH/, backward_prefetch = pre/' %S/Inputs/full_shard.mlir \
// RUN:   | plan-opt -sched-prefetch | FileCheck %s --check-prefix=PRE
// RUN: sed -e 's/SHARDING/full_shard/' -e 's/PREFETCH/, backward_prefetch = pre, max_inflight_gathers = 1/' %S/Inputs/full_shard.mlir \
// RUN:   | plan-opt -sched-prefetch | FileCheck %s --check-prefix=PRE1
// RUN: sed -e 's/SHARDING/full_shard/' -e 's/PREFETCH/, backward_prefetch = post/' %S/Inputs/full_shard.mlir \
// RUN:   | plan-opt -sched-prefetch | FileCheck %s --check-prefix=POST
// RUN: sed -e 's/SHARDING/full_shard/' -e 's/PREFETCH/, backward_prefetch = none/' %S/Inputs/full_shard.mlir | plan-opt > %t.none.in
// RUN: plan-opt %t.none.in -sched-prefetch > %t.none.out
// RUN: diff %t.none.in %t.none.out

// Forward gathers stay (forward_prefetch is off).
// PRE:      %[[D0:.*]] = sched.alloc "fsdp.layers.0.gathered"
// PRE-NEXT: sched.all_gather %{{.*}} into %[[D0]]
// PRE-NEXT: sched.alloc "layers.0.saves.mb0"
// The root group's backward gather follows its forward: nothing to overlap.
// PRE:      sched.loss
// PRE-NEXT: %[[BR:.*]] = sched.alloc "fsdp.root.gathered"
// PRE-NEXT: %[[ER:.*]] = sched.all_gather %{{.*}} into %[[BR]]
// PRE:      %[[B2:.*]] = sched.alloc "fsdp.layers.2.gathered"
// PRE-NEXT: %[[E2:.*]] = sched.all_gather %{{.*}} into %[[B2]]
// PRE-NEXT: sched.wait %[[ER]]
// PRE-NEXT: sched.backward @t::@head
// PRE-NEXT: sched.free
// PRE-NEXT: sched.alloc "fsdp.layers.2.grad.full"
// PRE-NEXT: sched.zero
// PRE-NEXT: %[[B1:.*]] = sched.alloc "fsdp.layers.1.gathered"
// PRE-NEXT: %[[E1:.*]] = sched.all_gather %{{.*}} into %[[B1]]
// PRE-NEXT: sched.wait %[[E2]]
// PRE-NEXT: sched.backward @t::@layers.2
// PRE-NEXT: sched.free
// PRE-NEXT: sched.free %[[B2]]
// PRE-NEXT: sched.reduce_scatter
// PRE-NEXT: sched.alloc "fsdp.layers.1.grad.full"
// PRE-NEXT: sched.zero
// PRE-NEXT: %[[B0:.*]] = sched.alloc "fsdp.layers.0.gathered"
// PRE-NEXT: %[[E0:.*]] = sched.all_gather %{{.*}} into %[[B0]]
// PRE-NEXT: sched.wait %[[E1]]
// PRE-NEXT: sched.backward @t::@layers.1
// PRE:      sched.wait %[[E0]]
// PRE-NEXT: sched.backward @t::@layers.0

// PRE1:      sched.loss
// PRE1-NEXT: sched.alloc "fsdp.root.gathered"
// PRE1-NEXT: %[[ER:.*]] = sched.all_gather
// PRE1:      sched.wait %[[ER]]
// PRE1-NEXT: %[[B2:.*]] = sched.alloc "fsdp.layers.2.gathered"
// PRE1-NEXT: %[[E2:.*]] = sched.all_gather %{{.*}} into %[[B2]]
// PRE1-NEXT: sched.backward @t::@head
// PRE1-NEXT: sched.free
// PRE1-NEXT: sched.alloc "fsdp.layers.2.grad.full"
// PRE1-NEXT: sched.zero
// PRE1-NEXT: sched.wait %[[E2]]
// PRE1-NEXT: %[[B1:.*]] = sched.alloc "fsdp.layers.1.gathered"
// PRE1-NEXT: %[[E1:.*]] = sched.all_gather %{{.*}} into %[[B1]]
// PRE1-NEXT: sched.backward @t::@layers.2
// PRE1:      sched.wait %[[E1]]
// PRE1-NEXT: %[[B0:.*]] = sched.alloc "fsdp.layers.0.gathered"
// PRE1-NEXT: %[[E0:.*]] = sched.all_gather %{{.*}} into %[[B0]]
// PRE1-NEXT: sched.backward @t::@layers.1

// POST:      sched.loss
// POST-NEXT: sched.alloc "fsdp.root.gathered"
// POST-NEXT: %[[ER:.*]] = sched.all_gather
// POST:      sched.wait %[[ER]]
// POST-NEXT: sched.backward @t::@head
// POST-NEXT: %[[B2:.*]] = sched.alloc "fsdp.layers.2.gathered"
// POST-NEXT: %[[E2:.*]] = sched.all_gather %{{.*}} into %[[B2]]
// POST-NEXT: sched.free
// POST-NEXT: %[[G2:.*]] = sched.alloc "fsdp.layers.2.grad.full"
// POST-NEXT: sched.zero
// POST-NEXT: sched.wait %[[E2]]
// POST-NEXT: sched.backward @t::@layers.2
// POST-NEXT: sched.free
// POST-NEXT: sched.free %[[B2]]
// POST-NEXT: %[[B1:.*]] = sched.alloc "fsdp.layers.1.gathered"
// POST-NEXT: %[[E1:.*]] = sched.all_gather %{{.*}} into %[[B1]]
// POST-NEXT: sched.reduce_scatter %[[G2]]
// POST-NEXT: sched.alloc "fsdp.layers.1.grad.full"
// POST-NEXT: sched.zero
// POST-NEXT: sched.wait %[[E1]]
// POST-NEXT: sched.backward @t::@layers.1
// POST-NEXT: sched.free
// POST-NEXT: sched.free %[[B1]]
// POST-NEXT: %[[B0:.*]] = sched.alloc "fsdp.layers.0.gathered"
// POST-NEXT: %[[E0:.*]] = sched.all_gather %{{.*}} into %[[B0]]
// POST-NEXT: sched.reduce_scatter
