// RUN: moe-opt %s --canonicalize --cse | FileCheck %s
//
// moe.layer and moe.soft_layer are Pure (a seeded training layer is
// deterministic): unused layers are erased and identical ones are merged.

// CHECK-LABEL: func.func @dead_layer
// CHECK-NOT: moe.layer
// CHECK: return %arg0
func.func @dead_layer(%x: tensor<8x16xf32>, %seed: tensor<i64>, %wr: tensor<16x4xf32>, %w1: tensor<4x16x32xf32>, %w2: tensor<4x32x16xf32>) -> tensor<8x16xf32> {
  %y, %l = moe.layer %x router(%wr) experts(%w1, %w2) seed(%seed) {routing = #moe.moesart<k = 2>, activation = #moe.activation<relu>, training}
         : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>, tensor<i64>) -> (tensor<8x16xf32>, tensor<f32>)
  return %x : tensor<8x16xf32>
}

// CHECK-LABEL: func.func @same_seed_cse
// CHECK-COUNT-1: moe.layer
// CHECK-NOT: moe.layer
func.func @same_seed_cse(%x: tensor<8x16xf32>, %seed: tensor<i64>, %wr: tensor<16x4xf32>, %w1: tensor<4x16x32xf32>, %w2: tensor<4x32x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  %y0, %l0 = moe.layer %x router(%wr) experts(%w1, %w2) seed(%seed) {routing = #moe.moesart<k = 2>, activation = #moe.activation<relu>, training}
         : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>, tensor<i64>) -> (tensor<8x16xf32>, tensor<f32>)
  %y1, %l1 = moe.layer %x router(%wr) experts(%w1, %w2) seed(%seed) {routing = #moe.moesart<k = 2>, activation = #moe.activation<relu>, training}
         : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>, tensor<i64>) -> (tensor<8x16xf32>, tensor<f32>)
  return %y0, %y1 : tensor<8x16xf32>, tensor<8x16xf32>
}

// CHECK-LABEL: func.func @dead_soft_layer
// CHECK-NOT: moe.soft_layer
func.func @dead_soft_layer(%x: tensor<2x16x32xf32>, %phi: tensor<32x4x1xf32>, %w1: tensor<4x32x64xf32>, %w2: tensor<4x64x32xf32>) {
  %y = moe.soft_layer %x slots(%phi) experts(%w1, %w2) {activation = #moe.activation<relu>}
         : (tensor<2x16x32xf32>, tensor<32x4x1xf32>, tensor<4x32x64xf32>, tensor<4x64x32xf32>) -> tensor<2x16x32xf32>
  return
}
