// GPU check kit benchmark: a Mixtral-8x7B-shaped layer in bf16 (D=4096,
// H=14336, E=8, top-2, SwiGLU, no biases), any token count.
func.func @mixtral(%x: tensor<?x4096xbf16>,
                   %wr: tensor<4096x8xbf16> {moe.param = "gate.weight"},
                   %w1: tensor<8x4096x28672xbf16> {moe.param = "experts.gate_up"},
                   %w2: tensor<8x14336x4096xbf16> {moe.param = "experts.down"}) -> tensor<?x4096xbf16> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>}
         : (tensor<?x4096xbf16>, tensor<4096x8xbf16>, tensor<8x4096x28672xbf16>, tensor<8x14336x4096xbf16>)
         -> tensor<?x4096xbf16>
  return %y : tensor<?x4096xbf16>
}
