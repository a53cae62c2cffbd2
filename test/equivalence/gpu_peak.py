#!/usr/bin/env python3
"""The CUDA backend's memory promise: the measured peak is the plan's.

plan-run --backend cuda reports, for every step, the measured peak of this rank
(`peak_bytes`: the CUDA caching allocator's peak allocated bytes during the step, which
includes the device arena, plus the pinned and pageable host arenas) next to what the
schedule planned (`planned_bytes`: its arenas, all memory spaces, plus its workspace, what
sched-plan-workspace predicts LibTorch allocates outside them). For each schedule this
runs STEPS steps and checks, at every step after the first, that

    |peak_bytes - planned_bytes| <= 2% of planned_bytes

and prints both. The first step is left out: it is where LibTorch and cuBLAS create their
handles and caches, once per process (cuBLAS's workspace, which stays, is in the plan). The runs
write a --memory-trace next to their metrics in --work; a schedule that fails
also prints the five ops of its last step that needed the most memory beyond
what was alive.

The schedules come from --schedules DIR (every *.sched in it; scripts/make-gpu-scheds.sh
writes them, for a GPU node without planc) or are compiled with --planc from the tiny
Llama plan (fp32 and bf16_mixed, one GPU). A schedule for more ranks than there are
visible devices is skipped (said so). Without a usable CUDA device the script prints
"skipped: no CUDA device" and exits 77 (ctest's SKIP_RETURN_CODE).

usage: gpu_peak.py --plan-run PLAN_RUN (--schedules DIR | --planc PLANC) [--steps N]
           [--tolerance 0.02] [--work DIR]
"""
import argparse
import glob
import json
import os
import struct
import subprocess
import sys
import tempfile
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SKIP_CODE = 77
TINY_PLAN = os.path.join(ROOT, "examples", "tiny_llama_cpu.plan")
# What --planc compiles: the tiny Llama on one H100 in both precisions, with and
# without the optimizer on the host (pinned host arena).
TINY_CASES = {
    "tiny-fp32": ["train.precision=fp32"],
    "tiny-bf16": ["train.precision=bf16_mixed"],
    "tiny-bf16-offload": ["train.precision=bf16_mixed", "parallel.offload.optimizer=cpu",
                          "parallel.optimizer_step=cpu"],
}
TINY_SETS = ["cluster.nodes=1", "cluster.gpus_per_node=1", "cluster.gpu=h100_sxm",
             "train.steps=0"]


def cuda_devices():
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch without numpy warns on import
            import torch
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except ImportError:
        return 0


def schedule_body(path):
    """The JSON body of a schedule file (docs/schedule-format.md: a 32-byte header
    whose bytes 16..24 are the body's size, then the body)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"PLANSCHD":
        raise RuntimeError(f"{path}: not a schedule file")
    (size,) = struct.unpack("<Q", data[16:24])
    return json.loads(data[32:32 + size])


def world_size(path):
    """replicate x shard of a schedule file."""
    body = schedule_body(path)
    return int(body["mesh"]["replicate"]) * int(body["mesh"]["shard"])


def workspace_line(sched, trace, step):
    """The plan's workspace (what LibTorch holds outside the arenas at its worst op)
    next to the measured one: the last step's largest op peak less the device arena
    (the cuda backend's trace counts device memory, the device arena included)."""
    body = schedule_body(sched)
    with open(trace) as f:
        ops = [json.loads(line) for line in f if line.strip()]
    ops = [o for o in ops if o["step"] == step]
    if not ops:
        return "workspace: no trace for the last step"
    top = max(ops, key=lambda o: o["peak"])
    measured = top["peak"] - int(body["arena_bytes"].get("device", 0))
    return (f"workspace: planned {body['workspace_bytes']} B ({gib(body['workspace_bytes'])}), "
            f"measured {measured} B ({gib(measured)}) at op {top['op']} {top['kind']} "
            f"{top.get('unit', '')}")


def compile_tiny(planc, work):
    scheds = []
    for name, sets in TINY_CASES.items():
        out = os.path.join(work, name + ".sched")
        cmd = [planc, TINY_PLAN, "-o", out]
        for s in TINY_SETS + sets:
            cmd += ["--set", s]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(f"gpu_peak.py: planc failed: {' '.join(cmd)}\n{p.stdout}{p.stderr}")
        scheds.append(out)
    return scheds


def gib(n):
    return f"{n / 2**30:.3f} GiB"


def largest_ops(trace, step, count=5):
    """The `count` ops of `step` that needed the most beyond what was alive
    (--memory-trace), as printable lines."""
    with open(trace) as f:
        ops = [json.loads(line) for line in f if line.strip()]
    ops = [o for o in ops if o["step"] == step]
    ops.sort(key=lambda o: o["peak"] - o["live_before"], reverse=True)
    return [f"op {o['op']} {o['kind']} {o.get('unit', '')}: +{gib(o['peak'] - o['live_before'])} "
            f"at its peak, {gib(o['live_after'] - o['live_before'])} left" for o in ops[:count]]


def check(plan_run, sched, world, steps, tolerance, work):
    metrics = os.path.join(work, os.path.basename(sched) + ".jsonl")
    trace = os.path.join(work, os.path.basename(sched) + ".trace.jsonl")
    for path in (metrics, trace):
        if os.path.exists(path):
            os.remove(path)
    cmd = [plan_run]
    if world > 1:
        cmd += ["--nproc", str(world)]
    cmd += [sched, "--backend", "cuda", "--steps", str(steps), "--data", "synthetic",
            "--metrics", metrics, "--memory-trace", trace, "--quiet", "--timeout", "600"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return False, f"plan-run failed ({p.returncode}): {' '.join(cmd)}\n{p.stdout}{p.stderr}"
    with open(metrics) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    if len(rows) != steps:
        return False, f"expected {steps} metrics lines, got {len(rows)}"
    if any("planned_bytes" not in r for r in rows):
        return False, "the metrics have no planned_bytes"
    worst, lines = 0.0, []
    for r in rows[1:]:
        rel = abs(r["peak_bytes"] - r["planned_bytes"]) / r["planned_bytes"]
        worst = max(worst, rel)
        lines.append(f"step {r['step']}: measured {r['peak_bytes']} B ({gib(r['peak_bytes'])}), "
                     f"planned {r['planned_bytes']} B ({gib(r['planned_bytes'])}), "
                     f"{100 * (r['peak_bytes'] / r['planned_bytes'] - 1):+.2f}%")
    lines.append(workspace_line(sched, trace, rows[-1]["step"]))
    detail = "\n  ".join(lines) + f"\n  worst {100 * worst:.2f}% " \
        f"(tolerance {100 * tolerance:.0f}%)"
    if worst > tolerance:
        detail += "\n  ops of the last step that needed the most beyond what was alive:\n    " + \
            "\n    ".join(largest_ops(trace, rows[-1]["step"]))
    return worst <= tolerance, detail


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--plan-run", required=True)
    ap.add_argument("--schedules", help="directory of .sched files to check")
    ap.add_argument("--planc", help="compile the tiny Llama cases with this planc instead")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--tolerance", type=float, default=0.02)
    ap.add_argument("--work", default=None)
    args = ap.parse_args()
    if bool(args.schedules) == bool(args.planc):
        ap.error("give one of --schedules DIR and --planc PLANC")
    if args.steps < 2:
        ap.error("--steps must be at least 2 (the first step is not checked)")
    devices = cuda_devices()
    if devices == 0:
        print("skipped: no CUDA device")
        return SKIP_CODE
    work = args.work or tempfile.mkdtemp(prefix="plan-gpu-peak-")
    os.makedirs(work, exist_ok=True)
    if args.planc:
        scheds = compile_tiny(args.planc, work)
    else:
        scheds = sorted(glob.glob(os.path.join(args.schedules, "*.sched")))
        if not scheds:
            raise SystemExit(f"gpu_peak.py: {args.schedules}: no .sched files")
    passed = failed = skipped = 0
    for sched in scheds:
        name = os.path.basename(sched)
        world = world_size(sched)
        if world > devices:
            print(f"SKIP {name}: needs {world} CUDA devices, {devices} visible", flush=True)
            skipped += 1
            continue
        try:
            ok, detail = check(args.plan_run, sched, world, args.steps, args.tolerance, work)
        except Exception as e:  # one schedule's failure must not hide the others
            ok, detail = False, str(e)
        print(f"{'PASS' if ok else 'FAIL'} {name}:\n  {detail}", flush=True)
        passed += ok
        failed += not ok
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
