// RUN: moe-opt %s -split-input-file -verify-diagnostics
//
// The dialect attributes moe.param (function arguments) and moe.causal
// (moe.layer).

// -----

// expected-error @+1 {{'moe.param' on argument #1 must be a non-empty string naming a tensor of the parameters file or a #moe.checkpoint<...>, got 3 : i64}}
func.func @param_not_string(%x: tensor<8xf32>, %w: tensor<8xf32> {moe.param = 3}) {
  return
}

// -----

// expected-error @+1 {{'moe.param' on argument #0 must be a non-empty string naming a tensor of the parameters file or a #moe.checkpoint<...>, got ""}}
func.func @param_empty(%w: tensor<8xf32> {moe.param = ""}) {
  return
}

// -----

// expected-error @+1 {{unknown moe dialect argument attribute 'moe.parameter' on argument #0}}
func.func @param_misspelled(%w: tensor<8xf32> {moe.parameter = "w"}) {
  return
}

// -----

func.func @param_on_op(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'moe.param' is a function-argument attribute; it cannot be attached to an operation}}
  %y = arith.addf %x, %x {moe.param = "y"} : tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

func.func @causal_not_unit(%x: tensor<8x64xf32>, %wr: tensor<64x4xf32>, %w1: tensor<4x64x32xf32>, %w2: tensor<4x32x64xf32>) {
  // expected-error @+1 {{'moe.causal' must be a unit attribute, got true}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.dense, activation = #moe.activation<relu>, moe.causal = true}
         : (tensor<8x64xf32>, tensor<64x4xf32>, tensor<4x64x32xf32>, tensor<4x32x64xf32>) -> tensor<8x64xf32>
  return
}

// -----

func.func @causal_soft(%x: tensor<4x64x128xf32>, %phi: tensor<128x8x2xf32>, %w1: tensor<8x128x512xf32>, %w2: tensor<8x512x128xf32>) {
  // expected-error @+1 {{'moe.causal' cannot mark a moe.soft_layer: Soft MoE mixes tokens across positions inside a group, which a causal layer must not do}}
  %y = moe.soft_layer %x slots(%phi) experts(%w1, %w2) {activation = #moe.activation<gelu>, moe.causal}
         : (tensor<4x64x128xf32>, tensor<128x8x2xf32>, tensor<8x128x512xf32>, tensor<8x512x128xf32>) -> tensor<4x64x128xf32>
  return
}

// -----

func.func @causal_elsewhere(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'moe.causal' applies to moe.layer only, not to 'arith.addf'}}
  %y = arith.addf %x, %x {moe.causal} : tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

func.func @unknown_dialect_attr(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{unknown moe dialect attribute 'moe.sparse'}}
  %y = arith.addf %x, %x {moe.sparse} : tensor<8xf32>
  return %y : tensor<8xf32>
}
