// A function returning one computed value twice runs (it used to crash in
// buffer-results-to-out-params): every result gets its own buffer.
// RUN: rm -rf %t && mkdir -p %t
// RUN: moe-run %s --device=cpu --fill-random --output=%t/a.npy --output=%t/b.npy | FileCheck %s
// RUN: cmp %t/a.npy %t/b.npy

// CHECK: result #0: tensor<4xf32> checksum: sum=[[S:.*]] abs_sum=[[A:.*]]
// CHECK-NEXT: result #1: tensor<4xf32> checksum: sum=[[S]] abs_sum=[[A]]

func.func @f(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %y = arith.addf %x, %x : tensor<4xf32>
  return %y, %y : tensor<4xf32>, tensor<4xf32>
}
