#!/usr/bin/env python3
"""Writes a copy of a safetensors file broken one way (bad_input_table.sh): the header rewritten, the data shifted.
Usage: broken_safetensors.py IN OUT KIND, KIND one of inner_bytes, gap, overlap, appended, shape, header_length,
truncated, deep_header."""
import json
import struct
import sys

src, dst, kind = sys.argv[1:4]
raw = open(src, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
data = raw[8 + n:]
tensors = sorted((k for k in header if k != "__metadata__"), key=lambda k: header[k]["data_offsets"][0])
first, second = header[tensors[0]], header[tensors[1]]
if kind == "inner_bytes":  # 16 bytes inside the data region: every later tensor shifted, the header unchanged
    end = first["data_offsets"][1]
    data = data[:end] + bytes(16) + data[end:]
elif kind == "gap":  # the header says so too: a gap of 16 bytes after the first tensor
    end = first["data_offsets"][1]
    data = data[:end] + bytes(16) + data[end:]
    for k in tensors[1:]:
        header[k]["data_offsets"] = [o + 16 for o in header[k]["data_offsets"]]
elif kind == "overlap":  # the second tensor starts 4 bytes early
    second["data_offsets"] = [o - 4 for o in second["data_offsets"]]
elif kind == "appended":
    data = data + b"junk"
elif kind == "shape":  # dtype x shape no longer matches the byte length
    first["shape"] = [first["shape"][0], first["shape"][1] + 1]
elif kind == "header_length":  # longer than the file: the length is written below
    pass
elif kind == "truncated":
    data = data[:-100]
elif kind == "deep_header":
    text = b"[" * 100000
    open(dst, "wb").write(struct.pack("<Q", len(text)) + text)
    sys.exit(0)
text = json.dumps(header).encode()
length = len(raw) * 2 if kind == "header_length" else len(text)
open(dst, "wb").write(struct.pack("<Q", length) + text + data)
