// no_shard with grad_sync = every_micro_batch: each micro-batch reduces
// transient per-group gradients, so each micro-batch gets its own transient
// buckets: allocated where their first group's gradient was, reduced after
// their last group's backward, waited where the first group's reduction was,
// freed where the last group's gradient was. Buckets never span micro-batches
// (a micro-batch's reductions are waited before the next one's backward).
// RUN: sed -e 's/BUCKET/512/' %S/Inputs/no_shard_every.mlir | plan-opt -sched-bucket-gradients | FileCheck %s
// A bucket larger than everything still makes one bucket per micro-batch.
// RUN: sed -e 's/BUCKET/1048576/' %S/Inputs/no_shard_every.mlir | plan-opt -sched-bucket-gradients | FileCheck %s --check-prefix=ONE

// CHECK:      %[[G1:.*]] = sched.alloc "fsdp.layers.1.grad" role grad persistent
// CHECK:      %[[G2:.*]] = sched.alloc "fsdp.layers.2.grad" role grad persistent
// CHECK:      sched.loss @t::@head mb 0
// CHECK-NEXT: %[[R:.*]] = sched.alloc "grad.bucket1" role bucket : memref<64xf32
// CHECK:      %[[B:.*]] = sched.alloc "grad.bucket0" role bucket : memref<128xf32
// CHECK-NEXT: %[[V2:.*]] = sched.view %[[B]][0] : memref<128xf32, {{.*}} to memref<32xf32
// CHECK-NEXT: %[[V1:.*]] = sched.view %[[B]][32] : memref<128xf32, {{.*}} to memref<96xf32
// CHECK-NOT:  sched.all_reduce
// CHECK:      sched.backward @t::@layers.1 mb 0
// CHECK-NEXT: sched.free
// CHECK-NEXT: %[[E:.*]] = sched.all_reduce %[[B]] group world reduce avg : memref<128xf32
// CHECK-NOT:  sched.all_reduce
// CHECK:      sched.backward @t::@embed mb 0
// CHECK-NEXT: sched.free
// CHECK-NEXT: %[[ER:.*]] = sched.all_reduce %[[R]] group world reduce avg : memref<64xf32
// CHECK-NEXT: sched.wait %[[E]]
// CHECK-NEXT: sched.accumulate %[[V2]] into %[[G2]]
// CHECK-NEXT: sched.accumulate %[[V1]] into %[[G1]]
// CHECK-NEXT: sched.free %[[B]]
// CHECK-NEXT: sched.wait %[[ER]]
// CHECK-NEXT: sched.accumulate
// CHECK-NEXT: sched.accumulate
// CHECK-NEXT: sched.free %[[R]]
// CHECK:      sched.loss @t::@head mb 1
// CHECK-NEXT: sched.alloc "grad.bucket3" role bucket : memref<64xf32
// CHECK:      sched.alloc "grad.bucket2" role bucket : memref<128xf32
// CHECK:      sched.backward @t::@layers.1 mb 1
// CHECK-NEXT: sched.free
// CHECK-NEXT: sched.all_reduce {{.*}} : memref<128xf32
// CHECK:      sched.backward @t::@embed mb 1
// CHECK-NEXT: sched.free
// CHECK-NEXT: sched.all_reduce {{.*}} : memref<64xf32
// CHECK-NOT:  sched.all_reduce

// ONE:      sched.loss @t::@head mb 0
// ONE-NEXT: %[[B:.*]] = sched.alloc "grad.bucket0" role bucket : memref<192xf32
// ONE-NOT:  sched.all_reduce
// ONE:      sched.backward @t::@embed mb 0
// ONE-NEXT: sched.free
// ONE-NEXT: %[[E:.*]] = sched.all_reduce %[[B]]
// ONE-NEXT: sched.wait %[[E]]
// ONE-COUNT-2: sched.accumulate
// ONE-NEXT: sched.accumulate
// ONE-NEXT: sched.accumulate
// ONE-NEXT: sched.free %[[B]]
// ONE:      sched.loss @t::@head mb 1
// ONE-NEXT: sched.alloc "grad.bucket1" role bucket : memref<192xf32
// ONE-NOT:  sched.all_reduce
// ONE:      sched.backward @t::@embed mb 1
// ONE-NEXT: sched.free
// ONE-NEXT: sched.all_reduce
// ONE-NOT:  sched.all_reduce
