// moe.gate compiled for the CPU against the C++ reference's routing
// (moe-ref gate) on 256 tokens of random logits (E = 8, std 1.5):
//  * #moe.dense: weights = softmax(o), indices 0..E-1 in order;
//  * #moe.top_k<k = 2>: the top-2 in rank order, weights renormalised over
//    the two;
//  * #moe.moesart training for three seeds (one above 2^32), with k = 2
//    small_random and k = 3 zero / large: the sampled experts must be the
//    reference's exactly, in draw order (same Philox4x32-10 stream, keyed by
//    the seed's low and high words, counter (t, r, 0, 0), and the same f32
//    sequential sampling), with the same adjusted weights and trimmed-lasso
//    loss. moe-ref refuses data where a uniform lies within 1e-6 of a cumsum
//    boundary (or a top-k gap is below 1e-6), so f32 rounding cannot flip a
//    choice.
//
// RUN: rm -rf %t && mkdir -p %t
// RUN: moe-ref gen-npy --shape 256,8 --random-seed 1001 --stddev 1.5 \
// RUN:   --out %t/logits.npy
//
// RUN: moe-run %s --device=%moe_device --entry=dense --input=%t/logits.npy \
// RUN:   --output=%t/dense_w.npy --output=%t/dense_i.npy
// RUN: moe-ref gate --logits %t/logits.npy --routing dense \
// RUN:   --expected-weights %t/dense_w_ref.npy --expected-indices %t/dense_i_ref.npy
// RUN: moe-ref compare %t/dense_w.npy %t/dense_w_ref.npy --tol 1e-5
// RUN: moe-ref compare %t/dense_i.npy %t/dense_i_ref.npy --tol 0
// RUN: moe-ref sum-check %t/dense_w.npy --axes 1 --expect 1 --tol 1e-5
//
// RUN: moe-run %s --device=%moe_device --entry=topk --input=%t/logits.npy \
// RUN:   --output=%t/topk_w.npy --output=%t/topk_i.npy
// RUN: moe-ref gate --logits %t/logits.npy --routing top_k --k 2 \
// RUN:   --expected-weights %t/topk_w_ref.npy --expected-indices %t/topk_i_ref.npy
// RUN: moe-ref compare %t/topk_w.npy %t/topk_w_ref.npy --tol 1e-5
// RUN: moe-ref compare %t/topk_i.npy %t/topk_i_ref.npy --tol 0
//
// RUN: moe-ref gen-npy --shape scalar --dtype i64 --values 7 --out %t/seed_7.npy
// RUN: moe-run %s --device=%moe_device --entry=train_small_random --input=%t/logits.npy \
// RUN:   --input=%t/seed_7.npy --output=%t/small_random_w_7.npy \
// RUN:   --output=%t/small_random_i_7.npy --output=%t/small_random_loss_7.npy
// RUN: moe-ref gate --logits %t/logits.npy --routing moesart --k 2 \
// RUN:   --adjust small_random --lambda 1e-3 --training --seed-value 7 \
// RUN:   --expected-weights %t/small_random_w_ref_7.npy \
// RUN:   --expected-indices %t/small_random_i_ref_7.npy --expected-loss %t/small_random_loss_ref_7.npy
// RUN: moe-ref compare %t/small_random_i_7.npy %t/small_random_i_ref_7.npy --tol 0
// RUN: moe-ref compare %t/small_random_w_7.npy %t/small_random_w_ref_7.npy --tol 1e-5
// RUN: moe-ref compare %t/small_random_loss_7.npy %t/small_random_loss_ref_7.npy --tol 1e-5
//
// RUN: moe-ref gen-npy --shape scalar --dtype i64 --values 7 --out %t/seed_7.npy
// RUN: moe-run %s --device=%moe_device --entry=train_zero --input=%t/logits.npy \
// RUN:   --input=%t/seed_7.npy --output=%t/zero_w_7.npy \
// RUN:   --output=%t/zero_i_7.npy --output=%t/zero_loss_7.npy
// RUN: moe-ref gate --logits %t/logits.npy --routing moesart --k 3 \
// RUN:   --adjust zero --lambda 1e-2 --training --seed-value 7 \
// RUN:   --expected-weights %t/zero_w_ref_7.npy \
// RUN:   --expected-indices %t/zero_i_ref_7.npy --expected-loss %t/zero_loss_ref_7.npy
// RUN: moe-ref compare %t/zero_i_7.npy %t/zero_i_ref_7.npy --tol 0
// RUN: moe-ref compare %t/zero_w_7.npy %t/zero_w_ref_7.npy --tol 1e-5
// RUN: moe-ref compare %t/zero_loss_7.npy %t/zero_loss_ref_7.npy --tol 1e-5
//
// RUN: moe-ref gen-npy --shape scalar --dtype i64 --values 7 --out %t/seed_7.npy
// RUN: moe-run %s --device=%moe_device --entry=train_large --input=%t/logits.npy \
// RUN:   --input=%t/seed_7.npy --output=%t/large_w_7.npy \
// RUN:   --output=%t/large_i_7.npy --output=%t/large_loss_7.npy
// RUN: moe-ref gate --logits %t/logits.npy --routing moesart --k 3 \
// RUN:   --adjust large --lambda 0.5 --training --seed-value 7 \
// RUN:   --expected-weights %t/large_w_ref_7.npy \
// RUN:   --expected-indices %t/large_i_ref_7.npy --expected-loss %t/large_loss_ref_7.npy
// RUN: moe-ref compare %t/large_i_7.npy %t/large_i_ref_7.npy --tol 0
// RUN: moe-ref compare %t/large_w_7.npy %t/large_w_ref_7.npy --tol 1e-5
// RUN: moe-ref compare %t/large_loss_7.npy %t/large_loss_ref_7.npy --tol 1e-5
//
// RUN: moe-ref gen-npy --shape scalar --dtype i64 --values 4294967296 --out %t/seed_4294967296.npy
// RUN: moe-run %s --device=%moe_device --entry=train_small_random --input=%t/logits.npy \
// RUN:   --input=%t/seed_4294967296.npy --output=%t/small_random_w_4294967296.npy \
// RUN:   --output=%t/small_random_i_4294967296.npy --output=%t/small_random_loss_4294967296.npy
// RUN: moe-ref gate --logits %t/logits.npy --routing moesart --k 2 \
// RUN:   --adjust small_random --lambda 1e-3 --training --seed-value 4294967296 \
// RUN:   --expected-weights %t/small_random_w_ref_4294967296.npy \
// RUN:   --expected-indices %t/small_random_i_ref_4294967296.npy --expected-loss %t/small_random_loss_ref_4294967296.npy
// RUN: moe-ref compare %t/small_random_i_4294967296.npy %t/small_random_i_ref_4294967296.npy --tol 0
// RUN: moe-ref compare %t/small_random_w_4294967296.npy %t/small_random_w_ref_4294967296.npy --tol 1e-5
// RUN: moe-ref compare %t/small_random_loss_4294967296.npy %t/small_random_loss_ref_4294967296.npy --tol 1e-5
//
// RUN: moe-ref gen-npy --shape scalar --dtype i64 --values 4294967296 --out %t/seed_4294967296.npy
// RUN: moe-run %s --device=%moe_device --entry=train_zero --input=%t/logits.npy \
// RUN:   --input=%t/seed_4294967296.npy --output=%t/zero_w_4294967296.npy \
// RUN:   --output=%t/zero_i_4294967296.npy --output=%t/zero_loss_4294967296.npy
// RUN: moe-ref gate --logits %t/logits.npy --routing moesart --k 3 \
// RUN:   --adjust zero --lambda 1e-2 --training --seed-value 4294967296 \
// RUN:   --expected-weights %t/zero_w_ref_4294967296.npy \
// RUN:   --expected-indices %t/zero_i_ref_4294967296.npy --expected-loss %t/zero_loss_ref_4294967296.npy
// RUN: moe-ref compare %t/zero_i_4294967296.npy %t/zero_i_ref_4294967296.npy --tol 0
// RUN: moe-ref compare %t/zero_w_4294967296.npy %t/zero_w_ref_4294967296.npy --tol 1e-5
// RUN: moe-ref compare %t/zero_loss_4294967296.npy %t/zero_loss_ref_4294967296.npy --tol 1e-5
//
// RUN: moe-ref gen-npy --shape scalar --dtype i64 --values 4294967296 --out %t/seed_4294967296.npy
// RUN: moe-run %s --device=%moe_device --entry=train_large --input=%t/logits.npy \
// RUN:   --input=%t/seed_4294967296.npy --output=%t/large_w_4294967296.npy \
// RUN:   --output=%t/large_i_4294967296.npy --output=%t/large_loss_4294967296.npy
// RUN: moe-ref gate --logits %t/logits.npy --routing moesart --k 3 \
// RUN:   --adjust large --lambda 0.5 --training --seed-value 4294967296 \
// RUN:   --expected-weights %t/large_w_ref_4294967296.npy \
// RUN:   --expected-indices %t/large_i_ref_4294967296.npy --expected-loss %t/large_loss_ref_4294967296.npy
// RUN: moe-ref compare %t/large_i_4294967296.npy %t/large_i_ref_4294967296.npy --tol 0
// RUN: moe-ref compare %t/large_w_4294967296.npy %t/large_w_ref_4294967296.npy --tol 1e-5
// RUN: moe-ref compare %t/large_loss_4294967296.npy %t/large_loss_ref_4294967296.npy --tol 1e-5
//
// RUN: moe-ref gen-npy --shape scalar --dtype i64 --values 8589934597 --out %t/seed_8589934597.npy
// RUN: moe-run %s --device=%moe_device --entry=train_small_random --input=%t/logits.npy \
// RUN:   --input=%t/seed_8589934597.npy --output=%t/small_random_w_8589934597.npy \
// RUN:   --output=%t/small_random_i_8589934597.npy --output=%t/small_random_loss_8589934597.npy
// RUN: moe-ref gate --logits %t/logits.npy --routing moesart --k 2 \
// RUN:   --adjust small_random --lambda 1e-3 --training --seed-value 8589934597 \
// RUN:   --expected-weights %t/small_random_w_ref_8589934597.npy \
// RUN:   --expected-indices %t/small_random_i_ref_8589934597.npy --expected-loss %t/small_random_loss_ref_8589934597.npy
// RUN: moe-ref compare %t/small_random_i_8589934597.npy %t/small_random_i_ref_8589934597.npy --tol 0
// RUN: moe-ref compare %t/small_random_w_8589934597.npy %t/small_random_w_ref_8589934597.npy --tol 1e-5
// RUN: moe-ref compare %t/small_random_loss_8589934597.npy %t/small_random_loss_ref_8589934597.npy --tol 1e-5
//
// RUN: moe-ref gen-npy --shape scalar --dtype i64 --values 8589934597 --out %t/seed_8589934597.npy
// RUN: moe-run %s --device=%moe_device --entry=train_zero --input=%t/logits.npy \
// RUN:   --input=%t/seed_8589934597.npy --output=%t/zero_w_8589934597.npy \
// RUN:   --output=%t/zero_i_8589934597.npy --output=%t/zero_loss_8589934597.npy
// RUN: moe-ref gate --logits %t/logits.npy --routing moesart --k 3 \
// RUN:   --adjust zero --lambda 1e-2 --training --seed-value 8589934597 \
// RUN:   --expected-weights %t/zero_w_ref_8589934597.npy \
// RUN:   --expected-indices %t/zero_i_ref_8589934597.npy --expected-loss %t/zero_loss_ref_8589934597.npy
// RUN: moe-ref compare %t/zero_i_8589934597.npy %t/zero_i_ref_8589934597.npy --tol 0
// RUN: moe-ref compare %t/zero_w_8589934597.npy %t/zero_w_ref_8589934597.npy --tol 1e-5
// RUN: moe-ref compare %t/zero_loss_8589934597.npy %t/zero_loss_ref_8589934597.npy --tol 1e-5
//
// RUN: moe-ref gen-npy --shape scalar --dtype i64 --values 8589934597 --out %t/seed_8589934597.npy
// RUN: moe-run %s --device=%moe_device --entry=train_large --input=%t/logits.npy \
// RUN:   --input=%t/seed_8589934597.npy --output=%t/large_w_8589934597.npy \
// RUN:   --output=%t/large_i_8589934597.npy --output=%t/large_loss_8589934597.npy
// RUN: moe-ref gate --logits %t/logits.npy --routing moesart --k 3 \
// RUN:   --adjust large --lambda 0.5 --training --seed-value 8589934597 \
// RUN:   --expected-weights %t/large_w_ref_8589934597.npy \
// RUN:   --expected-indices %t/large_i_ref_8589934597.npy --expected-loss %t/large_loss_ref_8589934597.npy
// RUN: moe-ref compare %t/large_i_8589934597.npy %t/large_i_ref_8589934597.npy --tol 0
// RUN: moe-ref compare %t/large_w_8589934597.npy %t/large_w_ref_8589934597.npy --tol 1e-5
// RUN: moe-ref compare %t/large_loss_8589934597.npy %t/large_loss_ref_8589934597.npy --tol 1e-5
//
// Different seeds draw different experts (seed 4294967296 = 2^32 has low
// word 0 and high word 1: it must not behave like seed 0 or seed 1).
// RUN: not moe-ref compare %t/small_random_i_7.npy %t/small_random_i_4294967296.npy --tol 0
// RUN: moe-ref gen-npy --shape scalar --dtype i64 --values 0 --out %t/seed_0.npy
// RUN: moe-run %s --device=%moe_device --entry=train_small_random --input=%t/logits.npy \
// RUN:   --input=%t/seed_0.npy --output=%t/w_0.npy --output=%t/i_0.npy \
// RUN:   --output=%t/loss_0.npy
// RUN: not moe-ref compare %t/i_0.npy %t/small_random_i_4294967296.npy --tol 0

func.func @dense(%o: tensor<256x8xf32>) -> (tensor<256x8xf32>, tensor<256x8xi32>) {
  %w, %i = moe.gate %o {routing = #moe.dense}
      : (tensor<256x8xf32>) -> (tensor<256x8xf32>, tensor<256x8xi32>)
  return %w, %i : tensor<256x8xf32>, tensor<256x8xi32>
}

func.func @topk(%o: tensor<256x8xf32>) -> (tensor<256x2xf32>, tensor<256x2xi32>) {
  %w, %i = moe.gate %o {routing = #moe.top_k<k = 2>}
      : (tensor<256x8xf32>) -> (tensor<256x2xf32>, tensor<256x2xi32>)
  return %w, %i : tensor<256x2xf32>, tensor<256x2xi32>
}

func.func @train_small_random(%o: tensor<256x8xf32>, %seed: tensor<i64>)
    -> (tensor<256x2xf32>, tensor<256x2xi32>, tensor<f32>) {
  %w, %i, %loss = moe.gate %o seed(%seed)
      {routing = #moe.moesart<k = 2, adjust = small_random, trimmed_lasso = 1.0e-3>, training}
      : (tensor<256x8xf32>, tensor<i64>) -> (tensor<256x2xf32>, tensor<256x2xi32>, tensor<f32>)
  return %w, %i, %loss : tensor<256x2xf32>, tensor<256x2xi32>, tensor<f32>
}

func.func @train_zero(%o: tensor<256x8xf32>, %seed: tensor<i64>)
    -> (tensor<256x3xf32>, tensor<256x3xi32>, tensor<f32>) {
  %w, %i, %loss = moe.gate %o seed(%seed)
      {routing = #moe.moesart<k = 3, adjust = zero, trimmed_lasso = 1.0e-2>, training}
      : (tensor<256x8xf32>, tensor<i64>) -> (tensor<256x3xf32>, tensor<256x3xi32>, tensor<f32>)
  return %w, %i, %loss : tensor<256x3xf32>, tensor<256x3xi32>, tensor<f32>
}

func.func @train_large(%o: tensor<256x8xf32>, %seed: tensor<i64>)
    -> (tensor<256x3xf32>, tensor<256x3xi32>, tensor<f32>) {
  %w, %i, %loss = moe.gate %o seed(%seed)
      {routing = #moe.moesart<k = 3, adjust = large, trimmed_lasso = 0.5>, training}
      : (tensor<256x8xf32>, tensor<i64>) -> (tensor<256x3xf32>, tensor<256x3xi32>, tensor<f32>)
  return %w, %i, %loss : tensor<256x3xf32>, tensor<256x3xi32>, tensor<f32>
}
