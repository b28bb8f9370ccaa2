// RUN: %expect_error moe-run %s --device=cuda --fill-random | FileCheck %s
// RUN: %expect_error moe-run %s --device=tpu --fill-random | FileCheck %s --check-prefix=BAD

// CHECK: moe-run: --device=cuda: the CUDA path is not built yet
// BAD: moe-run: for the --device option: Cannot find option named 'tpu'!

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
