// RUN: rm -rf %t && mkdir -p %t
// RUN: moe-npy write %t/a.npy f32 3 1 2 3
// RUN: moe-npy write %t/b.npy f32 3 10 20 30
// RUN: moe-run %s --device=cpu --input=%t/a.npy --input=%t/b.npy \
// RUN:   --output=%t/sum.npy | FileCheck %s
// RUN: moe-npy print %t/sum.npy | FileCheck %s --check-prefix=OUT
//
// --device=auto runs on the cpu (here: no usable driver) and says so on stderr.
// RUN: env MOE_CUDA_DRIVER=%t/no-libcuda.so moe-run %s --input=%t/a.npy --input=%t/b.npy 2>&1 >/dev/null \
// RUN:   | FileCheck %s --check-prefix=AUTO
// RUN: moe-run %s --device=cpu --input=%t/a.npy --input=%t/b.npy 2>&1 >/dev/null \
// RUN:   | count 0
//
// [1, 2, 3] + [10, 20, 30] = [11, 22, 33]: sum 66.

// CHECK: result #0: tensor<3xf32> checksum: sum=6.600000e+01 abs_sum=6.600000e+01
// CHECK-NOT: result
// CHECK-NOT: median-ms
// OUT: f32 [3]: 11 22 33
// AUTO: moe-run: device auto: using cpu (cannot load the CUDA driver

func.func @add(%a: tensor<3xf32>, %b: tensor<3xf32>) -> tensor<3xf32> {
  %e = tensor.empty() : tensor<3xf32>
  %r = linalg.add ins(%a, %b : tensor<3xf32>, tensor<3xf32>)
                  outs(%e : tensor<3xf32>) -> tensor<3xf32>
  return %r : tensor<3xf32>
}
