// --moe-gpu-kernel-module adds the empty gpu.module @moe_kernels (and marks
// the module a container) when the module holds moe ops and has none; a
// module without moe ops, or with the kernel module already, is left alone.
// RUN: moe-opt %s -split-input-file --moe-gpu-kernel-module | FileCheck %s

// CHECK-LABEL: module attributes {gpu.container_module}
// CHECK: func.func @layer
// CHECK: gpu.module @moe_kernels {
// CHECK-NEXT: }
func.func @layer(%x: tensor<4x8xf32>, %wr: tensor<8x4xf32>) -> tensor<4x4xf32> {
  %o = moe.route %x router(%wr) : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  return %o : tensor<4x4xf32>
}

// -----

// CHECK-LABEL: module {
// CHECK-NOT: gpu.module
func.func @no_moe(%x: f32) -> f32 {
  return %x : f32
}

// -----

// CHECK-LABEL: module attributes {gpu.container_module}
// CHECK: gpu.module @moe_kernels [#nvvm.target<chip = "sm_80">]
// CHECK-NOT: gpu.module
module attributes {gpu.container_module} {
  func.func @layer(%x: tensor<4x8xf32>, %wr: tensor<8x4xf32>) -> tensor<4x4xf32> {
    %o = moe.route %x router(%wr) : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
    return %o : tensor<4x4xf32>
  }
  gpu.module @moe_kernels [#nvvm.target<chip = "sm_80">] {
  }
}
