"""Checks a --metrics JSONL file: exactly STEPS lines, steps 1..STEPS in
order, every documented field present, finite losses, positive tokens; with
--fp16, loss_scale and skipped too (and without it, neither); with --norm,
grad_norm (the schedule clips), and without it, no grad_norm.

usage: check_metrics.py FILE.jsonl STEPS [--fp16] [--norm]"""
import json
import math
import sys

path, steps = sys.argv[1], int(sys.argv[2])
fp16 = "--fp16" in sys.argv[3:]
with open(path) as f:
    records = [json.loads(line) for line in f]
if len(records) != steps:
    sys.exit(f"error: {len(records)} lines, expected {steps}")
fields = ["step", "loss", "lr", "tokens", "step_time_s", "tokens_per_s",
          "peak_bytes"]
# grad_norm is there exactly when the schedule computes a norm (grad_clip).
norm = "--norm" in sys.argv[3:]
for i, r in enumerate(records, 1):
    missing = [f for f in fields if f not in r]
    if missing:
        sys.exit(f"error: line {i} lacks {missing}")
    if fp16 != ("loss_scale" in r) or fp16 != ("skipped" in r):
        sys.exit(f"error: line {i}: loss_scale/skipped {'missing' if fp16 else 'present'}")
    if fp16 and not (r["loss_scale"] > 0 and isinstance(r["skipped"], bool)):
        sys.exit(f"error: line {i}: {r}")
    if norm != ("grad_norm" in r):
        sys.exit(f"error: line {i}: grad_norm {'missing' if norm else 'present'}")
    if norm and not (math.isfinite(r["grad_norm"]) and r["grad_norm"] >= 0):
        sys.exit(f"error: line {i}: grad_norm {r['grad_norm']}")
    if r["step"] != i:
        sys.exit(f"error: line {i} has step {r['step']}")
    if not isinstance(r["loss"], float) or not math.isfinite(r["loss"]) or r["loss"] <= 0:
        sys.exit(f"error: line {i} has loss {r['loss']}")
    if r["tokens"] <= 0 or r["peak_bytes"] <= 0 or r["lr"] < 0:
        sys.exit(f"error: line {i}: {r}")
print(f"{steps} steps, losses " + " ".join(f"{r['loss']:.4f}" for r in records))
