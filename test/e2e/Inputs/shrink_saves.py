"""Rewrites a schedule file (docs/schedule-format.md) with every unit's saves
buffer (`*.saves.mb*`) cut to one element, as a schedule compiled by a planc
whose activation model undercounts would have them. The arenas and offsets
stay as they are, so the schedule still checks.

usage: shrink_saves.py IN.sched OUT.sched   (prints how many were cut)"""
import json
import re
import struct
import sys
import zlib

HEADER = struct.Struct("<8sIIQII")  # magic, version, flags, body size, crc, reserved

src, dst = sys.argv[1], sys.argv[2]
data = open(src, "rb").read()
magic, version, flags, size, crc, reserved = HEADER.unpack_from(data)
body = json.loads(data[HEADER.size:HEADER.size + size])
cut = 0
for b in body["buffers"]:
    if b["kind"] == "alloc" and re.search(r"\.saves\.mb\d+$", b["name"]):
        b["numel"] = 1
        cut += 1
out = json.dumps(body).encode("utf-8")
with open(dst, "wb") as f:
    f.write(HEADER.pack(magic, version, flags, len(out), zlib.crc32(out), reserved))
    f.write(out)
print(f"{cut} saves buffers cut")
