// RUN: moe-opt %s --moe-dense-to-moesart -split-input-file -verify-diagnostics | FileCheck %s
// RUN: moe-opt %s --moe-dense-to-moesart="k=3 adjust=large trimmed-lasso=0.25" -split-input-file | FileCheck %s --check-prefix=OPTS
// RUN: moe-opt %examples/dense.mlir --moe-dense-to-moesart | FileCheck %s --check-prefix=DENSE
// RUN: not moe-opt %s --moe-dense-to-moesart="adjust=medium" 2>&1 | FileCheck %s --check-prefix=BADADJ
// RUN: not moe-opt %s --moe-dense-to-moesart="k=0" 2>&1 | FileCheck %s --check-prefix=BADK
// RUN: not moe-opt %s --moe-dense-to-moesart="trimmed-lasso=-1" 2>&1 | FileCheck %s --check-prefix=BADL

// DENSE: moe.layer %arg0 router(%arg1, %arg2) experts(%arg3, %arg4) expert_biases(%arg5, %arg6) {activation = #moe.activation<gelu>, routing = #moe.moesart<k = 2>}
// BADADJ: for the --adjust option: Cannot find option named 'medium'!
// BADK: moe-dense-to-moesart: #moe.moesart needs k >= 1, got k = 0
// BADL: moe-dense-to-moesart: #moe.moesart needs a finite trimmed_lasso >= 0, got -1.000000e+00

// Inference: only the routing changes.
// CHECK-LABEL: func.func @inference
// CHECK: moe.layer %arg0 router(%arg1) experts(%arg2, %arg3) {activation = #moe.activation<relu>, capacity_factor = 2.000000e+00 : f64, routing = #moe.moesart<k = 2>}
// OPTS-LABEL: func.func @inference
// OPTS: routing = #moe.moesart<k = 3, adjust = large, trimmed_lasso = 2.500000e-01>
func.func @inference(%x: tensor<8x16xf32>, %wr: tensor<16x4xf32>, %w1: tensor<4x16x32xf32>, %w2: tensor<4x32x16xf32>) -> tensor<8x16xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.dense, activation = #moe.activation<relu>, capacity_factor = 2.0 : f64}
         : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// Training: same seed, still training, the loss is now the trimmed lasso.
// CHECK-LABEL: func.func @training
// CHECK: %{{.*}}, %[[L:.*]] = moe.layer %arg0 router(%arg2) experts(%arg3, %arg4) seed(%arg1) {activation = #moe.activation<relu>, routing = #moe.moesart<k = 2>, training}
// CHECK: return %{{.*}}, %[[L]]
func.func @training(%x: tensor<8x16xf32>, %seed: tensor<i64>, %wr: tensor<16x4xf32>, %w1: tensor<4x16x32xf32>, %w2: tensor<4x32x16xf32>) -> (tensor<8x16xf32>, tensor<f32>) {
  %y, %l = moe.layer %x router(%wr) experts(%w1, %w2) seed(%seed) {routing = #moe.dense, activation = #moe.activation<relu>, training}
         : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>, tensor<i64>) -> (tensor<8x16xf32>, tensor<f32>)
  return %y, %l : tensor<8x16xf32>, tensor<f32>
}

// -----

// Layers that are not dense are left alone; so are the causal marker and
// everything else on a dense one.
// CHECK-LABEL: func.func @mixed
// CHECK: routing = #moe.top_k<k = 1>
// CHECK: moe.causal, routing = #moe.moesart<k = 2>
func.func @mixed(%x: tensor<8x16xf32>, %wr: tensor<16x4xf32>, %w1: tensor<4x16x32xf32>, %w2: tensor<4x32x16xf32>) -> tensor<8x16xf32> {
  // expected-remark @+1 {{layer left unchanged: its routing is #moe.top_k<k = 1>, and --moe-dense-to-moesart rewrites only #moe.dense layers}}
  %a = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.top_k<k = 1>, activation = #moe.activation<relu>}
         : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<8x16xf32>
  %b = moe.layer %a router(%wr) experts(%w1, %w2) {routing = #moe.dense, activation = #moe.activation<relu>, moe.causal}
         : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<8x16xf32>
  return %b : tensor<8x16xf32>
}

// -----

// k larger than E: warned and unchanged (the IR stays valid).
// CHECK-LABEL: func.func @too_few_experts
// CHECK: routing = #moe.dense
// OPTS-LABEL: func.func @too_few_experts
// OPTS: routing = #moe.dense
func.func @too_few_experts(%x: tensor<8x16xf32>, %wr: tensor<16x1xf32>, %w1: tensor<1x16x32xf32>, %w2: tensor<1x32x16xf32>) -> tensor<8x16xf32> {
  // expected-warning @+1 {{dense layer left unchanged: k = 2 exceeds its E = 1 experts}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.dense, activation = #moe.activation<relu>}
         : (tensor<8x16xf32>, tensor<16x1xf32>, tensor<1x16x32xf32>, tensor<1x32x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// A layer that is not dense is left alone, with a remark saying why.
// CHECK-LABEL: func.func @already_top_k
// CHECK: routing = #moe.top_k<k = 2>
func.func @already_top_k(%x: tensor<8x16xf32>, %wr: tensor<16x4xf32>, %w1: tensor<4x16x32xf32>, %w2: tensor<4x32x16xf32>) -> tensor<8x16xf32> {
  // expected-remark @+1 {{layer left unchanged: its routing is #moe.top_k<k = 2>, and --moe-dense-to-moesart rewrites only #moe.dense layers}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>}
         : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// A dense layer's shared expert is carried over to the MOESART layer.
// CHECK-LABEL: func.func @dense_shared
// CHECK: moe.layer %arg0 router(%arg1) experts(%arg2, %arg3) shared(%arg4, %arg5) {activation = #moe.activation<relu>, routing = #moe.moesart<k = 2>}
func.func @dense_shared(%x: tensor<8x16xf32>, %wr: tensor<16x4xf32>, %w1: tensor<4x16x32xf32>, %w2: tensor<4x32x16xf32>, %s1: tensor<16x24xf32>, %s2: tensor<24x16xf32>) -> tensor<8x16xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) shared(%s1, %s2) {routing = #moe.dense, activation = #moe.activation<relu>}
         : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>, tensor<16x24xf32>, tensor<24x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}
