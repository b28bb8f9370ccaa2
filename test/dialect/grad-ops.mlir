// RUN: moe-opt %s | FileCheck %s
// RUN: moe-opt %s | moe-opt | FileCheck %s
// RUN: moe-opt %s --mlir-print-op-generic | moe-opt | FileCheck %s
//
// Round-trip and result-type inference of the adjoint ops (docs/spec.md §9).

// CHECK-LABEL: func.func @chain_grads
// CHECK: {{.*}} = moe.route_grad %arg0, %arg1, %arg2 : (tensor<64x32xbf16>, tensor<32x8xbf16>, tensor<64x8xf32>) -> (tensor<64x32xf32>, tensor<32x8xf32>, tensor<8xf32>)
// CHECK-NEXT: {{.*}} = moe.gate_grad %arg2, %arg3, %arg4 {routing = #moe.top_k<k = 2, score = sigmoid>} : (tensor<64x8xf32>, tensor<64x2xi32>, tensor<64x2xf32>) -> tensor<64x8xf32>
// CHECK-NEXT: {{.*}} = moe.dispatch_grad %arg5, %arg3 : (tensor<128x32xf32>, tensor<64x2xi32>) -> tensor<64x32xf32>
// CHECK-NEXT: {{.*}} = moe.expert_ffn_grad %arg6, %arg7, %arg5 experts(%arg8, %arg9) expert_biases(%arg10, %arg11) {activation = #moe.activation<swiglu>}
// CHECK-SAME: -> (tensor<128x32xf32>, tensor<8x32x128xf32>, tensor<8x64x32xf32>, tensor<8x128xf32>, tensor<8x32xf32>)
// CHECK-NEXT: {{.*}} = moe.combine_grad %arg12, %arg5, %arg4, %arg3 : (tensor<64x32xf32>, tensor<128x32xf32>, tensor<64x2xf32>, tensor<64x2xi32>) -> (tensor<128x32xf32>, tensor<64x2xf32>)
// CHECK-NEXT: {{.*}} = moe.shared_expert_grad %arg0, %arg12 shared(%arg13, %arg14) gate(%arg15) {activation = #moe.activation<gelu>}
// CHECK-SAME: -> (tensor<64x32xf32>, tensor<32x48xf32>, tensor<48x32xf32>, tensor<32x1xf32>)
func.func @chain_grads(%x: tensor<64x32xbf16>, %wr: tensor<32x8xbf16>, %do: tensor<64x8xf32>,
                       %idx: tensor<64x2xi32>, %dw: tensor<64x2xf32>, %drows: tensor<128x32xf32>,
                       %rows: tensor<128x32xbf16>, %off: tensor<9xi32>,
                       %w1: tensor<8x32x128xbf16>, %w2: tensor<8x64x32xbf16>,
                       %b1: tensor<8x128xbf16>, %b2: tensor<8x32xbf16>, %dy: tensor<64x32xf32>,
                       %s1: tensor<32x48xbf16>, %s2: tensor<48x32xbf16>, %sg: tensor<32x1xbf16>) {
  %dx, %dwr, %dbr = moe.route_grad %x, %wr, %do
      : (tensor<64x32xbf16>, tensor<32x8xbf16>, tensor<64x8xf32>) -> (tensor<64x32xf32>, tensor<32x8xf32>, tensor<8xf32>)
  %dlogits = moe.gate_grad %do, %idx, %dw {routing = #moe.top_k<k = 2, score = sigmoid>}
      : (tensor<64x8xf32>, tensor<64x2xi32>, tensor<64x2xf32>) -> tensor<64x8xf32>
  %dxd = moe.dispatch_grad %drows, %idx : (tensor<128x32xf32>, tensor<64x2xi32>) -> tensor<64x32xf32>
  %g:5 = moe.expert_ffn_grad %rows, %off, %drows experts(%w1, %w2) expert_biases(%b1, %b2)
      {activation = #moe.activation<swiglu>}
      : (tensor<128x32xbf16>, tensor<9xi32>, tensor<128x32xf32>, tensor<8x32x128xbf16>, tensor<8x64x32xbf16>,
         tensor<8x128xbf16>, tensor<8x32xbf16>)
      -> (tensor<128x32xf32>, tensor<8x32x128xf32>, tensor<8x64x32xf32>, tensor<8x128xf32>, tensor<8x32xf32>)
  %c:2 = moe.combine_grad %dy, %drows, %dw, %idx
      : (tensor<64x32xf32>, tensor<128x32xf32>, tensor<64x2xf32>, tensor<64x2xi32>) -> (tensor<128x32xf32>, tensor<64x2xf32>)
  %s:4 = moe.shared_expert_grad %x, %dy shared(%s1, %s2) gate(%sg) {activation = #moe.activation<gelu>}
      : (tensor<64x32xbf16>, tensor<64x32xf32>, tensor<32x48xbf16>, tensor<48x32xbf16>, tensor<32x1xbf16>)
      -> (tensor<64x32xf32>, tensor<32x48xf32>, tensor<48x32xf32>, tensor<32x1xf32>)
  return
}

// CHECK-LABEL: func.func @training_gate_grad
// CHECK: {{.*}} = moe.gate_grad %arg0, %arg1, %arg2 seed(%arg3) aux_loss_grad(%arg4) {routing = #moe.moesart<k = 2>, training} : (tensor<?x8xf32>, tensor<?x2xi32>, tensor<?x2xf32>, tensor<i64>, tensor<f32>) -> tensor<?x8xf32>
func.func @training_gate_grad(%o: tensor<?x8xf32>, %i: tensor<?x2xi32>, %dw: tensor<?x2xf32>,
                              %seed: tensor<i64>, %daux: tensor<f32>) -> tensor<?x8xf32> {
  %d = moe.gate_grad %o, %i, %dw seed(%seed) aux_loss_grad(%daux) {routing = #moe.moesart<k = 2>, training}
      : (tensor<?x8xf32>, tensor<?x2xi32>, tensor<?x2xf32>, tensor<i64>, tensor<f32>) -> tensor<?x8xf32>
  return %d : tensor<?x8xf32>
}

// The adjoints of the soft chain: every optional operand present, then
// none (no scale: two results).
// CHECK-LABEL: func.func @soft_grads
// CHECK: %{{.*}}, %{{.*}}, %{{.*}} = moe.soft_dispatch_grad %arg0 slots(%arg1) scale(%arg2) rows_grad(%arg3) combine_weights_grad(%arg4) {normalize} : (tensor<2x8x16xf32>, tensor<16x4x2xf32>, tensor<f32>, tensor<16x16xf32>, tensor<2x8x4x2xf32>) -> (tensor<2x8x16xf32>, tensor<16x4x2xf32>, tensor<f32>)
// CHECK-NEXT: %{{.*}}, %{{.*}} = moe.soft_dispatch_grad %arg0 slots(%arg1) rows_grad(%arg3) : (tensor<2x8x16xf32>, tensor<16x4x2xf32>, tensor<16x16xf32>) -> (tensor<2x8x16xf32>, tensor<16x4x2xf32>)
// CHECK-NEXT: %{{.*}}, %{{.*}} = moe.soft_combine_grad %arg5, %arg6, %arg7 : (tensor<2x8x16xf32>, tensor<16x16xbf16>, tensor<2x8x4x2xbf16>) -> (tensor<16x16xf32>, tensor<2x8x4x2xf32>)
func.func @soft_grads(%x: tensor<2x8x16xf32>, %phi: tensor<16x4x2xf32>, %scale: tensor<f32>,
                      %drows: tensor<16x16xf32>, %dcw: tensor<2x8x4x2xf32>,
                      %dy: tensor<2x8x16xf32>, %out: tensor<16x16xbf16>,
                      %cwb: tensor<2x8x4x2xbf16>) {
  %dx, %dphi, %ds = moe.soft_dispatch_grad %x slots(%phi) scale(%scale)
      rows_grad(%drows) combine_weights_grad(%dcw) {normalize}
      : (tensor<2x8x16xf32>, tensor<16x4x2xf32>, tensor<f32>, tensor<16x16xf32>, tensor<2x8x4x2xf32>)
      -> (tensor<2x8x16xf32>, tensor<16x4x2xf32>, tensor<f32>)
  %dx2, %dphi2 = moe.soft_dispatch_grad %x slots(%phi) rows_grad(%drows)
      : (tensor<2x8x16xf32>, tensor<16x4x2xf32>, tensor<16x16xf32>) -> (tensor<2x8x16xf32>, tensor<16x4x2xf32>)
  %dout, %dcw2 = moe.soft_combine_grad %dy, %out, %cwb
      : (tensor<2x8x16xf32>, tensor<16x16xbf16>, tensor<2x8x4x2xbf16>) -> (tensor<16x16xf32>, tensor<2x8x4x2xf32>)
  return
}
