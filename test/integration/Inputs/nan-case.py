#!/usr/bin/env python3
"""One case of docs/spec.md §3 "NaN and infinities" against the independent
reference.

  nan-case.py OUT_DIR POISON [--vjp] [--fused] [--sequential]
              [--shard N --launcher "MPIRUN -np N"] -- MOE-REF-OPTIONS

Writes the case twice with moe-ref (moe_case.py): clean, and with
`--poison POISON` (NaN or +-inf in a token's row of x, in one router or
expert weight; moe-ref sets them before it computes anything, and its
selections follow the spec's NaN rule). Runs the compiled function on both
with `moe-run --device=cpu` (@f, or @f_vjp with --vjp; --fused: the layer
through --moe-decompose --moe-fuse; --sequential: single-threaded;
--shard N: the layer made SPMD by --moe-shard-experts and run under the
launcher) and checks, for every output:
  1. the poisoned run against the reference's poisoned result:
     `moe-ref compare --nonfinite-equal` (every NaN and infinity where the
     reference has it, the finite values within the tolerance of
     vjp-case.py), so a run that fails, an expert index that leaves
     [0, E) or a NaN that spreads to other tokens is an error;
  2. every slice the poison does not reach in the reference (a token's row
     of y, grad_x; an expert's slice of an expert parameter's gradient; the
     whole of any other gradient) must be bit-identical between the two
     compiled runs.
Prints one line per output: the slices the poison reached (those the
reference's clean and poisoned results differ in) and how many others were
bit-identical; exits 1 on the first failure.
"""
import os
import shlex
import subprocess
import sys

import numpy as np

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from moe_case import layer_case, soft_case  # noqa: E402


def parse(argv):
    opts = {"vjp": False, "fused": False, "sequential": False, "shard": 0, "launcher": ""}
    out, poison = argv[1], argv[2]
    i = 3
    while argv[i] != "--":
        a = argv[i]
        if a in ("--vjp", "--fused", "--sequential"):
            opts[a[2:]] = True
            i += 1
        elif a == "--shard":
            opts["shard"] = int(argv[i + 1])
            i += 2
        elif a == "--launcher":
            opts["launcher"] = argv[i + 1]
            i += 2
        else:
            sys.exit("nan-case.py: unknown option " + a)
    return out, poison, opts, argv[i + 1:]


def fail(msg):
    print(msg)
    sys.exit(1)


def make(prefix, ref, extra):
    os.makedirs(prefix, exist_ok=True)
    if ref[0] == "soft":
        return soft_case(prefix, ref, extra)
    return layer_case(prefix, ref, extra=extra)


def compile_mlir(prefix, opts):
    """f.mlir, rewritten as the options say; returns the file moe-run takes."""
    mlir = prefix + "f.mlir"
    passes = []
    if opts["fused"]:
        passes += ["--moe-decompose", "--moe-fuse"]
    if opts["shard"]:
        passes.append("--moe-shard-experts=ranks=%d" % opts["shard"])
    if not passes:
        return mlir
    subprocess.run(["moe-opt", mlir] + passes + ["-o", prefix + "g.mlir"], check=True)
    return prefix + "g.mlir"


def run(prefix, opts, inputs, outputs):
    mlir = compile_mlir(prefix, opts)
    cmd = shlex.split(opts["launcher"]) + [
        "moe-run", mlir, "--device=cpu", "--params=" + prefix + "p.safetensors"]
    if opts["vjp"]:
        cmd.append("--entry=f_vjp")
    if opts["sequential"]:
        cmd.append("--cpu-parallel=false")
    cmd += ["--input=" + p for p in inputs]
    cmd += ["--output=" + prefix + "out_" + n + ".npy" for n in outputs]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        fail("%s: moe-run failed (exit %d): %s" % (prefix, r.returncode, r.stderr.strip()))


def slices(name, a, soft):
    """The slices of an output that the poison can reach independently."""
    if name in ("y", "grad_x"):
        return a.reshape(-1, a.shape[-1]) if soft else a
    if name.split("_")[-1] in ("w1", "w2", "b1", "b2"):
        return a
    return a.reshape(1, -1)


def main():
    out, poison, opts, ref = parse(sys.argv)
    soft = ref[0] == "soft"
    clean, bad = out + "/clean/", out + "/bad/"
    inputs, outputs, dt = make(clean, ref, [])
    make(bad, ref, ["--poison", poison])
    if not opts["vjp"]:
        # @f: its inputs are those of @f_vjp before the cotangents.
        inputs = inputs[:1 + ("--training" in ref)]
        outputs = [n for n in outputs if not n.startswith("grad")]
    for prefix in (clean, bad):
        run(prefix, opts, [p.replace(clean, prefix) for p in inputs], outputs)

    for n in outputs:
        grad = n.startswith("grad")
        tol = {"f32": "5e-4" if grad else "1e-4", "bf16": "1e-2", "f16": "2e-3"}[dt]
        want = {"y": "y_ref", "aux": "loss_ref"}.get(n, n)
        r = subprocess.run(["moe-ref", "compare", bad + "out_" + n + ".npy",
                            bad + want + ".npy", "--tol", tol, "--nonfinite-equal"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            fail("%s: against the reference: %s" % (n, (r.stdout + r.stderr).strip()))
        ref_clean = slices(n, np.load(clean + want + ".npy"), soft)
        ref_bad = slices(n, np.load(bad + want + ".npy"), soft)
        got_clean = slices(n, np.load(clean + "out_" + n + ".npy"), soft)
        got_bad = slices(n, np.load(bad + "out_" + n + ".npy"), soft)
        reached = [i for i in range(len(ref_bad)) if ref_clean[i].tobytes() != ref_bad[i].tobytes()]
        others = [i for i in range(len(ref_bad)) if i not in reached]
        differ = [i for i in others if got_clean[i].tobytes() != got_bad[i].tobytes()]
        if differ:
            fail("%s: slices %s changed, which the poison does not reach" % (n, differ))
        nonfinite = [i for i in reached if not np.isfinite(ref_bad[i]).all()]
        print("%s: as the reference; reached %s (non-finite %s); %d others bit-identical" % (
            n, reached if len(ref_bad) > 1 else ("all" if reached else "none"),
            nonfinite if len(ref_bad) > 1 else ("yes" if nonfinite else "no"), len(others)))


if __name__ == "__main__":
    main()
