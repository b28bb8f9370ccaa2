// moe.layer with a GShard capacity factor, compiled for the CPU, against
// the C++ reference: every expert keeps at most C = ceil(cf * T * k / E)
// assignments, taken in token order (t, then the token's rank order), the
// others are dropped (they add nothing; the kept weights are not
// renormalised). T=64, E=4, top_k<k = 2>: cf = 1.0 gives C = 32 and
// cf = 0.5 gives C = 16, so many assignments are dropped (moe-ref prints
// how many; FileCheck makes sure drops happen, otherwise the test would
// not test dropping). A layer that ignored the capacity would differ in
// the rows of the dropped tokens. D=32 H=64, relu, expert biases.
//
// RUN: rm -rf %t && mkdir -p %t
// RUN: moe-ref layer --tokens 64 --dim 32 --experts 4 --hidden 64 \
// RUN:   --activation relu --routing top_k --k 2 --expert-biases \
// RUN:   --capacity-factor 1.0 --data-seed 1201 --min-margin 1e-4 \
// RUN:   --names wr,w1,w2,b1,b2 --params %t/p.safetensors --input %t/x.npy \
// RUN:   --expected %t/y1_ref.npy | FileCheck %s --check-prefix=CF1
// RUN: moe-ref layer --tokens 64 --dim 32 --experts 4 --hidden 64 \
// RUN:   --activation relu --routing top_k --k 2 --expert-biases \
// RUN:   --capacity-factor 0.5 --data-seed 1201 --min-margin 1e-4 \
// RUN:   --names wr,w1,w2,b1,b2 --params %t/p.safetensors --input %t/x.npy \
// RUN:   --expected %t/y05_ref.npy | FileCheck %s --check-prefix=CF05
// RUN: moe-ref layer --tokens 64 --dim 32 --experts 4 --hidden 64 \
// RUN:   --activation relu --routing top_k --k 2 --expert-biases \
// RUN:   --data-seed 1201 --min-margin 1e-4 \
// RUN:   --names wr,w1,w2,b1,b2 --params %t/p.safetensors --input %t/x.npy \
// RUN:   --expected %t/y_ref.npy
// RUN: moe-run %s --device=%moe_device --entry=forward --input=%t/x.npy \
// RUN:   --params=%t/p.safetensors --output=%t/y1.npy --output=%t/y05.npy \
// RUN:   --output=%t/y.npy
// RUN: moe-ref compare %t/y1.npy %t/y1_ref.npy --tol 1e-4
// RUN: moe-ref compare %t/y05.npy %t/y05_ref.npy --tol 1e-4
// RUN: moe-ref compare %t/y.npy %t/y_ref.npy --tol 1e-4
// The drops matter: the dropless output differs.
// RUN: not moe-ref compare %t/y05.npy %t/y_ref.npy --tol 1e-4
//
// CF1: capacity 32, {{[1-9][0-9]*}} assignments dropped
// CF05: capacity 16, {{[1-9][0-9]*}} assignments dropped

func.func @forward(%x: tensor<64x32xf32>,
                   %wr: tensor<32x4xf32> {moe.param = "wr"},
                   %w1: tensor<4x32x64xf32> {moe.param = "w1"},
                   %w2: tensor<4x64x32xf32> {moe.param = "w2"},
                   %b1: tensor<4x64xf32> {moe.param = "b1"},
                   %b2: tensor<4x32xf32> {moe.param = "b2"})
    -> (tensor<64x32xf32>, tensor<64x32xf32>, tensor<64x32xf32>) {
  %y1 = moe.layer %x router(%wr) experts(%w1, %w2) expert_biases(%b1, %b2)
      {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>,
       capacity_factor = 1.0 : f64}
      : (tensor<64x32xf32>, tensor<32x4xf32>, tensor<4x32x64xf32>, tensor<4x64x32xf32>,
         tensor<4x64xf32>, tensor<4x32xf32>) -> tensor<64x32xf32>
  %y05 = moe.layer %x router(%wr) experts(%w1, %w2) expert_biases(%b1, %b2)
      {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>,
       capacity_factor = 0.5 : f64}
      : (tensor<64x32xf32>, tensor<32x4xf32>, tensor<4x32x64xf32>, tensor<4x64x32xf32>,
         tensor<4x64xf32>, tensor<4x32xf32>) -> tensor<64x32xf32>
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_biases(%b1, %b2)
      {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>}
      : (tensor<64x32xf32>, tensor<32x4xf32>, tensor<4x32x64xf32>, tensor<4x64x32xf32>,
         tensor<4x64xf32>, tensor<4x32xf32>) -> tensor<64x32xf32>
  return %y1, %y05, %y : tensor<64x32xf32>, tensor<64x32xf32>, tensor<64x32xf32>
}
