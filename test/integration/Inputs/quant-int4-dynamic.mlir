func.func @forward(%x: tensor<?x40xf32>, %wr: tensor<40x4xf32> {moe.param = "wr"},
  %w1: tensor<?x40x48xi4> {moe.param = "w1"}, %w2: tensor<?x24x40xi4> {moe.param = "w2"},
  %s1: tensor<?x3x48xf32> {moe.param = "w1_scale"}, %s2: tensor<?x2x40xf32> {moe.param = "w2_scale"}, %z1: tensor<?x3x48xi4> {moe.param = "w1_zero"}, %z2: tensor<?x2x40xi4> {moe.param = "w2_zero"}) -> tensor<?x40xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_scales(%s1, %s2) expert_zero_points(%z1, %z2)
    {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>, quant = #moe.quant<int4, group = 16, zero_point>}
    : (tensor<?x40xf32>, tensor<40x4xf32>, tensor<?x40x48xi4>, tensor<?x24x40xi4>,
       tensor<?x3x48xf32>, tensor<?x2x40xf32>, tensor<?x3x48xi4>, tensor<?x2x40xi4>) -> tensor<?x40xf32>
  return %y : tensor<?x40xf32>
}
