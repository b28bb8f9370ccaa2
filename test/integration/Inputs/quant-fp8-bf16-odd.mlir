func.func @forward(%x: tensor<?x63xbf16>, %wr: tensor<63x8xbf16> {moe.param = "wr"},
                   %w1: tensor<8x63x80xf8E4M3FN> {moe.param = "w1"},
                   %w2: tensor<8x40x63xf8E4M3FN> {moe.param = "w2"},
                   %s1: tensor<8x4x3xf32> {moe.param = "w1_scale"},
                   %s2: tensor<8x3x2xf32> {moe.param = "w2_scale"}) -> tensor<?x63xbf16> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_scales(%s1, %s2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>,
          quant = #moe.quant<fp8_e4m3, block = [16, 32]>}
         : (tensor<?x63xbf16>, tensor<63x8xbf16>, tensor<8x63x80xf8E4M3FN>, tensor<8x40x63xf8E4M3FN>,
            tensor<8x4x3xf32>, tensor<8x3x2xf32>) -> tensor<?x63xbf16>
  return %y : tensor<?x63xbf16>
}
