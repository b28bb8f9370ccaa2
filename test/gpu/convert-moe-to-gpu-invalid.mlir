// REQUIRES: host-supports-nvptx
// RUN: moe-opt %s -split-input-file -verify-diagnostics --convert-moe-to-gpu

// The kernels are specialised on the number of experts (the routing plan's
// size): a dynamic one is one error naming the op (any element type).
func.func @dynamic_experts(%w1: tensor<?x16x32xbf16>, %w2: tensor<?x32x16xbf16>) -> tensor<16x16xbf16> {
  %off = arith.constant dense<[0, 4, 8, 12, 16]> : tensor<5xi32>
  %rows = arith.constant dense<0.0> : tensor<16x16xbf16>
  // expected-error @below {{cannot lower to the GPU: the number of experts is dynamic}}
  %y = moe.expert_ffn %rows, %off experts(%w1, %w2) {activation = #moe.activation<relu>}
         : (tensor<16x16xbf16>, tensor<5xi32>, tensor<?x16x32xbf16>, tensor<?x32x16xbf16>)
         -> tensor<16x16xbf16>
  return %y : tensor<16x16xbf16>
}

// -----

// #moe.quant's int8-activation mode is a CPU mode: one error naming the op.
func.func @int8_activations(%x: tensor<4x16xbf16>, %wr: tensor<16x2xbf16>,
                            %w1: tensor<2x16x32xi4>, %w2: tensor<2x32x16xi4>,
                            %s1: tensor<2x1x32xf32>, %s2: tensor<2x2x16xf32>) -> tensor<4x16xbf16> {
  // expected-error @below {{cannot lower to the GPU: #moe.quant's int8_activations mode has CPU kernels only (the GPU runs int4 weight-only)}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_scales(%s1, %s2)
         {routing = #moe.top_k<k = 1>, activation = #moe.activation<relu>,
          quant = #moe.quant<int4, group = 16, int8_activations>}
         : (tensor<4x16xbf16>, tensor<16x2xbf16>, tensor<2x16x32xi4>, tensor<2x32x16xi4>,
            tensor<2x1x32xf32>, tensor<2x2x16xf32>) -> tensor<4x16xbf16>
  return %y : tensor<4x16xbf16>
}
