// RUN: moe-opt %s -split-input-file -verify-diagnostics
//
// Declared result types that contradict the inferred ones
// (InferTypeOpInterface) are rejected: the verifier names the result and the
// operand it follows from; a declared type may only refine a dynamic size
// (infer-types.mlir).

func.func @gate_k(%o: tensor<8x4xf32>) {
  // expected-error @+1 {{'moe.gate' op weights dimension 1 (K) is 3, but the routing has K = 2}}
  %w, %i = moe.gate %o {routing = #moe.top_k<k = 2>} : (tensor<8x4xf32>) -> (tensor<8x3xf32>, tensor<8x3xi32>)
  return
}

// -----

func.func @gate_weights_type(%o: tensor<8x4xf32>) {
  // expected-error @+1 {{'moe.gate' op weights has element type 'bf16', but logits has 'f32' (all floating-point operands of one op share one element type)}}
  %w, %i = moe.gate %o {routing = #moe.top_k<k = 2>} : (tensor<8x4xf32>) -> (tensor<8x2xbf16>, tensor<8x2xi32>)
  return
}

// -----

func.func @dispatch_offsets(%x: tensor<8x16xf32>, %i: tensor<8x2xi32>) {
  // expected-error @+1 {{'moe.dispatch' op offsets dimension 0 (E+1) is 4, but num_experts has E+1 = 5}}
  %rows, %off, %src, %pos = moe.dispatch %x, %i {num_experts = 4 : i64}
      : (tensor<8x16xf32>, tensor<8x2xi32>) -> (tensor<16x16xf32>, tensor<4xi32>, tensor<16xi32>, tensor<8x2xi32>)
  return
}

// -----

func.func @dispatch_rows_with_dynamic_ids(%x: tensor<8x16xf32>, %i: tensor<?x2xi32>) {
  // T = 8 comes from the input: rows are [16, D], not 24.
  // expected-error @+1 {{'moe.dispatch' op rows dimension 0 (T*K) is 24, but input and indices has T*K = 16}}
  %rows, %off, %src, %pos = moe.dispatch %x, %i {num_experts = 4 : i64}
      : (tensor<8x16xf32>, tensor<?x2xi32>) -> (tensor<24x16xf32>, tensor<5xi32>, tensor<?xi32>, tensor<?x2xi32>)
  return
}

// -----

func.func @layer_output_type(%x: tensor<8x16xbf16>, %wr: tensor<16x4xbf16>, %w1: tensor<4x16x32xbf16>, %w2: tensor<4x32x16xbf16>) {
  // expected-error @+1 {{'moe.layer' op output has element type 'f32', but input has 'bf16' (all floating-point operands of one op share one element type)}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.dense, activation = #moe.activation<relu>}
         : (tensor<8x16xbf16>, tensor<16x4xbf16>, tensor<4x16x32xbf16>, tensor<4x32x16xbf16>) -> tensor<8x16xf32>
  return
}

// -----

func.func @fused_output(%x: tensor<8x16xf32>, %i: tensor<8x2xi32>, %w: tensor<8x2xf32>, %w1: tensor<4x16x32xf32>, %w2: tensor<4x32x16xf32>) {
  // expected-error @+1 {{'moe.fused_experts' op output dimension 0 (T) is 4, but input has T = 8}}
  %y = moe.fused_experts %x, %i, %w experts(%w1, %w2) {num_experts = 4 : i64, activation = #moe.activation<relu>}
      : (tensor<8x16xf32>, tensor<8x2xi32>, tensor<8x2xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @soft_combine_output(%rows: tensor<16x16xf32>, %cw: tensor<2x4x4x2xf32>) {
  // expected-error @+1 {{'moe.soft_combine' op output dimension 1 (M) is 8, but combine_weights has M = 4}}
  %y = moe.soft_combine %rows, %cw : (tensor<16x16xf32>, tensor<2x4x4x2xf32>) -> tensor<2x8x16xf32>
  return
}
