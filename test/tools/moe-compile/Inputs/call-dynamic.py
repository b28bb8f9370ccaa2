"""Calls moe_layer of a cpu library of dynamic-layer.mlir with T tokens
(dims = [T]) on seeded data; writes the inputs and the result as .npy.
Usage: call-dynamic.py LIB.so T OUTDIR"""
import ctypes
import sys

import numpy as np

lib_path, tokens, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rng = np.random.default_rng(7)
x = rng.standard_normal((tokens, 16), dtype=np.float32)
wr = rng.standard_normal((16, 4), dtype=np.float32)
w1 = rng.standard_normal((4, 16, 32), dtype=np.float32) * 0.25
w2 = rng.standard_normal((4, 32, 16), dtype=np.float32) * 0.25
for name, a in [("x", x), ("wr", wr), ("w1", w1), ("w2", w2)]:
    np.save("%s/%s.npy" % (out, name), a)
lib = ctypes.CDLL(lib_path)
lib.moe_last_error.restype = ctypes.c_char_p
y = np.full((tokens, 16), np.nan, dtype=np.float32)
args = (ctypes.c_void_p * 4)(*[a.ctypes.data for a in (x, wr, w1, w2)])
results = (ctypes.c_void_p * 1)(y.ctypes.data)
dims = (ctypes.c_int64 * 1)(tokens)
rc = lib.moe_layer(args, results, dims, None)
print("rc=%d error='%s'" % (rc, lib.moe_last_error().decode()))
np.save("%s/y.npy" % out, y)
