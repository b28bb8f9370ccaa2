// Element-wise host tensor ops between two layers, each reading a device
// tensor in device-abi mode (test/gpu/emulated-device-abi-block.test): a
// linalg.generic with a captured constant that also reads its init, a
// math op, a compare + select, and a residual add that the return uses.
#id = affine_map<(i, j) -> (i, j)>
func.func @forward(%x: tensor<40x32xf32>, %wr0: tensor<32x4xf32>, %w10: tensor<4x32x64xf32>,
                   %w20: tensor<4x64x32xf32>, %wr1: tensor<32x4xf32>, %w11: tensor<4x32x64xf32>,
                   %w21: tensor<4x64x32xf32>) -> (tensor<40x32xf32>, tensor<40x32xf32>) {
  %half = arith.constant 0.5 : f32
  %h0 = moe.layer %x router(%wr0) experts(%w10, %w20)
          {routing = #moe.top_k<k = 2>, activation = #moe.activation<gelu>}
          : (tensor<40x32xf32>, tensor<32x4xf32>, tensor<4x32x64xf32>, tensor<4x64x32xf32>)
          -> tensor<40x32xf32>
  // g = 0.5 * h0 + x (the init x is read by the body)
  %g = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
         ins(%h0 : tensor<40x32xf32>) outs(%x : tensor<40x32xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %half : f32
    %s = arith.addf %m, %o : f32
    linalg.yield %s : f32
  } -> tensor<40x32xf32>
  %t = math.tanh %g : tensor<40x32xf32>
  %zero = arith.constant dense<0.0> : tensor<40x32xf32>
  %pos = arith.cmpf ogt, %t, %zero : tensor<40x32xf32>
  %r = arith.select %pos, %t, %g : tensor<40x32xi1>, tensor<40x32xf32>
  %h1 = moe.layer %r router(%wr1) experts(%w11, %w21)
          {routing = #moe.top_k<k = 1>, activation = #moe.activation<relu>}
          : (tensor<40x32xf32>, tensor<32x4xf32>, tensor<4x32x64xf32>, tensor<4x64x32xf32>)
          -> tensor<40x32xf32>
  %y = arith.addf %r, %h1 : tensor<40x32xf32>
  return %y, %t : tensor<40x32xf32>, tensor<40x32xf32>
}
