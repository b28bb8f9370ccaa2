"""Calls moe_train_forward of a cpu library of the spec example
moesart_train.mlir (x, i64 seed, six parameters -> y, 0-d f32 loss) with
the inputs of moe-ref; writes y and loss as .npy.
Usage: call-train.py LIB.so x.npy seed.npy params.safetensors y.npy loss.npy"""
import ctypes
import json
import sys

import numpy as np

lib_path, x_path, seed_path, params_path, y_path, loss_path = sys.argv[1:7]
with open(params_path, "rb") as f:
    size = int.from_bytes(f.read(8), "little")
    header = json.loads(f.read(size))
    data = f.read()


def param(name):
    info = header[name]
    begin, end = info["data_offsets"]
    return np.frombuffer(data[begin:end], np.float32).reshape(info["shape"]).copy()


x = np.ascontiguousarray(np.load(x_path), dtype=np.float32)
seed = np.ascontiguousarray(np.load(seed_path), dtype=np.int64)
inputs = [x, seed] + [param(n) for n in ["router.weight", "router.bias", "experts.w1",
                                         "experts.w2", "experts.b1", "experts.b2"]]
y = np.full(x.shape, np.nan, dtype=np.float32)
loss = np.full((), np.nan, dtype=np.float32)
lib = ctypes.CDLL(lib_path)
lib.moe_last_error.restype = ctypes.c_char_p
lib.moe_train_forward_signature.restype = ctypes.c_char_p
print(lib.moe_train_forward_signature().decode())
args = (ctypes.c_void_p * len(inputs))(*[a.ctypes.data for a in inputs])
results = (ctypes.c_void_p * 2)(y.ctypes.data, loss.ctypes.data)
rc = lib.moe_train_forward(args, results, None, None)
print("rc=%d error='%s'" % (rc, lib.moe_last_error().decode()))
np.save(y_path, y)
np.save(loss_path, loss)
