// RUN: moe-opt %s --moe-dense-to-soft -split-input-file -verify-diagnostics | FileCheck %s
// The last case fails (dynamic T), hence `not`; the other cases still print.
// RUN: not moe-opt %s --moe-dense-to-soft="slots-per-expert=2 group-size=4 normalize=false" -split-input-file 2>/dev/null | FileCheck %s --check-prefix=OPTS
// RUN: moe-opt %examples/block.mlir --moe-dense-to-soft 2>&1 | FileCheck %s --check-prefix=BLOCK
// RUN: not moe-opt %s --moe-dense-to-soft="group-size=3" -split-input-file 2>&1 | FileCheck %s --check-prefix=GROUP
// RUN: not moe-opt %s --moe-dense-to-soft="slots-per-expert=0" 2>&1 | FileCheck %s --check-prefix=SLOTS

// block.mlir: layer 0 becomes Soft MoE, the causal layer 1 is kept and named.
// BLOCK: block.mlir:16:9: warning: layer marked moe.causal left unchanged: Soft MoE mixes tokens across positions inside a group, which a causal layer must not do
// BLOCK: %[[X:.*]] = tensor.expand_shape %arg0 {{\[}}[0, 1], [2]] output_shape [1, 128, 64] : tensor<128x64xf32> into tensor<1x128x64xf32>
// BLOCK: %[[PHI:.*]] = linalg.broadcast ins(%arg1 : tensor<64x4xf32>) outs(%{{.*}} : tensor<64x4x1xf32>) dimensions = [2]
// BLOCK: %[[S:.*]] = moe.soft_layer %[[X]] slots(%[[PHI]]) experts(%arg2, %arg3) {activation = #moe.activation<gelu>, normalize}
// BLOCK: tensor.collapse_shape %[[S]] {{\[}}[0, 1], [2]] : tensor<1x128x64xf32> into tensor<128x64xf32>
// BLOCK: moe.layer %{{.*}} router(%arg4) experts(%arg5, %arg6) {activation = #moe.activation<gelu>, moe.causal, routing = #moe.dense}

// GROUP: error: cannot turn this dense layer into Soft MoE: group-size = 3 does not divide the T = 8 tokens
// SLOTS: moe-dense-to-soft: slots-per-expert must be >= 1, got 0

// The router bias is dropped, biases of the experts are kept, and the
// function's types do not change.
// CHECK-LABEL: func.func @with_biases(%arg0: tensor<8x16xf32>
// CHECK-SAME: -> tensor<8x16xf32>
// CHECK-NEXT: %[[X:.*]] = tensor.expand_shape %arg0 {{\[}}[0, 1], [2]] output_shape [1, 8, 16]
// CHECK-NEXT: %[[E:.*]] = tensor.empty() : tensor<16x4x1xf32>
// CHECK-NEXT: %[[PHI:.*]] = linalg.broadcast ins(%arg1 : tensor<16x4xf32>) outs(%[[E]] : tensor<16x4x1xf32>) dimensions = [2]
// CHECK-NEXT: %[[S:.*]] = moe.soft_layer %[[X]] slots(%[[PHI]]) experts(%arg3, %arg4) expert_biases(%arg5, %arg6) {activation = #moe.activation<silu>, normalize}
// CHECK-SAME: (tensor<1x8x16xf32>, tensor<16x4x1xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>, tensor<4x32xf32>, tensor<4x16xf32>) -> tensor<1x8x16xf32>
// CHECK-NEXT: %[[Y:.*]] = tensor.collapse_shape %[[S]] {{\[}}[0, 1], [2]] : tensor<1x8x16xf32> into tensor<8x16xf32>
// CHECK-NEXT: return %[[Y]]
// OPTS-LABEL: func.func @with_biases
// OPTS: output_shape [2, 4, 16]
// OPTS: outs(%{{.*}} : tensor<16x4x2xf32>)
// OPTS: moe.soft_layer {{.*}} {activation = #moe.activation<silu>} :
func.func @with_biases(%x: tensor<8x16xf32>, %wr: tensor<16x4xf32>, %br: tensor<4xf32>, %w1: tensor<4x16x32xf32>, %w2: tensor<4x32x16xf32>, %b1: tensor<4x32xf32>, %b2: tensor<4x16xf32>) -> tensor<8x16xf32> {
  %y = moe.layer %x router(%wr, %br) experts(%w1, %w2) expert_biases(%b1, %b2) {routing = #moe.dense, activation = #moe.activation<silu>}
         : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>, tensor<4x32xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// Training: the aux loss becomes 0 and the seed is no longer used.
// CHECK-LABEL: func.func @training
// CHECK-NEXT: %[[Z:.*]] = arith.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[X:.*]] = tensor.expand_shape %arg0
// CHECK-NEXT: %[[E:.*]] = tensor.empty() : tensor<16x4x1xf32>
// CHECK-NEXT: %[[PHI:.*]] = linalg.broadcast ins(%arg2 : tensor<16x4xf32>) outs(%[[E]] : tensor<16x4x1xf32>)
// CHECK-NEXT: %[[S:.*]] = moe.soft_layer %[[X]] slots(%[[PHI]]) experts(%arg3, %arg4) {activation = #moe.activation<relu>, normalize}
// CHECK-NEXT: %[[Y:.*]] = tensor.collapse_shape %[[S]]
// CHECK-NEXT: return %[[Y]], %[[Z]]
func.func @training(%x: tensor<8x16xf32>, %seed: tensor<i64>, %wr: tensor<16x4xf32>, %w1: tensor<4x16x32xf32>, %w2: tensor<4x32x16xf32>) -> (tensor<8x16xf32>, tensor<f32>) {
  %y, %l = moe.layer %x router(%wr) experts(%w1, %w2) seed(%seed) {routing = #moe.dense, activation = #moe.activation<relu>, training}
         : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>, tensor<i64>) -> (tensor<8x16xf32>, tensor<f32>)
  return %y, %l : tensor<8x16xf32>, tensor<f32>
}

// -----

// Sparse layers are not dense: untouched.
// CHECK-LABEL: func.func @sparse
// CHECK: moe.layer {{.*}} routing = #moe.top_k<k = 2>
// CHECK-NOT: moe.soft_layer
func.func @sparse(%x: tensor<8x16xf32>, %wr: tensor<16x4xf32>, %w1: tensor<4x16x32xf32>, %w2: tensor<4x32x16xf32>) -> tensor<8x16xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>}
         : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// A dynamic token count cannot be regrouped: an error names the layer.
func.func @dynamic_tokens(%x: tensor<?x16xf32>, %wr: tensor<16x4xf32>, %w1: tensor<4x16x32xf32>, %w2: tensor<4x32x16xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{cannot turn this dense layer into Soft MoE: the number of tokens T is dynamic, and regrouping [T, D] into [T/M, M, D] needs it}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.dense, activation = #moe.activation<relu>}
         : (tensor<?x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

// A dense layer with a shared expert stays (Soft MoE defines none).
// CHECK-LABEL: func.func @dense_shared
// CHECK: moe.layer %arg0 router(%arg1) experts(%arg2, %arg3) shared(%arg4, %arg5)
func.func @dense_shared(%x: tensor<8x16xf32>, %wr: tensor<16x4xf32>, %w1: tensor<4x16x32xf32>, %w2: tensor<4x32x16xf32>, %s1: tensor<16x24xf32>, %s2: tensor<24x16xf32>) -> tensor<8x16xf32> {
  // expected-warning @+1 {{dense layer with a shared expert left unchanged: Soft MoE (docs/spec.md §3.2) defines no shared expert}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) shared(%s1, %s2) {routing = #moe.dense, activation = #moe.activation<relu>}
         : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>, tensor<16x24xf32>, tensor<24x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}
