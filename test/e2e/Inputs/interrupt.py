"""Starts a command, waits for its first step line on stdout (the first that
starts with "step "; plan-run prints notes before it), sends it SIGNAL and
checks that it exits within SECONDS. Prints "exit code C" and everything the
command wrote, for FileCheck. --delay D waits D seconds after that line
before the signal; --again S sends SIGNAL a second time S seconds after the
first (if the command still runs).

usage: interrupt.py SIGNAL [--within SECONDS] [--delay D] [--again S] -- COMMAND...
"""
import argparse
import os
import signal
import subprocess
import sys
import threading
import time

parser = argparse.ArgumentParser()
parser.add_argument("signal")
parser.add_argument("--within", type=float, default=60)
parser.add_argument("--delay", type=float, default=0)
parser.add_argument("--again", type=float)
split = sys.argv.index("--")
args = parser.parse_args(sys.argv[1:split])
command = sys.argv[split + 1:]
sig = getattr(signal, args.signal)

proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                        start_new_session=True)
first = b""
while True:
    line = proc.stdout.readline()
    first += line
    if not line or line.startswith(b"step "):
        break
time.sleep(args.delay)
proc.send_signal(sig)
if args.again is not None:
    def send_again():
        if proc.poll() is None:
            proc.send_signal(sig)
    again = threading.Timer(args.again, send_again)
    again.daemon = True
    again.start()
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
