func.func @forward(%x: tensor<?x40xf32>, %wr: tensor<40x4xf32> {moe.param = "wr"},
  %w1: tensor<4x40x20xi4> {moe.param = "w1"}, %w2: tensor<4x20x40xi4> {moe.param = "w2"},
  %s1: tensor<4x5x20xf32> {moe.param = "w1_scale"}, %s2: tensor<4x3x40xf32> {moe.param = "w2_scale"}) -> tensor<?x40xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_scales(%s1, %s2)
    {routing = #moe.top_k<k = 2>, activation = #moe.activation<gelu>, quant = #moe.quant<int4, group = 8, int8_activations>}
    : (tensor<?x40xf32>, tensor<40x4xf32>, tensor<4x40x20xi4>, tensor<4x20x40xi4>,
       tensor<4x5x20xf32>, tensor<4x3x40xf32>) -> tensor<?x40xf32>
  return %y : tensor<?x40xf32>
}
