"""Prints values of a JSON file for FileCheck, one `path = value` per line.

usage: query.py FILE PATH...   (PATH: dotted keys, e.g. memory.device.peak_bytes)
Floats print with 6 significant digits so checks do not depend on rounding in
the last place; objects and arrays print their sorted keys / their length.
"""
import json
import sys

with open(sys.argv[1]) as f:
    data = json.load(f)
for path in sys.argv[2:]:
    value = data
    for key in path.split("."):
        value = value[int(key)] if isinstance(value, list) else value[key]
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, float):
        text = "%.6g" % value
    elif isinstance(value, dict):
        text = "{" + ",".join(sorted(value)) + "}"
    elif isinstance(value, list):
        text = "[%d]" % len(value)
    else:
        text = str(value)
    print(f"{path} = {text}")
