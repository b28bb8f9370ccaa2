// Without a CUDA toolkit (libdevice) the NVPTX pipeline stops with one error
// at the first moe op instead of emitting kernels whose math calls cannot be
// resolved; a toolkit path without libdevice is named.
// REQUIRES: host-supports-nvptx
// RUN: not moe-opt %s --moe-nvptx-pipeline="cuda-path=%t.no-toolkit" -o /dev/null 2>&1 | FileCheck %s
// RUN: not moe-opt %s --convert-moe-to-gpu="toolkit=none" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NONE

// CHECK: nvptx-pipeline-no-toolkit.mlir:[[@LINE+4]]:8: error: moe-nvptx-pipeline: the CUDA toolkit at '{{.*}}no-toolkit' has no {{.*}}no-toolkit/nvvm/libdevice/libdevice.10.bc; the kernels link libdevice (pass cuda-path=DIR or set CUDA_HOME)
// CHECK-NOT: error
// NONE: error: moe-nvptx-pipeline: no CUDA toolkit found; the kernels link libdevice (nvvm/libdevice/libdevice.10.bc): install the toolkit or pass cuda-path=DIR (or set CUDA_HOME)
func.func @forward(%x: tensor<8x16xf32>, %wr: tensor<16x4xf32>, %w1: tensor<4x16x32xf32>, %w2: tensor<4x32x16xf32>) -> tensor<8x16xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>}
         : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}
