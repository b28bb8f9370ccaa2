// GPU check kit: a bf16 layer at a prefill shape (T*k = 256 = 64 E: the
// 64-row tiles), so that its expert GEMMs run on the wgmma kernels at
// sm_90a (mma.sync at sm_80) and are checked against the CPU path
// (docs/gpu.md, "Which kernel runs where"). Small, to keep the kit small.
func.func @prefill_bf16(%x: tensor<128x128xbf16>, %wr: tensor<128x4xbf16>,
                        %w1: tensor<4x128x256xbf16>, %w2: tensor<4x128x128xbf16>)
    -> tensor<128x128xbf16> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>}
         : (tensor<128x128xbf16>, tensor<128x4xbf16>, tensor<4x128x256xbf16>, tensor<4x128x128xbf16>)
         -> tensor<128x128xbf16>
  return %y : tensor<128x128xbf16>
}
