"""Every MoELayer / SoftMoELayer configuration named on the command line
against the plain torch layer (tools/train/plain_moe.py): y, and the gradients of x
and of every parameter for a random cotangent. Prints one line per
configuration; exit code 1 at the first one out of tolerance.

Bounds (docs/spec.md section 9; moe-ref compare): f32 y within 1e-4 and
gradients within 5e-4 of the largest |value| of each tensor; bf16/f16
within 2^-6 (y) and 3e-2 (gradients). Where the routing weights are
constant in exact arithmetic (1/k: MOESART at inference and with
adjust=zero), the router's gradient is rounding noise (the w path's terms
of size |dy f| cancel to ~1e-7 per token, ~1e-6 summed over tokens) plus,
in training mode, the aux loss's term: the gradients' scale is taken as at
least 1e-2, so such a gradient is checked within 5e-6 absolute (the aux
loss's gradient itself is checked at full precision by
moesart-small_random, trimmed_lasso = 0.1)."""
import sys

import torch

import plain_moe  # noqa: E402  (tools/train, on PYTHONPATH)
from moe_mlir.torch import MoELayer, SoftMoELayer  # noqa: E402

D, H, E = 16, 24, 4
CONFIGS = {
    "dense": dict(routing="dense", activation="gelu", router_bias=True),
    "top1-relu-bias": dict(routing="top_k", k=1, activation="relu", expert_bias=True,
                           normalize=False),
    "top2-swiglu": dict(routing="top_k", k=2, activation="swiglu"),
    "top2-geglu-gelu_tanh-shared": dict(routing="top_k", k=2, activation="geglu",
                                        shared_hidden=8, shared_gate=True),
    "sigmoid-groups": dict(routing="top_k", k=2, activation="silu", score="sigmoid",
                           normalize=False, scale=2.5, groups=2, group_k=1,
                           selection_bias=True, router_bias=True),
    "gelu_tanh-normalized-scale": dict(routing="top_k", k=3, activation="gelu_tanh",
                                       scale=1.5, shared_hidden=12),
    "moesart-eval": dict(routing="moesart", k=2, activation="relu", expert_bias=True),
    "moesart-small_random": dict(routing="moesart", k=2, activation="relu",
                                 router_bias=True, expert_bias=True, trimmed_lasso=0.1),
    "moesart-zero": dict(routing="moesart", k=3, activation="gelu", adjust="zero"),
    "moesart-large": dict(routing="moesart", k=2, activation="swiglu", adjust="large"),
    "top2-capacity": dict(routing="top_k", k=2, activation="gelu", capacity_factor=0.75),
    "moesart-capacity": dict(routing="moesart", k=2, activation="relu", capacity_factor=0.6),
    "top2-bf16": dict(routing="top_k", k=2, activation="swiglu", dtype=torch.bfloat16),
    "top2-f16": dict(routing="top_k", k=2, activation="gelu", expert_bias=True,
                     dtype=torch.float16),
}
SOFT = {
    "soft": dict(slots_per_expert=2, group_size=6, activation="gelu", expert_bias=True),
    "soft-normalized-scale": dict(slots_per_expert=1, group_size=5, activation="swiglu",
                                  normalize=True, learned_scale=True),
}


def close(name, got, want, tol, floor=0.0):
    got, want = got.to(torch.float64), want.to(torch.float64)
    scale = max(want.abs().max().item(), floor)
    err = (got - want).abs().max().item() / scale
    if not err <= tol:
        print(f"  {name}: max diff {err:.3g} of max|reference| {scale:.3g} > {tol:g}")
        return None
    return err


def check(name):
    torch.manual_seed(sum(map(ord, name)))
    soft = name in SOFT
    cfg = dict(SOFT[name] if soft else CONFIGS[name])
    dtype = cfg.pop("dtype", torch.float32)
    if soft:
        layer = SoftMoELayer(D, H, E, dtype=dtype, **cfg)
        x = torch.randn(3, cfg["group_size"], D).to(dtype).requires_grad_()
    else:
        layer = MoELayer(D, H, E, dtype=dtype, **cfg)
        x = torch.randn(11, D).to(dtype).requires_grad_()
    with torch.no_grad():  # biases and scales away from their zero/one start
        for n, p in layer.named_parameters():
            if n.endswith(("bias", "_b1", "_b2", "scale")):
                p.add_(0.1 * torch.randn_like(p, dtype=torch.float32).to(p.dtype))
        for n, b in layer.named_buffers():
            b.copy_(0.05 * torch.randn_like(b))
    training = name.startswith("moesart") and name != "moesart-eval"
    layer.train(training)
    out = layer(x)
    params = dict(layer.named_parameters())
    spec = {n.replace("_", ".", 1): t for n, t in list(params.items()) + list(layer.named_buffers())}
    xr = x.detach().clone().requires_grad_()
    specr = {n: t.detach().clone().requires_grad_(t.dtype.is_floating_point and n in
                                                   [k.replace("_", ".", 1) for k in params])
             for n, t in spec.items()}
    if soft:
        outr = plain_moe.soft_layer(xr, specr, cfg)
    else:
        outr = plain_moe.layer(xr, specr, cfg, seed=layer.last_seed if training else None)
    y, aux = (out if isinstance(out, tuple) else (out, None))
    yr, auxr = (outr if isinstance(outr, tuple) else (outr, None))
    low = dtype != torch.float32
    tol_y, tol_g = (2.0**-6, 3e-2) if low else (1e-4, 5e-4)
    errs = [close("y", y, yr, tol_y)]
    if training:
        errs.append(close("aux", aux, auxr, 1e-5))
    dy = torch.randn(y.shape).to(dtype)
    outs, outs_r = [y], [yr]
    cot = [dy]
    if training:
        outs.append(aux)
        outs_r.append(auxr)
        cot.append(torch.tensor(3.0))
    names = ["x"] + list(params)
    got = torch.autograd.grad(outs, [x] + list(params.values()), cot)
    want = torch.autograd.grad(outs_r, [xr] + [specr[n.replace("_", ".", 1)] for n in params],
                               [c.to(torch.float32) for c in cot], allow_unused=True)
    for n, g, w in zip(names, got, want):
        if w is None:
            w = torch.zeros_like(g, dtype=torch.float32)
        if g.dtype != (x.dtype if n == "x" else params[n].dtype):
            print(f"  grad {n}: dtype {g.dtype}")
            errs.append(None)
            continue
        errs.append(close("grad " + n, g, w, tol_g, floor=1e-2))
    if any(e is None for e in errs):
        print(f"{name}: FAIL")
        return False
    print(f"{name}: OK ({len(names)} gradients, max rel diff {max(errs):.1e})")
    return True


if __name__ == "__main__":
    names = sys.argv[1:] or list(CONFIGS) + list(SOFT)
    sys.exit(0 if all([check(n) for n in names]) else 1)
