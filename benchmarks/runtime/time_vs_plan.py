#!/usr/bin/env python3
"""Measured step time against planc's prediction, on the cpu backend (docs/benchmarks.md,
"Time: measured against predicted").

First `plan-run --calibrate` measures this host once per world size of the cases. Then,
for each case, planc predicts rank 0's step (`--report=json`, time.step_s) twice: with the
table's `gpu = cpu` (a typical 4-core host) and with the calibrated `cluster` block in
place of the plan's; plan-run trains the case for --steps steps, and the median
`step_time_s` after the first --warmup steps is the measurement. Printed: the measured
step and tokens/s, and each prediction with its ratio to the measurement (predicted /
measured: above 1 the model is pessimistic, below optimistic).

usage: time_vs_plan.py --planc PLANC --plan-run PLAN_RUN [--steps 20] [--warmup 5]
                       [--work DIR]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

from runtime_bench import PLAN

TINY = ["train.seq_len=128", "train.micro_batch=4", "train.steps=0",
        "train.lr_schedule=constant"]
# The runtime benchmarks' model (runtime_bench.MODEL_SETS): a step of matmuls rather
# than dispatch.
MEDIUM = ["model.hidden=256", "model.intermediate=688", "model.layers=4",
          "model.heads=8", "model.kv_heads=4", "model.vocab=4096", "train.seq_len=256",
          "train.micro_batch=4", "train.steps=0", "train.lr_schedule=constant"]
CASES = [
    # name, world, --set flags
    ("llama_tiny fp32 (the demo) x1", 1, TINY),
    ("llama_tiny fp32 (the demo) x2", 2, TINY),
    ("llama_tiny bf16 x1", 1, TINY + ["train.precision=bf16_mixed"]),
    ("gpt2_tiny fp32 x2", 2, TINY + ["model=gpt2_tiny"]),
    ("5.0M llama fp32 x1", 1, MEDIUM),
    ("5.0M llama fp32 full_shard x2", 2, MEDIUM),
]


def with_cluster(plan_text, cluster_block):
    """The plan with its `cluster { ... }` block replaced by `cluster_block`."""
    replaced, count = re.subn(r"(?ms)^cluster \{.*?^\}\n", lambda _: cluster_block,
                              plan_text)
    if count != 1:
        raise SystemExit(f"{PLAN}: expected one top-level cluster block")
    return replaced


def predicted_step(planc, plan, sets):
    cmd = [planc, plan, "--report=json"]
    for s in sets:
        cmd += ["--set", s]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)["time"]["step_s"]


def measured_step(plan_run, plan, world, sets, steps, warmup, metrics):
    if os.path.exists(metrics):
        os.remove(metrics)
    cmd = [plan_run, plan, "--steps", str(steps), "--metrics", metrics, "--quiet"]
    if world > 1:
        cmd += ["--nproc", str(world)]
    for s in sets:
        cmd += ["--set", s]
    subprocess.run(cmd, check=True)
    with open(metrics) as f:
        times = [json.loads(line)["step_time_s"] for line in f if line.strip()]
    return statistics.median(times[warmup:])


def measured_run_args(description, prefix, extra=None):
    """The options of a script that measures plan-run on the demo's plan:
    --planc, --plan-run, --steps, --warmup, --work, and `extra(parser)`'s.
    Returns the options, the work directory (made) and the plan's text."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--planc", required=True)
    parser.add_argument("--plan-run", required=True)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--work", help="directory for plans and metrics (default: a "
                        "temporary one)")
    if extra:
        extra(parser)
    args = parser.parse_args()
    if args.steps <= args.warmup:
        raise SystemExit("--steps must be more than --warmup")
    work = args.work or tempfile.mkdtemp(prefix=prefix)
    os.makedirs(work, exist_ok=True)
    with open(PLAN) as f:
        plan_text = f.read()
    return args, work, plan_text


def main():
    args, work, plan_text = measured_run_args(__doc__.splitlines()[0], "time_vs_plan.")

    calibrated = {}
    for world in sorted({world for _, world, _ in CASES}):
        cmd = [args.plan_run, "--calibrate", "--quiet"]
        if world > 1:
            cmd += ["--nproc", str(world)]
        block = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        path = os.path.join(work, f"calibrated{world}.plan")
        with open(path, "w") as f:
            f.write(with_cluster(plan_text, block))
        calibrated[world] = path
        print(f"# calibrated for {world} rank(s):")
        print("\n".join("#   " + line for line in block.splitlines()))

    print(f"{'case':34} {'measured':>10} {'tokens/s':>9} {'table cpu':>10} {'ratio':>6} "
          f"{'calibrated':>10} {'ratio':>6}")
    metrics = os.path.join(work, "metrics.jsonl")
    for name, world, sets in CASES:
        sets = sets + [f"cluster.gpus_per_node={world}"]
        table = predicted_step(args.planc, PLAN, sets)
        calib = predicted_step(args.planc, calibrated[world], sets)
        measured = measured_step(args.plan_run, PLAN, world, sets, args.steps,
                                 args.warmup, metrics)
        tokens = json.loads(subprocess.run(
            [args.planc, PLAN, "--report=json"] + sum((["--set", s] for s in sets), []),
            check=True, capture_output=True, text=True).stdout)["time"]["tokens_per_step"]
        print(f"{name:34} {measured * 1e3:8.2f}ms {tokens / measured:9.0f} "
              f"{table * 1e3:8.2f}ms {table / measured:6.2f} "
              f"{calib * 1e3:8.2f}ms {calib / measured:6.2f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
