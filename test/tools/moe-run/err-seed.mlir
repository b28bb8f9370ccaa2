// RUN: %expect_error moe-run %s --device=cpu --seed=3 | FileCheck %s

// CHECK: moe-run: --seed has no effect without --fill-random

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
