// Quantized layers for test/gpu/emulated-quant.test (f32 tokens).
// int4 in groups of 16 with zero points, SwiGLU, expert biases; 40 = 2 x 16
// + 8 and 24 = 16 + 8: the last group of both GEMMs is partial.
func.func @int4_zp(%x: tensor<40x40xf32>, %wr: tensor<40x4xf32>, %w1: tensor<4x40x48xi4>,
                   %w2: tensor<4x24x40xi4>, %s1: tensor<4x3x48xf32>, %s2: tensor<4x2x40xf32>,
                   %z1: tensor<4x3x48xi4>, %z2: tensor<4x2x40xi4>,
                   %b1: tensor<4x48xf32>, %b2: tensor<4x40xf32>) -> tensor<40x40xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         expert_scales(%s1, %s2) expert_zero_points(%z1, %z2) expert_biases(%b1, %b2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>,
          quant = #moe.quant<int4, group = 16, zero_point>}
         : (tensor<40x40xf32>, tensor<40x4xf32>, tensor<4x40x48xi4>, tensor<4x24x40xi4>,
            tensor<4x3x48xf32>, tensor<4x2x40xf32>, tensor<4x3x48xi4>, tensor<4x2x40xi4>,
            tensor<4x48xf32>, tensor<4x40xf32>) -> tensor<40x40xf32>
  return %y : tensor<40x40xf32>
}

// Symmetric int4 (zero point 8) with an odd group, a dynamic token count
// (row tiles of 16 at T = 37, 64 at T = 300), ReLU.
func.func @int4_sym(%x: tensor<?x40xf32>, %wr: tensor<40x6xf32>, %w1: tensor<6x40x20xi4>,
                    %w2: tensor<6x20x40xi4>, %s1: tensor<6x8x20xf32>,
                    %s2: tensor<6x4x40xf32>) -> tensor<?x40xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_scales(%s1, %s2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>,
          quant = #moe.quant<int4, group = 5>}
         : (tensor<?x40xf32>, tensor<40x6xf32>, tensor<6x40x20xi4>, tensor<6x20x40xi4>,
            tensor<6x8x20xf32>, tensor<6x4x40xf32>) -> tensor<?x40xf32>
  return %y : tensor<?x40xf32>
}

// FP8 E4M3 in blocks of 16 x 16 (partial blocks along K and N), GELU.
func.func @fp8(%x: tensor<40x40xf32>, %wr: tensor<40x4xf32>, %w1: tensor<4x40x24xf8E4M3FN>,
               %w2: tensor<4x24x40xf8E4M3FN>, %s1: tensor<4x3x2xf32>,
               %s2: tensor<4x2x3xf32>) -> tensor<40x40xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_scales(%s1, %s2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<gelu>,
          quant = #moe.quant<fp8_e4m3, block = [16, 16]>}
         : (tensor<40x40xf32>, tensor<40x4xf32>, tensor<4x40x24xf8E4M3FN>,
            tensor<4x24x40xf8E4M3FN>, tensor<4x3x2xf32>, tensor<4x2x3xf32>) -> tensor<40x40xf32>
  return %y : tensor<40x40xf32>
}

// int4 routed experts with a (float) shared expert and its gate: the shared
// expert runs in launches of its own, its output the combine's first term.
func.func @int4_shared(%x: tensor<40x40xf32>, %wr: tensor<40x4xf32>, %w1: tensor<4x40x48xi4>,
                       %w2: tensor<4x24x40xi4>, %s1: tensor<4x3x48xf32>, %s2: tensor<4x2x40xf32>,
                       %z1: tensor<4x3x48xi4>, %z2: tensor<4x2x40xi4>,
                       %sw1: tensor<40x32xf32>, %sw2: tensor<16x40xf32>,
                       %sg: tensor<40x1xf32>) -> tensor<40x40xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_scales(%s1, %s2)
         expert_zero_points(%z1, %z2) shared(%sw1, %sw2) shared_gate(%sg)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>,
          quant = #moe.quant<int4, group = 16, zero_point>}
         : (tensor<40x40xf32>, tensor<40x4xf32>, tensor<4x40x48xi4>, tensor<4x24x40xi4>,
            tensor<4x3x48xf32>, tensor<4x2x40xf32>, tensor<4x3x48xi4>, tensor<4x2x40xi4>,
            tensor<40x32xf32>, tensor<16x40xf32>, tensor<40x1xf32>) -> tensor<40x40xf32>
  return %y : tensor<40x40xf32>
}
