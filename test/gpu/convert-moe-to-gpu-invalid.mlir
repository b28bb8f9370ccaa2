// REQUIRES: host-supports-nvptx
// RUN: moe-opt %s -split-input-file -verify-diagnostics --convert-moe-to-gpu

func.func @f16(%x: tensor<8x16xf16>, %wr: tensor<16x4xf16>, %w1: tensor<4x16x32xf16>,
               %w2: tensor<4x32x16xf16>) -> tensor<8x16xf16> {
  // expected-error @below {{cannot lower 'moe.layer' with element type 'f16' to the GPU: the NVPTX kernels support f32 only for now}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>}
         : (tensor<8x16xf16>, tensor<16x4xf16>, tensor<4x16x32xf16>, tensor<4x32x16xf16>)
         -> tensor<8x16xf16>
  return %y : tensor<8x16xf16>
}

// -----

func.func @bf16(%x: tensor<8x16xbf16>, %idx: tensor<8x2xi32>, %w: tensor<8x2xbf16>,
                %w1: tensor<4x16x32xbf16>, %w2: tensor<4x32x16xbf16>) -> tensor<8x16xbf16> {
  // expected-error @below {{cannot lower 'moe.fused_experts' with element type 'bf16' to the GPU}}
  %y = moe.fused_experts %x, %idx, %w experts(%w1, %w2)
         {num_experts = 4 : i64, activation = #moe.activation<relu>}
         : (tensor<8x16xbf16>, tensor<8x2xi32>, tensor<8x2xbf16>, tensor<4x16x32xbf16>,
            tensor<4x32x16xbf16>) -> tensor<8x16xbf16>
  return %y : tensor<8x16xbf16>
}

// -----

// The docs/spec.md §3.1.1 routers and shared experts lower to the GPU in f32
// (test/gpu/emulated-vs-cpu-production.mlir); in bf16 they meet the same
// element-type error as every other op, naming the op, not the feature.
func.func @deepseek_style_bf16(%x: tensor<8x16xbf16>, %wr: tensor<16x4xbf16>, %b: tensor<4xf32>,
                               %w1: tensor<4x16x32xbf16>, %w2: tensor<4x32x16xbf16>,
                               %s1: tensor<16x24xbf16>, %s2: tensor<24x16xbf16>) -> tensor<8x16xbf16> {
  // expected-error @below {{cannot lower 'moe.layer' with element type 'bf16' to the GPU: the NVPTX kernels support f32 only for now}}
  %y = moe.layer %x router(%wr) selection_bias(%b) experts(%w1, %w2) shared(%s1, %s2)
         {routing = #moe.top_k<k = 2, score = sigmoid, groups = 2, group_k = 1, scale = 2.5>,
          activation = #moe.activation<relu>}
         : (tensor<8x16xbf16>, tensor<16x4xbf16>, tensor<4xf32>, tensor<4x16x32xbf16>,
            tensor<4x32x16xbf16>, tensor<16x24xbf16>, tensor<24x16xbf16>) -> tensor<8x16xbf16>
  return %y : tensor<8x16xbf16>
}
