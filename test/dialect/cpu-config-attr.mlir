// RUN: moe-opt %s | FileCheck %s
// RUN: moe-opt %s | moe-opt | FileCheck %s
// RUN: moe-opt %s --mlir-print-op-generic | moe-opt | FileCheck %s
//
// #moe.cpu_config on the ops that take it; parameters in any order.

// CHECK-LABEL: func.func @configured
// CHECK: moe.route %{{.*}} router(%{{.*}}) {moe.cpu_config = #moe.cpu_config<vector_bits = 256, registers = 16, micro_rows = 6, micro_vectors = 2, row_block = 48, col_block = 256, prefetch_rows = 32, bf16_dot = false, int8_dot = vpmaddubsw>}
// CHECK-NEXT: moe.layer {{.*}} {activation = #moe.activation<silu>, moe.cpu_config = #moe.cpu_config<vector_bits = 512, registers = 32, micro_rows = 4, micro_vectors = 6, row_block = 96, col_block = 384, prefetch_rows = 0, bf16_dot = true, fp8_dot = true>, routing = #moe.top_k<k = 2>}
func.func @configured(%x: tensor<4x8xf32>, %wr: tensor<8x4xf32>, %w1: tensor<4x8x16xf32>,
                      %w2: tensor<4x16x8xf32>) -> (tensor<4x4xf32>, tensor<4x8xf32>) {
  %o = moe.route %x router(%wr) {moe.cpu_config = #moe.cpu_config<vector_bits = 256, registers = 16, int8_dot = vpmaddubsw, micro_rows = 6, micro_vectors = 2, row_block = 48, col_block = 256, prefetch_rows = 32, bf16_dot = false>} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.top_k<k = 2>, activation = #moe.activation<silu>,
      moe.cpu_config = #moe.cpu_config<fp8_dot = true, bf16_dot = true, vector_bits = 512, registers = 32, micro_rows = 4, micro_vectors = 6, row_block = 96, col_block = 384, prefetch_rows = 0>}
      : (tensor<4x8xf32>, tensor<8x4xf32>, tensor<4x8x16xf32>, tensor<4x16x8xf32>) -> tensor<4x8xf32>
  return %o, %y : tensor<4x4xf32>, tensor<4x8xf32>
}
