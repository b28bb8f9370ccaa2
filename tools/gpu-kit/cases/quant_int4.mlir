// GPU check kit case (prepare.sh): int4 group-quantized expert weights
// (#moe.quant, docs/spec.md §2.1) with zero points on the GPU path's
// tensor-core GEMMs (groups of 32 are whole k-tiles), which stage each code as
// its exact bf16 factor q - z and scale each group's partial sums
// (docs/gpu.md, "Quantized expert weights"): bf16 tokens, top-2 of 8,
// SwiGLU, groups of 32.
// moe-run --fill-random gives the codes and zero points uniform 0..15.
func.func @forward(%x: tensor<?x64xbf16>, %wr: tensor<64x8xbf16> {moe.param = "wr"},
                   %w1: tensor<8x64x128xi4> {moe.param = "w1"},
                   %w2: tensor<8x64x64xi4> {moe.param = "w2"},
                   %s1: tensor<8x2x128xf32> {moe.param = "s1"},
                   %s2: tensor<8x2x64xf32> {moe.param = "s2"},
                   %z1: tensor<8x2x128xi4> {moe.param = "z1"},
                   %z2: tensor<8x2x64xi4> {moe.param = "z2"}) -> tensor<?x64xbf16> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_scales(%s1, %s2)
         expert_zero_points(%z1, %z2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>,
          quant = #moe.quant<int4, group = 32, zero_point>}
         : (tensor<?x64xbf16>, tensor<64x8xbf16>, tensor<8x64x128xi4>, tensor<8x64x64xi4>,
            tensor<8x2x128xf32>, tensor<8x2x64xf32>, tensor<8x2x128xi4>, tensor<8x2x64xi4>)
         -> tensor<?x64xbf16>
  return %y : tensor<?x64xbf16>
}
