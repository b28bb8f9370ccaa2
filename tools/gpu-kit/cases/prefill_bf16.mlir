// GPU check kit: a bf16 layer at a prefill shape (T*k = 512 = 64 E: the
// 64-row tiles), so that its expert GEMMs run on the wgmma kernels at
// sm_90a (mma.sync at sm_80) and are checked against the CPU path
// (docs/gpu.md, "Which kernel runs where").
func.func @prefill_bf16(%x: tensor<256x256xbf16>, %wr: tensor<256x8xbf16>,
                        %w1: tensor<8x256x512xbf16>, %w2: tensor<8x256x256xbf16>)
    -> tensor<256x256xbf16> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>}
         : (tensor<256x256xbf16>, tensor<256x8xbf16>, tensor<8x256x512xbf16>, tensor<8x256x256xbf16>)
         -> tensor<256x256xbf16>
  return %y : tensor<256x256xbf16>
}
