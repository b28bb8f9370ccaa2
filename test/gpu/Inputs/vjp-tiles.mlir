// A small bf16 layer (T is set by the test) whose gradient runs the 64-row tiles
// of the tensor-core backward (test/gpu/emulated-vjp-tiles.test): E = 4,
// top-2, so T*k/E rows per expert on average; SwiGLU with expert biases (the
// bias gradients as the weight-gradient GEMMs' row of ones).
func.func @f(%x: tensor<?x64xbf16>,
             %wr: tensor<64x4xbf16>,
             %w1: tensor<4x64x160xbf16>,
             %w2: tensor<4x80x64xbf16>,
             %b1: tensor<4x160xbf16>,
             %b2: tensor<4x64xbf16>) -> tensor<?x64xbf16> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_biases(%b1, %b2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>}
         : (tensor<?x64xbf16>, tensor<64x4xbf16>, tensor<4x64x160xbf16>, tensor<4x80x64xbf16>,
            tensor<4x160xbf16>, tensor<4x64xbf16>) -> tensor<?x64xbf16>
  return %y : tensor<?x64xbf16>
}
