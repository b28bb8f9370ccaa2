// One token (decode), SwiGLU (gated: the shared expert's gate and up halves
// are Hs = 40 apart in s1), a shared gate.
func.func @forward(%x: tensor<1x64xf32>, %wr: tensor<64x8xf32>, %w1: tensor<8x64x64xf32>,
                   %w2: tensor<8x32x64xf32>, %s1: tensor<64x80xf32>, %s2: tensor<40x64xf32>,
                   %sg: tensor<64x1xf32>) -> tensor<1x64xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) shared(%s1, %s2) shared_gate(%sg)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>}
         : (tensor<1x64xf32>, tensor<64x8xf32>, tensor<8x64x64xf32>, tensor<8x32x64xf32>,
            tensor<64x80xf32>, tensor<40x64xf32>, tensor<64x1xf32>) -> tensor<1x64xf32>
  return %y : tensor<1x64xf32>
}
