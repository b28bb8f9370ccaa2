// RUN: moe-opt %s | FileCheck %s
// RUN: moe-opt %s | moe-opt | FileCheck %s
// RUN: moe-opt %s --mlir-print-op-generic | moe-opt | FileCheck %s
//
// Round-trip of the decomposed chain ops (docs/spec.md §3.3).

// CHECK-LABEL: func.func @token_choice
// CHECK: %[[O:.*]] = moe.route %arg0 router(%arg1, %arg2) : (tensor<64x128xf32>, tensor<128x8xf32>, tensor<8xf32>) -> tensor<64x8xf32>
// CHECK: %[[W:.*]], %[[I:.*]] = moe.gate %[[O]] {routing = #moe.top_k<k = 2>} : (tensor<64x8xf32>) -> (tensor<64x2xf32>, tensor<64x2xi32>)
// CHECK: %[[ROWS:.*]], %[[OFF:.*]], %{{.*}}, %[[POS:.*]] = moe.dispatch %arg0, %[[I]] {capacity_factor = 1.250000e+00 : f64, num_experts = 8 : i64}
// CHECK-SAME: -> (tensor<128x128xf32>, tensor<9xi32>, tensor<128xi32>, tensor<64x2xi32>)
// CHECK: %[[OUT:.*]] = moe.expert_ffn %[[ROWS]], %[[OFF]] experts(%arg3, %arg4) expert_biases(%arg5, %arg6) {activation = #moe.activation<gelu>}
// CHECK: moe.combine %[[OUT]], %[[W]], %[[POS]] : (tensor<128x128xf32>, tensor<64x2xf32>, tensor<64x2xi32>) -> tensor<64x128xf32>
func.func @token_choice(%x: tensor<64x128xf32>, %wr: tensor<128x8xf32>, %br: tensor<8xf32>,
                        %w1: tensor<8x128x512xf32>, %w2: tensor<8x512x128xf32>,
                        %b1: tensor<8x512xf32>, %b2: tensor<8x128xf32>) -> tensor<64x128xf32> {
  %o = moe.route %x router(%wr, %br) : (tensor<64x128xf32>, tensor<128x8xf32>, tensor<8xf32>) -> tensor<64x8xf32>
  %w, %i = moe.gate %o {routing = #moe.top_k<k = 2>} : (tensor<64x8xf32>) -> (tensor<64x2xf32>, tensor<64x2xi32>)
  %rows, %offsets, %src, %pos = moe.dispatch %x, %i {num_experts = 8 : i64, capacity_factor = 1.25 : f64}
      : (tensor<64x128xf32>, tensor<64x2xi32>) -> (tensor<128x128xf32>, tensor<9xi32>, tensor<128xi32>, tensor<64x2xi32>)
  %out = moe.expert_ffn %rows, %offsets experts(%w1, %w2) expert_biases(%b1, %b2) {activation = #moe.activation<gelu>}
      : (tensor<128x128xf32>, tensor<9xi32>, tensor<8x128x512xf32>, tensor<8x512x128xf32>, tensor<8x512xf32>, tensor<8x128xf32>) -> tensor<128x128xf32>
  %y = moe.combine %out, %w, %pos : (tensor<128x128xf32>, tensor<64x2xf32>, tensor<64x2xi32>) -> tensor<64x128xf32>
  return %y : tensor<64x128xf32>
}

// CHECK-LABEL: func.func @training_gate
// CHECK: moe.gate %arg0 seed(%arg1) {routing = #moe.moesart<k = 2, adjust = large>, training} : (tensor<?x16xf32>, tensor<i64>) -> (tensor<?x2xf32>, tensor<?x2xi32>, tensor<f32>)
func.func @training_gate(%o: tensor<?x16xf32>, %seed: tensor<i64>) -> tensor<f32> {
  %w, %i, %loss = moe.gate %o seed(%seed) {routing = #moe.moesart<k = 2, adjust = large>, training}
      : (tensor<?x16xf32>, tensor<i64>) -> (tensor<?x2xf32>, tensor<?x2xi32>, tensor<f32>)
  return %loss : tensor<f32>
}

// CHECK-LABEL: func.func @dense_gate
// CHECK: moe.gate %arg0 {routing = #moe.dense} : (tensor<32x4xf32>) -> (tensor<32x4xf32>, tensor<32x4xi32>)
func.func @dense_gate(%o: tensor<32x4xf32>) -> tensor<32x4xf32> {
  %w, %i = moe.gate %o {routing = #moe.dense} : (tensor<32x4xf32>) -> (tensor<32x4xf32>, tensor<32x4xi32>)
  return %w : tensor<32x4xf32>
}

// CHECK-LABEL: func.func @soft_chain
// CHECK: %[[ROWS:.*]], %[[OFF:.*]], %[[CW:.*]] = moe.soft_dispatch %arg0 slots(%arg1) scale(%arg2) {normalize} : (tensor<4x64x128xf32>, tensor<128x8x2xf32>, tensor<f32>) -> (tensor<64x128xf32>, tensor<9xi32>, tensor<4x64x8x2xf32>)
// CHECK: %[[OUT:.*]] = moe.expert_ffn %[[ROWS]], %[[OFF]] experts(%arg3, %arg4) {activation = #moe.activation<swiglu>}
// CHECK: moe.soft_combine %[[OUT]], %[[CW]] : (tensor<64x128xf32>, tensor<4x64x8x2xf32>) -> tensor<4x64x128xf32>
func.func @soft_chain(%x: tensor<4x64x128xf32>, %phi: tensor<128x8x2xf32>, %scale: tensor<f32>,
                      %w1: tensor<8x128x1024xf32>, %w2: tensor<8x512x128xf32>) -> tensor<4x64x128xf32> {
  %rows, %offsets, %cw = moe.soft_dispatch %x slots(%phi) scale(%scale) {normalize}
      : (tensor<4x64x128xf32>, tensor<128x8x2xf32>, tensor<f32>) -> (tensor<64x128xf32>, tensor<9xi32>, tensor<4x64x8x2xf32>)
  %out = moe.expert_ffn %rows, %offsets experts(%w1, %w2) {activation = #moe.activation<swiglu>}
      : (tensor<64x128xf32>, tensor<9xi32>, tensor<8x128x1024xf32>, tensor<8x512x128xf32>) -> tensor<64x128xf32>
  %y = moe.soft_combine %out, %cw : (tensor<64x128xf32>, tensor<4x64x8x2xf32>) -> tensor<4x64x128xf32>
  return %y : tensor<4x64x128xf32>
}

// A capacity factor on the layer itself.
// CHECK-LABEL: func.func @layer_capacity
// CHECK: moe.layer {{.*}} {activation = #moe.activation<relu>, capacity_factor = 1.000000e+00 : f64, routing = #moe.top_k<k = 1>}
func.func @layer_capacity(%x: tensor<8x16xf32>, %wr: tensor<16x4xf32>, %w1: tensor<4x16x32xf32>, %w2: tensor<4x32x16xf32>) -> tensor<8x16xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.top_k<k = 1>, activation = #moe.activation<relu>, capacity_factor = 1.0 : f64}
         : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// docs/spec.md §3.1.1 forms of the chain ops.
// CHECK-LABEL: func.func @production_chain
// CHECK: moe.gate %arg0 selection_bias(%arg1) {routing = #moe.top_k<k = 2, score = sigmoid, normalize = false, scale = 2.000000e+00, groups = 2, group_k = 1>} : (tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x2xf32>, tensor<4x2xi32>)
// CHECK: moe.shared_expert %arg2 shared(%arg3, %arg4) gate(%arg5) {activation = #moe.activation<silu>} : (tensor<4x16xbf16>, tensor<16x24xbf16>, tensor<24x16xbf16>, tensor<16x1xbf16>) -> tensor<4x16xf32>
// CHECK: moe.combine %arg6, %{{.*}}, %arg7 shared_output(%{{.*}}) : (tensor<8x16xbf16>, tensor<4x2xf32>, tensor<4x2xi32>, tensor<4x16xf32>) -> tensor<4x16xbf16>
func.func @production_chain(%o: tensor<4x8xf32>, %b: tensor<8xf32>, %x: tensor<4x16xbf16>, %s1: tensor<16x24xbf16>, %s2: tensor<24x16xbf16>, %sg: tensor<16x1xbf16>, %out: tensor<8x16xbf16>, %pos: tensor<4x2xi32>) -> tensor<4x16xbf16> {
  %w, %i = moe.gate %o selection_bias(%b) {routing = #moe.top_k<k = 2, score = sigmoid, normalize = false, scale = 2.0, groups = 2, group_k = 1>}
      : (tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x2xf32>, tensor<4x2xi32>)
  %s = moe.shared_expert %x shared(%s1, %s2) gate(%sg) {activation = #moe.activation<silu>}
      : (tensor<4x16xbf16>, tensor<16x24xbf16>, tensor<24x16xbf16>, tensor<16x1xbf16>) -> tensor<4x16xf32>
  %y = moe.combine %out, %w, %pos shared_output(%s)
      : (tensor<8x16xbf16>, tensor<4x2xf32>, tensor<4x2xi32>, tensor<4x16xf32>) -> tensor<4x16xbf16>
  return %y : tensor<4x16xbf16>
}
