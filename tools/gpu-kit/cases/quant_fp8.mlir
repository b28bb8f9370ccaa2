// GPU check kit case (prepare.sh): FP8 E4M3 block-scaled expert weights
// (#moe.quant, docs/spec.md §2.1) on the GPU path's tensor-core GEMMs (blocks
// of 32 along K are whole k-tiles), which stage each code as its exact bf16
// value and scale each block's partial sums (docs/gpu.md, "Quantized expert
// weights"): bf16 tokens, top-2 of 8, SwiGLU, blocks of 32 x 32 (the gated
// GEMM's 64 columns in two blocks).
func.func @forward(%x: tensor<?x64xbf16>, %wr: tensor<64x8xbf16> {moe.param = "wr"},
                   %w1: tensor<8x64x64xf8E4M3FN> {moe.param = "w1"},
                   %w2: tensor<8x32x64xf8E4M3FN> {moe.param = "w2"},
                   %s1: tensor<8x2x2xf32> {moe.param = "s1"},
                   %s2: tensor<8x1x2xf32> {moe.param = "s2"}) -> tensor<?x64xbf16> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_scales(%s1, %s2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>,
          quant = #moe.quant<fp8_e4m3, block = [32, 32]>}
         : (tensor<?x64xbf16>, tensor<64x8xbf16>, tensor<8x64x64xf8E4M3FN>,
            tensor<8x32x64xf8E4M3FN>, tensor<8x2x2xf32>, tensor<8x1x2xf32>) -> tensor<?x64xbf16>
  return %y : tensor<?x64xbf16>
}
