#!/usr/bin/env python3
"""Tensor parallelism trains as one rank does.

Each case compiles a tiny model with a tensor axis (planc), trains it STEPS steps with
plan-run on local CPU ranks, and compares every step's loss and gradient norm with the
single-rank no_shard run of the same model, seed, synthetic data and global batch
(8 sequences of 64 tokens a step): fp32, within FP32_RTOL relative at every step.
Both runs clip at a bound no norm reaches, so that both compute the norm and the
clip coefficient is exactly 1.

The cases are the issue's matrix (docs/language.md, "Tensor parallelism"): tp 2;
tp 2 with sequence parallelism; tp 2 x dp 2 with full_shard, and tp 2 x dp 4 with hybrid_shard (two
replicas of two shards, the smallest hybrid mesh);
grouped-query attention with kv_heads = tensor (llama_tiny: 4 heads, 2 key/value
heads); GPT-2 (its fused c_attn, tied vocabulary-parallel head and row-parallel biases),
also with a vocabulary the ranks do not divide (padded);
and sequence parallelism with activation checkpointing and gradient accumulation, where
the parts are recomputed and the whole parameters' gradients are summed over the
tensor group once per accumulated buffer.

With --plan-checkpoint, checkpoints too (docs/checkpoints.md): a tensor-parallel run
(tp 2 + SP, full_shard over 2 data-parallel ranks) saves every 2 steps; resumed at step 2
with its own schedule it continues bitwise as the run did; resumed with the single-rank
schedule (reshard tp 2 -> 1), and the single-rank run's checkpoint resumed with the
tensor-parallel schedule (1 -> 2), each continues as the single-rank run does within
FP32_RTOL; and the HuggingFace export of each run's last checkpoint, trained one step from
by the single-rank schedule (--init), gives the same loss within FP32_RTOL.

The script prints one line per case and ends with `N passed, N failed`.

usage: tensor_parallel.py --planc PLANC --plan-run PLAN_RUN [--plan-checkpoint TOOL]
           [--steps N] [--work DIR] [--only TEXT]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAN = os.path.join(ROOT, "examples", "tiny_llama_cpu.plan")

GLOBAL_BATCH = 8
SEQ_LEN = 64
FP32_RTOL = 1e-5

# A model's --set flags, where it is not a preset as it is.
MODEL_SETS = {
    # A vocabulary 2 ranks do not divide: rank 1's slice ends in a padding
    # row, which the lookup never reads and the loss never predicts.
    "gpt2_tiny_vocab511": ["model=gpt2_tiny", "model.vocab=511"],
}

# name: (model, world size, data-parallel ranks, grad_accum, --set flags)
CASES = [
    ("llama tp2", "llama_tiny", 2, 1, 1, ["parallel.tensor=2"]),
    ("llama tp2 sp", "llama_tiny", 2, 1, 1,
     ["parallel.tensor=2", "parallel.sequence_parallel=true"]),
    ("llama tp2 x dp2 full_shard", "llama_tiny", 4, 2, 1,
     ["parallel.tensor=2", "parallel.sharding=full_shard"]),
    # hybrid_shard needs two replicas of at least two shards: dp 4.
    ("llama tp2 x dp4 hybrid_shard", "llama_tiny", 8, 4, 1,
     ["parallel.tensor=2", "parallel.sharding=hybrid_shard", "parallel.mesh=(2, 2)"]),
    ("llama gqa kv_heads=tensor=2 sp full_shard", "llama_tiny", 4, 2, 1,
     ["model.kv_heads=2", "parallel.tensor=2", "parallel.sequence_parallel=true",
      "parallel.sharding=full_shard"]),
    ("llama tp2 sp checkpointing accum 2", "llama_tiny", 2, 1, 2,
     ["parallel.tensor=2", "parallel.sequence_parallel=true",
      "train.activation_checkpointing=full"]),
    ("gpt2 tp2", "gpt2_tiny", 2, 1, 1, ["parallel.tensor=2"]),
    ("gpt2 tp2 sp x dp2 full_shard accum 2", "gpt2_tiny", 4, 2, 2,
     ["parallel.tensor=2", "parallel.sequence_parallel=true",
      "parallel.sharding=full_shard"]),
    ("gpt2 tp2 sp padded vocabulary (511)", "gpt2_tiny_vocab511", 2, 1, 1,
     ["parallel.tensor=2", "parallel.sequence_parallel=true"]),
]


def compile_plan(args, sets, tag):
    sched = os.path.join(args.work, tag + ".sched")
    cmd = [args.planc, PLAN, "-o", sched]
    for s in sets:
        cmd += ["--set", s]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"planc failed: {' '.join(cmd)}\n{p.stdout}{p.stderr}")
    return sched


def compile_and_run(args, sets, world, tag, extra=(), steps=None):
    return train(args, compile_plan(args, sets, tag), world, tag, extra, steps)


def train(args, sched, world, tag, extra=(), steps=None):
    """plan-run on `world` local ranks; the --metrics lines it wrote."""
    steps = steps or args.steps
    metrics = os.path.join(args.work, tag + ".jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    cmd = [args.plan_run, "--nproc", str(world), sched, "--steps", str(steps),
           "--data", "synthetic", "--metrics", metrics, "--quiet", "--timeout", "120",
           "--backend", "cpu"] + list(extra)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        raise RuntimeError(f"plan-run failed ({p.returncode}): {' '.join(cmd)}\n"
                           f"{p.stdout}{p.stderr}")
    with open(metrics) as f:
        steps = [json.loads(line) for line in f if line.strip()]
    return steps


def common(model, accum, micro_batch):
    return MODEL_SETS.get(model, [f"model={model}"]) + [
        f"train.seq_len={SEQ_LEN}", f"train.micro_batch={micro_batch}",
        f"train.grad_accum={accum}", "train.precision=fp32", "train.steps=0",
        "train.grad_clip=1e9", "cluster.nodes=1"]


def compare(ours, theirs, keys=("loss", "grad_norm")):
    """The largest relative difference of `keys` over the steps both have."""
    by_step = {t["step"]: t for t in theirs}
    if not ours or any(o["step"] not in by_step for o in ours):
        raise RuntimeError(f"steps {[o['step'] for o in ours]} are not all in "
                           f"{sorted(by_step)}")
    return max(abs(o[k] - by_step[o["step"]][k]) / abs(by_step[o["step"]][k])
               for o in ours for k in keys)


def checkpoint_cases(args):
    """Save, resume, reshard and export a tensor-parallel run; yields (name, rel, tol)."""
    tp_sets = common("llama_tiny", 1, GLOBAL_BATCH // 2) + [
        "cluster.gpus_per_node=4", "parallel.tensor=2", "parallel.sequence_parallel=true",
        "parallel.sharding=full_shard"]
    ref_sets = common("llama_tiny", 1, GLOBAL_BATCH) + [
        "cluster.gpus_per_node=1", "parallel.sharding=no_shard"]
    tp_sched = compile_plan(args, tp_sets, "ckpt-tp")
    ref_sched = compile_plan(args, ref_sets, "ckpt-ref")
    tp_dir = os.path.join(args.work, "ckpt-tp")
    ref_dir = os.path.join(args.work, "ckpt-ref")
    every = ["--checkpoint-every", "2"]
    tp_run = train(args, tp_sched, 4, "ckpt-tp-run", ["--checkpoint-dir", tp_dir] + every)
    ref_run = train(args, ref_sched, 1, "ckpt-ref-run", ["--checkpoint-dir", ref_dir] + every)
    step2 = "step-00000002"
    yield ("tp2 checkpointing run vs single rank", compare(tp_run, ref_run), FP32_RTOL)
    # Its description names the tensor axis, and every rank's file checks out.
    for sub in ("info", "verify"):
        cmd = [args.plan_checkpoint, sub, os.path.join(tp_dir, step2)]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{p.stdout}{p.stderr}")
        if sub == "info" and "mesh:       1x2x2 (replicate x shard x tensor)" not in p.stdout:
            raise RuntimeError(f"plan-checkpoint info does not show the tensor axis:\n{p.stdout}")
    resumed = train(args, tp_sched, 4, "ckpt-tp-resumed",
                    ["--resume", os.path.join(tp_dir, step2)])
    yield ("tp2 resumed at step 2 vs its run (bitwise)", compare(resumed, tp_run), 0.0)
    to_one = train(args, ref_sched, 1, "ckpt-tp-to-1", ["--resume", os.path.join(tp_dir, step2)])
    yield ("tp2 checkpoint resumed on 1 rank (tp 2 -> 1)", compare(to_one, ref_run), FP32_RTOL)
    to_two = train(args, tp_sched, 4, "ckpt-1-to-tp",
                   ["--resume", os.path.join(ref_dir, step2)])
    yield ("1-rank checkpoint resumed with tp2 (1 -> 2)", compare(to_two, ref_run), FP32_RTOL)
    losses = []
    for tag, root in (("tp", tp_dir), ("ref", ref_dir)):
        out = os.path.join(args.work, f"hf-{tag}")
        cmd = [args.plan_checkpoint, "export", os.path.join(root, f"step-{args.steps:08d}"),
               "-o", out]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"export failed: {' '.join(cmd)}\n{p.stdout}{p.stderr}")
        losses.append(train(args, ref_sched, 1, f"hf-{tag}-init", ["--init", out], steps=1))
        # Trained weights, not the seed's: a step from them is another loss.
        if abs(losses[-1][0]["loss"] - ref_run[0]["loss"]) <= 1e-3 * abs(ref_run[0]["loss"]):
            raise RuntimeError(f"--init {out} trains as from the seed: the export lost "
                               "the trained weights")
    yield ("HF export of the tp2 run vs of the single-rank run (one step from each)",
           compare(losses[0], losses[1]), FP32_RTOL)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--planc", required=True)
    ap.add_argument("--plan-run", required=True)
    ap.add_argument("--plan-checkpoint", default=None,
                    help="also save, resume, reshard and export checkpoints with this tool")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--work", default=None)
    ap.add_argument("--only", default=None, help="run only cases whose name contains this")
    args = ap.parse_args()
    args.work = args.work or tempfile.mkdtemp(prefix="plan-tensor-parallel-")
    os.makedirs(args.work, exist_ok=True)

    refs = {}
    passed = failed = 0
    worst = 0.0
    for i, (name, model, world, dp, accum, sets) in enumerate(CASES):
        if args.only and args.only not in name:
            continue
        t0 = time.time()
        try:
            if model not in refs:
                refs[model] = compile_and_run(
                    args, common(model, 1, GLOBAL_BATCH) +
                    ["cluster.gpus_per_node=1", "parallel.sharding=no_shard"], 1,
                    f"ref-{model}")
                losses = [s["loss"] for s in refs[model]]
                if not min(losses[len(losses) // 2:]) < losses[0]:
                    raise RuntimeError(f"reference loss does not fall: {losses}")
            ref = refs[model]
            micro_batch = GLOBAL_BATCH // (dp * accum)
            steps = compile_and_run(
                args, common(model, accum, micro_batch) +
                [f"cluster.gpus_per_node={world}"] + sets, world, f"case{i}")
            if len(steps) != args.steps or len(ref) != args.steps:
                raise RuntimeError(f"expected {args.steps} metrics lines, got {len(steps)}")
            rel = 0.0
            for ours, theirs in zip(steps, ref):
                for key in ("loss", "grad_norm"):
                    if key not in ours or key not in theirs:
                        raise RuntimeError(f"step {ours['step']} has no {key}")
                    rel = max(rel, abs(ours[key] - theirs[key]) / abs(theirs[key]))
            ok = rel <= FP32_RTOL
            worst = max(worst, rel)
            print(f"{'PASS' if ok else 'FAIL'} {name} ({world} ranks): max rel diff of loss "
                  f"and grad norm {rel:.2e} (tol {FP32_RTOL:.0e}), loss "
                  f"{steps[0]['loss']:.4f} -> {steps[-1]['loss']:.4f}, "
                  f"{time.time() - t0:.1f}s", flush=True)
            if not ok:
                for ours, theirs in zip(steps, ref):
                    print(f"  step {ours['step']}: loss {ours['loss']!r} vs {theirs['loss']!r}, "
                          f"grad norm {ours['grad_norm']!r} vs {theirs['grad_norm']!r}")
            passed += ok
            failed += not ok
        except Exception as e:  # one case's failure must not hide the others
            print(f"FAIL {name}: {e}", flush=True)
            failed += 1
    if args.plan_checkpoint and (not args.only or "checkpoint" in args.only):
        try:
            for name, rel, tol in checkpoint_cases(args):
                ok = rel <= tol
                worst = max(worst, rel)
                print(f"{'PASS' if ok else 'FAIL'} checkpoint: {name}: max rel diff {rel:.2e} "
                      f"(tol {tol:.0e})", flush=True)
                passed += ok
                failed += not ok
        except Exception as e:
            print(f"FAIL checkpoint: {e}", flush=True)
            failed += 1
    print(f"max rel diff: {worst:.2e}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
