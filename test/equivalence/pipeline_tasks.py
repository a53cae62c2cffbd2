#!/usr/bin/env python3
"""A pipeline stage's micro-batch loop lowered as a sched.tasks trains as the
flat lowering does.

`planc --pipeline-tasks` makes sched-lower write each stage's loop as a
sched.tasks: each distinct forward and backward once, the stage's order as its
table, and what crosses tasks (a micro-batch's saves and kept input, a send in
flight) in slots of buffers that live for the whole loop (docs/sched.md, "The
micro-batch loop"). Each rewriting pass rewrites the bodies where it can for the
plan and writes the loop out first where it cannot yet (zero1 keeps the tasks
into the schedule file, which the runtime expands); what differs from the flat
lowering is only where those buffers lie (and where a backward's last
reductions, which the next forward completes, leave the gradient they reduce
and its staging copies). For every case of
pipeline_parallel.py's matrix (each schedule and partition, and with data
parallelism of each strategy, activation checkpointing, which
sched-activation-checkpointing does on the tasks, tensor and sequence
parallelism, offloading, LoRA and QLoRA, BERT, tied embeddings and clipping),
and for seventeen more (MORE, below: mixed precision, and plans that keep their tasks
into the schedule file), both lowerings are compiled (their files must differ: the flag took effect)
and trained on local CPU ranks with `plan-run --poison` (every transient buffer is
NaN from its alloc until written and again from its free), and every step's
loss and gradient norm must be bitwise the same (a NaN is never equal).

The script prints one line per case and ends with `N passed, N failed`.

usage: pipeline_tasks.py --planc PLANC --plan-run PLAN_RUN [--steps N] [--work DIR]
           [--only TEXT]
"""
import argparse
import math
import os
import sys
import tempfile
import time

from pipeline_parallel import CASES, MODEL, flags
from plan_runs import GLOBAL_BATCH, compare, compile_plan, train

# Mixed precision, which the matrix (fp32, against one rank) leaves out:
# sched-insert-casts on the tasks, bf16 gradients reduced in fp32 through
# staging copies, in slots where the next forward completes the reduction
# (4 micro-batches: 1F1B's stage 0 runs a forward after a backward), for each
# strategy (no_shard also with grad_sync = last_micro_batch: the casts and the
# all-reduce in the last micro-batch's bodies; hybrid_shard, whose replica
# all-reduce follows its reduce-scatter's wait and cast in the last
# micro-batch's bodies, with 1F1B and interleaved). Then plans whose tasks no pass writes out, so that the schedule file
# holds them: the tensor-parallel split on the bodies, full_shard with both
# prefetches as examples/llama3_405b_3d.plan has them (a task's first gather
# issued by the task before, into a slot), full_shard without prefetching,
# and offloading staged within the bodies (the parameters' gathers, also
# prefetched with their staging copies into the task before, and the host
# step; fp32 gradient shards, a backward's last reduce-scatters added
# into them by the next forward; the optimizer state in bf16), and
# shard_grad_op in bf16 with offloaded parameters (each stage's parameters
# staged and gathered once a step, into buffers the loop keeps), and
# gradients reduced once a step with hybrid_shard in bf16 and with offloaded
# gradients (the full gradient a buffer the loop keeps).
BF16 = ["train.precision=bf16_mixed", "train.grad_dtype=bf16"]
NO_PREFETCH = ["parallel.backward_prefetch=none"]
MORE = [
    ("pp2 x dp2 full_shard 1f1b bf16", MODEL, 4, 2, 4,
     ["parallel.pipeline=2", "parallel.sharding=full_shard"] + BF16),
    ("pp2 x dp2 no_shard interleaved(2) bf16", MODEL, 4, 2, 4,
     ["parallel.pipeline=2", "parallel.sharding=no_shard",
      "parallel.schedule=interleaved(2)"] + BF16),
    ("pp2 x dp2 zero1 1f1b bf16", MODEL, 4, 2, 4,
     ["parallel.pipeline=2", "parallel.sharding=zero1"] + BF16),
    ("pp2 x dp2 no_shard 1f1b bf16 grad_sync last_micro_batch", MODEL, 4, 2, 4,
     ["parallel.pipeline=2", "parallel.sharding=no_shard",
      "parallel.grad_sync=last_micro_batch"] + BF16),
    ("pp2 x dp4 hybrid_shard (2, 2) 1f1b bf16", MODEL, 8, 4, 2,
     ["parallel.pipeline=2", "parallel.sharding=hybrid_shard", "parallel.mesh=(2, 2)"]
     + BF16),
    ("pp2 x dp4 hybrid_shard (2, 2) interleaved(2) bf16", MODEL, 8, 4, 2,
     ["parallel.pipeline=2", "parallel.sharding=hybrid_shard", "parallel.mesh=(2, 2)",
      "parallel.schedule=interleaved(2)"] + BF16),
    ("pp2 x tp2 sp zero1 1f1b", MODEL, 4, 1, 4,
     ["parallel.pipeline=2", "parallel.tensor=2", "parallel.sequence_parallel=true",
      "parallel.sharding=zero1"]),
    ("dp2 x pp2 x tp2 sp full_shard interleaved(2) bf16, both prefetches", MODEL, 8, 2, 4,
     ["parallel.pipeline=2", "parallel.tensor=2", "parallel.sequence_parallel=true",
      "parallel.sharding=full_shard", "parallel.schedule=interleaved(2)",
      "parallel.forward_prefetch=true", "parallel.backward_prefetch=pre"] + BF16),
    ("pp2 x dp2 full_shard 1f1b, no prefetching", MODEL, 4, 2, 4,
     ["parallel.pipeline=2", "parallel.sharding=full_shard"] + NO_PREFETCH),
    ("pp2 x dp2 full_shard interleaved(2) offload params + optimizer, host step, "
     "no prefetching", MODEL, 4, 2, 4,
     ["parallel.pipeline=2", "parallel.sharding=full_shard",
      "parallel.schedule=interleaved(2)", "parallel.offload.params=cpu",
      "parallel.offload.optimizer=cpu", "parallel.optimizer_step=cpu"] + NO_PREFETCH),
    ("pp2 x dp2 full_shard interleaved(2) offload params, both prefetches", MODEL, 4, 2, 4,
     ["parallel.pipeline=2", "parallel.sharding=full_shard",
      "parallel.schedule=interleaved(2)", "parallel.offload.params=cpu",
      "parallel.forward_prefetch=true", "parallel.backward_prefetch=pre"]),
    ("pp2 x dp2 full_shard 1f1b bf16 offload params + optimizer, post prefetch", MODEL, 4, 2, 4,
     ["parallel.pipeline=2", "parallel.sharding=full_shard", "parallel.offload.params=cpu",
      "parallel.offload.optimizer=cpu", "parallel.backward_prefetch=post"] + BF16),
    ("pp2 x dp2 full_shard 1f1b offload grads + optimizer, no prefetching", MODEL, 4, 2, 4,
     ["parallel.pipeline=2", "parallel.sharding=full_shard",
      "parallel.offload.grads=cpu", "parallel.offload.optimizer=cpu"] + NO_PREFETCH),
    ("pp2 x dp2 zero1 1f1b bf16 offload optimizer", MODEL, 4, 2, 4,
     ["parallel.pipeline=2", "parallel.sharding=zero1",
      "parallel.offload.optimizer=cpu"] + BF16),
    ("pp2 x dp4 hybrid_shard (2, 2) 1f1b bf16 grad_sync last_micro_batch", MODEL, 8, 4, 2,
     ["parallel.pipeline=2", "parallel.sharding=hybrid_shard", "parallel.mesh=(2, 2)",
      "parallel.grad_sync=last_micro_batch"] + BF16),
    ("pp2 x dp2 full_shard 1f1b offload grads + optimizer, grad_sync last_micro_batch",
     MODEL, 4, 2, 4,
     ["parallel.pipeline=2", "parallel.sharding=full_shard", "parallel.offload.grads=cpu",
      "parallel.offload.optimizer=cpu", "parallel.grad_sync=last_micro_batch"]),
    ("pp2 x dp2 shard_grad_op 1f1b bf16 offload params + optimizer", MODEL, 4, 2, 4,
     ["parallel.pipeline=2", "parallel.sharding=shard_grad_op",
      "parallel.offload.params=cpu", "parallel.offload.optimizer=cpu"] + BF16),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--planc", required=True)
    ap.add_argument("--plan-run", required=True)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--work", default=None)
    ap.add_argument("--only", default=None, help="run only cases whose name contains this")
    args = ap.parse_args()
    args.work = args.work or tempfile.mkdtemp(prefix="plan-pipeline-tasks-")
    os.makedirs(args.work, exist_ok=True)
    passed = failed = 0
    for i, (name, model, world, dp, accum, sets) in enumerate(CASES + MORE):
        if args.only and args.only not in name:
            continue
        t0 = time.time()
        try:
            sets = flags(model, accum, GLOBAL_BATCH // (dp * accum)) + \
                [f"cluster.gpus_per_node={world}"] + sets
            scheds = [compile_plan(args, sets, f"case{i}-{tag}", extra)
                      for tag, extra in (("flat", ["--pipeline-tasks=false"]), ("tasks", []))]
            # The flag took effect: the slot buffers make another file.
            with open(scheds[0], "rb") as f, open(scheds[1], "rb") as g:
                if f.read() == g.read():
                    raise RuntimeError("--pipeline-tasks wrote the flat lowering's file")
            # --poison: a read of a buffer after its free (or before it is
            # written), which another buffer's bytes could hide, turns the
            # loss or the norm into NaN.
            runs = [train(args, sched, world, os.path.basename(sched)[:-len(".sched")],
                          ["--poison"])
                    for sched in scheds]
            if len(runs[0]) != args.steps or len(runs[1]) != args.steps:
                raise RuntimeError(f"expected {args.steps} metrics lines")
            # NaN is written as null.
            if not all(step.get(key) is not None and math.isfinite(step[key])
                       for run in runs for step in run for key in ("loss", "grad_norm")):
                raise RuntimeError("a loss or gradient norm is not finite or missing")
            rel = compare(runs[1], runs[0])
            ok = rel == 0.0
            print(f"{'PASS' if ok else 'FAIL'} {name} ({world} ranks): tasks vs flat "
                  f"max rel diff {rel:.2e} (bitwise: 0), {time.time() - t0:.1f}s",
                  flush=True)
        except Exception as e:  # one case's failure must not hide the others
            print(f"FAIL {name}: {e}", flush=True)
            ok = False
        passed += ok
        failed += not ok
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
