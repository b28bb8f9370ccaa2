// Dense MoE layers written the way a frontend emits them (einsum form), and
// the moe.layer each one is equivalent to. Same signatures in each pair, so
// `moe-run --fill-random` binds the same values. T=16 D=32 E=4 H=64.

#tde   = affine_map<(t, e, d) -> (t, d)>
#de    = affine_map<(t, e, d) -> (d, e)>
#te3   = affine_map<(t, e, d) -> (t, e)>
#id2   = affine_map<(a, b) -> (a, b)>
#col   = affine_map<(a, b) -> (b)>
#x1    = affine_map<(e, t, h, d) -> (t, d)>
#w1    = affine_map<(e, t, h, d) -> (e, d, h)>
#o1    = affine_map<(e, t, h, d) -> (e, t, h)>
#id3   = affine_map<(a, b, c) -> (a, b, c)>
#b3    = affine_map<(a, b, c) -> (a, c)>
#a2    = affine_map<(e, t, d, h) -> (e, t, h)>
#w2    = affine_map<(e, t, d, h) -> (e, h, d)>
#o2    = affine_map<(e, t, d, h) -> (e, t, d)>
#cg    = affine_map<(t, d, e) -> (t, e)>
#cy    = affine_map<(t, d, e) -> (e, t, d)>
#co    = affine_map<(t, d, e) -> (t, d)>

// linalg.generic everywhere, router and expert biases, gelu (erf).
func.func @generic(%x: tensor<16x32xf32>,
                   %wr: tensor<32x4xf32> {moe.param = "router.weight"},
                   %br: tensor<4xf32> {moe.param = "router.bias"},
                   %w1: tensor<4x32x64xf32> {moe.param = "experts.w1"},
                   %w2: tensor<4x64x32xf32> {moe.param = "experts.w2"},
                   %b1: tensor<4x64xf32> {moe.param = "experts.b1"},
                   %b2: tensor<4x32xf32> {moe.param = "experts.b2"}) -> tensor<16x32xf32> {
  %zero = arith.constant 0.0 : f32
  %e_te = tensor.empty() : tensor<16x4xf32>
  %z_te = linalg.fill ins(%zero : f32) outs(%e_te : tensor<16x4xf32>) -> tensor<16x4xf32>
  %mm = linalg.generic {indexing_maps = [#tde, #de, #te3],
                        iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %wr : tensor<16x32xf32>, tensor<32x4xf32>) outs(%z_te : tensor<16x4xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<16x4xf32>
  %logits = linalg.generic {indexing_maps = [#id2, #col, #id2],
                            iterator_types = ["parallel", "parallel"]}
      ins(%mm, %br : tensor<16x4xf32>, tensor<4xf32>) outs(%e_te : tensor<16x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<16x4xf32>
  %g = linalg.softmax dimension(1) ins(%logits : tensor<16x4xf32>)
         outs(%e_te : tensor<16x4xf32>) -> tensor<16x4xf32>
  %e_eth = tensor.empty() : tensor<4x16x64xf32>
  %z_eth = linalg.fill ins(%zero : f32) outs(%e_eth : tensor<4x16x64xf32>) -> tensor<4x16x64xf32>
  %h = linalg.generic {indexing_maps = [#x1, #w1, #o1],
                       iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %w1 : tensor<16x32xf32>, tensor<4x32x64xf32>) outs(%z_eth : tensor<4x16x64xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<4x16x64xf32>
  %act = linalg.generic {indexing_maps = [#id3, #b3, #id3],
                         iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%h, %b1 : tensor<4x16x64xf32>, tensor<4x64xf32>) outs(%e_eth : tensor<4x16x64xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %u = arith.addf %a, %b : f32
    %half = arith.constant 0.5 : f32
    %one = arith.constant 1.0 : f32
    %rsqrt2 = arith.constant 0.70710678 : f32
    %s = arith.mulf %u, %rsqrt2 : f32
    %erf = math.erf %s : f32
    %onep = arith.addf %erf, %one : f32
    %hu = arith.mulf %u, %half : f32
    %r = arith.mulf %hu, %onep : f32
    linalg.yield %r : f32
  } -> tensor<4x16x64xf32>
  %e_etd = tensor.empty() : tensor<4x16x32xf32>
  %z_etd = linalg.fill ins(%zero : f32) outs(%e_etd : tensor<4x16x32xf32>) -> tensor<4x16x32xf32>
  %y = linalg.generic {indexing_maps = [#a2, #w2, #o2],
                       iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%act, %w2 : tensor<4x16x64xf32>, tensor<4x64x32xf32>) outs(%z_etd : tensor<4x16x32xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %p, %acc : f32
    linalg.yield %s : f32
  } -> tensor<4x16x32xf32>
  %yb = linalg.generic {indexing_maps = [#id3, #b3, #id3],
                        iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%y, %b2 : tensor<4x16x32xf32>, tensor<4x32xf32>) outs(%e_etd : tensor<4x16x32xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<4x16x32xf32>
  %e_td = tensor.empty() : tensor<16x32xf32>
  %z_td = linalg.fill ins(%zero : f32) outs(%e_td : tensor<16x32xf32>) -> tensor<16x32xf32>
  %out = linalg.generic {indexing_maps = [#cg, #cy, #co],
                         iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%g, %yb : tensor<16x4xf32>, tensor<4x16x32xf32>) outs(%z_td : tensor<16x32xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<16x32xf32>
  return %out : tensor<16x32xf32>
}

func.func @generic_layer(%x: tensor<16x32xf32>,
                   %wr: tensor<32x4xf32> {moe.param = "router.weight"},
                   %br: tensor<4xf32> {moe.param = "router.bias"},
                   %w1: tensor<4x32x64xf32> {moe.param = "experts.w1"},
                   %w2: tensor<4x64x32xf32> {moe.param = "experts.w2"},
                   %b1: tensor<4x64xf32> {moe.param = "experts.b1"},
                   %b2: tensor<4x32xf32> {moe.param = "experts.b2"}) -> tensor<16x32xf32> {
  %y = moe.layer %x router(%wr, %br) experts(%w1, %w2) expert_biases(%b1, %b2)
         {routing = #moe.dense, activation = #moe.activation<gelu>}
         : (tensor<16x32xf32>, tensor<32x4xf32>, tensor<4xf32>, tensor<4x32x64xf32>,
            tensor<4x64x32xf32>, tensor<4x64xf32>, tensor<4x32xf32>) -> tensor<16x32xf32>
  return %y : tensor<16x32xf32>
}

// Named ops: linalg.matmul router, batch_matmul over a broadcast of x, silu
// as named elementwise ops, and the weighted sum as a linalg.reduce over the
// experts of (broadcast, transposed) gate times expert outputs.
func.func @named(%x: tensor<16x32xf32>,
                 %wr: tensor<32x4xf32> {moe.param = "router.weight"},
                 %w1: tensor<4x32x64xf32> {moe.param = "experts.w1"},
                 %w2: tensor<4x64x32xf32> {moe.param = "experts.w2"}) -> tensor<16x32xf32> {
  %zero = arith.constant 0.0 : f32
  %onec = arith.constant 1.0 : f32
  %e_te = tensor.empty() : tensor<16x4xf32>
  %z_te = linalg.fill ins(%zero : f32) outs(%e_te : tensor<16x4xf32>) -> tensor<16x4xf32>
  %logits = linalg.matmul ins(%x, %wr : tensor<16x32xf32>, tensor<32x4xf32>)
              outs(%z_te : tensor<16x4xf32>) -> tensor<16x4xf32>
  %g = linalg.softmax dimension(1) ins(%logits : tensor<16x4xf32>)
         outs(%e_te : tensor<16x4xf32>) -> tensor<16x4xf32>
  %e_etd = tensor.empty() : tensor<4x16x32xf32>
  %xb = linalg.broadcast ins(%x : tensor<16x32xf32>) outs(%e_etd : tensor<4x16x32xf32>)
          dimensions = [0]
  %e_eth = tensor.empty() : tensor<4x16x64xf32>
  %z_eth = linalg.fill ins(%zero : f32) outs(%e_eth : tensor<4x16x64xf32>) -> tensor<4x16x64xf32>
  %h = linalg.batch_matmul ins(%xb, %w1 : tensor<4x16x32xf32>, tensor<4x32x64xf32>)
         outs(%z_eth : tensor<4x16x64xf32>) -> tensor<4x16x64xf32>
  %n = linalg.negf ins(%h : tensor<4x16x64xf32>) outs(%e_eth : tensor<4x16x64xf32>) -> tensor<4x16x64xf32>
  %ex = linalg.exp ins(%n : tensor<4x16x64xf32>) outs(%e_eth : tensor<4x16x64xf32>) -> tensor<4x16x64xf32>
  %ones = linalg.fill ins(%onec : f32) outs(%e_eth : tensor<4x16x64xf32>) -> tensor<4x16x64xf32>
  %den = linalg.add ins(%ones, %ex : tensor<4x16x64xf32>, tensor<4x16x64xf32>)
           outs(%e_eth : tensor<4x16x64xf32>) -> tensor<4x16x64xf32>
  %act = linalg.div ins(%h, %den : tensor<4x16x64xf32>, tensor<4x16x64xf32>)
           outs(%e_eth : tensor<4x16x64xf32>) -> tensor<4x16x64xf32>
  %z_etd = linalg.fill ins(%zero : f32) outs(%e_etd : tensor<4x16x32xf32>) -> tensor<4x16x32xf32>
  %y = linalg.batch_matmul ins(%act, %w2 : tensor<4x16x64xf32>, tensor<4x64x32xf32>)
         outs(%z_etd : tensor<4x16x32xf32>) -> tensor<4x16x32xf32>
  %e_et = tensor.empty() : tensor<4x16xf32>
  %gt = linalg.transpose ins(%g : tensor<16x4xf32>) outs(%e_et : tensor<4x16xf32>)
          permutation = [1, 0]
  %gb = linalg.broadcast ins(%gt : tensor<4x16xf32>) outs(%e_etd : tensor<4x16x32xf32>)
          dimensions = [2]
  %p = linalg.mul ins(%gb, %y : tensor<4x16x32xf32>, tensor<4x16x32xf32>)
         outs(%e_etd : tensor<4x16x32xf32>) -> tensor<4x16x32xf32>
  %e_td = tensor.empty() : tensor<16x32xf32>
  %z_td = linalg.fill ins(%zero : f32) outs(%e_td : tensor<16x32xf32>) -> tensor<16x32xf32>
  %out = linalg.reduce ins(%p : tensor<4x16x32xf32>) outs(%z_td : tensor<16x32xf32>)
           dimensions = [0]
    (%in: f32, %init: f32) {
      %s = arith.addf %in, %init : f32
      linalg.yield %s : f32
    }
  return %out : tensor<16x32xf32>
}

func.func @named_layer(%x: tensor<16x32xf32>,
                 %wr: tensor<32x4xf32> {moe.param = "router.weight"},
                 %w1: tensor<4x32x64xf32> {moe.param = "experts.w1"},
                 %w2: tensor<4x64x32xf32> {moe.param = "experts.w2"}) -> tensor<16x32xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.dense, activation = #moe.activation<silu>}
         : (tensor<16x32xf32>, tensor<32x4xf32>, tensor<4x32x64xf32>, tensor<4x64x32xf32>)
         -> tensor<16x32xf32>
  return %y : tensor<16x32xf32>
}
