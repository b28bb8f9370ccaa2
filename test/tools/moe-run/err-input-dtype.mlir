// RUN: rm -rf %t && mkdir -p %t
// RUN: moe-npy write %t/f16.npy f16 2x3 1
// RUN: moe-npy write %t/i32.npy i32 2x3 1
// RUN: moe-npy write %t/f32.npy f32 2x3 1
// RUN: %expect_error moe-run %s --device=cpu --input=%t/f16.npy --input=%t/i32.npy \
// RUN:   | FileCheck %s --check-prefix=F16
// RUN: %expect_error moe-run %s --device=cpu --input=%t/f32.npy --input=%t/f32.npy \
// RUN:   | FileCheck %s --check-prefix=I64
//
// .npy inputs are converted only from f32 to bf16/f16 (half-io.mlir); other
// dtypes must match exactly.

// F16: moe-run: --input {{.*}}f16.npy for argument #0 (%arg0): expected tensor<2x3xf32>, got f16 [2, 3]
// I64: moe-run: --input {{.*}}f32.npy for argument #1 (%arg1): expected tensor<2x3xi64>, got f32 [2, 3]

func.func @forward(%x: tensor<2x3xf32>, %i: tensor<2x3xi64>) -> tensor<2x3xf32> {
  return %x : tensor<2x3xf32>
}
