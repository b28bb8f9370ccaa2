"""Plain PyTorch implementations of moe.layer and moe.soft_layer, written
from docs/spec.md (sections 3.1, 3.1.1, 3.2) with torch ops only: the
independent reference of the moe_mlir.torch tests (test/python) and the
plain-PyTorch twin of the training comparison (compare.py). It shares no
code with moe_mlir. Its gradients are
torch autograd's, with the discrete choices (the chosen experts, MOESART's
sampled set and index j, the K largest g) held fixed as spec section 9 says.

Computations are in f32; for bf16/f16 layers the values are rounded to the
layer's type where section 3 rounds them (h, Soft MoE's slot inputs, y).
The tensors may be on any device (the GPU kit runs it on CUDA)."""
import math

import numpy as np
import torch
import torch.nn.functional as F

MASK = 0xFFFFFFFF


def philox4x32_10(counter, key):
    """Philox4x32-10 (Random123) of four 32-bit counter words and two key
    words."""
    c = list(counter)
    k0, k1 = key
    for r in range(10):
        if r:
            k0, k1 = (k0 + 0x9E3779B9) & MASK, (k1 + 0xBB67AE85) & MASK
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [((p1 >> 32) ^ c[1] ^ k0) & MASK, p1 & MASK,
             ((p0 >> 32) ^ c[3] ^ k1) & MASK, p0 & MASK]
    return c


assert philox4x32_10([0, 0, 0, 0], [0, 0]) == [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]
assert philox4x32_10([MASK] * 4, [MASK, MASK]) == [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd]


def uniform(seed, t, r):
    seed &= (1 << 64) - 1
    out = philox4x32_10([t, r, 0, 0], [seed & MASK, seed >> 32])
    return np.float32((out[0] >> 8) * 2.0**-24)


def act(name, u, hidden):
    if name in ("swiglu", "geglu"):
        a, b = u[..., :hidden], u[..., hidden:]
        return (F.silu(a) if name == "swiglu" else F.gelu(a)) * b
    return {"gelu": F.gelu, "relu": F.relu, "silu": F.silu,
            "gelu_tanh": lambda v: F.gelu(v, approximate="tanh")}[name](u)


def rounded(v, dtype):
    return v if dtype == torch.float32 else v.to(dtype).to(torch.float32)


def expert(x, q, e, cfg, hidden, dtype):
    """f_e(x) of spec section 3 (h rounded to the layer's type)."""
    u = x @ q["experts.w1"][e]
    if "experts.b1" in q:
        u = u + q["experts.b1"][e]
    h = rounded(act(cfg.get("activation", "gelu"), u, hidden), dtype)
    f = h @ q["experts.w2"][e]
    if "experts.b2" in q:
        f = f + q["experts.b2"][e]
    return f


def moesart_sample(g, k, seed):
    """The sampled sets S_t (spec 3.1: k draws without replacement, in f32)
    and the index j of small_random, per token."""
    sets, js = [], []
    gn = g.detach().to(torch.float32).cpu().numpy()
    for t in range(gn.shape[0]):
        p = gn[t].astype(np.float32).copy()
        chosen = []
        for r in range(k):
            u = uniform(seed, t, r)
            cum = np.float32(0)
            pick = None
            for i in range(len(p)):
                cum = np.float32(cum + p[i])
                if u < cum:
                    pick = i
                    break
            if pick is None:
                pick = max(i for i in range(len(p)) if p[i] > 0)
            chosen.append(pick)
            p[pick] = 0
            p = (p / np.float32(p.sum(dtype=np.float32) + np.float32(1e-10))).astype(np.float32)
        members = sorted(chosen)
        js.append(members[int(np.floor(uniform(seed, t, k) * np.float32(k)))])
        sets.append(chosen)
    return sets, js


def layer(x, p, cfg, seed=None):
    """y (and the aux loss in training mode) of moe.layer. x: [T, D]; p:
    {spec name: tensor}; cfg: MoELayer's keyword arguments; seed: the
    training-mode seed (MOESART training when set)."""
    dtype = x.dtype
    x = x.to(torch.float32)
    q = {n: v.to(torch.float32) for n, v in p.items()}
    T, E = x.shape[0], q["router.weight"].shape[1]
    routing, k = cfg.get("routing", "top_k"), cfg.get("k", 2)
    o = x @ q["router.weight"]
    if "router.bias" in q:
        o = o + q["router.bias"]
    g = torch.softmax(o, dim=-1)
    dev = x.device
    weights = torch.zeros(T, E, device=dev)
    aux = torch.zeros((), device=dev)
    if routing == "dense":
        weights = g
    elif routing == "top_k":
        s = torch.sigmoid(o) if cfg.get("score", "softmax") == "sigmoid" else g
        c = s.detach() + (q["router.selection_bias"] if "router.selection_bias" in q else 0)
        groups = cfg.get("groups", 1)
        if groups > 1:
            gk = cfg.get("group_k") or groups
            per = E // groups
            gs = c.reshape(T, groups, per).topk(min(2, per), dim=-1).values.sum(-1)
            keep = gs.topk(gk, dim=-1).indices
            allowed = torch.zeros(T, groups, dtype=torch.bool, device=dev)
            allowed.scatter_(1, keep, True)
            c = c.masked_fill(~allowed.repeat_interleave(per, dim=1), float("-inf"))
        idx = c.topk(k, dim=-1).indices
        w = s.gather(1, idx)
        if cfg.get("normalize", True):
            w = w / (w.sum(-1, keepdim=True) + 1e-20)
        w = w * cfg.get("scale", 1.0)
        weights = weights.scatter(1, idx, w)
    elif routing == "moesart" and seed is None:
        idx = o.detach().topk(k, dim=-1).indices
        adj = o.gather(1, idx) - torch.log(torch.clamp(k * (g.gather(1, idx) + 1e-10), min=1e-10))
        weights = weights.scatter(1, idx, torch.softmax(adj, -1))
    else:
        sets, js = moesart_sample(g, k, seed)
        adjust = cfg.get("adjust", "small_random")
        rows = []
        for t in range(T):
            S = torch.tensor(sets[t], device=dev)
            gS, oS = g[t, S], o[t, S]
            if adjust == "small_random":
                off = torch.log(torch.clamp((k - 1) * (gS + 1e-10), min=1e-10))
                off = torch.where(S == js[t], torch.zeros_like(off), off)
                w = torch.softmax(oS - off, -1)
            elif adjust == "zero":
                w = torch.softmax(oS - torch.log(torch.clamp(k * (gS + 1e-10), min=1e-10)), -1)
            else:
                w = gS / gS.sum()
            rows.append(torch.zeros(E, device=dev).scatter(0, S, w))
        weights = torch.stack(rows)
        lam = cfg.get("trimmed_lasso", 1e-3)
        aux = lam * (1 - g.topk(k, dim=-1).values.sum(-1)).mean()
    H = q["experts.w2"].shape[1]
    y = torch.zeros_like(x)
    capacity = None
    if cfg.get("capacity_factor") is not None:
        # GShard: ceil(cf * T * k / E) rows per expert, in token order; the
        # assignments beyond it contribute nothing (weights not renormalized).
        per_token = E if routing == "dense" else k
        capacity = math.ceil(cfg["capacity_factor"] * T * per_token / E)
    for e in range(E):
        rows = (weights[:, e] != 0).nonzero().flatten() if routing != "dense" else \
            torch.arange(T, device=dev)
        if capacity is not None:
            rows = rows[:capacity]
        if len(rows) == 0:
            continue
        f = expert(x[rows], q, e, cfg, H, dtype)
        y = y.index_add(0, rows, weights[rows, e:e + 1] * f)
    if "shared.w1" in q:
        Hs = q["shared.w2"].shape[0]
        h = rounded(act(cfg.get("activation", "gelu"), x @ q["shared.w1"], Hs), dtype)
        f = h @ q["shared.w2"]
        if "shared.gate" in q:
            f = f * torch.sigmoid(x @ q["shared.gate"])
        y = y + f
    y = rounded(y, dtype)
    return (y, aux) if seed is not None else y


def soft_layer(x, p, cfg):
    """y of moe.soft_layer; x: [G, M, D]."""
    dtype = x.dtype
    x = x.to(torch.float32)
    q = {n: v.to(torch.float32) for n, v in p.items()}
    phi = q["router.phi"]
    D, E, S = phi.shape
    scale = q.get("router.scale", torch.ones((), device=x.device))
    xn, phin = x, phi
    if cfg.get("normalize", False):
        xn = x * torch.rsqrt((x * x).sum(-1, keepdim=True) + 1e-6)
        phin = phi * torch.rsqrt((phi * phi).sum(0, keepdim=True) + 1e-6)
    logits = torch.einsum("gmd,des->gmes", xn, scale * phin)
    G, M = x.shape[:2]
    dispatch = torch.softmax(logits, dim=1)
    combine = torch.softmax(logits.reshape(G, M, E * S), dim=-1).reshape(G, M, E, S)
    slots = rounded(torch.einsum("gmes,gmd->gesd", dispatch, x), dtype)
    H = q["experts.w2"].shape[1]
    outs = []
    for e in range(E):
        outs.append(expert(slots[:, e], q, e, cfg, H, dtype))
    ys = torch.stack(outs, dim=1)  # [G, E, S, D]
    return rounded(torch.einsum("gmes,gesd->gmd", combine, ys), dtype)
