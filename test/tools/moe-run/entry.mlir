// RUN: moe-run %s --device=cpu --entry=two | FileCheck %s --check-prefix=TWO
// RUN: moe-run %s --device=cpu --entry=three | FileCheck %s --check-prefix=THREE
//
// Private functions are not candidates, but can be called.

// TWO: result #0: tensor<2xi32> checksum: sum=4.000000e+00
// THREE: result #0: tensor<3xf32> checksum: sum=9.000000e+00

func.func @two() -> tensor<2xi32> {
  %c = arith.constant dense<2> : tensor<2xi32>
  return %c : tensor<2xi32>
}
func.func @three() -> tensor<3xf32> {
  %c = func.call @helper() : () -> tensor<3xf32>
  return %c : tensor<3xf32>
}
func.func private @helper() -> tensor<3xf32> {
  %c = arith.constant dense<3.0> : tensor<3xf32>
  return %c : tensor<3xf32>
}
