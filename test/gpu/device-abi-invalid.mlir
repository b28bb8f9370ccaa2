// REQUIRES: host-supports-nvptx
// RUN: moe-opt %s -split-input-file -verify-diagnostics --convert-moe-to-gpu="device-abi=true"

// device-abi: a host op that would read a device tensor (an argument of a
// public function or a moe op result) is one error naming it.

func.func @residual(%x: tensor<8x16xf32>, %wr: tensor<16x4xf32>, %w1: tensor<4x16x32xf32>,
                    %w2: tensor<4x32x16xf32>) -> tensor<8x16xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>}
         : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<8x16xf32>
  // expected-error @below {{device-abi: 'arith.addf' would read a device tensor (an argument of a public function or a moe op result) on the host}}
  %r = arith.addf %x, %y : tensor<8x16xf32>
  return %r : tensor<8x16xf32>
}

// -----

func.func @extract(%x: tensor<8x16xf32>, %wr: tensor<16x4xf32>, %w1: tensor<4x16x32xf32>,
                   %w2: tensor<4x32x16xf32>) -> (tensor<8x16xf32>, f32) {
  %c0 = arith.constant 0 : index
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>}
         : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<8x16xf32>
  %v = tensor.cast %y : tensor<8x16xf32> to tensor<?x16xf32>
  // expected-error @below {{device-abi: 'tensor.extract' would read a device tensor}}
  %e = tensor.extract %v[%c0, %c0] : tensor<?x16xf32>
  return %y, %e : tensor<8x16xf32>, f32
}
