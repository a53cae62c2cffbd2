"""Writes a schedule file whose task keeps its first allocation in a slot.

usage: make_slots.py BODY.json SLOTS SHIFT OUT.sched [picked | held]

BODY.json is `planc --emit=schedule-json` of a program with one task (a
sched.repeat). A new program buffer of SLOTS times the allocation's size,
allocated just before the task's runs and freed after them, replaces the
allocation: the task's buffer becomes `{"kind": "slot", ...}` and its alloc
and free ops go. With `picked` (SHIFT 0), the slot is a picked one of group
0, 16 elements into a slot of its size and 32 more, and the run table picks
the slots from the last down, one run after another. With `held` (version 14), the
new buffer is held: each run's micro-batch gets an alloc of its own at its
bytes while it uses the slot. Written from docs/schedule-format.md, as read_sched.py is;
what runs must train exactly as the file without the slot does."""
import json
import struct
import sys
import zlib

from read_sched import HEADER, remap

ELEMENT_BYTES = {"f32": 4, "bf16": 2, "f16": 2, "i8": 1}


def main(body_path, slots, shift, out_path, picked=False, held=False):
    s = json.load(open(body_path))
    prog = s["stages"][0] if s["mesh"]["pipeline"] > 1 else s
    (runs,) = prog["runs"]
    task = prog["tasks"][0]
    P = len(prog["buffers"])
    at = runs["buffers_before"]
    local = next(i for i, b in enumerate(task["buffers"]) if b["kind"] == "alloc")
    alloc = task["buffers"][local]

    # The new buffer takes id `at`: every id from there on moves up by one,
    # the task's own too (they follow the program's).
    def up(i):
        return i + 1 if i >= at else i

    def same(e):
        return e

    def shift_views(buffers):
        for b in buffers:
            if b["kind"] != "alloc":
                b["source"] = up(b["source"])

    prog["ops"] = [remap(op, up, same, 0) for op in prog["ops"]]
    shift_views(prog["buffers"])
    task["ops"] = [remap(op, up, same, 0) for op in task["ops"]]
    shift_views(task["buffers"])
    stride = alloc["numel"] + 32 if picked else alloc["numel"]
    arena = prog["arena_bytes"]
    offset = -(-arena[alloc["space"]] // 64) * 64
    arena[alloc["space"]] = offset + slots * stride * ELEMENT_BYTES[alloc["type"]]
    prog["buffers"].insert(at, {
        "kind": "alloc", "type": alloc["type"], "space": alloc["space"],
        "numel": slots * stride, "name": "slots." + alloc["name"],
        "role": alloc["role"], "persistent": False, "held": held, "offset": offset,
        "group": "", "sharded": False})
    runs["buffers_before"] += 1
    prog["ops"][runs["at"]:runs["at"]] = [
        {"op": "alloc", "buffer": at, "line": 0}, {"op": "free", "buffer": at, "line": 0}]
    runs["at"] += 1

    mine = P + 1 + local
    task["ops"] = [op for op in task["ops"]
                   if not (op["op"] in ("alloc", "free") and op["buffer"] == mine)]
    task["buffers"][local] = {
        "kind": "slot", "type": alloc["type"], "space": alloc["space"],
        "numel": alloc["numel"], "source": at, "slots": slots, "shift": shift,
        "group": 0 if picked else -1, "stride": stride if picked else 0,
        "offset": 16 if picked else 0}
    if picked:
        n = len(runs["order"])
        runs["picks"] = [slots - 1 - i % slots for i in range(n)]

    body = json.dumps(s).encode("utf-8")
    header = HEADER.pack(b"PLANSCHD", 14, 0, len(body), zlib.crc32(body), 0)
    with open(out_path, "wb") as f:
        f.write(header + body)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4],
         sys.argv[5:] == ["picked"], sys.argv[5:] == ["held"])
