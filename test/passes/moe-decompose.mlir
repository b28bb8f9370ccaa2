// RUN: moe-opt %s --moe-decompose -split-input-file -verify-diagnostics | FileCheck %s
// RUN: moe-opt %examples/top2_swiglu.mlir --moe-decompose | FileCheck %s --check-prefix=SWIGLU
// RUN: moe-opt %examples/soft.mlir --moe-decompose | FileCheck %s --check-prefix=SOFT
// RUN: moe-opt %examples/moesart_train.mlir --moe-decompose | FileCheck %s --check-prefix=TRAIN
// RUN: moe-opt %examples/block.mlir --moe-decompose | FileCheck %s --check-prefix=BLOCK
// RUN: moe-opt %examples/deepseek_style.mlir --moe-decompose | FileCheck %s --check-prefix=DEEPSEEK
// RUN: moe-opt %examples/qwen_style.mlir --moe-decompose | FileCheck %s --check-prefix=QWEN
//
// --moe-decompose rewrites layers into the chain of docs/spec.md §3.3.

// SWIGLU-LABEL: func.func @forward
// SWIGLU-NEXT: %[[O:.*]] = moe.route %arg0 router(%arg1) : (tensor<32x256xf32>, tensor<256x8xf32>) -> tensor<32x8xf32>
// SWIGLU-NEXT: %[[W:.*]], %[[I:.*]] = moe.gate %[[O]] {routing = #moe.top_k<k = 2>} : (tensor<32x8xf32>) -> (tensor<32x2xf32>, tensor<32x2xi32>)
// SWIGLU-NEXT: %[[R:.*]], %[[OFF:.*]], %{{.*}}, %[[P:.*]] = moe.dispatch %arg0, %[[I]] {num_experts = 8 : i64} : (tensor<32x256xf32>, tensor<32x2xi32>) -> (tensor<64x256xf32>, tensor<9xi32>, tensor<64xi32>, tensor<32x2xi32>)
// SWIGLU-NEXT: %[[F:.*]] = moe.expert_ffn %[[R]], %[[OFF]] experts(%arg2, %arg3) {activation = #moe.activation<swiglu>}
// SWIGLU-SAME: -> tensor<64x256xf32>
// SWIGLU-NEXT: %[[Y:.*]] = moe.combine %[[F]], %[[W]], %[[P]] : (tensor<64x256xf32>, tensor<32x2xf32>, tensor<32x2xi32>) -> tensor<32x256xf32>
// SWIGLU-NEXT: return %[[Y]]
// SWIGLU-NOT: moe.layer

// SOFT-LABEL: func.func @forward
// SOFT-NEXT: %[[R:.*]], %[[OFF:.*]], %[[CW:.*]] = moe.soft_dispatch %arg0 slots(%arg1) scale(%arg2) {normalize} : (tensor<4x64x128xf32>, tensor<128x8x2xf32>, tensor<f32>) -> (tensor<64x128xf32>, tensor<9xi32>, tensor<4x64x8x2xf32>)
// SOFT-NEXT: %[[F:.*]] = moe.expert_ffn %[[R]], %[[OFF]] experts(%arg3, %arg4) expert_biases(%arg5, %arg6) {activation = #moe.activation<gelu>}
// SOFT-NEXT: %[[Y:.*]] = moe.soft_combine %[[F]], %[[CW]] : (tensor<64x128xf32>, tensor<4x64x8x2xf32>) -> tensor<4x64x128xf32>
// SOFT-NEXT: return %[[Y]]

// The seed and training mode move to moe.gate, whose aux loss is returned.
// TRAIN-LABEL: func.func @train_forward
// TRAIN-NEXT: %[[O:.*]] = moe.route %arg0 router(%arg2, %arg3)
// TRAIN-NEXT: %[[W:.*]], %[[I:.*]], %[[L:.*]] = moe.gate %[[O]] seed(%arg1) {routing = #moe.moesart<k = 2>, training}
// TRAIN-SAME: -> (tensor<64x2xf32>, tensor<64x2xi32>, tensor<f32>)
// TRAIN-NEXT: %[[R:.*]], %[[OFF:.*]], %{{.*}}, %[[P:.*]] = moe.dispatch %arg0, %[[I]] {num_experts = 16 : i64}
// TRAIN-NEXT: %[[F:.*]] = moe.expert_ffn %[[R]], %[[OFF]] experts(%arg4, %arg5) expert_biases(%arg6, %arg7)
// TRAIN-NEXT: %[[Y:.*]] = moe.combine %[[F]], %[[W]], %[[P]]
// TRAIN-NEXT: return %[[Y]], %[[L]] : tensor<64x128xf32>, tensor<f32>

// Dense routing runs every expert: K = E = 4, T*K = 512 rows.
// BLOCK-COUNT-2: moe.dispatch %{{.*}} {num_experts = 4 : i64} : (tensor<128x64xf32>, tensor<128x4xi32>) -> (tensor<512x64xf32>, tensor<5xi32>, tensor<512xi32>, tensor<128x4xi32>)

// CHECK-LABEL: func.func @capacity
// CHECK: moe.dispatch %arg0, %{{.*}} {capacity_factor = 1.500000e+00 : f64, num_experts = 4 : i64}
func.func @capacity(%x: tensor<8x16xf32>, %wr: tensor<16x4xf32>, %w1: tensor<4x16x32xf32>, %w2: tensor<4x32x16xf32>) -> tensor<8x16xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.top_k<k = 1>, activation = #moe.activation<relu>, capacity_factor = 1.5 : f64}
         : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// Dynamic T and D are fine; the number of experts must be known.
// CHECK-LABEL: func.func @dynamic_tokens
// CHECK: moe.gate %{{.*}} {routing = #moe.top_k<k = 2>} : (tensor<?x4xf32>) -> (tensor<?x2xf32>, tensor<?x2xi32>)
// CHECK: moe.dispatch {{.*}} -> (tensor<?x?xf32>, tensor<5xi32>, tensor<?xi32>, tensor<?x2xi32>)
func.func @dynamic_tokens(%x: tensor<?x?xf32>, %wr: tensor<?x4xf32>, %w1: tensor<4x?x32xf32>, %w2: tensor<4x32x?xf32>) -> tensor<?x?xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>}
         : (tensor<?x?xf32>, tensor<?x4xf32>, tensor<4x?x32xf32>, tensor<4x32x?xf32>) -> tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}

// -----

// CHECK-LABEL: func.func @dynamic_experts
// CHECK-NEXT: %[[Y:.*]] = moe.layer %arg0 router(%arg1) experts(%arg2, %arg3)
// CHECK-NEXT: return %[[Y]]
func.func @dynamic_experts(%x: tensor<8x16xf32>, %wr: tensor<16x?xf32>, %w1: tensor<?x16x32xf32>, %w2: tensor<?x32x16xf32>) -> tensor<8x16xf32> {
  // expected-warning @+1 {{'moe.layer' not decomposed: the number of experts is dynamic, and the dispatch plan needs it}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>}
         : (tensor<8x16xf32>, tensor<16x?xf32>, tensor<?x16x32xf32>, tensor<?x32x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// docs/spec.md §3.1.1 carried through the chain: routing in f32 (bf16 data), the
// selection bias on the gate, the shared expert's f32 output joined in the
// combine.
// DEEPSEEK-LABEL: func.func @forward
// DEEPSEEK-NEXT: %[[O:.*]] = moe.route %arg0 router(%arg1) : (tensor<?x256xbf16>, tensor<256x32xbf16>) -> tensor<?x32xf32>
// DEEPSEEK-NEXT: %[[W:.*]], %[[I:.*]] = moe.gate %[[O]] selection_bias(%arg2) {routing = #moe.top_k<k = 4, score = sigmoid, scale = 2.500000e+00, groups = 4, group_k = 2>} : (tensor<?x32xf32>, tensor<32xf32>) -> (tensor<?x4xf32>, tensor<?x4xi32>)
// DEEPSEEK-NEXT: %[[R:.*]], %[[OFF:.*]], %{{.*}}, %[[POS:.*]] = moe.dispatch %arg0, %[[I]] {num_experts = 32 : i64}
// DEEPSEEK-NEXT: %[[F:.*]] = moe.expert_ffn %[[R]], %[[OFF]] experts(%arg3, %arg4) {activation = #moe.activation<swiglu>}
// DEEPSEEK-NEXT: %[[S:.*]] = moe.shared_expert %arg0 shared(%arg5, %arg6) {activation = #moe.activation<swiglu>} : (tensor<?x256xbf16>, tensor<256x512xbf16>, tensor<256x256xbf16>) -> tensor<?x256xf32>
// DEEPSEEK-NEXT: %[[Y:.*]] = moe.combine %[[F]], %[[W]], %[[POS]] shared_output(%[[S]]) : (tensor<?x256xbf16>, tensor<?x4xf32>, tensor<?x4xi32>, tensor<?x256xf32>) -> tensor<?x256xbf16>
// DEEPSEEK-NEXT: return %[[Y]]

// QWEN-LABEL: func.func @forward
// QWEN-NEXT: %[[O:.*]] = moe.route %arg0 router(%arg1)
// QWEN-NEXT: %[[W:.*]], %[[I:.*]] = moe.gate %[[O]] {routing = #moe.top_k<k = 4, normalize = false>}
// QWEN-NEXT: %[[R:.*]], %[[OFF:.*]], %{{.*}}, %[[P:.*]] = moe.dispatch %arg0, %[[I]] {num_experts = 16 : i64}
// QWEN-NEXT: %[[F:.*]] = moe.expert_ffn %[[R]], %[[OFF]] experts(%arg2, %arg3)
// QWEN-NEXT: %[[S:.*]] = moe.shared_expert %arg0 shared(%arg4, %arg5) gate(%arg6) {activation = #moe.activation<swiglu>}
// QWEN-SAME: -> tensor<48x128xf32>
// QWEN-NEXT: %[[Y:.*]] = moe.combine %[[F]], %[[W]], %[[P]] shared_output(%[[S]])
// QWEN-NEXT: return %[[Y]]
