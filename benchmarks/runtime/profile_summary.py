#!/usr/bin/env python3
"""Where a profiled step's GPU time goes: a summary of `plan-run --profile` traces.

plan-run --profile FILE.json writes LibTorch's Kineto trace (Chrome trace format) of the
run's last step. For a CUDA run this prints, over the step's GPU span (first kernel or
copy start to last end):

  busy / idle   the union of all kernels' intervals over the span, and the rest: time in
                which no kernel runs (host syncs, launch gaps, waits on copies)
  categories    kernel time by kind: matmul (cuBLAS/CUTLASS), attention (flash/efficient
                SDPA), NCCL, optimizer (fused AdamW, multi-tensor), other elementwise and
                reductions; and the copies by direction with their bytes and bandwidth
  top kernels   the kernels with the most total time
  host by op    for plan-run's traces: host (wall) time in each kind of op's range, over
                the step; the nested ranges count inside their op's too. For a step whose
                time the host spends (an optimizer step on the host, a host sync), this
                names the op, where the GPU summary cannot
  by op         for plan-run's traces: GPU time by the schedule op that launched it. The
                executor opens one profiler range per op ("plan::<kind> <unit kind>
                <unit>"), and the model nested ones for the copies into the saves buffers
                ("plan::saves_copy") and the adds into the flat gradients
                ("plan::grad_accumulate"); a kernel or copy counts for the innermost range
                open on the thread that launched it (Kineto's correlation ids), or, when
                that thread has none (autograd runs a CUDA backward on its own device
                thread), for the innermost one open on another thread at the launch

usage: profile_summary.py TRACE.json [--top N] [--json OUT]
"""
import argparse
import bisect
import json
import re
import sys

# First match wins: cuDNN's attention kernels also carry "sm90_" in their names.
CATEGORIES = [
    ("attention", re.compile(r"flash|fmha|sdpa|attention", re.I)),
    ("matmul", re.compile(r"gemm|nvjet|cutlass|xmma|sm90_|sm80_|cublas", re.I)),
    ("nccl", re.compile(r"nccl", re.I)),
    ("optimizer", re.compile(r"adam|multi_tensor|foreach", re.I)),
]


def category(name):
    for label, pattern in CATEGORIES:
        if pattern.search(name):
            return label
    return "other"


def union_length(intervals):
    total, end = 0.0, None
    start = None
    for b, e in sorted(intervals):
        if end is None or b > end:
            if end is not None:
                total += end - start
            start, end = b, e
        else:
            end = max(end, e)
    if end is not None:
        total += end - start
    return total


def plan_ranges(events):
    """The trace's plan:: ranges: the executor's per-op ranges and the model's nested ones."""
    return [e for e in events if e.get("ph") == "X" and e.get("cat") == "user_annotation"
            and e.get("name", "").startswith("plan::")]


def host_by_op(events):
    """{range kind: [host us, count]} over the plan:: ranges of the trace."""
    out = {}
    for e in plan_ranges(events):
        row = out.setdefault(range_kind(e["name"]), [0.0, 0])
        row[0] += e["dur"]
        row[1] += 1
    return out


def print_host_by_op(host):
    print(f"{'host time by schedule op':40}{'ms':>10}{'ranges':>10}")
    for where, (us, count) in sorted(host.items(), key=lambda kv: -kv[1][0]):
        print(f"  {where[:38]:38}{us / 1e3:10.2f}{count:10}")


def summarize(trace):
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    kernels = [e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"]
    copies = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("gpu_memcpy",
                                                                           "gpu_memset")]
    gpu = kernels + copies
    if not gpu:
        return None
    begin = min(e["ts"] for e in gpu)
    end = max(e["ts"] + e["dur"] for e in gpu)
    span = end - begin
    busy = union_length([(e["ts"], e["ts"] + e["dur"]) for e in kernels])
    by_cat, by_name = {}, {}
    for e in kernels:
        c = category(e["name"])
        by_cat[c] = by_cat.get(c, 0.0) + e["dur"]
        n = by_name.setdefault(e["name"], [0.0, 0, c])
        n[0] += e["dur"]
        n[1] += 1
    copy_stats = {}
    for e in copies:
        kind = e.get("args", {}).get("kind") or e["name"]
        s = copy_stats.setdefault(kind, [0.0, 0, 0])
        s[0] += e["dur"]
        s[1] += int(e.get("args", {}).get("bytes", 0))
        s[2] += 1
    return dict(span_us=span, busy_us=busy, kernels=len(kernels), by_category=by_cat,
                by_name=by_name, copies=copy_stats, by_op=by_op(events, gpu),
                host_by_op=host_by_op(events))


def range_kind(name):
    """'plan::forward block layers.3' -> 'plan::forward block': one row per op and unit kind."""
    return " ".join(name.split(" ")[:2])


def by_op(events, gpu):
    """GPU time of each kernel and copy, by the innermost plan:: range open where it was
    launched: {range kind: [kernel or copy us, count]}; empty without plan:: ranges."""
    ranges = {}
    for e in plan_ranges(events):
        ranges.setdefault(e.get("tid"), []).append((e["ts"], e["ts"] + e["dur"], e["name"]))
    if not ranges:
        return {}
    starts = {}
    for tid, rs in ranges.items():
        rs.sort()
        starts[tid] = [r[0] for r in rs]
    launches = {}
    for e in events:
        corr = e.get("args", {}).get("correlation")
        if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver") and corr:
            launches[corr] = e
    def innermost(tid, ts):
        """The innermost range of thread `tid` holding `ts`: the latest-starting one."""
        rs, ss = ranges[tid], starts[tid]
        for i in range(bisect.bisect_right(ss, ts) - 1, -1, -1):
            if rs[i][1] >= ts:
                return rs[i]
        return None

    out = {}
    for g in gpu:
        where = "(outside any op)"
        launch = launches.get(g.get("args", {}).get("correlation"))
        if launch is None:
            where = "(launch not found)"
        else:
            ts = launch["ts"]
            held = innermost(launch["tid"], ts) if launch.get("tid") in ranges else None
            if held is None:
                # Launched by another thread (a CUDA backward runs on autograd's device
                # thread) while the executor's thread was inside an op: that op's.
                inside = [r for r in (innermost(t, ts) for t in ranges) if r is not None]
                held = max(inside) if inside else None
            if held is not None:
                where = range_kind(held[2])
        row = out.setdefault(where, [0.0, 0])
        row[0] += g["dur"]
        row[1] += 1
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--json", help="write the summary to this file")
    args = ap.parse_args()
    with open(args.trace) as f:
        trace = json.load(f)
    s = summarize(trace)
    if s is None:
        print(f"{args.trace}: no GPU kernels or copies (a --backend cpu trace?)")
        host = host_by_op(trace["traceEvents"] if isinstance(trace, dict) else trace)
        if host:
            print_host_by_op(host)
        return 1
    span = s["span_us"]
    print(f"GPU span {span / 1e3:.1f} ms, {s['kernels']} kernels; a kernel runs "
          f"{100 * s['busy_us'] / span:.1f}% of it, none runs {(span - s['busy_us']) / 1e3:.1f} ms "
          f"({100 * (1 - s['busy_us'] / span):.1f}%)")
    print(f"{'kernel time by kind':28}{'ms':>10}{'% of span':>11}")
    for c, us in sorted(s["by_category"].items(), key=lambda kv: -kv[1]):
        print(f"  {c:26}{us / 1e3:10.2f}{100 * us / span:10.1f}%")
    for kind, (us, nbytes, count) in sorted(s["copies"].items(), key=lambda kv: -kv[1][0]):
        bw = (f", {nbytes / us / 1e3:.1f} GB/s"
              if us > 0 and nbytes and "memset" not in kind.lower() else "")
        print(f"  copy {kind:21}{us / 1e3:10.2f}{100 * us / span:10.1f}%  ({count} copies, "
              f"{nbytes / 2**20:.0f} MiB{bw})")
    if s["by_op"]:
        print(f"{'GPU time by schedule op':40}{'ms':>10}{'% of span':>11}{'launches':>10}")
        for where, (us, count) in sorted(s["by_op"].items(), key=lambda kv: -kv[1][0]):
            print(f"  {where[:38]:38}{us / 1e3:10.2f}{100 * us / span:10.1f}%{count:10}")
    if s["host_by_op"]:
        print_host_by_op(s["host_by_op"])
    print(f"top {args.top} kernels:")
    top = sorted(s["by_name"].items(), key=lambda kv: -kv[1][0])[:args.top]
    for name, (us, count, c) in top:
        print(f"  {us / 1e3:8.2f} ms {count:5}x  [{c}] {name[:110]}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(s, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
