"""Writes a float64 .npy (numpy's format 1.0, no numpy needed).
usage: write-f64-npy.py OUT.npy V0 V1 ...   (a 1-D array)"""
import struct
import sys

path, values = sys.argv[1], [float(v) for v in sys.argv[2:]]
header = "{'descr': '<f8', 'fortran_order': False, 'shape': (%d,), }" % len(values)
pad = 64 - (10 + len(header) + 1) % 64
header = header + " " * pad + "\n"
with open(path, "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
    f.write(struct.pack("<%dd" % len(values), *values))
