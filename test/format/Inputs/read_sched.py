"""A second reader of schedule files, written from docs/schedule-format.md
alone (struct + zlib + json), so the lit tests check the documented format
rather than the C++ reader against its own writer.

Prints one summary line, or `error: ...` and exits 1."""
import json
import struct
import sys
import zlib

HEADER = struct.Struct("<8sIIQII")  # magic, version, flags, body size, crc, reserved


def fail(message):
    print(f"error: {message}")
    sys.exit(1)


# docs/generated/schedule-ops.md: the keys that hold buffer ids, and those
# that hold event ids.
ID_FIELDS = ("buffer", "src", "dst", "params", "tied", "frozen", "saves", "input",
             "activations", "grads", "tied_grads", "norm", "found_inf",
             "loss_scale", "in", "out", "out_grad", "in_grad", "stats")
EVENT_FIELDS = ("done", "event")
ELEMENT_BYTES = {"f32": 4, "bf16": 2, "f16": 2, "i8": 1}


def shift_name(name, start, to):
    """An alloc's `.mb<start>` component (followed by the end or a `.`) as
    `.mb<to>`."""
    token = f".mb{start}"
    at = name.find(token)
    while at >= 0:
        after = at + len(token)
        if after == len(name) or name[after] == ".":
            return name[:at] + f".mb{to}" + name[after:]
        at = name.find(token, after)
    return name


def remap(op, buffer, event, shift):
    """`op` with its buffer ids mapped by `buffer`, its event ids by `event`
    and its micro-batch counted on by `shift`."""
    op = dict(op)
    for k in ID_FIELDS:
        if k in op and op[k] >= 0:
            op[k] = buffer(op[k])
    if "state" in op:
        op["state"] = [buffer(b) for b in op["state"]]
    for k in EVENT_FIELDS:
        if k in op:
            op[k] = event(op[k])
    if "after" in op:
        op["after"] = [event(e) for e in op["after"]]
    if "micro_batch" in op:
        op["micro_batch"] += shift
    return op


def expand(prog, micro_batches):
    """The program with its tasks run where its run tables say (docs, "Tasks")."""
    P, E = len(prog["buffers"]), prog["num_events"]
    tables = prog["runs"]
    added_b = [sum(len(prog["tasks"][t]["buffers"]) for t, _ in r["order"]) for r in tables]
    # Held buffers (version 14): each program buffer's held root (None: none)
    # and its first element there; each table's holders (slot source,
    # micro-batch), in the order its runs first name them.
    held = [None] * P
    for i, b in enumerate(prog["buffers"]):
        if b["kind"] == "alloc":
            held[i] = (i, 0) if b["held"] else None
        elif 0 <= b["source"] < i and held[b["source"]]:
            if b["kind"] != "view":
                fail(f"buffer {i} is a shard view of a held buffer")
            root, element = held[b["source"]]
            held[i] = (root, element + b["offset"])
    holders = []
    for r, n in zip(tables, range(len(tables))):
        seen_h = {}
        for t, mb in r["order"]:
            for b in prog["tasks"][t]["buffers"]:
                if b["kind"] == "slot" and 0 <= b["source"] < P and held[b["source"]]:
                    if b["slots"] != 1 or b["group"] != -1:
                        fail("a slot of a held buffer is one slot, not picked")
                    seen_h.setdefault((b["source"], mb + b["shift"]), len(seen_h))
        holders.append(seen_h)
        added_b[n] += len(seen_h)
    # A run's own events, and each slot event instance (family, micro-batch)
    # where it first appears.
    added_e, seen = [], set()
    for r in tables:
        n = 0
        picks = r["picks"] or [-1] * len(r["order"])
        for (t, mb), pick in zip(r["order"], picks):
            task = prog["tasks"][t]
            n += task["num_events"]
            for family, shift in task["slot_events"]:
                if (family, mb + shift) not in seen:
                    seen.add((family, mb + shift))
                    n += 1
        added_e.append(n)

    # An id past the program's stays past the expansion's (the checks below
    # then reject it); a negative one stays negative.
    def program_buffer(i):
        if i < 0:
            return i
        return i + sum(n for r, n in zip(tables, added_b) if i >= P or r["buffers_before"] <= i)

    def program_event(i):
        if i < 0:
            return i
        return i + sum(n for r, n in zip(tables, added_e) if i >= E or r["events_before"] <= i)

    buffers, ops = [], []
    nb = no = 0
    events = 0
    instances = {}

    def copy_program(b_to, o_to):
        nonlocal nb, no
        for b in prog["buffers"][nb:b_to]:
            b = dict(b)
            if b["kind"] == "slot":
                fail("a slot among the program's buffers")
            if b["kind"] != "alloc":
                b["source"] = program_buffer(b["source"])
            buffers.append(b)
        for op in prog["ops"][no:o_to]:
            ops.append(remap(op, program_buffer, program_event, 0))
        nb, no = max(nb, b_to), max(no, o_to)

    holder_ids, table_ops = [], []
    for r, n_events, table_holders in zip(tables, added_e, holders):
        copy_program(r["buffers_before"], r["at"])
        first_holder = len(buffers)
        table_ops.append((len(buffers), len(ops)))
        for source, mb in table_holders:
            root, element = held[source]
            h = prog["buffers"][root]
            name = h["name"] + ("" if source == root else f".b{source}") + f".mb{mb}"
            holder_ids.append(len(buffers))
            buffers.append({
                "kind": "alloc", "type": h["type"], "space": h["space"],
                "numel": prog["buffers"][source]["numel"], "name": name,
                "role": h["role"], "persistent": False, "held": False,
                "offset": h["offset"] + element * ELEMENT_BYTES[h["type"]],
                "group": "", "sharded": False})
        next_event = r["events_before"] + events
        picks = r["picks"] or [-1] * len(r["order"])
        for (t, mb), pick in zip(r["order"], picks):
            task = prog["tasks"][t]
            if not 0 <= mb < micro_batches:
                fail(f"run of micro-batch {mb}")
            first_b, first_e = len(buffers), next_event
            local_b, local_e = len(task["buffers"]), task["num_events"]
            next_event += local_e
            slot_events = []
            for family, shift in task["slot_events"]:
                if (family, mb + shift) not in instances:
                    instances[(family, mb + shift)] = next_event
                    next_event += 1
                slot_events.append(instances[(family, mb + shift)])

            def buffer(i):
                return first_b + i - P if P <= i < P + local_b else program_buffer(i)

            def event(i):
                if E <= i < E + local_e:
                    return first_e + i - E
                if E + local_e <= i < E + local_e + len(slot_events):
                    return slot_events[i - E - local_e]
                return program_event(i)

            for b in task["buffers"]:
                b = dict(b)
                if b["kind"] == "alloc":
                    b["name"] = shift_name(b["name"], task["micro_batch"], mb)
                elif b["kind"] == "slot":
                    # The slot its micro-batch takes (a picked one: its
                    # run's pick), as a view.
                    shift, slots = b.pop("shift"), b.pop("slots")
                    group, stride = b.pop("group"), b.pop("stride")
                    if group >= 0:
                        offset = pick * stride + b["offset"]
                    else:
                        offset = (mb + shift) % slots * b["numel"]
                    if 0 <= b["source"] < P and held[b["source"]]:
                        b.update(kind="view", offset=0, source=first_holder
                                 + table_holders[(b["source"], mb + shift)])
                    else:
                        b.update(kind="view", source=program_buffer(b["source"]),
                                 offset=offset)
                else:
                    b["source"] = buffer(b["source"])
                buffers.append(b)
            for op in task["ops"]:
                ops.append(remap(op, buffer, event, mb - task["micro_batch"]))
        events += n_events
    copy_program(P, len(prog["ops"]))
    ops = place_holders(buffers, ops, holder_ids, table_ops)
    return {**prog, "buffers": buffers, "ops": ops, "num_events": E + events,
            "tasks": [], "runs": []}


def place_holders(buffers, ops, holder_ids, table_ops):
    """`ops` with each holder's alloc before its first use and its free
    after its last, or after the wait that completes the last asynchronous
    op using it (a wait completes its event's op and those it started
    after)."""
    if not holder_ids:
        return ops
    holder_of = [None] * len(buffers)
    for h in holder_ids:
        holder_of[h] = h
    for i, b in enumerate(buffers):
        if b["kind"] != "alloc" and 0 <= b["source"] < i:
            holder_of[i] = holder_of[b["source"]]
    first, last, asyncs = {}, {}, {}
    for i, op in enumerate(ops):
        used = []
        ids = [op[k] for k in ID_FIELDS if k in op] + op.get("state", [])
        for b in ids:
            h = holder_of[b] if 0 <= b < len(buffers) else None
            if h is not None:
                first.setdefault(h, i)
                last[h] = max(last.get(h, i), i)
                used.append(h)
        if op["op"] == "wait":
            work = [op["event"]]
            while work:
                a = asyncs.get(work.pop())
                if a is None or a["done"]:
                    continue
                a["done"] = True
                for h in a["holders"]:
                    last[h] = max(last[h], i)
                work.extend(a["after"])
        if "done" in op:
            asyncs[op["done"]] = {"holders": used, "after": op.get("after", []),
                                  "done": False}
    before = {i: [] for i in range(len(ops) + 1)}
    after = {i: [] for i in range(len(ops))}
    for h in holder_ids:
        if h in first:
            before[first[h]].append({"op": "alloc", "buffer": h, "line": 0})
            after[last[h]].append({"op": "free", "buffer": h, "line": 0})
        else:
            at = next(o for b, o in reversed(table_ops) if b <= h)
            before[at] += [{"op": "alloc", "buffer": h, "line": 0},
                           {"op": "free", "buffer": h, "line": 0}]
    placed = []
    for i, op in enumerate(ops):
        placed += before[i] + [op] + after[i]
    return placed + before[len(ops)]


def main(path):
    data = open(path, "rb").read()
    if len(data) < HEADER.size:
        fail("truncated header")
    magic, version, flags, size, crc, reserved = HEADER.unpack_from(data)
    if magic != b"PLANSCHD":
        fail(f"bad magic {magic!r}")
    if version != 14 or flags != 0 or reserved != 0:
        fail(f"version {version} flags {flags} reserved {reserved}")
    body = data[HEADER.size:]
    if len(body) != size:
        fail(f"body is {len(body)} bytes, header says {size}")
    if zlib.crc32(body) != crc:
        fail("checksum mismatch")
    s = json.loads(body.decode("utf-8"))

    # One program, or one per pipeline stage.
    pipeline = s["mesh"]["pipeline"]
    programs = s["stages"] if pipeline > 1 else [s]
    if len(programs) != pipeline:
        fail(f"{len(programs)} programs for a pipeline of {pipeline}")
    tasks = sum(len(prog["tasks"]) for prog in programs)
    programs = [expand(prog, s["micro_batches"]) for prog in programs]
    groups = {g["name"]: g for g in s["groups"]}
    units = {u["name"]: u for u in s["units"]}
    shard = s["mesh"]["shard"]
    tensor = s["mesh"]["tensor"]
    def numel(p):
        # What one tensor rank stores: a split dimension's slice of each part,
        # rounded up (a padded vocabulary).
        n = 1
        for k, d in enumerate(p["shape"]):
            split = p.get("split")
            if split and split["dim"] == k and tensor > 1:
                part = d // split["chunks"]
                d = split["chunks"] * -(-part // tensor)
            n *= d
        return n

    # Each unit's stored parameters of each kind (trained, frozen: a LoRA
    # base) fill its numel / frozen_numel contiguously, in order.
    for u in s["units"]:
        nxt = {False: 0, True: 0}
        for p in u["params"]:
            if p["tied_to"]:
                continue
            if p["offset"] != nxt[p["frozen"]]:
                fail(f"unit {u['name']}: {p['name']} is not where the previous one ends")
            nxt[p["frozen"]] += numel(p)
        if (nxt[False], nxt[True]) != (u["numel"], u["frozen_numel"]):
            fail(f"unit {u['name']}: its parameters do not fill numel / frozen_numel")
    frozen = sum(u["frozen_numel"] for u in s["units"])
    if bool(frozen) != (s["model"]["lora"] is not None):
        fail("frozen parameters without model.lora, or model.lora without them")
    def storage_bytes(base, n):
        # NF4: packed indices, an absmax index a 64 elements, an fp32 scale a
        # 256 absmax, the fp32 offset.
        if base == "nf4":
            blocks = -(-n // 64)
            return (n + 1) // 2 + blocks + 4 * -(-blocks // 256) + 4
        return n * (4 if base == "fp32" else 2)

    def frozen_size(u, as_bytes):
        if not as_bytes:
            return u["frozen_numel"]
        return sum(storage_bytes(p["base"], numel(p)) for p in u["params"]
                   if p["frozen"] and not p["tied_to"])

    for g in s["groups"]:
        if not set(g["units"]) <= set(units):
            fail(f"group {g['name']} names unknown units")
        # A frozen base with an NF4 part is bytes: its sizes count bytes.
        as_bytes = any(p["frozen"] and not p["tied_to"] and p["base"] == "nf4"
                       for n in g["units"] for p in units[n]["params"])
        if sum(units[n]["numel"] for n in g["units"]) != g["numel"]:
            fail(f"group {g['name']}: numel is not its units'")
        if sum(frozen_size(units[n], as_bytes) for n in g["units"]) != g["frozen_numel"]:
            fail(f"group {g['name']}: frozen_numel is not its units'")
        for pre in ("", "frozen_"):
            if g[pre + "padded_numel"] % shard or g[pre + "shard_numel"] * shard != g[pre + "padded_numel"]:
                fail(f"group {g['name']} is not evenly sharded ({pre}padded_numel)")
    for prog in programs:
        buffers, ops = prog["buffers"], prog["ops"]
        for i, b in enumerate(buffers):
            if b["kind"] != "alloc":
                if not 0 <= b["source"] < i:
                    fail(f"buffer {i} has a bad source")
                continue
            if b["group"]:
                g = groups[b["group"]]
                pre = "frozen_" if b["role"] == "frozen" else ""
                want = g[pre + "shard_numel"] if b["sharded"] else g[pre + "padded_numel"]
                if b["numel"] != want:
                    fail(f"buffer {i} ({b['name']}) is not its group's size")
            end = b["offset"] + b["numel"] * {"f32": 4, "bf16": 2, "f16": 2, "i8": 1}[b["type"]]
            if end > prog["arena_bytes"][b["space"]]:
                fail(f"buffer {i} ({b['name']}) is outside its arena")
        for i, op in enumerate(ops):
            for field in ID_FIELDS:
                if field in op and not -1 <= op[field] < len(buffers):
                    fail(f"op {i} ({op['op']}): {field} out of range")
            for b in op.get("state", []):
                if not 0 <= b < len(buffers):
                    fail(f"op {i} ({op['op']}): state out of range")
            for e in op.get("after", []) + [op[k] for k in ("done", "event") if k in op]:
                if not 0 <= e < prog["num_events"]:
                    fail(f"op {i}: event out of range")

    ops = [op for prog in programs for op in prog["ops"]]
    buffers = [b for prog in programs for b in prog["buffers"]]
    events = sum(prog["num_events"] for prog in programs)
    kinds = sorted({op["op"] for op in ops})
    sharded = sum(1 for b in buffers if b["kind"] == "alloc" and b["sharded"])
    lora = s["model"]["lora"]
    mesh = (f"{pipeline}x" if pipeline > 1 else "") + f"{s['mesh']['replicate']}x{shard}" + (
        f"x{tensor}" if tensor > 1 or pipeline > 1 else "")
    print(f"ok {s['plan']} mesh {mesh} "
          f"{s['sharding']} {s['train']['precision']} "
          + (f"lora r{lora['rank']} frozen {frozen} " if lora else "")
          + f"units {len(units)} "
          f"groups {len(groups)} buffers {len(buffers)} "
          f"sharded_state {sharded} ops {len(ops)} events {events}"
          + (f" tasks {tasks}" if tasks else ""))
    print("kinds " + " ".join(kinds))


if __name__ == "__main__":
    main(sys.argv[1])
