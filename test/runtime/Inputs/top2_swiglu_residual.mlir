// test/examples/top2_swiglu.mlir plus a residual connection: the add reads
// the input and the layer's result; in device-abi mode it is one more
// kernel (moe_elementwise_addf_*), so moe-run --device=cuda keeps the
// arguments on the device as for the layer alone.
func.func @forward(%x: tensor<32x256xf32>,
                   %wr: tensor<256x8xf32> {moe.param = "gate.weight"},
                   %w1: tensor<8x256x1024xf32> {moe.param = "experts.gate_up"},
                   %w2: tensor<8x512x256xf32> {moe.param = "experts.down"}) -> tensor<32x256xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>}
         : (tensor<32x256xf32>, tensor<256x8xf32>, tensor<8x256x1024xf32>, tensor<8x512x256xf32>)
         -> tensor<32x256xf32>
  %r = arith.addf %y, %x : tensor<32x256xf32>
  return %r : tensor<32x256xf32>
}
