// Run-equality of the moe canonicalizations (test/dialect/canonicalize.mlir):
// a classic #moe.top_k<k = E> layer with a capacity_factor >= E and zero
// router and expert biases canonicalizes to a dense, dropless layer without
// biases. Both functions run on the same operands; the results agree to f32
// rounding (1e-5: the renormalization of the top-k weights and the order of
// the expert sums differ) and both match the C++ reference of the dense
// layer without biases (1e-4).
// T=32 D=64 E=4 H=128, silu.
//
// RUN: rm -rf %t && mkdir -p %t
// RUN: moe-opt %s --canonicalize -o %t/canon.mlir
// RUN: FileCheck %s --check-prefix=CANON < %t/canon.mlir
// RUN: moe-ref layer --tokens 32 --dim 64 --experts 4 --hidden 128 \
// RUN:   --activation silu --routing dense --data-seed 909 --names wr,w1,w2 \
// RUN:   --params %t/p.safetensors --input %t/x.npy --expected %t/y_ref.npy
// RUN: moe-run %s --device=%moe_device --entry=forward --input=%t/x.npy \
// RUN:   --params=%t/p.safetensors --output=%t/y_before.npy | FileCheck %s
// RUN: moe-run %t/canon.mlir --device=%moe_device --entry=forward --input=%t/x.npy \
// RUN:   --params=%t/p.safetensors --output=%t/y_after.npy | FileCheck %s
// RUN: moe-ref compare %t/y_before.npy %t/y_after.npy --tol 1e-5
// RUN: moe-ref compare %t/y_after.npy %t/y_ref.npy --tol 1e-4
// RUN: moe-ref compare %t/y_before.npy %t/y_ref.npy --tol 1e-4
//
// CHECK: result #0: tensor<32x64xf32>
//
// CANON-LABEL: func.func @forward
// CANON-NEXT:    %[[Y:.*]] = moe.layer %arg0 router(%arg1) experts(%arg2, %arg3) {activation = #moe.activation<silu>, routing = #moe.dense}
// CANON-NEXT:    return %[[Y]]

func.func @forward(%x: tensor<32x64xf32>,
                   %wr: tensor<64x4xf32> {moe.param = "wr"},
                   %w1: tensor<4x64x128xf32> {moe.param = "w1"},
                   %w2: tensor<4x128x64xf32> {moe.param = "w2"}) -> tensor<32x64xf32> {
  %br = arith.constant dense<0.0> : tensor<4xf32>
  %b1 = arith.constant dense<0.0> : tensor<4x128xf32>
  %b2 = arith.constant dense<0.0> : tensor<4x64xf32>
  %y = moe.layer %x router(%wr, %br) experts(%w1, %w2) expert_biases(%b1, %b2)
      {routing = #moe.top_k<k = 4>, activation = #moe.activation<silu>, capacity_factor = 4.0 : f64}
      : (tensor<32x64xf32>, tensor<64x4xf32>, tensor<4xf32>, tensor<4x64x128xf32>,
         tensor<4x128x64xf32>, tensor<4x128xf32>, tensor<4x64xf32>) -> tensor<32x64xf32>
  return %y : tensor<32x64xf32>
}
