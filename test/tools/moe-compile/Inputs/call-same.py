"""Calls moe_forward of two cpu libraries of the same module on the same
seeded inputs (dims = [T] for the dynamic dimension) and compares the
results' bytes: prints `identical: N elements, K nonzero` or the first
difference (exit status 1).
Usage: call-same.py T LIB_A.so LIB_B.so"""
import ctypes
import re
import sys

import numpy as np

tokens, paths = int(sys.argv[1]), sys.argv[2:4]
ELT = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16}


def tensors(text):
    out = []
    for shape, elt in re.findall(r"tensor<((?:[0-9?]+x)*)([a-z0-9]+)>", text):
        dims = [tokens if d == "?" else int(d) for d in shape.split("x") if d]
        out.append((dims, elt))
    return out


def random(dims, elt, rng):
    x = rng.standard_normal(dims, dtype=np.float32) * 0.25
    if elt == "bf16":  # the f32 values' upper halves: bf16 bit patterns
        return (x.view(np.uint32) >> 16).astype(np.uint16)
    return x.astype(ELT[elt])


results = []
for path in paths:
    lib = ctypes.CDLL(path)
    lib.moe_forward_signature.restype = ctypes.c_char_p
    lib.moe_last_error.restype = ctypes.c_char_p
    ins, outs = lib.moe_forward_signature().decode().split("->")
    rng = np.random.default_rng(11)
    args = [random(d, e, rng) for d, e in tensors(ins)]
    res = [np.zeros(d, dtype=ELT[e]) for d, e in tensors(outs)]
    argv = (ctypes.c_void_p * len(args))(*[a.ctypes.data for a in args])
    resv = (ctypes.c_void_p * len(res))(*[r.ctypes.data for r in res])
    dims = (ctypes.c_int64 * 1)(tokens)
    rc = lib.moe_forward(argv, resv, dims, None)
    if rc != 0:
        print("%s: rc=%d %s" % (path, rc, lib.moe_last_error().decode()))
        sys.exit(1)
    results.append(res)
for a, b in zip(*results):
    ab, bb = a.view(np.uint8).ravel(), b.view(np.uint8).ravel()
    if not np.array_equal(ab, bb):
        i = int(np.argmax(a.ravel() != b.ravel()))
        print("differ: element %d: %r vs %r" % (i, a.ravel()[i], b.ravel()[i]))
        sys.exit(1)
    print("identical: %d elements, %d nonzero" % (a.size, int(np.count_nonzero(a))))
