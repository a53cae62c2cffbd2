"""Checks a --metrics JSONL file: exactly STEPS lines, steps 1..STEPS in
order, every documented field present, finite losses, positive tokens; with
--fp16, loss_scale and skipped too (and without it, neither).

usage: check_metrics.py FILE.jsonl STEPS [--fp16]"""
import json
import math
import sys

path, steps = sys.argv[1], int(sys.argv[2])
fp16 = "--fp16" in sys.argv[3:]
with open(path) as f:
    records = [json.loads(line) for line in f]
if len(records) != steps:
    sys.exit(f"error: {len(records)} lines, expected {steps}")
fields = ["step", "loss", "lr", "grad_norm", "tokens", "step_time_s",
          "tokens_per_s", "peak_bytes"]
for i, r in enumerate(records, 1):
    missing = [f for f in fields if f not in r]
    if missing:
        sys.exit(f"error: line {i} lacks {missing}")
    if fp16 != ("loss_scale" in r) or fp16 != ("skipped" in r):
        sys.exit(f"error: line {i}: loss_scale/skipped {'missing' if fp16 else 'present'}")
    if fp16 and not (r["loss_scale"] > 0 and isinstance(r["skipped"], bool)):
        sys.exit(f"error: line {i}: {r}")
    if r["step"] != i:
        sys.exit(f"error: line {i} has step {r['step']}")
    if not isinstance(r["loss"], float) or not math.isfinite(r["loss"]) or r["loss"] <= 0:
        sys.exit(f"error: line {i} has loss {r['loss']}")
    if r["tokens"] <= 0 or r["peak_bytes"] <= 0 or r["lr"] < 0:
        sys.exit(f"error: line {i}: {r}")
print(f"{steps} steps, losses " + " ".join(f"{r['loss']:.4f}" for r in records))
