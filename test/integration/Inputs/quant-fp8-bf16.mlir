func.func @forward(%x: tensor<?x64xbf16>, %wr: tensor<64x8xbf16> {moe.param = "wr"},
                   %w1: tensor<8x64x64xf8E4M3FN> {moe.param = "w1"},
                   %w2: tensor<8x32x64xf8E4M3FN> {moe.param = "w2"},
                   %s1: tensor<8x2x4xf32> {moe.param = "w1_scale"},
                   %s2: tensor<8x1x4xf32> {moe.param = "w2_scale"}) -> tensor<?x64xbf16> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_scales(%s1, %s2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>,
          quant = #moe.quant<fp8_e4m3, block = [32, 16]>}
         : (tensor<?x64xbf16>, tensor<64x8xbf16>, tensor<8x64x64xf8E4M3FN>, tensor<8x32x64xf8E4M3FN>,
            tensor<8x2x4xf32>, tensor<8x1x4xf32>) -> tensor<?x64xbf16>
  return %y : tensor<?x64xbf16>
}
