func.func @forward(%x: tensor<?x41xf32>, %wr: tensor<41x4xf32> {moe.param = "wr"},
  %w1: tensor<4x41x24xi4> {moe.param = "w1"}, %w2: tensor<4x24x41xi4> {moe.param = "w2"},
  %s1: tensor<4x3x24xf32> {moe.param = "w1_scale"}, %s2: tensor<4x2x41xf32> {moe.param = "w2_scale"}, %z1: tensor<4x3x24xi4> {moe.param = "w1_zero"}, %z2: tensor<4x2x41xi4> {moe.param = "w2_zero"}) -> tensor<?x41xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_scales(%s1, %s2) expert_zero_points(%z1, %z2)
    {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>, quant = #moe.quant<int4, group = 16, zero_point>}
    : (tensor<?x41xf32>, tensor<41x4xf32>, tensor<4x41x24xi4>, tensor<4x24x41xi4>,
       tensor<4x3x24xf32>, tensor<4x2x41xf32>, tensor<4x3x24xi4>, tensor<4x2x41xi4>) -> tensor<?x41xf32>
  return %y : tensor<?x41xf32>
}
