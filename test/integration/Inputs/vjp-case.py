#!/usr/bin/env python3
"""One gradient check of a moe.layer against the independent reference.

  vjp-case.py OUT_DIR [--tol X] [--dynamic] [--sequential] [--aux-only]
              [--near-zero NAME]
              -- MOE-REF-LAYER-OPTIONS

Writes the layer's data, cotangents and expected gradients with
`moe-ref layer ... --vjp` (MoEReferenceGrad.h: the hand-derived backward in
double), the function @f that layer is (the MLIR below, built from the same
options), runs `moe-run --entry=f_vjp` on the CPU (moe-run adds @f_vjp with
--moe-generate-vjp) and compares y and every gradient with `moe-ref compare`
(f32: 5e-4 of the largest |value| of each tensor; bf16: 1e-2 = 2.56 u, f16:
2e-3 = 4.1 u, u the unit roundoff of the type; docs/spec.md §9). Prints one line per compared tensor ("grad_w1: PASS ..."); exits 1 on
the first mismatch. Exact properties on top of the tolerance: where the
reference's gradient of a whole parameter, or of one expert's slice of an
expert parameter (w1, w2, b1, b2: an expert that got no token, a selection
bias), is exactly zero, the compiled one must be exactly zero too.
With --layers N among the options, the case is `moe-ref block`: N residual
layers x <- x + layer_l(x) (f32 adds), parameters l<l>_NAME. With `soft`
as the first option, the case is `moe-ref soft` (a moe.soft_layer over
[G, M, D]; the options of `moe-ref soft`, --fused to state the layer as
moe.fused_soft_experts) and the gradients are those of x, phi, the scale
(--scale-param) and the expert weights.
--dynamic declares T as `?`; --sequential also runs single-threaded
(--cpu-parallel=false) and requires every output to be byte-identical to
the parallel run's; --aux-only (MOESART training) passes dy = 0, so only
the aux loss's cotangent reaches the gradients. --near-zero NAME (a
gradient whose exact value is zero up to rounding, e.g. the router's under
MOESART inference, whose weights are 1/K but for the 1e-10 of docs/spec.md
§3.1): instead of the relative comparison, max |grad_NAME| must be at most
1e-5 of max |grad_x| (the reference's value is rounding noise of the double
computation, the compiled one of f32).
"""
import os
import subprocess
import sys

import numpy as np

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from moe_case import layer_case, soft_case  # noqa: E402


def parse(argv):
    opts = {"tol": None, "dynamic": False, "sequential": False, "aux_only": False,
            "near_zero": []}
    i = 1
    out = argv[i]
    i += 1
    while argv[i] != "--":
        if argv[i] == "--tol":
            opts["tol"] = argv[i + 1]
            i += 2
        elif argv[i] == "--dynamic":
            opts["dynamic"] = True
            i += 1
        elif argv[i] == "--sequential":
            opts["sequential"] = True
            i += 1
        elif argv[i] == "--near-zero":
            opts["near_zero"].append("grad_" + argv[i + 1])
            i += 2
        elif argv[i] == "--aux-only":
            opts["aux_only"] = True
            i += 1
        else:
            sys.exit("vjp-case.py: unknown option " + argv[i])
    return out, opts, argv[i + 1:]


def main():
    out, opts, ref = parse(sys.argv)
    os.makedirs(out, exist_ok=True)
    prefix = out + "/"
    if ref and ref[0] == "soft":
        inputs, outputs, dt = soft_case(prefix, ref)
    else:
        inputs, outputs, dt = layer_case(prefix, ref, dynamic=opts["dynamic"],
                                                aux_only=opts["aux_only"])
    check(prefix, opts, inputs, outputs, dt)


def check(prefix, opts, inputs, outputs, dt):
    """Runs f_vjp and compares its outputs with the reference's."""
    def run(suffix, extra):
        cmd = ["moe-run", prefix + "f.mlir", "--device=cpu", "--entry=f_vjp",
               "--params=" + prefix + "p.safetensors"] + extra
        cmd += ["--input=" + p for p in inputs]
        cmd += ["--output=" + prefix + "out%s_%s.npy" % (suffix, n) for n in outputs]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)

    run("", [])
    tol = opts["tol"] or {"f32": "5e-4", "bf16": "1e-2", "f16": "2e-3"}[dt]
    expected = {"y": "y_ref", "aux": "loss_ref"}
    for n in outputs:
        if n in opts["near_zero"]:
            scale = float(np.max(np.abs(np.load(prefix + "out_grad_x.npy"))))
            got = float(np.max(np.abs(np.load(prefix + "out_" + n + ".npy"))))
            want = float(np.max(np.abs(np.load(prefix + n + ".npy"))))
            ok = got <= 1e-5 * scale and want <= 1e-5 * scale
            print("%s: %s: max |.| %.3e (reference %.3e), max |grad_x| %.3e" %
                  (n, "PASS" if ok else "FAIL", got, want, scale))
            if not ok:
                sys.exit(1)
            continue
        cmd = ["moe-ref", "compare", prefix + "out_" + n + ".npy",
               prefix + expected.get(n, n) + ".npy", "--tol", tol if n.startswith("grad") else
               {"f32": "1e-4", "bf16": "1e-2", "f16": "2e-3"}[dt]]
        r = subprocess.run(cmd, capture_output=True, text=True)
        line = (r.stdout + r.stderr).strip().splitlines()[-1]
        print("%s: %s" % (n, line))
        if r.returncode != 0:
            sys.exit(1)
    per_expert = ("w1", "w2", "b1", "b2")
    zeros = []
    for n in outputs:
        if not n.startswith("grad"):
            continue
        want = np.load(prefix + n + ".npy")
        got = np.load(prefix + "out_" + n + ".npy").astype(np.float32)
        parts = list(enumerate(want)) if n.split("_")[-1] in per_expert else [(None, want)]
        for e, w in parts:
            if np.any(w != 0):
                continue
            g = got if e is None else got[e]
            where = n if e is None else "%s[%d]" % (n, e)
            if np.any(g != 0):
                print("%s: FAIL: the reference is exactly zero, %d element(s) are not (max |.| %.3e)"
                      % (where, int(np.count_nonzero(g)), float(np.max(np.abs(g)))))
                sys.exit(1)
            zeros.append(where)
    if zeros:
        print("exact zeros: " + " ".join(zeros))
    if opts["sequential"]:
        run("_seq", ["--cpu-parallel=false"])
        for n in outputs:
            with open(prefix + "out_" + n + ".npy", "rb") as a, \
                 open(prefix + "out_seq_" + n + ".npy", "rb") as b:
                if a.read() != b.read():
                    print("%s: FAIL: 1 and all threads differ" % n)
                    sys.exit(1)
        print("sequential: %d outputs byte-identical" % len(outputs))


if __name__ == "__main__":
    main()
