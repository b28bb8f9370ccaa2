// The CPU lowering needs a static number of experts: a layer (top-k, dense,
// Soft MoE) or an expert FFN with a dynamic E is one error naming the op and
// the reason (it used to be the conversion framework's "failed to legalize
// operation 'moe.layer' that was explicitly marked illegal"). The GPU
// lowering says the same (test/gpu/convert-moe-to-gpu-invalid.mlir).
// RUN: moe-opt %s -split-input-file -verify-diagnostics --convert-moe-to-cpu
// RUN: moe-opt %s -split-input-file -verify-diagnostics --moe-cpu-pipeline

func.func @top_k(%x: tensor<4x8xf32>, %wr: tensor<8x?xf32>, %w1: tensor<?x8x16xf32>, %w2: tensor<?x16x8xf32>) -> tensor<4x8xf32> {
  // expected-error @below {{cannot lower 'moe.layer' to the CPU: the number of experts is dynamic}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.top_k<k = 1>, activation = #moe.activation<relu>}
     : (tensor<4x8xf32>, tensor<8x?xf32>, tensor<?x8x16xf32>, tensor<?x16x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func @dense(%x: tensor<4x8xf32>, %wr: tensor<8x?xf32>, %w1: tensor<?x8x16xf32>, %w2: tensor<?x16x8xf32>) -> tensor<4x8xf32> {
  // expected-error @below {{cannot lower 'moe.layer' to the CPU: the number of experts is dynamic}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.dense, activation = #moe.activation<relu>}
     : (tensor<4x8xf32>, tensor<8x?xf32>, tensor<?x8x16xf32>, tensor<?x16x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func @soft(%x: tensor<2x4x8xf32>, %phi: tensor<8x?x1xf32>, %w1: tensor<?x8x16xf32>, %w2: tensor<?x16x8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @below {{cannot lower 'moe.soft_layer' to the CPU: the number of experts is dynamic}}
  %y = moe.soft_layer %x slots(%phi) experts(%w1, %w2) {activation = #moe.activation<relu>}
     : (tensor<2x4x8xf32>, tensor<8x?x1xf32>, tensor<?x8x16xf32>, tensor<?x16x8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

func.func @ffn(%rows: tensor<4x8xf32>, %off: tensor<?xi32>, %w1: tensor<?x8x16xf32>, %w2: tensor<?x16x8xf32>) -> tensor<4x8xf32> {
  // expected-error @below {{cannot lower 'moe.expert_ffn' to the CPU: the number of experts is dynamic}}
  %o = moe.expert_ffn %rows, %off experts(%w1, %w2) {activation = #moe.activation<relu>}
     : (tensor<4x8xf32>, tensor<?xi32>, tensor<?x8x16xf32>, tensor<?x16x8xf32>) -> tensor<4x8xf32>
  return %o : tensor<4x8xf32>
}
