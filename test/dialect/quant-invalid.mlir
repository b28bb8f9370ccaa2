// RUN: moe-opt %s -split-input-file -verify-diagnostics
//
// #moe.quant and the quantized moe.layer: each rule, one error naming the
// attribute or the operand at fault (docs/spec.md §2.1).

// expected-error @+1 {{#moe.quant<fp8_e4m3> needs block = [BK, BN] (two sizes), got 1 size(s)}}
func.func private @f() attributes {q = #moe.quant<fp8_e4m3, block = [128]>}

// -----

// expected-error @+1 {{#moe.quant<fp8_e4m3> block sizes must be >= 1, got [128, 0]}}
func.func private @f() attributes {q = #moe.quant<fp8_e4m3, block = [128, 0]>}

// -----

// expected-error @+1 {{#moe.quant<fp8_e4m3> takes no group or zero_point (one scale per block)}}
func.func private @f() attributes {q = #moe.quant<fp8_e4m3, block = [128, 128], zero_point>}

// -----

// int8 activations are a mode of int4 weights.
// expected-error @+1 {{#moe.quant<fp8_e4m3> takes no int8_activations (a mode of int4 weights)}}
func.func private @f() attributes {q = #moe.quant<fp8_e4m3, block = [128, 128], int8_activations>}

// -----

// expected-error @+1 {{#moe.quant<int4> needs group = G >= 1, got 0}}
func.func private @f() attributes {q = #moe.quant<int4>}

// -----

// expected-error @+1 {{#moe.quant<int4> takes no block (one scale per group of k)}}
func.func private @f() attributes {q = #moe.quant<int4, group = 64, block = [1, 1]>}

// -----

// expected-error @+1 {{expected a quantization format (fp8_e4m3 or int4), got 'int8'}}
func.func private @f() attributes {q = #moe.quant<int8, group = 64>}

// -----

// expected-error @+1 {{expected 'block', 'group', 'zero_point' or 'int8_activations', got 'groups'}}
func.func private @f() attributes {q = #moe.quant<int4, groups = 64>}

// -----

// Weights of the wrong storage type.
func.func @f(%x: tensor<4x16xf32>, %wr: tensor<16x2xf32>, %w1: tensor<2x16x8xi4>,
             %w2: tensor<2x8x16xi4>, %s1: tensor<2x1x8xf32>, %s2: tensor<2x1x16xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{'moe.layer' op w1 has element type 'i4', but #moe.quant<fp8_e4m3, block = [128, 128]> stores weights as 'f8E4M3FN'}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_scales(%s1, %s2)
         {routing = #moe.dense, activation = #moe.activation<relu>, quant = #moe.quant<fp8_e4m3, block = [128, 128]>}
         : (tensor<4x16xf32>, tensor<16x2xf32>, tensor<2x16x8xi4>, tensor<2x8x16xi4>, tensor<2x1x8xf32>, tensor<2x1x16xf32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// Quantized weights without the attribute: they are not the data's type.
func.func @f(%x: tensor<4x16xf32>, %wr: tensor<16x2xf32>, %w1: tensor<2x16x8xi4>,
             %w2: tensor<2x8x16xi4>) -> tensor<4x16xf32> {
  // expected-error @+1 {{'moe.layer' op w1 has element type 'i4', but input has 'f32' (all floating-point operands of one op share one element type)}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.dense, activation = #moe.activation<relu>}
         : (tensor<4x16xf32>, tensor<16x2xf32>, tensor<2x16x8xi4>, tensor<2x8x16xi4>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// Scales without the attribute.
func.func @f(%x: tensor<4x16xf32>, %wr: tensor<16x2xf32>, %w1: tensor<2x16x8xf32>,
             %w2: tensor<2x8x16xf32>, %s1: tensor<2x1x8xf32>, %s2: tensor<2x1x16xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{'moe.layer' op has expert_scales but no 'quant' attribute saying how w1 and w2 are quantized}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_scales(%s1, %s2)
         {routing = #moe.dense, activation = #moe.activation<relu>}
         : (tensor<4x16xf32>, tensor<16x2xf32>, tensor<2x16x8xf32>, tensor<2x8x16xf32>, tensor<2x1x8xf32>, tensor<2x1x16xf32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// The attribute without scales.
func.func @f(%x: tensor<4x16xf32>, %wr: tensor<16x2xf32>, %w1: tensor<2x16x8xi4>,
             %w2: tensor<2x8x16xi4>) -> tensor<4x16xf32> {
  // expected-error @+1 {{'moe.layer' op is quantized (#moe.quant<int4, group = 8>) and needs expert_scales(%s1, %s2), the f32 scales of w1 and w2}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.dense, activation = #moe.activation<relu>, quant = #moe.quant<int4, group = 8>}
         : (tensor<4x16xf32>, tensor<16x2xf32>, tensor<2x16x8xi4>, tensor<2x8x16xi4>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// zero_point in the attribute, no zero points given.
func.func @f(%x: tensor<4x16xf32>, %wr: tensor<16x2xf32>, %w1: tensor<2x16x8xi4>,
             %w2: tensor<2x8x16xi4>, %s1: tensor<2x2x8xf32>, %s2: tensor<2x1x16xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{'moe.layer' op is quantized with zero_point and needs expert_zero_points(%z1, %z2)}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_scales(%s1, %s2)
         {routing = #moe.dense, activation = #moe.activation<relu>, quant = #moe.quant<int4, group = 8, zero_point>}
         : (tensor<4x16xf32>, tensor<16x2xf32>, tensor<2x16x8xi4>, tensor<2x8x16xi4>, tensor<2x2x8xf32>, tensor<2x1x16xf32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// Zero points given, the attribute has none.
func.func @f(%x: tensor<4x16xf32>, %wr: tensor<16x2xf32>, %w1: tensor<2x16x8xi4>,
             %w2: tensor<2x8x16xi4>, %s1: tensor<2x2x8xf32>, %s2: tensor<2x1x16xf32>,
             %z1: tensor<2x2x8xi4>, %z2: tensor<2x1x16xi4>) -> tensor<4x16xf32> {
  // expected-error @+1 {{'moe.layer' op has expert_zero_points, but its 'quant' attribute has no zero_point}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_scales(%s1, %s2) expert_zero_points(%z1, %z2)
         {routing = #moe.dense, activation = #moe.activation<relu>, quant = #moe.quant<int4, group = 8>}
         : (tensor<4x16xf32>, tensor<16x2xf32>, tensor<2x16x8xi4>, tensor<2x8x16xi4>, tensor<2x2x8xf32>, tensor<2x1x16xf32>, tensor<2x2x8xi4>, tensor<2x1x16xi4>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// A scale of the wrong shape: w2 [E, H = 8, D = 16] in groups of 8 has
// ceil(8/8) = 1 group, not 2.
func.func @f(%x: tensor<4x16xf32>, %wr: tensor<16x2xf32>, %w1: tensor<2x16x8xi4>,
             %w2: tensor<2x8x16xi4>, %s1: tensor<2x2x8xf32>, %s2: tensor<2x2x16xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{'moe.layer' op the scale of w2 has 'tensor<2x2x16xf32>', but #moe.quant<int4, group = 8> gives w2 the scale size 1 in dimension 1}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_scales(%s1, %s2)
         {routing = #moe.dense, activation = #moe.activation<relu>, quant = #moe.quant<int4, group = 8>}
         : (tensor<4x16xf32>, tensor<16x2xf32>, tensor<2x16x8xi4>, tensor<2x8x16xi4>, tensor<2x2x8xf32>, tensor<2x2x16xf32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// A zero point of the wrong shape (fp8 block sizes [BK, BN] = [4, 8] for
// the scales: w1 [2, 16, 8] -> [2, 4, 1]).
func.func @f(%x: tensor<4x16xf32>, %wr: tensor<16x2xf32>, %w1: tensor<2x16x8xf8E4M3FN>,
             %w2: tensor<2x8x16xf8E4M3FN>, %s1: tensor<2x4x2xf32>, %s2: tensor<2x2x2xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{'moe.layer' op the scale of w1 has 'tensor<2x4x2xf32>', but #moe.quant<fp8_e4m3, block = [4, 8]> gives w1 the scale size 1 in dimension 2}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_scales(%s1, %s2)
         {routing = #moe.dense, activation = #moe.activation<relu>, quant = #moe.quant<fp8_e4m3, block = [4, 8]>}
         : (tensor<4x16xf32>, tensor<16x2xf32>, tensor<2x16x8xf8E4M3FN>, tensor<2x8x16xf8E4M3FN>, tensor<2x4x2xf32>, tensor<2x2x2xf32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// Scales must be f32 (ODS: the operand's element type).
func.func @f(%x: tensor<4x16xf32>, %wr: tensor<16x2xf32>, %w1: tensor<2x16x8xi4>,
             %w2: tensor<2x8x16xi4>, %s1: tensor<2x2x8xbf16>, %s2: tensor<2x1x16xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{'moe.layer' op operand #4 must be 3-D tensor [E, K/BK or K/G, N/BN or N] of f32, but got 'tensor<2x2x8xbf16>'}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_scales(%s1, %s2)
         {routing = #moe.dense, activation = #moe.activation<relu>, quant = #moe.quant<int4, group = 8>}
         : (tensor<4x16xf32>, tensor<16x2xf32>, tensor<2x16x8xi4>, tensor<2x8x16xi4>, tensor<2x2x8xbf16>, tensor<2x1x16xf32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// The generic form can give one scale or zero point of a pair.
func.func @f(%x: tensor<4x16xf32>, %wr: tensor<16x2xf32>, %w1: tensor<2x16x8xi4>,
             %w2: tensor<2x8x16xi4>, %s1: tensor<2x2x8xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{'moe.layer' op has w1_scale without w2_scale: scales come in pairs, expert_scales(s1, s2)}}
  %y = "moe.layer"(%x, %wr, %w1, %w2, %s1) <{activation = #moe.activation<relu>, routing = #moe.dense, quant = #moe.quant<int4, group = 8>, operandSegmentSizes = array<i32: 1, 1, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0>}>
         : (tensor<4x16xf32>, tensor<16x2xf32>, tensor<2x16x8xi4>, tensor<2x8x16xi4>, tensor<2x2x8xf32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

func.func @f(%x: tensor<4x16xf32>, %wr: tensor<16x2xf32>, %w1: tensor<2x16x8xi4>,
             %w2: tensor<2x8x16xi4>, %s1: tensor<2x2x8xf32>, %s2: tensor<2x1x16xf32>,
             %z2: tensor<2x1x16xi4>) -> tensor<4x16xf32> {
  // expected-error @+1 {{'moe.layer' op has w2_zero_point without w1_zero_point: zero points come in pairs, expert_zero_points(z1, z2)}}
  %y = "moe.layer"(%x, %wr, %w1, %w2, %s1, %s2, %z2) <{activation = #moe.activation<relu>, routing = #moe.dense, quant = #moe.quant<int4, group = 8, zero_point>, operandSegmentSizes = array<i32: 1, 1, 0, 0, 1, 1, 1, 1, 0, 1, 0, 0, 0, 0, 0, 0>}>
         : (tensor<4x16xf32>, tensor<16x2xf32>, tensor<2x16x8xi4>, tensor<2x8x16xi4>, tensor<2x2x8xf32>, tensor<2x1x16xf32>, tensor<2x1x16xi4>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// The chain ops that hold expert weights verify them as moe.layer does:
// moe.expert_ffn with a scale of the wrong shape.
func.func @f(%rows: tensor<8x16xf32>, %off: tensor<3xi32>, %w1: tensor<2x16x8xf8E4M3FN>,
             %w2: tensor<2x8x16xf8E4M3FN>, %s1: tensor<2x1x8xf32>, %s2: tensor<2x1x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'moe.expert_ffn' op the scale of w1 has 'tensor<2x1x8xf32>', but #moe.quant<fp8_e4m3, block = [8, 4]> gives w1 the scale size 2 in dimension 1}}
  %y = moe.expert_ffn %rows, %off experts(%w1, %w2) expert_scales(%s1, %s2)
         {activation = #moe.activation<relu>, quant = #moe.quant<fp8_e4m3, block = [8, 4]>}
         : (tensor<8x16xf32>, tensor<3xi32>, tensor<2x16x8xf8E4M3FN>, tensor<2x8x16xf8E4M3FN>, tensor<2x1x8xf32>, tensor<2x1x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// moe.fused_experts with quantized weights and no scales.
func.func @f(%x: tensor<4x16xf32>, %i: tensor<4x1xi32>, %w: tensor<4x1xf32>,
             %w1: tensor<2x16x8xf8E4M3FN>, %w2: tensor<2x8x16xf8E4M3FN>) -> tensor<4x16xf32> {
  // expected-error @+1 {{'moe.fused_experts' op is quantized (#moe.quant<fp8_e4m3, block = [16, 16]>) and needs expert_scales(%s1, %s2), the f32 scales of w1 and w2}}
  %y = moe.fused_experts %x, %i, %w experts(%w1, %w2)
         {num_experts = 2 : i64, activation = #moe.activation<relu>, quant = #moe.quant<fp8_e4m3, block = [16, 16]>}
         : (tensor<4x16xf32>, tensor<4x1xi32>, tensor<4x1xf32>, tensor<2x16x8xf8E4M3FN>, tensor<2x8x16xf8E4M3FN>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// moe.fused_experts with f8 weights but no 'quant' attribute: the weights
// must then have the element type of the data.
func.func @f(%x: tensor<4x16xf32>, %i: tensor<4x1xi32>, %w: tensor<4x1xf32>,
             %w1: tensor<2x16x8xf8E4M3FN>, %w2: tensor<2x8x16xf8E4M3FN>) -> tensor<4x16xf32> {
  // expected-error @+1 {{'moe.fused_experts' op w1 has element type 'f8E4M3FN', but input has 'f32' (all floating-point operands of one op share one element type)}}
  %y = moe.fused_experts %x, %i, %w experts(%w1, %w2)
         {num_experts = 2 : i64, activation = #moe.activation<relu>}
         : (tensor<4x16xf32>, tensor<4x1xi32>, tensor<4x1xf32>, tensor<2x16x8xf8E4M3FN>, tensor<2x8x16xf8E4M3FN>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}
