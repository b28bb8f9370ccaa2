// RUN: moe-opt %s --canonicalize --split-input-file | FileCheck %s
//
// Canonicalization patterns of the moe ops (dialect/MoEOps.cpp): exact
// simplifications (zero biases, capacities that drop nothing) and top_k over
// every expert as dense routing. Run-equality: test/integration/canonicalize-run.test.

// A classic top-k choosing all E = 4 experts is dense routing.
// CHECK-LABEL: func.func @top_k_all_experts
// CHECK-NEXT:    %[[Y:.*]] = moe.layer %arg0 router(%arg1) experts(%arg2, %arg3) {activation = #moe.activation<gelu>, routing = #moe.dense}
// CHECK-NEXT:    return %[[Y]]
func.func @top_k_all_experts(%x: tensor<8x16xf32>, %wr: tensor<16x4xf32>, %w1: tensor<4x16x32xf32>,
                             %w2: tensor<4x32x16xf32>) -> tensor<8x16xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.top_k<k = 4>, activation = #moe.activation<gelu>}
         : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// With every expert chosen, the selection bias chooses nothing: it goes too.
// CHECK-LABEL: func.func @top_k_all_experts_selection_bias
// CHECK-NEXT:    %[[Y:.*]] = moe.layer %arg0 router(%arg1) experts(%arg3, %arg4) {activation = #moe.activation<relu>, routing = #moe.dense}
// CHECK-SAME:      : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<8x16xf32>
// CHECK-NEXT:    return %[[Y]]
func.func @top_k_all_experts_selection_bias(%x: tensor<8x16xf32>, %wr: tensor<16x4xf32>, %sb: tensor<4xf32>,
                                            %w1: tensor<4x16x32xf32>, %w2: tensor<4x32x16xf32>) -> tensor<8x16xf32> {
  %y = moe.layer %x router(%wr) selection_bias(%sb) experts(%w1, %w2) {routing = #moe.top_k<k = 4>, activation = #moe.activation<relu>}
         : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// Not dense: k < E, unnormalized weights, a sigmoid score, a scale, a
// capacity that drops (the drop order of top-k is by logit, dense's by
// expert index), a dynamic E.
// CHECK-LABEL: func.func @top_k_kept
// CHECK-NEXT:    moe.layer {{.*}}routing = #moe.top_k<k = 3>}
// CHECK-NEXT:    moe.layer {{.*}}routing = #moe.top_k<k = 4, normalize = false>}
// CHECK-NEXT:    moe.layer {{.*}}routing = #moe.top_k<k = 4, score = sigmoid>}
// CHECK-NEXT:    moe.layer {{.*}}routing = #moe.top_k<k = 4, scale = 2.000000e+00>}
// CHECK-NEXT:    moe.layer {{.*}}capacity_factor = 1.000000e+00 : f64, routing = #moe.top_k<k = 4>}
// CHECK-NEXT:    moe.layer {{.*}}routing = #moe.top_k<k = 4>} : (tensor<8x16xf32>, tensor<16x?xf32>, tensor<?x16x32xf32>
// CHECK-NEXT:    return
func.func @top_k_kept(%x: tensor<8x16xf32>, %wr: tensor<16x4xf32>, %w1: tensor<4x16x32xf32>, %w2: tensor<4x32x16xf32>,
                      %wrd: tensor<16x?xf32>, %w1d: tensor<?x16x32xf32>, %w2d: tensor<?x32x16xf32>)
    -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>) {
  %a = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.top_k<k = 3>, activation = #moe.activation<gelu>}
         : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<8x16xf32>
  %b = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.top_k<k = 4, normalize = false>, activation = #moe.activation<gelu>}
         : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<8x16xf32>
  %c = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.top_k<k = 4, score = sigmoid>, activation = #moe.activation<gelu>}
         : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<8x16xf32>
  %d = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.top_k<k = 4, scale = 2.0>, activation = #moe.activation<gelu>}
         : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<8x16xf32>
  %e = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.top_k<k = 4>, activation = #moe.activation<gelu>, capacity_factor = 1.0 : f64}
         : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<8x16xf32>
  %f = moe.layer %x router(%wrd) experts(%w1d, %w2d) {routing = #moe.top_k<k = 4>, activation = #moe.activation<gelu>}
         : (tensor<8x16xf32>, tensor<16x?xf32>, tensor<?x16x32xf32>, tensor<?x32x16xf32>) -> tensor<8x16xf32>
  return %a, %b, %c, %d, %e, %f : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>
}

// -----

// A capacity factor >= E drops nothing (C = ceil(cf*T*K/E) >= T*K): the layer
// is dropless; a smaller one stays.
// CHECK-LABEL: func.func @dropless_capacity
// CHECK-NEXT:    moe.layer %arg0 router(%arg1) experts(%arg2, %arg3) {activation = #moe.activation<gelu>, routing = #moe.top_k<k = 2>}
// CHECK-NEXT:    moe.layer %arg0 router(%arg1) experts(%arg2, %arg3) {activation = #moe.activation<gelu>, capacity_factor = 3.500000e+00 : f64, routing = #moe.top_k<k = 2>}
// CHECK-NEXT:    return
func.func @dropless_capacity(%x: tensor<8x16xf32>, %wr: tensor<16x4xf32>, %w1: tensor<4x16x32xf32>,
                             %w2: tensor<4x32x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  %a = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.top_k<k = 2>, activation = #moe.activation<gelu>, capacity_factor = 4.0 : f64}
         : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<8x16xf32>
  %b = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.top_k<k = 2>, activation = #moe.activation<gelu>, capacity_factor = 3.5 : f64}
         : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<8x16xf32>
  return %a, %b : tensor<8x16xf32>, tensor<8x16xf32>
}

// -----

// Both rules: a dropless capacity goes first, then top_k<k = E> is dense.
// CHECK-LABEL: func.func @dropless_then_dense
// CHECK-NEXT:    moe.layer %arg0 router(%arg1) experts(%arg2, %arg3) {activation = #moe.activation<gelu>, routing = #moe.dense}
// CHECK-NEXT:    return
func.func @dropless_then_dense(%x: tensor<8x16xf32>, %wr: tensor<16x4xf32>, %w1: tensor<4x16x32xf32>,
                               %w2: tensor<4x32x16xf32>) -> tensor<8x16xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.top_k<k = 4>, activation = #moe.activation<gelu>, capacity_factor = 4.0 : f64}
         : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// moe.dispatch and moe.fused_experts: the same capacity rule (cf >= E, for
// any ids: C >= T*K).
// CHECK-LABEL: func.func @dispatch_dropless
// CHECK-NEXT:    moe.dispatch %arg0, %arg1 {num_experts = 4 : i64} :
// CHECK-NEXT:    moe.dispatch %arg0, %arg1 {capacity_factor = 2.000000e+00 : f64, num_experts = 4 : i64} :
// CHECK-NEXT:    moe.fused_experts %arg0, %arg1, %arg2 experts(%arg3, %arg4) {activation = #moe.activation<gelu>, num_experts = 4 : i64} :
// CHECK-NEXT:    return
func.func @dispatch_dropless(%x: tensor<8x16xf32>, %i: tensor<8x2xi32>, %w: tensor<8x2xf32>,
                             %w1: tensor<4x16x32xf32>, %w2: tensor<4x32x16xf32>)
    -> (tensor<16x16xf32>, tensor<16x16xf32>, tensor<8x16xf32>) {
  %rows, %off, %src, %pos = moe.dispatch %x, %i {num_experts = 4 : i64, capacity_factor = 4.0 : f64}
      : (tensor<8x16xf32>, tensor<8x2xi32>) -> (tensor<16x16xf32>, tensor<5xi32>, tensor<16xi32>, tensor<8x2xi32>)
  %rows2, %off2, %src2, %pos2 = moe.dispatch %x, %i {num_experts = 4 : i64, capacity_factor = 2.0 : f64}
      : (tensor<8x16xf32>, tensor<8x2xi32>) -> (tensor<16x16xf32>, tensor<5xi32>, tensor<16xi32>, tensor<8x2xi32>)
  %y = moe.fused_experts %x, %i, %w experts(%w1, %w2) {num_experts = 4 : i64, activation = #moe.activation<gelu>, capacity_factor = 6.0 : f64}
      : (tensor<8x16xf32>, tensor<8x2xi32>, tensor<8x2xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<8x16xf32>
  return %rows, %rows2, %y : tensor<16x16xf32>, tensor<16x16xf32>, tensor<8x16xf32>
}

// -----

// Zero biases (x + 0 == x) are dropped: the router bias, the selection bias,
// the expert bias pair; the zero constants die with their last use.
// CHECK-LABEL: func.func @zero_biases
// CHECK-NEXT:    %[[Y:.*]] = moe.layer %arg0 router(%arg1) experts(%arg2, %arg3) {activation = #moe.activation<gelu>, routing = #moe.top_k<k = 2>}
// CHECK-SAME:      : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<8x16xf32>
// CHECK-NEXT:    return %[[Y]]
func.func @zero_biases(%x: tensor<8x16xf32>, %wr: tensor<16x4xf32>, %w1: tensor<4x16x32xf32>,
                       %w2: tensor<4x32x16xf32>) -> tensor<8x16xf32> {
  %br = arith.constant dense<0.0> : tensor<4xf32>
  %b1 = arith.constant dense<0.0> : tensor<4x32xf32>
  %b2 = arith.constant dense<-0.0> : tensor<4x16xf32>
  %y = moe.layer %x router(%wr, %br) selection_bias(%br) experts(%w1, %w2) expert_biases(%b1, %b2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<gelu>}
         : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>,
            tensor<4x32xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// Expert biases go in pairs: one non-zero bias keeps both; a non-zero router
// bias stays.
// CHECK-LABEL: func.func @nonzero_biases_kept
// CHECK:         %[[BR:.*]] = arith.constant dense<1.000000e+00> : tensor<4xf32>
// CHECK:         moe.layer %arg0 router(%arg1, %[[BR]]) experts(%arg2, %arg3) expert_biases(%{{.*}}, %{{.*}})
// CHECK-NEXT:    return
func.func @nonzero_biases_kept(%x: tensor<8x16xf32>, %wr: tensor<16x4xf32>, %w1: tensor<4x16x32xf32>,
                               %w2: tensor<4x32x16xf32>) -> tensor<8x16xf32> {
  %br = arith.constant dense<1.0> : tensor<4xf32>
  %b1 = arith.constant dense<0.0> : tensor<4x32xf32>
  %b2 = arith.constant dense<0.5> : tensor<4x16xf32>
  %y = moe.layer %x router(%wr, %br) experts(%w1, %w2) expert_biases(%b1, %b2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<gelu>}
         : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>,
            tensor<4x32xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// The chain ops: zero router bias of moe.route, zero expert biases of
// moe.expert_ffn and moe.fused_experts.
// CHECK-LABEL: func.func @chain_zero_biases
// CHECK-NEXT:    moe.route %arg0 router(%arg1) : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
// CHECK-NEXT:    moe.expert_ffn %arg2, %arg3 experts(%arg4, %arg5) {activation = #moe.activation<relu>} :
// CHECK-NEXT:    moe.fused_experts %arg0, %arg6, %arg7 experts(%arg4, %arg5) {activation = #moe.activation<relu>, num_experts = 4 : i64} :
// CHECK-NEXT:    return
func.func @chain_zero_biases(%x: tensor<8x16xf32>, %wr: tensor<16x4xf32>, %rows: tensor<16x16xf32>, %off: tensor<5xi32>,
                             %w1: tensor<4x16x32xf32>, %w2: tensor<4x32x16xf32>, %i: tensor<8x2xi32>, %w: tensor<8x2xf32>)
    -> (tensor<8x4xf32>, tensor<16x16xf32>, tensor<8x16xf32>) {
  %br = arith.constant dense<0.0> : tensor<4xf32>
  %b1 = arith.constant dense<0.0> : tensor<4x32xf32>
  %b2 = arith.constant dense<0.0> : tensor<4x16xf32>
  %o = moe.route %x router(%wr, %br) : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4xf32>) -> tensor<8x4xf32>
  %out = moe.expert_ffn %rows, %off experts(%w1, %w2) expert_biases(%b1, %b2) {activation = #moe.activation<relu>}
      : (tensor<16x16xf32>, tensor<5xi32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>, tensor<4x32xf32>, tensor<4x16xf32>) -> tensor<16x16xf32>
  %y = moe.fused_experts %x, %i, %w experts(%w1, %w2) expert_biases(%b1, %b2) {num_experts = 4 : i64, activation = #moe.activation<relu>}
      : (tensor<8x16xf32>, tensor<8x2xi32>, tensor<8x2xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>, tensor<4x32xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  return %o, %out, %y : tensor<8x4xf32>, tensor<16x16xf32>, tensor<8x16xf32>
}

// -----

// A bias filled with zero (what --moe-raise-linalg builds for a missing one)
// is a zero bias too; a fill with another value is not.
// CHECK-LABEL: func.func @filled_zero_biases
// CHECK:         %[[ONE:.*]] = linalg.fill
// CHECK-NEXT:    %[[Y:.*]] = moe.layer %arg0 router(%arg1, %[[ONE]]) experts(%arg2, %arg3) {activation = #moe.activation<gelu>, routing = #moe.dense}
// CHECK-NEXT:    return %[[Y]]
func.func @filled_zero_biases(%x: tensor<8x16xf32>, %wr: tensor<16x4xf32>, %w1: tensor<4x16x32xf32>,
                              %w2: tensor<4x32x16xf32>) -> tensor<8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %e0 = tensor.empty() : tensor<4xf32>
  %br = linalg.fill ins(%one : f32) outs(%e0 : tensor<4xf32>) -> tensor<4xf32>
  %e1 = tensor.empty() : tensor<4x32xf32>
  %b1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<4x32xf32>) -> tensor<4x32xf32>
  %e2 = tensor.empty() : tensor<4x16xf32>
  %b2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<4x16xf32>) -> tensor<4x16xf32>
  %y = moe.layer %x router(%wr, %br) experts(%w1, %w2) expert_biases(%b1, %b2)
         {routing = #moe.dense, activation = #moe.activation<gelu>}
         : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>,
            tensor<4x32xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}
