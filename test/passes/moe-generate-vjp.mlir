// RUN: moe-opt %s -split-input-file --moe-generate-vjp | FileCheck %s
// RUN: moe-opt %s --moe-generate-vjp=entries=other | FileCheck %s --check-prefix=ENTRIES

// (With entries=other, the file as one module: only @other is differentiated.)

// A top-k layer: @f stays; @f_vjp takes f's arguments then dy, returns y
// then dx, dwr, dw1, dw2. The forward is the decomposed chain; the backward
// runs its adjoints in reverse, and dx sums the dispatch's and the router's.

// CHECK-LABEL: func.func @f(
// CHECK-NEXT:    moe.layer
// CHECK-LABEL: func.func @f_vjp(
// CHECK-SAME:    %[[X:[a-z0-9]+]]: tensor<8x16xf32>, %[[WR:[a-z0-9]+]]: tensor<16x4xf32> {moe.param = "wr"}
// CHECK-SAME:    %[[W1:[a-z0-9]+]]: tensor<4x16x32xf32>, %[[W2:[a-z0-9]+]]: tensor<4x32x16xf32>, %[[DY:[a-z0-9]+]]: tensor<8x16xf32>)
// CHECK-SAME:    -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>)
// CHECK-NEXT:    %[[LOGITS:.+]] = moe.route %[[X]] router(%[[WR]])
// CHECK-NEXT:    %[[W:.+]], %[[IDX:.+]] = moe.gate %[[LOGITS]] {routing = #moe.top_k<k = 2>}
// CHECK-NEXT:    %[[ROWS:.+]], %[[OFF:.+]], %{{.+}}, %[[POS:.+]] = moe.dispatch %[[X]], %[[IDX]]
// CHECK-NEXT:    %[[OUT:.+]] = moe.expert_ffn %[[ROWS]], %[[OFF]] experts(%[[W1]], %[[W2]])
// CHECK-NEXT:    %[[Y:.+]] = moe.combine %[[OUT]], %[[W]], %[[POS]]
// CHECK-NEXT:    %[[DOUT:.+]], %[[DW:.+]] = moe.combine_grad %[[DY]], %[[OUT]], %[[W]], %[[POS]]
// CHECK-NEXT:    %[[DROWS:.+]], %[[DW1:.+]], %[[DW2:.+]] = moe.expert_ffn_grad %[[ROWS]], %[[OFF]], %[[DOUT]] experts(%[[W1]], %[[W2]]) {activation = #moe.activation<gelu>}
// CHECK-NEXT:    %[[DX1:.+]] = moe.dispatch_grad %[[DROWS]], %[[POS]]
// CHECK-NEXT:    %[[DLOGITS:.+]] = moe.gate_grad %[[LOGITS]], %[[IDX]], %[[DW]] {routing = #moe.top_k<k = 2>}
// CHECK-NEXT:    %[[DX2:.+]], %[[DWR:.+]], %{{.+}} = moe.route_grad %[[X]], %[[WR]], %[[DLOGITS]]
// CHECK-NEXT:    %[[DX:.+]] = arith.addf %[[DX1]], %[[DX2]]
// CHECK-NEXT:    return %[[Y]], %[[DX]], %[[DWR]], %[[DW1]], %[[DW2]]

// ENTRIES-LABEL: func.func @f(
// ENTRIES-NOT:   func.func @f_vjp
// ENTRIES-LABEL: func.func @other(
// ENTRIES-LABEL: func.func @other_vjp(
// ENTRIES-SAME:    -> (tensor<4xf32>, tensor<4xf32>)
// ENTRIES-NOT:   _vjp
func.func @f(%x: tensor<8x16xf32>, %wr: tensor<16x4xf32> {moe.param = "wr"}, %w1: tensor<4x16x32xf32>, %w2: tensor<4x32x16xf32>) -> tensor<8x16xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.top_k<k = 2>, activation = #moe.activation<gelu>}
      : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}
func.func @other(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = math.exp %x : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// A bf16 block: a MOESART training layer (seed, aux loss), a residual add, a
// dense projection (linalg.matmul) and a reshape. Cotangents in f32: the
// bf16 dy is extended once; the projection's adjoint is two matmuls; the
// residual's cotangent reaches x directly and through the layer; the gate
// gets the aux loss's cotangent; each gradient is rounded once to bf16; the
// integer seed has no gradient and the unused argument gets zeros.

// CHECK-LABEL: func.func @block_vjp(
// CHECK-SAME:    %[[X:[a-z0-9]+]]: tensor<8x16xbf16>, %[[SEED:[a-z0-9]+]]: tensor<i64>
// CHECK-SAME:    %[[DY:[a-z0-9]+]]: tensor<2x4x16xbf16>, %[[DAUX:[a-z0-9]+]]: tensor<f32>)
// CHECK-SAME:    -> (tensor<2x4x16xbf16>, tensor<f32>, tensor<8x16xbf16>, tensor<16x4xbf16>, tensor<4x16x32xbf16>, tensor<4x32x16xbf16>, tensor<16x16xbf16>, tensor<3xf32>)
// CHECK:         %[[W:.+]], %[[IDX:.+]], %[[AUX:.+]] = moe.gate %[[LOGITS:.+]] seed(%[[SEED]]) {routing = #moe.moesart<k = 2, trimmed_lasso = 5.000000e-02>, training}
// CHECK:         %[[R:.+]] = arith.addf %[[X]], %{{.+}} : tensor<8x16xbf16>
// CHECK:         %[[P:.+]] = linalg.matmul ins(%[[R]], %[[PROJ:.+]] : tensor<8x16xbf16>, tensor<16x16xbf16>)
// CHECK-NEXT:    %[[Y:.+]] = tensor.expand_shape %[[P]]
// CHECK-NEXT:    %[[DY32:.+]] = arith.extf %[[DY]] : tensor<2x4x16xbf16> to tensor<2x4x16xf32>
// CHECK-NEXT:    %[[DP:.+]] = tensor.collapse_shape %[[DY32]]
// CHECK:         %[[DR:.+]] = linalg.matmul ins(%[[DP]], %{{.+}} : tensor<8x16xf32>, tensor<16x16xf32>)
// CHECK:         %[[DPROJ:.+]] = linalg.matmul ins(%{{.+}}, %[[DP]] : tensor<16x8xf32>, tensor<8x16xf32>)
// CHECK-NEXT:    moe.combine_grad %[[DR]],
// CHECK:         %[[DX1:.+]] = moe.dispatch_grad
// CHECK-NEXT:    %[[DXR:.+]] = arith.addf %[[DR]], %[[DX1]] : tensor<8x16xf32>
// CHECK-NEXT:    %[[DLOGITS:.+]] = moe.gate_grad %[[LOGITS]], %[[IDX]], %{{.+}} seed(%[[SEED]]) aux_loss_grad(%[[DAUX]])
// CHECK-NEXT:    %[[DX2:.+]], %{{.+}}, %{{.+}} = moe.route_grad %[[X]], %{{.+}}, %[[DLOGITS]]
// CHECK-NEXT:    %[[DX:.+]] = arith.addf %[[DXR]], %[[DX2]] : tensor<8x16xf32>
// CHECK-NEXT:    %[[DXB:.+]] = arith.truncf %[[DX]] : tensor<8x16xf32> to tensor<8x16xbf16>
// CHECK-COUNT-4: arith.truncf
// CHECK-NEXT:    %[[ZERO:.+]] = arith.constant dense<0.000000e+00> : tensor<3xf32>
// CHECK-NEXT:    return %[[Y]], %[[AUX]], %[[DXB]], {{.+}}, %[[ZERO]]
func.func @block(%x: tensor<8x16xbf16>, %seed: tensor<i64>, %wr: tensor<16x4xbf16>, %w1: tensor<4x16x32xbf16>,
                 %w2: tensor<4x32x16xbf16>, %proj: tensor<16x16xbf16>, %unused: tensor<3xf32>)
    -> (tensor<2x4x16xbf16>, tensor<f32>) {
  %y, %aux = moe.layer %x router(%wr) experts(%w1, %w2) seed(%seed)
      {routing = #moe.moesart<k = 2, trimmed_lasso = 0.05>, activation = #moe.activation<gelu>, training}
      : (tensor<8x16xbf16>, tensor<16x4xbf16>, tensor<4x16x32xbf16>, tensor<4x32x16xbf16>, tensor<i64>) -> (tensor<8x16xbf16>, tensor<f32>)
  %r = arith.addf %x, %y : tensor<8x16xbf16>
  %zero = arith.constant 0.0 : bf16
  %empty = tensor.empty() : tensor<8x16xbf16>
  %init = linalg.fill ins(%zero : bf16) outs(%empty : tensor<8x16xbf16>) -> tensor<8x16xbf16>
  %p = linalg.matmul ins(%r, %proj : tensor<8x16xbf16>, tensor<16x16xbf16>) outs(%init : tensor<8x16xbf16>) -> tensor<8x16xbf16>
  %e = tensor.expand_shape %p [[0, 1], [2]] output_shape [2, 4, 16] : tensor<8x16xbf16> into tensor<2x4x16xbf16>
  return %e, %aux : tensor<2x4x16xbf16>, tensor<f32>
}

// -----

// The fused form (--moe-decompose --moe-fuse) is differentiated like the
// layer: the forward's fused_experts is unfused into the chain, whose
// expert outputs the backward reads.

// CHECK-LABEL: func.func @fused_vjp(
// CHECK:         moe.dispatch
// CHECK-NEXT:    %[[OUT:.+]] = moe.expert_ffn
// CHECK-NEXT:    moe.combine %[[OUT]]
// CHECK-NEXT:    moe.combine_grad %{{.+}}, %[[OUT]]
// CHECK-NEXT:    moe.expert_ffn_grad
func.func @fused(%x: tensor<8x16xf32>, %wr: tensor<16x4xf32>, %w1: tensor<4x16x32xf32>, %w2: tensor<4x32x16xf32>) -> tensor<8x16xf32> {
  %0 = moe.route %x router(%wr) : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %weights, %indices = moe.gate %0 {routing = #moe.top_k<k = 2>} : (tensor<8x4xf32>) -> (tensor<8x2xf32>, tensor<8x2xi32>)
  %1 = moe.fused_experts %x, %indices, %weights experts(%w1, %w2) {activation = #moe.activation<gelu>, num_experts = 4 : i64}
      : (tensor<8x16xf32>, tensor<8x2xi32>, tensor<8x2xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<8x16xf32>
  return %1 : tensor<8x16xf32>
}

// -----

// Soft MoE: the layer is decomposed into the soft chain and each op gets
// its adjoint in reverse order; the scale is a differentiated argument
// (its gradient a tensor<f32>), and soft_dispatch_grad recomputes the
// logits from the forward's own operands.

// CHECK-LABEL: func.func @soft_vjp(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<2x8x16xf32>, %[[PHI:[^:]+]]: tensor<16x4x2xf32>, %[[S:[^:]+]]: tensor<f32>
// CHECK-SAME:    -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<16x4x2xf32>, tensor<f32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>)
// CHECK:         %[[ROWS:.+]], %[[OFF:.+]], %[[CW:.+]] = moe.soft_dispatch %[[X]] slots(%[[PHI]]) scale(%[[S]]) {normalize}
// CHECK-NEXT:    %[[OUT:.+]] = moe.expert_ffn %[[ROWS]], %[[OFF]]
// CHECK-NEXT:    %[[Y:.+]] = moe.soft_combine %[[OUT]], %[[CW]]
// CHECK-NEXT:    %[[DOUT:.+]], %[[DCW:.+]] = moe.soft_combine_grad %{{.+}}, %[[OUT]], %[[CW]]
// CHECK-NEXT:    %[[DROWS:.+]], %[[DW1:.+]], %[[DW2:.+]] = moe.expert_ffn_grad %[[ROWS]], %[[OFF]], %[[DOUT]]
// CHECK-NEXT:    %[[DX:.+]], %[[DPHI:.+]], %[[DS:.+]] = moe.soft_dispatch_grad %[[X]] slots(%[[PHI]]) scale(%[[S]]) rows_grad(%[[DROWS]]) combine_weights_grad(%[[DCW]]) {normalize}
// CHECK-NEXT:    return %[[Y]], %[[DX]], %[[DPHI]], %[[DS]], %[[DW1]], %[[DW2]]
func.func @soft(%x: tensor<2x8x16xf32>, %phi: tensor<16x4x2xf32>, %scale: tensor<f32>, %w1: tensor<4x16x32xf32>, %w2: tensor<4x32x16xf32>) -> tensor<2x8x16xf32> {
  %y = moe.soft_layer %x slots(%phi) scale(%scale) experts(%w1, %w2) {activation = #moe.activation<gelu>, normalize}
      : (tensor<2x8x16xf32>, tensor<16x4x2xf32>, tensor<f32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<2x8x16xf32>
  return %y : tensor<2x8x16xf32>
}

// -----

// The fused Soft MoE is unfused into the same chain.

// CHECK-LABEL: func.func @fused_soft_vjp(
// CHECK:         moe.soft_dispatch
// CHECK-NEXT:    moe.expert_ffn
// CHECK-NEXT:    moe.soft_combine
// CHECK-NEXT:    moe.soft_combine_grad
// CHECK-NEXT:    moe.expert_ffn_grad
// CHECK-NEXT:    moe.soft_dispatch_grad
func.func @fused_soft(%x: tensor<2x8x16xf32>, %phi: tensor<16x4x2xf32>, %w1: tensor<4x16x32xf32>, %w2: tensor<4x32x16xf32>) -> tensor<2x8x16xf32> {
  %y = moe.fused_soft_experts %x slots(%phi) experts(%w1, %w2) {activation = #moe.activation<gelu>}
      : (tensor<2x8x16xf32>, tensor<16x4x2xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<2x8x16xf32>
  return %y : tensor<2x8x16xf32>
}
