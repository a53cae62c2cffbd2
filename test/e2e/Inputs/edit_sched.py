"""Rewrites a schedule file (docs/schedule-format.md) with values changed and
a header that matches the new body, as a hand edit or a fuzzer would leave
it: each PATH=VALUE sets the JSON value at a dotted path (list indices are
numbers: train.optimizer.lr=-1, buffers.0.offset=0).

usage: edit_sched.py IN.sched OUT.sched PATH=VALUE..."""
import sys

import sched_file
from json_paths import apply_edit

src, dst, edits = sys.argv[1], sys.argv[2], sys.argv[3:]
fields, body = sched_file.read(src)
for edit in edits:
    apply_edit(body, edit)
sched_file.write(dst, fields, body)
