"""Compares two --metrics JSONL files step by step: the same steps, and for
each the same loss, lr and grad_norm: bitwise (the default), or within a
relative TOLERANCE. Prints "N steps bitwise equal" or "N steps within T";
exits 1 naming the first difference.

usage: compare_metrics.py A.jsonl B.jsonl [--tolerance T] [--from STEP]
(--from: compare only steps >= STEP)
"""
import argparse
import json
import sys

parser = argparse.ArgumentParser()
parser.add_argument("a")
parser.add_argument("b")
parser.add_argument("--tolerance", type=float, default=0.0)
parser.add_argument("--from", dest="first", type=int, default=1)
args = parser.parse_args()


def read(path):
    with open(path) as f:
        records = [json.loads(line) for line in f]
    return {r["step"]: r for r in records if r["step"] >= args.first}, \
        [r["step"] for r in records]


a, a_steps = read(args.a)
b, b_steps = read(args.b)
if sorted(a) != sorted(b):
    sys.exit(f"error: steps differ: {a_steps} vs {b_steps}")
for path, steps in ((args.a, a_steps), (args.b, b_steps)):
    if steps != sorted(steps) or len(set(steps)) != len(steps):
        sys.exit(f"error: {path}: steps not in order or repeated: {steps}")
for step in sorted(a):
    for field in ("loss", "lr", "grad_norm"):
        # grad_norm is there only when the schedule computes a norm.
        if field not in a[step] and field not in b[step]:
            continue
        if (field in a[step]) != (field in b[step]):
            sys.exit(f"error: step {step}: {field} in one run only")
        x, y = a[step][field], b[step][field]
        if args.tolerance == 0:
            ok = x == y
        else:
            ok = abs(x - y) <= args.tolerance * max(abs(x), abs(y), 1e-30)
        if not ok:
            sys.exit(f"error: step {step}: {field} {x!r} vs {y!r}")
if args.tolerance == 0:
    print(f"{len(a)} steps bitwise equal")
else:
    print(f"{len(a)} steps within {args.tolerance}")
