// A DeepSeek-style layer (docs/spec.md §3.1.1) in f32, the element type of the
// NVPTX kernels: sigmoid router with a selection bias, 4 groups of which 2
// are kept, scale 2.5, a SwiGLU shared expert with a sigmoid gate; dynamic T.
func.func @forward(%x: tensor<?x64xf32>, %wr: tensor<64x16xf32>, %sb: tensor<16xf32>,
                   %w1: tensor<16x64x64xf32>, %w2: tensor<16x32x64xf32>,
                   %s1: tensor<64x128xf32>, %s2: tensor<64x64xf32>, %sg: tensor<64x1xf32>)
    -> tensor<?x64xf32> {
  %y = moe.layer %x router(%wr) selection_bias(%sb) experts(%w1, %w2) shared(%s1, %s2)
         shared_gate(%sg)
         {routing = #moe.top_k<k = 4, score = sigmoid, scale = 2.5, groups = 4, group_k = 2>,
          activation = #moe.activation<swiglu>}
         : (tensor<?x64xf32>, tensor<64x16xf32>, tensor<16xf32>, tensor<16x64x64xf32>,
            tensor<16x32x64xf32>, tensor<64x128xf32>, tensor<64x64xf32>, tensor<64x1xf32>)
         -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}
