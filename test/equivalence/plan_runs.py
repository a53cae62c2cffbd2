"""What the parallelism equivalence tests share: compile a tiny plan with --set
overrides (planc), train it on local CPU ranks (plan-run) with synthetic data, and
compare every step's loss and gradient norm with the single-rank no_shard run of the
same model, seed, data and global batch (GLOBAL_BATCH sequences of SEQ_LEN tokens a
step): fp32, within FP32_RTOL relative at every step. Both runs clip at a bound no
norm reaches, so that both compute the norm and the clip coefficient is exactly 1.
"""
import argparse
import json
import os
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAN = os.path.join(ROOT, "examples", "tiny_llama_cpu.plan")

GLOBAL_BATCH = 8
SEQ_LEN = 64
FP32_RTOL = 1e-5


def compile_plan(args, sets, tag, planc_flags=()):
    sched = os.path.join(args.work, tag + ".sched")
    cmd = [args.planc, PLAN, "-o", sched] + list(planc_flags)
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


def common(model, accum, micro_batch, model_sets=None):
    """The --set flags every run of `model` shares; `model_sets` replaces
    `model=<model>` where the model is not a preset as it is."""
    return (model_sets or [f"model={model}"]) + [
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


def check_checkpoint(args, directory, mesh):
    """`plan-checkpoint info` shows `mesh` (its mesh line) and `verify` accepts
    every rank's file of the checkpoint in `directory`."""
    for sub in ("info", "verify"):
        cmd = [args.plan_checkpoint, sub, directory]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{p.stdout}{p.stderr}")
        if sub == "info" and f"mesh:       {mesh}" not in p.stdout:
            raise RuntimeError(f"plan-checkpoint info does not show mesh {mesh}:\n{p.stdout}")


def export(args, checkpoint, out, *flags):
    """plan-checkpoint export of `checkpoint` into `out` (with `flags`)."""
    cmd = [args.plan_checkpoint, "export", checkpoint, "-o", out, *flags]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"export failed: {' '.join(cmd)}\n{p.stdout}{p.stderr}")


class CheckpointedRuns:
    """A parallel run and the single-rank run of the same model, each saving a
    checkpoint every 2 steps: their schedules, checkpoint roots and metrics."""

    def __init__(self, args, tag, sets, world, ref_sets):
        self.sched = compile_plan(args, sets, f"ckpt-{tag}")
        self.ref_sched = compile_plan(args, ref_sets, f"ckpt-{tag}-ref")
        self.dir = os.path.join(args.work, f"ckpt-{tag}")
        self.ref_dir = os.path.join(args.work, f"ckpt-{tag}-ref")
        every = ["--checkpoint-every", "2"]
        self.run = train(args, self.sched, world, f"ckpt-{tag}-run",
                         ["--checkpoint-dir", self.dir] + every)
        self.ref_run = train(args, self.ref_sched, 1, f"ckpt-{tag}-ref-run",
                             ["--checkpoint-dir", self.ref_dir] + every)

    def step(self, n):
        """The parallel run's checkpoint after step `n`."""
        return os.path.join(self.dir, f"step-{n:08d}")


def exported_losses(args, roots, ref_sched, ref_run):
    """For each (tag, checkpoint root): its last checkpoint exported to
    HuggingFace safetensors, and one step of the single-rank schedule from it
    (--init); the metrics of each. Fails where a step from the export trains
    as from the seed (the export lost the trained weights)."""
    losses = []
    for tag, root in roots:
        out = os.path.join(args.work, f"hf-{tag}")
        export(args, os.path.join(root, f"step-{args.steps:08d}"), out)
        losses.append(train(args, ref_sched, 1, f"hf-{tag}-init", ["--init", out], steps=1))
        # Trained weights, not the seed's: a step from them is another loss.
        if abs(losses[-1][0]["loss"] - ref_run[0]["loss"]) <= 1e-3 * abs(ref_run[0]["loss"]):
            raise RuntimeError(f"--init {out} trains as from the seed: the export lost "
                               "the trained weights")
    return losses


def run_cases(args, cases, flags):
    """Runs each case (name, model, world size, data-parallel ranks, grad_accum,
    --set flags) against its model's single-rank reference; `flags(model, accum,
    micro_batch)` gives a run's shared flags. Prints a line per case; returns
    (passed, failed, worst relative difference)."""
    refs = {}
    passed = failed = 0
    worst = 0.0
    for i, (name, model, world, dp, accum, sets) in enumerate(cases):
        if args.only and args.only not in name:
            continue
        t0 = time.time()
        try:
            if model not in refs:
                refs[model] = compile_and_run(
                    args, flags(model, 1, GLOBAL_BATCH) +
                    ["cluster.gpus_per_node=1", "parallel.sharding=no_shard"], 1,
                    f"ref-{model}")
                losses = [s["loss"] for s in refs[model]]
                if not min(losses[len(losses) // 2:]) < losses[0]:
                    raise RuntimeError(f"reference loss does not fall: {losses}")
            ref = refs[model]
            micro_batch = GLOBAL_BATCH // (dp * accum)
            steps = compile_and_run(
                args, flags(model, accum, micro_batch) +
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
    return passed, failed, worst


def main(prefix, cases, flags, checkpoint_cases):
    """Parses the flags, runs `cases` (run_cases) and, with --plan-checkpoint,
    `checkpoint_cases(args)`, which yields (name, relative difference,
    tolerance); prints `N passed, N failed` last and returns the exit code."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--planc", required=True)
    ap.add_argument("--plan-run", required=True)
    ap.add_argument("--plan-checkpoint", default=None,
                    help="also save, resume, reshard and export checkpoints with this tool")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--work", default=None)
    ap.add_argument("--only", default=None, help="run only cases whose name contains this")
    args = ap.parse_args()
    args.work = args.work or tempfile.mkdtemp(prefix=prefix)
    os.makedirs(args.work, exist_ok=True)

    passed, failed, worst = run_cases(args, cases, flags)
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
