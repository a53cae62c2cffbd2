"""Reads and writes a schedule file's body (docs/schedule-format.md): the
header (magic, version, flags, body size, CRC-32 of the body, reserved)
and the JSON body. What is written has a header that matches its new body,
as a hand edit or a fuzzer would leave it."""
import json
import struct
import zlib

HEADER = struct.Struct("<8sIIQII")  # magic, version, flags, body size, crc, reserved


def read(path):
    """The header's fields and the parsed body of the file at `path`."""
    data = open(path, "rb").read()
    fields = HEADER.unpack_from(data)
    size = fields[3]
    return fields, json.loads(data[HEADER.size:HEADER.size + size])


def write(path, fields, body):
    """`body` under `fields`' magic, version, flags and reserved word."""
    magic, version, flags, _, _, reserved = fields
    out = json.dumps(body).encode("utf-8")
    with open(path, "wb") as f:
        f.write(HEADER.pack(magic, version, flags, len(out), zlib.crc32(out), reserved))
        f.write(out)
