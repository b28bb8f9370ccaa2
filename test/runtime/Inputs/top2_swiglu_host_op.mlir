// test/examples/top2_swiglu.mlir plus a host op on the layer's result (a
// transpose, not element-wise): moe-run --device=cuda cannot keep the
// arguments on the device (deviceAbiApplies says so before lowering) and
// lowers once with the host ABI (copies in and out per call).
func.func @forward(%x: tensor<32x256xf32>,
                   %wr: tensor<256x8xf32> {moe.param = "gate.weight"},
                   %w1: tensor<8x256x1024xf32> {moe.param = "experts.gate_up"},
                   %w2: tensor<8x512x256xf32> {moe.param = "experts.down"}) -> tensor<256x32xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>}
         : (tensor<32x256xf32>, tensor<256x8xf32>, tensor<8x256x1024xf32>, tensor<8x512x256xf32>)
         -> tensor<32x256xf32>
  %e = tensor.empty() : tensor<256x32xf32>
  %t = linalg.transpose ins(%y : tensor<32x256xf32>) outs(%e : tensor<256x32xf32>) permutation = [1, 0]
  return %t : tensor<256x32xf32>
}
