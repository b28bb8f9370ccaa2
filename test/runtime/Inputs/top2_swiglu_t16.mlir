// test/examples/top2_swiglu.mlir at T=16 (decode-sized): one moe.layer.
// W1 holds the gate and up projections side by side: [E, D, 2H].
func.func @forward(%x: tensor<16x256xf32>,
                   %wr: tensor<256x8xf32> {moe.param = "gate.weight"},
                   %w1: tensor<8x256x1024xf32> {moe.param = "experts.gate_up"},
                   %w2: tensor<8x512x256xf32> {moe.param = "experts.down"}) -> tensor<16x256xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>}
         : (tensor<16x256xf32>, tensor<256x8xf32>, tensor<8x256x1024xf32>, tensor<8x512x256xf32>)
         -> tensor<16x256xf32>
  return %y : tensor<16x256xf32>
}
