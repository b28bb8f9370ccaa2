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


def layer_options(ref):
    o = {}
    i = 0
    while i < len(ref):
        key = ref[i][2:]
        if i + 1 < len(ref) and not ref[i + 1].startswith("--"):
            o[key] = ref[i + 1]
            i += 2
        else:
            o[key] = True
            i += 1
    return o


def soft_case(prefix, ref):
    """moe-ref soft's data and @f (a moe.soft_layer); returns (inputs,
    outputs, dtype)."""
    fused = "--fused" in ref
    ref = [a for a in ref if a != "--fused"]
    o = layer_options(ref[1:])
    G, M, D, E, S, H = (int(o[k]) for k in ("groups", "tokens", "dim", "experts", "slots",
                                             "hidden"))
    act = o["activation"]
    gated = act in ("swiglu", "geglu")
    dt = o.get("dtype", "f32")
    names = ["phi"] + (["scale"] if "scale-param" in o else []) + ["w1", "w2"]
    if "expert-biases" in o:
        names += ["b1", "b2"]
    cmd = ["moe-ref"] + ref + [
        "--names", ",".join(names), "--params", prefix + "p.safetensors",
        "--input", prefix + "x.npy", "--expected", prefix + "y_ref.npy", "--vjp", prefix]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    h1 = 2 * H if gated else H
    ty = lambda *s: "tensor<" + "x".join(str(d) for d in s) + "x" + dt + ">"
    types = {"phi": ty(D, E, S), "scale": "tensor<f32>", "w1": ty(E, D, h1), "w2": ty(E, H, D),
             "b1": ty(E, h1), "b2": ty(E, D)}
    xt = ty(G, M, D)
    args = ["%x: " + xt] + ["%%%s: %s {moe.param = \"%s\"}" % (n, types[n], n) for n in names]
    parts = ["%x slots(%phi)"]
    if "scale" in names:
        parts.append("scale(%scale)")
    parts.append("experts(%w1, %w2)")
    if "b1" in names:
        parts.append("expert_biases(%b1, %b2)")
    attrs = ["activation = #moe.activation<%s>" % act] + (["normalize"] if "normalize" in o else [])
    op = "moe.fused_soft_experts" if fused else "moe.soft_layer"
    mlir = ("func.func @f(%s) -> %s {\n  %%y = %s %s {%s}\n      : (%s) -> %s\n"
            "  return %%y : %s\n}\n") % (
        ", ".join(args), xt, op, " ".join(parts), ", ".join(attrs),
        ", ".join([xt] + [types[n] for n in names]), xt, xt)
    with open(prefix + "f.mlir", "w") as f:
        f.write(mlir)
    outputs = ["y", "grad_x"] + ["grad_" + n for n in names]
    return [prefix + "x.npy", prefix + "dy.npy"], outputs, dt


def main():
    out, opts, ref = parse(sys.argv)
    os.makedirs(out, exist_ok=True)
    prefix = out + "/"
    if ref and ref[0] == "soft":
        inputs, outputs, dt = soft_case(prefix, ref)
    else:
        inputs, outputs, dt = layer_case(prefix, opts, ref)
    check(prefix, opts, inputs, outputs, dt)


def layer_case(prefix, opts, ref):
    """moe-ref layer's (or block's) data and @f; returns (inputs, outputs,
    dtype)."""
    o = layer_options(ref)
    T, D, E, H = (int(o[k]) for k in ("tokens", "dim", "experts", "hidden"))
    act = o["activation"]
    gated = act in ("swiglu", "geglu")
    dt = o.get("dtype", "f32")
    training = "training" in o
    names = ["wr"]
    if "router-bias" in o:
        names.append("br")
    if "selection-bias" in o:
        names.append("sb")
    names += ["w1", "w2"]
    if "expert-biases" in o:
        names += ["b1", "b2"]
    hs = int(o.get("shared-hidden", 0))
    if hs:
        names += ["s1", "s2"]
        if "shared-gate" in o:
            names.append("sg")
    # moe-ref block --layers N: N residual layers x <- x + layer_l(x), the
    # parameters of layer l named l<l>_NAME.
    layers = int(o.get("layers", 1))
    block = "layers" in o
    base_names = names
    if block:
        names = ["l%d_%s" % (l, n) for l in range(layers) for n in base_names]
    cmd = ["moe-ref", "block" if block else "layer"] + ref + [
        "--names", ",".join(names), "--params", prefix + "p.safetensors",
        "--input", prefix + "x.npy", "--expected", prefix + "y_ref.npy",
        "--vjp", prefix] + (["--vjp-aux-only"] if opts["aux_only"] else [])
    if training:
        cmd += ["--seed-input", prefix + "seed.npy", "--expected-loss", prefix + "loss_ref.npy"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)

    h1 = 2 * H if gated else H
    tt = "?" if opts["dynamic"] else str(T)
    ty = lambda *s: "tensor<" + "x".join(str(d) for d in s) + "x" + dt + ">"
    types = {"wr": ty(D, E), "br": ty(E), "sb": "tensor<%dxf32>" % E,
             "w1": ty(E, D, h1), "w2": ty(E, H, D), "b1": ty(E, h1), "b2": ty(E, D),
             "s1": ty(D, 2 * hs if gated else hs), "s2": ty(hs, D), "sg": ty(D, 1)}
    xt = ty(tt, D)
    args = ["%x: " + xt]
    if training:
        args.append("%seed: tensor<i64>")
    pre = lambda l: "l%d_" % l if block else ""
    args += ["%%%s: %s {moe.param = \"%s\"}" % (pre(l) + n, types[n], pre(l) + n)
             for l in range(layers) for n in base_names]

    def layer_parts(l, x):
        v = lambda n: "%" + pre(l) + n
        parts = ["moe.layer " + x, "router(" + v("wr") + (", " + v("br") if "br" in base_names else "") + ")"]
        if "sb" in base_names:
            parts.append("selection_bias(%s)" % v("sb"))
        parts.append("experts(%s, %s)" % (v("w1"), v("w2")))
        if "b1" in base_names:
            parts.append("expert_biases(%s, %s)" % (v("b1"), v("b2")))
        if hs:
            parts.append("shared(%s, %s)" % (v("s1"), v("s2")))
            if "sg" in base_names:
                parts.append("shared_gate(%s)" % v("sg"))
        if training:
            parts.append("seed(%seed)")
        return parts
    kind = o["routing"]
    k = o.get("k")
    if kind == "dense":
        routing = "#moe.dense"
    elif kind == "top_k":
        params = ["k = " + k]
        if o.get("score") == "sigmoid":
            params.append("score = sigmoid")
        if "no-normalize" in o:
            params.append("normalize = false")
        if "scale" in o:
            params.append("scale = " + o["scale"])
        if "groups" in o:
            params.append("groups = " + o["groups"])
            if "group-k" in o:
                params.append("group_k = " + o["group-k"])
        routing = "#moe.top_k<" + ", ".join(params) + ">"
    else:
        params = ["k = " + k]
        if "adjust" in o:
            params.append("adjust = " + o["adjust"])
        if "lambda" in o:
            params.append("trimmed_lasso = " + o["lambda"])
        routing = "#moe.moesart<" + ", ".join(params) + ">"
    attrs = ["routing = " + routing, "activation = #moe.activation<%s>" % act]
    if training:
        attrs.append("training")
    if "capacity-factor" in o:
        attrs.append("capacity_factor = %s : f64" % o["capacity-factor"])
    # The layer's operand order: x, router, selection_bias, experts, biases,
    # shared, seed.
    layer_types = [xt] + [types[n] for n in base_names] + (["tensor<i64>"] if training else [])
    results = [xt] + (["tensor<f32>"] if training else [])
    res = "(" + ", ".join(results) + ")" if training else results[0]
    body = []
    if block:
        for l in range(layers):
            x = "%x" if l == 0 else "%%x%d" % l
            body.append("  %%h%d = %s {%s}\n      : (%s) -> %s" % (
                l, " ".join(layer_parts(l, x)), ", ".join(attrs), ", ".join(layer_types), res))
            body.append("  %%x%d = arith.addf %s, %%h%d : %s" % (l + 1, x, l, xt))
        ret = "%%x%d" % layers
    else:
        ret = "%y, %aux" if training else "%y"
        body.append("  %s = %s {%s}\n      : (%s) -> %s" % (
            ret, " ".join(layer_parts(0, "%x")), ", ".join(attrs), ", ".join(layer_types), res))
    mlir = "func.func @f(%s) -> %s {\n%s\n  return %s : %s\n}\n" % (
        ", ".join(args), res, "\n".join(body), ret, ", ".join(results))
    with open(prefix + "f.mlir", "w") as f:
        f.write(mlir)

    inputs = [prefix + "x.npy"] + ([prefix + "seed.npy"] if training else [])
    inputs += [prefix + "dy.npy"] + ([prefix + "daux.npy"] if training else [])
    outputs = ["y"] + (["aux"] if training else []) + ["grad_x"] + ["grad_" + n for n in names]
    return inputs, outputs, dt


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
