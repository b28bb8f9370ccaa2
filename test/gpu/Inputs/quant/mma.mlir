// bf16 layers with quantized experts whose blocks or groups along K are
// whole k-tiles of the tensor-core GEMMs (multiples of 32): they run on
// mma.sync, the codes staged as their exact factors and the scales applied
// once per block or group (docs/gpu.md, "Quantized expert weights"), for
// test/gpu/emulated-quant-mma.test.

// int4 in groups of 32 with zero points, SwiGLU, expert biases: GEMM1's
// K = 80 = 2 x 32 + 16 and GEMM2's K = 48 = 32 + 16 end in partial groups.
func.func @int4_zp(%x: tensor<40x80xbf16>, %wr: tensor<80x4xbf16>, %w1: tensor<4x80x96xi4>,
                   %w2: tensor<4x48x80xi4>, %s1: tensor<4x3x96xf32>, %s2: tensor<4x2x80xf32>,
                   %z1: tensor<4x3x96xi4>, %z2: tensor<4x2x80xi4>,
                   %b1: tensor<4x96xbf16>, %b2: tensor<4x80xbf16>) -> tensor<40x80xbf16> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         expert_scales(%s1, %s2) expert_zero_points(%z1, %z2) expert_biases(%b1, %b2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>,
          quant = #moe.quant<int4, group = 32, zero_point>}
         : (tensor<40x80xbf16>, tensor<80x4xbf16>, tensor<4x80x96xi4>, tensor<4x48x80xi4>,
            tensor<4x3x96xf32>, tensor<4x2x80xf32>, tensor<4x3x96xi4>, tensor<4x2x80xi4>,
            tensor<4x96xbf16>, tensor<4x80xbf16>) -> tensor<40x80xbf16>
  return %y : tensor<40x80xbf16>
}

// Symmetric int4 in groups of 64 (two k-tiles each), a dynamic token count
// (row tiles of 16 at T = 37, 64 at T = 300), ReLU: GEMM1's K = 96 = 64 +
// 32, GEMM2's K = 40 (one partial group of a whole and a partial k-tile).
func.func @int4_sym(%x: tensor<?x96xbf16>, %wr: tensor<96x6xbf16>, %w1: tensor<6x96x40xi4>,
                    %w2: tensor<6x40x96xi4>, %s1: tensor<6x2x40xf32>,
                    %s2: tensor<6x1x96xf32>) -> tensor<?x96xbf16> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_scales(%s1, %s2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>,
          quant = #moe.quant<int4, group = 64>}
         : (tensor<?x96xbf16>, tensor<96x6xbf16>, tensor<6x96x40xi4>, tensor<6x40x96xi4>,
            tensor<6x2x40xf32>, tensor<6x1x96xf32>) -> tensor<?x96xbf16>
  return %y : tensor<?x96xbf16>
}

// FP8 E4M3 in blocks of 32 x 16, GELU: partial blocks along K (72 = 2 x 32
// + 8, 40 = 32 + 8) and N (40 = 2 x 16 + 8, 72 = 4 x 16 + 8).
func.func @fp8(%x: tensor<40x72xbf16>, %wr: tensor<72x4xbf16>, %w1: tensor<4x72x40xf8E4M3FN>,
               %w2: tensor<4x40x72xf8E4M3FN>, %s1: tensor<4x3x3xf32>,
               %s2: tensor<4x2x5xf32>) -> tensor<40x72xbf16> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_scales(%s1, %s2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<gelu>,
          quant = #moe.quant<fp8_e4m3, block = [32, 16]>}
         : (tensor<40x72xbf16>, tensor<72x4xbf16>, tensor<4x72x40xf8E4M3FN>,
            tensor<4x40x72xf8E4M3FN>, tensor<4x3x3xf32>, tensor<4x2x5xf32>) -> tensor<40x72xbf16>
  return %y : tensor<40x72xbf16>
}

// FP8 in DeepSeek-V3's blocks of 128 x 128 with SwiGLU, a dynamic token
// count: GEMM1's K = 160 = 128 + 32 (four k-tiles in one block), its 2 x
// 136 columns two blocks of 128 and a partial one, across the gate and up
// halves.
func.func @fp8_128(%x: tensor<?x160xbf16>, %wr: tensor<160x4xbf16>,
                   %w1: tensor<4x160x272xf8E4M3FN>, %w2: tensor<4x136x160xf8E4M3FN>,
                   %s1: tensor<4x2x3xf32>, %s2: tensor<4x2x2xf32>) -> tensor<?x160xbf16> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_scales(%s1, %s2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>,
          quant = #moe.quant<fp8_e4m3, block = [128, 128]>}
         : (tensor<?x160xbf16>, tensor<160x4xbf16>, tensor<4x160x272xf8E4M3FN>,
            tensor<4x136x160xf8E4M3FN>, tensor<4x2x3xf32>, tensor<4x2x2xf32>)
         -> tensor<?x160xbf16>
  return %y : tensor<?x160xbf16>
}
