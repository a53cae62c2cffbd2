#!/usr/bin/env python3
"""The auto-planner's ranking against runs (docs/planner.md, "Honesty").

For the tiny CPU Llama on 2 and 4 local ranks, `planc --search` ranks the candidates for
one global batch, with the device measured on this host (`plan-run --calibrate
--device-file hostN.json`, which the plan names as `cluster { gpu = "hostN.json" }`) so
that the time model's figures are this machine's. Its top 3
are then trained with plan-run for --steps steps each, and the median `step_time_s`
after --warmup steps is the measurement. Printed per case: each candidate's settings,
predicted and measured step with their ratio, and whether the measured order is the
predicted one.

usage: search_vs_run.py --planc PLANC --plan-run PLAN_RUN [--steps 20] [--warmup 5]
                        [--top 3] [--work DIR]
"""
import json
import os
import subprocess
import sys

from time_vs_plan import measured_run_args, measured_step, with_cluster

# The demo's model and batch, with the data-parallel degree changed per case.
SETS = ["train.seq_len=128", "train.micro_batch=4", "train.steps=0",
        "train.lr_schedule=constant"]
GLOBAL_BATCH = 16  # sequences: 4 per rank on 4 ranks, 8 on 2


def describe(candidate):
    offload = "+".join(k for k, v in sorted(candidate["offload"].items()) if v == "cpu")
    text = (f"{candidate['sharding']} {candidate['mesh'][0]}x{candidate['mesh'][1]}, "
            f"offload {offload or 'none'}, ckpt {candidate['activation_checkpointing']}, "
            f"mb {candidate['micro_batch']} x ga {candidate['grad_accum']}")
    if candidate["sharding"] in ("full_shard", "hybrid_shard"):
        text += f", prefetch {candidate['backward_prefetch']}"
    if candidate["forward_prefetch"]:
        text += "+fwd"
    return text


def main():
    args, work, plan_text = measured_run_args(
        __doc__.splitlines()[0], "search_vs_run.",
        lambda parser: parser.add_argument("--top", type=int, default=3))
    metrics = os.path.join(work, "metrics.jsonl")

    agreed = 0
    worlds = (2, 4)
    for world in worlds:
        device = f"host{world}.json"
        subprocess.run([args.plan_run, "--calibrate", "--quiet", "--nproc", str(world),
                        "--device-file", os.path.join(work, device)], check=True)
        plan = os.path.join(work, f"calibrated{world}.plan")
        with open(plan, "w") as f:
            f.write(with_cluster(plan_text, f'cluster {{\n  gpus_per_node = {world}\n'
                                 f'  gpu = "{device}"\n}}\n'))
        sets = SETS + [f"cluster.gpus_per_node={world}",
                       f"train.global_batch={GLOBAL_BATCH}", "train.grad_accum=1"]
        # micro_batch x grad_accum x world must be the global batch before the
        # search changes them.
        sets[1] = f"train.micro_batch={GLOBAL_BATCH // world}"
        cmd = [args.planc, plan, "--search=json", "--search-top", str(args.top)]
        for s in sets:
            cmd += ["--set", s]
        result = json.loads(subprocess.run(cmd, check=True, capture_output=True,
                                           text=True).stdout)
        print(f"# {world} ranks, global batch {GLOBAL_BATCH} x 128 tokens: searched "
              f"{result['stats']['space']} candidates in "
              f"{result['stats']['seconds'] * 1e3:.0f} ms")
        print(f"{'rank':>4}  {'candidate':70} {'predicted':>10} {'measured':>10} "
              f"{'ratio':>6}")
        measured = []
        for rank, candidate in enumerate(result["best"], 1):
            run_sets = [s for s in sets if not s.startswith("train.grad_accum")]
            run_sets += candidate["set"]
            step = measured_step(args.plan_run, plan, world, run_sets, args.steps,
                                 args.warmup, metrics)
            measured.append(step)
            predicted = candidate["step_seconds"]
            print(f"{rank:>4}  {describe(candidate):70} {predicted * 1e3:8.2f}ms "
                  f"{step * 1e3:8.2f}ms {predicted / step:6.2f}", flush=True)
        order = sorted(range(len(measured)), key=lambda i: measured[i])
        same = order == list(range(len(measured)))
        agreed += same
        print(f"measured order: {' '.join(str(i + 1) for i in order)} "
              f"({'the predicted one' if same else 'not the predicted one'})\n")
    print(f"{agreed} of {len(worlds)} cases in the predicted order")


if __name__ == "__main__":
    sys.exit(main())
