// RUN: rm -rf %t && mkdir -p %t
// RUN: moe-npy write %t/a.npy f32 2x3 1 -2 3 -4 5 -6
// RUN: moe-npy write %t/s.npy f32 scalar 0.5
// RUN: moe-run %s --device=cpu --input=%t/a.npy --input=%t/s.npy \
// RUN:   --output=%t/r.npy | FileCheck %s
// RUN: moe-npy print %t/r.npy | FileCheck %s --check-prefix=OUT
//
// 0-d input and 0-d result: (1 - 2 + 3 - 4 + 5 - 6) * 0.5 = -1.5.

// CHECK: result #0: tensor<f32> checksum: sum=-1.500000e+00 abs_sum=1.500000e+00
// OUT: f32 []: -1.5

func.func @total(%a: tensor<2x3xf32>, %s: tensor<f32>) -> tensor<f32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %r = linalg.reduce ins(%a : tensor<2x3xf32>) outs(%z : tensor<f32>)
         dimensions = [0, 1]
    (%x: f32, %acc: f32) {
      %y = arith.addf %x, %acc : f32
      linalg.yield %y : f32
    }
  %m = linalg.mul ins(%r, %s : tensor<f32>, tensor<f32>)
                  outs(%e : tensor<f32>) -> tensor<f32>
  return %m : tensor<f32>
}
