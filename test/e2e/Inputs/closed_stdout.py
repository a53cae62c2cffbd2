"""Runs a command whose stdout is a pipe nobody reads (closed before the
command starts writing) and prints "exit C" (negative: killed by signal -C).

usage: closed_stdout.py [--within SECONDS] -- COMMAND...
"""
import argparse
import os
import signal
import subprocess
import sys

parser = argparse.ArgumentParser()
parser.add_argument("--within", type=float, default=120)
split = sys.argv.index("--")
args = parser.parse_args(sys.argv[1:split])
command = sys.argv[split + 1:]

read_end, write_end = os.pipe()
os.close(read_end)
# restore_signals (the default) gives the command SIGPIPE's default action,
# as a shell would: only the command's own handling decides.
proc = subprocess.Popen(command, stdout=write_end, stderr=subprocess.DEVNULL,
                        start_new_session=True)
os.close(write_end)
try:
    code = proc.wait(timeout=args.within)
except subprocess.TimeoutExpired:
    os.killpg(proc.pid, signal.SIGKILL)
    code = "timeout"
print(f"exit {code}")
