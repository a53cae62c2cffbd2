// no_shard with grad_sync = last_micro_batch: the persistent gradients of
// groups that finish backward one after another share a persistent bucket of
// at most `bucket` bytes; each bucket is all-reduced once, after its last
// group's backward in the last micro-batch, and waited where the first of
// its groups' reductions was.
// Reduction order and sizes: layers.2 128 B, layers.1 384 B, layers.0 128 B,
// root 128 B.
//
// bucket = 512: two buckets, [layers.2, layers.1] and [layers.0, root].
// RUN: sed -e 's/BUCKET/512/' %S/Inputs/no_shard_last.mlir | plan-opt -sched-bucket-gradients | FileCheck %s --check-prefix=TWO
// bucket = 256: layers.1 is larger than a bucket and keeps its own
// reduction; so does layers.2, which does not fit with it; layers.0 and root
// share one.
// RUN: sed -e 's/BUCKET/256/' %S/Inputs/no_shard_last.mlir | plan-opt -sched-bucket-gradients | FileCheck %s --check-prefix=LARGE
// A bucket larger than everything: one bucket, one reduction.
// RUN: sed -e 's/BUCKET/1048576/' %S/Inputs/no_shard_last.mlir | plan-opt -sched-bucket-gradients | FileCheck %s --check-prefix=ONE
// A reduction waited before the next group's is issued cannot share a
// bucket with it: with layers.2 waited right after its all-reduce, layers.2
// stays alone and layers.1 and layers.0 share the bucket.
// RUN: sed -e 's/BUCKET/512/' -e 's/^  %%e_layers2 = sched.all_reduce .*/&\n  sched.wait %%e_layers2/' \
// RUN:     -e '/^  sched.wait %%e_layers2$/d' %S/Inputs/no_shard_last.mlir \
// RUN:   | plan-opt -sched-bucket-gradients | FileCheck %s --check-prefix=WAITED
// Every group larger than the bucket: nothing changes.
// RUN: sed -e 's/BUCKET/64/' %S/Inputs/no_shard_last.mlir | plan-opt > %t.small.in
// RUN: plan-opt %t.small.in -sched-bucket-gradients > %t.small.out
// RUN: diff %t.small.in %t.small.out
// Other strategies are left alone (zero1: see docs/sched.md).
// RUN: sed -e 's/BUCKET/512/' -e 's/sharding = no_shard/sharding = zero1/' %S/Inputs/no_shard_last.mlir | plan-opt > %t.zero1.in
// RUN: plan-opt %t.zero1.in -sched-bucket-gradients > %t.zero1.out
// RUN: diff %t.zero1.in %t.zero1.out

// TWO:      %[[B1:.*]] = sched.alloc "grad.bucket1" role bucket persistent : memref<64xf32
// TWO-NEXT: %[[G0:.*]] = sched.view %[[B1]][0] : memref<64xf32, {{.*}} to memref<32xf32
// TWO-NEXT: %[[GR:.*]] = sched.view %[[B1]][32] : memref<64xf32, {{.*}} to memref<32xf32
// TWO:      %[[EMBED:.*]] = sched.view %[[B1]][32] : memref<64xf32, {{.*}} to memref<16xf32
// TWO:      %[[HEAD:.*]] = sched.view %[[B1]][48] : memref<64xf32, {{.*}} to memref<16xf32
// TWO:      %[[B0:.*]] = sched.alloc "grad.bucket0" role bucket persistent : memref<128xf32
// TWO-NEXT: %[[G2:.*]] = sched.view %[[B0]][0] : memref<128xf32, {{.*}} to memref<32xf32
// TWO-NEXT: %[[G1:.*]] = sched.view %[[B0]][32] : memref<128xf32, {{.*}} to memref<96xf32
// TWO-NOT:  sched.all_reduce
// TWO:      sched.backward @t::@layers.1 mb 1
// TWO-NEXT: sched.free
// TWO-NEXT: %[[E0:.*]] = sched.all_reduce %[[B0]] group world reduce avg : memref<128xf32
// TWO-NEXT: sched.backward @t::@layers.0 mb 1
// TWO-NOT:  sched.all_reduce
// TWO:      sched.backward @t::@embed mb 1 {{.*}} grads(%[[EMBED]] :
// TWO-NEXT: sched.free
// TWO-NEXT: %[[E1:.*]] = sched.all_reduce %[[B1]] group world reduce avg : memref<64xf32
// TWO-NEXT: sched.wait %[[E0]]
// TWO-NEXT: sched.wait %[[E1]]
// TWO-NEXT: sched.optimizer_step @t::@fsdp.root {{.*}} grads(%[[GR]] :
// TWO-NEXT: sched.optimizer_step @t::@fsdp.layers.0 {{.*}} grads(%[[G0]] :
// TWO-NEXT: sched.optimizer_step @t::@fsdp.layers.1 {{.*}} grads(%[[G1]] :
// TWO-NEXT: sched.optimizer_step @t::@fsdp.layers.2 {{.*}} grads(%[[G2]] :

// LARGE:      %[[B0:.*]] = sched.alloc "grad.bucket0" role bucket persistent : memref<64xf32
// LARGE:      %[[G1:.*]] = sched.alloc "fsdp.layers.1.grad" role grad persistent
// LARGE:      %[[G2:.*]] = sched.alloc "fsdp.layers.2.grad" role grad persistent
// LARGE-NOT:  grad.bucket1
// LARGE:      sched.backward @t::@layers.2 mb 1
// LARGE-NEXT: sched.free
// LARGE-NEXT: %[[E2:.*]] = sched.all_reduce %[[G2]] group world
// LARGE:      sched.backward @t::@layers.1 mb 1
// LARGE-NEXT: sched.free
// LARGE-NEXT: %[[E1:.*]] = sched.all_reduce %[[G1]] group world
// LARGE:      sched.backward @t::@embed mb 1
// LARGE-NEXT: sched.free
// LARGE-NEXT: %[[E0:.*]] = sched.all_reduce %[[B0]] group world
// LARGE-NEXT: sched.wait %[[E2]]
// LARGE-NEXT: sched.wait %[[E1]]
// LARGE-NEXT: sched.wait %[[E0]]
// LARGE-NEXT: sched.optimizer_step

// ONE:      %[[B:.*]] = sched.alloc "grad.bucket0" role bucket persistent : memref<192xf32
// ONE-NEXT: sched.view %[[B]][0] : memref<192xf32, {{.*}} to memref<32xf32
// ONE-NEXT: sched.view %[[B]][32] : memref<192xf32, {{.*}} to memref<96xf32
// ONE-NEXT: sched.view %[[B]][128] : memref<192xf32, {{.*}} to memref<32xf32
// ONE-NEXT: sched.view %[[B]][160] : memref<192xf32, {{.*}} to memref<32xf32
// ONE-NOT:  sched.alloc {{.*}} role grad
// ONE-NOT:  sched.all_reduce
// ONE:      sched.backward @t::@embed mb 1
// ONE-NEXT: sched.free
// ONE-NEXT: %[[E:.*]] = sched.all_reduce %[[B]] group world reduce avg : memref<192xf32
// ONE-NEXT: sched.wait %[[E]]
// ONE-NEXT: sched.optimizer_step
// ONE-NOT:  sched.all_reduce
// ONE-NOT:  sched.wait

// WAITED:      %[[B:.*]] = sched.alloc "grad.bucket0" role bucket persistent : memref<128xf32
// WAITED-NEXT: sched.view %[[B]][0] : memref<128xf32, {{.*}} to memref<96xf32
// WAITED-NEXT: sched.view %[[B]][96] : memref<128xf32, {{.*}} to memref<32xf32
// WAITED:      %[[G2:.*]] = sched.alloc "fsdp.layers.2.grad" role grad persistent
// WAITED-NOT:  grad.bucket1
// WAITED:      sched.backward @t::@layers.2 mb 1
// WAITED-NEXT: sched.free
// WAITED-NEXT: %[[E2:.*]] = sched.all_reduce %[[G2]]
// WAITED-NEXT: sched.wait %[[E2]]
// WAITED:      sched.backward @t::@layers.0 mb 1
// WAITED-NEXT: sched.free
// WAITED-NEXT: %[[E:.*]] = sched.all_reduce %[[B]] group world reduce avg : memref<128xf32
// WAITED:      sched.backward @t::@embed mb 1
// WAITED-NEXT: sched.free
// WAITED-NEXT: %[[ER:.*]] = sched.all_reduce
// WAITED-NEXT: sched.wait %[[E]]
// WAITED-NEXT: sched.wait %[[ER]]
// WAITED-NEXT: sched.optimizer_step
