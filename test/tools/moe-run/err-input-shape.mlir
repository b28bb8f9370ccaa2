// RUN: rm -rf %t && mkdir -p %t
// RUN: moe-npy write %t/good.npy f32 64x128 1
// RUN: moe-npy write %t/x.npy f32 64x127 1
// RUN: moe-npy write %t/s.npy f32 scalar 1
// RUN: %expect_error moe-run %s --device=cpu --input=%t/x.npy --input=%t/good.npy --fill-random \
// RUN:   | FileCheck %s --check-prefix=ARG0
// RUN: %expect_error moe-run %s --device=cpu --input=%t/good.npy --input=%t/s.npy --fill-random \
// RUN:   | FileCheck %s --check-prefix=ARG2

// ARG0: moe-run: --input {{.*}}x.npy for argument #0 (%arg0): expected tensor<64x128xf32>, got f32 [64, 127]
// ARG2: moe-run: --input {{.*}}s.npy for argument #2 (%arg2): expected tensor<64x128xf32>, got f32 []

func.func @forward(%x: tensor<64x128xf32>, %w: tensor<8xf32> {moe.param = "w"},
                   %y: tensor<64x128xf32>) -> tensor<64x128xf32> {
  return %x : tensor<64x128xf32>
}
