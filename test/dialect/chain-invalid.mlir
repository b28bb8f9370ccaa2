// RUN: moe-opt %s -split-input-file -verify-diagnostics
//
// Verifier rules of the chain ops (route, gate, dispatch, expert_ffn,
// combine, soft_dispatch, soft_combine) and of capacity_factor.

func.func @route_model_dim(%x: tensor<8x64xf32>, %wr: tensor<32x4xf32>) {
  // expected-error @+1 {{'moe.route' op router_weight dimension 0 (D) is 32, but input has D = 64}}
  %o = moe.route %x router(%wr) : (tensor<8x64xf32>, tensor<32x4xf32>) -> tensor<8x4xf32>
  return
}

// -----

func.func @route_result(%x: tensor<8x64xf32>, %wr: tensor<64x4xf32>) {
  // expected-error @+1 {{'moe.route' op logits dimension 1 (E) is 5, but router_weight has E = 4}}
  %o = moe.route %x router(%wr) : (tensor<8x64xf32>, tensor<64x4xf32>) -> tensor<8x5xf32>
  return
}

// -----

func.func @route_bias(%x: tensor<8x64xf32>, %wr: tensor<64x4xf32>, %br: tensor<3xf32>) {
  // expected-error @+1 {{'moe.route' op router_bias dimension 0 (E) is 3, but router_weight has E = 4}}
  %o = moe.route %x router(%wr, %br) : (tensor<8x64xf32>, tensor<64x4xf32>, tensor<3xf32>) -> tensor<8x4xf32>
  return
}

// -----

func.func @gate_k(%o: tensor<8x4xf32>) {
  // expected-error @+1 {{'moe.gate' op weights dimension 1 (K) is 3, but the routing has K = 2}}
  %w, %i = moe.gate %o {routing = #moe.top_k<k = 2>} : (tensor<8x4xf32>) -> (tensor<8x3xf32>, tensor<8x3xi32>)
  return
}

// -----

func.func @gate_dense_k(%o: tensor<8x4xf32>) {
  // expected-error @+1 {{'moe.gate' op weights dimension 1 (K) is 2, but the routing has K = 4}}
  %w, %i = moe.gate %o {routing = #moe.dense} : (tensor<8x4xf32>) -> (tensor<8x2xf32>, tensor<8x2xi32>)
  return
}

// -----

func.func @gate_indices_type(%o: tensor<8x4xf32>) {
  // expected-error @+1 {{'moe.gate' op result #1 must be 2-D tensor [T, K] of i32, but got 'tensor<8x2xi64>'}}
  %w, %i = moe.gate %o {routing = #moe.top_k<k = 2>} : (tensor<8x4xf32>) -> (tensor<8x2xf32>, tensor<8x2xi64>)
  return
}

// -----

func.func @gate_tokens(%o: tensor<8x4xf32>) {
  // expected-error @+1 {{'moe.gate' op indices dimension 0 (T) is 9, but logits has T = 8}}
  %w, %i = moe.gate %o {routing = #moe.top_k<k = 2>} : (tensor<8x4xf32>) -> (tensor<8x2xf32>, tensor<9x2xi32>)
  return
}

// -----

func.func @gate_training_seed(%o: tensor<8x4xf32>) {
  // expected-error @+1 {{'moe.gate' op is in training mode and needs a 'seed' operand (tensor<i64>) keying its random stream}}
  %w, %i, %l = moe.gate %o {routing = #moe.moesart<k = 2>, training} : (tensor<8x4xf32>) -> (tensor<8x2xf32>, tensor<8x2xi32>, tensor<f32>)
  return
}

// -----

func.func @gate_training_loss(%o: tensor<8x4xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{'moe.gate' op is in training mode and returns the aux_loss as a third result}}
  %w, %i = moe.gate %o seed(%s) {routing = #moe.moesart<k = 2>, training} : (tensor<8x4xf32>, tensor<i64>) -> (tensor<8x2xf32>, tensor<8x2xi32>)
  return
}

// -----

func.func @gate_k_above_e(%o: tensor<8x4xf32>) {
  // expected-error @+1 {{'moe.gate' op routing #moe.moesart selects k = 6 experts per token, but the layer has only E = 4 experts}}
  %w, %i = moe.gate %o {routing = #moe.moesart<k = 6>} : (tensor<8x4xf32>) -> (tensor<8x6xf32>, tensor<8x6xi32>)
  return
}

// -----

func.func @dispatch_rows(%x: tensor<8x64xf32>, %i: tensor<8x2xi32>) {
  // expected-error @+1 {{'moe.dispatch' op rows dimension 0 (T*K) is 8, but input and indices has T*K = 16}}
  %r, %o, %s, %p = moe.dispatch %x, %i {num_experts = 4 : i64}
      : (tensor<8x64xf32>, tensor<8x2xi32>) -> (tensor<8x64xf32>, tensor<5xi32>, tensor<16xi32>, tensor<8x2xi32>)
  return
}

// -----

func.func @dispatch_offsets(%x: tensor<8x64xf32>, %i: tensor<8x2xi32>) {
  // expected-error @+1 {{'moe.dispatch' op offsets dimension 0 (E+1) is 4, but num_experts has E+1 = 5}}
  %r, %o, %s, %p = moe.dispatch %x, %i {num_experts = 4 : i64}
      : (tensor<8x64xf32>, tensor<8x2xi32>) -> (tensor<16x64xf32>, tensor<4xi32>, tensor<16xi32>, tensor<8x2xi32>)
  return
}

// -----

func.func @dispatch_capacity(%x: tensor<8x64xf32>, %i: tensor<8x2xi32>) {
  // expected-error @+1 {{'moe.dispatch' op capacity_factor must be > 0, got 0}}
  %r, %o, %s, %p = moe.dispatch %x, %i {num_experts = 4 : i64, capacity_factor = 0.0 : f64}
      : (tensor<8x64xf32>, tensor<8x2xi32>) -> (tensor<16x64xf32>, tensor<5xi32>, tensor<16xi32>, tensor<8x2xi32>)
  return
}

// -----

func.func @dispatch_num_experts(%x: tensor<8x64xf32>, %i: tensor<8x2xi32>) {
  // expected-error @+1 {{'moe.dispatch' op attribute 'num_experts' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  %r, %o, %s, %p = moe.dispatch %x, %i {num_experts = 0 : i64}
      : (tensor<8x64xf32>, tensor<8x2xi32>) -> (tensor<16x64xf32>, tensor<1xi32>, tensor<16xi32>, tensor<8x2xi32>)
  return
}

// -----

func.func @dispatch_positions(%x: tensor<8x64xf32>, %i: tensor<8x2xi32>) {
  // expected-error @+1 {{'moe.dispatch' op result #3 must be 2-D tensor [T, K] of i32, but got 'tensor<8x2xf32>'}}
  %r, %o, %s, %p = moe.dispatch %x, %i {num_experts = 4 : i64}
      : (tensor<8x64xf32>, tensor<8x2xi32>) -> (tensor<16x64xf32>, tensor<5xi32>, tensor<16xi32>, tensor<8x2xf32>)
  return
}

// -----

func.func @ffn_experts(%r: tensor<16x64xf32>, %o: tensor<5xi32>, %w1: tensor<3x64x32xf32>, %w2: tensor<3x32x64xf32>) {
  // expected-error @+1 {{'moe.expert_ffn' op w1 dimension 0 (E) is 3, but offsets has E = 4}}
  %y = moe.expert_ffn %r, %o experts(%w1, %w2) {activation = #moe.activation<relu>}
      : (tensor<16x64xf32>, tensor<5xi32>, tensor<3x64x32xf32>, tensor<3x32x64xf32>) -> tensor<16x64xf32>
  return
}

// -----

func.func @ffn_no_experts(%r: tensor<16x64xf32>, %o: tensor<1xi32>, %w1: tensor<0x64x32xf32>, %w2: tensor<0x32x64xf32>) {
  // expected-error @+1 {{'moe.expert_ffn' op expects offsets of shape [E+1] with E >= 1, got 'tensor<1xi32>'}}
  %y = moe.expert_ffn %r, %o experts(%w1, %w2) {activation = #moe.activation<relu>}
      : (tensor<16x64xf32>, tensor<1xi32>, tensor<0x64x32xf32>, tensor<0x32x64xf32>) -> tensor<16x64xf32>
  return
}

// -----

func.func @ffn_output(%r: tensor<16x64xf32>, %o: tensor<5xi32>, %w1: tensor<4x64x32xf32>, %w2: tensor<4x32x64xf32>) {
  // expected-error @+1 {{'moe.expert_ffn' op output dimension 0 (N) is 8, but rows has N = 16}}
  %y = moe.expert_ffn %r, %o experts(%w1, %w2) {activation = #moe.activation<relu>}
      : (tensor<16x64xf32>, tensor<5xi32>, tensor<4x64x32xf32>, tensor<4x32x64xf32>) -> tensor<8x64xf32>
  return
}

// -----

func.func @combine_positions(%out: tensor<16x64xf32>, %w: tensor<8x2xf32>, %p: tensor<8x3xi32>) {
  // expected-error @+1 {{'moe.combine' op positions dimension 1 (K) is 3, but weights has K = 2}}
  %y = moe.combine %out, %w, %p : (tensor<16x64xf32>, tensor<8x2xf32>, tensor<8x3xi32>) -> tensor<8x64xf32>
  return
}

// -----

func.func @combine_output(%out: tensor<16x64xf32>, %w: tensor<8x2xf32>, %p: tensor<8x2xi32>) {
  // expected-error @+1 {{'moe.combine' op output dimension 1 (D) is 32, but expert_output has D = 64}}
  %y = moe.combine %out, %w, %p : (tensor<16x64xf32>, tensor<8x2xf32>, tensor<8x2xi32>) -> tensor<8x32xf32>
  return
}

// -----

func.func @soft_dispatch_rows(%x: tensor<4x64x128xf32>, %phi: tensor<128x8x2xf32>) {
  // expected-error @+1 {{'moe.soft_dispatch' op rows dimension 0 (E*G*S) is 32, but input and slots has E*G*S = 64}}
  %r, %o, %c = moe.soft_dispatch %x slots(%phi) : (tensor<4x64x128xf32>, tensor<128x8x2xf32>) -> (tensor<32x128xf32>, tensor<9xi32>, tensor<4x64x8x2xf32>)
  return
}

// -----

func.func @soft_dispatch_combine(%x: tensor<4x64x128xf32>, %phi: tensor<128x8x2xf32>) {
  // expected-error @+1 {{'moe.soft_dispatch' op combine_weights dimension 3 (S) is 1, but slots has S = 2}}
  %r, %o, %c = moe.soft_dispatch %x slots(%phi) : (tensor<4x64x128xf32>, tensor<128x8x2xf32>) -> (tensor<64x128xf32>, tensor<9xi32>, tensor<4x64x8x1xf32>)
  return
}

// -----

func.func @soft_combine_rows(%out: tensor<63x128xf32>, %cw: tensor<4x64x8x2xf32>) {
  // expected-error @+1 {{'moe.soft_combine' op expert_output dimension 0 (E*G*S) is 63, but combine_weights has E*G*S = 64}}
  %y = moe.soft_combine %out, %cw : (tensor<63x128xf32>, tensor<4x64x8x2xf32>) -> tensor<4x64x128xf32>
  return
}

// -----

func.func @layer_capacity(%x: tensor<8x16xf32>, %wr: tensor<16x4xf32>, %w1: tensor<4x16x32xf32>, %w2: tensor<4x32x16xf32>) {
  // expected-error @+1 {{'moe.layer' op capacity_factor must be > 0, got -1}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.top_k<k = 1>, activation = #moe.activation<relu>, capacity_factor = -1.0 : f64}
         : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<8x16xf32>
  return
}
