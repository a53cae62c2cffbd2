"""Rewrites a schedule file (docs/schedule-format.md) with values changed and
a header that matches the new body, as a hand edit or a fuzzer would leave
it: each PATH=VALUE sets the JSON value at a dotted path (list indices are
numbers: train.optimizer.lr=-1, buffers.0.offset=0).

usage: edit_sched.py IN.sched OUT.sched PATH=VALUE..."""
import json
import struct
import sys
import zlib

from json_paths import apply_edit

HEADER = struct.Struct("<8sIIQII")  # magic, version, flags, body size, crc, reserved

src, dst, edits = sys.argv[1], sys.argv[2], sys.argv[3:]
data = open(src, "rb").read()
magic, version, flags, size, crc, reserved = HEADER.unpack_from(data)
body = json.loads(data[HEADER.size:HEADER.size + size])
for edit in edits:
    apply_edit(body, edit)
out = json.dumps(body).encode("utf-8")
with open(dst, "wb") as f:
    f.write(HEADER.pack(magic, version, flags, len(out), zlib.crc32(out), reserved))
    f.write(out)
