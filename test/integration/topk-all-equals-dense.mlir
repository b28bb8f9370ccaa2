// #moe.top_k<k = E> routes every token to every expert with weights
// exp(o_i) / sum_j exp(o_j) = softmax(o)_i, so it must give the same output
// as #moe.dense. One function computes both layers on the same operands and
// returns both results; they must agree to f32 rounding (the expert sums
// run in different orders: rank order vs expert order), and both must
// match the C++ reference of the dense layer.
// T=32 D=64 E=4 H=128, silu, router and expert biases.
//
// RUN: rm -rf %t && mkdir -p %t
// RUN: moe-ref layer --tokens 32 --dim 64 --experts 4 --hidden 128 \
// RUN:   --activation silu --routing dense --router-bias --expert-biases \
// RUN:   --data-seed 808 --names wr,br,w1,w2,b1,b2 \
// RUN:   --params %t/p.safetensors --input %t/x.npy --expected %t/y_ref.npy
// RUN: moe-run %s --device=%moe_device --entry=both --input=%t/x.npy \
// RUN:   --params=%t/p.safetensors --output=%t/y_topk.npy \
// RUN:   --output=%t/y_dense.npy | FileCheck %s
// RUN: moe-ref compare %t/y_topk.npy %t/y_dense.npy --tol 1e-5
// RUN: moe-ref compare %t/y_dense.npy %t/y_ref.npy --tol 1e-4
// RUN: moe-ref compare %t/y_topk.npy %t/y_ref.npy --tol 1e-4
//
// CHECK: result #0: tensor<32x64xf32>
// CHECK: result #1: tensor<32x64xf32>

func.func @both(%x: tensor<32x64xf32>,
                %wr: tensor<64x4xf32> {moe.param = "wr"},
                %br: tensor<4xf32> {moe.param = "br"},
                %w1: tensor<4x64x128xf32> {moe.param = "w1"},
                %w2: tensor<4x128x64xf32> {moe.param = "w2"},
                %b1: tensor<4x128xf32> {moe.param = "b1"},
                %b2: tensor<4x64xf32> {moe.param = "b2"})
    -> (tensor<32x64xf32>, tensor<32x64xf32>) {
  %topk = moe.layer %x router(%wr, %br) experts(%w1, %w2) expert_biases(%b1, %b2)
      {routing = #moe.top_k<k = 4>, activation = #moe.activation<silu>}
      : (tensor<32x64xf32>, tensor<64x4xf32>, tensor<4xf32>, tensor<4x64x128xf32>,
         tensor<4x128x64xf32>, tensor<4x128xf32>, tensor<4x64xf32>) -> tensor<32x64xf32>
  %dense = moe.layer %x router(%wr, %br) experts(%w1, %w2) expert_biases(%b1, %b2)
      {routing = #moe.dense, activation = #moe.activation<silu>}
      : (tensor<32x64xf32>, tensor<64x4xf32>, tensor<4xf32>, tensor<4x64x128xf32>,
         tensor<4x128x64xf32>, tensor<4x128xf32>, tensor<4x64xf32>) -> tensor<32x64xf32>
  return %topk, %dense : tensor<32x64xf32>, tensor<32x64xf32>
}
