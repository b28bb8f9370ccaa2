// RUN: %expect_error moe-run %s --device=cpu --entry=unranked | FileCheck %s --check-prefix=UNRANKED
// RUN: %expect_error moe-run %s --device=cpu --entry=scalar_result | FileCheck %s --check-prefix=SCALAR
// RUN: %expect_error moe-run %s --device=cpu --entry=i8 | FileCheck %s --check-prefix=I8
// RUN: %expect_error moe-run %s --device=cpu --entry=memref | FileCheck %s --check-prefix=MEMREF

// UNRANKED: moe-run: @unranked: argument #1 (%arg1) has type tensor<*xf32>; moe-run supports ranked tensors of f32, f16, bf16, i32, i64, f8E4M3FN and i4
// SCALAR: moe-run: @scalar_result: result #0 has type f32; moe-run supports ranked tensors of f32, f16, bf16, i32, i64, f8E4M3FN and i4
// I8: moe-run: @i8: argument #0 (%arg0) has element type i8 (tensor<3xi8>); moe-run supports f32, f16, bf16, i32, i64, f8E4M3FN and i4
// MEMREF: moe-run: @memref: argument #0 (%arg0) has type memref<4xf32>; moe-run supports

func.func @unranked(%a: tensor<4xf32>, %b: tensor<*xf32>) -> tensor<*xf32> {
  return %b : tensor<*xf32>
}
func.func @scalar_result(%a: tensor<3xf32>) -> f32 {
  %c = arith.constant 1.0 : f32
  return %c : f32
}
func.func @i8(%a: tensor<3xi8>) {
  return
}
func.func @memref(%a: memref<4xf32>) {
  return
}
