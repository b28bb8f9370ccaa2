// T = 16, relu, expert biases (which the shared tiles must not add), the
// shared expert without a gate and Hs = 16 < H = 32.
func.func @forward(%x: tensor<16x64xf32>, %wr: tensor<64x8xf32>, %br: tensor<8xf32>,
                   %w1: tensor<8x64x32xf32>, %w2: tensor<8x32x64xf32>, %b1: tensor<8x32xf32>,
                   %b2: tensor<8x64xf32>, %s1: tensor<64x16xf32>, %s2: tensor<16x64xf32>)
    -> tensor<16x64xf32> {
  %y = moe.layer %x router(%wr, %br) experts(%w1, %w2) expert_biases(%b1, %b2) shared(%s1, %s2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>}
         : (tensor<16x64xf32>, tensor<64x8xf32>, tensor<8xf32>, tensor<8x64x32xf32>,
            tensor<8x32x64xf32>, tensor<8x32xf32>, tensor<8x64xf32>, tensor<64x16xf32>,
            tensor<16x64xf32>) -> tensor<16x64xf32>
  return %y : tensor<16x64xf32>
}
