// test/examples/top2_swiglu.mlir plus a residual connection: a host op (the
// add) reads the input, so moe-run --device=cuda cannot keep the arguments
// on the device and lowers with the host ABI (copies in and out per call).
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
