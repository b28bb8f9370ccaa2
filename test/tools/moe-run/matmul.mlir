// RUN: rm -rf %t && mkdir -p %t
// RUN: moe-npy write %t/a.npy f32 2x3 1 2 3 4 5 6
// RUN: moe-npy write %t/w.npy f32 3x2 7 8 9 10 11 12
// RUN: moe-npy write %t/bias.npy f32 2 0.5 -0.25
//
// Parameters bound by name; the file's order and extra tensors do not matter.
// RUN: moe-npy pack %t/p.safetensors proj.weight=%t/w.npy proj.bias=%t/bias.npy \
// RUN:   unused=%t/a.npy
// RUN: moe-run %s --device=cpu --input=%t/a.npy --params=%t/p.safetensors \
// RUN:   --output=%t/y.npy | FileCheck %s
// RUN: moe-npy print %t/y.npy | FileCheck %s --check-prefix=OUT
//
// Parameters stored as BF16 / F16 are converted to the f32 arguments (these
// values are exact in both).
// RUN: moe-npy pack %t/p16.safetensors proj.weight=%t/w.npy:bf16 \
// RUN:   proj.bias=%t/bias.npy:f16
// RUN: moe-run %s --device=cpu --input=%t/a.npy --params=%t/p16.safetensors \
// RUN:   | FileCheck %s
//
// [[1,2,3],[4,5,6]] x [[7,8],[9,10],[11,12]] = [[58,64],[139,154]], plus the
// bias [0.5, -0.25] on every row: sum 415 + 0.5 = 415.5.

// CHECK: result #0: tensor<2x2xf32> checksum: sum=4.155000e+02 abs_sum=4.155000e+02
// OUT: f32 [2, 2]: 58.5 63.75 139.5 153.75

func.func @linear(%x: tensor<2x3xf32>,
                  %w: tensor<3x2xf32> {moe.param = "proj.weight"},
                  %b: tensor<2xf32> {moe.param = "proj.bias"}) -> tensor<2x2xf32> {
  %e = tensor.empty() : tensor<2x2xf32>
  %bb = linalg.broadcast ins(%b : tensor<2xf32>) outs(%e : tensor<2x2xf32>)
          dimensions = [0]
  %r = linalg.matmul ins(%x, %w : tensor<2x3xf32>, tensor<3x2xf32>)
                     outs(%bb : tensor<2x2xf32>) -> tensor<2x2xf32>
  return %r : tensor<2x2xf32>
}
