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

// DESIGN 3.1.1 features the NVPTX kernels do not implement yet: one error
// each, pointing at the CPU path.
func.func @qwen_style(%x: tensor<8x16xf32>, %wr: tensor<16x4xf32>, %w1: tensor<4x16x32xf32>,
                      %w2: tensor<4x32x16xf32>, %s1: tensor<16x24xf32>, %s2: tensor<24x16xf32>) -> tensor<8x16xf32> {
  // expected-error @below {{cannot lower 'moe.layer' to the GPU: a shared expert (DESIGN.md 3.1.1) is not in the NVPTX kernels yet; the CPU path (--moe-cpu-pipeline, moe-run --device=cpu) runs it}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) shared(%s1, %s2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>}
         : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>,
            tensor<16x24xf32>, tensor<24x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

func.func @sigmoid_router(%x: tensor<8x16xf32>, %wr: tensor<16x4xf32>, %w1: tensor<4x16x32xf32>,
                          %w2: tensor<4x32x16xf32>) -> tensor<8x16xf32> {
  // expected-error @below {{cannot lower 'moe.layer' to the GPU: #moe.top_k with score/normalize/scale/group parameters (DESIGN.md 3.1.1) is not in the NVPTX kernels yet}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = 2, score = sigmoid>, activation = #moe.activation<relu>}
         : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

func.func @biased(%x: tensor<8x16xf32>, %wr: tensor<16x4xf32>, %b: tensor<4xf32>, %w1: tensor<4x16x32xf32>,
                  %w2: tensor<4x32x16xf32>) -> tensor<8x16xf32> {
  // expected-error @below {{cannot lower 'moe.layer' to the GPU: a selection_bias (DESIGN.md 3.1.1) is not in the NVPTX kernels yet}}
  %y = moe.layer %x router(%wr) selection_bias(%b) experts(%w1, %w2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>}
         : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}
