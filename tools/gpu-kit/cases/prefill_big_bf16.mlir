// GPU check kit: a bf16 layer with 256 rows per expert (T*k = 1024 = 256 E,
// at or above convert-moe-to-gpu's big-tile-rows = 128), so that at sm_90a
// its expert GEMMs run on the 128-row wgmma kernels (two consumer
// warpgroups per block; mma.sync 64-row tiles at sm_80) and are checked
// against the CPU path (docs/gpu.md, "128-row tiles"). Small, to keep the
// kit small.
func.func @prefill_big_bf16(%x: tensor<512x128xbf16>, %wr: tensor<128x4xbf16>,
                            %w1: tensor<4x128x256xbf16>, %w2: tensor<4x128x128xbf16>)
    -> tensor<512x128xbf16> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>}
         : (tensor<512x128xbf16>, tensor<128x4xbf16>, tensor<4x128x256xbf16>, tensor<4x128x128xbf16>)
         -> tensor<512x128xbf16>
  return %y : tensor<512x128xbf16>
}
