"""Starts the ranks of one run the way a cluster launcher does: one process
per rank with the launcher's variables (torchrun: RANK, WORLD_SIZE,
LOCAL_RANK; slurm: SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID; ompi:
OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK) and MASTER_ADDR / MASTER_PORT (a
port that was free a moment ago).

usage: env_ranks.py WORLD [--launcher torchrun|slurm|ompi] [--within SECONDS]
                    [--fault SPEC] -- COMMAND...

Waits for every rank, killing all of them and failing when any is still
running after SECONDS. Prints "rank R: exit C" for each rank, then each
rank's output, for FileCheck. Exits 0 either way (the checks are FileCheck's).
"""
import argparse
import os
import signal
import socket
import subprocess
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("world", type=int)
parser.add_argument("--within", type=float, default=120)
parser.add_argument("--fault")
parser.add_argument("--launcher", default="torchrun",
                    choices=["torchrun", "slurm", "ompi"])
split = sys.argv.index("--")
args = parser.parse_args(sys.argv[1:split])
command = sys.argv[split + 1:]

with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]

procs = []
for rank in range(args.world):
    names = {"torchrun": ("RANK", "WORLD_SIZE", "LOCAL_RANK"),
             "slurm": ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"),
             "ompi": ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                      "OMPI_COMM_WORLD_LOCAL_RANK")}[args.launcher]
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    env.update(zip(names, (str(rank), str(args.world), str(rank))))
    if args.fault:
        env["PLAN_RUN_FAULT"] = args.fault
    procs.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT,
                                  start_new_session=True))

deadline = time.monotonic() + args.within
outputs = []
late = False
for proc in procs:
    try:
        out, _ = proc.communicate(timeout=max(deadline - time.monotonic(), 0.1))
    except subprocess.TimeoutExpired:
        late = True
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
        out, _ = proc.communicate()
    outputs.append(out.decode())

for rank, proc in enumerate(procs):
    print(f"rank {rank}: exit {proc.returncode}")
for rank, out in enumerate(outputs):
    print(f"--- rank {rank} output")
    sys.stdout.write(out)
if late:
    sys.exit(f"error: a rank was still running after {args.within} s")
