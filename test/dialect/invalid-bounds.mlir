// RUN: moe-opt %s -split-input-file -verify-diagnostics
//
// Verifiers bound what the lowering can represent: capacities, row counts
// and expert ids are i32, byte sizes int64 (capacity_factor = 1.0e10 used to
// corrupt the heap on the CPU path, inf to segfault).

func.func @cf_huge(%x: tensor<8x16xf32>, %wr: tensor<16x4xf32>, %w1: tensor<4x16x32xf32>, %w2: tensor<4x32x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'moe.layer' op capacity_factor must be finite and <= 2^31 - 1 (the capacity is an i32), got 1.000000e+10}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>, capacity_factor = 1.0e10 : f64}
         : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

func.func @cf_inf(%x: tensor<8x16xf32>, %wr: tensor<16x4xf32>, %w1: tensor<4x16x32xf32>, %w2: tensor<4x32x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{capacity_factor must be finite and <= 2^31 - 1 (the capacity is an i32), got INF}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>, capacity_factor = 0x7FF0000000000000 : f64}
         : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

func.func @cf_capacity(%x: tensor<8x16xf32>, %wr: tensor<16x4xf32>, %w1: tensor<4x16x32xf32>, %w2: tensor<4x32x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{capacity_factor 1.000000e+09 gives a capacity ceil(cf * T * k / E) = 4.000000e+09 for T = 8 (input), above 2^31 - 1}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>, capacity_factor = 1.0e9 : f64}
         : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

func.func @dispatch_cf_nan(%x: tensor<?x16xf32>, %i: tensor<?x2xi32>) {
  // expected-error @+1 {{'moe.dispatch' op capacity_factor must be > 0, got nan}}
  %r:4 = moe.dispatch %x, %i {num_experts = 4 : i64, capacity_factor = 0x7FF8000000000000 : f64}
      : (tensor<?x16xf32>, tensor<?x2xi32>) -> (tensor<?x16xf32>, tensor<5xi32>, tensor<?xi32>, tensor<?x2xi32>)
  return
}

// -----

func.func @dispatch_rows(%x: tensor<1073741824x1xf32>, %i: tensor<1073741824x2xi32>) {
  // expected-error @+1 {{'moe.dispatch' op the number of rows T*K (input T, indices K) = 1073741824 * 2 exceeds 2147483647 (rows are indexed with i32)}}
  %r:4 = moe.dispatch %x, %i {num_experts = 4 : i64}
      : (tensor<1073741824x1xf32>, tensor<1073741824x2xi32>) -> (tensor<?x1xf32>, tensor<5xi32>, tensor<?xi32>, tensor<1073741824x2xi32>)
  return
}

// -----

func.func @bytes(%x: tensor<4611686018427387904x1xf32>, %wr: tensor<1x4xf32>, %w1: tensor<4x1x8xf32>, %w2: tensor<4x8x1xf32>) -> tensor<4611686018427387904x1xf32> {
  // expected-error @+1 {{'moe.layer' op input has type 'tensor<4611686018427387904x1xf32>', whose size in bytes overflows int64}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.dense, activation = #moe.activation<relu>}
         : (tensor<4611686018427387904x1xf32>, tensor<1x4xf32>, tensor<4x1x8xf32>, tensor<4x8x1xf32>) -> tensor<4611686018427387904x1xf32>
  return %y : tensor<4611686018427387904x1xf32>
}

// -----

func.func @zero_experts(%x: tensor<8x4xf32>, %wr: tensor<4x0xf32>, %w1: tensor<0x4x8xf32>, %w2: tensor<0x8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'moe.layer' op has E = 0 experts (router_weight dimension 1); a layer needs at least one}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.dense, activation = #moe.activation<relu>}
         : (tensor<8x4xf32>, tensor<4x0xf32>, tensor<0x4x8xf32>, tensor<0x8x4xf32>) -> tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

// expected-error @+1 {{#moe.top_k needs k <= 2^31 - 1 (expert ids are i32), got k = 4294967296}}
func.func private @k_huge() attributes {r = #moe.top_k<k = 4294967296>}
