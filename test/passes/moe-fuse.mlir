// RUN: moe-opt %s --moe-fuse -split-input-file -verify-diagnostics | FileCheck %s
// RUN: moe-opt %examples/top2_swiglu.mlir --moe-decompose --moe-fuse | FileCheck %s --check-prefix=SWIGLU
// RUN: moe-opt %examples/soft.mlir --moe-decompose --moe-fuse | FileCheck %s --check-prefix=SOFT
// RUN: moe-opt %examples/moesart_train.mlir --moe-decompose --moe-fuse | FileCheck %s --check-prefix=TRAIN
// RUN: moe-opt %examples/qwen_style.mlir --moe-decompose --moe-fuse | FileCheck %s --check-prefix=QWEN

// SWIGLU-LABEL: func.func @forward
// SWIGLU-NEXT: %[[O:.*]] = moe.route %arg0 router(%arg1)
// SWIGLU-NEXT: %[[W:.*]], %[[I:.*]] = moe.gate %[[O]]
// SWIGLU-NEXT: %[[Y:.*]] = moe.fused_experts %arg0, %[[I]], %[[W]] experts(%arg2, %arg3) {activation = #moe.activation<swiglu>, num_experts = 8 : i64}
// SWIGLU-SAME: : (tensor<32x256xf32>, tensor<32x2xi32>, tensor<32x2xf32>, tensor<8x256x1024xf32>, tensor<8x512x256xf32>) -> tensor<32x256xf32>
// SWIGLU-NEXT: return %[[Y]]
// SWIGLU-NOT: moe.dispatch
// SWIGLU-NOT: moe.expert_ffn
// SWIGLU-NOT: moe.combine

// SOFT-LABEL: func.func @forward
// SOFT-NEXT: %[[Y:.*]] = moe.fused_soft_experts %arg0 slots(%arg1) scale(%arg2) experts(%arg3, %arg4) expert_biases(%arg5, %arg6) {activation = #moe.activation<gelu>, normalize}
// SOFT-SAME: -> tensor<4x64x128xf32>
// SOFT-NEXT: return %[[Y]]
// SOFT-NOT: moe.soft_dispatch

// The aux loss of the gate stays; only the expert chain fuses.
// TRAIN-LABEL: func.func @train_forward
// TRAIN-NEXT: %[[O:.*]] = moe.route %arg0 router(%arg2, %arg3)
// TRAIN-NEXT: %[[W:.*]], %[[I:.*]], %[[L:.*]] = moe.gate %[[O]] seed(%arg1)
// TRAIN-NEXT: %[[Y:.*]] = moe.fused_experts %arg0, %[[I]], %[[W]] experts(%arg4, %arg5) expert_biases(%arg6, %arg7)
// TRAIN-NEXT: return %[[Y]], %[[L]]

// A capacity factor moves to the fused op.
// CHECK-LABEL: func.func @capacity
// CHECK-NEXT: %[[Y:.*]] = moe.fused_experts %arg0, %arg1, %arg2 experts(%arg3, %arg4) {activation = #moe.activation<relu>, capacity_factor = 1.250000e+00 : f64, num_experts = 4 : i64}
// CHECK-NEXT: return %[[Y]]
func.func @capacity(%x: tensor<8x16xf32>, %i: tensor<8x2xi32>, %w: tensor<8x2xf32>, %w1: tensor<4x16x32xf32>, %w2: tensor<4x32x16xf32>) -> tensor<8x16xf32> {
  %rows, %off, %src, %pos = moe.dispatch %x, %i {num_experts = 4 : i64, capacity_factor = 1.25 : f64}
      : (tensor<8x16xf32>, tensor<8x2xi32>) -> (tensor<16x16xf32>, tensor<5xi32>, tensor<16xi32>, tensor<8x2xi32>)
  %out = moe.expert_ffn %rows, %off experts(%w1, %w2) {activation = #moe.activation<relu>}
      : (tensor<16x16xf32>, tensor<5xi32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<16x16xf32>
  %y = moe.combine %out, %w, %pos : (tensor<16x16xf32>, tensor<8x2xf32>, tensor<8x2xi32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// The permuted rows are also returned: no fusion, and a remark says why.
// CHECK-LABEL: func.func @rows_escape
// CHECK: moe.dispatch
// CHECK: moe.combine
// CHECK-NOT: moe.fused_experts
func.func @rows_escape(%x: tensor<8x16xf32>, %i: tensor<8x2xi32>, %w: tensor<8x2xf32>, %w1: tensor<4x16x32xf32>, %w2: tensor<4x32x16xf32>) -> (tensor<8x16xf32>, tensor<16x16xf32>) {
  %rows, %off, %src, %pos = moe.dispatch %x, %i {num_experts = 4 : i64}
      : (tensor<8x16xf32>, tensor<8x2xi32>) -> (tensor<16x16xf32>, tensor<5xi32>, tensor<16xi32>, tensor<8x2xi32>)
  %out = moe.expert_ffn %rows, %off experts(%w1, %w2) {activation = #moe.activation<relu>}
      : (tensor<16x16xf32>, tensor<5xi32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<16x16xf32>
  // expected-remark @+1 {{chain not fused: the dispatched rows or offsets are also used outside the chain}}
  %y = moe.combine %out, %w, %pos : (tensor<16x16xf32>, tensor<8x2xf32>, tensor<8x2xi32>) -> tensor<8x16xf32>
  return %y, %rows : tensor<8x16xf32>, tensor<16x16xf32>
}

// -----

// Positions from another dispatch: mismatched plans.
// CHECK-LABEL: func.func @mismatched_plans
// CHECK-NOT: moe.fused_experts
func.func @mismatched_plans(%x: tensor<8x16xf32>, %i: tensor<8x2xi32>, %j: tensor<8x2xi32>, %w: tensor<8x2xf32>, %w1: tensor<4x16x32xf32>, %w2: tensor<4x32x16xf32>) -> tensor<8x16xf32> {
  %rows, %off, %src, %pos = moe.dispatch %x, %i {num_experts = 4 : i64}
      : (tensor<8x16xf32>, tensor<8x2xi32>) -> (tensor<16x16xf32>, tensor<5xi32>, tensor<16xi32>, tensor<8x2xi32>)
  %rows2, %off2, %src2, %pos2 = moe.dispatch %x, %j {num_experts = 4 : i64}
      : (tensor<8x16xf32>, tensor<8x2xi32>) -> (tensor<16x16xf32>, tensor<5xi32>, tensor<16xi32>, tensor<8x2xi32>)
  %out = moe.expert_ffn %rows, %off experts(%w1, %w2) {activation = #moe.activation<relu>}
      : (tensor<16x16xf32>, tensor<5xi32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<16x16xf32>
  // expected-remark @+1 {{chain not fused: moe.combine takes its positions from another op than the moe.dispatch of the chain (mismatched plans)}}
  %y = moe.combine %out, %w, %pos2 : (tensor<16x16xf32>, tensor<8x2xf32>, tensor<8x2xi32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// The expert outputs are used twice.
// CHECK-LABEL: func.func @outputs_escape
// CHECK-NOT: moe.fused_experts
func.func @outputs_escape(%x: tensor<8x16xf32>, %i: tensor<8x2xi32>, %w: tensor<8x2xf32>, %w1: tensor<4x16x32xf32>, %w2: tensor<4x32x16xf32>) -> (tensor<8x16xf32>, tensor<16x16xf32>) {
  %rows, %off, %src, %pos = moe.dispatch %x, %i {num_experts = 4 : i64}
      : (tensor<8x16xf32>, tensor<8x2xi32>) -> (tensor<16x16xf32>, tensor<5xi32>, tensor<16xi32>, tensor<8x2xi32>)
  %out = moe.expert_ffn %rows, %off experts(%w1, %w2) {activation = #moe.activation<relu>}
      : (tensor<16x16xf32>, tensor<5xi32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<16x16xf32>
  // expected-remark @+1 {{chain not fused: the expert outputs are also used outside the chain}}
  %y = moe.combine %out, %w, %pos : (tensor<16x16xf32>, tensor<8x2xf32>, tensor<8x2xi32>) -> tensor<8x16xf32>
  return %y, %out : tensor<8x16xf32>, tensor<16x16xf32>
}

// -----

// Soft chain whose combine weights escape.
// CHECK-LABEL: func.func @soft_escape
// CHECK: moe.soft_combine
// CHECK-NOT: moe.fused_soft_experts
func.func @soft_escape(%x: tensor<2x8x16xf32>, %phi: tensor<16x4x1xf32>, %w1: tensor<4x16x32xf32>, %w2: tensor<4x32x16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x4x1xf32>) {
  %rows, %off, %cw = moe.soft_dispatch %x slots(%phi) : (tensor<2x8x16xf32>, tensor<16x4x1xf32>) -> (tensor<8x16xf32>, tensor<5xi32>, tensor<2x8x4x1xf32>)
  %out = moe.expert_ffn %rows, %off experts(%w1, %w2) {activation = #moe.activation<relu>}
      : (tensor<8x16xf32>, tensor<5xi32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<8x16xf32>
  // expected-remark @+1 {{chain not fused: the combine weights are also used outside the chain}}
  %y = moe.soft_combine %out, %cw : (tensor<8x16xf32>, tensor<2x8x4x1xf32>) -> tensor<2x8x16xf32>
  return %y, %cw : tensor<2x8x16xf32>, tensor<2x8x4x1xf32>
}

// The shared expert stays its own op; its output joins the fused op.
// QWEN-LABEL: func.func @forward
// QWEN-NEXT: %[[O:.*]] = moe.route %arg0 router(%arg1)
// QWEN-NEXT: %[[W:.*]], %[[I:.*]] = moe.gate %[[O]]
// QWEN-NEXT: %[[S:.*]] = moe.shared_expert %arg0 shared(%arg4, %arg5) gate(%arg6)
// QWEN-NEXT: %[[Y:.*]] = moe.fused_experts %arg0, %[[I]], %[[W]] experts(%arg2, %arg3) shared_output(%[[S]]) {activation = #moe.activation<swiglu>, num_experts = 16 : i64}
// QWEN-NEXT: return %[[Y]]
