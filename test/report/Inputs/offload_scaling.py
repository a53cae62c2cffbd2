"""Predicted tokens/s of Llama-3-8B with the optimizer stepping on the host,
for 1, 2, 4 and 8 GPUs of one node: ranks share the node's host memory
bandwidth and cores, so adding GPUs may not speed a rank's host work up.
Prints one line per case, then `scaling ok` when no step from N to 2N GPUs
more than doubles the throughput by more than 10% (what shrinking shards
alone give), and when one H100 beats two RTX 4090s.

usage: offload_scaling.py PLANC PLAN"""
import json
import subprocess
import sys

planc, plan = sys.argv[1], sys.argv[2]


def tokens(gpu, n):
    out = subprocess.run(
        [planc, plan, "--set", f"cluster.gpu={gpu}", "--set", f"cluster.gpus_per_node={n}",
         "--set", "parallel.offload.params=device", "--set", "parallel.offload.grads=device",
         "--set", "cluster.host_memory=1TiB", "--report=json"],
        check=False, capture_output=True, text=True).stdout
    return json.loads(out)["time"]["tokens_per_s"]


ok = True
previous = None
for n in (1, 2, 4, 8):
    t = tokens("a100_80g", n)
    print(f"a100_80g x{n}: {t:.0f} tokens/s")
    if previous is not None and t > 2.2 * previous:
        print(f"  more than 2.2 x the {previous:.0f} tokens/s of half the GPUs")
        ok = False
    previous = t
h100, rtx = tokens("h100_sxm", 1), tokens("rtx4090", 2)
print(f"h100_sxm x1: {h100:.0f} tokens/s, rtx4090 x2: {rtx:.0f} tokens/s")
ok &= h100 > rtx
print("scaling ok" if ok else "scaling wrong")
sys.exit(0 if ok else 1)
