// --moe-raise-linalg on near-misses of the frontend forms: each function is
// left exactly as it was (the IR printed after the pass equals the IR
// printed without it), with one remark naming the first mismatch.
//
// RUN: moe-opt %s -split-input-file --moe-raise-linalg -verify-diagnostics
// RUN: moe-opt %s -split-input-file > %t.before.mlir
// RUN: moe-opt %s -split-input-file --moe-raise-linalg 2>/dev/null > %t.after.mlir
// RUN: diff %t.before.mlir %t.after.mlir
// RUN: FileCheck %s --input-file=%t.after.mlir

// The decomposed softmax normalises over the tokens: its sum reduces t.

// CHECK-LABEL: func.func @softmax_sum_over_tokens(
// CHECK-NOT: moe.layer
func.func @softmax_sum_over_tokens(%x: tensor<8x16xf32>, %wr: tensor<16x4xf32>, %w1: tensor<4x16x32xf32>,
                                   %w2: tensor<4x32x16xf32>) -> tensor<8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e_te = tensor.empty() : tensor<8x4xf32>
  %z_te = linalg.fill ins(%zero : f32) outs(%e_te : tensor<8x4xf32>) -> tensor<8x4xf32>
  %logits = linalg.matmul ins(%x, %wr : tensor<8x16xf32>, tensor<16x4xf32>) outs(%z_te : tensor<8x4xf32>) -> tensor<8x4xf32>
  %exp = linalg.exp ins(%logits : tensor<8x4xf32>) outs(%e_te : tensor<8x4xf32>) -> tensor<8x4xf32>
  %e_e = tensor.empty() : tensor<4xf32>
  %z_e = linalg.fill ins(%zero : f32) outs(%e_e : tensor<4xf32>) -> tensor<4xf32>
  %sum = linalg.reduce ins(%exp : tensor<8x4xf32>) outs(%z_e : tensor<4xf32>) dimensions = [0]
    (%in: f32, %acc: f32) {
      %r = arith.addf %in, %acc : f32
      linalg.yield %r : f32
    }
  %g = linalg.generic {indexing_maps = [affine_map<(t, e) -> (t, e)>, affine_map<(t, e) -> (e)>, affine_map<(t, e) -> (t, e)>], iterator_types = ["parallel", "parallel"]}
      ins(%exp, %sum : tensor<8x4xf32>, tensor<4xf32>) outs(%e_te : tensor<8x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.divf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<8x4xf32>
  %e_etd = tensor.empty() : tensor<4x8x16xf32>
  %xb = linalg.broadcast ins(%x : tensor<8x16xf32>) outs(%e_etd : tensor<4x8x16xf32>) dimensions = [0]
  %e_eth = tensor.empty() : tensor<4x8x32xf32>
  %z_eth = linalg.fill ins(%zero : f32) outs(%e_eth : tensor<4x8x32xf32>) -> tensor<4x8x32xf32>
  %h = linalg.batch_matmul ins(%xb, %w1 : tensor<4x8x16xf32>, tensor<4x16x32xf32>) outs(%z_eth : tensor<4x8x32xf32>) -> tensor<4x8x32xf32>
  %act = linalg.max ins(%h, %z_eth : tensor<4x8x32xf32>, tensor<4x8x32xf32>) outs(%e_eth : tensor<4x8x32xf32>) -> tensor<4x8x32xf32>
  %z_etd = linalg.fill ins(%zero : f32) outs(%e_etd : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %y = linalg.batch_matmul ins(%act, %w2 : tensor<4x8x32xf32>, tensor<4x32x16xf32>) outs(%z_etd : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %e_td = tensor.empty() : tensor<8x16xf32>
  %z_td = linalg.fill ins(%zero : f32) outs(%e_td : tensor<8x16xf32>) -> tensor<8x16xf32>
  // expected-remark @below {{not raised to moe.layer: the softmax sum is not over the experts (dimension 1)}}
  %out = linalg.contract indexing_maps = [affine_map<(t, d, e) -> (t, e)>, affine_map<(t, d, e) -> (e, t, d)>, affine_map<(t, d, e) -> (t, d)>]
           ins(%g, %y : tensor<8x4xf32>, tensor<4x8x16xf32>) outs(%z_td : tensor<8x16xf32>) -> tensor<8x16xf32>
  return %out : tensor<8x16xf32>
}

// -----

// The decomposed softmax subtracts the mean, not the max (a sum reduction).

// CHECK-LABEL: func.func @softmax_minus_sum(
// CHECK-NOT: moe.layer
func.func @softmax_minus_sum(%x: tensor<8x16xf32>, %wr: tensor<16x4xf32>, %w1: tensor<4x16x32xf32>,
                             %w2: tensor<4x32x16xf32>) -> tensor<8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e_te = tensor.empty() : tensor<8x4xf32>
  %z_te = linalg.fill ins(%zero : f32) outs(%e_te : tensor<8x4xf32>) -> tensor<8x4xf32>
  %logits = linalg.matmul ins(%x, %wr : tensor<8x16xf32>, tensor<16x4xf32>) outs(%z_te : tensor<8x4xf32>) -> tensor<8x4xf32>
  %e_t = tensor.empty() : tensor<8xf32>
  %z_t = linalg.fill ins(%zero : f32) outs(%e_t : tensor<8xf32>) -> tensor<8xf32>
  %m = linalg.reduce ins(%logits : tensor<8x4xf32>) outs(%z_t : tensor<8xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %r = arith.addf %in, %acc : f32
      linalg.yield %r : f32
    }
  %exp = linalg.generic {indexing_maps = [affine_map<(t, e) -> (t, e)>, affine_map<(t, e) -> (t)>, affine_map<(t, e) -> (t, e)>], iterator_types = ["parallel", "parallel"]}
      ins(%logits, %m : tensor<8x4xf32>, tensor<8xf32>) outs(%e_te : tensor<8x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %d = arith.subf %a, %b : f32
    %r = math.exp %d : f32
    linalg.yield %r : f32
  } -> tensor<8x4xf32>
  %sum = linalg.reduce ins(%exp : tensor<8x4xf32>) outs(%z_t : tensor<8xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %r = arith.addf %in, %acc : f32
      linalg.yield %r : f32
    }
  %g = linalg.generic {indexing_maps = [affine_map<(t, e) -> (t, e)>, affine_map<(t, e) -> (t)>, affine_map<(t, e) -> (t, e)>], iterator_types = ["parallel", "parallel"]}
      ins(%exp, %sum : tensor<8x4xf32>, tensor<8xf32>) outs(%e_te : tensor<8x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.divf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<8x4xf32>
  %e_etd = tensor.empty() : tensor<4x8x16xf32>
  %xb = linalg.broadcast ins(%x : tensor<8x16xf32>) outs(%e_etd : tensor<4x8x16xf32>) dimensions = [0]
  %e_eth = tensor.empty() : tensor<4x8x32xf32>
  %z_eth = linalg.fill ins(%zero : f32) outs(%e_eth : tensor<4x8x32xf32>) -> tensor<4x8x32xf32>
  %h = linalg.batch_matmul ins(%xb, %w1 : tensor<4x8x16xf32>, tensor<4x16x32xf32>) outs(%z_eth : tensor<4x8x32xf32>) -> tensor<4x8x32xf32>
  %act = linalg.max ins(%h, %z_eth : tensor<4x8x32xf32>, tensor<4x8x32xf32>) outs(%e_eth : tensor<4x8x32xf32>) -> tensor<4x8x32xf32>
  %z_etd = linalg.fill ins(%zero : f32) outs(%e_etd : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %y = linalg.batch_matmul ins(%act, %w2 : tensor<4x8x32xf32>, tensor<4x32x16xf32>) outs(%z_etd : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %e_td = tensor.empty() : tensor<8x16xf32>
  %z_td = linalg.fill ins(%zero : f32) outs(%e_td : tensor<8x16xf32>) -> tensor<8x16xf32>
  // expected-remark @below {{not raised to moe.layer: the softmax subtracts something else than the max of the logits over the experts}}
  %out = linalg.contract indexing_maps = [affine_map<(t, d, e) -> (t, e)>, affine_map<(t, d, e) -> (e, t, d)>, affine_map<(t, d, e) -> (t, d)>]
           ins(%g, %y : tensor<8x4xf32>, tensor<4x8x16xf32>) outs(%z_td : tensor<8x16xf32>) -> tensor<8x16xf32>
  return %out : tensor<8x16xf32>
}

// -----

// Gated, but the up projection reads another input than the router's x.

// CHECK-LABEL: func.func @up_reads_other_input(
// CHECK-NOT: moe.layer
func.func @up_reads_other_input(%x: tensor<8x16xf32>, %x2: tensor<8x16xf32>, %wr: tensor<16x4xf32>,
                                %wg: tensor<4x16x32xf32>, %wu: tensor<4x16x32xf32>,
                                %w2: tensor<4x32x16xf32>) -> tensor<8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e_te = tensor.empty() : tensor<8x4xf32>
  %z_te = linalg.fill ins(%zero : f32) outs(%e_te : tensor<8x4xf32>) -> tensor<8x4xf32>
  %logits = linalg.matmul ins(%x, %wr : tensor<8x16xf32>, tensor<16x4xf32>) outs(%z_te : tensor<8x4xf32>) -> tensor<8x4xf32>
  %g = linalg.softmax dimension(1) ins(%logits : tensor<8x4xf32>) outs(%e_te : tensor<8x4xf32>) -> tensor<8x4xf32>
  %e_eth = tensor.empty() : tensor<4x8x32xf32>
  %z_eth = linalg.fill ins(%zero : f32) outs(%e_eth : tensor<4x8x32xf32>) -> tensor<4x8x32xf32>
  %hg = linalg.generic {indexing_maps = [affine_map<(e, t, h, d) -> (t, d)>, affine_map<(e, t, h, d) -> (e, d, h)>, affine_map<(e, t, h, d) -> (e, t, h)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %wg : tensor<8x16xf32>, tensor<4x16x32xf32>) outs(%z_eth : tensor<4x8x32xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  } -> tensor<4x8x32xf32>
  %hu = linalg.generic {indexing_maps = [affine_map<(e, t, h, d) -> (t, d)>, affine_map<(e, t, h, d) -> (e, d, h)>, affine_map<(e, t, h, d) -> (e, t, h)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%x2, %wu : tensor<8x16xf32>, tensor<4x16x32xf32>) outs(%z_eth : tensor<4x8x32xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  } -> tensor<4x8x32xf32>
  %act = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%hg, %hu : tensor<4x8x32xf32>, tensor<4x8x32xf32>) outs(%e_eth : tensor<4x8x32xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %one = arith.constant 1.0 : f32
    %n = arith.negf %a : f32
    %ex = math.exp %n : f32
    %den = arith.addf %one, %ex : f32
    %s = arith.divf %a, %den : f32
    %r = arith.mulf %s, %b : f32
    linalg.yield %r : f32
  } -> tensor<4x8x32xf32>
  %e_etd = tensor.empty() : tensor<4x8x16xf32>
  %z_etd = linalg.fill ins(%zero : f32) outs(%e_etd : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %y = linalg.batch_matmul ins(%act, %w2 : tensor<4x8x32xf32>, tensor<4x32x16xf32>) outs(%z_etd : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %e_td = tensor.empty() : tensor<8x16xf32>
  %z_td = linalg.fill ins(%zero : f32) outs(%e_td : tensor<8x16xf32>) -> tensor<8x16xf32>
  // expected-remark @below {{not raised to moe.layer: the up projection does not read the router's input x}}
  %out = linalg.contract indexing_maps = [affine_map<(t, d, e) -> (t, e)>, affine_map<(t, d, e) -> (e, t, d)>, affine_map<(t, d, e) -> (t, d)>]
           ins(%g, %y : tensor<8x4xf32>, tensor<4x8x16xf32>) outs(%z_td : tensor<8x16xf32>) -> tensor<8x16xf32>
  return %out : tensor<8x16xf32>
}

// -----

// An activation that is none of moe's (tanh), and the first expert bias
// shared by all experts ([H], not [E, H]) in the next case.

// CHECK-LABEL: func.func @unknown_activation(
// CHECK-NOT: moe.layer
func.func @unknown_activation(%x: tensor<8x16xf32>, %wr: tensor<16x4xf32>, %w1: tensor<4x16x32xf32>,
                              %w2: tensor<4x32x16xf32>) -> tensor<8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e_te = tensor.empty() : tensor<8x4xf32>
  %z_te = linalg.fill ins(%zero : f32) outs(%e_te : tensor<8x4xf32>) -> tensor<8x4xf32>
  %logits = linalg.matmul ins(%x, %wr : tensor<8x16xf32>, tensor<16x4xf32>) outs(%z_te : tensor<8x4xf32>) -> tensor<8x4xf32>
  %g = linalg.softmax dimension(1) ins(%logits : tensor<8x4xf32>) outs(%e_te : tensor<8x4xf32>) -> tensor<8x4xf32>
  %e_etd = tensor.empty() : tensor<4x8x16xf32>
  %xb = linalg.broadcast ins(%x : tensor<8x16xf32>) outs(%e_etd : tensor<4x8x16xf32>) dimensions = [0]
  %e_eth = tensor.empty() : tensor<4x8x32xf32>
  %z_eth = linalg.fill ins(%zero : f32) outs(%e_eth : tensor<4x8x32xf32>) -> tensor<4x8x32xf32>
  %h = linalg.batch_matmul ins(%xb, %w1 : tensor<4x8x16xf32>, tensor<4x16x32xf32>) outs(%z_eth : tensor<4x8x32xf32>) -> tensor<4x8x32xf32>
  %act = linalg.tanh ins(%h : tensor<4x8x32xf32>) outs(%e_eth : tensor<4x8x32xf32>) -> tensor<4x8x32xf32>
  %z_etd = linalg.fill ins(%zero : f32) outs(%e_etd : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %y = linalg.batch_matmul ins(%act, %w2 : tensor<4x8x32xf32>, tensor<4x32x16xf32>) outs(%z_etd : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %e_td = tensor.empty() : tensor<8x16xf32>
  %z_td = linalg.fill ins(%zero : f32) outs(%e_td : tensor<8x16xf32>) -> tensor<8x16xf32>
  // expected-remark @below {{not raised to moe.layer: the activation is not one of relu, gelu, gelu_tanh, silu, swiglu (silu(g) * u), geglu (gelu(g) * u)}}
  %out = linalg.contract indexing_maps = [affine_map<(t, d, e) -> (t, e)>, affine_map<(t, d, e) -> (e, t, d)>, affine_map<(t, d, e) -> (t, d)>]
           ins(%g, %y : tensor<8x4xf32>, tensor<4x8x16xf32>) outs(%z_td : tensor<8x16xf32>) -> tensor<8x16xf32>
  return %out : tensor<8x16xf32>
}

// -----

// CHECK-LABEL: func.func @bias_shared_by_experts(
// CHECK-NOT: moe.layer
func.func @bias_shared_by_experts(%x: tensor<8x16xf32>, %wr: tensor<16x4xf32>, %w1: tensor<4x16x32xf32>,
                                  %b1: tensor<32xf32>, %w2: tensor<4x32x16xf32>) -> tensor<8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e_te = tensor.empty() : tensor<8x4xf32>
  %z_te = linalg.fill ins(%zero : f32) outs(%e_te : tensor<8x4xf32>) -> tensor<8x4xf32>
  %logits = linalg.matmul ins(%x, %wr : tensor<8x16xf32>, tensor<16x4xf32>) outs(%z_te : tensor<8x4xf32>) -> tensor<8x4xf32>
  %g = linalg.softmax dimension(1) ins(%logits : tensor<8x4xf32>) outs(%e_te : tensor<8x4xf32>) -> tensor<8x4xf32>
  %e_etd = tensor.empty() : tensor<4x8x16xf32>
  %xb = linalg.broadcast ins(%x : tensor<8x16xf32>) outs(%e_etd : tensor<4x8x16xf32>) dimensions = [0]
  %e_eth = tensor.empty() : tensor<4x8x32xf32>
  %z_eth = linalg.fill ins(%zero : f32) outs(%e_eth : tensor<4x8x32xf32>) -> tensor<4x8x32xf32>
  %h = linalg.batch_matmul ins(%xb, %w1 : tensor<4x8x16xf32>, tensor<4x16x32xf32>) outs(%z_eth : tensor<4x8x32xf32>) -> tensor<4x8x32xf32>
  %act = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%h, %b1 : tensor<4x8x32xf32>, tensor<32xf32>) outs(%e_eth : tensor<4x8x32xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %u = arith.addf %a, %b : f32
    %r = arith.maximumf %u, %zero : f32
    linalg.yield %r : f32
  } -> tensor<4x8x32xf32>
  %z_etd = linalg.fill ins(%zero : f32) outs(%e_etd : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %y = linalg.batch_matmul ins(%act, %w2 : tensor<4x8x32xf32>, tensor<4x32x16xf32>) outs(%z_etd : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %e_td = tensor.empty() : tensor<8x16xf32>
  %z_td = linalg.fill ins(%zero : f32) outs(%e_td : tensor<8x16xf32>) -> tensor<8x16xf32>
  // expected-remark @below {{not raised to moe.layer: the first expert GEMM (before the activation) is not x W1 or x W1 + b1[e, h]}}
  %out = linalg.contract indexing_maps = [affine_map<(t, d, e) -> (t, e)>, affine_map<(t, d, e) -> (e, t, d)>, affine_map<(t, d, e) -> (t, d)>]
           ins(%g, %y : tensor<8x4xf32>, tensor<4x8x16xf32>) outs(%z_td : tensor<8x16xf32>) -> tensor<8x16xf32>
  return %out : tensor<8x16xf32>
}

// -----

// The second expert GEMM accumulates into the expert bias instead of zeros
// (a frontend folding the bias into the accumulator is not recognised).

// CHECK-LABEL: func.func @nonzero_accumulator(
// CHECK-NOT: moe.layer
func.func @nonzero_accumulator(%x: tensor<8x16xf32>, %wr: tensor<16x4xf32>, %w1: tensor<4x16x32xf32>,
                               %w2: tensor<4x32x16xf32>, %acc: tensor<4x8x16xf32>) -> tensor<8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e_te = tensor.empty() : tensor<8x4xf32>
  %z_te = linalg.fill ins(%zero : f32) outs(%e_te : tensor<8x4xf32>) -> tensor<8x4xf32>
  %logits = linalg.matmul ins(%x, %wr : tensor<8x16xf32>, tensor<16x4xf32>) outs(%z_te : tensor<8x4xf32>) -> tensor<8x4xf32>
  %g = linalg.softmax dimension(1) ins(%logits : tensor<8x4xf32>) outs(%e_te : tensor<8x4xf32>) -> tensor<8x4xf32>
  %e_etd = tensor.empty() : tensor<4x8x16xf32>
  %xb = linalg.broadcast ins(%x : tensor<8x16xf32>) outs(%e_etd : tensor<4x8x16xf32>) dimensions = [0]
  %e_eth = tensor.empty() : tensor<4x8x32xf32>
  %z_eth = linalg.fill ins(%zero : f32) outs(%e_eth : tensor<4x8x32xf32>) -> tensor<4x8x32xf32>
  %h = linalg.batch_matmul ins(%xb, %w1 : tensor<4x8x16xf32>, tensor<4x16x32xf32>) outs(%z_eth : tensor<4x8x32xf32>) -> tensor<4x8x32xf32>
  %act = linalg.max ins(%h, %z_eth : tensor<4x8x32xf32>, tensor<4x8x32xf32>) outs(%e_eth : tensor<4x8x32xf32>) -> tensor<4x8x32xf32>
  %y = linalg.batch_matmul ins(%act, %w2 : tensor<4x8x32xf32>, tensor<4x32x16xf32>) outs(%acc : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %e_td = tensor.empty() : tensor<8x16xf32>
  %z_td = linalg.fill ins(%zero : f32) outs(%e_td : tensor<8x16xf32>) -> tensor<8x16xf32>
  // expected-remark @below {{not raised to moe.layer: the second expert GEMM does not accumulate into zeros}}
  %out = linalg.contract indexing_maps = [affine_map<(t, d, e) -> (t, e)>, affine_map<(t, d, e) -> (e, t, d)>, affine_map<(t, d, e) -> (t, d)>]
           ins(%g, %y : tensor<8x4xf32>, tensor<4x8x16xf32>) outs(%z_td : tensor<8x16xf32>) -> tensor<8x16xf32>
  return %out : tensor<8x16xf32>
}
