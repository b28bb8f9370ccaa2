"""Runs the GPU kit's Triton anchor (tools/gpu-kit/triton_moe.py) on the CPU
through the stand-in of Inputs/triton, against torch: fused_moe against
kit.py's torch_eager, train_step's y and gradients against torch autograd
of torch_eager. Prints one line per dtype and quantity with the largest
|anchor - torch| / max|torch|; exit status 1 above the bound (f32: 1e-5,
bf16: 2e-2).
Usage: check-anchor.py KIT_SOURCE_DIR"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the stand-in
sys.path.insert(1, sys.argv[1])
import kit  # noqa: E402
import triton_moe  # noqa: E402

kit.torch = torch
bad = 0
for dtype, bound in ((torch.float32, 1e-5), (torch.bfloat16, 2e-2)):
    g = torch.Generator().manual_seed(5)
    T, D, H, E, k = 13, 16, 24, 4, 2
    x = torch.randn(T, D, generator=g).to(dtype)
    wr = (torch.randn(D, E, generator=g) / D ** 0.5).to(dtype)
    w1 = (torch.randn(E, D, 2 * H, generator=g) / D ** 0.5).to(dtype)
    w2 = (torch.randn(E, H, D, generator=g) / H ** 0.5).to(dtype)
    dy = torch.randn(T, D, generator=g).to(dtype)
    name = "f32" if dtype == torch.float32 else "bf16"

    def rel(a, b):
        return float((a.float() - b.float()).abs().max() / b.float().abs().max())

    checks = [("fused_moe y", triton_moe.fused_moe(x, wr, w1, w2, k), kit.torch_eager(x, wr, w1, w2, k))]
    leaves = [t.clone().requires_grad_() for t in (x, wr, w1, w2)]
    y = kit.torch_eager(*leaves, k)
    y.backward(dy)
    got = triton_moe.train_step(x, wr, w1, w2, dy, k)
    for label, a, b in zip(("y", "dx", "dwr", "dw1", "dw2"), got,
                           [y.detach()] + [leaf.grad for leaf in leaves]):
        checks.append(("train_step " + label, a, b))
    for label, a, b in checks:
        err = rel(a, b)
        ok = err <= bound and a.shape == b.shape and a.dtype == b.dtype
        bad += not ok
        print(f"{name} {label}: {err:.1e} {'ok' if ok else 'FAIL'}")
sys.exit(1 if bad else 0)
