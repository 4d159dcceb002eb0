#!/usr/bin/env python3
"""Writes a copy of the deepseek_v3_fp8 fixture's model directory edited one way (bad_input_fp8.sh), without torch.
Usage: edited_fp8_checkpoint.py IN_DIR OUT_DIR PYTHON-ON-config [EDIT ...], each EDIT one of
  drop=TENSOR              the tensor left out
  shape=TENSOR=JSON        its header shape replaced (the same number of elements)
  bytes=TENSOR@INDEX=HEX   its bytes from INDEX replaced by HEX (an e4m3 NaN code, an infinite scale)."""
import json
import struct
import sys

src, out, statement = sys.argv[1:4]
config = json.load(open(src + "/config.json"))
exec(statement)
json.dump(config, open(out + "/config.json", "w"))
raw = open(src + "/model.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
body = bytearray(raw[8 + n:])
for edit in sys.argv[4:]:
    kind, what = edit.split("=", 1)
    if kind == "drop":
        header.pop(what)
    elif kind == "shape":
        name, shape = what.split("=", 1)
        header[name]["shape"] = json.loads(shape)
    elif kind == "bytes":
        place, hex_bytes = what.split("=", 1)
        name, index = place.split("@")
        at = header[name]["data_offsets"][0] + int(index)
        patch = bytes.fromhex(hex_bytes)
        body[at:at + len(patch)] = patch
kept, chunks, offset = {}, [], 0
for name, t in header.items():
    if name == "__metadata__":
        kept[name] = t
        continue
    a, b = t["data_offsets"]
    chunks.append(bytes(body[a:b]))
    kept[name] = dict(t, data_offsets=[offset, offset + b - a])
    offset += b - a
text = json.dumps(kept).encode()
open(out + "/model.safetensors", "wb").write(struct.pack("<Q", len(text)) + text + b"".join(chunks))
