// T = 16 (decode), E = 8, k = 2, relu; the shared expert with a gate and
// Hs = 48 != H = 32.
func.func @forward(%x: tensor<16x64xf32>, %wr: tensor<64x8xf32>, %w1: tensor<8x64x32xf32>,
                   %w2: tensor<8x32x64xf32>, %s1: tensor<64x48xf32>, %s2: tensor<48x64xf32>,
                   %sg: tensor<64x1xf32>) -> tensor<16x64xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) shared(%s1, %s2) shared_gate(%sg)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>}
         : (tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x64x32xf32>, tensor<8x32x64xf32>,
            tensor<64x48xf32>, tensor<48x64xf32>, tensor<64x1xf32>) -> tensor<16x64xf32>
  return %y : tensor<16x64xf32>
}
