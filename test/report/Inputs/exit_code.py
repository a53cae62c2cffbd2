"""Runs a command and prints its stdout, its stderr, then `exit code: N`.

lit's shell has no `$?`: this lets a test check an exact exit code (planc's 2
for a plan that does not fit) and the messages together.
"""
import subprocess
import sys

result = subprocess.run(sys.argv[1:], capture_output=True, text=True)
sys.stdout.write(result.stdout)
sys.stdout.write(result.stderr)
print(f"exit code: {result.returncode}")
