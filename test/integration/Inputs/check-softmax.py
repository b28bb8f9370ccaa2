"""Checks y = softmax(x) over the last dimension, computed here in double from
the saved x (f32 .npy files, 2-D): |y - ref| <= 1e-6 * max|ref| per row.
usage: check-softmax.py X.npy Y.npy"""
import math
import struct
import sys


def read(path):
    data = open(path, "rb").read()
    hlen = int.from_bytes(data[8:10], "little")
    header = data[10:10 + hlen].decode("latin1")
    shape = tuple(int(v) for v in header.split("(")[1].split(")")[0].split(",") if v.strip())
    body = data[10 + hlen:]
    return shape, struct.unpack("<%df" % (len(body) // 4), body)


(rows, cols), x = read(sys.argv[1])
shape, y = read(sys.argv[2])
assert shape == (rows, cols), shape
worst = 0.0
for r in range(rows):
    row = x[r * cols:(r + 1) * cols]
    m = max(row)
    e = [math.exp(v - m) for v in row]
    s = sum(e)
    ref = [v / s for v in e]
    worst = max(worst, max(abs(a - b) for a, b in zip(y[r * cols:(r + 1) * cols], ref)) / max(ref))
if worst > 1e-6:
    sys.exit(f"softmax: max relative error {worst:.3e} > 1e-6")
print(f"softmax: {rows} rows match the double-precision softmax (max rel err {worst:.1e} <= 1e-6)")
