"""Checks a plan-run --memory-trace file against the schedule and the --metrics
file of the same run (docs/launching.md, "Memory trace"): every step has one
line per op of the schedule, in order, with the op's kind (and unit and
micro-batch for compute ops); each op's peak is at least the bytes alive before
and after it; and the largest peak of a step is the step's peak_bytes (the cpu
backend); each op's wall time is >= 0 and a step's ops take no longer than the
step (its step_time_s). Prints one summary line, or `error: ...` and exits 1.

usage: check_memory_trace.py TRACE.jsonl METRICS.jsonl SCHEDULE.sched"""
import json
import struct
import sys


def fail(message):
    print(f"error: {message}")
    sys.exit(1)


trace_path, metrics_path, sched_path = sys.argv[1:4]
data = open(sched_path, "rb").read()
(size,) = struct.unpack("<Q", data[16:24])
schedule = json.loads(data[32:32 + size])
ops, units = schedule["ops"], [u["name"] for u in schedule["units"]]
trace = [json.loads(line) for line in open(trace_path) if line.strip()]
metrics = {m["step"]: m for m in (json.loads(l) for l in open(metrics_path) if l.strip())}
if not metrics:
    fail("no metrics")
largest = None
for step, m in sorted(metrics.items()):
    lines = [t for t in trace if t["step"] == step]
    if [t["op"] for t in lines] != list(range(len(ops))):
        fail(f"step {step}: {len(lines)} lines, not one per op of the {len(ops)}")
    for t, op in zip(lines, ops):
        if t["kind"] != op["op"]:
            fail(f"step {step} op {t['op']}: kind {t['kind']}, the schedule says {op['op']}")
        if "unit" in op and op["unit"] >= 0:
            if t.get("unit") != units[op["unit"]] or t.get("mb") != op.get("micro_batch", 0):
                fail(f"step {step} op {t['op']}: unit {t.get('unit')} mb {t.get('mb')}")
        if t["peak"] < max(t["live_before"], t["live_after"]):
            fail(f"step {step} op {t['op']}: peak {t['peak']} below the bytes alive")
        if not t.get("seconds", -1) >= 0:
            fail(f"step {step} op {t['op']}: seconds {t.get('seconds')}")
    if sum(t["seconds"] for t in lines) > m["step_time_s"]:
        fail(f"step {step}: the ops take {sum(t['seconds'] for t in lines)} s, "
             f"more than the step's {m['step_time_s']} s")
    top = max(lines, key=lambda t: t["peak"])
    if top["peak"] != m["peak_bytes"]:
        fail(f"step {step}: largest op peak {top['peak']}, metrics peak_bytes {m['peak_bytes']}")
    largest = top
print(f"{len(metrics)} steps, {len(ops)} ops each; the largest op peak is the step's "
      f"peak_bytes; last step's largest: {largest['kind']} {largest.get('unit', '')}")
