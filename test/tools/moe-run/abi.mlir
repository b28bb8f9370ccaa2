// RUN: moe-run %s --device=cpu --fill-random --dump-lowered | FileCheck %s
//
// The calling convention moe-run relies on: after the cpu pipeline the entry
// has a C interface taking the inputs, then one out-parameter per result,
// each a pointer to a memref descriptor {allocated, aligned, offset,
// sizes[R], strides[R]} ({allocated, aligned, offset} for rank 0), and
// returns nothing.

// CHECK-LABEL: llvm.func @_mlir_ciface_f(%arg0: !llvm.ptr, %arg1: !llvm.ptr, %arg2: !llvm.ptr, %arg3: !llvm.ptr)
// CHECK-NOT: -> !llvm
// CHECK: llvm.load %arg0 : !llvm.ptr -> !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)>
// CHECK: llvm.load %arg1 : !llvm.ptr -> !llvm.struct<(ptr, ptr, i64)>
// CHECK: llvm.load %arg2 : !llvm.ptr -> !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)>
// CHECK: llvm.load %arg3 : !llvm.ptr -> !llvm.struct<(ptr, ptr, i64)>
// CHECK: llvm.return{{$}}
// CHECK: result #0: tensor<2x3xf32>
// CHECK: result #1: tensor<f32>

func.func @f(%a: tensor<2x3xf32>, %s: tensor<f32>) -> (tensor<2x3xf32>, tensor<f32>) {
  %e = tensor.empty() : tensor<2x3xf32>
  %r = linalg.add ins(%a, %a : tensor<2x3xf32>, tensor<2x3xf32>)
                  outs(%e : tensor<2x3xf32>) -> tensor<2x3xf32>
  return %r, %s : tensor<2x3xf32>, tensor<f32>
}
