"""Writes a .safetensors file with every stored parameter of a schedule's
model, HF-named, fp32: norms 1, lm_head.weight 0 (so that the first step's
loss is exactly ln(vocab)), everything else small pseudo-random values.

usage: write_weights.py FILE.sched OUT.safetensors
"""
import json
import random
import struct
import sys

data = open(sys.argv[1], "rb").read()
schedule = json.loads(data[32:])  # after the fixed binary header
rng = random.Random(0)
header, blobs, offset = {}, [], 0
for unit in schedule["units"]:
    for param in unit["params"]:
        if param["tied_to"]:
            continue
        name, shape = param["name"], param["shape"]
        count = 1
        for d in shape:
            count *= d
        if name.endswith("norm.weight") or name.endswith("layernorm.weight"):
            values = [1.0] * count
        elif name == "lm_head.weight":
            values = [0.0] * count
        else:
            values = [rng.uniform(-0.02, 0.02) for _ in range(count)]
        blob = struct.pack(f"<{count}f", *values)
        header[name] = {"dtype": "F32", "shape": shape,
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
with open(sys.argv[2], "wb") as f:
    f.write(struct.pack("<Q", len(text)))
    f.write(text)
    for blob in blobs:
        f.write(blob)
