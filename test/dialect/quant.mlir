// RUN: moe-opt %s | FileCheck %s
// RUN: moe-opt %s | moe-opt | FileCheck %s
// RUN: moe-opt %s --mlir-print-op-generic | moe-opt | FileCheck %s
//
// Quantized expert weights (docs/spec.md §2.1): #moe.quant on moe.layer,
// with the weights in the storage type and their scales (and zero points).

// FP8 with DeepSeek-V3's 128 x 128 blocks; D = 300 and H = 200 are not
// multiples of the block, so the last block of each dimension is partial:
// s1 [E, ceil(300/128), ceil(400/128)] = [4, 3, 4], s2 [4, 2, 3].
// CHECK-LABEL: func.func @fp8_block
// CHECK: moe.layer %{{[a-z0-9]+}} router(%{{[a-z0-9]+}}) experts(%{{[a-z0-9]+}}, %{{[a-z0-9]+}}) expert_scales(%{{[a-z0-9]+}}, %{{[a-z0-9]+}}) {
// CHECK-SAME: quant = #moe.quant<fp8_e4m3, block = [128, 128]>
// CHECK-SAME: tensor<4x300x400xf8E4M3FN>, tensor<4x200x300xf8E4M3FN>, tensor<4x3x4xf32>, tensor<4x2x3xf32>
func.func @fp8_block(%x: tensor<?x300xbf16>, %wr: tensor<300x4xbf16>,
                     %w1: tensor<4x300x400xf8E4M3FN>, %w2: tensor<4x200x300xf8E4M3FN>,
                     %s1: tensor<4x3x4xf32>, %s2: tensor<4x2x3xf32>) -> tensor<?x300xbf16> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_scales(%s1, %s2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>,
          quant = #moe.quant<fp8_e4m3, block = [128, 128]>}
         : (tensor<?x300xbf16>, tensor<300x4xbf16>, tensor<4x300x400xf8E4M3FN>,
            tensor<4x200x300xf8E4M3FN>, tensor<4x3x4xf32>, tensor<4x2x3xf32>) -> tensor<?x300xbf16>
  return %y : tensor<?x300xbf16>
}

// int4 with groups of 32 along K and zero points (GPTQ, AWQ): s1 and z1
// [E, ceil(64/32), 2H] = [8, 2, 128], s2 and z2 [8, ceil(64/32), 64];
// dynamic E stays dynamic.
// CHECK-LABEL: func.func @int4_zero_point
// CHECK: expert_scales(%{{[a-z0-9]+}}, %{{[a-z0-9]+}}) expert_zero_points(%{{[a-z0-9]+}}, %{{[a-z0-9]+}}) expert_biases(
// CHECK-SAME: quant = #moe.quant<int4, group = 32, zero_point>
func.func @int4_zero_point(%x: tensor<16x64xf32>, %wr: tensor<64x8xf32>,
                           %w1: tensor<?x64x128xi4>, %w2: tensor<8x64x64xi4>,
                           %s1: tensor<8x2x128xf32>, %s2: tensor<8x2x64xf32>,
                           %z1: tensor<8x2x128xi4>, %z2: tensor<?x2x64xi4>,
                           %b1: tensor<8x128xf32>, %b2: tensor<8x64xf32>) -> tensor<16x64xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_scales(%s1, %s2)
         expert_zero_points(%z1, %z2) expert_biases(%b1, %b2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>,
          quant = #moe.quant<int4, group = 32, zero_point>}
         : (tensor<16x64xf32>, tensor<64x8xf32>, tensor<?x64x128xi4>, tensor<8x64x64xi4>,
            tensor<8x2x128xf32>, tensor<8x2x64xf32>, tensor<8x2x128xi4>, tensor<?x2x64xi4>,
            tensor<8x128xf32>, tensor<8x64xf32>) -> tensor<16x64xf32>
  return %y : tensor<16x64xf32>
}

// Symmetric int4 (compressed-tensors pack-quantized) with a group that
// does not divide H = 48: s2 [2, ceil(48/32), 16] = [2, 2, 16].
// CHECK-LABEL: func.func @int4_symmetric
// CHECK: moe.layer
// CHECK-SAME: quant = #moe.quant<int4, group = 32>, routing = #moe.dense
func.func @int4_symmetric(%x: tensor<4x16xf16>, %wr: tensor<16x2xf16>,
                          %w1: tensor<2x16x48xi4>, %w2: tensor<2x48x16xi4>,
                          %s1: tensor<2x1x48xf32>, %s2: tensor<2x2x16xf32>) -> tensor<4x16xf16> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_scales(%s1, %s2)
         {routing = #moe.dense, activation = #moe.activation<gelu>,
          quant = #moe.quant<int4, group = 32>}
         : (tensor<4x16xf16>, tensor<16x2xf16>, tensor<2x16x48xi4>, tensor<2x48x16xi4>,
            tensor<2x1x48xf32>, tensor<2x2x16xf32>) -> tensor<4x16xf16>
  return %y : tensor<4x16xf16>
}

// The int8-activation mode of int4 weights (docs/spec.md §2.1): a flag
// printed after the zero point (parsed in any order after the format);
// without zero points too.
// CHECK-LABEL: func.func @int4_int8_activations
// CHECK: moe.layer
// CHECK-SAME: quant = #moe.quant<int4, group = 16, zero_point, int8_activations>
// CHECK: moe.layer
// CHECK-SAME: quant = #moe.quant<int4, group = 16, int8_activations>
func.func @int4_int8_activations(%x: tensor<4x16xbf16>, %wr: tensor<16x2xbf16>,
                                 %w1: tensor<2x16x48xi4>, %w2: tensor<2x48x16xi4>,
                                 %s1: tensor<2x1x48xf32>, %s2: tensor<2x3x16xf32>,
                                 %z1: tensor<2x1x48xi4>, %z2: tensor<2x3x16xi4>) -> tensor<4x16xbf16> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_scales(%s1, %s2)
         expert_zero_points(%z1, %z2)
         {routing = #moe.dense, activation = #moe.activation<gelu>,
          quant = #moe.quant<int4, int8_activations, zero_point, group = 16>}
         : (tensor<4x16xbf16>, tensor<16x2xbf16>, tensor<2x16x48xi4>, tensor<2x48x16xi4>,
            tensor<2x1x48xf32>, tensor<2x3x16xf32>, tensor<2x1x48xi4>, tensor<2x3x16xi4>) -> tensor<4x16xbf16>
  %y2 = moe.layer %y router(%wr) experts(%w1, %w2) expert_scales(%s1, %s2)
         {routing = #moe.dense, activation = #moe.activation<gelu>,
          quant = #moe.quant<int4, group = 16, int8_activations>}
         : (tensor<4x16xbf16>, tensor<16x2xbf16>, tensor<2x16x48xi4>, tensor<2x48x16xi4>,
            tensor<2x1x48xf32>, tensor<2x3x16xf32>) -> tensor<4x16xbf16>
  return %y2 : tensor<4x16xbf16>
}

// The chain ops that hold expert weights take them too (--moe-decompose and
// --moe-fuse pass them on): moe.expert_ffn and moe.fused_experts.
// CHECK-LABEL: func.func @chain
// CHECK: moe.expert_ffn %{{[a-z0-9]+}}, %{{[a-z0-9]+}} experts(%{{[a-z0-9]+}}, %{{[a-z0-9]+}}) expert_scales(%{{[a-z0-9]+}}, %{{[a-z0-9]+}}) {
// CHECK-SAME: quant = #moe.quant<fp8_e4m3, block = [8, 4]>
// CHECK: moe.fused_experts %{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}} experts(%{{[a-z0-9]+}}, %{{[a-z0-9]+}}) expert_scales(%{{[a-z0-9]+}}, %{{[a-z0-9]+}}) expert_zero_points(%{{[a-z0-9]+}}, %{{[a-z0-9]+}}) {
// CHECK-SAME: quant = #moe.quant<int4, group = 8, zero_point>
func.func @chain(%rows: tensor<8x16xbf16>, %off: tensor<3xi32>, %w1: tensor<2x16x8xf8E4M3FN>,
                 %w2: tensor<2x8x16xf8E4M3FN>, %s1: tensor<2x2x2xf32>, %s2: tensor<2x1x4xf32>,
                 %x: tensor<4x16xf32>, %i: tensor<4x1xi32>, %w: tensor<4x1xf32>,
                 %q1: tensor<2x16x8xi4>, %q2: tensor<2x8x16xi4>, %t1: tensor<2x2x8xf32>,
                 %t2: tensor<2x1x16xf32>, %z1: tensor<2x2x8xi4>, %z2: tensor<2x1x16xi4>)
    -> (tensor<8x16xf32>, tensor<4x16xf32>) {
  %a = moe.expert_ffn %rows, %off experts(%w1, %w2) expert_scales(%s1, %s2)
         {activation = #moe.activation<relu>, quant = #moe.quant<fp8_e4m3, block = [8, 4]>}
         : (tensor<8x16xbf16>, tensor<3xi32>, tensor<2x16x8xf8E4M3FN>, tensor<2x8x16xf8E4M3FN>,
            tensor<2x2x2xf32>, tensor<2x1x4xf32>) -> tensor<8x16xf32>
  %b = moe.fused_experts %x, %i, %w experts(%q1, %q2) expert_scales(%t1, %t2)
         expert_zero_points(%z1, %z2)
         {num_experts = 2 : i64, activation = #moe.activation<relu>,
          quant = #moe.quant<int4, group = 8, zero_point>}
         : (tensor<4x16xf32>, tensor<4x1xi32>, tensor<4x1xf32>, tensor<2x16x8xi4>, tensor<2x8x16xi4>,
            tensor<2x2x8xf32>, tensor<2x1x16xf32>, tensor<2x2x8xi4>, tensor<2x1x16xi4>) -> tensor<4x16xf32>
  return %a, %b : tensor<8x16xf32>, tensor<4x16xf32>
}
