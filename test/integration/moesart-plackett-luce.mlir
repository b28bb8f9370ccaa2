// MOESART training sampling, compiled for the CPU, is a draw of k = 2
// experts without replacement proportional to g = softmax(o), i.e. a
// Plackett-Luce sample: P(first = i) = g_i, P(second = j | first = i) =
// g_j / (1 - g_i). moe.gate in training mode runs on 10000 tokens of
// logits over 4 experts and returns the sampled indices in draw order;
// moe-ref pl-check checks that no row repeats an expert and runs chi-square
// tests (critical values: 0.999 quantiles; fixed seeds, so the outcome is
// deterministic) of
//  * the first-draw counts and the ordered-pair counts of every group of
//    tokens sharing one logits row, against the exact probabilities;
//  * calibration over all tokens: draws binned by their probability.
// Two logits sets: 4 distinct rows repeated 2500 times each (std 1.5), and
// 10000 distinct rows (std 1.5); seeds 8589934597 (above 2^32) and 42.
// A biased sampler (e.g. always the top-2, see test/integration/moe-ref.test)
// fails these tests by hundreds of standard deviations.
//
// RUN: rm -rf %t && mkdir -p %t
// RUN: moe-ref gen-npy --shape 10000,4 --random-seed 1101 --stddev 1.5 \
// RUN:   --distinct-rows 4 --out %t/logits4.npy
// RUN: moe-ref gen-npy --shape 10000,4 --random-seed 1102 --stddev 1.5 \
// RUN:   --out %t/logits.npy
// RUN: moe-ref gen-npy --shape scalar --dtype i64 --values 8589934597 --out %t/seed_a.npy
// RUN: moe-ref gen-npy --shape scalar --dtype i64 --values 42 --out %t/seed_b.npy
//
// RUN: moe-run %s --device=%moe_device --entry=sample --input=%t/logits4.npy \
// RUN:   --input=%t/seed_a.npy --output=%t/w.npy --output=%t/i4a.npy \
// RUN:   --output=%t/loss.npy | FileCheck %s
// RUN: moe-ref pl-check %t/i4a.npy %t/logits4.npy --k 2 | FileCheck %s --check-prefix=PL4
// RUN: moe-run %s --device=%moe_device --entry=sample --input=%t/logits4.npy \
// RUN:   --input=%t/seed_b.npy --output=%t/w.npy --output=%t/i4b.npy \
// RUN:   --output=%t/loss.npy
// RUN: moe-ref pl-check %t/i4b.npy %t/logits4.npy --k 2 | FileCheck %s --check-prefix=PL4
// RUN: moe-run %s --device=%moe_device --entry=sample --input=%t/logits.npy \
// RUN:   --input=%t/seed_a.npy --output=%t/w.npy --output=%t/ia.npy \
// RUN:   --output=%t/loss.npy
// RUN: moe-ref pl-check %t/ia.npy %t/logits.npy --k 2 | FileCheck %s --check-prefix=PL
// RUN: moe-run %s --device=%moe_device --entry=sample --input=%t/logits.npy \
// RUN:   --input=%t/seed_b.npy --output=%t/w.npy --output=%t/ib.npy \
// RUN:   --output=%t/loss.npy
// RUN: moe-ref pl-check %t/ib.npy %t/logits.npy --k 2 | FileCheck %s --check-prefix=PL
//
// CHECK: result #1: tensor<10000x2xi32>
// PL4: 4 distinct logits rows: 4 groups of >= 100 tokens
// PL4: PASS (10 chi-square tests
// PL: 10000 distinct logits rows: 0 groups
// PL: PASS (4 chi-square tests

func.func @sample(%o: tensor<10000x4xf32>, %seed: tensor<i64>)
    -> (tensor<10000x2xf32>, tensor<10000x2xi32>, tensor<f32>) {
  %w, %i, %loss = moe.gate %o seed(%seed) {routing = #moe.moesart<k = 2>, training}
      : (tensor<10000x4xf32>, tensor<i64>) -> (tensor<10000x2xf32>, tensor<10000x2xi32>, tensor<f32>)
  return %w, %i, %loss : tensor<10000x2xf32>, tensor<10000x2xi32>, tensor<f32>
}
