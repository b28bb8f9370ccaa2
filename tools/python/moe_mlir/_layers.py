"""MLIR text of one moe.layer / moe.soft_layer from a layer description
(docs/spec.md sections 3.1, 3.1.1, 3.2), with the function's parameters in
order. No torch here."""
import math

ACTIVATIONS = ("gelu", "gelu_tanh", "relu", "silu", "swiglu", "geglu")
GATED = ("swiglu", "geglu")
DTYPES = ("f32", "bf16", "f16")
ROUTINGS = ("dense", "top_k", "moesart")
ADJUSTS = ("small_random", "zero", "large")


def mlir_float(v):
    """A float as an MLIR float literal (which needs a '.')."""
    s = repr(float(v))
    if "." in s or "inf" in s or "nan" in s:
        return s
    mant, e, exp = s.partition("e")
    return mant + ".0" + (e + exp if e else "")


class Param:
    """One parameter of the layer function: its name (the moe.param
    attribute), shape, element type, how to initialise it ("normal" scaled
    by 1/sqrt(fan_in), "zeros", "one"), and whether it is trained."""

    def __init__(self, name, shape, element, init="normal", fan_in=None, trainable=True):
        self.name, self.shape, self.element = name, list(shape), element
        self.init, self.fan_in, self.trainable = init, fan_in, trainable

    def type(self):
        return "tensor<%s>" % "x".join([str(s) for s in self.shape] + [self.element])


def _check_common(activation, dtype, **sizes):
    for n, v in sizes.items():
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"{n} must be a positive int, not {v!r}")
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {', '.join(ACTIVATIONS)}, not {activation!r}")
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}")


def _expert_params(E, D, H, g, T, expert_bias):
    """The experts' W1 [E, D, g*H], W2 [E, H, D] and, with expert_bias,
    b1 [E, g*H], b2 [E, D]."""
    params = [Param("experts.w1", [E, D, g * H], T, fan_in=D),
              Param("experts.w2", [E, H, D], T, fan_in=H)]
    if expert_bias:
        params += [Param("experts.b1", [E, g * H], T, init="zeros"),
                   Param("experts.b2", [E, D], T, init="zeros")]
    return params


def _param_args(params):
    """The function arguments of the parameters (`%pI: type {moe.param}`)
    and {parameter name: its SSA name}."""
    args, ssa = [], {}
    for i, p in enumerate(params):
        ssa[p.name] = "%%p%d" % i
        args.append('%s: %s {moe.param = "%s"}' % (ssa[p.name], p.type(), p.name))
    return args, ssa


def _expert_clauses(ssa, expert_bias):
    out = ["experts(%s, %s)" % (ssa["experts.w1"], ssa["experts.w2"])]
    if expert_bias:
        out.append("expert_biases(%s, %s)" % (ssa["experts.b1"], ssa["experts.b2"]))
    return out


def _routing_attr(routing, k, num_experts, score, normalize, scale, groups, group_k,
                  adjust, trimmed_lasso):
    if routing not in ROUTINGS:
        raise ValueError(f"routing must be one of {', '.join(ROUTINGS)}, not {routing!r}")
    if routing == "dense":
        if k is not None:
            raise ValueError("routing='dense' runs every expert: k is for top_k and moesart")
        return "#moe.dense"
    if k is None or not 1 <= k <= num_experts:
        raise ValueError(f"routing={routing!r} needs 1 <= k <= num_experts ({num_experts}), not k={k}")
    if routing == "moesart":
        if adjust not in ADJUSTS:
            raise ValueError(f"adjust must be one of {', '.join(ADJUSTS)}, not {adjust!r}")
        if k < 2:
            raise ValueError("routing='moesart' samples k >= 2 experts (docs/spec.md 3.1)")
        if trimmed_lasso < 0:
            raise ValueError("trimmed_lasso must be >= 0")
        return "#moe.moesart<k = %d, adjust = %s, trimmed_lasso = %s>" % (
            k, adjust, mlir_float(trimmed_lasso))
    parts = ["k = %d" % k]
    if score not in ("softmax", "sigmoid"):
        raise ValueError(f"score must be 'softmax' or 'sigmoid', not {score!r}")
    if score != "softmax":
        parts.append("score = " + score)
    if not normalize:
        parts.append("normalize = false")
    if scale != 1.0:
        parts.append("scale = " + mlir_float(scale))
    if groups != 1:
        parts.append("groups = %d" % groups)
        parts.append("group_k = %d" % (groups if group_k is None else group_k))
    return "#moe.top_k<%s>" % ", ".join(parts)


def layer_function(name, *, d_model, d_hidden, num_experts, routing="top_k", k=None,
                   activation="gelu", dtype="f32", router_bias=False, expert_bias=False,
                   selection_bias=False, shared_hidden=0, shared_gate=False, score="softmax",
                   normalize=True, scale=1.0, groups=1, group_k=None, adjust="small_random",
                   trimmed_lasso=1e-3, capacity_factor=None, training=False):
    """(MLIR text of `func.func @name`, [Param]) for a moe.layer. The
    function's arguments: x (tensor<?xDxT>), then seed (tensor<i64>, in
    training mode), then the Params in order; its results: y, then the aux
    loss (tensor<f32>) in training mode."""
    D, H, E = d_model, d_hidden, num_experts
    _check_common(activation, dtype, d_model=D, d_hidden=H, num_experts=E)
    if selection_bias and routing != "top_k":
        raise ValueError("selection_bias is for routing='top_k' (docs/spec.md 3.1.1)")
    if shared_gate and not shared_hidden:
        raise ValueError("shared_gate needs a shared expert (shared_hidden > 0)")
    if capacity_factor is not None and not capacity_factor > 0:
        raise ValueError("capacity_factor must be > 0")
    attr = _routing_attr(routing, k, E, score, normalize, scale, groups, group_k,
                         adjust, trimmed_lasso)
    g = 2 if activation in GATED else 1
    T = dtype
    params = [Param("router.weight", [D, E], T, fan_in=D)]
    if router_bias:
        params.append(Param("router.bias", [E], T, init="zeros"))
    if selection_bias:
        params.append(Param("router.selection_bias", [E], "f32", init="zeros", trainable=False))
    params += _expert_params(E, D, H, g, T, expert_bias)
    if shared_hidden:
        params += [Param("shared.w1", [D, g * shared_hidden], T, fan_in=D),
                   Param("shared.w2", [shared_hidden, D], T, fan_in=shared_hidden)]
        if shared_gate:
            params.append(Param("shared.gate", [D, 1], T, fan_in=D))

    xt = "tensor<?x%dx%s>" % (D, T)
    param_args, ssa = _param_args(params)
    args = ["%x: " + xt] + (["%seed: tensor<i64>"] if training else []) + param_args
    ops = ["router(%s%s)" % (ssa["router.weight"],
                             ", " + ssa["router.bias"] if router_bias else "")]
    if selection_bias:
        ops.append("selection_bias(%s)" % ssa["router.selection_bias"])
    ops += _expert_clauses(ssa, expert_bias)
    if shared_hidden:
        ops.append("shared(%s, %s)" % (ssa["shared.w1"], ssa["shared.w2"]))
        if shared_gate:
            ops.append("shared_gate(%s)" % ssa["shared.gate"])
    if training:
        ops.append("seed(%seed)")
    attrs = ["routing = " + attr, "activation = #moe.activation<%s>" % activation]
    if capacity_factor is not None:
        attrs.append("capacity_factor = %s : f64" % mlir_float(capacity_factor))
    if training:
        attrs.append("training")
    operand_types = [xt] + [p.type() for p in params] + (["tensor<i64>"] if training else [])
    results = [xt] + (["tensor<f32>"] if training else [])
    res_text = results[0] if len(results) == 1 else "(%s)" % ", ".join(results)
    names = "%y, %aux" if training else "%y"
    text = "\n".join([
        "func.func @%s(%s) -> %s {" % (name, ",\n    ".join(args), res_text),
        "  %s = moe.layer %%x %s" % (names, " ".join(ops)),
        "      {%s}" % ", ".join(attrs),
        "      : (%s) -> %s" % (", ".join(operand_types), res_text),
        "  return %s : %s" % (names, ", ".join(results)),
        "}", ""])
    return text, params


def soft_layer_function(name, *, d_model, d_hidden, num_experts, slots_per_expert=1,
                        group_size, activation="gelu", dtype="f32", normalize=False,
                        learned_scale=False, expert_bias=False):
    """(MLIR text, [Param]) for a moe.soft_layer over x: tensor<?xMxDxT>
    (a dynamic number of groups of M = group_size tokens)."""
    D, H, E, S, M = d_model, d_hidden, num_experts, slots_per_expert, group_size
    _check_common(activation, dtype, d_model=D, d_hidden=H, num_experts=E,
                  slots_per_expert=S, group_size=M)
    g = 2 if activation in GATED else 1
    T = dtype
    params = [Param("router.phi", [D, E, S], T, fan_in=D)]
    if learned_scale:
        params.append(Param("router.scale", [], T, init="one"))
    params += _expert_params(E, D, H, g, T, expert_bias)
    xt = "tensor<?x%dx%dx%s>" % (M, D, T)
    param_args, ssa = _param_args(params)
    args = ["%x: " + xt] + param_args
    ops = ["slots(%s)" % ssa["router.phi"]]
    if learned_scale:
        ops.append("scale(%s)" % ssa["router.scale"])
    ops += _expert_clauses(ssa, expert_bias)
    attrs = ["activation = #moe.activation<%s>" % activation]
    if normalize:
        attrs.append("normalize")
    types = [xt] + [p.type() for p in params]
    text = "\n".join([
        "func.func @%s(%s) -> %s {" % (name, ",\n    ".join(args), xt),
        "  %%y = moe.soft_layer %%x %s" % " ".join(ops),
        "      {%s}" % ", ".join(attrs),
        "      : (%s) -> %s" % (", ".join(types), xt),
        "  return %%y : %s" % xt,
        "}", ""])
    return text, params


def signature(params, d_model, dtype):
    """The function type of layer_function's @f (inference form), as
    moe_f_signature() prints it."""
    xt = "tensor<?x%dx%s>" % (d_model, dtype)
    return "(%s) -> %s" % (", ".join([xt] + [p.type() for p in params]), xt)


def init_scale(p):
    return 1.0 / math.sqrt(p.fan_in) if p.fan_in else 1.0
