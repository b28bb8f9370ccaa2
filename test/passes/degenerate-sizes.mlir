// Layers with a zero model dimension (D = 0) or a zero hidden dimension
// (H = 0) go through every pass and lowering without an internal verifier
// failure (issue 14 listed them among the passes that failed the verifier on
// their own output); E = 0, T * K past 2^31 - 1 and byte sizes past int64 are
// verifier errors of the op (test/dialect/invalid-bounds.mlir), a dynamic E
// an error of the lowerings (test/lowering/dynamic-experts-invalid.mlir).
// RUN: moe-opt %s -split-input-file --moe-decompose --moe-fuse | FileCheck %s --check-prefix=FUSE
// RUN: moe-opt %s -split-input-file --moe-dense-to-soft --moe-dense-to-moesart --moe-print-cost -o /dev/null
// RUN: moe-opt %s -split-input-file --moe-cpu-pipeline | FileCheck %s --check-prefix=CPU
// FUSE-LABEL: func.func @d0
// FUSE: moe.fused_experts
// FUSE-LABEL: func.func @h0
// FUSE: moe.fused_experts
// CPU-LABEL: llvm.func @d0
// CPU-LABEL: llvm.func @h0

func.func @d0(%x: tensor<4x0xf32>, %wr: tensor<0x4xf32>, %w1: tensor<4x0x16xf32>, %w2: tensor<4x16x0xf32>) -> tensor<4x0xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.top_k<k = 1>, activation = #moe.activation<relu>}
     : (tensor<4x0xf32>, tensor<0x4xf32>, tensor<4x0x16xf32>, tensor<4x16x0xf32>) -> tensor<4x0xf32>
  return %y : tensor<4x0xf32>
}

// -----

func.func @h0(%x: tensor<4x8xf32>, %wr: tensor<8x4xf32>, %w1: tensor<4x8x0xf32>, %w2: tensor<4x0x8xf32>) -> tensor<4x8xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>}
     : (tensor<4x8xf32>, tensor<8x4xf32>, tensor<4x8x0xf32>, tensor<4x0x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
