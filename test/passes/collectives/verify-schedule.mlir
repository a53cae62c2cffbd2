// Every strategy's program is one sched-verify-schedule accepts: buffers
// written before read and freed once after their last use, every event waited
// exactly once, nothing touched while an async op still uses it. The inputs
// are the other tests' single-rank programs.
//
// RUN: rm -rf %t && mkdir -p %t
// RUN: split-file %S/no-shard.mlir %t/no-shard
// RUN: split-file %S/zero1.mlir %t/zero1
// RUN: split-file %S/shard-grad-op.mlir %t/shard-grad-op
// RUN: split-file %S/full-shard.mlir %t/full-shard
// RUN: split-file %S/hybrid-shard.mlir %t/hybrid-shard
// RUN: plan-opt %t/no-shard/one-clip.mlir -sched-insert-collectives -sched-verify-schedule -o /dev/null
// RUN: plan-opt %t/no-shard/last-tied.mlir -sched-insert-collectives -sched-verify-schedule -o /dev/null
// RUN: plan-opt %t/no-shard/every-tied.mlir -sched-insert-collectives -sched-verify-schedule -o /dev/null
// RUN: plan-opt %t/zero1/every-clip.mlir -sched-insert-collectives -sched-verify-schedule -o /dev/null
// RUN: plan-opt %t/zero1/last-tied.mlir -sched-insert-collectives -sched-verify-schedule -o /dev/null
// RUN: plan-opt %t/shard-grad-op/every.mlir -sched-insert-collectives -sched-verify-schedule -o /dev/null
// RUN: plan-opt %t/shard-grad-op/last-clip.mlir -sched-insert-collectives -sched-verify-schedule -o /dev/null
// RUN: plan-opt %t/full-shard/tied-clip.mlir -sched-insert-collectives -sched-verify-schedule -o /dev/null
// RUN: plan-opt %t/full-shard/every.mlir -sched-insert-collectives -sched-verify-schedule -o /dev/null
// RUN: plan-opt %t/full-shard/last.mlir -sched-insert-collectives -sched-verify-schedule -o /dev/null
// RUN: plan-opt %t/full-shard/checkpoint.mlir -sched-insert-collectives -sched-verify-schedule -o /dev/null
// RUN: plan-opt %t/hybrid-shard/every-clip.mlir -sched-insert-collectives -sched-verify-schedule -o /dev/null
// RUN: plan-opt %t/hybrid-shard/last.mlir -sched-insert-collectives -sched-verify-schedule -o /dev/null
