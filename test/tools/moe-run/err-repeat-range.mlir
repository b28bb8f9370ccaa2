// --repeat is bounded: 4294967295 used to wrap (N + 1 = 0 runs, exit 0 with
// a zero checksum and no timing line).
// RUN: %expect_error moe-run %s --device=cpu --fill-random --repeat=4294967295 | FileCheck %s
// RUN: %expect_error moe-run %s --device=cpu --fill-random --repeat=1000001 | FileCheck %s --check-prefix=OVER
// RUN: %expect_error moe-run %s --device=cpu --fill-random --dynamic-size=2147483649 | FileCheck %s --check-prefix=DYN

// CHECK: moe-run: --repeat must be <= 1000000, got 4294967295
// OVER: moe-run: --repeat must be <= 1000000, got 1000001
// DYN: moe-run: --dynamic-size must be <= 2^31, got 2147483649

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
