"""Calls moe_forward of a cpu library of an int4 layer
(test/integration/Inputs/quant-int4-f32.mlir: x, then the parameters wr,
w1, w2, w1_scale, w2_scale, w1_zero, w2_zero) with the tensors of
moe-ref's .safetensors file (the i4 codes one per byte, as the C ABI takes
them) and X.npy (dims = [T]); writes the result as .npy.
Usage: call-int4.py LIB.so PARAMS.safetensors X.npy OUT.npy"""
import ctypes
import json
import struct
import sys

import numpy as np

lib_path, params_path, x_path, out_path = sys.argv[1:5]
raw = open(params_path, "rb").read()
(size,) = struct.unpack("<Q", raw[:8])
header = json.loads(raw[8:8 + size])
dtypes = {"F32": np.float32, "U8": np.uint8}


def tensor(name):
    info = header[name]
    begin, end = info["data_offsets"]
    data = raw[8 + size + begin:8 + size + end]
    return np.frombuffer(data, dtype=dtypes[info["dtype"]]).reshape(info["shape"]).copy()


x = np.load(x_path)
arrays = [x] + [tensor(n) for n in ("wr", "w1", "w2", "w1_scale", "w2_scale", "w1_zero", "w2_zero")]
lib = ctypes.CDLL(lib_path)
lib.moe_last_error.restype = ctypes.c_char_p
y = np.full((x.shape[0], x.shape[1]), np.nan, dtype=np.float32)
args = (ctypes.c_void_p * len(arrays))(*[a.ctypes.data for a in arrays])
results = (ctypes.c_void_p * 1)(y.ctypes.data)
dims = (ctypes.c_int64 * 1)(x.shape[0])
rc = lib.moe_forward(args, results, dims, None)
print("rc=%d error='%s'" % (rc, lib.moe_last_error().decode()))
np.save(out_path, y)
