// RUN: rm -rf %t && mkdir -p %t
//
// Deterministic: the same seed gives the same values.
// RUN: moe-run %s --device=cpu --fill-random --seed=7 --output=%t/x1.npy \
// RUN:   --output=%t/w1.npy --output=%t/b1.npy --output=%t/s1.npy > %t/run1.txt
// RUN: moe-run %s --device=cpu --fill-random --seed=7 --output=%t/x2.npy \
// RUN:   --output=%t/w2.npy --output=%t/b2.npy --output=%t/s2.npy > %t/run2.txt
// RUN: cmp %t/x1.npy %t/x2.npy
// RUN: cmp %t/w1.npy %t/w2.npy
// RUN: cmp %t/run1.txt %t/run2.txt
// RUN: FileCheck %s < %t/run1.txt
//
// Another seed gives other values.
// RUN: moe-run %s --device=cpu --fill-random --seed=8 --output=%t/x3.npy \
// RUN:   --output=%t/w3.npy --output=%t/b3.npy --output=%t/s3.npy | FileCheck %s --check-prefix=SEED8
// RUN: not cmp -s %t/x1.npy %t/x3.npy
//
// Binding an argument from a file does not change the others' values.
// RUN: moe-npy write %t/zero.npy f32 64x64 0
// RUN: moe-run %s --device=cpu --fill-random --seed=7 --input=%t/zero.npy \
// RUN:   --output=%t/x4.npy --output=%t/w4.npy --output=%t/b4.npy \
// RUN:   --output=%t/s4.npy | FileCheck %s --check-prefix=BOUND
// RUN: cmp %t/w1.npy %t/w4.npy
//
// Inputs are N(0, 1): the mean of |z| is sqrt(2/pi) = 0.798, so 4096 values
// have abs_sum ~ 3268. The [256, 4] weight is scaled by 1/sqrt(256):
// abs_sum ~ 1024 * 0.798 / 16 = 51. The [16] bias by 1/sqrt(16): ~ 3.2. The
// i64 argument holds the seed.
// CHECK: result #0: tensor<64x64xf32> checksum: sum={{.*}} abs_sum=3.{{[23]}}{{[0-9]*}}e+03
// CHECK: result #1: tensor<256x4xf32> checksum: sum={{.*}} abs_sum={{(4\.[6-9]|5\.[0-6])[0-9]*}}e+01
// CHECK: result #2: tensor<16xf32> checksum: sum={{.*}} abs_sum={{[1-5]\.[0-9]*}}e+00
// CHECK: result #3: tensor<i64> checksum: sum=7.000000e+00 abs_sum=7.000000e+00
// SEED8: result #3: tensor<i64> checksum: sum=8.000000e+00
// BOUND: result #0: tensor<64x64xf32> checksum: sum=0.000000e+00 abs_sum=0.000000e+00

func.func @identity(%x: tensor<64x64xf32>,
                    %w: tensor<256x4xf32> {moe.param = "w"},
                    %b: tensor<16xf32> {moe.param = "b"},
                    %seed: tensor<i64>)
    -> (tensor<64x64xf32>, tensor<256x4xf32>, tensor<16xf32>, tensor<i64>) {
  return %x, %w, %b, %seed
      : tensor<64x64xf32>, tensor<256x4xf32>, tensor<16xf32>, tensor<i64>
}
