// RUN: moe-opt %s -split-input-file -verify-diagnostics
//
// The ODS type constraints of the moe ops (dialect/MoETypeConstraints.td):
// one case per kind of operand or result; the relations between operands
// are the verifiers' (invalid.mlir, chain-invalid.mlir).

// Data is f32, f16 or bf16: not f64.
func.func @f64_weights(%x: tensor<8x16xf64>, %wr: tensor<16x4xf64>, %w1: tensor<4x16x32xf64>, %w2: tensor<4x32x16xf64>) {
  // expected-error @+1 {{'moe.layer' op operand #0 must be 2-D tensor [T, D] of f32, f16 or bf16, but got 'tensor<8x16xf64>'}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.dense, activation = #moe.activation<relu>}
         : (tensor<8x16xf64>, tensor<16x4xf64>, tensor<4x16x32xf64>, tensor<4x32x16xf64>) -> tensor<8x16xf64>
  return
}

// -----

// Router logits are data too.
func.func @integer_logits(%x: tensor<8x16xf32>, %wr: tensor<16x4xf32>) {
  // expected-error @+1 {{'moe.route' op result #0 must be 2-D tensor [T, E] of f32, f16 or bf16, but got 'tensor<8x4xi32>'}}
  %o = moe.route %x router(%wr) : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xi32>
  return
}

// -----

// The gate's seed is a scalar i64.
func.func @gate_seed(%o: tensor<8x4xf32>, %seed: tensor<1xi64>) {
  // expected-error @+1 {{'moe.gate' op operand #1 must be 0-D tensor (scalar) of i64, but got 'tensor<1xi64>'}}
  %w, %i, %l = moe.gate %o seed(%seed) {routing = #moe.moesart<k = 2, adjust = large>, training}
      : (tensor<8x4xf32>, tensor<1xi64>) -> (tensor<8x2xf32>, tensor<8x2xi32>, tensor<f32>)
  return
}

// -----

// The gate's aux loss is a scalar f32.
func.func @gate_aux_loss(%o: tensor<8x4xf32>, %seed: tensor<i64>) {
  // expected-error @+1 {{'moe.gate' op result #2 must be 0-D tensor (scalar) of f32, but got 'tensor<bf16>'}}
  %w, %i, %l = moe.gate %o seed(%seed) {routing = #moe.moesart<k = 2, adjust = large>, training}
      : (tensor<8x4xf32>, tensor<i64>) -> (tensor<8x2xf32>, tensor<8x2xi32>, tensor<bf16>)
  return
}

// -----

// Expert ids are i32.
func.func @dispatch_ids(%x: tensor<8x16xf32>, %i: tensor<8x2xi64>) {
  // expected-error @+1 {{'moe.dispatch' op operand #1 must be 2-D tensor [T, K] of i32, but got 'tensor<8x2xi64>'}}
  %rows, %off, %src, %pos = moe.dispatch %x, %i {num_experts = 4 : i64}
      : (tensor<8x16xf32>, tensor<8x2xi64>) -> (tensor<16x16xf32>, tensor<5xi32>, tensor<16xi32>, tensor<8x2xi32>)
  return
}

// -----

// source_rows is 1-D.
func.func @dispatch_source_rows(%x: tensor<8x16xf32>, %i: tensor<8x2xi32>) {
  // expected-error @+1 {{'moe.dispatch' op result #2 must be 1-D tensor [T*K] of i32, but got 'tensor<8x2xi32>'}}
  %rows, %off, %src, %pos = moe.dispatch %x, %i {num_experts = 4 : i64}
      : (tensor<8x16xf32>, tensor<8x2xi32>) -> (tensor<16x16xf32>, tensor<5xi32>, tensor<8x2xi32>, tensor<8x2xi32>)
  return
}

// -----

// Offsets are 1-D i32.
func.func @ffn_offsets(%rows: tensor<16x16xf32>, %off: tensor<5xi64>, %w1: tensor<4x16x32xf32>, %w2: tensor<4x32x16xf32>) {
  // expected-error @+1 {{'moe.expert_ffn' op operand #1 must be 1-D tensor [E+1] of i32, but got 'tensor<5xi64>'}}
  %out = moe.expert_ffn %rows, %off experts(%w1, %w2) {activation = #moe.activation<relu>}
      : (tensor<16x16xf32>, tensor<5xi64>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<16x16xf32>
  return
}

// -----

// Soft MoE combine weights are 4-D.
func.func @soft_combine_weights(%rows: tensor<16x16xf32>, %cw: tensor<2x4x8xf32>) {
  // expected-error @+1 {{'moe.soft_combine' op operand #1 must be 4-D tensor [G, M, E, S] of f32, f16 or bf16, but got 'tensor<2x4x8xf32>'}}
  %y = moe.soft_combine %rows, %cw : (tensor<16x16xf32>, tensor<2x4x8xf32>) -> tensor<2x4x16xf32>
  return
}

// -----

// Exchange counts are 2-D i32.
shard.grid @ranks(shape = 2)
func.func @exchange_counts(%rows: tensor<?x64xf32>, %off: tensor<9xi32>, %counts: tensor<2x8xi64>) {
  // expected-error @+1 {{'moe.exchange_dispatch' op operand #2 must be 2-D tensor [N, E] of i32, but got 'tensor<2x8xi64>'}}
  %r = moe.exchange_dispatch %rows, %off, %counts on @ranks
      : (tensor<?x64xf32>, tensor<9xi32>, tensor<2x8xi64>) -> tensor<?x64xf32>
  return
}

// -----

// Exchanged rows are 2-D.
shard.grid @ranks(shape = 2)
func.func @exchange_rows(%rows: tensor<64xf32>, %off: tensor<9xi32>, %counts: tensor<2x8xi32>) {
  // expected-error @+1 {{'moe.exchange_dispatch' op operand #0 must be 2-D tensor [R, D] of f32, f16 or bf16, but got 'tensor<64xf32>'}}
  %r = moe.exchange_dispatch %rows, %off, %counts on @ranks
      : (tensor<64xf32>, tensor<9xi32>, tensor<2x8xi32>) -> tensor<?x64xf32>
  return
}
