// RUN: moe-opt %s --convert-moe-to-linalg -split-input-file -verify-diagnostics | FileCheck %s
//
// Every spec example lowers to upstream dialects only, and the result
// verifies in the stock mlir-opt without the plugin.
// RUN: for f in block dense moesart moesart_train soft top2_swiglu; do \
// RUN:   moe-opt %examples/$f.mlir --convert-moe-to-linalg -o %t.$f.mlir && \
// RUN:   %stock_mlir_opt %t.$f.mlir -o /dev/null && \
// RUN:   not grep -qE 'moe\.(layer|soft_layer|route|gate|dispatch|expert_ffn|combine|soft_dispatch|soft_combine) ' %t.$f.mlir || exit 1; \
// RUN: done
// RUN: FileCheck %s --check-prefix=TRAIN < %t.moesart_train.mlir
// RUN: FileCheck %s --check-prefix=SOFT < %t.soft.mlir
// RUN: FileCheck %s --check-prefix=SWIGLU < %t.top2_swiglu.mlir

// MOESART training: Philox4x32-10 (multipliers 0xD2511F53, 0xCD9E8D57 as
// signed i32) on a counter derived from the token and draw, keyed by the seed.
// TRAIN: tensor.extract %arg1[] : tensor<i64>
// TRAIN: scf.for
// TRAIN-DAG: arith.constant -766435501 : i32
// TRAIN-DAG: arith.constant -845247145 : i32
// TRAIN: arith.mului_extended
// TRAIN: math.log
// The trimmed-lasso loss is lambda * mean over tokens.
// TRAIN: arith.constant 1.000000e-03 : f32
// TRAIN: tensor.from_elements

// Soft MoE: normalization (rsqrt), two softmaxes (exp), slot rows collapsed
// expert-major, and the grouped FFN over experts.
// SOFT: math.rsqrt
// SOFT: math.exp
// SOFT: tensor.collapse_shape {{.*}} {{\[}}[0, 1, 2], [3]] : tensor<8x4x2x128xf32> into tensor<64x128xf32>
// SOFT: scf.for
// SOFT: math.erf
// SOFT: tensor.expand_shape

// SwiGLU: the gate and up halves of x W1 are sliced apart.
// SWIGLU: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args
// SWIGLU: arith.divui
// SWIGLU: tensor.extract_slice
// SWIGLU: tensor.extract_slice

// -----

// CHECK-LABEL: func.func @route_matmul
// CHECK: linalg.generic {indexing_maps = [#{{.*}}, #{{.*}}, #{{.*}}], iterator_types = ["parallel", "reduction", "parallel"]}
// CHECK-SAME: ins(%arg0, %arg1 : tensor<8x16xf32>, tensor<16x4xf32>)
// CHECK-NOT: moe.
func.func @route_matmul(%x: tensor<8x16xf32>, %wr: tensor<16x4xf32>) -> tensor<8x4xf32> {
  %o = moe.route %x router(%wr) : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  return %o : tensor<8x4xf32>
}

// -----

// Top-k selection by rank (ties: lower index): OGT, or OEQ and a lower index.
// CHECK-LABEL: func.func @topk_gate
// CHECK: arith.cmpf ogt
// CHECK: arith.cmpf oeq
// CHECK: arith.cmpi ult
// CHECK-NOT: moe.gate
func.func @topk_gate(%o: tensor<8x4xf32>) -> (tensor<8x2xf32>, tensor<8x2xi32>) {
  %w, %i = moe.gate %o {routing = #moe.top_k<k = 2>} : (tensor<8x4xf32>) -> (tensor<8x2xf32>, tensor<8x2xi32>)
  return %w, %i : tensor<8x2xf32>, tensor<8x2xi32>
}

// -----

// GShard capacity: C = ceil(cf * T * K / E) in f64.
// CHECK-LABEL: func.func @capacity_dispatch
// CHECK: arith.constant 1.250000e+00 : f64
// CHECK: math.ceil
// CHECK: arith.fptosi
// CHECK: arith.minsi
func.func @capacity_dispatch(%x: tensor<8x16xf32>, %i: tensor<8x2xi32>) -> tensor<16x16xf32> {
  %r, %off, %src, %pos = moe.dispatch %x, %i {num_experts = 4 : i64, capacity_factor = 1.25 : f64}
      : (tensor<8x16xf32>, tensor<8x2xi32>) -> (tensor<16x16xf32>, tensor<5xi32>, tensor<16xi32>, tensor<8x2xi32>)
  return %r : tensor<16x16xf32>
}

// -----

func.func @f16_layer(%x: tensor<8x16xf16>, %wr: tensor<16x4xf16>, %w1: tensor<4x16x32xf16>, %w2: tensor<4x32x16xf16>) -> tensor<8x16xf16> {
  // expected-error @+1 {{cannot lower 'moe.layer' with element type 'f16': the CPU lowering supports f32 only for now}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>}
         : (tensor<8x16xf16>, tensor<16x4xf16>, tensor<4x16x32xf16>, tensor<4x32x16xf16>) -> tensor<8x16xf16>
  return %y : tensor<8x16xf16>
}

// -----

func.func @dynamic_experts(%x: tensor<8x16xf32>, %wr: tensor<16x?xf32>, %w1: tensor<?x16x32xf32>, %w2: tensor<?x32x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{failed to legalize operation 'moe.layer' that was explicitly marked illegal}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>}
         : (tensor<8x16xf32>, tensor<16x?xf32>, tensor<?x16x32xf32>, tensor<?x32x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}
