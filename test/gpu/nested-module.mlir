// A moe op inside a nested builtin.module: the lowerings outline kernels (and
// pack weights, and emit GPU launch functions) as symbols of the module they
// run on, which the nested op could not call. Each says so in one error
// naming the op (it used to end in an internal verifier failure:
// "'func.call' op ... does not reference a valid function"); run on the
// nested module itself, the lowering works.
//
// REQUIRES: host-supports-nvptx
// RUN: moe-opt %s -split-input-file -verify-diagnostics --convert-moe-to-gpu
// RUN: moe-opt %s -split-input-file -verify-diagnostics --moe-nvptx-pipeline
// (test/lowering/nested-module.mlir: the same for the CPU lowering.)
//
// Anchored on the nested module, convert-moe-to-gpu applies (the kernels'
// gpu.module and launch functions inside it):
// RUN: moe-opt %s -split-input-file \
// RUN:   --pass-pipeline='builtin.module(builtin.module(convert-moe-to-gpu))' \
// RUN:   | FileCheck %s
// CHECK-LABEL: module @inner attributes {gpu.container_module}
// CHECK: func.func @forward
// CHECK-NOT: moe.layer
// CHECK: call @__moe_launch_moe_gate_kernel
// CHECK: gpu.module @moe_kernels
// CHECK-LABEL: module @dispatch attributes {gpu.container_module}
// CHECK: func.func @forward
// CHECK-NOT: moe.dispatch
// CHECK: call @__moe_launch_moe_dispatch_rows_kernel
// CHECK: gpu.module @moe_kernels

module {
  module @inner {
    func.func @forward(%x: tensor<4x8xf32>, %wr: tensor<8x4xf32>, %w1: tensor<4x8x16xf32>,
                       %w2: tensor<4x16x8xf32>) -> tensor<4x8xf32> {
      // expected-error @below {{to the GPU inside a nested builtin.module}}
      %y = moe.layer %x router(%wr) experts(%w1, %w2)
             {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>}
             : (tensor<4x8xf32>, tensor<8x4xf32>, tensor<4x8x16xf32>, tensor<4x16x8xf32>) -> tensor<4x8xf32>
      return %y : tensor<4x8xf32>
    }
  }
}

// -----

module {
  module @dispatch {
    func.func @forward(%x: tensor<4x8xf32>, %i: tensor<4x2xi32>)
        -> (tensor<8x8xf32>, tensor<5xi32>, tensor<8xi32>, tensor<4x2xi32>) {
      // expected-error @below {{cannot lower 'moe.dispatch' to the GPU}}
      %rows, %off, %src, %pos = moe.dispatch %x, %i {num_experts = 4 : i64}
          : (tensor<4x8xf32>, tensor<4x2xi32>) -> (tensor<8x8xf32>, tensor<5xi32>, tensor<8xi32>, tensor<4x2xi32>)
      return %rows, %off, %src, %pos : tensor<8x8xf32>, tensor<5xi32>, tensor<8xi32>, tensor<4x2xi32>
    }
  }
}
