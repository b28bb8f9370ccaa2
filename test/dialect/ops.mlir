// RUN: moe-opt %s | FileCheck %s
// RUN: moe-opt %s | moe-opt | FileCheck %s
// RUN: moe-opt %s --mlir-print-op-generic | moe-opt | FileCheck %s
//
// Round-trip of moe.layer and moe.soft_layer beyond the spec examples:
// dynamic shapes, f16/bf16, every routing in training mode, optional operands.

// CHECK-LABEL: func.func @dynamic_shapes
// CHECK: moe.layer %arg0 router(%arg1) experts(%arg2, %arg3) {activation = #moe.activation<silu>, routing = #moe.top_k<k = 1>}
// CHECK-SAME: : (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?xf32>
func.func @dynamic_shapes(%x: tensor<?x?xf32>, %wr: tensor<?x?xf32>, %w1: tensor<?x?x?xf32>, %w2: tensor<?x?x?xf32>) -> tensor<?x?xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.top_k<k = 1>, activation = #moe.activation<silu>}
         : (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}

// Only some sizes known: T dynamic, gated width known from w1 alone.
// CHECK-LABEL: func.func @partially_dynamic
// CHECK: moe.layer %arg0 router(%arg1, %arg2) experts(%arg3, %arg4) expert_biases(%arg5, %arg6) {activation = #moe.activation<geglu>, routing = #moe.top_k<k = 2>}
func.func @partially_dynamic(%x: tensor<?x64xbf16>, %wr: tensor<64x4xbf16>, %br: tensor<4xbf16>, %w1: tensor<4x64x64xbf16>, %w2: tensor<4x?x64xbf16>, %b1: tensor<4x64xbf16>, %b2: tensor<4x64xbf16>) -> tensor<?x64xbf16> {
  %y = moe.layer %x router(%wr, %br) experts(%w1, %w2) expert_biases(%b1, %b2) {routing = #moe.top_k<k = 2>, activation = #moe.activation<geglu>}
         : (tensor<?x64xbf16>, tensor<64x4xbf16>, tensor<4xbf16>, tensor<4x64x64xbf16>, tensor<4x?x64xbf16>, tensor<4x64xbf16>, tensor<4x64xbf16>) -> tensor<?x64xbf16>
  return %y : tensor<?x64xbf16>
}

// Every routing in training mode returns the aux loss (0 without regularizer).
// CHECK-LABEL: func.func @training_modes
// CHECK: moe.layer %arg0 router(%arg2) experts(%arg3, %arg4) seed(%arg1) {activation = #moe.activation<gelu_tanh>, routing = #moe.dense, training}
// CHECK: moe.layer %arg0 router(%arg2) experts(%arg3, %arg4) seed(%arg1) {activation = #moe.activation<gelu_tanh>, routing = #moe.top_k<k = 4>, training}
// CHECK: moe.layer %arg0 router(%arg2) experts(%arg3, %arg4) seed(%arg1) {activation = #moe.activation<gelu_tanh>, routing = #moe.moesart<k = 1, adjust = zero>, training}
// CHECK: moe.layer %arg0 router(%arg2) experts(%arg3, %arg4) seed(%arg1) {activation = #moe.activation<gelu_tanh>, routing = #moe.moesart<k = 3, adjust = large, trimmed_lasso = 2.500000e-01>, training}
func.func @training_modes(%x: tensor<8x16xf16>, %seed: tensor<i64>, %wr: tensor<16x4xf16>, %w1: tensor<4x16x32xf16>, %w2: tensor<4x32x16xf16>)
    -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) {
  %y0, %l0 = moe.layer %x router(%wr) experts(%w1, %w2) seed(%seed) {routing = #moe.dense, activation = #moe.activation<gelu_tanh>, training}
         : (tensor<8x16xf16>, tensor<16x4xf16>, tensor<4x16x32xf16>, tensor<4x32x16xf16>, tensor<i64>) -> (tensor<8x16xf16>, tensor<f32>)
  %y1, %l1 = moe.layer %x router(%wr) experts(%w1, %w2) seed(%seed) {routing = #moe.top_k<k = 4>, activation = #moe.activation<gelu_tanh>, training}
         : (tensor<8x16xf16>, tensor<16x4xf16>, tensor<4x16x32xf16>, tensor<4x32x16xf16>, tensor<i64>) -> (tensor<8x16xf16>, tensor<f32>)
  %y2, %l2 = moe.layer %x router(%wr) experts(%w1, %w2) seed(%seed) {routing = #moe.moesart<k = 1, adjust = zero>, activation = #moe.activation<gelu_tanh>, training}
         : (tensor<8x16xf16>, tensor<16x4xf16>, tensor<4x16x32xf16>, tensor<4x32x16xf16>, tensor<i64>) -> (tensor<8x16xf16>, tensor<f32>)
  %y3, %l3 = moe.layer %x router(%wr) experts(%w1, %w2) seed(%seed) {routing = #moe.moesart<k = 3, adjust = large, trimmed_lasso = 0.25>, activation = #moe.activation<gelu_tanh>, training}
         : (tensor<8x16xf16>, tensor<16x4xf16>, tensor<4x16x32xf16>, tensor<4x32x16xf16>, tensor<i64>) -> (tensor<8x16xf16>, tensor<f32>)
  return %l0, %l1, %l2, %l3 : tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>
}

// CHECK-LABEL: func.func @soft_minimal
// CHECK: moe.soft_layer %arg0 slots(%arg1) experts(%arg2, %arg3) {activation = #moe.activation<relu>}
// CHECK-SAME: : (tensor<2x16x32xf32>, tensor<32x4x1xf32>, tensor<4x32x64xf32>, tensor<4x64x32xf32>) -> tensor<2x16x32xf32>
func.func @soft_minimal(%x: tensor<2x16x32xf32>, %phi: tensor<32x4x1xf32>, %w1: tensor<4x32x64xf32>, %w2: tensor<4x64x32xf32>) -> tensor<2x16x32xf32> {
  %y = moe.soft_layer %x slots(%phi) experts(%w1, %w2) {activation = #moe.activation<relu>}
         : (tensor<2x16x32xf32>, tensor<32x4x1xf32>, tensor<4x32x64xf32>, tensor<4x64x32xf32>) -> tensor<2x16x32xf32>
  return %y : tensor<2x16x32xf32>
}

// CHECK-LABEL: func.func @soft_dynamic_gated
// CHECK: moe.soft_layer %arg0 slots(%arg1) scale(%arg2) experts(%arg3, %arg4) {activation = #moe.activation<swiglu>, normalize}
func.func @soft_dynamic_gated(%x: tensor<?x?x32xf16>, %phi: tensor<32x?x?xf16>, %s: tensor<f16>, %w1: tensor<?x32x128xf16>, %w2: tensor<?x64x32xf16>) -> tensor<?x?x32xf16> {
  %y = moe.soft_layer %x slots(%phi) scale(%s) experts(%w1, %w2) {activation = #moe.activation<swiglu>, normalize}
         : (tensor<?x?x32xf16>, tensor<32x?x?xf16>, tensor<f16>, tensor<?x32x128xf16>, tensor<?x64x32xf16>) -> tensor<?x?x32xf16>
  return %y : tensor<?x?x32xf16>
}
