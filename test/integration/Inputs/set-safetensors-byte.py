"""Copies a .safetensors file with one byte of one tensor's data replaced.

usage: set-safetensors-byte.py IN TENSOR INDEX VALUE OUT
(byte INDEX of TENSOR's data becomes VALUE; the header is kept as it is).
"""
import json
import struct
import sys

src, name, index, value, dst = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
data = bytearray(open(src, "rb").read())
(size,) = struct.unpack("<Q", data[:8])
header = json.loads(data[8:8 + size])
if name not in header:
    sys.exit(f"{src}: no tensor {name}")
begin, end = header[name]["data_offsets"]
if not 0 <= index < end - begin:
    sys.exit(f"{name}: byte {index} outside its {end - begin} bytes")
data[8 + size + begin + index] = value
open(dst, "wb").write(data)
