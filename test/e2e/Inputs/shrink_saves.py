"""Rewrites a schedule file (docs/schedule-format.md) with every unit's saves
buffer (`*.saves.mb*`) cut to one element, as a schedule compiled by a planc
whose activation model undercounts would have them. The arenas and offsets
stay as they are, so the schedule still checks.

usage: shrink_saves.py IN.sched OUT.sched   (prints how many were cut)"""
import re
import sys

import sched_file

src, dst = sys.argv[1], sys.argv[2]
fields, body = sched_file.read(src)
cut = 0
for b in body["buffers"]:
    if b["kind"] == "alloc" and re.search(r"\.saves\.mb\d+$", b["name"]):
        b["numel"] = 1
        cut += 1
sched_file.write(dst, fields, body)
print(f"{cut} saves buffers cut")
