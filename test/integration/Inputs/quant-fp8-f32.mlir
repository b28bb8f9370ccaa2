func.func @forward(%x: tensor<?x40xf32>, %wr: tensor<40x4xf32> {moe.param = "wr"},
                   %w1: tensor<4x40x48xf8E4M3FN> {moe.param = "w1"},
                   %w2: tensor<4x24x40xf8E4M3FN> {moe.param = "w2"},
                   %s1: tensor<4x3x2xf32> {moe.param = "w1_scale"},
                   %s2: tensor<4x2x2xf32> {moe.param = "w2_scale"}) -> tensor<?x40xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_scales(%s1, %s2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>,
          quant = #moe.quant<fp8_e4m3, block = [16, 32]>}
         : (tensor<?x40xf32>, tensor<40x4xf32>, tensor<4x40x48xf8E4M3FN>, tensor<4x24x40xf8E4M3FN>,
            tensor<4x3x2xf32>, tensor<4x2x2xf32>) -> tensor<?x40xf32>
  return %y : tensor<?x40xf32>
}
