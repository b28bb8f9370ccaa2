// RUN: moe-opt %s -split-input-file -verify-diagnostics
//
// The verifiers of the adjoint ops (docs/spec.md §9).

func.func @route_grad_dims(%x: tensor<64x32xf32>, %wr: tensor<16x8xf32>, %do: tensor<64x8xf32>) {
  // expected-error @+1 {{router_weight dimension 0 (D) is 16, but input has D = 32}}
  %dx, %dwr, %dbr = moe.route_grad %x, %wr, %do
      : (tensor<64x32xf32>, tensor<16x8xf32>, tensor<64x8xf32>) -> (tensor<64x32xf32>, tensor<16x8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @route_grad_f32_cotangent(%x: tensor<64x32xf32>, %wr: tensor<32x8xf32>, %do: tensor<64x8xbf16>) {
  // expected-error @+1 {{operand #2 must be 2-D tensor [T, E] of f32}}
  %dx, %dwr, %dbr = moe.route_grad %x, %wr, %do
      : (tensor<64x32xf32>, tensor<32x8xf32>, tensor<64x8xbf16>) -> (tensor<64x32xf32>, tensor<32x8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @gate_grad_k(%o: tensor<64x8xf32>, %i: tensor<64x3xi32>, %dw: tensor<64x3xf32>) {
  // expected-error @+1 {{indices dimension 1 (K) is 3, but the routing has K = 2}}
  %d = moe.gate_grad %o, %i, %dw {routing = #moe.top_k<k = 2>}
      : (tensor<64x8xf32>, tensor<64x3xi32>, tensor<64x3xf32>) -> tensor<64x8xf32>
  return
}

// -----

func.func @gate_grad_needs_seed(%o: tensor<64x8xf32>, %i: tensor<64x2xi32>, %dw: tensor<64x2xf32>) {
  // expected-error @+1 {{needs the forward gate's 'seed': small_random's unadjusted expert j is recomputed from it}}
  %d = moe.gate_grad %o, %i, %dw {routing = #moe.moesart<k = 2>, training}
      : (tensor<64x8xf32>, tensor<64x2xi32>, tensor<64x2xf32>) -> tensor<64x8xf32>
  return
}

// -----

func.func @gate_grad_aux_inference(%o: tensor<64x8xf32>, %i: tensor<64x2xi32>, %dw: tensor<64x2xf32>,
                                   %daux: tensor<f32>) {
  // expected-error @+1 {{has an aux_loss_grad but is not in training mode}}
  %d = moe.gate_grad %o, %i, %dw aux_loss_grad(%daux) {routing = #moe.top_k<k = 2>}
      : (tensor<64x8xf32>, tensor<64x2xi32>, tensor<64x2xf32>, tensor<f32>) -> tensor<64x8xf32>
  return
}

// -----

func.func @dispatch_grad_rows(%drows: tensor<100x32xf32>, %pos: tensor<64x2xi32>) {
  // expected-error @+1 {{rows_grad dimension 0 (T*K) is 100, but positions has T*K = 128}}
  %dx = moe.dispatch_grad %drows, %pos : (tensor<100x32xf32>, tensor<64x2xi32>) -> tensor<64x32xf32>
  return
}

// -----

func.func @expert_ffn_grad_types(%rows: tensor<128x32xbf16>, %off: tensor<9xi32>, %d: tensor<128x32xf32>,
                                 %w1: tensor<8x32x64xf32>, %w2: tensor<8x64x32xf32>) {
  // expected-error @+1 {{w1 has element type 'f32', but rows has 'bf16'}}
  %g:3 = moe.expert_ffn_grad %rows, %off, %d experts(%w1, %w2) {activation = #moe.activation<gelu>}
      : (tensor<128x32xbf16>, tensor<9xi32>, tensor<128x32xf32>, tensor<8x32x64xf32>, tensor<8x64x32xf32>)
      -> (tensor<128x32xf32>, tensor<8x32x64xf32>, tensor<8x64x32xf32>)
  return
}

// -----

func.func @expert_ffn_grad_result(%rows: tensor<128x32xf32>, %off: tensor<9xi32>, %d: tensor<128x32xf32>,
                                  %w1: tensor<8x32x64xf32>, %w2: tensor<8x64x32xf32>) {
  // expected-error @+2 {{'moe.expert_ffn_grad' op inferred type(s) 'tensor<128x32xf32>', 'tensor<8x32x64xf32>', 'tensor<8x64x32xf32>' are incompatible with return type(s) of operation}}
  // expected-error @+1 {{'moe.expert_ffn_grad' op failed to infer returned types}}
  %g:3 = moe.expert_ffn_grad %rows, %off, %d experts(%w1, %w2) {activation = #moe.activation<gelu>}
      : (tensor<128x32xf32>, tensor<9xi32>, tensor<128x32xf32>, tensor<8x32x64xf32>, tensor<8x64x32xf32>)
      -> (tensor<128x32xf32>, tensor<8x32x32xf32>, tensor<8x64x32xf32>)
  return
}

// -----

func.func @combine_grad_dims(%dy: tensor<64x16xf32>, %out: tensor<128x32xf32>, %w: tensor<64x2xf32>,
                             %pos: tensor<64x2xi32>) {
  // expected-error @+1 {{output_grad dimension 1 (D) is 16, but expert_output has D = 32}}
  %c:2 = moe.combine_grad %dy, %out, %w, %pos
      : (tensor<64x16xf32>, tensor<128x32xf32>, tensor<64x2xf32>, tensor<64x2xi32>) -> (tensor<128x32xf32>, tensor<64x2xf32>)
  return
}

// -----

func.func @shared_grad_width(%x: tensor<64x32xf32>, %dy: tensor<64x32xf32>, %s1: tensor<32x48xf32>,
                             %s2: tensor<40x32xf32>) {
  // expected-error @+1 {{shared_w2 dimension 0 (Hs) is 40, but shared_w1 has Hs = 48}}
  %s:3 = moe.shared_expert_grad %x, %dy shared(%s1, %s2) {activation = #moe.activation<gelu>}
      : (tensor<64x32xf32>, tensor<64x32xf32>, tensor<32x48xf32>, tensor<40x32xf32>)
      -> (tensor<64x32xf32>, tensor<32x48xf32>, tensor<40x32xf32>)
  return
}

// -----

func.func @soft_dispatch_grad_rows(%x: tensor<2x8x16xf32>, %phi: tensor<16x4x2xf32>, %drows: tensor<12x16xf32>) {
  // expected-error @+1 {{rows_grad dimension 0 (E*G*S) is 12, but input and slots has E*G*S = 16}}
  %dx, %dphi = moe.soft_dispatch_grad %x slots(%phi) rows_grad(%drows)
      : (tensor<2x8x16xf32>, tensor<16x4x2xf32>, tensor<12x16xf32>) -> (tensor<2x8x16xf32>, tensor<16x4x2xf32>)
  return
}

// -----

func.func @soft_dispatch_grad_combine(%x: tensor<2x8x16xf32>, %phi: tensor<16x4x2xf32>, %dcw: tensor<2x8x4x3xf32>) {
  // expected-error @+1 {{combine_weights_grad dimension 3 (S) is 3, but slots has S = 2}}
  %dx, %dphi = moe.soft_dispatch_grad %x slots(%phi) combine_weights_grad(%dcw)
      : (tensor<2x8x16xf32>, tensor<16x4x2xf32>, tensor<2x8x4x3xf32>) -> (tensor<2x8x16xf32>, tensor<16x4x2xf32>)
  return
}

// -----

func.func @soft_dispatch_grad_types(%x: tensor<2x8x16xf32>, %phi: tensor<16x4x2xbf16>) {
  // expected-error @+1 {{slots has element type 'bf16', but input has 'f32'}}
  %dx, %dphi = moe.soft_dispatch_grad %x slots(%phi)
      : (tensor<2x8x16xf32>, tensor<16x4x2xbf16>) -> (tensor<2x8x16xf32>, tensor<16x4x2xf32>)
  return
}

// -----

func.func @soft_dispatch_grad_scale_result(%x: tensor<2x8x16xf32>, %phi: tensor<16x4x2xf32>, %s: tensor<f32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<2x8x16xf32>', 'tensor<16x4x2xf32>', 'tensor<f32>' are incompatible}}
  // expected-error @+1 {{failed to infer returned types}}
  %dx, %dphi = moe.soft_dispatch_grad %x slots(%phi) scale(%s)
      : (tensor<2x8x16xf32>, tensor<16x4x2xf32>, tensor<f32>) -> (tensor<2x8x16xf32>, tensor<16x4x2xf32>)
  return
}

// -----

func.func @soft_combine_grad_dims(%dy: tensor<2x8x16xf32>, %out: tensor<16x8xf32>, %cw: tensor<2x8x4x2xf32>) {
  // expected-error @+1 {{output_grad dimension 2 (D) is 16, but expert_output has D = 8}}
  %dout, %dcw = moe.soft_combine_grad %dy, %out, %cw
      : (tensor<2x8x16xf32>, tensor<16x8xf32>, tensor<2x8x4x2xf32>) -> (tensor<16x8xf32>, tensor<2x8x4x2xf32>)
  return
}

// -----

func.func @soft_combine_grad_f32(%dy: tensor<2x8x16xbf16>, %out: tensor<16x16xf32>, %cw: tensor<2x8x4x2xf32>) {
  // expected-error @+1 {{operand #0 must be 3-D tensor [G, M, D] of f32}}
  %dout, %dcw = moe.soft_combine_grad %dy, %out, %cw
      : (tensor<2x8x16xbf16>, tensor<16x16xf32>, tensor<2x8x4x2xf32>) -> (tensor<16x16xf32>, tensor<2x8x4x2xf32>)
  return
}

// -----

func.func @soft_combine_grad_types(%dy: tensor<2x8x16xf32>, %out: tensor<16x16xbf16>, %cw: tensor<2x8x4x2xf32>) {
  // expected-error @+1 {{combine_weights has element type 'f32', but expert_output has 'bf16'}}
  %dout, %dcw = moe.soft_combine_grad %dy, %out, %cw
      : (tensor<2x8x16xf32>, tensor<16x16xbf16>, tensor<2x8x4x2xf32>) -> (tensor<16x16xf32>, tensor<2x8x4x2xf32>)
  return
}
