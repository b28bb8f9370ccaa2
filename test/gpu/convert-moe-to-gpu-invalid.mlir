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
