// A moe op inside a nested builtin.module: the lowerings outline kernels (and
// pack weights, and emit GPU launch functions) as symbols of the module they
// run on, which the nested op could not call. Each says so in one error
// naming the op (it used to end in an internal verifier failure:
// "'func.call' op ... does not reference a valid function"); run on the
// nested module itself, the lowering works.
//
// RUN: moe-opt %s -split-input-file -verify-diagnostics --convert-moe-to-cpu
// RUN: moe-opt %s -split-input-file -verify-diagnostics --moe-cpu-pipeline
// (test/gpu/nested-module.mlir: the same for the GPU lowering.)
//
// Anchored on the nested module, the CPU lowering applies (kernels inside it):
// RUN: moe-opt %s -split-input-file \
// RUN:   --pass-pipeline='builtin.module(builtin.module(convert-moe-to-cpu))' \
// RUN:   | FileCheck %s
// CHECK-LABEL: module @inner
// CHECK: func.func @forward
// CHECK-NOT: moe.layer
// CHECK: call @__moe_cpu_router_v512_6x4_b48x256_p32_[[R:[0-9A-F]+]](
// CHECK: func.func private @__moe_cpu_router_v512_6x4_b48x256_p32_[[R]](
// CHECK-LABEL: module @dispatch
// CHECK: func.func @forward
// CHECK-NOT: moe.
// CHECK: return

module {
  module @inner {
    func.func @forward(%x: tensor<4x8xf32>, %wr: tensor<8x4xf32>, %w1: tensor<4x8x16xf32>,
                       %w2: tensor<4x16x8xf32>) -> tensor<4x8xf32> {
      // expected-error @below {{inside a nested builtin.module}}
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
      // expected-error @below {{cannot lower 'moe.dispatch'}}
      %rows, %off, %src, %pos = moe.dispatch %x, %i {num_experts = 4 : i64}
          : (tensor<4x8xf32>, tensor<4x2xi32>) -> (tensor<8x8xf32>, tensor<5xi32>, tensor<8xi32>, tensor<4x2xi32>)
      return %rows, %off, %src, %pos : tensor<8x8xf32>, tensor<5xi32>, tensor<8xi32>, tensor<4x2xi32>
    }
  }
}
