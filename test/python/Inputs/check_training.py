"""Training behaviour of moe_mlir.torch against the plain torch layer.

adam: ten torch.optim.Adam steps on a MoELayer and on plain torch
parameters that start equal, one batch per step, must end with the same
parameters. The tolerance, derived: an element moves by at most lr per
Adam step (|m/(sqrt(v)+e)| <= 1 for gradients of one sign, about 1 in
general), so by at most 10 * lr = 1e-2 in ten steps with lr = 1e-3. A
wrong gradient (a missing or wrong term) turns the steps of the elements
it touches by O(lr) each; the two f32 gradients differ only by rounding
(|g - g'| <= ~1e-6 of the tensor's largest, check_layers.py), which changes
a step by lr * 1e-6 / (|g| / G) relative. The bound is 1% of the largest
possible movement, 10 * lr * 1e-3 = 1e-5, for every element: rounding stays
far below it unless a gradient sits within ~1e-3 G of 0 at every step
while being nonzero (an expert that received no token has a gradient of
exactly 0 on both sides, docs/spec.md section 9, hence the same step). The
steps must also have moved the parameters by more than 100 times the bound,
so that the comparison is not of untouched values.

seed: MOESART in training mode under torch.manual_seed is reproducible
(same y, aux and gradients), and two seeds choose different experts.

nograd: under torch.no_grad() no gradient function is recorded and y is the
same as with autograd."""
import sys

import torch

import plain_moe  # noqa: E402  (tools/train, on PYTHONPATH)
from moe_mlir.torch import MoELayer  # noqa: E402

D, H, E = 16, 24, 4


def adam(cfg):
    torch.manual_seed(7)
    training = cfg.get("routing") == "moesart"
    layer = MoELayer(D, H, E, **cfg)
    layer.train(training)
    params = dict(layer.named_parameters())
    plain = {n.replace("_", ".", 1): p.detach().clone().requires_grad_() for n, p in params.items()}
    start = {n: p.detach().clone() for n, p in params.items()}
    lr = 1e-3
    opt = torch.optim.Adam(layer.parameters(), lr=lr)
    opt_plain = torch.optim.Adam([plain[n.replace("_", ".", 1)] for n in params], lr=lr)
    target = torch.randn(12, D)
    for step in range(10):
        x = torch.randn(12, D)
        out = layer(x)
        y, aux = out if isinstance(out, tuple) else (out, torch.zeros(()))
        loss = ((y - target) ** 2).mean() + aux
        opt.zero_grad()
        loss.backward()
        ref = plain_moe.layer(x, plain, cfg, seed=layer.last_seed if training else None)
        yr, auxr = ref if isinstance(ref, tuple) else (ref, torch.zeros(()))
        loss_r = ((yr - target) ** 2).mean() + auxr
        opt_plain.zero_grad()
        loss_r.backward()
        opt.step()
        opt_plain.step()
    tol, worst, moved = 10 * lr * 1e-3, 0.0, 0.0
    for n, p in params.items():
        q = plain[n.replace("_", ".", 1)].detach()
        worst = max(worst, (p.detach() - q).abs().max().item())
        moved = max(moved, (p.detach() - start[n]).abs().max().item())
    ok = worst <= tol and moved > 100 * tol
    print(f"adam {cfg.get('routing')}: {'OK' if ok else 'FAIL'} (max diff {worst:.1e}, "
          f"bound {tol:.0e}; moved up to {moved:.1e})")
    return ok


def seed():
    layer = MoELayer(D, H, 8, routing="moesart", k=3, activation="relu", trimmed_lasso=0.1)
    layer.train()
    x = torch.randn(20, D, requires_grad=True)
    runs = []
    for s in (5, 5, 6):
        torch.manual_seed(s)
        y, aux = layer(x)
        gx, = torch.autograd.grad(y.sum() + aux, [x])
        runs.append((layer.last_seed, y.detach(), aux.detach(), gx))
    same = all(torch.equal(a, b) for a, b in zip(runs[0][1:], runs[1][1:])) and runs[0][0] == runs[1][0]
    differ = not torch.equal(runs[0][1], runs[2][1])
    print(f"seed: same seed {'identical' if same else 'DIFFERENT'}; another seed "
          f"{'differs' if differ else 'IDENTICAL'}")
    return same and differ


def nograd():
    torch.manual_seed(3)
    layer = MoELayer(D, H, E, routing="top_k", k=2)
    x = torch.randn(5, D)
    with torch.no_grad():
        y0 = layer(x)
    y1 = layer(x)
    ok = y0.grad_fn is None and y1.grad_fn is not None and torch.equal(y0, y1.detach())
    print(f"no_grad: {'OK' if ok else 'FAIL'}")
    return ok


if __name__ == "__main__":
    results = [adam(dict(routing="top_k", k=2, activation="swiglu", router_bias=True)),
               adam(dict(routing="moesart", k=2, activation="relu", expert_bias=True,
                         trimmed_lasso=0.1)),
               seed(), nograd()]
    sys.exit(0 if all(results) else 1)
