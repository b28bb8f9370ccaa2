// Two identical NVPTX compiles give identical output (the serializer's
// LLVMIRToISATimeInMs / ISAToBinaryTimeInMs properties are dropped), and a
// CUDA toolkit path with a space works, as option (single or double quotes)
// and as $CUDA_HOME (both used to abort in the pipeline parser).
// REQUIRES: host-supports-nvptx
// RUN: rm -rf %t && mkdir -p %t && mkdir -p "%t/cuda dir"
// RUN: moe-opt %s --moe-nvptx-pipeline="format=isa cuda-path='%t/cuda dir'" -o %t/a.mlir
// RUN: env CUDA_ROOT= CUDA_HOME="%t/cuda dir" moe-opt %s --moe-nvptx-pipeline="format=isa" -o %t/b.mlir
// RUN: moe-opt %s --moe-nvptx-pipeline='format=isa cuda-path="%t/cuda dir"' -o %t/c.mlir
// RUN: cmp %t/a.mlir %t/b.mlir
// RUN: cmp %t/a.mlir %t/c.mlir
// RUN: FileCheck %s --input-file=%t/a.mlir

// CHECK: gpu.binary @moe_kernels
// CHECK-NOT: TimeInMs

func.func @forward(%x: tensor<8x16xf32>, %wr: tensor<16x4xf32>, %w1: tensor<4x16x32xf32>, %w2: tensor<4x32x16xf32>) -> tensor<8x16xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>}
         : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}
