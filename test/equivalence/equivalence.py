#!/usr/bin/env python3
"""The runtime's core promise: every strategy trains identically.

For a tiny Llama and a tiny GPT-2 with the same seed, synthetic data and global batch
(8 sequences of 64 tokens per step), each configuration below is compiled with planc and
trained for STEPS steps by plan-run with W local ranks; its per-step losses must match the
single-rank no_shard run of the same model and precision:

  fp32:       |loss - ref| <= 1e-5 * |ref| at every step.
  bf16_mixed: |loss - ref| <= 2e-4 * |ref| against the single-rank bf16_mixed run. Every
              strategy computes each sequence's forward and backward with the same bf16
              operations; what differs is the order of the fp32 reductions across ranks
              and micro-batches and, for some stages, where gradients are rounded to bf16
              between micro-batches. Measured over this set: at most 2.3e-5. The bound is
              ten times that, and still well under what a real fault does here: one
              step's progress is about 1% of the loss, so a skipped or doubled step, a
              wrong learning rate or a rank training on the wrong slice of the batch
              shows up at 1e-3 or more.

The full product (2 models x 5 strategies x 3 world sizes x 2 precisions x 2 offload x 3
accumulation modes x 2 activation checkpointing = 720 runs) is too slow for CI, so the
cases are a pairwise covering set: every pair of option values that can be combined
appears together in at least one case. hybrid_shard needs two "nodes" of at least 2 ranks, so it only exists at world 4;
the pairs (hybrid_shard, world 1) and (hybrid_shard, world 2) are impossible, not missing.
The script prints the cases, then one line per case, and ends with `N passed, N failed`.

usage: equivalence.py --planc PLANC --plan-run PLAN_RUN --plan PLAN [--steps N] [--work DIR]
"""
import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time

GLOBAL_BATCH = 8
SEQ_LEN = 64
BF16_RTOL = 2e-4
FP32_RTOL = 1e-5

FACTORS = {
    "model": ["llama_tiny", "gpt2_tiny"],
    "sharding": ["no_shard", "zero1", "shard_grad_op", "full_shard", "hybrid_shard"],
    "world": [1, 2, 4],
    "precision": ["fp32", "bf16_mixed"],
    "offload": ["none", "cpu"],
    "accum": ["1", "2", "2_last"],
    "checkpointing": ["none", "full"],
}


def valid(case):
    if case.get("sharding") == "hybrid_shard" and case.get("world", 4) != 4:
        return False
    if case.get("accum") == "2_last" and case.get("sharding") not in (None, "no_shard", "hybrid_shard"):
        # grad_sync = last_micro_batch is DDP's no_sync(): only for unsharded gradients.
        return False
    return True


def pairwise_cases():
    """Greedy all-pairs: repeatedly pick the valid full case covering the most uncovered pairs."""
    names = list(FACTORS)
    uncovered = set()
    for (a, b) in itertools.combinations(names, 2):
        for va in FACTORS[a]:
            for vb in FACTORS[b]:
                if valid({a: va, b: vb}):
                    uncovered.add(((a, va), (b, vb)))
    all_cases = [dict(zip(names, vals)) for vals in itertools.product(*FACTORS.values())]
    all_cases = [c for c in all_cases if valid(c)]
    chosen = []
    while uncovered:
        best, best_cov = None, set()
        for c in all_cases:
            cov = {p for p in itertools.combinations(sorted(c.items(), key=lambda kv: names.index(kv[0])), 2)
                   if p in uncovered}
            if len(cov) > len(best_cov):
                best, best_cov = c, cov
        if not best_cov:
            break
        chosen.append(best)
        uncovered -= best_cov
    return chosen, uncovered


def overrides(case):
    w = case["world"]
    accum = 1 if case["accum"] == "1" else 2
    mb = GLOBAL_BATCH // (w * accum)
    sets = [f"model={case['model']}", f"train.seq_len={SEQ_LEN}", f"train.micro_batch={mb}",
            f"train.grad_accum={accum}", f"train.precision={case['precision']}",
            f"parallel.sharding={case['sharding']}", "train.steps=0"]
    if case["sharding"] == "hybrid_shard":
        sets += ["cluster.nodes=2", "cluster.gpus_per_node=2"]
    else:
        sets += ["cluster.nodes=1", f"cluster.gpus_per_node={w}"]
    if case["checkpointing"] == "full":
        sets.append("train.activation_checkpointing=full")
    if case["accum"] == "2_last":
        sets.append("parallel.grad_sync=last_micro_batch")
    if case["offload"] == "cpu":
        sets += ["parallel.offload.optimizer=cpu", "parallel.optimizer_step=cpu"]
        if case["sharding"] in ("shard_grad_op", "full_shard", "hybrid_shard"):
            sets.append("parallel.offload.grads=cpu")
        if case["sharding"] in ("full_shard", "hybrid_shard"):
            sets.append("parallel.offload.params=cpu")
    return sets


def run(case, args, work, tag):
    sched = os.path.join(work, tag + ".sched")
    metrics = os.path.join(work, tag + ".jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    cmd = [args.planc, args.plan, "-o", sched]
    for s in overrides(case):
        cmd += ["--set", s]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"planc failed: {' '.join(cmd)}\n{p.stdout}{p.stderr}")
    cmd = [args.plan_run, "--nproc", str(case["world"]), sched, "--steps", str(args.steps),
           "--data", "synthetic", "--metrics", metrics, "--quiet", "--timeout", "120"]
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        raise RuntimeError(f"plan-run failed ({p.returncode}): {' '.join(cmd)}\n{p.stdout}{p.stderr}")
    with open(metrics) as f:
        losses = [json.loads(line)["loss"] for line in f if line.strip()]
    if len(losses) != args.steps:
        raise RuntimeError(f"expected {args.steps} metrics lines, got {len(losses)}")
    return losses, time.time() - t0


def describe(case):
    return " ".join(f"{k}={v}" for k, v in case.items())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--planc", required=True)
    ap.add_argument("--plan-run", required=True)
    ap.add_argument("--plan", required=True)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--work", default=None)
    ap.add_argument("--only", default=None, help="run only cases whose description contains this")
    args = ap.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="plan-equivalence-")
    os.makedirs(work, exist_ok=True)

    cases, impossible = pairwise_cases()
    print(f"{len(cases)} cases cover every valid pair of option values"
          + (f" ({len(impossible)} pairs impossible)" if impossible else ""))
    refs = {}
    passed = failed = 0
    worst = {"fp32": 0.0, "bf16_mixed": 0.0}
    for i, case in enumerate(cases):
        if args.only and args.only not in describe(case):
            continue
        key = (case["model"], case["precision"])
        try:
            if key not in refs:
                ref_case = dict(model=case["model"], sharding="no_shard", world=1,
                                precision=case["precision"], offload="none", accum="1",
                                checkpointing="none")
                refs[key], _ = run(ref_case, args, work, f"ref-{case['model']}-{case['precision']}")
                ref = refs[key]
                if not ref[-1] < ref[0]:
                    raise RuntimeError(f"reference loss does not fall: {ref}")
            losses, secs = run(case, args, work, f"case{i}")
            ref = refs[key]
            rel = max(abs(a - b) / abs(b) for a, b in zip(losses, ref))
            worst[case["precision"]] = max(worst[case["precision"]], rel)
            tol = FP32_RTOL if case["precision"] == "fp32" else BF16_RTOL
            ok = rel <= tol
            print(f"{'PASS' if ok else 'FAIL'} case {i}: {describe(case)}: max rel diff {rel:.2e} "
                  f"(tol {tol:.0e}), loss {losses[0]:.4f} -> {losses[-1]:.4f}, {secs:.1f}s", flush=True)
            if not ok:
                print(f"  losses: {losses}\n  ref:    {ref}")
            passed += ok
            failed += not ok
        except Exception as e:  # one case's failure must not hide the others
            print(f"FAIL case {i}: {describe(case)}: {e}", flush=True)
            failed += 1
    print(f"max rel diff: fp32 {worst['fp32']:.2e}, bf16_mixed {worst['bf16_mixed']:.2e}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
