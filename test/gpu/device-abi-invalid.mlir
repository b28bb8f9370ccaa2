// REQUIRES: host-supports-nvptx
// RUN: moe-opt %s -split-input-file -verify-diagnostics --convert-moe-to-gpu="device-abi=true"

// device-abi: a host op that would read a device tensor (an argument of a
// public function or a moe op result) is one error naming it. Element-wise
// ops on tensors of one shape run on the device (device-abi-elementwise.mlir);
// anything else does not.

func.func @matmul(%x: tensor<8x16xf32>, %wr: tensor<16x4xf32>, %w1: tensor<4x16x32xf32>,
                  %w2: tensor<4x32x16xf32>, %p: tensor<16x16xf32>) -> tensor<8x16xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>}
         : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<8x16xf32>
  %z = tensor.empty() : tensor<8x16xf32>
  // expected-error @below {{device-abi: 'linalg.matmul' would read a device tensor (an argument of a public function or a moe op result) on the host; only moe ops, element-wise ops on tensors of one shape, tensor.dim, tensor.cast/expand_shape/collapse_shape and func.return may use it}}
  %r = linalg.matmul ins(%y, %p : tensor<8x16xf32>, tensor<16x16xf32>) outs(%z : tensor<8x16xf32>) -> tensor<8x16xf32>
  return %r : tensor<8x16xf32>
}

// -----

// The result of an element-wise op on a device tensor is a device tensor too.
func.func @residual_then_extract(%x: tensor<8x16xf32>, %wr: tensor<16x4xf32>,
                                 %w1: tensor<4x16x32xf32>, %w2: tensor<4x32x16xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>}
         : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<8x16xf32>
  %r = arith.addf %x, %y : tensor<8x16xf32>
  // expected-error @below {{device-abi: 'tensor.extract' would read a device tensor}}
  %e = tensor.extract %r[%c0, %c0] : tensor<8x16xf32>
  return %e : f32
}

// -----

// A linalg.generic that is not element-wise (a transpose) stays on the host.
#id = affine_map<(i, j) -> (i, j)>
#tr = affine_map<(i, j) -> (j, i)>
func.func @transpose(%x: tensor<16x16xf32>, %wr: tensor<16x4xf32>, %w1: tensor<4x16x32xf32>,
                     %w2: tensor<4x32x16xf32>) -> tensor<16x16xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>}
         : (tensor<16x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<16x16xf32>
  %z = tensor.empty() : tensor<16x16xf32>
  // expected-error @below {{device-abi: 'linalg.generic' would read a device tensor}}
  %t = linalg.generic {indexing_maps = [#tr, #id], iterator_types = ["parallel", "parallel"]}
         ins(%y : tensor<16x16xf32>) outs(%z : tensor<16x16xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<16x16xf32>
  return %t : tensor<16x16xf32>
}

// -----

// Element-wise, but with a scalar operand: not a kernel of its own.
func.func @scalar_operand(%x: tensor<8x16xf32>, %wr: tensor<16x4xf32>, %w1: tensor<4x16x32xf32>,
                          %w2: tensor<4x32x16xf32>, %c: i1, %z: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>}
         : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<8x16xf32>
  // expected-error @below {{device-abi: 'arith.select' would read a device tensor}}
  %r = arith.select %c, %y, %z : tensor<8x16xf32>
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
