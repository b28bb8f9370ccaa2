// test/examples/qwen_style.mlir at T = 16 (a decode step): a shared SwiGLU
// expert (Hs = 192 != H = 64) scaled per token by its sigmoid gate.
func.func @forward(%x: tensor<16x128xf32>,
                   %wr: tensor<128x16xf32> {moe.param = "gate.weight"},
                   %w1: tensor<16x128x128xf32> {moe.param = "experts.gate_up"},
                   %w2: tensor<16x64x128xf32> {moe.param = "experts.down"},
                   %s1: tensor<128x384xf32> {moe.param = "shared.gate_up"},
                   %s2: tensor<192x128xf32> {moe.param = "shared.down"},
                   %sg: tensor<128x1xf32> {moe.param = "shared.gate"}) -> tensor<16x128xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) shared(%s1, %s2) shared_gate(%sg)
         {routing = #moe.top_k<k = 4, normalize = false>, activation = #moe.activation<swiglu>}
         : (tensor<16x128xf32>, tensor<128x16xf32>, tensor<16x128x128xf32>, tensor<16x64x128xf32>,
            tensor<128x384xf32>, tensor<192x128xf32>, tensor<128x1xf32>) -> tensor<16x128xf32>
  return %y : tensor<16x128xf32>
}
