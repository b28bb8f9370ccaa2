"""MoELayer.from_checkpoint against moe-run on the same checkpoint (which
binds the parameters with its own C++ code): y (moe-run --entry=layer_<i>)
and every gradient (--entry=layer_<i>_vjp) must be bit-identical (the gradients are
deterministic whatever the thread count, docs/spec.md section 9).
Usage: check_checkpoint.py CKPT LAYER OUTDIR"""
import os
import subprocess
import sys

import numpy as np
import torch

import moe_mlir
from moe_mlir.torch import MoELayer

ckpt, index, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
layer = MoELayer.from_checkpoint(ckpt, index)
params = dict(layer.named_parameters())
print(f"layer_{index}: d_model {layer.d_model}, {layer.dtype}, parameters "
      f"{', '.join(f'{n} {list(p.shape)}' for n, p in params.items())}; buffers "
      f"{', '.join(n for n, _ in layer.named_buffers()) or 'none'}")
torch.manual_seed(index)
x = torch.randn(13, layer.d_model).to(layer.dtype).requires_grad_()
y = layer(x)
dy = torch.randn(y.shape).to(y.dtype)
grads = torch.autograd.grad(y, [x] + list(params.values()), dy)
np.save(os.path.join(out, "x.npy"), x.detach().float().numpy())
np.save(os.path.join(out, "dy.npy"), dy.float().numpy())
subprocess.run(["moe-import", ckpt, "-o", os.path.join(out, "l.mlir"), "--layers=%d" % index], check=True)
# @layer_<i>_vjp's results: y, then the gradient of every float argument in
# argument order (the selection bias's too: zeros, spec section 9).
names = ["y", "dx"] + ["d" + p.name for p in layer._params]
outputs = [os.path.join(out, n + ".npy") for n in names]
run = [moe_mlir.tool("moe-run"), os.path.join(out, "l.mlir"), "--device=cpu", "--params=" + ckpt,
       "--input=" + os.path.join(out, "x.npy")]
quiet = dict(check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
# y from @layer_<i>, the gradients from @layer_<i>_vjp (whose own y, a
# recomputation, is not compared: the backward's forward need not round as
# the forward does, only route as it does).
subprocess.run(run + ["--entry=layer_%d" % index, "--output=" + outputs[0]], **quiet)
subprocess.run(run + ["--entry=layer_%d_vjp" % index, "--input=" + os.path.join(out, "dy.npy"),
                      "--output=" + os.path.join(out, "y_vjp.npy")]
               + ["--output=" + o for o in outputs[1:]], **quiet)
ok = True
ours = dict(zip(["y", "dx"] + ["d" + n for n in params], [y] + list(grads)))
for name, path in zip(names, outputs):
    want = np.load(path)
    if name not in ours:  # a buffer: its gradient is zero
        zero = not want.any()
        ok &= zero
        print(f"  {name} {list(want.shape)}: {'zero' if zero else 'NOT ZERO'} (a buffer)")
        continue
    got = ours[name]
    same = np.array_equal(got.detach().float().numpy(), want)
    ok &= same
    print(f"  {name} {list(want.shape)}: {'bit-identical' if same else 'DIFFERS'}")
sys.exit(0 if ok else 1)
