"""Summarises a Chrome trace written by `planc --trace` for FileCheck.

Prints the process and thread names, then per thread the number of complete
("X") events, whether any two of them overlap (ops on one stream run one at a
time), the end of the last one, and the names of the first ones in order.
"""
import json
import sys

with open(sys.argv[1]) as f:
    trace = json.load(f)
first = int(sys.argv[2]) if len(sys.argv) > 2 else 5
events = trace["traceEvents"]
threads = {}
for e in events:
    if e["ph"] == "M" and e["name"] == "process_name":
        print("process:", e["args"]["name"])
    if e["ph"] == "M" and e["name"] == "thread_name":
        threads[e["tid"]] = e["args"]["name"]
print("display:", trace["displayTimeUnit"])
for tid in sorted(threads):
    slices = [e for e in events if e["ph"] == "X" and e["tid"] == tid]
    assert all(e["pid"] == 0 and e["dur"] >= 0 and e["ts"] >= 0 for e in slices)
    slices.sort(key=lambda e: e["ts"])
    overlaps = sum(
        1 for a, b in zip(slices, slices[1:]) if b["ts"] < a["ts"] + a["dur"] - 1e-6
    )
    end = max((e["ts"] + e["dur"] for e in slices), default=0)
    print(f"thread {tid} {threads[tid]}: {len(slices)} slices, "
          f"{overlaps} overlaps, ends at {end:.1f} us")
    for e in slices[:first]:
        print(f"  {tid} {e['name']} @ {e['ts']:.3f} for {e['dur']:.3f}")
