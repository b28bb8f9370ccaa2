"""Bad calls of compiled functions and layers: each is one exception whose
message names the function, the argument and what is wrong. Prints
`TYPE: message` per case (FileCheck'd by errors.test)."""
import torch

import moe_mlir
from moe_mlir.torch import MoELayer

LAYER = """func.func @f(%x: tensor<?x16xf32>, %w: tensor<16x4xf32> {moe.param = "router.weight"},
    %w1: tensor<4x16x8xf32> {moe.param = "experts.w1"}, %w2: tensor<4x8x16xf32> {moe.param = "experts.w2"})
    -> tensor<?x16xf32> {
  %y = moe.layer %x router(%w) experts(%w1, %w2) {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>}
      : (tensor<?x16xf32>, tensor<16x4xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}
"""


def case(label, fn):
    try:
        fn()
        print(f"{label}: no error")
    except Exception as e:  # noqa: BLE001: the type is part of the output
        print(f"{label}: {type(e).__name__}: {e}")


lib = moe_mlir.compile(LAYER, vjp=True)
f = lib["f"]
x, w, w1, w2 = torch.randn(5, 16), torch.randn(16, 4), torch.randn(4, 16, 8), torch.randn(4, 8, 16)
print("ok:", list(f(x, w, w1, w2).shape), f.signature)
print("functions:", sorted(lib.functions))
case("dtype", lambda: f(x.double(), w, w1, w2))
case("device", lambda: f(x.to("meta"), w, w1, w2))
case("shape", lambda: f(x, w, w1[:, :15], w2))
case("rank", lambda: f(x[0], w, w1, w2))
case("contiguous", lambda: f(torch.randn(16, 5).t(), w, w1, w2))
case("count", lambda: f(x, w, w1))
case("not a tensor", lambda: f(x, w, w1, w2.numpy()))
case("other signature", lambda: f(torch.randn(5, 32), torch.randn(32, 4), torch.randn(4, 32, 8),
                                  torch.randn(4, 8, 32)))
case("no function", lambda: lib["g"])
case("compile", lambda: moe_mlir.compile("func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
                                         "  return %y : tensor<4xf32>\n}\n"))
case("target", lambda: moe_mlir.compile(LAYER, target="tpu"))
layer = MoELayer(16, 8, 4, routing="top_k", k=2)
case("layer width", lambda: layer(torch.randn(3, 15)))
case("layer dtype", lambda: layer(torch.randn(3, 16, dtype=torch.float64)))
layer.experts_w1.data = layer.experts_w1.data.to(torch.float16)
case("layer parameter", lambda: layer(torch.randn(3, 16)))
case("layer routing", lambda: MoELayer(16, 8, 4, routing="topk"))
case("layer k", lambda: MoELayer(16, 8, 4, routing="top_k", k=5))
case("layer dtype option", lambda: MoELayer(16, 8, 4, dtype=torch.float64))
# A prepared library (moe_mlir.load) for another layer: the layer says so.
other = moe_mlir.compile(MoELayer(16, 8, 4, routing="top_k", k=2, activation="relu").text(), vjp=True)
case("layer library", lambda: MoELayer(16, 8, 4, routing="top_k", k=2, activation="gelu",
                                       library=moe_mlir.load(other.path)))
case("layer library target", lambda: MoELayer(16, 8, 4, routing="top_k", k=2, activation="relu",
                                              library=moe_mlir.load(other.path, target="cuda")))
no_vjp = moe_mlir.compile(MoELayer(16, 8, 4, routing="top_k", k=2, activation="relu").text())
case("layer library without vjp", lambda: MoELayer(16, 8, 4, routing="top_k", k=2, activation="relu",
                                                   library=moe_mlir.load(no_vjp.path)))
case("load missing", lambda: moe_mlir.load("/nonexistent/lib.so"))
case("load not a library", lambda: moe_mlir.load(__file__))
