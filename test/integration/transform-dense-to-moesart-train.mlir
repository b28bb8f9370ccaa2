// --moe-dense-to-moesart on a training-mode dense layer (a seed operand, two
// results: y and the aux loss, which is 0 for #moe.dense): it must become a
// training-mode MOESART layer with the same seed, which samples k = 2
// experts per token without replacement (Philox4x32-10 keyed by the 64-bit
// seed), weights them by `adjust` and returns the trimmed-lasso loss
// lambda * mean_t(1 - top-2 sum of g). The transformed file runs on the CPU
// against the independent reference of the target form (`moe-ref layer
// --routing moesart --training`) on the same weights:
//  * the defaults (adjust = small_random, trimmed-lasso = 0.001) for seeds
//    1, 8589934597 = 2^33 + 5 (key high word 2) and 2^64 - 1 (the i64 -1,
//    both key words 0xffffffff);
//  * adjust = large, trimmed-lasso = 0.01 for seeds 1 and 8589934597.
// Matching y means the compiled code draws the same experts (and
// small_random's j) for every token as the reference; moe-ref refuses data
// where a token's uniform lies within 1e-6 of a cumsum boundary. Matching
// the loss checks lambda (the large variant's loss is 10 times the other).
// The untransformed layer is run once as a baseline: dense output, loss 0.
// T=64 D=64 E=8 H=128, silu, router and expert biases.
//
// RUN: rm -rf %t && mkdir -p %t
//
// Baseline: the dense training layer itself (loss 0).
// RUN: moe-ref layer --tokens 64 --dim 64 --experts 8 --hidden 128 \
// RUN:   --activation silu --routing dense --training --seed-value 1 \
// RUN:   --router-bias --expert-biases --data-seed 121 \
// RUN:   --names router.weight,router.bias,experts.w1,experts.w2,experts.b1,experts.b2 \
// RUN:   --params %t/p.safetensors --input %t/x.npy --seed-input %t/seed_1.npy \
// RUN:   --expected %t/y_dense_ref.npy --expected-loss %t/loss_dense_ref.npy
// RUN: moe-run %s --device=%moe_device --entry=train_forward --input=%t/x.npy \
// RUN:   --input=%t/seed_1.npy --params=%t/p.safetensors \
// RUN:   --output=%t/y_dense.npy --output=%t/loss_dense.npy | FileCheck %s
// RUN: moe-ref compare %t/y_dense.npy %t/y_dense_ref.npy --tol 1e-4
// RUN: moe-ref value-check %t/loss_dense.npy --expect 0 --tol 0
//
// small_random, lambda 0.001 (the pass's defaults).
// RUN: moe-opt %s --moe-dense-to-moesart -o %t/sr.mlir
// RUN: FileCheck %s --check-prefix=IR-SR --input-file %t/sr.mlir
// RUN: moe-ref layer --tokens 64 --dim 64 --experts 8 --hidden 128 \
// RUN:   --activation silu --routing moesart --k 2 --adjust small_random \
// RUN:   --lambda 1e-3 --training --seed-value 1 --router-bias \
// RUN:   --expert-biases --data-seed 121 \
// RUN:   --names router.weight,router.bias,experts.w1,experts.w2,experts.b1,experts.b2 \
// RUN:   --params %t/p.safetensors --input %t/x.npy --seed-input %t/seed_1.npy \
// RUN:   --expected %t/y_sr_ref_1.npy --expected-loss %t/loss_sr_ref_1.npy
// RUN: moe-run %t/sr.mlir --device=%moe_device --entry=train_forward --input=%t/x.npy \
// RUN:   --input=%t/seed_1.npy --params=%t/p.safetensors \
// RUN:   --output=%t/y_sr_1.npy --output=%t/loss_sr_1.npy | FileCheck %s
// RUN: moe-ref compare %t/y_sr_1.npy %t/y_sr_ref_1.npy --tol 1e-4
// RUN: moe-ref compare %t/loss_sr_1.npy %t/loss_sr_ref_1.npy --tol 1e-4
//
// RUN: moe-ref layer --tokens 64 --dim 64 --experts 8 --hidden 128 \
// RUN:   --activation silu --routing moesart --k 2 --adjust small_random \
// RUN:   --lambda 1e-3 --training --seed-value 8589934597 --router-bias \
// RUN:   --expert-biases --data-seed 121 \
// RUN:   --names router.weight,router.bias,experts.w1,experts.w2,experts.b1,experts.b2 \
// RUN:   --params %t/p.safetensors --input %t/x.npy --seed-input %t/seed_big.npy \
// RUN:   --expected %t/y_sr_ref_big.npy --expected-loss %t/loss_sr_ref_big.npy
// RUN: moe-run %t/sr.mlir --device=%moe_device --entry=train_forward --input=%t/x.npy \
// RUN:   --input=%t/seed_big.npy --params=%t/p.safetensors \
// RUN:   --output=%t/y_sr_big.npy --output=%t/loss_sr_big.npy | FileCheck %s
// RUN: moe-ref compare %t/y_sr_big.npy %t/y_sr_ref_big.npy --tol 1e-4
// RUN: moe-ref compare %t/loss_sr_big.npy %t/loss_sr_ref_big.npy --tol 1e-4
//
// RUN: moe-ref layer --tokens 64 --dim 64 --experts 8 --hidden 128 \
// RUN:   --activation silu --routing moesart --k 2 --adjust small_random \
// RUN:   --lambda 1e-3 --training --seed-value 18446744073709551615 --router-bias \
// RUN:   --expert-biases --data-seed 121 \
// RUN:   --names router.weight,router.bias,experts.w1,experts.w2,experts.b1,experts.b2 \
// RUN:   --params %t/p.safetensors --input %t/x.npy --seed-input %t/seed_max.npy \
// RUN:   --expected %t/y_sr_ref_max.npy --expected-loss %t/loss_sr_ref_max.npy
// RUN: moe-run %t/sr.mlir --device=%moe_device --entry=train_forward --input=%t/x.npy \
// RUN:   --input=%t/seed_max.npy --params=%t/p.safetensors \
// RUN:   --output=%t/y_sr_max.npy --output=%t/loss_sr_max.npy | FileCheck %s
// RUN: moe-ref compare %t/y_sr_max.npy %t/y_sr_ref_max.npy --tol 1e-4
// RUN: moe-ref compare %t/loss_sr_max.npy %t/loss_sr_ref_max.npy --tol 1e-4
//
// large, lambda 0.01.
// RUN: moe-opt %s --moe-dense-to-moesart="k=2 adjust=large trimmed-lasso=0.01" \
// RUN:   -o %t/large.mlir
// RUN: FileCheck %s --check-prefix=IR-LARGE --input-file %t/large.mlir
// RUN: moe-ref layer --tokens 64 --dim 64 --experts 8 --hidden 128 \
// RUN:   --activation silu --routing moesart --k 2 --adjust large \
// RUN:   --lambda 0.01 --training --seed-value 1 --router-bias \
// RUN:   --expert-biases --data-seed 121 \
// RUN:   --names router.weight,router.bias,experts.w1,experts.w2,experts.b1,experts.b2 \
// RUN:   --params %t/p.safetensors --input %t/x.npy --seed-input %t/seed_1.npy \
// RUN:   --expected %t/y_large_ref_1.npy --expected-loss %t/loss_large_ref_1.npy
// RUN: moe-run %t/large.mlir --device=%moe_device --entry=train_forward --input=%t/x.npy \
// RUN:   --input=%t/seed_1.npy --params=%t/p.safetensors \
// RUN:   --output=%t/y_large_1.npy --output=%t/loss_large_1.npy | FileCheck %s
// RUN: moe-ref compare %t/y_large_1.npy %t/y_large_ref_1.npy --tol 1e-4
// RUN: moe-ref compare %t/loss_large_1.npy %t/loss_large_ref_1.npy --tol 1e-4
//
// RUN: moe-ref layer --tokens 64 --dim 64 --experts 8 --hidden 128 \
// RUN:   --activation silu --routing moesart --k 2 --adjust large \
// RUN:   --lambda 0.01 --training --seed-value 8589934597 --router-bias \
// RUN:   --expert-biases --data-seed 121 \
// RUN:   --names router.weight,router.bias,experts.w1,experts.w2,experts.b1,experts.b2 \
// RUN:   --params %t/p.safetensors --input %t/x.npy --seed-input %t/seed_big.npy \
// RUN:   --expected %t/y_large_ref_big.npy --expected-loss %t/loss_large_ref_big.npy
// RUN: moe-run %t/large.mlir --device=%moe_device --entry=train_forward --input=%t/x.npy \
// RUN:   --input=%t/seed_big.npy --params=%t/p.safetensors \
// RUN:   --output=%t/y_large_big.npy --output=%t/loss_large_big.npy | FileCheck %s
// RUN: moe-ref compare %t/y_large_big.npy %t/y_large_ref_big.npy --tol 1e-4
// RUN: moe-ref compare %t/loss_large_big.npy %t/loss_large_ref_big.npy --tol 1e-4
//
// The checks can tell the variants apart: the transformed output is not the
// dense one, the seed changes the draws, small_random and large weight the
// same draws differently, and lambda scales the loss.
// RUN: not moe-ref compare %t/y_sr_1.npy %t/y_dense_ref.npy --tol 1e-4 2>&1 \
// RUN:   | FileCheck %s --check-prefix=DIFFERENT
// RUN: not moe-ref compare %t/y_sr_big.npy %t/y_sr_ref_1.npy --tol 1e-4 2>&1 \
// RUN:   | FileCheck %s --check-prefix=DIFFERENT
// RUN: not moe-ref compare %t/y_large_1.npy %t/y_sr_ref_1.npy --tol 1e-4 2>&1 \
// RUN:   | FileCheck %s --check-prefix=DIFFERENT
// RUN: not moe-ref compare %t/loss_large_1.npy %t/loss_sr_ref_1.npy --tol 1e-4
//
// CHECK: result #0: tensor<64x64xf32> checksum:
// CHECK-NEXT: result #1: tensor<f32> checksum:
// IR-SR: moe.layer %arg0 router(%arg2, %arg3) experts(%arg4, %arg5) expert_biases(%arg6, %arg7) seed(%arg1)
// IR-SR-SAME: routing = #moe.moesart<k = 2>, training
// IR-SR-NOT: #moe.dense
// IR-LARGE: seed(%arg1)
// IR-LARGE-SAME: routing = #moe.moesart<k = 2, adjust = large, trimmed_lasso = 1.000000e-02>, training
// DIFFERENT: FAIL: {{.*}} rows over tolerance

func.func @train_forward(%x: tensor<64x64xf32>, %seed: tensor<i64>,
                         %wr: tensor<64x8xf32> {moe.param = "router.weight"},
                         %br: tensor<8xf32> {moe.param = "router.bias"},
                         %w1: tensor<8x64x128xf32> {moe.param = "experts.w1"},
                         %w2: tensor<8x128x64xf32> {moe.param = "experts.w2"},
                         %b1: tensor<8x128xf32> {moe.param = "experts.b1"},
                         %b2: tensor<8x64xf32> {moe.param = "experts.b2"})
    -> (tensor<64x64xf32>, tensor<f32>) {
  %y, %loss = moe.layer %x router(%wr, %br) experts(%w1, %w2) expert_biases(%b1, %b2) seed(%seed)
      {routing = #moe.dense, activation = #moe.activation<silu>, training}
      : (tensor<64x64xf32>, tensor<64x8xf32>, tensor<8xf32>, tensor<8x64x128xf32>,
         tensor<8x128x64xf32>, tensor<8x128xf32>, tensor<8x64xf32>, tensor<i64>)
      -> (tensor<64x64xf32>, tensor<f32>)
  return %y, %loss : tensor<64x64xf32>, tensor<f32>
}
