// Dense MoE layers in the forms frontends emit (torch-mlir's linalg after
// DecomposeComplexOps, Hugging Face Mixtral/Qwen-MoE modelling code written
// as einsums), for --moe-raise-linalg. T=8 D=16 E=4 H=32.
//
// @torch_softmax: the router softmax decomposed as torch-mlir does
//   (amax -> sub -> exp -> sum(keepdim) -> div; the max through
//   tensor.expand_shape, the sum with a keepdim (d0, 0) output map, the sub
//   scaling its second operand by alpha = 1), a router bias, relu experts
//   (torch-mlir's cmpf ugt + select) with weights [E, in, out] and biases.
// @mixtral: Mixtral's block written densely: router weight [E, D]
//   (nn.Linear, through linalg.transpose and linalg.matmul), the softmax
//   decomposed, separate gate (w1) and up (w3) projections [E, H, D] and the
//   down projection w2 [E, D, H] (nn.Linear's [out, in] orientation, read
//   by the einsum maps), silu(gate) * up as sigmoid then two products, and
//   the router logits returned too (as MixtralSparseMoeBlock does).
// @qwen_geglu: geglu with separate gate and up weights [E, D, H] and a bias
//   on the gate only, the down bias, linalg.softmax, combine as linalg.reduce.

#map_td_e   = affine_map<(t, e) -> (t, e)>
#map_t      = affine_map<(t, e) -> (t)>
#map_t0     = affine_map<(t, e) -> (t, 0)>
#map_e      = affine_map<(t, e) -> (e)>
#x_etd      = affine_map<(e, t, h, d) -> (t, d)>
#w_edh      = affine_map<(e, t, h, d) -> (e, d, h)>
#w_ehd      = affine_map<(e, t, h, d) -> (e, h, d)>
#o_eth      = affine_map<(e, t, h, d) -> (e, t, h)>
#a_eth      = affine_map<(e, t, d, h) -> (e, t, h)>
#w2_ehd     = affine_map<(e, t, d, h) -> (e, h, d)>
#w2_edh     = affine_map<(e, t, d, h) -> (e, d, h)>
#o_etd      = affine_map<(e, t, d, h) -> (e, t, d)>
#id3        = affine_map<(a, b, c) -> (a, b, c)>
#b_ac       = affine_map<(a, b, c) -> (a, c)>
#c_g        = affine_map<(t, d, e) -> (t, e)>
#c_y        = affine_map<(t, d, e) -> (e, t, d)>
#c_o        = affine_map<(t, d, e) -> (t, d)>

func.func @torch_softmax(%x: tensor<8x16xf32>, %wr: tensor<16x4xf32>, %br: tensor<4xf32>,
                         %w1: tensor<4x16x32xf32>, %b1: tensor<4x32xf32>,
                         %w2: tensor<4x32x16xf32>, %b2: tensor<4x16xf32>) -> tensor<8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  // logits = x @ wr + br
  %e_te = tensor.empty() : tensor<8x4xf32>
  %z_te = linalg.fill ins(%zero : f32) outs(%e_te : tensor<8x4xf32>) -> tensor<8x4xf32>
  %mm = linalg.matmul ins(%x, %wr : tensor<8x16xf32>, tensor<16x4xf32>) outs(%z_te : tensor<8x4xf32>) -> tensor<8x4xf32>
  %logits = linalg.generic {indexing_maps = [#map_td_e, #map_e, #map_td_e], iterator_types = ["parallel", "parallel"]}
      ins(%mm, %br : tensor<8x4xf32>, tensor<4xf32>) outs(%e_te : tensor<8x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.mulf %b, %one : f32
    %r = arith.addf %a, %s : f32
    linalg.yield %r : f32
  } -> tensor<8x4xf32>
  // amax(logits, 1, keepdim) through expand_shape
  %e_t = tensor.empty() : tensor<8xf32>
  %m_init = linalg.fill ins(%ninf : f32) outs(%e_t : tensor<8xf32>) -> tensor<8xf32>
  %max = linalg.generic {indexing_maps = [#map_td_e, #map_t], iterator_types = ["parallel", "reduction"]}
      ins(%logits : tensor<8x4xf32>) outs(%m_init : tensor<8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %m = arith.maximumf %in, %acc : f32
    linalg.yield %m : f32
  } -> tensor<8xf32>
  %maxk = tensor.expand_shape %max [[0, 1]] output_shape [8, 1] : tensor<8xf32> into tensor<8x1xf32>
  %sub = linalg.generic {indexing_maps = [#map_td_e, #map_t0, #map_td_e], iterator_types = ["parallel", "parallel"]}
      ins(%logits, %maxk : tensor<8x4xf32>, tensor<8x1xf32>) outs(%e_te : tensor<8x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.mulf %b, %one : f32
    %r = arith.subf %a, %s : f32
    linalg.yield %r : f32
  } -> tensor<8x4xf32>
  %exp = linalg.generic {indexing_maps = [#map_td_e, #map_td_e], iterator_types = ["parallel", "parallel"]}
      ins(%sub : tensor<8x4xf32>) outs(%e_te : tensor<8x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.exp %a : f32
    linalg.yield %r : f32
  } -> tensor<8x4xf32>
  // sum(exp, 1, keepdim) with a (t, 0) output map
  %e_t1 = tensor.empty() : tensor<8x1xf32>
  %s_init = linalg.fill ins(%zero : f32) outs(%e_t1 : tensor<8x1xf32>) -> tensor<8x1xf32>
  %sum = linalg.generic {indexing_maps = [#map_td_e, #map_t0], iterator_types = ["parallel", "reduction"]}
      ins(%exp : tensor<8x4xf32>) outs(%s_init : tensor<8x1xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.addf %in, %acc : f32
    linalg.yield %r : f32
  } -> tensor<8x1xf32>
  %gate = linalg.generic {indexing_maps = [#map_td_e, #map_t0, #map_td_e], iterator_types = ["parallel", "parallel"]}
      ins(%exp, %sum : tensor<8x4xf32>, tensor<8x1xf32>) outs(%e_te : tensor<8x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.divf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<8x4xf32>
  // experts: relu(x W1 + b1) W2 + b2
  %e_eth = tensor.empty() : tensor<4x8x32xf32>
  %z_eth = linalg.fill ins(%zero : f32) outs(%e_eth : tensor<4x8x32xf32>) -> tensor<4x8x32xf32>
  %h = linalg.generic {indexing_maps = [#x_etd, #w_edh, #o_eth], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %w1 : tensor<8x16xf32>, tensor<4x16x32xf32>) outs(%z_eth : tensor<4x8x32xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  } -> tensor<4x8x32xf32>
  %act = linalg.generic {indexing_maps = [#id3, #b_ac, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%h, %b1 : tensor<4x8x32xf32>, tensor<4x32xf32>) outs(%e_eth : tensor<4x8x32xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.mulf %b, %one : f32
    %u = arith.addf %a, %s : f32
    %pos = arith.cmpf ugt, %u, %zero : f32
    %r = arith.select %pos, %u, %zero : f32
    linalg.yield %r : f32
  } -> tensor<4x8x32xf32>
  %e_etd = tensor.empty() : tensor<4x8x16xf32>
  %z_etd = linalg.fill ins(%zero : f32) outs(%e_etd : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %y = linalg.generic {indexing_maps = [#a_eth, #w2_ehd, #o_etd], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%act, %w2 : tensor<4x8x32xf32>, tensor<4x32x16xf32>) outs(%z_etd : tensor<4x8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  } -> tensor<4x8x16xf32>
  %yb = linalg.generic {indexing_maps = [#id3, #b_ac, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%y, %b2 : tensor<4x8x16xf32>, tensor<4x16xf32>) outs(%e_etd : tensor<4x8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.addf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<4x8x16xf32>
  %e_td = tensor.empty() : tensor<8x16xf32>
  %z_td = linalg.fill ins(%zero : f32) outs(%e_td : tensor<8x16xf32>) -> tensor<8x16xf32>
  %out = linalg.generic {indexing_maps = [#c_g, #c_y, #c_o], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%gate, %yb : tensor<8x4xf32>, tensor<4x8x16xf32>) outs(%z_td : tensor<8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  } -> tensor<8x16xf32>
  return %out : tensor<8x16xf32>
}

func.func @mixtral(%x: tensor<8x16xf32>, %wg: tensor<4x16xf32>, %w1: tensor<4x32x16xf32>,
                   %w3: tensor<4x32x16xf32>, %w2: tensor<4x16x32xf32>)
    -> (tensor<8x16xf32>, tensor<8x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  // router_logits = self.gate(x): x @ wg^T
  %e_de = tensor.empty() : tensor<16x4xf32>
  %wgt = linalg.transpose ins(%wg : tensor<4x16xf32>) outs(%e_de : tensor<16x4xf32>) permutation = [1, 0]
  %e_te = tensor.empty() : tensor<8x4xf32>
  %z_te = linalg.fill ins(%zero : f32) outs(%e_te : tensor<8x4xf32>) -> tensor<8x4xf32>
  %logits = linalg.matmul ins(%x, %wgt : tensor<8x16xf32>, tensor<16x4xf32>) outs(%z_te : tensor<8x4xf32>) -> tensor<8x4xf32>
  // softmax(router_logits, dim=1)
  %e_t = tensor.empty() : tensor<8xf32>
  %m_init = linalg.fill ins(%ninf : f32) outs(%e_t : tensor<8xf32>) -> tensor<8xf32>
  %max = linalg.generic {indexing_maps = [#map_td_e, #map_t], iterator_types = ["parallel", "reduction"]}
      ins(%logits : tensor<8x4xf32>) outs(%m_init : tensor<8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %m = arith.maximumf %in, %acc : f32
    linalg.yield %m : f32
  } -> tensor<8xf32>
  %exp = linalg.generic {indexing_maps = [#map_td_e, #map_t, #map_td_e], iterator_types = ["parallel", "parallel"]}
      ins(%logits, %max : tensor<8x4xf32>, tensor<8xf32>) outs(%e_te : tensor<8x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %d = arith.subf %a, %b : f32
    %r = math.exp %d : f32
    linalg.yield %r : f32
  } -> tensor<8x4xf32>
  %s_init = linalg.fill ins(%zero : f32) outs(%e_t : tensor<8xf32>) -> tensor<8xf32>
  %sum = linalg.generic {indexing_maps = [#map_td_e, #map_t], iterator_types = ["parallel", "reduction"]}
      ins(%exp : tensor<8x4xf32>) outs(%s_init : tensor<8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.addf %acc, %in : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  %gate = linalg.generic {indexing_maps = [#map_td_e, #map_t, #map_td_e], iterator_types = ["parallel", "parallel"]}
      ins(%exp, %sum : tensor<8x4xf32>, tensor<8xf32>) outs(%e_te : tensor<8x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.divf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<8x4xf32>
  // w1(x), w3(x): "td,ehd->eth"
  %e_eth = tensor.empty() : tensor<4x8x32xf32>
  %z_eth = linalg.fill ins(%zero : f32) outs(%e_eth : tensor<4x8x32xf32>) -> tensor<4x8x32xf32>
  %g = linalg.generic {indexing_maps = [#x_etd, #w_ehd, #o_eth], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %w1 : tensor<8x16xf32>, tensor<4x32x16xf32>) outs(%z_eth : tensor<4x8x32xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  } -> tensor<4x8x32xf32>
  %u = linalg.generic {indexing_maps = [#x_etd, #w_ehd, #o_eth], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %w3 : tensor<8x16xf32>, tensor<4x32x16xf32>) outs(%z_eth : tensor<4x8x32xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  } -> tensor<4x8x32xf32>
  // act_fn(w1(x)) * w3(x), silu as x * sigmoid(x)
  %sig = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%g : tensor<4x8x32xf32>) outs(%e_eth : tensor<4x8x32xf32>) {
  ^bb0(%a: f32, %o: f32):
    %n = arith.negf %a : f32
    %ex = math.exp %n : f32
    %den = arith.addf %ex, %one : f32
    %r = arith.divf %one, %den : f32
    linalg.yield %r : f32
  } -> tensor<4x8x32xf32>
  %silu = linalg.mul ins(%g, %sig : tensor<4x8x32xf32>, tensor<4x8x32xf32>) outs(%e_eth : tensor<4x8x32xf32>) -> tensor<4x8x32xf32>
  %act = linalg.mul ins(%silu, %u : tensor<4x8x32xf32>, tensor<4x8x32xf32>) outs(%e_eth : tensor<4x8x32xf32>) -> tensor<4x8x32xf32>
  // w2(...): "eth,edh->etd"
  %e_etd = tensor.empty() : tensor<4x8x16xf32>
  %z_etd = linalg.fill ins(%zero : f32) outs(%e_etd : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %y = linalg.generic {indexing_maps = [#a_eth, #w2_edh, #o_etd], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%act, %w2 : tensor<4x8x32xf32>, tensor<4x16x32xf32>) outs(%z_etd : tensor<4x8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  } -> tensor<4x8x16xf32>
  %e_td = tensor.empty() : tensor<8x16xf32>
  %z_td = linalg.fill ins(%zero : f32) outs(%e_td : tensor<8x16xf32>) -> tensor<8x16xf32>
  %out = linalg.generic {indexing_maps = [#c_g, #c_y, #c_o], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%gate, %y : tensor<8x4xf32>, tensor<4x8x16xf32>) outs(%z_td : tensor<8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  } -> tensor<8x16xf32>
  return %out, %logits : tensor<8x16xf32>, tensor<8x4xf32>
}

func.func @qwen_geglu(%x: tensor<8x16xf32>, %wr: tensor<16x4xf32>, %wg: tensor<4x16x32xf32>,
                      %bg: tensor<4x32xf32>, %wu: tensor<4x16x32xf32>, %w2: tensor<4x32x16xf32>,
                      %b2: tensor<4x16xf32>) -> tensor<8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e_te = tensor.empty() : tensor<8x4xf32>
  %z_te = linalg.fill ins(%zero : f32) outs(%e_te : tensor<8x4xf32>) -> tensor<8x4xf32>
  %logits = linalg.matmul ins(%x, %wr : tensor<8x16xf32>, tensor<16x4xf32>) outs(%z_te : tensor<8x4xf32>) -> tensor<8x4xf32>
  %gate = linalg.softmax dimension(1) ins(%logits : tensor<8x4xf32>) outs(%e_te : tensor<8x4xf32>) -> tensor<8x4xf32>
  %e_eth = tensor.empty() : tensor<4x8x32xf32>
  %z_eth = linalg.fill ins(%zero : f32) outs(%e_eth : tensor<4x8x32xf32>) -> tensor<4x8x32xf32>
  %g = linalg.generic {indexing_maps = [#x_etd, #w_edh, #o_eth], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %wg : tensor<8x16xf32>, tensor<4x16x32xf32>) outs(%z_eth : tensor<4x8x32xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  } -> tensor<4x8x32xf32>
  %u = linalg.generic {indexing_maps = [#x_etd, #w_edh, #o_eth], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %wu : tensor<8x16xf32>, tensor<4x16x32xf32>) outs(%z_eth : tensor<4x8x32xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  } -> tensor<4x8x32xf32>
  // gelu(g + bg) * u in one generic
  %act = linalg.generic {indexing_maps = [#id3, #b_ac, #id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%g, %bg, %u : tensor<4x8x32xf32>, tensor<4x32xf32>, tensor<4x8x32xf32>) outs(%e_eth : tensor<4x8x32xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32, %o: f32):
    %half = arith.constant 0.5 : f32
    %one = arith.constant 1.0 : f32
    %rsqrt2 = arith.constant 0.70710678 : f32
    %v = arith.addf %a, %b : f32
    %s = arith.mulf %v, %rsqrt2 : f32
    %erf = math.erf %s : f32
    %onep = arith.addf %one, %erf : f32
    %hv = arith.mulf %half, %v : f32
    %gl = arith.mulf %hv, %onep : f32
    %r = arith.mulf %gl, %c : f32
    linalg.yield %r : f32
  } -> tensor<4x8x32xf32>
  %e_etd = tensor.empty() : tensor<4x8x16xf32>
  %z_etd = linalg.fill ins(%zero : f32) outs(%e_etd : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %y = linalg.batch_matmul ins(%act, %w2 : tensor<4x8x32xf32>, tensor<4x32x16xf32>) outs(%z_etd : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %b2b = linalg.broadcast ins(%b2 : tensor<4x16xf32>) outs(%e_etd : tensor<4x8x16xf32>) dimensions = [1]
  %yb = linalg.add ins(%y, %b2b : tensor<4x8x16xf32>, tensor<4x8x16xf32>) outs(%e_etd : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  // sum_e gate[t, e] * yb[e, t, d] as linalg.reduce of a product
  %e_ted = tensor.empty() : tensor<8x4x16xf32>
  %gb = linalg.broadcast ins(%gate : tensor<8x4xf32>) outs(%e_ted : tensor<8x4x16xf32>) dimensions = [2]
  %yt = linalg.transpose ins(%yb : tensor<4x8x16xf32>) outs(%e_ted : tensor<8x4x16xf32>) permutation = [1, 0, 2]
  %prod = linalg.mul ins(%gb, %yt : tensor<8x4x16xf32>, tensor<8x4x16xf32>) outs(%e_ted : tensor<8x4x16xf32>) -> tensor<8x4x16xf32>
  %e_td = tensor.empty() : tensor<8x16xf32>
  %z_td = linalg.fill ins(%zero : f32) outs(%e_td : tensor<8x16xf32>) -> tensor<8x16xf32>
  %out = linalg.reduce ins(%prod : tensor<8x4x16xf32>) outs(%z_td : tensor<8x16xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %r = arith.addf %in, %acc : f32
      linalg.yield %r : f32
    }
  return %out : tensor<8x16xf32>
}
