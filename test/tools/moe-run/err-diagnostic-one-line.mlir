// An MLIR error with notes is still one line: the first error with its
// location, its notes dropped.
// RUN: %expect_error moe-run %s --device=cpu --fill-random | FileCheck %s

// CHECK: moe-run: {{.*}}err-diagnostic-one-line.mlir:[[@LINE+5]]:1: redefinition of symbol named 'f'

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
