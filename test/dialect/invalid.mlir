// RUN: moe-opt %s -split-input-file -verify-diagnostics
//
// One case per verifier rule of moe.layer and moe.soft_layer; each expected
// message names the operand at fault.

// -----

func.func @input_rank(%x: tensor<2x8x64xf32>, %wr: tensor<64x4xf32>, %w1: tensor<4x64x32xf32>, %w2: tensor<4x32x64xf32>) {
  // expected-error @+1 {{'moe.layer' op operand #0 must be 2-D tensor [T, D] of f32, f16 or bf16, but got 'tensor<2x8x64xf32>'}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.dense, activation = #moe.activation<relu>}
         : (tensor<2x8x64xf32>, tensor<64x4xf32>, tensor<4x64x32xf32>, tensor<4x32x64xf32>) -> tensor<16x64xf32>
  return
}

// -----

func.func @input_element_type(%x: tensor<8x64xi32>, %wr: tensor<64x4xf32>, %w1: tensor<4x64x32xf32>, %w2: tensor<4x32x64xf32>) {
  // expected-error @+1 {{'moe.layer' op operand #0 must be 2-D tensor [T, D] of f32, f16 or bf16, but got 'tensor<8x64xi32>'}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.dense, activation = #moe.activation<relu>}
         : (tensor<8x64xi32>, tensor<64x4xf32>, tensor<4x64x32xf32>, tensor<4x32x64xf32>) -> tensor<8x64xf32>
  return
}

// -----

func.func @mixed_element_types(%x: tensor<8x64xf32>, %wr: tensor<64x4xf32>, %w1: tensor<4x64x32xbf16>, %w2: tensor<4x32x64xf32>) {
  // expected-error @+1 {{'moe.layer' op w1 has element type 'bf16', but input has 'f32' (all floating-point operands of one op share one element type)}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.dense, activation = #moe.activation<relu>}
         : (tensor<8x64xf32>, tensor<64x4xf32>, tensor<4x64x32xbf16>, tensor<4x32x64xf32>) -> tensor<8x64xf32>
  return
}

// -----

func.func @result_element_type(%x: tensor<8x64xf16>, %wr: tensor<64x4xf16>, %w1: tensor<4x64x32xf16>, %w2: tensor<4x32x64xf16>) {
  // expected-error @+1 {{'moe.layer' op output has element type 'f32', but input has 'f16'}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.dense, activation = #moe.activation<relu>}
         : (tensor<8x64xf16>, tensor<64x4xf16>, tensor<4x64x32xf16>, tensor<4x32x64xf16>) -> tensor<8x64xf32>
  return
}

// -----

func.func @router_rank(%x: tensor<8x64xf32>, %wr: tensor<64xf32>, %w1: tensor<4x64x32xf32>, %w2: tensor<4x32x64xf32>) {
  // expected-error @+1 {{'moe.layer' op operand #1 must be 2-D tensor [D, E] of f32, f16 or bf16, but got 'tensor<64xf32>'}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.dense, activation = #moe.activation<relu>}
         : (tensor<8x64xf32>, tensor<64xf32>, tensor<4x64x32xf32>, tensor<4x32x64xf32>) -> tensor<8x64xf32>
  return
}

// -----

func.func @router_model_dim(%x: tensor<8x64xf32>, %wr: tensor<32x4xf32>, %w1: tensor<4x64x32xf32>, %w2: tensor<4x32x64xf32>) {
  // expected-error @+1 {{'moe.layer' op router_weight dimension 0 (D) is 32, but input has D = 64}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.dense, activation = #moe.activation<relu>}
         : (tensor<8x64xf32>, tensor<32x4xf32>, tensor<4x64x32xf32>, tensor<4x32x64xf32>) -> tensor<8x64xf32>
  return
}

// -----

func.func @router_bias_length(%x: tensor<8x64xf32>, %wr: tensor<64x4xf32>, %br: tensor<5xf32>, %w1: tensor<4x64x32xf32>, %w2: tensor<4x32x64xf32>) {
  // expected-error @+1 {{'moe.layer' op router_bias dimension 0 (E) is 5, but router_weight has E = 4}}
  %y = moe.layer %x router(%wr, %br) experts(%w1, %w2) {routing = #moe.dense, activation = #moe.activation<relu>}
         : (tensor<8x64xf32>, tensor<64x4xf32>, tensor<5xf32>, tensor<4x64x32xf32>, tensor<4x32x64xf32>) -> tensor<8x64xf32>
  return
}

// -----

func.func @router_bias_rank(%x: tensor<8x64xf32>, %wr: tensor<64x4xf32>, %br: tensor<1x4xf32>, %w1: tensor<4x64x32xf32>, %w2: tensor<4x32x64xf32>) {
  // expected-error @+1 {{'moe.layer' op operand #2 must be 1-D tensor [E] of f32, f16 or bf16, but got 'tensor<1x4xf32>'}}
  %y = moe.layer %x router(%wr, %br) experts(%w1, %w2) {routing = #moe.dense, activation = #moe.activation<relu>}
         : (tensor<8x64xf32>, tensor<64x4xf32>, tensor<1x4xf32>, tensor<4x64x32xf32>, tensor<4x32x64xf32>) -> tensor<8x64xf32>
  return
}

// -----

func.func @w1_rank(%x: tensor<8x64xf32>, %wr: tensor<64x4xf32>, %w1: tensor<64x32xf32>, %w2: tensor<4x32x64xf32>) {
  // expected-error @+1 {{'moe.layer' op operand #2 must be 3-D tensor [E, D, H] (gated: [E, D, 2H]) of f32, f16, bf16, f8E4M3FN or i4, but got 'tensor<64x32xf32>'}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.dense, activation = #moe.activation<relu>}
         : (tensor<8x64xf32>, tensor<64x4xf32>, tensor<64x32xf32>, tensor<4x32x64xf32>) -> tensor<8x64xf32>
  return
}

// -----

func.func @w2_rank(%x: tensor<8x64xf32>, %wr: tensor<64x4xf32>, %w1: tensor<4x64x32xf32>, %w2: tensor<32x64xf32>) {
  // expected-error @+1 {{'moe.layer' op operand #3 must be 3-D tensor [E, H, D] of f32, f16, bf16, f8E4M3FN or i4, but got 'tensor<32x64xf32>'}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.dense, activation = #moe.activation<relu>}
         : (tensor<8x64xf32>, tensor<64x4xf32>, tensor<4x64x32xf32>, tensor<32x64xf32>) -> tensor<8x64xf32>
  return
}

// -----

func.func @w1_experts(%x: tensor<8x64xf32>, %wr: tensor<64x4xf32>, %w1: tensor<3x64x32xf32>, %w2: tensor<4x32x64xf32>) {
  // expected-error @+1 {{'moe.layer' op w1 dimension 0 (E) is 3, but router_weight has E = 4}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.dense, activation = #moe.activation<relu>}
         : (tensor<8x64xf32>, tensor<64x4xf32>, tensor<3x64x32xf32>, tensor<4x32x64xf32>) -> tensor<8x64xf32>
  return
}

// -----

func.func @w1_model_dim(%x: tensor<8x64xf32>, %wr: tensor<64x4xf32>, %w1: tensor<4x48x32xf32>, %w2: tensor<4x32x64xf32>) {
  // expected-error @+1 {{'moe.layer' op w1 dimension 1 (D) is 48, but input has D = 64}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.dense, activation = #moe.activation<relu>}
         : (tensor<8x64xf32>, tensor<64x4xf32>, tensor<4x48x32xf32>, tensor<4x32x64xf32>) -> tensor<8x64xf32>
  return
}

// -----

func.func @w2_experts(%x: tensor<8x64xf32>, %wr: tensor<64x4xf32>, %w1: tensor<4x64x32xf32>, %w2: tensor<2x32x64xf32>) {
  // expected-error @+1 {{'moe.layer' op w2 dimension 0 (E) is 2, but router_weight has E = 4}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.dense, activation = #moe.activation<relu>}
         : (tensor<8x64xf32>, tensor<64x4xf32>, tensor<4x64x32xf32>, tensor<2x32x64xf32>) -> tensor<8x64xf32>
  return
}

// -----

func.func @w2_model_dim(%x: tensor<8x64xf32>, %wr: tensor<64x4xf32>, %w1: tensor<4x64x32xf32>, %w2: tensor<4x32x60xf32>) {
  // expected-error @+1 {{'moe.layer' op w2 dimension 2 (D) is 60, but input has D = 64}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.dense, activation = #moe.activation<relu>}
         : (tensor<8x64xf32>, tensor<64x4xf32>, tensor<4x64x32xf32>, tensor<4x32x60xf32>) -> tensor<8x64xf32>
  return
}

// -----

func.func @hidden_width(%x: tensor<8x64xf32>, %wr: tensor<64x4xf32>, %w1: tensor<4x64x32xf32>, %w2: tensor<4x16x64xf32>) {
  // expected-error @+1 {{'moe.layer' op w2 dimension 1 (H) is 16, but w1 has H = 32}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.dense, activation = #moe.activation<relu>}
         : (tensor<8x64xf32>, tensor<64x4xf32>, tensor<4x64x32xf32>, tensor<4x16x64xf32>) -> tensor<8x64xf32>
  return
}

// -----

func.func @gated_width(%x: tensor<8x64xf32>, %wr: tensor<64x4xf32>, %w1: tensor<4x64x32xf32>, %w2: tensor<4x32x64xf32>) {
  // expected-error @+1 {{'moe.layer' op w1 dimension 2 (2H) is 32, but the gated activation swiglu needs 2H = 64 (w2 has H = 32)}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>}
         : (tensor<8x64xf32>, tensor<64x4xf32>, tensor<4x64x32xf32>, tensor<4x32x64xf32>) -> tensor<8x64xf32>
  return
}

// -----

func.func @gated_odd_width(%x: tensor<8x64xf32>, %wr: tensor<64x4xf32>, %w1: tensor<4x64x33xf32>, %w2: tensor<4x?x64xf32>) {
  // expected-error @+1 {{'moe.layer' op w1 dimension 2 (2H) is 33, but the gated activation geglu needs an even width holding the gate and up projections}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.top_k<k = 2>, activation = #moe.activation<geglu>}
         : (tensor<8x64xf32>, tensor<64x4xf32>, tensor<4x64x33xf32>, tensor<4x?x64xf32>) -> tensor<8x64xf32>
  return
}

// -----

func.func @b1_length(%x: tensor<8x64xf32>, %wr: tensor<64x4xf32>, %w1: tensor<4x64x32xf32>, %w2: tensor<4x32x64xf32>, %b1: tensor<4x64xf32>, %b2: tensor<4x64xf32>) {
  // expected-error @+1 {{'moe.layer' op b1 dimension 1 (H) is 64, but w1 has H = 32}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_biases(%b1, %b2) {routing = #moe.dense, activation = #moe.activation<relu>}
         : (tensor<8x64xf32>, tensor<64x4xf32>, tensor<4x64x32xf32>, tensor<4x32x64xf32>, tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<8x64xf32>
  return
}

// -----

func.func @b1_gated_length(%x: tensor<8x64xf32>, %wr: tensor<64x4xf32>, %w1: tensor<4x64x64xf32>, %w2: tensor<4x32x64xf32>, %b1: tensor<4x32xf32>, %b2: tensor<4x64xf32>) {
  // expected-error @+1 {{'moe.layer' op b1 dimension 1 (2H) is 32, but w1 has 2H = 64}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_biases(%b1, %b2) {routing = #moe.dense, activation = #moe.activation<swiglu>}
         : (tensor<8x64xf32>, tensor<64x4xf32>, tensor<4x64x64xf32>, tensor<4x32x64xf32>, tensor<4x32xf32>, tensor<4x64xf32>) -> tensor<8x64xf32>
  return
}

// -----

func.func @b1_experts(%x: tensor<8x64xf32>, %wr: tensor<64x4xf32>, %w1: tensor<4x64x32xf32>, %w2: tensor<4x32x64xf32>, %b1: tensor<8x32xf32>, %b2: tensor<4x64xf32>) {
  // expected-error @+1 {{'moe.layer' op b1 dimension 0 (E) is 8, but router_weight has E = 4}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_biases(%b1, %b2) {routing = #moe.dense, activation = #moe.activation<relu>}
         : (tensor<8x64xf32>, tensor<64x4xf32>, tensor<4x64x32xf32>, tensor<4x32x64xf32>, tensor<8x32xf32>, tensor<4x64xf32>) -> tensor<8x64xf32>
  return
}

// -----

func.func @b1_rank(%x: tensor<8x64xf32>, %wr: tensor<64x4xf32>, %w1: tensor<4x64x32xf32>, %w2: tensor<4x32x64xf32>, %b1: tensor<32xf32>, %b2: tensor<4x64xf32>) {
  // expected-error @+1 {{'moe.layer' op operand #4 must be 2-D tensor [E, H] (gated: [E, 2H]) of f32, f16 or bf16, but got 'tensor<32xf32>'}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_biases(%b1, %b2) {routing = #moe.dense, activation = #moe.activation<relu>}
         : (tensor<8x64xf32>, tensor<64x4xf32>, tensor<4x64x32xf32>, tensor<4x32x64xf32>, tensor<32xf32>, tensor<4x64xf32>) -> tensor<8x64xf32>
  return
}

// -----

func.func @b2_length(%x: tensor<8x64xf32>, %wr: tensor<64x4xf32>, %w1: tensor<4x64x32xf32>, %w2: tensor<4x32x64xf32>, %b1: tensor<4x32xf32>, %b2: tensor<4x32xf32>) {
  // expected-error @+1 {{'moe.layer' op b2 dimension 1 (D) is 32, but input has D = 64}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_biases(%b1, %b2) {routing = #moe.dense, activation = #moe.activation<relu>}
         : (tensor<8x64xf32>, tensor<64x4xf32>, tensor<4x64x32xf32>, tensor<4x32x64xf32>, tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<8x64xf32>
  return
}

// -----

func.func @b2_experts(%x: tensor<8x64xf32>, %wr: tensor<64x4xf32>, %w1: tensor<4x64x32xf32>, %w2: tensor<4x32x64xf32>, %b1: tensor<4x32xf32>, %b2: tensor<3x64xf32>) {
  // expected-error @+1 {{'moe.layer' op b2 dimension 0 (E) is 3, but router_weight has E = 4}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_biases(%b1, %b2) {routing = #moe.dense, activation = #moe.activation<relu>}
         : (tensor<8x64xf32>, tensor<64x4xf32>, tensor<4x64x32xf32>, tensor<4x32x64xf32>, tensor<4x32xf32>, tensor<3x64xf32>) -> tensor<8x64xf32>
  return
}

// -----

// The custom form cannot express a lone bias; the generic form can.
func.func @b1_without_b2(%x: tensor<8x64xf32>, %wr: tensor<64x4xf32>, %w1: tensor<4x64x32xf32>, %w2: tensor<4x32x64xf32>, %b1: tensor<4x32xf32>) {
  // expected-error @+1 {{'moe.layer' op has b1 without b2: expert biases come in pairs, expert_biases(b1, b2)}}
  %y = "moe.layer"(%x, %wr, %w1, %w2, %b1) <{activation = #moe.activation<relu>, routing = #moe.dense, operandSegmentSizes = array<i32: 1, 1, 0, 0, 1, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0>}>
         : (tensor<8x64xf32>, tensor<64x4xf32>, tensor<4x64x32xf32>, tensor<4x32x64xf32>, tensor<4x32xf32>) -> tensor<8x64xf32>
  return
}

// -----

func.func @b2_without_b1(%x: tensor<8x64xf32>, %wr: tensor<64x4xf32>, %w1: tensor<4x64x32xf32>, %w2: tensor<4x32x64xf32>, %b2: tensor<4x64xf32>) {
  // expected-error @+1 {{'moe.layer' op has b2 without b1: expert biases come in pairs, expert_biases(b1, b2)}}
  %y = "moe.layer"(%x, %wr, %w1, %w2, %b2) <{activation = #moe.activation<relu>, routing = #moe.dense, operandSegmentSizes = array<i32: 1, 1, 0, 0, 1, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0>}>
         : (tensor<8x64xf32>, tensor<64x4xf32>, tensor<4x64x32xf32>, tensor<4x32x64xf32>, tensor<4x64xf32>) -> tensor<8x64xf32>
  return
}

// -----

func.func @output_tokens(%x: tensor<8x64xf32>, %wr: tensor<64x4xf32>, %w1: tensor<4x64x32xf32>, %w2: tensor<4x32x64xf32>) {
  // expected-error @+1 {{'moe.layer' op output dimension 0 (T) is 16, but input has T = 8}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.dense, activation = #moe.activation<relu>}
         : (tensor<8x64xf32>, tensor<64x4xf32>, tensor<4x64x32xf32>, tensor<4x32x64xf32>) -> tensor<16x64xf32>
  return
}

// -----

func.func @output_model_dim(%x: tensor<8x64xf32>, %wr: tensor<64x4xf32>, %w1: tensor<4x64x32xf32>, %w2: tensor<4x32x64xf32>) {
  // expected-error @+1 {{'moe.layer' op output dimension 1 (D) is 32, but input has D = 64}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.dense, activation = #moe.activation<relu>}
         : (tensor<8x64xf32>, tensor<64x4xf32>, tensor<4x64x32xf32>, tensor<4x32x64xf32>) -> tensor<8x32xf32>
  return
}

// -----

func.func @output_rank(%x: tensor<8x64xf32>, %wr: tensor<64x4xf32>, %w1: tensor<4x64x32xf32>, %w2: tensor<4x32x64xf32>) {
  // expected-error @+1 {{'moe.layer' op result #0 must be 2-D tensor [T, D] of f32, f16 or bf16, but got 'tensor<8x64x1xf32>'}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.dense, activation = #moe.activation<relu>}
         : (tensor<8x64xf32>, tensor<64x4xf32>, tensor<4x64x32xf32>, tensor<4x32x64xf32>) -> tensor<8x64x1xf32>
  return
}

// -----

func.func @k_above_experts(%x: tensor<8x64xf32>, %wr: tensor<64x4xf32>, %w1: tensor<4x64x32xf32>, %w2: tensor<4x32x64xf32>) {
  // expected-error @+1 {{'moe.layer' op routing #moe.top_k selects k = 5 experts per token, but the layer has only E = 4 experts}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.top_k<k = 5>, activation = #moe.activation<relu>}
         : (tensor<8x64xf32>, tensor<64x4xf32>, tensor<4x64x32xf32>, tensor<4x32x64xf32>) -> tensor<8x64xf32>
  return
}

// -----

// E is only known from w1 here (router_weight is dynamic in E).
func.func @moesart_k_above_experts(%x: tensor<8x64xf32>, %wr: tensor<64x?xf32>, %w1: tensor<4x64x32xf32>, %w2: tensor<4x32x64xf32>) {
  // expected-error @+1 {{'moe.layer' op routing #moe.moesart selects k = 8 experts per token, but the layer has only E = 4 experts}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.moesart<k = 8>, activation = #moe.activation<relu>}
         : (tensor<8x64xf32>, tensor<64x?xf32>, tensor<4x64x32xf32>, tensor<4x32x64xf32>) -> tensor<8x64xf32>
  return
}

// -----

func.func @small_random_k1(%x: tensor<8x64xf32>, %seed: tensor<i64>, %wr: tensor<64x4xf32>, %w1: tensor<4x64x32xf32>, %w2: tensor<4x32x64xf32>) {
  // expected-error @+1 {{'moe.layer' op #moe.moesart with adjust = small_random needs k >= 2 in training mode (one sampled expert keeps its logit, the other k-1 are adjusted), got k = 1}}
  %y, %l = moe.layer %x router(%wr) experts(%w1, %w2) seed(%seed) {routing = #moe.moesart<k = 1>, activation = #moe.activation<relu>, training}
         : (tensor<8x64xf32>, tensor<64x4xf32>, tensor<4x64x32xf32>, tensor<4x32x64xf32>, tensor<i64>) -> (tensor<8x64xf32>, tensor<f32>)
  return
}

// -----

func.func @training_without_seed(%x: tensor<8x64xf32>, %wr: tensor<64x4xf32>, %w1: tensor<4x64x32xf32>, %w2: tensor<4x32x64xf32>) {
  // expected-error @+1 {{'moe.layer' op is in training mode and needs a 'seed' operand (tensor<i64>) keying its random stream}}
  %y, %l = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.moesart<k = 2>, activation = #moe.activation<relu>, training}
         : (tensor<8x64xf32>, tensor<64x4xf32>, tensor<4x64x32xf32>, tensor<4x32x64xf32>) -> (tensor<8x64xf32>, tensor<f32>)
  return
}

// -----

func.func @training_one_result(%x: tensor<8x64xf32>, %seed: tensor<i64>, %wr: tensor<64x4xf32>, %w1: tensor<4x64x32xf32>, %w2: tensor<4x32x64xf32>) {
  // expected-error @+1 {{'moe.layer' op is in training mode and returns two results (output, aux_loss), got 1}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) seed(%seed) {routing = #moe.moesart<k = 2>, activation = #moe.activation<relu>, training}
         : (tensor<8x64xf32>, tensor<64x4xf32>, tensor<4x64x32xf32>, tensor<4x32x64xf32>, tensor<i64>) -> tensor<8x64xf32>
  return
}

// -----

func.func @seed_without_training(%x: tensor<8x64xf32>, %seed: tensor<i64>, %wr: tensor<64x4xf32>, %w1: tensor<4x64x32xf32>, %w2: tensor<4x32x64xf32>) {
  // expected-error @+1 {{'moe.layer' op has a 'seed' operand but is not in training mode; add the 'training' attribute or drop the seed}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) seed(%seed) {routing = #moe.moesart<k = 2>, activation = #moe.activation<relu>}
         : (tensor<8x64xf32>, tensor<64x4xf32>, tensor<4x64x32xf32>, tensor<4x32x64xf32>, tensor<i64>) -> tensor<8x64xf32>
  return
}

// -----

func.func @inference_two_results(%x: tensor<8x64xf32>, %wr: tensor<64x4xf32>, %w1: tensor<4x64x32xf32>, %w2: tensor<4x32x64xf32>) {
  // expected-error @+1 {{'moe.layer' op is in inference mode and returns one result; the aux_loss result needs the 'training' attribute}}
  %y, %l = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.dense, activation = #moe.activation<relu>}
         : (tensor<8x64xf32>, tensor<64x4xf32>, tensor<4x64x32xf32>, tensor<4x32x64xf32>) -> (tensor<8x64xf32>, tensor<f32>)
  return
}

// -----

func.func @seed_type(%x: tensor<8x64xf32>, %seed: tensor<i32>, %wr: tensor<64x4xf32>, %w1: tensor<4x64x32xf32>, %w2: tensor<4x32x64xf32>) {
  // expected-error @+1 {{'moe.layer' op operand #4 must be 0-D tensor (scalar) of i64, but got 'tensor<i32>'}}
  %y, %l = moe.layer %x router(%wr) experts(%w1, %w2) seed(%seed) {routing = #moe.moesart<k = 2>, activation = #moe.activation<relu>, training}
         : (tensor<8x64xf32>, tensor<64x4xf32>, tensor<4x64x32xf32>, tensor<4x32x64xf32>, tensor<i32>) -> (tensor<8x64xf32>, tensor<f32>)
  return
}

// -----

func.func @aux_loss_type(%x: tensor<8x64xf32>, %seed: tensor<i64>, %wr: tensor<64x4xf32>, %w1: tensor<4x64x32xf32>, %w2: tensor<4x32x64xf32>) {
  // expected-error @+1 {{'moe.layer' op result #1 must be 0-D tensor (scalar) of f32, but got 'tensor<1xf32>'}}
  %y, %l = moe.layer %x router(%wr) experts(%w1, %w2) seed(%seed) {routing = #moe.moesart<k = 2>, activation = #moe.activation<relu>, training}
         : (tensor<8x64xf32>, tensor<64x4xf32>, tensor<4x64x32xf32>, tensor<4x32x64xf32>, tensor<i64>) -> (tensor<8x64xf32>, tensor<1xf32>)
  return
}

// -----

func.func @routing_not_a_routing(%x: tensor<8x64xf32>, %wr: tensor<64x4xf32>, %w1: tensor<4x64x32xf32>, %w2: tensor<4x32x64xf32>) {
  // expected-error @+1 {{'moe.layer' op attribute 'routing' failed to satisfy constraint: RoutingAttrInterface instance}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.activation<relu>, activation = #moe.activation<relu>}
         : (tensor<8x64xf32>, tensor<64x4xf32>, tensor<4x64x32xf32>, tensor<4x32x64xf32>) -> tensor<8x64xf32>
  return
}

// -----

func.func @unranked(%x: tensor<*xf32>, %wr: tensor<64x4xf32>, %w1: tensor<4x64x32xf32>, %w2: tensor<4x32x64xf32>) {
  // expected-error @+1 {{'moe.layer' op operand #0 must be 2-D tensor [T, D] of f32, f16 or bf16, but got 'tensor<*xf32>'}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.dense, activation = #moe.activation<relu>}
         : (tensor<*xf32>, tensor<64x4xf32>, tensor<4x64x32xf32>, tensor<4x32x64xf32>) -> tensor<8x64xf32>
  return
}

// -----

// Soft MoE layer rules.

func.func @soft_input_rank(%x: tensor<64x128xf32>, %phi: tensor<128x8x2xf32>, %w1: tensor<8x128x512xf32>, %w2: tensor<8x512x128xf32>) {
  // expected-error @+1 {{'moe.soft_layer' op operand #0 must be 3-D tensor [G, M, D] of f32, f16 or bf16, but got 'tensor<64x128xf32>'}}
  %y = moe.soft_layer %x slots(%phi) experts(%w1, %w2) {activation = #moe.activation<gelu>}
         : (tensor<64x128xf32>, tensor<128x8x2xf32>, tensor<8x128x512xf32>, tensor<8x512x128xf32>) -> tensor<64x128xf32>
  return
}

// -----

func.func @soft_slots_rank(%x: tensor<4x64x128xf32>, %phi: tensor<128x16xf32>, %w1: tensor<8x128x512xf32>, %w2: tensor<8x512x128xf32>) {
  // expected-error @+1 {{'moe.soft_layer' op operand #1 must be 3-D tensor [D, E, S] of f32, f16 or bf16, but got 'tensor<128x16xf32>'}}
  %y = moe.soft_layer %x slots(%phi) experts(%w1, %w2) {activation = #moe.activation<gelu>}
         : (tensor<4x64x128xf32>, tensor<128x16xf32>, tensor<8x128x512xf32>, tensor<8x512x128xf32>) -> tensor<4x64x128xf32>
  return
}

// -----

func.func @soft_slots_model_dim(%x: tensor<4x64x128xf32>, %phi: tensor<64x8x2xf32>, %w1: tensor<8x128x512xf32>, %w2: tensor<8x512x128xf32>) {
  // expected-error @+1 {{'moe.soft_layer' op slots dimension 0 (D) is 64, but input has D = 128}}
  %y = moe.soft_layer %x slots(%phi) experts(%w1, %w2) {activation = #moe.activation<gelu>}
         : (tensor<4x64x128xf32>, tensor<64x8x2xf32>, tensor<8x128x512xf32>, tensor<8x512x128xf32>) -> tensor<4x64x128xf32>
  return
}

// -----

func.func @soft_experts(%x: tensor<4x64x128xf32>, %phi: tensor<128x4x2xf32>, %w1: tensor<8x128x512xf32>, %w2: tensor<8x512x128xf32>) {
  // expected-error @+1 {{'moe.soft_layer' op w1 dimension 0 (E) is 8, but slots has E = 4}}
  %y = moe.soft_layer %x slots(%phi) experts(%w1, %w2) {activation = #moe.activation<gelu>}
         : (tensor<4x64x128xf32>, tensor<128x4x2xf32>, tensor<8x128x512xf32>, tensor<8x512x128xf32>) -> tensor<4x64x128xf32>
  return
}

// -----

func.func @soft_scale_rank(%x: tensor<4x64x128xf32>, %phi: tensor<128x8x2xf32>, %s: tensor<1xf32>, %w1: tensor<8x128x512xf32>, %w2: tensor<8x512x128xf32>) {
  // expected-error @+1 {{'moe.soft_layer' op operand #2 must be 0-D tensor (scalar) of f32, f16 or bf16, but got 'tensor<1xf32>'}}
  %y = moe.soft_layer %x slots(%phi) scale(%s) experts(%w1, %w2) {activation = #moe.activation<gelu>}
         : (tensor<4x64x128xf32>, tensor<128x8x2xf32>, tensor<1xf32>, tensor<8x128x512xf32>, tensor<8x512x128xf32>) -> tensor<4x64x128xf32>
  return
}

// -----

func.func @soft_scale_type(%x: tensor<4x64x128xbf16>, %phi: tensor<128x8x2xbf16>, %s: tensor<f32>, %w1: tensor<8x128x512xbf16>, %w2: tensor<8x512x128xbf16>) {
  // expected-error @+1 {{'moe.soft_layer' op scale has element type 'f32', but input has 'bf16'}}
  %y = moe.soft_layer %x slots(%phi) scale(%s) experts(%w1, %w2) {activation = #moe.activation<gelu>}
         : (tensor<4x64x128xbf16>, tensor<128x8x2xbf16>, tensor<f32>, tensor<8x128x512xbf16>, tensor<8x512x128xbf16>) -> tensor<4x64x128xbf16>
  return
}

// -----

func.func @soft_output_shape(%x: tensor<4x64x128xf32>, %phi: tensor<128x8x2xf32>, %w1: tensor<8x128x512xf32>, %w2: tensor<8x512x128xf32>) {
  // expected-error @+1 {{'moe.soft_layer' op output dimension 1 (M) is 32, but input has M = 64}}
  %y = moe.soft_layer %x slots(%phi) experts(%w1, %w2) {activation = #moe.activation<gelu>}
         : (tensor<4x64x128xf32>, tensor<128x8x2xf32>, tensor<8x128x512xf32>, tensor<8x512x128xf32>) -> tensor<4x32x128xf32>
  return
}

// -----

func.func @soft_gated(%x: tensor<4x64x128xf32>, %phi: tensor<128x8x2xf32>, %w1: tensor<8x128x512xf32>, %w2: tensor<8x512x128xf32>) {
  // expected-error @+1 {{'moe.soft_layer' op w1 dimension 2 (2H) is 512, but the gated activation swiglu needs 2H = 1024 (w2 has H = 512)}}
  %y = moe.soft_layer %x slots(%phi) experts(%w1, %w2) {activation = #moe.activation<swiglu>}
         : (tensor<4x64x128xf32>, tensor<128x8x2xf32>, tensor<8x128x512xf32>, tensor<8x512x128xf32>) -> tensor<4x64x128xf32>
  return
}
