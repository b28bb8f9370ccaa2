// RUN: rm -rf %t && mkdir -p %t
// RUN: moe-npy write %t/a.npy f32 3 1 2 3
// RUN: moe-run %s --device=cpu --input=%t/a.npy --repeat=3 --output=%t/r.npy \
// RUN:   | FileCheck %s
// RUN: moe-npy print %t/r.npy | FileCheck %s --check-prefix=OUT
// RUN: moe-run %s --device=cpu --input=%t/a.npy --repeat=1 | FileCheck %s
//
// The function updates its argument in place; moe-run marks the arguments
// non-writable, so each of the 4 runs (warm-up + 3) sees the original input
// and the result is 2 * [1, 2, 3], not 16 * [1, 2, 3].

// CHECK: result #0: tensor<3xf32> checksum: sum=1.200000e+01 abs_sum=1.200000e+01
// CHECK-NEXT: median-ms: {{[0-9]+\.[0-9][0-9][0-9]$}}
// OUT: f32 [3]: 2 4 6

func.func @double(%a: tensor<3xf32>) -> tensor<3xf32> {
  %r = linalg.add ins(%a, %a : tensor<3xf32>, tensor<3xf32>)
                  outs(%a : tensor<3xf32>) -> tensor<3xf32>
  return %r : tensor<3xf32>
}
