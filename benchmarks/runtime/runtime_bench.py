"""What the runtime benchmarks share (docs/benchmarks.md): the benchmark model, compiling
it with planc, running plan-run and reading its metrics, reading a schedule file's
recipe, and statistics over step times."""
import json
import os
import resource
import statistics
import struct
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# Big enough that a step is mostly matmuls and attention rather than per-op dispatch
# (about 5.0 M parameters, 4 x 256 tokens per rank), small enough that a step takes
# well under a second on one core.
MODEL_SETS = [
    "model.hidden=256", "model.intermediate=688", "model.layers=4", "model.heads=8",
    "model.kv_heads=4", "model.vocab=4096", "train.seq_len=256", "train.micro_batch=4",
    "train.steps=0", "train.lr_schedule=constant", "train.precision=fp32",
    "cluster.nodes=1",
]
PLAN = os.path.join(ROOT, "examples", "tiny_llama_cpu.plan")


def compile_schedule(planc, world, sharding, out, env):
    """planc PLAN -o out for `world` ranks of one node with `sharding`."""
    cmd = [planc, PLAN, "-o", out]
    for s in MODEL_SETS + [f"cluster.gpus_per_node={world}", f"parallel.sharding={sharding}"]:
        cmd += ["--set", s]
    subprocess.run(cmd, check=True, env=env)
    return out


def read_schedule(path):
    """The JSON body of a schedule file (docs/schedule-format.md: a 32-byte header
    whose bytes 16..24 are the body size, then the body)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"PLANSCHD":
        raise SystemExit(f"{path}: not a schedule file")
    (size,) = struct.unpack("<Q", data[16:24])
    return json.loads(data[32:32 + size])


def run_plan_run(plan_run, sched, world, steps, metrics, env):
    """plan-run's per-step metrics (dicts with loss and step_time_s) of rank 0."""
    if os.path.exists(metrics):
        os.remove(metrics)
    cmd = [plan_run]
    if world > 1:
        cmd += ["--nproc", str(world)]
    cmd += [sched, "--steps", str(steps), "--data", "synthetic", "--metrics", metrics,
            "--quiet"]
    run_counting_cpu(cmd, env)
    with open(metrics) as f:
        return [json.loads(line) for line in f if line.strip()]


cpu_seconds = 0.0  # CPU time (user + sys) of every command run_counting_cpu ran


def run_counting_cpu(cmd, env, **kwargs):
    """subprocess.run, adding the CPU time of the command and all the processes it
    waited for (the ranks) to cpu_seconds."""
    global cpu_seconds
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = subprocess.run(cmd, check=True, env=env, **kwargs)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_seconds += (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return result


def cpu_per_step(run, steps, warmup):
    """CPU seconds per step, all processes of a run together, from two runs of
    `steps` and `warmup` steps: their difference leaves out start-up and the warmup,
    and unlike wall time it does not grow when other work on the machine preempts
    the run (contention for caches and memory bandwidth still shows)."""
    global cpu_seconds
    cpu_seconds = 0.0
    run(steps)
    long_run = cpu_seconds
    cpu_seconds = 0.0
    run(warmup)
    return (long_run - cpu_seconds) / (steps - warmup)


def thread_env(threads):
    """The environment that fixes intra-op threads to `threads` for LibTorch, in C++
    and Python alike (OpenMP reads OMP_NUM_THREADS; MKL its own)."""
    return dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))


def summary(times):
    """median, min and max of step times."""
    return statistics.median(times), min(times), max(times)


def max_relative_difference(a, b):
    return max(abs(x - y) / max(abs(y), 1e-12) for x, y in zip(a, b))
