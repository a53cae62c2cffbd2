"""Checks what `plan-run --calibrate` printed against planc: the cluster block
(from its `cluster {` line to the first `}` line) appended to a plan without
one must compile, and the report's peak must be the calibrated
per-core fp32 rate times the cores of a rank (host_cores / gpus_per_node).
Prints one line, or `error: ...` and exits 1.

usage: check_calibration.py PLAN_WITHOUT_CLUSTER CALIBRATE_OUTPUT PLANC OUT.plan"""
import json
import re
import subprocess
import sys

head_path, output_path, planc, plan_path = sys.argv[1:5]
lines = open(output_path).read().splitlines(keepends=True)
start = lines.index("cluster {\n")
block = "".join(lines[start:lines.index("}\n", start) + 1])
with open(plan_path, "w") as f:
    f.write(open(head_path).read() + block)
result = subprocess.run([planc, plan_path, "--report=json"], capture_output=True, text=True)
if result.returncode != 0:
    print(f"error: planc exited {result.returncode}: {result.stderr.strip()}")
    sys.exit(1)
peak = json.loads(result.stdout)["time"]["peak_flops"]
per_core = float(re.search(r"fp32_tflops = (\S+)", block).group(1)) * 1e12
cores = int(re.search(r"host_cores = (\d+)", block).group(1))
ranks = int(re.search(r"gpus_per_node = (\d+)", block).group(1))
expected = per_core * cores / ranks
if abs(peak - expected) > 1e-9 * expected:
    print(f"error: planc's peak is {peak} FLOP/s, the calibration says {expected}")
    sys.exit(1)
print("planc reads the block; its peak is the calibrated rate")
