"""The data of one moe.layer or moe.soft_layer case and the function @f
that states it, from the options of `moe-ref layer|block|soft` (shared by
vjp-case.py and nan-case.py).

layer_case(prefix, ref, dynamic, aux_only, extra) and soft_case(prefix,
ref, extra) run moe-ref with ref + extra, writing under prefix the
parameters (p.safetensors), x.npy, the reference y (y_ref.npy), the
cotangents and reference gradients of --vjp (dy.npy, grad_*.npy), and
f.mlir; they return (inputs, outputs, dtype): the .npy inputs of @f_vjp
(those of @f first: x and, in training mode, seed), and the names of its
outputs (y, aux in training mode, grad_x, grad_<param>...).
"""
import subprocess


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


def soft_case(prefix, ref, extra=()):
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
        "--input", prefix + "x.npy", "--expected", prefix + "y_ref.npy", "--vjp", prefix] + list(extra)
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


def layer_case(prefix, ref, dynamic=False, aux_only=False, extra=()):
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
        "--vjp", prefix] + (["--vjp-aux-only"] if aux_only else []) + list(extra)
    if training:
        cmd += ["--seed-input", prefix + "seed.npy", "--expected-loss", prefix + "loss_ref.npy"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)

    h1 = 2 * H if gated else H
    tt = "?" if dynamic else str(T)
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
