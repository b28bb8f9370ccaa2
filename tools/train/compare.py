#!/usr/bin/env python3
"""Training comparison of the routers (issue 24; README "Training
comparison"): dense softmax, top-k, MOESART (small_random with the trimmed
lasso) and Soft MoE layers of equal active compute, trained with Adam on a
synthetic task with a known answer, several seeds each, every layer compiled
by moe-mlir (moe_mlir.torch) and, side by side, the same model in plain
PyTorch (plain_moe.py) from the same initial weights on the same batches.

The task (generated from --task-seed): a mixture of regressions. x ~ N(0, I)
in R^D; a teacher router picks one of C regimes, c(x) = argmax_c x.u_c, and
regime c maps x to y = A_c gelu(B_c x) / sqrt(Ht) (D -> Ht -> D, random A_c,
B_c); the training targets carry Gaussian noise of variance sigma^2, the
held-out targets none. The known answer: the best possible held-out MSE is
0, and predicting the mean (0) scores var(y), which the table divides by
(normalized MSE: 1 = no better than 0, 0 = the teacher). The regimes are
disjoint regions of x, so a router that learns them wins.

Equal active compute: every layer runs two expert FFNs of width H per token
(dense softmax with E = 2 experts; top-2 and MOESART-2 of E = 8; Soft MoE
with E = 8 experts of S = 4 slots over groups of M = 16 tokens: E*S/M = 2
expert evaluations per token).

Prints a Markdown table (final train loss over the last 10% of the steps and
held-out loss, mean and spread over the seeds; ms per step of moe-mlir and
of the plain model; the largest gap between the two models' training losses
over the run, relative) and writes a PNG of the loss curves.

Usage: compare.py [--steps N] [--seeds N] [--png PATH] [--quick]
(PYTHONPATH=build/python:tools/train; MPLBACKEND is set to Agg)."""
import argparse
import math
import os
import statistics
import time

os.environ.setdefault("MPLBACKEND", "Agg")

import torch  # noqa: E402

import plain_moe  # noqa: E402
from moe_mlir.torch import MoELayer, SoftMoELayer  # noqa: E402

D, H, HT, C = 16, 32, 16, 4
GROUP = 16


def make_task(seed, n_train, n_test, noise):
    g = torch.Generator().manual_seed(seed)
    u = torch.randn(D, C, generator=g)
    b = torch.randn(C, HT, D, generator=g) / math.sqrt(D)
    a = torch.randn(C, D, HT, generator=g)

    def teacher(x):
        c = (x @ u).argmax(-1)
        h = torch.nn.functional.gelu(torch.einsum("chd,td->tch", b, x))
        y = torch.einsum("cdh,tch->tcd", a, h) / math.sqrt(HT)
        return y[torch.arange(len(x)), c]

    xtr = torch.randn(n_train, D, generator=g)
    xte = torch.randn(n_test, D, generator=g)
    ytr = teacher(xtr)
    ytr = ytr + noise * torch.randn(ytr.shape, generator=g)
    yte = teacher(xte)
    return xtr, ytr, xte, yte


ROUTERS = {
    "dense softmax (E=2)": ("layer", dict(num_experts=2, routing="dense")),
    "top-2 of 8": ("layer", dict(num_experts=8, routing="top_k", k=2)),
    "MOESART 2 of 8 (small_random, lasso 1e-2)": (
        "layer", dict(num_experts=8, routing="moesart", k=2, trimmed_lasso=1e-2)),
    "Soft MoE (8 experts x 4 slots, groups of 16)": (
        "soft", dict(num_experts=8, slots_per_expert=4, group_size=GROUP)),
}


class Model:
    """One router's layer, compiled, and its plain twin."""

    def __init__(self, kind, cfg, seed, lr):
        torch.manual_seed(seed)
        self.kind, self.cfg = kind, dict(cfg, activation="gelu")
        if kind == "soft":
            self.layer = SoftMoELayer(D, H, **self.cfg)
        else:
            self.layer = MoELayer(D, H, **self.cfg)
        self.params = dict(self.layer.named_parameters())
        self.plain = {n.replace("_", ".", 1): p.detach().clone().requires_grad_()
                      for n, p in self.params.items()}
        self.opt = torch.optim.Adam(self.layer.parameters(), lr=lr)
        self.opt_plain = torch.optim.Adam(list(self.plain.values()), lr=lr)
        self.moesart = cfg.get("routing") == "moesart"

    def loss(self, x, y, plain=False, training=True):
        self.layer.train(training)
        if self.kind == "soft":
            xs, ys = x.reshape(-1, GROUP, D), y.reshape(-1, GROUP, D)
            out = plain_moe.soft_layer(xs, self.plain, self.cfg) if plain else self.layer(xs)
            return ((out - ys) ** 2).mean(), torch.zeros(())
        if plain:
            seed = self.layer.last_seed if (self.moesart and training) else None
            out = plain_moe.layer(x, self.plain, self.cfg, seed=seed)
        else:
            out = self.layer(x)
        yhat, aux = out if isinstance(out, tuple) else (out, torch.zeros(()))
        return ((yhat - y) ** 2).mean(), aux

    def step(self, x, y):
        t0 = time.perf_counter()
        mse, aux = self.loss(x, y)
        self.opt.zero_grad()
        (mse + aux).backward()
        self.opt.step()
        t1 = time.perf_counter()
        mse_p, aux_p = self.loss(x, y, plain=True)
        self.opt_plain.zero_grad()
        (mse_p + aux_p).backward()
        self.opt_plain.step()
        t2 = time.perf_counter()
        return mse.item(), mse_p.item(), t1 - t0, t2 - t1

    @torch.no_grad()
    def held_out(self, x, y):
        return self.loss(x, y, training=False)[0].item()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--task-seed", type=int, default=2026)
    p.add_argument("--png", default=None, help="write the loss curves here")
    p.add_argument("--quick", action="store_true", help="40 steps, 1 seed (a smoke test)")
    a = p.parse_args()
    if a.quick:
        a.steps, a.seeds = 40, 1
    if a.batch % GROUP:
        p.error(f"--batch must be a multiple of {GROUP} (Soft MoE's group)")
    noise = 0.05
    xtr, ytr, xte, yte = make_task(a.task_seed, 8192, 2048, noise)
    var = yte.var().item()
    every = max(1, a.steps // 30)
    rows, curves = [], {}
    t_start = time.time()
    for name, (kind, cfg) in ROUTERS.items():
        finals, helds, ours_t, plain_t, gaps = [], [], [], [], []
        curve = []
        for s in range(a.seeds):
            m = Model(kind, cfg, seed=1000 + s, lr=a.lr)
            order = torch.Generator().manual_seed(s)
            losses, points = [], []
            for step in range(a.steps):
                idx = torch.randint(0, len(xtr), (a.batch,), generator=order)
                ours, plain, t_ours, t_plain = m.step(xtr[idx], ytr[idx])
                losses.append(ours)
                if step >= 2:  # the first calls compile or warm up
                    ours_t.append(t_ours)
                    plain_t.append(t_plain)
                gaps.append(abs(ours - plain) / max(plain, 1e-12))
                if step % every == every - 1 or step == a.steps - 1:
                    points.append((step + 1, m.held_out(xte, yte) / var))
            tail = losses[-max(1, a.steps // 10):]
            finals.append(statistics.mean(tail) / var)
            helds.append(points[-1][1])
            curve.append((losses, points))
        curves[name] = curve
        n_params = sum(p.numel() for p in m.params.values())
        rows.append((name, n_params, finals, helds, statistics.median(ours_t) * 1e3,
                     statistics.median(plain_t) * 1e3, max(gaps)))
        print(f"trained {name} ({a.seeds} seeds x {a.steps} steps) at {time.time() - t_start:.0f} s",
              flush=True)

    def spread(v):
        return f"{statistics.mean(v):.4f} ± {statistics.pstdev(v):.4f}" if len(v) > 1 else f"{v[0]:.4f}"

    print()
    print(f"Task: mixture of {C} regressions, D = {D}, noise variance {noise ** 2:g} "
          f"(normalized: {noise ** 2 / var:.4f}), {a.steps} Adam steps of {a.batch} tokens, "
          f"lr {a.lr:g}, {a.seeds} seed(s); losses are MSE / var(y) (0 = the teacher).")
    print()
    print("| router | parameters | train loss | held-out loss | ms/step moe-mlir | "
          "ms/step plain torch | max train-loss gap |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, n_params, finals, helds, t_ours, t_plain, gap in rows:
        print(f"| {name} | {n_params} | {spread(finals)} | {spread(helds)} | {t_ours:.2f} | "
              f"{t_plain:.2f} | {gap:.1e} |")
    print()
    print(f"threads: moe-mlir 1 (the AOT CPU library runs on the calling thread), "
          f"plain torch {torch.get_num_threads()}; total {time.time() - t_start:.0f} s")
    if a.png:
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        for name, curve in curves.items():
            n = len(curve[0][0])
            window = max(1, n // 50)
            mean_train = [statistics.mean(c[0][i] for c in curve) / var for i in range(n)]
            smooth = [statistics.mean(mean_train[max(0, i - window + 1):i + 1]) for i in range(n)]
            line, = axes[0].plot(range(1, n + 1), smooth, label=name)
            steps = [pt[0] for pt in curve[0][1]]
            vals = [[c[1][i][1] for c in curve] for i in range(len(steps))]
            axes[1].plot(steps, [statistics.mean(v) for v in vals], color=line.get_color(), label=name)
            axes[1].fill_between(steps, [min(v) for v in vals], [max(v) for v in vals],
                                 color=line.get_color(), alpha=0.2)
        for ax, title in zip(axes, ["training loss (moving average)", "held-out loss (min-max over seeds)"]):
            ax.set_yscale("log")
            ax.set_xlabel("Adam step")
            ax.set_ylabel("MSE / var(y)")
            ax.set_title(title)
            ax.grid(True, alpha=0.3)
        axes[1].legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(a.png, dpi=90)
        print(f"wrote {a.png}")


if __name__ == "__main__":
    main()
