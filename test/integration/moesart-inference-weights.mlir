// moe.gate with #moe.moesart<k = K> at inference: the experts are the top-K
// of the logits and the weights softmax_S(o_i - log(max(K (g_i + 1e-10),
// 1e-10))) are 1/K up to the 1e-10 term (o_i - log(K g_i) = log(sum_j
// exp(o_j)) - log K is the same for every i). Checked within 1e-6 for K = 2
// and K = 3 on 512 tokens of random logits (std 2, 16 experts), and the
// indices are the reference's top-K in rank order (exact; moe-ref refuses
// logits whose K-th/(K+1)-th gap is below 1e-6).
//
// RUN: rm -rf %t && mkdir -p %t
// RUN: moe-ref gen-npy --shape 512,16 --random-seed 909 --stddev 2 \
// RUN:   --out %t/logits.npy
// RUN: moe-run %s --device=%moe_device --entry=gate2 --input=%t/logits.npy \
// RUN:   --output=%t/w2.npy --output=%t/i2.npy | FileCheck %s --check-prefix=K2
// RUN: moe-ref value-check %t/w2.npy --expect 0.5 --tol 1e-6
// RUN: moe-ref gate --logits %t/logits.npy --routing moesart --k 2 \
// RUN:   --expected-indices %t/i2_ref.npy --expected-weights %t/w2_ref.npy
// RUN: moe-ref compare %t/i2.npy %t/i2_ref.npy --tol 0
// RUN: moe-ref compare %t/w2.npy %t/w2_ref.npy --tol 1e-6
//
// RUN: moe-run %s --device=%moe_device --entry=gate3 --input=%t/logits.npy \
// RUN:   --output=%t/w3.npy --output=%t/i3.npy | FileCheck %s --check-prefix=K3
// RUN: moe-ref value-check %t/w3.npy --expect 0.333333333 --tol 1e-6
// RUN: moe-ref gate --logits %t/logits.npy --routing moesart --k 3 \
// RUN:   --expected-indices %t/i3_ref.npy
// RUN: moe-ref compare %t/i3.npy %t/i3_ref.npy --tol 0
//
// K2: result #0: tensor<512x2xf32>
// K2: result #1: tensor<512x2xi32>
// K3: result #0: tensor<512x3xf32>
// K3: result #1: tensor<512x3xi32>

func.func @gate2(%o: tensor<512x16xf32>) -> (tensor<512x2xf32>, tensor<512x2xi32>) {
  %w, %i = moe.gate %o {routing = #moe.moesart<k = 2>}
      : (tensor<512x16xf32>) -> (tensor<512x2xf32>, tensor<512x2xi32>)
  return %w, %i : tensor<512x2xf32>, tensor<512x2xi32>
}

func.func @gate3(%o: tensor<512x16xf32>) -> (tensor<512x3xf32>, tensor<512x3xi32>) {
  %w, %i = moe.gate %o {routing = #moe.moesart<k = 3>}
      : (tensor<512x16xf32>) -> (tensor<512x3xf32>, tensor<512x3xi32>)
  return %w, %i : tensor<512x3xf32>, tensor<512x3xi32>
}
