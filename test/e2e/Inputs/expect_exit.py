"""Runs a command with a time limit and checks its exit code.

usage: expect_exit.py CODE [--within SECONDS] [--stderr-lines N] -- COMMAND...

Copies the command's stdout, then its stderr, to stdout (for FileCheck), and
fails when the code differs, when stderr has other than N lines, or when the
command is still running after SECONDS (it is then killed, with its process
group).
"""
import argparse
import os
import signal
import subprocess
import sys

parser = argparse.ArgumentParser()
parser.add_argument("code", type=int)
parser.add_argument("--within", type=float, default=120)
parser.add_argument("--stderr-lines", type=int)
split = sys.argv.index("--")
args = parser.parse_args(sys.argv[1:split])
command = sys.argv[split + 1:]

proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                        start_new_session=True)
try:
    out, err = proc.communicate(timeout=args.within)
except subprocess.TimeoutExpired:
    os.killpg(proc.pid, signal.SIGKILL)
    out, err = proc.communicate()
    sys.stdout.write(out.decode() + err.decode())
    sys.exit(f"error: still running after {args.within} s: {command}")

sys.stdout.write(out.decode())
sys.stdout.write(err.decode())
print(f"exit code {proc.returncode}")
if proc.returncode != args.code:
    sys.exit(f"error: exit code {proc.returncode}, expected {args.code}")
lines = err.decode().splitlines()
if args.stderr_lines is not None and len(lines) != args.stderr_lines:
    sys.exit(f"error: {len(lines)} stderr lines, expected {args.stderr_lines}")
