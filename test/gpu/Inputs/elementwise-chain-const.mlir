// A chain of element-wise ops between two layers, fused into one device
// kernel in device-abi mode (test/gpu/emulated-device-abi-block.test,
// docs/gpu.md): the residual add, a scaling by a dense (non-splat)
// constant, which the kernel reads from a constant global of the
// gpu.module, a compare with a splat constant (a scalar in the kernel) and a
// select. The residual sum is also returned, so the fused kernel writes two
// results; the next layer reads the selected value.
func.func @forward(%x: tensor<16x8xf32>, %wr0: tensor<8x4xf32>, %w10: tensor<4x8x16xf32>,
                   %w20: tensor<4x16x8xf32>, %wr1: tensor<8x4xf32>, %w11: tensor<4x8x16xf32>,
                   %w21: tensor<4x16x8xf32>) -> (tensor<16x8xf32>, tensor<16x8xf32>) {
  %scale = arith.constant dense<[
      [-0.75, -0.50, -0.25, 0.00, 0.25, 0.50, 0.75, -0.75],
      [-0.50, -0.25, 0.00, 0.25, 0.50, 0.75, -0.75, -0.50],
      [-0.25, 0.00, 0.25, 0.50, 0.75, -0.75, -0.50, -0.25],
      [0.00, 0.25, 0.50, 0.75, -0.75, -0.50, -0.25, 0.00],
      [0.25, 0.50, 0.75, -0.75, -0.50, -0.25, 0.00, 0.25],
      [0.50, 0.75, -0.75, -0.50, -0.25, 0.00, 0.25, 0.50],
      [0.75, -0.75, -0.50, -0.25, 0.00, 0.25, 0.50, 0.75],
      [-0.75, -0.50, -0.25, 0.00, 0.25, 0.50, 0.75, -0.75],
      [-0.50, -0.25, 0.00, 0.25, 0.50, 0.75, -0.75, -0.50],
      [-0.25, 0.00, 0.25, 0.50, 0.75, -0.75, -0.50, -0.25],
      [0.00, 0.25, 0.50, 0.75, -0.75, -0.50, -0.25, 0.00],
      [0.25, 0.50, 0.75, -0.75, -0.50, -0.25, 0.00, 0.25],
      [0.50, 0.75, -0.75, -0.50, -0.25, 0.00, 0.25, 0.50],
      [0.75, -0.75, -0.50, -0.25, 0.00, 0.25, 0.50, 0.75],
      [-0.75, -0.50, -0.25, 0.00, 0.25, 0.50, 0.75, -0.75],
      [-0.50, -0.25, 0.00, 0.25, 0.50, 0.75, -0.75, -0.50]]> : tensor<16x8xf32>
  %zero = arith.constant dense<0.0> : tensor<16x8xf32>
  %h0 = moe.layer %x router(%wr0) experts(%w10, %w20)
          {routing = #moe.top_k<k = 2>, activation = #moe.activation<gelu>}
          : (tensor<16x8xf32>, tensor<8x4xf32>, tensor<4x8x16xf32>, tensor<4x16x8xf32>)
          -> tensor<16x8xf32>
  %s = arith.addf %x, %h0 : tensor<16x8xf32>
  %t = arith.mulf %s, %scale : tensor<16x8xf32>
  %pos = arith.cmpf ogt, %t, %zero : tensor<16x8xf32>
  %r = arith.select %pos, %t, %s : tensor<16x8xi1>, tensor<16x8xf32>
  %h1 = moe.layer %r router(%wr1) experts(%w11, %w21)
          {routing = #moe.top_k<k = 1>, activation = #moe.activation<relu>}
          : (tensor<16x8xf32>, tensor<8x4xf32>, tensor<4x8x16xf32>, tensor<4x16x8xf32>)
          -> tensor<16x8xf32>
  return %h1, %s : tensor<16x8xf32>, tensor<16x8xf32>
}
