"""Calls moe_FUNC of a cpu library with the arguments moe-run saved
(--save-args=ARGS: ARGS/arg<I>.npy, bf16 as exact f32) and compares every
result with the .npy moe-run wrote for it (--output; bf16 as exact f32):
byte-identical, since both run the same lowering on this CPU. Dynamic
dimensions (`?`) take the saved arguments' sizes (passed as dims in order of
appearance); the results are sized by the library's moe_FUNC_result_shapes
(a size, or `$i`: dims[i]). Prints the signature and the result shapes,
then `result #I: identical (N elements)` or the first difference (exit
status 1).
Usage: call-vjp.py LIB.so FUNC ARGS_DIR EXPECTED_0.npy EXPECTED_1.npy ..."""
import ctypes
import os
import re
import sys

import numpy as np

lib_path, func, args_dir, expected = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
ELT = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16, "i64": np.int64,
       "i32": np.int32}


def tensors(text):
    return [([-1 if d == "?" else int(d) for d in shape.split("x") if d], elt)
            for shape, elt in re.findall(r"tensor<((?:(?:[0-9]+|\?)x)*)([a-z0-9]+)>", text)]


lib = ctypes.CDLL(lib_path)
getattr(lib, "moe_%s_signature" % func).restype = ctypes.c_char_p
lib.moe_last_error.restype = ctypes.c_char_p
signature = getattr(lib, "moe_%s_signature" % func)().decode()
print(signature)
ins, outs = signature.split("->")
args, sizes = [], []
for i, (dims, elt) in enumerate(tensors(ins)):
    a = np.load(os.path.join(args_dir, "arg%d.npy" % i))
    if elt == "bf16":
        a = (np.ascontiguousarray(a, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)
    sizes += [a.shape[j] for j, d in enumerate(dims) if d == -1]
    dims = [a.shape[j] if d == -1 else d for j, d in enumerate(dims)]
    args.append(np.ascontiguousarray(a.reshape(dims), dtype=ELT[elt]))
getattr(lib, "moe_%s_result_shapes" % func).restype = ctypes.c_char_p
shape_text = getattr(lib, "moe_%s_result_shapes" % func)().decode()
print(shape_text)
shapes = [[sizes[int(d[1:])] if d.startswith("$") else int(d) for d in r.split("x") if d]
          for r in shape_text.split(";")]
res = [np.full(d, 0x7fc0 if e == "bf16" else np.nan, dtype=ELT[e]) if e in ("f32", "f16", "bf16")
       else np.zeros(d, dtype=ELT[e]) for d, (_, e) in zip(shapes, tensors(outs))]
if len(res) != len(expected):
    sys.exit("call-vjp.py: %d results, %d expected files" % (len(res), len(expected)))
argv = (ctypes.c_void_p * len(args))(*[a.ctypes.data for a in args])
resv = (ctypes.c_void_p * len(res))(*[r.ctypes.data for r in res])
dimv = (ctypes.c_int64 * max(1, len(sizes)))(*sizes)
rc = getattr(lib, "moe_" + func)(argv, resv, dimv if sizes else None, None)
if rc != 0:
    sys.exit("rc=%d %s" % (rc, lib.moe_last_error().decode()))
for i, (r, (_, elt), path) in enumerate(zip(res, tensors(outs), expected)):
    if elt == "bf16":
        r = (r.astype(np.uint32) << 16).view(np.float32)
    want = np.load(path)
    if r.shape != want.shape or r.tobytes() != np.ascontiguousarray(want, dtype=r.dtype).tobytes():
        diff = np.flatnonzero(r.ravel() != want.ravel())
        j = int(diff[0]) if diff.size else 0
        print("result #%d: differ at element %d: %r vs %r" % (i, j, r.ravel()[j], want.ravel()[j]))
        sys.exit(1)
    print("result #%d: identical (%d elements)" % (i, r.size))
