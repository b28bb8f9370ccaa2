// RUN: rm -rf %t && mkdir -p %t
// RUN: moe-npy write %t/x.npy f16 4 0.5 1.5 -2 4
// RUN: moe-npy write %t/i.npy i32 4 1 2 3 -4
// RUN: moe-run %s --device=cpu --input=%t/x.npy --input=%t/i.npy \
// RUN:   --output=%t/p.npy --output=%t/q.npy | FileCheck %s
// RUN: moe-npy print %t/p.npy | FileCheck %s --check-prefix=P
// RUN: moe-npy print %t/q.npy | FileCheck %s --check-prefix=Q
//
// f16 and i32 inputs, a bf16 result (written as f32 .npy) and an i64 result:
// p = bf16(x * i) = [0.5, 3, -6, -16]; q = 2 * i = [2, 4, 6, -8].

// CHECK: result #0: tensor<4xbf16> checksum: sum=-1.850000e+01 abs_sum=2.550000e+01
// CHECK: result #1: tensor<4xi64> checksum: sum=4.000000e+00 abs_sum=2.000000e+01
// P: f32 [4]: 0.5 3 -6 -16
// Q: i64 [4]: 2 4 6 -8

#id = affine_map<(d0) -> (d0)>
func.func @mixed(%x: tensor<4xf16>, %i: tensor<4xi32>) -> (tensor<4xbf16>, tensor<4xi64>) {
  %e0 = tensor.empty() : tensor<4xbf16>
  %e1 = tensor.empty() : tensor<4xi64>
  %r:2 = linalg.generic {indexing_maps = [#id, #id, #id, #id],
                         iterator_types = ["parallel"]}
      ins(%x, %i : tensor<4xf16>, tensor<4xi32>)
      outs(%e0, %e1 : tensor<4xbf16>, tensor<4xi64>) {
  ^bb0(%a: f16, %b: i32, %o0: bf16, %o1: i64):
    %af = arith.extf %a : f16 to f32
    %bf = arith.sitofp %b : i32 to f32
    %p = arith.mulf %af, %bf : f32
    %pb = arith.truncf %p : f32 to bf16
    %b64 = arith.extsi %b : i32 to i64
    %q = arith.addi %b64, %b64 : i64
    linalg.yield %pb, %q : bf16, i64
  } -> (tensor<4xbf16>, tensor<4xi64>)
  return %r#0, %r#1 : tensor<4xbf16>, tensor<4xi64>
}
