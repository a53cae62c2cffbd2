#!/usr/bin/env python3
"""A pipeline stage's micro-batch loop lowered as a sched.tasks trains as the
flat lowering does.

`planc --pipeline-tasks` makes sched-lower write each stage's loop as a
sched.tasks: each distinct forward and backward once, the stage's order as its
table, and what crosses tasks (a micro-batch's saves and kept input, a send in
flight) in slots of buffers that live for the whole loop (docs/sched.md, "The
micro-batch loop"). Of the rewriting passes only sched-activation-checkpointing
runs on tasks yet, so the pipeline writes the table out right after it; what
differs from the flat lowering is only where those buffers lie. For every case of
pipeline_parallel.py's matrix (each schedule and partition, and with data
parallelism of each strategy, activation checkpointing, which
sched-activation-checkpointing does on the tasks, tensor and sequence
parallelism, offloading, LoRA and QLoRA, BERT, tied embeddings and clipping),
both lowerings are compiled (their files must differ: the flag took effect)
and trained on local CPU ranks, and every step's loss and gradient norm must be
bitwise the same.

The script prints one line per case and ends with `N passed, N failed`.

usage: pipeline_tasks.py --planc PLANC --plan-run PLAN_RUN [--steps N] [--work DIR]
           [--only TEXT]
"""
import argparse
import os
import sys
import tempfile
import time

from pipeline_parallel import CASES, flags
from plan_runs import GLOBAL_BATCH, compare, compile_plan, train


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
    for i, (name, model, world, dp, accum, sets) in enumerate(CASES):
        if args.only and args.only not in name:
            continue
        t0 = time.time()
        try:
            sets = flags(model, accum, GLOBAL_BATCH // (dp * accum)) + \
                [f"cluster.gpus_per_node={world}"] + sets
            scheds = [compile_plan(args, sets, f"case{i}-{tag}", extra)
                      for tag, extra in (("flat", []), ("tasks", ["--pipeline-tasks"]))]
            # The flag took effect: the slot buffers make another file.
            with open(scheds[0], "rb") as f, open(scheds[1], "rb") as g:
                if f.read() == g.read():
                    raise RuntimeError("--pipeline-tasks wrote the flat lowering's file")
            runs = [train(args, sched, world, os.path.basename(sched)[:-len(".sched")])
                    for sched in scheds]
            if len(runs[0]) != args.steps or len(runs[1]) != args.steps:
                raise RuntimeError(f"expected {args.steps} metrics lines")
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
