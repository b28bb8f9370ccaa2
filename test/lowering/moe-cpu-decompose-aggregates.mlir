// RUN: moe-opt %s --moe-cpu-decompose-aggregates --split-input-file | FileCheck %s

// linalg.softmax over the experts (what frontends emit and what
// --moe-raise-linalg leaves in place when it does not raise a layer) becomes
// max, exp(x - max), sum, div as structured ops the CPU pipeline lowers.
// CHECK-LABEL: func.func @softmax(
// CHECK-NOT: linalg.softmax
// CHECK: linalg.fill
// CHECK: linalg.generic
// CHECK: arith.maxnumf
// CHECK: linalg.generic
// CHECK: arith.subf
// CHECK-NEXT: math.exp
// CHECK: linalg.generic
// CHECK: arith.addf
// CHECK: linalg.generic
// CHECK: arith.divf
// CHECK-NOT: linalg.softmax
// CHECK: return
func.func @softmax(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = tensor.empty() : tensor<4x8xf32>
  %y = linalg.softmax dimension(1) ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Ops that are not aggregates are left alone.
// CHECK-LABEL: func.func @matmul(
// CHECK-NEXT: linalg.matmul
// CHECK-NEXT: return
func.func @matmul(%a: tensor<4x8xf32>, %b: tensor<8x2xf32>, %c: tensor<4x2xf32>) -> tensor<4x2xf32> {
  %r = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x2xf32>) outs(%c : tensor<4x2xf32>) -> tensor<4x2xf32>
  return %r : tensor<4x2xf32>
}
