// RUN: moe-opt %s -split-input-file -verify-diagnostics
//
// #moe.cpu_config and the moe.cpu_config dialect attribute: one case per
// verifier rule.

func.func @vector_bits(%x: tensor<4x8xf32>, %wr: tensor<8x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{#moe.cpu_config needs vector_bits = 128, 256 or 512, got 384}}
  %o = moe.route %x router(%wr) {moe.cpu_config = #moe.cpu_config<vector_bits = 384, registers = 32, micro_rows = 6, micro_vectors = 4, row_block = 48, col_block = 384, prefetch_rows = 32, bf16_dot = false>} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  return %o : tensor<4x4xf32>
}

// -----

func.func @registers(%x: tensor<4x8xf32>, %wr: tensor<8x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{#moe.cpu_config needs registers = 16 or 32, got 8}}
  %o = moe.route %x router(%wr) {moe.cpu_config = #moe.cpu_config<vector_bits = 256, registers = 8, micro_rows = 2, micro_vectors = 2, row_block = 48, col_block = 256, prefetch_rows = 32, bf16_dot = false>} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  return %o : tensor<4x4xf32>
}

// -----

func.func @odd_vectors(%x: tensor<4x8xf32>, %wr: tensor<8x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{#moe.cpu_config needs micro_rows >= 1 and an even micro_vectors >= 2, got micro_rows = 4, micro_vectors = 3}}
  %o = moe.route %x router(%wr) {moe.cpu_config = #moe.cpu_config<vector_bits = 256, registers = 16, micro_rows = 4, micro_vectors = 3, row_block = 48, col_block = 240, prefetch_rows = 32, bf16_dot = false>} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  return %o : tensor<4x4xf32>
}

// -----

// The AVX-512 micro-tile does not fit the 16 registers of AVX2.
func.func @spills(%x: tensor<4x8xf32>, %wr: tensor<8x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{#moe.cpu_config: a 6 x 4 micro-tile needs 29 vector registers (24 accumulators, 4 right-operand vectors, 1 broadcast), but registers = 16}}
  %o = moe.route %x router(%wr) {moe.cpu_config = #moe.cpu_config<vector_bits = 256, registers = 16, micro_rows = 6, micro_vectors = 4, row_block = 48, col_block = 256, prefetch_rows = 32, bf16_dot = false>} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  return %o : tensor<4x4xf32>
}

// -----

func.func @row_block(%x: tensor<4x8xf32>, %wr: tensor<8x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{#moe.cpu_config needs row_block to be a positive multiple of micro_rows (6), got 40}}
  %o = moe.route %x router(%wr) {moe.cpu_config = #moe.cpu_config<vector_bits = 512, registers = 32, micro_rows = 6, micro_vectors = 4, row_block = 40, col_block = 256, prefetch_rows = 32, bf16_dot = false>} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  return %o : tensor<4x4xf32>
}

// -----

func.func @col_block(%x: tensor<4x8xf32>, %wr: tensor<8x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{#moe.cpu_config needs col_block to be a positive multiple of micro_vectors * vector_bits / 32 (64), got 96}}
  %o = moe.route %x router(%wr) {moe.cpu_config = #moe.cpu_config<vector_bits = 512, registers = 32, micro_rows = 6, micro_vectors = 4, row_block = 48, col_block = 96, prefetch_rows = 32, bf16_dot = false>} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  return %o : tensor<4x4xf32>
}

// -----

func.func @prefetch(%x: tensor<4x8xf32>, %wr: tensor<8x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{#moe.cpu_config needs prefetch_rows >= 0, got -1}}
  %o = moe.route %x router(%wr) {moe.cpu_config = #moe.cpu_config<vector_bits = 512, registers = 32, micro_rows = 6, micro_vectors = 4, row_block = 48, col_block = 256, prefetch_rows = -1, bf16_dot = false>} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  return %o : tensor<4x4xf32>
}

// -----

func.func @bf16_dot(%x: tensor<4x8xf32>, %wr: tensor<8x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{#moe.cpu_config: bf16_dot (AVX512_BF16) needs vector_bits = 512, got 256}}
  %o = moe.route %x router(%wr) {moe.cpu_config = #moe.cpu_config<vector_bits = 256, registers = 16, micro_rows = 6, micro_vectors = 2, row_block = 48, col_block = 256, prefetch_rows = 32, bf16_dot = true>} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  return %o : tensor<4x4xf32>
}

// -----

func.func @not_a_config(%x: tensor<4x8xf32>, %wr: tensor<8x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{'moe.cpu_config' must be a #moe.cpu_config, got "avx2"}}
  %o = moe.route %x router(%wr) {moe.cpu_config = "avx2"} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  return %o : tensor<4x4xf32>
}

// -----

func.func @not_a_gemm_op(%o: tensor<4x4xf32>) -> (tensor<4x2xf32>, tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.cpu_config' applies to the ops whose CPU lowering emits grouped GEMMs (moe.layer, moe.soft_layer, moe.route, moe.expert_ffn, moe.shared_expert, moe.fused_experts, moe.fused_soft_experts), not to 'moe.gate'}}
  %w, %i = moe.gate %o {routing = #moe.top_k<k = 2>, moe.cpu_config = #moe.cpu_config<vector_bits = 512, registers = 32, micro_rows = 6, micro_vectors = 4, row_block = 48, col_block = 256, prefetch_rows = 32, bf16_dot = false>} : (tensor<4x4xf32>) -> (tensor<4x2xf32>, tensor<4x2xi32>)
  return %w, %i : tensor<4x2xf32>, tensor<4x2xi32>
}

// -----

func.func @missing_parameter(%x: tensor<4x8xf32>, %wr: tensor<8x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{struct is missing required parameter: bf16_dot}}
  %o = moe.route %x router(%wr) {moe.cpu_config = #moe.cpu_config<vector_bits = 512, registers = 32, micro_rows = 6, micro_vectors = 4, row_block = 48, col_block = 256, prefetch_rows = 32>} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  return %o : tensor<4x4xf32>
}

// -----

func.func @amx_without_dot(%x: tensor<4x8xf32>, %wr: tensor<8x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{#moe.cpu_config: amx needs bf16_dot (the pairwise packed weights)}}
  %o = moe.route %x router(%wr) {moe.cpu_config = #moe.cpu_config<vector_bits = 512, registers = 32, micro_rows = 6, micro_vectors = 4, row_block = 48, col_block = 256, prefetch_rows = 32, bf16_dot = false, amx = true>} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  return %o : tensor<4x4xf32>
}

// -----

func.func @fp8_dot_without_dot(%x: tensor<4x8xf32>, %wr: tensor<8x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{#moe.cpu_config: fp8_dot needs bf16_dot (the FP8 codes become bf16 pairs for the dot product)}}
  %o = moe.route %x router(%wr) {moe.cpu_config = #moe.cpu_config<vector_bits = 512, registers = 32, micro_rows = 6, micro_vectors = 4, row_block = 48, col_block = 256, prefetch_rows = 32, bf16_dot = false, fp8_dot = true>} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  return %o : tensor<4x4xf32>
}

// -----

func.func @amx_row_block(%x: tensor<4x8xf32>, %wr: tensor<8x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{#moe.cpu_config: amx needs row_block to be a multiple of 16 (the rows of a tile), got 42}}
  %o = moe.route %x router(%wr) {moe.cpu_config = #moe.cpu_config<vector_bits = 512, registers = 32, micro_rows = 6, micro_vectors = 4, row_block = 42, col_block = 256, prefetch_rows = 32, bf16_dot = true, amx = true>} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  return %o : tensor<4x4xf32>
}

// -----

func.func @int8_dot_128(%x: tensor<4x8xf32>, %wr: tensor<8x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{#moe.cpu_config: int8_dot = vpdpbusd needs vector_bits = 512 (AVX512_VNNI) or 256 (AVX-VNNI), got 128}}
  %o = moe.route %x router(%wr) {moe.cpu_config = #moe.cpu_config<vector_bits = 128, registers = 16, micro_rows = 6, micro_vectors = 2, row_block = 48, col_block = 256, prefetch_rows = 32, bf16_dot = false, int8_dot = vpdpbusd>} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  return %o : tensor<4x4xf32>
}

// -----

func.func @int8_dot_pmaddubsw_512(%x: tensor<4x8xf32>, %wr: tensor<8x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{#moe.cpu_config: int8_dot = vpmaddubsw needs vector_bits = 256 (AVX2), got 512}}
  %o = moe.route %x router(%wr) {moe.cpu_config = #moe.cpu_config<vector_bits = 512, registers = 32, micro_rows = 6, micro_vectors = 4, row_block = 48, col_block = 256, prefetch_rows = 32, bf16_dot = false, int8_dot = vpmaddubsw>} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  return %o : tensor<4x4xf32>
}

// -----

func.func @int8_dot_unknown(%x: tensor<4x8xf32>, %wr: tensor<8x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+2 {{expected one of [none, vpdpbusd, vpmaddubsw] for the integer dot product of the CPU's int8-activation GEMMs, got: true}}
  // expected-error @+1 {{failed to parse MoE_CpuConfigAttr parameter 'int8_dot'}}
  %o = moe.route %x router(%wr) {moe.cpu_config = #moe.cpu_config<vector_bits = 256, registers = 16, micro_rows = 6, micro_vectors = 2, row_block = 48, col_block = 256, prefetch_rows = 32, bf16_dot = false, int8_dot = true>} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  return %o : tensor<4x4xf32>
}
