"""Edits a checkpoint's checkpoint.json in place: each PATH=VALUE sets the
value (JSON) at a dotted path (list indices are numbers: tensors.0.dtype).
--rechecksum writes the checksum of the edited contents, as the runtime
computes it (zlib's CRC-32 of the JSON without "checksum", printed with one
space of indent, keys in the file's order), so that only the fields' own checks can
catch the edit; --verify only checks that this script computes the stored
checksum.

usage: edit_checkpoint.py CHECKPOINT_DIR [--rechecksum | --verify] PATH=VALUE...
"""
import json
import os
import sys
import zlib

from json_paths import apply_edit


def checksum(obj):
    contents = {k: v for k, v in obj.items() if k != "checksum"}
    text = json.dumps(contents, indent=1, ensure_ascii=False)
    return f"{zlib.crc32(text.encode()):08x}"


def main():
    directory, args = sys.argv[1], sys.argv[2:]
    path = os.path.join(directory, "checkpoint.json")
    with open(path) as f:
        obj = json.load(f)
    if "--verify" in args:
        if checksum(obj) != obj["checksum"]:
            sys.exit(f"computed {checksum(obj)}, stored {obj['checksum']}")
        print("checksum ok")
        return
    rechecksum = "--rechecksum" in args
    for edit in (a for a in args if not a.startswith("--")):
        apply_edit(obj, edit)
    if rechecksum:
        obj["checksum"] = checksum(obj)
    with open(path, "w") as f:
        f.write(json.dumps(obj, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
