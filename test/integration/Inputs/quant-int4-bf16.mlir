func.func @forward(%x: tensor<?x64xbf16>, %wr: tensor<64x8xbf16> {moe.param = "wr"},
  %w1: tensor<8x64x64xi4> {moe.param = "w1"}, %w2: tensor<8x32x64xi4> {moe.param = "w2"},
  %s1: tensor<8x2x64xf32> {moe.param = "w1_scale"}, %s2: tensor<8x1x64xf32> {moe.param = "w2_scale"}, %z1: tensor<8x2x64xi4> {moe.param = "w1_zero"}, %z2: tensor<8x1x64xi4> {moe.param = "w2_zero"}) -> tensor<?x64xbf16> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_scales(%s1, %s2) expert_zero_points(%z1, %z2)
    {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>, quant = #moe.quant<int4, group = 32, zero_point>}
    : (tensor<?x64xbf16>, tensor<64x8xbf16>, tensor<8x64x64xi4>, tensor<8x32x64xi4>,
       tensor<8x2x64xf32>, tensor<8x1x64xf32>, tensor<8x2x64xi4>, tensor<8x1x64xi4>) -> tensor<?x64xbf16>
  return %y : tensor<?x64xbf16>
}
