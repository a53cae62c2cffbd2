"""Starts a command, waits for its first line on stdout, sends it SIGNAL and
checks that it exits within SECONDS. Prints "exit code C" and everything the
command wrote, for FileCheck.

usage: interrupt.py SIGNAL [--within SECONDS] -- COMMAND...
"""
import argparse
import os
import signal
import subprocess
import sys
import threading

parser = argparse.ArgumentParser()
parser.add_argument("signal")
parser.add_argument("--within", type=float, default=60)
split = sys.argv.index("--")
args = parser.parse_args(sys.argv[1:split])
command = sys.argv[split + 1:]
sig = getattr(signal, args.signal)

proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                        start_new_session=True)
first = proc.stdout.readline()
proc.send_signal(sig)
err = []
reader = threading.Thread(target=lambda: err.append(proc.stderr.read()))
reader.start()
try:
    rest = proc.stdout.read()
    proc.wait(timeout=args.within)
except subprocess.TimeoutExpired:
    os.killpg(proc.pid, signal.SIGKILL)
    sys.exit(f"error: still running {args.within} s after {args.signal}")
reader.join()
sys.stdout.write((first + rest).decode())
sys.stdout.write(err[0].decode())
print(f"exit code {proc.returncode}")
