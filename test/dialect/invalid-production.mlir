// RUN: moe-opt %s -split-input-file -verify-diagnostics
//
// One case per verifier rule of docs/spec.md §3.1.1 on moe.layer, moe.gate,
// moe.shared_expert, moe.combine and moe.fused_experts: expert groups, the
// selection bias and shared experts.

func.func @groups_not_dividing(%x: tensor<4x16xf32>, %wr: tensor<16x6xf32>, %w1: tensor<6x16x32xf32>, %w2: tensor<6x32x16xf32>) {
  // expected-error @+1 {{'moe.layer' op #moe.top_k with groups = 4 needs the number of experts to be a multiple of it, got E = 6}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.top_k<k = 2, groups = 4>, activation = #moe.activation<relu>}
         : (tensor<4x16xf32>, tensor<16x6xf32>, tensor<6x16x32xf32>, tensor<6x32x16xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @k_beyond_kept_groups(%x: tensor<4x16xf32>, %wr: tensor<16x8xf32>, %w1: tensor<8x16x32xf32>, %w2: tensor<8x32x16xf32>) {
  // expected-error @+1 {{'moe.layer' op #moe.top_k needs k <= group_k * E / groups = 2, got k = 3}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.top_k<k = 3, groups = 4, group_k = 1>, activation = #moe.activation<relu>}
         : (tensor<4x16xf32>, tensor<16x8xf32>, tensor<8x16x32xf32>, tensor<8x32x16xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @bias_needs_top_k(%x: tensor<4x16xf32>, %wr: tensor<16x8xf32>, %b: tensor<8xf32>, %w1: tensor<8x16x32xf32>, %w2: tensor<8x32x16xf32>) {
  // expected-error @+1 {{'moe.layer' op has a selection_bias, which only #moe.top_k routing uses (it shifts the scores that choose the experts)}}
  %y = moe.layer %x router(%wr) selection_bias(%b) experts(%w1, %w2) {routing = #moe.moesart<k = 2>, activation = #moe.activation<relu>}
         : (tensor<4x16xf32>, tensor<16x8xf32>, tensor<8xf32>, tensor<8x16x32xf32>, tensor<8x32x16xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @bias_rank(%x: tensor<4x16xf32>, %wr: tensor<16x8xf32>, %b: tensor<1x8xf32>, %w1: tensor<8x16x32xf32>, %w2: tensor<8x32x16xf32>) {
  // expected-error @+1 {{'moe.layer' op operand #2 must be 1-D tensor [E] of f32, f16 or bf16, but got 'tensor<1x8xf32>'}}
  %y = moe.layer %x router(%wr) selection_bias(%b) experts(%w1, %w2) {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>}
         : (tensor<4x16xf32>, tensor<16x8xf32>, tensor<1x8xf32>, tensor<8x16x32xf32>, tensor<8x32x16xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @bias_length(%x: tensor<4x16xf32>, %wr: tensor<16x8xf32>, %b: tensor<7xf32>, %w1: tensor<8x16x32xf32>, %w2: tensor<8x32x16xf32>) {
  // expected-error @+1 {{'moe.layer' op selection_bias dimension 0 (E) is 7, but router_weight has E = 8}}
  %y = moe.layer %x router(%wr) selection_bias(%b) experts(%w1, %w2) {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>}
         : (tensor<4x16xf32>, tensor<16x8xf32>, tensor<7xf32>, tensor<8x16x32xf32>, tensor<8x32x16xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @bias_type(%x: tensor<4x16xbf16>, %wr: tensor<16x8xbf16>, %b: tensor<8xf16>, %w1: tensor<8x16x32xbf16>, %w2: tensor<8x32x16xbf16>) {
  // expected-error @+1 {{'moe.layer' op selection_bias has element type 'f16', but input has 'bf16' (routing values are f32 or the data's element type)}}
  %y = moe.layer %x router(%wr) selection_bias(%b) experts(%w1, %w2) {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>}
         : (tensor<4x16xbf16>, tensor<16x8xbf16>, tensor<8xf16>, tensor<8x16x32xbf16>, tensor<8x32x16xbf16>) -> tensor<4x16xbf16>
  return
}

// -----

func.func @gate_without_shared(%x: tensor<4x16xf32>, %wr: tensor<16x8xf32>, %w1: tensor<8x16x32xf32>, %w2: tensor<8x32x16xf32>, %sg: tensor<16x1xf32>) {
  // expected-error @+1 {{'moe.layer' op has a shared_gate but no shared expert; shared_gate(%sg) scales the shared(%s1, %s2) expert's output}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) shared_gate(%sg) {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>}
         : (tensor<4x16xf32>, tensor<16x8xf32>, tensor<8x16x32xf32>, tensor<8x32x16xf32>, tensor<16x1xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @shared_w1_model_dim(%x: tensor<4x16xf32>, %wr: tensor<16x8xf32>, %w1: tensor<8x16x32xf32>, %w2: tensor<8x32x16xf32>, %s1: tensor<12x24xf32>, %s2: tensor<24x16xf32>) {
  // expected-error @+1 {{'moe.layer' op shared_w1 dimension 0 (D) is 12, but input has D = 16}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) shared(%s1, %s2) {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>}
         : (tensor<4x16xf32>, tensor<16x8xf32>, tensor<8x16x32xf32>, tensor<8x32x16xf32>, tensor<12x24xf32>, tensor<24x16xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @shared_w2_model_dim(%x: tensor<4x16xf32>, %wr: tensor<16x8xf32>, %w1: tensor<8x16x32xf32>, %w2: tensor<8x32x16xf32>, %s1: tensor<16x24xf32>, %s2: tensor<24x12xf32>) {
  // expected-error @+1 {{'moe.layer' op shared_w2 dimension 1 (D) is 12, but input has D = 16}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) shared(%s1, %s2) {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>}
         : (tensor<4x16xf32>, tensor<16x8xf32>, tensor<8x16x32xf32>, tensor<8x32x16xf32>, tensor<16x24xf32>, tensor<24x12xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @shared_hidden(%x: tensor<4x16xf32>, %wr: tensor<16x8xf32>, %w1: tensor<8x16x32xf32>, %w2: tensor<8x32x16xf32>, %s1: tensor<16x24xf32>, %s2: tensor<20x16xf32>) {
  // expected-error @+1 {{'moe.layer' op shared_w2 dimension 0 (Hs) is 20, but shared_w1 has Hs = 24}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) shared(%s1, %s2) {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>}
         : (tensor<4x16xf32>, tensor<16x8xf32>, tensor<8x16x32xf32>, tensor<8x32x16xf32>, tensor<16x24xf32>, tensor<20x16xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @shared_gated_width(%x: tensor<4x16xf32>, %wr: tensor<16x8xf32>, %w1: tensor<8x16x64xf32>, %w2: tensor<8x32x16xf32>, %s1: tensor<16x24xf32>, %s2: tensor<24x16xf32>) {
  // expected-error @+1 {{'moe.layer' op shared_w1 dimension 1 (2Hs) is 24, but the gated activation swiglu needs 2Hs = 48 (shared_w2 has Hs = 24)}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) shared(%s1, %s2) {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>}
         : (tensor<4x16xf32>, tensor<16x8xf32>, tensor<8x16x64xf32>, tensor<8x32x16xf32>, tensor<16x24xf32>, tensor<24x16xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @shared_gate_shape(%x: tensor<4x16xf32>, %wr: tensor<16x8xf32>, %w1: tensor<8x16x32xf32>, %w2: tensor<8x32x16xf32>, %s1: tensor<16x24xf32>, %s2: tensor<24x16xf32>, %sg: tensor<16x2xf32>) {
  // expected-error @+1 {{'moe.layer' op shared_gate dimension 1 (1) is 2, but the gate's layout [D, 1] has 1 = 1}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) shared(%s1, %s2) shared_gate(%sg) {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>}
         : (tensor<4x16xf32>, tensor<16x8xf32>, tensor<8x16x32xf32>, tensor<8x32x16xf32>, tensor<16x24xf32>, tensor<24x16xf32>, tensor<16x2xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @shared_type(%x: tensor<4x16xf32>, %wr: tensor<16x8xf32>, %w1: tensor<8x16x32xf32>, %w2: tensor<8x32x16xf32>, %s1: tensor<16x24xbf16>, %s2: tensor<24x16xbf16>) {
  // expected-error @+1 {{'moe.layer' op shared_w1 has element type 'bf16', but input has 'f32' (all floating-point operands of one op share one element type)}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) shared(%s1, %s2) {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>}
         : (tensor<4x16xf32>, tensor<16x8xf32>, tensor<8x16x32xf32>, tensor<8x32x16xf32>, tensor<16x24xbf16>, tensor<24x16xbf16>) -> tensor<4x16xf32>
  return
}

// -----

func.func @gate_bias_needs_top_k(%o: tensor<4x8xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{'moe.gate' op has a selection_bias, which only #moe.top_k routing uses (it shifts the scores that choose the experts)}}
  %w, %i = moe.gate %o selection_bias(%b) {routing = #moe.dense} : (tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xi32>)
  return
}

// -----

func.func @gate_bias_length(%o: tensor<4x8xf32>, %b: tensor<6xf32>) {
  // expected-error @+1 {{'moe.gate' op selection_bias dimension 0 (E) is 6, but logits has E = 8}}
  %w, %i = moe.gate %o selection_bias(%b) {routing = #moe.top_k<k = 2>} : (tensor<4x8xf32>, tensor<6xf32>) -> (tensor<4x2xf32>, tensor<4x2xi32>)
  return
}

// -----

func.func @shared_expert_output_type(%x: tensor<4x16xbf16>, %s1: tensor<16x24xbf16>, %s2: tensor<24x16xbf16>) {
  // expected-error @+1 {{'moe.shared_expert' op result #0 must be 2-D tensor [T, D] of f32, but got 'tensor<4x16xbf16>'}}
  %s = moe.shared_expert %x shared(%s1, %s2) {activation = #moe.activation<relu>}
         : (tensor<4x16xbf16>, tensor<16x24xbf16>, tensor<24x16xbf16>) -> tensor<4x16xbf16>
  return
}

// -----

func.func @shared_expert_output_shape(%x: tensor<4x16xf32>, %s1: tensor<16x24xf32>, %s2: tensor<24x16xf32>) {
  // expected-error @+1 {{'moe.shared_expert' op output dimension 0 (T) is 5, but input has T = 4}}
  %s = moe.shared_expert %x shared(%s1, %s2) {activation = #moe.activation<relu>}
         : (tensor<4x16xf32>, tensor<16x24xf32>, tensor<24x16xf32>) -> tensor<5x16xf32>
  return
}

// -----

func.func @combine_shared_type(%out: tensor<8x16xbf16>, %w: tensor<4x2xf32>, %pos: tensor<4x2xi32>, %s: tensor<4x16xbf16>) {
  // expected-error @+1 {{'moe.combine' op operand #3 must be 2-D tensor [T, D] of f32, but got 'tensor<4x16xbf16>'}}
  %y = moe.combine %out, %w, %pos shared_output(%s)
         : (tensor<8x16xbf16>, tensor<4x2xf32>, tensor<4x2xi32>, tensor<4x16xbf16>) -> tensor<4x16xbf16>
  return
}

// -----

func.func @fused_shared_shape(%x: tensor<4x16xf32>, %i: tensor<4x2xi32>, %w: tensor<4x2xf32>, %w1: tensor<8x16x32xf32>, %w2: tensor<8x32x16xf32>, %s: tensor<4x12xf32>) {
  // expected-error @+1 {{'moe.fused_experts' op shared_output dimension 1 (D) is 12, but output has D = 16}}
  %y = moe.fused_experts %x, %i, %w experts(%w1, %w2) shared_output(%s) {num_experts = 8 : i64, activation = #moe.activation<relu>}
         : (tensor<4x16xf32>, tensor<4x2xi32>, tensor<4x2xf32>, tensor<8x16x32xf32>, tensor<8x32x16xf32>, tensor<4x12xf32>) -> tensor<4x16xf32>
  return
}
