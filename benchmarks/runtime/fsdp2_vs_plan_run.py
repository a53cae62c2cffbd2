#!/usr/bin/env python3
"""Step time of plan-run vs PyTorch FSDP2 (fully_shard, gloo, CPU) on the same model.

For each world size W, planc compiles the benchmark model (runtime_bench.py) with
full_shard for W ranks of one node; plan-run runs that schedule, and FSDP2 trains the
model the schedule describes (test/reference/llama_reference.py: HF Llama math and
names; its recipe read from the schedule file): fully_shard on every decoder layer, then
on the root, fp32, torch.optim.AdamW with the schedule's hyper-parameters, the same
initial weights (the runtime's recipe, llama_reference.init_parameter) and the same
synthetic batches, each rank its own slice of the global batch. So the losses agree up
to rounding, which the script checks.

Both sides time a step on rank 0 the same way: from the step's start to having the
global mean loss on the host (plan-run all-reduces it for its metrics; the FSDP2 loop
does the same). Building the batch is outside FSDP2's timed region (it is Python, and
plan-run's C++ data takes microseconds). Intra-op threads are fixed to THREADS for both
(OMP_NUM_THREADS; default max(1, cores // W), so neither side oversubscribes the cores
more than the other). The two sides run alternately REPEATS times; a side's step time
is the median over all its steps after the warmup of every run.

Prints one line per world size: `world W: plan-run X s/step, FSDP2 Y s/step, ratio X/Y`.
The issue's target is ratio <= 0.8.

usage: fsdp2_vs_plan_run.py --planc PLANC --plan-run PLAN_RUN [--worlds 2 4]
           [--steps 12] [--warmup 2] [--repeats 2] [--threads N]
"""
import argparse
import json
import os
import subprocess
import sys
import shutil
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import runtime_bench as rb  # noqa: E402

sys.path.insert(0, os.path.join(rb.ROOT, "test", "reference"))

WORK_DIRS = []  # removed at exit
LOSS_TOLERANCE = 1e-3  # relative, per step


def reference_config(schedule):
    m = schedule["model"]
    if m["family"] != "llama" or m.get("rope_scaling"):
        raise SystemExit("fsdp2_vs_plan_run.py: the benchmark model must be a Llama "
                         "without rope scaling")
    return dict(family="llama", vocab=m["vocab"], hidden=m["hidden"],
                intermediate=m["intermediate"], layers=m["layers"], heads=m["heads"],
                kv_heads=m["kv_heads"], max_seq_len=m["max_seq_len"],
                rope_theta=m["rope_theta"], norm_eps=m["norm_eps"],
                tie=m["tie_embeddings"])


def fsdp2_worker(rank, world, port, sched, steps, threads, out_path):
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    import llama_reference as ref

    torch.set_num_threads(threads)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    mesh = init_device_mesh("cpu", (world,))

    schedule = rb.read_schedule(sched)
    train = schedule["train"]
    opt_cfg = train["optimizer"]
    if (train["precision"] != "fp32" or train["grad_accum"] != 1 or opt_cfg["kind"] != "adamw"
            or train["lr_schedule"]["kind"] != "constant" or train["grad_clip"] > 0):
        raise SystemExit("fsdp2_vs_plan_run.py: the benchmark recipe must be fp32 AdamW "
                         "with a constant learning rate, no accumulation, no clipping")
    cfg = reference_config(schedule)
    seed, mb, seq_len = train["seed"], train["micro_batch"], train["seq_len"]

    model = ref.build_model(cfg)
    with torch.no_grad():
        for name, param in ref.stored_parameters(model):
            param.copy_(ref.init_parameter(seed, name, tuple(param.shape)))
    for layer in model.model.layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.AdamW(model.parameters(), lr=opt_cfg["lr"],
                            betas=(opt_cfg["beta1"], opt_cfg["beta2"]), eps=opt_cfg["eps"],
                            weight_decay=opt_cfg["weight_decay"])

    def source(j, s):
        return ref.synthetic_sequence(seed, j, cfg["vocab"], s)

    rows = []
    dist.barrier()
    for step in range(1, steps + 1):
        # This rank's rows of the global batch (runtime/data/Data.h, one micro-batch).
        first = (step - 1) * world * mb + rank * mb
        batch = torch.tensor([source(j, seq_len) for j in range(first, first + mb)],
                             dtype=torch.int64)
        tokens, targets = batch[:, :-1].contiguous(), batch[:, 1:].contiguous()
        t0 = time.perf_counter()
        logits = model(tokens)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        opt.step()
        opt.zero_grad(set_to_none=True)
        total = loss.detach().to(torch.float64)
        dist.all_reduce(total)
        mean = total.item() / world
        t3 = time.perf_counter()
        # loss, step time, then its phases as plan-bench-phases splits plan-run's.
        rows.append((mean, t3 - t0, t1 - t0, t2 - t1, t3 - t2))
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump(rows, f)
    dist.destroy_process_group()


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_fsdp2(sched, world, steps, threads, work, env):
    """FSDP2's per-step (loss, seconds, forward, backward, optimizer + sync) of rank 0."""
    out = os.path.join(work, f"fsdp2-{world}.json")
    code = (f"import sys; sys.path.insert(0, {HERE!r}); import fsdp2_vs_plan_run as b; "
            f"import torch.multiprocessing as mp; "
            f"mp.spawn(b.fsdp2_worker, args=({world}, {free_port()}, {sched!r}, {steps}, "
            f"{threads}, {out!r}), nprocs={world})")
    rb.run_counting_cpu([sys.executable, "-W", "ignore", "-c", code], env,
                        stdout=subprocess.DEVNULL)
    with open(out) as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--planc", required=True)
    ap.add_argument("--plan-run", required=True)
    ap.add_argument("--worlds", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, help="intra-op threads per rank, both sides")
    ap.add_argument("--cpu-time", action="store_true",
                    help="also measure CPU time per step (two more runs per side)")
    args = ap.parse_args()
    if args.warmup >= args.steps:
        ap.error("--warmup must be smaller than --steps")
    work = tempfile.mkdtemp(prefix="plan-bench-fsdp2-")
    WORK_DIRS.append(work)
    cores = os.cpu_count() or 1
    status = 0
    for world in args.worlds:
        threads = args.threads or max(1, cores // world)
        env = rb.thread_env(threads)
        sched = rb.compile_schedule(args.planc, world, "full_shard",
                                    os.path.join(work, f"w{world}.sched"), env)
        ours, theirs, phases = [], [], []
        for _ in range(args.repeats):
            metrics = rb.run_plan_run(args.plan_run, sched, world, args.steps,
                                      os.path.join(work, f"w{world}.jsonl"), env)
            ours += [m["step_time_s"] for m in metrics[args.warmup:]]
            our_losses = [m["loss"] for m in metrics]
            rows = run_fsdp2(sched, world, args.steps, threads, work, env)
            theirs += [r[1] for r in rows[args.warmup:]]
            phases += [r[2:] for r in rows[args.warmup:]]
            their_losses = [r[0] for r in rows]
        a, a_min, a_max = rb.summary(ours)
        b, b_min, b_max = rb.summary(theirs)
        print(f"world {world}: plan-run {a:.4f} s/step, FSDP2 {b:.4f} s/step, "
              f"ratio {a / b:.3f}  (target <= 0.8)")
        print(f"  plan-run min {a_min:.4f} max {a_max:.4f} s, FSDP2 min {b_min:.4f} "
              f"max {b_max:.4f} s, over {len(ours)} steps each ({args.repeats} runs of "
              f"{args.steps} steps, {args.warmup} warmup, OMP_NUM_THREADS={threads}); "
              f"ratio of the fastest steps {a_min / b_min:.3f}")
        f, b, t = (rb.summary([p[i] for p in phases])[0] for i in range(3))
        print(f"  FSDP2 phases (medians): forward {f:.4f} s, backward {b:.4f} s, "
              f"optimizer + loss all-reduce {t:.4f} s")
        if args.cpu_time:
            work_ours = rb.cpu_per_step(
                lambda k: rb.run_plan_run(args.plan_run, sched, world, k,
                                          os.path.join(work, f"w{world}.jsonl"), env),
                args.steps, args.warmup)
            work_theirs = rb.cpu_per_step(
                lambda k: run_fsdp2(sched, world, k, threads, work, env), args.steps,
                args.warmup)
            print(f"  CPU time per step, all ranks: plan-run {work_ours:.4f} s, FSDP2 "
                  f"{work_theirs:.4f} s, ratio {work_ours / work_theirs:.3f}")
        diff = rb.max_relative_difference(our_losses, their_losses)
        agree = diff <= LOSS_TOLERANCE
        print(f"  losses {'agree' if agree else 'DISAGREE'}: max relative difference "
              f"{diff:.2e} (last {our_losses[-1]:.6f} vs {their_losses[-1]:.6f})", flush=True)
        if not agree:
            status = 1
    return status



def main_cleaning_up():
    try:
        return main()
    finally:
        for work in WORK_DIRS:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main_cleaning_up())
