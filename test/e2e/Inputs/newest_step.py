"""Runs COMMAND with `--steps S+PLUS` appended, where S is the step of the
newest complete checkpoint (ROOT/step-NNNNNNNN holding checkpoint.json): a
resume that runs PLUS more steps after a stop at a step the test cannot
know in advance. Prints "newest checkpoint: step S" first, then the
command's stdout and stderr, and exits with its exit code.

usage: newest_step.py ROOT PLUS -- COMMAND...
"""
import os
import re
import subprocess
import sys

split = sys.argv.index("--")
root, plus = sys.argv[1], int(sys.argv[2])
command = sys.argv[split + 1:]
steps = [int(m.group(1)) for name in os.listdir(root)
         if (m := re.fullmatch(r"step-(\d{8})", name))
         and os.path.isfile(os.path.join(root, name, "checkpoint.json"))]
if not steps:
    sys.exit(f"error: no complete checkpoint under {root}")
step = max(steps)
print(f"newest checkpoint: step {step}", flush=True)
proc = subprocess.run(command + ["--steps", str(step + plus)],
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                      timeout=300)
sys.stdout.write(proc.stdout.decode())
sys.stdout.write(proc.stderr.decode())
print(f"exit code {proc.returncode}")
sys.exit(proc.returncode)
