"""Rewrites a pipeline schedule file so that the last stage frees the input
its first forward keeps (the `in` the unit's graph holds until its
backward, which names it nowhere) right after that forward instead of after
the backward: a read of a freed buffer that the reader cannot see, since no
op names the buffer after its new free. The offsets stay as they are, so
nothing else is placed at its bytes and the step is unchanged, unless
something writes the freed bytes (plan-run --poison).

usage: free_kept_input.py IN.sched OUT.sched   (prints the buffer moved)"""
import sys

import sched_file

src, dst = sys.argv[1], sys.argv[2]
fields, body = sched_file.read(src)
program = body["stages"][-1]
ops = program["ops"]
at, forward = next((i, op) for i, op in enumerate(ops)
                   if op["op"] == "forward" and op["in"] >= 0)
kept = forward["in"]
free = next(i for i, op in enumerate(ops) if op["op"] == "free" and op["buffer"] == kept)
if any(kept in op.values() for op in ops[at + 1:free] if op["op"] != "free"):
    sys.exit(f"error: buffer {kept} is named between its forward and its free")
ops.insert(at + 1, ops.pop(free))
sched_file.write(dst, fields, body)
print(f"freed {program['buffers'][kept]['name']} after op {at}")
