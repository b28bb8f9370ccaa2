// RUN: rm -rf %t && mkdir -p %t
// RUN: %expect_error moe-run %s --device=cpu --fill-random --output=%t/a.npy \
// RUN:   | FileCheck %s --check-prefix=ONE
// RUN: %expect_error moe-run %s --device=cpu --fill-random --output=%t/a.npy \
// RUN:   --output=%t/b.npy --output=%t/c.npy | FileCheck %s --check-prefix=THREE
// RUN: not ls %t/a.npy
//
// An output that cannot be written.
// RUN: %expect_error moe-run %s --device=cpu --fill-random --output=%t/no/such/dir/a.npy \
// RUN:   --output=%t/b.npy | FileCheck %s --check-prefix=WRITE

// ONE: moe-run: @f has 2 results, got 1 --output
// THREE: moe-run: @f has 2 results, got 3 --output
// WRITE: moe-run: {{.*}}a.npy: {{.+}}

func.func @f(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  return %x, %x : tensor<4xf32>, tensor<4xf32>
}
