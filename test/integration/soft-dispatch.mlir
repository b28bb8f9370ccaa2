// moe.soft_dispatch compiled for the CPU: its slot rows and combine weights
// against the C++ reference, and the two normalisations of Soft MoE:
//  * combine weights Cw[g, m, :, :] sum to 1 over (e, s) for every token;
//  * dispatch weights Dw[g, :, e, s] sum to 1 over the tokens m. The op only
//    returns the slots X~[g,e,s,:] = sum_m Dw[g,m,e,s] x[g,m,:], so the
//    second run feeds one-hot tokens, x[g] = the M x M identity (D = M):
//    then X~[g,e,s,d] = Dw[g,d,e,s] and each slot row's sum over d is the
//    sum of Dw over the tokens. (With one-hot rows the logits are
//    L[g,m,e,s] = scale * Phin[m,e,s] / sqrt(1 + 1e-6), so Dw is a genuine
//    softmax over 16 tokens, not a uniform average.)
// G=2 groups, M=16 tokens, D=16, E=4 experts, S=2 slots; moe-ref soft writes
// phi, scale (2.5), w1, w2 (w1, w2 unused here).
//
// RUN: rm -rf %t && mkdir -p %t
// RUN: moe-ref soft --groups 2 --tokens 16 --dim 16 --experts 4 --slots 2 \
// RUN:   --hidden 8 --activation relu --normalize --scale-param \
// RUN:   --data-seed 707 --names phi,scale,w1,w2 \
// RUN:   --params %t/p.safetensors --input %t/x.npy --expected %t/y_ref.npy \
// RUN:   --expected-slots %t/rows_ref.npy --expected-combine %t/cw_ref.npy
//
// Random tokens: rows and combine weights equal the reference's.
// RUN: moe-run %s --device=%moe_device --entry=dispatch --input=%t/x.npy \
// RUN:   --params=%t/p.safetensors --output=%t/rows.npy \
// RUN:   --output=%t/offsets.npy --output=%t/cw.npy | FileCheck %s
// RUN: moe-ref compare %t/rows.npy %t/rows_ref.npy --tol 1e-5
// RUN: moe-ref compare %t/cw.npy %t/cw_ref.npy --tol 1e-5
// RUN: moe-ref sum-check %t/cw.npy --axes 2,3 --expect 1 --tol 1e-5
// RUN: moe-npy print %t/offsets.npy | FileCheck %s --check-prefix=OFFSETS
//
// One-hot tokens: every slot row sums to 1 (dispatch weights over tokens).
// RUN: moe-ref gen-npy --shape 2,16,16 --eye --out %t/eye.npy
// RUN: moe-run %s --device=%moe_device --entry=dispatch --input=%t/eye.npy \
// RUN:   --params=%t/p.safetensors --output=%t/dw_rows.npy \
// RUN:   --output=%t/offsets2.npy --output=%t/cw2.npy | FileCheck %s
// RUN: moe-ref sum-check %t/dw_rows.npy --axes 1 --expect 1 --tol 1e-5
// RUN: moe-ref sum-check %t/cw2.npy --axes 2,3 --expect 1 --tol 1e-5
// The weights are not uniform (1/16): some slot weight is far from it.
// RUN: not moe-ref value-check %t/dw_rows.npy --expect 0.0625 --tol 0.01
//
// CHECK: result #0: tensor<16x16xf32>
// CHECK: result #1: tensor<5xi32>
// CHECK: result #2: tensor<2x16x4x2xf32>
// OFFSETS: i32 [5]: 0 4 8 12 16

func.func @dispatch(%x: tensor<2x16x16xf32>,
                    %phi: tensor<16x4x2xf32> {moe.param = "phi"},
                    %scale: tensor<f32> {moe.param = "scale"})
    -> (tensor<16x16xf32>, tensor<5xi32>, tensor<2x16x4x2xf32>) {
  %rows, %offsets, %cw = moe.soft_dispatch %x slots(%phi) scale(%scale) {normalize}
      : (tensor<2x16x16xf32>, tensor<16x4x2xf32>, tensor<f32>)
      -> (tensor<16x16xf32>, tensor<5xi32>, tensor<2x16x4x2xf32>)
  return %rows, %offsets, %cw : tensor<16x16xf32>, tensor<5xi32>, tensor<2x16x4x2xf32>
}
