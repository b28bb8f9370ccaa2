#!/usr/bin/env python3
"""Runs a function twice on the CPU, once as given and once with bad values
in one place, and prints what the bad values changed (docs/spec.md §3, "NaN
and infinities"): every row of the result but the bad token's must be
bit-identical to the clean run's.

  bad-values.py MLIR PARAMS X.npy OUT_DIR WHAT [moe-run options...]

WHAT: nan-row:R (token R's whole row NaN), inf:R:C (+inf at [R, C]),
param-nan:NAME:I (NaN at flat index I of the parameter NAME in PARAMS,
rewritten into OUT_DIR; every token is then affected, so only the run's
success and the finiteness of the result are printed).
"""
import json
import os
import struct
import subprocess
import sys

import numpy as np


def run(mlir, params, x, out, extra):
    r = subprocess.run(["moe-run", mlir, "--device=cpu", "--params=" + params, "--input=" + x,
                        "--output=" + out] + extra, capture_output=True, text=True)
    if r.returncode != 0:
        print("moe-run failed (exit %d): %s" % (r.returncode, r.stderr.strip()))
        sys.exit(1)
    return np.load(out)


def poison_param(params, name, index, out):
    """A copy of a safetensors file with NaN at one element of NAME."""
    with open(params, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    info = header[name]
    size = {"F32": 4, "F16": 2, "BF16": 2}[info["dtype"]]
    nan = {"F32": struct.pack("<f", float("nan")), "F16": b"\x00\x7e", "BF16": b"\xc0\x7f"}
    at = 8 + n + info["data_offsets"][0] + index * size
    data = data[:at] + nan[info["dtype"]] + data[at + size:]
    with open(out, "wb") as f:
        f.write(data)


def main():
    mlir, params, xpath, out, what = sys.argv[1:6]
    extra = sys.argv[6:]
    os.makedirs(out, exist_ok=True)
    clean = run(mlir, params, xpath, out + "/clean.npy", extra)
    x = np.load(xpath)
    kind, *args = what.split(":")
    bad_row = None
    if kind == "nan-row":
        bad_row = int(args[0])
        x[bad_row, :] = np.nan
    elif kind == "inf":
        bad_row = int(args[0])
        x[bad_row, int(args[1])] = np.inf
    elif kind == "param-nan":
        poisoned = out + "/poisoned.safetensors"
        poison_param(params, args[0], int(args[1]), poisoned)
        params = poisoned
    else:
        sys.exit("bad-values.py: unknown WHAT " + what)
    np.save(out + "/x.npy", x)
    y = run(mlir, params, out + "/x.npy", out + "/bad.npy", extra)
    if bad_row is None:
        print("run: ok; result finite: %s" % bool(np.isfinite(y).all()))
        return
    row = y[bad_row]
    print("row %d: %s" % (bad_row, "all NaN" if np.isnan(row).all() else
                          "finite" if np.isfinite(row).all() else "some NaN or inf"))
    others = [i for i in range(y.shape[0]) if i != bad_row]
    same = [i for i in others if clean[i].tobytes() == y[i].tobytes()]
    print("other rows: %s" % ("bit-identical (%d rows)" % len(same) if len(same) == len(others)
                              else "DIFFERENT in rows %s" % sorted(set(others) - set(same))))


if __name__ == "__main__":
    main()
