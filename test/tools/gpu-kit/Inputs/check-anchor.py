"""Runs the GPU kit's Triton anchor (tools/gpu-kit/triton_moe.py) on the CPU
through the stand-in of Inputs/triton, against torch: fused_moe against
kit.py's torch_eager, train_step's y and gradients against torch autograd
of torch_eager, and the FP8 block-scaled fused_moe (scales=) against
kit.py's quant_reference. Prints one line per dtype and quantity with the
largest |anchor - torch| / max|torch|; exit status 1 above the bound (f32:
1e-5, bf16: 2e-2). The stand-in has no FP8 type (nor has this torch): the
anchor's FP8 weights are given as their exact E4M3 values in float32, which
its conversion to bf16 keeps.
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

# FP8 E4M3 experts with block scales: two blocks of 128 along GEMM1's K (D =
# 256 in the anchor's K steps of 128), column blocks of 32 (2H = 96: three;
# D = 256: eight), bf16 tokens.
g = torch.Generator().manual_seed(6)
T, D, H, E, k, block = 13, 256, 48, 4, 2, (128, 32)
x = torch.randn(T, D, generator=g).to(torch.bfloat16)
wr = (torch.randn(D, E, generator=g) / D ** 0.5).to(torch.bfloat16)
codes = torch.randint(0, 256, (E * D * 2 * H + E * H * D,), generator=g)
codes = torch.where((codes & 0x7F) == 0x7F, codes - 1, codes).to(torch.uint8)
w1c = codes[:E * D * 2 * H].view(E, D, 2 * H)
w2c = codes[E * D * 2 * H:].view(E, H, D)
s1 = torch.rand(E, 2, 3, generator=g) * 2.0 ** -6 / D ** 0.5
s2 = torch.rand(E, 1, 8, generator=g) * 2.0 ** -6 / H ** 0.5
table = kit.e4m3_values()
got = triton_moe.fused_moe(x, wr, table[w1c.long()], table[w2c.long()], k, scales=(s1, s2),
                           block=block)
want = kit.quant_reference(x, wr, w1c, w2c, s1, s2, k, block)
err = float((got.float() - want.float()).abs().max() / want.float().abs().max())
ok = err <= 2e-2 and got.shape == want.shape and got.dtype == want.dtype
bad += not ok
print(f"fp8 fused_moe y: {err:.1e} {'ok' if ok else 'FAIL'}")
sys.exit(1 if bad else 0)
