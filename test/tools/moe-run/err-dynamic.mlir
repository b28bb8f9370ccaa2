// RUN: rm -rf %t && mkdir -p %t
// RUN: moe-npy write %t/a.npy f32 3x5 1
// RUN: moe-npy write %t/v.npy f32 12 1
// RUN: moe-npy write %t/h.npy f16 3x4 1
// RUN: %expect_error moe-run %s --device=cpu --input=%t/a.npy | FileCheck %s --check-prefix=STATIC
// RUN: %expect_error moe-run %s --device=cpu --input=%t/v.npy | FileCheck %s --check-prefix=RANK
// RUN: %expect_error moe-run %s --device=cpu --input=%t/h.npy | FileCheck %s --check-prefix=DTYPE
// RUN: %expect_error moe-run %s --device=cpu --fill-random --dynamic-size=0 | FileCheck %s --check-prefix=ZERO
// RUN: %expect_error moe-run %s --device=cpu --fill-random --dynamic-size=-3 | FileCheck %s --check-prefix=NEG
// RUN: %expect_error moe-run %s --device=cpu --input=%t/h.npy --dynamic-size=4 | FileCheck %s --check-prefix=NOFILL
// RUN: %expect_error moe-run %s --device=cpu --fill-random --dynamic-size=4611686018427387904 \
// RUN:   | FileCheck %s --check-prefix=HUGE
//
// Static dimensions must still match; a dynamic one takes any size.

// STATIC: moe-run: --input {{.*}}a.npy for argument #0 (%arg0): expected tensor<?x4xf32>, got f32 [3, 5]
// RANK: moe-run: --input {{.*}}v.npy for argument #0 (%arg0): expected tensor<?x4xf32>, got f32 [12]
// DTYPE: moe-run: --input {{.*}}h.npy for argument #0 (%arg0): expected tensor<?x4xf32>, got f16 [3, 4]
// ZERO: moe-run: --dynamic-size must be >= 1, got 0
// NEG: moe-run: --dynamic-size must be >= 1, got -3
// NOFILL: moe-run: --dynamic-size has no effect without --fill-random
// HUGE: moe-run: --dynamic-size must be <= 2^31, got 4611686018427387904

func.func @forward(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  return %x : tensor<?x4xf32>
}
