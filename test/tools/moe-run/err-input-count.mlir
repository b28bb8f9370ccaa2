// RUN: rm -rf %t && mkdir -p %t
// RUN: moe-npy write %t/x.npy f32 4 1
// RUN: %expect_error moe-run %s --device=cpu --input=%t/x.npy | FileCheck %s --check-prefix=FEW
// RUN: %expect_error moe-run %s --device=cpu --input=%t/x.npy --input=%t/x.npy \
// RUN:   --input=%t/x.npy --fill-random | FileCheck %s --check-prefix=MANY
// RUN: %expect_error moe-run %s --device=cpu | FileCheck %s --check-prefix=NONE
//
// Arguments with moe.param are not inputs.

// FEW: moe-run: @forward takes 2 inputs (arguments without moe.param), got 1 --input
// MANY: moe-run: @forward takes 2 inputs (arguments without moe.param), got 3 --input
// NONE: moe-run: @forward takes 2 inputs (arguments without moe.param), got 0 --input

func.func @forward(%x: tensor<4xf32>, %w: tensor<4xf32> {moe.param = "w"},
                   %y: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
