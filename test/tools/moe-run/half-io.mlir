// RUN: rm -rf %t && mkdir -p %t
//
// An f32 .npy binds to a bf16/f16 argument by rounding to nearest even.
// bf16: 1 + 2^-8 is a tie -> 1 (even); 1 + 3*2^-8 is a tie -> 1 + 2^-6
//       (even); 1 + 2^-8 + 2^-20 is above the tie -> 1 + 2^-7; 3.0e38 (below
//       the largest bf16, 3.39e38) -> 3.00406e38.
// f16:  1 + 2^-11 is a tie -> 1; 65519 -> 65504; 65520 (tie with 2^16) -> inf;
//       2^-25 (a tie between 0 and the smallest subnormal) -> 0;
//       3 * 2^-26 -> 2^-24 (the smallest subnormal).
// RUN: moe-npy write %t/b.npy f32 4 1.00390625 1.01171875 1.0039072036743164 3.0e38
// RUN: moe-npy write %t/h.npy f32 5 1.00048828125 65519 65520 2.9802322387695312e-08 4.470348358154297e-08
// RUN: moe-npy write %t/nan.npy f32 2 nan -inf
// RUN: moe-run %s --device=cpu --entry=halves --input=%t/b.npy --input=%t/h.npy \
// RUN:   --output=%t/bo.npy --output=%t/ho.npy | FileCheck %s
//
// bf16 results are written as f32 .npy (exact), f16 results as f16 .npy.
// RUN: moe-npy print %t/bo.npy | FileCheck %s --check-prefix=BF16
// RUN: moe-npy print %t/ho.npy | FileCheck %s --check-prefix=F16
//
// NaN stays NaN, infinities stay infinite.
// RUN: moe-run %s --device=cpu --entry=special --input=%t/nan.npy --output=%t/no.npy \
// RUN:   | FileCheck %s --check-prefix=NAN
// RUN: moe-npy print %t/no.npy | FileCheck %s --check-prefix=NAN-OUT
//
// Arithmetic in the element type: the checksums of bf16/f16 results are the
// sums of their exact values.
// RUN: moe-run %s --device=cpu --entry=triple --input=%t/b.npy --input=%t/h.npy \
// RUN:   --output=%t/tb.npy --output=%t/th.npy | FileCheck %s --check-prefix=TRIPLE
// RUN: moe-npy print %t/tb.npy | FileCheck %s --check-prefix=TRIPLE-BF16
// RUN: moe-npy print %t/th.npy | FileCheck %s --check-prefix=TRIPLE-F16
//
// Other dtype pairs are still refused.
// RUN: moe-npy write %t/f16.npy f16 4 1
// RUN: %expect_error moe-run %s --device=cpu --entry=halves --input=%t/f16.npy --input=%t/h.npy \
// RUN:   | FileCheck %s --check-prefix=ERR

// CHECK: result #0: tensor<4xbf16> checksum: sum=3.004055e+38 abs_sum=3.004055e+38
// CHECK-NEXT: result #1: tensor<5xf16> checksum: sum=inf abs_sum=inf
// BF16: f32 [4]: 1 1.01562 1.00781 3.00406e+38
// F16: f16 [5]: 1 65504 inf 0 5.96046e-08
// NAN: result #0: tensor<2xf16> checksum: sum=nan abs_sum=nan
// NAN-OUT: f16 [2]: nan -inf
// TRIPLE: result #0: tensor<3xbf16> checksum: sum=9.078125e+00 abs_sum=9.078125e+00
// TRIPLE-NEXT: result #1: tensor<2xf16> checksum: sum=3.275250e+04 abs_sum=3.275250e+04
// TRIPLE-BF16: f32 [3]: 3 3.04688 3.03125
// TRIPLE-F16: f16 [2]: 0.5 32752
// ERR: moe-run: --input {{.*}}f16.npy for argument #0 (%arg0): expected tensor<4xbf16>, got f16 [4]

func.func @halves(%b: tensor<4xbf16>, %h: tensor<5xf16>) -> (tensor<4xbf16>, tensor<5xf16>) {
  return %b, %h : tensor<4xbf16>, tensor<5xf16>
}

func.func @special(%h: tensor<2xf16>) -> tensor<2xf16> {
  return %h : tensor<2xf16>
}

// bf16: 3 * [1, 1.015625, 1.0078125] = [3, 3.046875, 3.0234375], the last a
// tie in bf16 (quantum 2^-6 in [2, 4)) -> 3.03125 (even).
// f16: 0.5 * [1, 65504] = [0.5, 32752].
func.func @triple(%b: tensor<4xbf16>, %h: tensor<5xf16>) -> (tensor<3xbf16>, tensor<2xf16>) {
  %b3 = tensor.extract_slice %b[0] [3] [1] : tensor<4xbf16> to tensor<3xbf16>
  %cb = arith.constant dense<3.0> : tensor<3xbf16>
  %tb = arith.mulf %b3, %cb : tensor<3xbf16>
  %h2 = tensor.extract_slice %h[0] [2] [1] : tensor<5xf16> to tensor<2xf16>
  %ch = arith.constant dense<0.5> : tensor<2xf16>
  %th = arith.mulf %h2, %ch : tensor<2xf16>
  return %tb, %th : tensor<3xbf16>, tensor<2xf16>
}
