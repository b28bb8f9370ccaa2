// The production routers and shared experts of docs/spec.md §3.1.1 on the GPU
// kernels, run on the host by --moe-test-emulate-gpu, compute what the CPU
// path computes: Qwen-style (softmax, normalize = false, shared expert with a
// sigmoid gate) and DeepSeek-style (sigmoid scores, selection bias, expert
// groups with group_k, scale 2.5, shared expert), through the layer directly,
// the decomposed chain (moe.gate with selection_bias, moe.shared_expert,
// moe.combine shared_output) and the fused chain (moe.fused_experts
// shared_output). A different expert choice would show as a large difference.
//
// RUN: moe-opt %s --moe-cpu-pipeline=parallel=false --emit-bytecode \
// RUN:   | moe-test-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_libs > %t.cpu
// RUN: moe-opt %s --pass-pipeline="%moe_emulate_gpu_pipeline" --emit-bytecode \
// RUN:   | moe-test-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_libs,%emulation_omp > %t.gpu
// RUN: %python %S/Inputs/compare-memrefs.py %t.cpu %t.gpu | FileCheck %s
// RUN: moe-opt %s --moe-decompose | FileCheck %s --check-prefix=CHAIN
// RUN: moe-opt %s --moe-decompose | moe-opt --pass-pipeline="%moe_emulate_gpu_pipeline" --emit-bytecode \
// RUN:   | moe-test-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_libs,%emulation_omp > %t.chain
// RUN: %python %S/Inputs/compare-memrefs.py %t.cpu %t.chain | FileCheck %s
// RUN: moe-opt %s --moe-decompose --moe-fuse | FileCheck %s --check-prefix=FUSED
// RUN: moe-opt %s --moe-decompose --moe-fuse | moe-opt --pass-pipeline="%moe_emulate_gpu_pipeline" --emit-bytecode \
// RUN:   | moe-test-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_libs,%emulation_omp > %t.fused
// RUN: %python %S/Inputs/compare-memrefs.py %t.cpu %t.fused | FileCheck %s
// CHECK: compare: OK, {{[0-9]+}} values
// The chains really carry the features (else the comparison proves little).
// CHAIN-LABEL: func.func @qwen_style(
// CHAIN: moe.gate {{.*}}normalize = false
// CHAIN: moe.shared_expert {{.*}} gate(
// CHAIN: moe.combine {{.*}}shared_output
// CHAIN-LABEL: func.func @deepseek_style(
// CHAIN: moe.gate {{.*}}selection_bias
// CHAIN: moe.shared_expert
// CHAIN: moe.combine {{.*}}shared_output
// CHAIN-LABEL: func.func @deepseek_style_swiglu(
// CHAIN: moe.gate {{.*}}selection_bias
// CHAIN: moe.shared_expert {{.*}} gate(
// CHAIN: moe.combine {{.*}}shared_output
// FUSED-COUNT-3: moe.fused_experts {{.*}}shared_output

func.func private @printMemrefF32(memref<*xf32>)

/// a x b values sin((i*b + j) * freq) * scale.
func.func @fill(%a: index, %b: index, %scale: f32, %freq: f32) -> tensor<?x?xf32> {
  %t = tensor.generate %a, %b {
  ^bb0(%i: index, %j: index):
    %k = arith.muli %i, %b : index
    %l = arith.addi %k, %j : index
    %li = arith.index_cast %l : index to i64
    %f = arith.sitofp %li : i64 to f32
    %g = arith.mulf %f, %freq : f32
    %v = math.sin %g : f32
    %r = arith.mulf %v, %scale : f32
    tensor.yield %r : f32
  } : tensor<?x?xf32>
  return %t : tensor<?x?xf32>
}

func.func @print2(%t: tensor<?x?xf32>) {
  %m = bufferization.to_buffer %t : tensor<?x?xf32> to memref<?x?xf32>
  %u = memref.cast %m : memref<?x?xf32> to memref<*xf32>
  func.call @printMemrefF32(%u) : (memref<*xf32>) -> ()
  return
}

func.func @print0(%t: tensor<f32>) {
  %m = bufferization.to_buffer %t : tensor<f32> to memref<f32>
  %u = memref.cast %m : memref<f32> to memref<*xf32>
  func.call @printMemrefF32(%u) : (memref<*xf32>) -> ()
  return
}

func.func @qwen_style(%x: tensor<100x32xf32>, %wr: tensor<32x8xf32>, %br: tensor<8xf32>, %w1: tensor<8x32x48xf32>, %w2: tensor<8x24x32xf32>, %s1: tensor<32x32xf32>, %s2: tensor<16x32xf32>, %sg: tensor<32x1xf32>) -> tensor<100x32xf32> {
  %y = moe.layer %x router(%wr, %br) experts(%w1, %w2) shared(%s1, %s2) shared_gate(%sg)
         {routing = #moe.top_k<k = 2, normalize = false>, activation = #moe.activation<swiglu>}
         : (tensor<100x32xf32>, tensor<32x8xf32>, tensor<8xf32>, tensor<8x32x48xf32>, tensor<8x24x32xf32>, tensor<32x32xf32>, tensor<16x32xf32>, tensor<32x1xf32>) -> tensor<100x32xf32>
  return %y : tensor<100x32xf32>
}

func.func @deepseek_style(%x: tensor<70x16xf32>, %wr: tensor<16x16xf32>, %sb: tensor<16xf32>, %w1: tensor<16x16x16xf32>, %w2: tensor<16x16x16xf32>, %s1: tensor<16x24xf32>, %s2: tensor<24x16xf32>) -> tensor<70x16xf32> {
  %y = moe.layer %x router(%wr) selection_bias(%sb) experts(%w1, %w2) shared(%s1, %s2)
         {routing = #moe.top_k<k = 3, score = sigmoid, groups = 4, group_k = 2, scale = 2.5>, activation = #moe.activation<silu>}
         : (tensor<70x16xf32>, tensor<16x16xf32>, tensor<16xf32>, tensor<16x16x16xf32>, tensor<16x16x16xf32>, tensor<16x24xf32>, tensor<24x16xf32>) -> tensor<70x16xf32>
  return %y : tensor<70x16xf32>
}

func.func @deepseek_style_swiglu(%x: tensor<45x16xf32>, %wr: tensor<16x8xf32>, %br: tensor<8xf32>, %sb: tensor<8xf32>, %w1: tensor<8x16x32xf32>, %w2: tensor<8x16x16xf32>, %s1: tensor<16x48xf32>, %s2: tensor<24x16xf32>, %sg: tensor<16x1xf32>) -> tensor<45x16xf32> {
  %y = moe.layer %x router(%wr, %br) selection_bias(%sb) experts(%w1, %w2) shared(%s1, %s2) shared_gate(%sg)
         {routing = #moe.top_k<k = 2, score = sigmoid, groups = 4, group_k = 1, scale = 2.5>, activation = #moe.activation<swiglu>}
         : (tensor<45x16xf32>, tensor<16x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8x16x32xf32>, tensor<8x16x16xf32>, tensor<16x48xf32>, tensor<24x16xf32>, tensor<16x1xf32>) -> tensor<45x16xf32>
  return %y : tensor<45x16xf32>
}

func.func @main() {
  %r1 = arith.constant 100 : index
  %c1 = arith.constant 32 : index
  %s1 = arith.constant 1.0 : f32
  %f1 = arith.constant 0.113 : f32
  %d1 = func.call @fill(%r1, %c1, %s1, %f1) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e1 = tensor.cast %d1 : tensor<?x?xf32> to tensor<100x32xf32>
  %r2 = arith.constant 32 : index
  %c2 = arith.constant 8 : index
  %s2 = arith.constant 1.0 : f32
  %f2 = arith.constant 0.0711 : f32
  %d2 = func.call @fill(%r2, %c2, %s2, %f2) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e2 = tensor.cast %d2 : tensor<?x?xf32> to tensor<32x8xf32>
  %r3 = arith.constant 1 : index
  %c3 = arith.constant 8 : index
  %s3 = arith.constant 0.2 : f32
  %f3 = arith.constant 0.291 : f32
  %d3 = func.call @fill(%r3, %c3, %s3, %f3) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e3 = tensor.cast %d3 : tensor<?x?xf32> to tensor<1x8xf32>
  %v3 = tensor.collapse_shape %e3 [[0, 1]] : tensor<1x8xf32> into tensor<8xf32>
  %r4 = arith.constant 256 : index
  %c4 = arith.constant 48 : index
  %s4 = arith.constant 0.3 : f32
  %f4 = arith.constant 0.0533 : f32
  %d4 = func.call @fill(%r4, %c4, %s4, %f4) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e4 = tensor.cast %d4 : tensor<?x?xf32> to tensor<256x48xf32>
  %v4 = tensor.expand_shape %e4 [[0, 1], [2]] output_shape [8, 32, 48] : tensor<256x48xf32> into tensor<8x32x48xf32>
  %r5 = arith.constant 192 : index
  %c5 = arith.constant 32 : index
  %s5 = arith.constant 0.3 : f32
  %f5 = arith.constant 0.41 : f32
  %d5 = func.call @fill(%r5, %c5, %s5, %f5) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e5 = tensor.cast %d5 : tensor<?x?xf32> to tensor<192x32xf32>
  %v5 = tensor.expand_shape %e5 [[0, 1], [2]] output_shape [8, 24, 32] : tensor<192x32xf32> into tensor<8x24x32xf32>
  %r6 = arith.constant 32 : index
  %c6 = arith.constant 32 : index
  %s6 = arith.constant 0.3 : f32
  %f6 = arith.constant 0.37 : f32
  %d6 = func.call @fill(%r6, %c6, %s6, %f6) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e6 = tensor.cast %d6 : tensor<?x?xf32> to tensor<32x32xf32>
  %r7 = arith.constant 16 : index
  %c7 = arith.constant 32 : index
  %s7 = arith.constant 0.3 : f32
  %f7 = arith.constant 0.219 : f32
  %d7 = func.call @fill(%r7, %c7, %s7, %f7) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e7 = tensor.cast %d7 : tensor<?x?xf32> to tensor<16x32xf32>
  %r8 = arith.constant 32 : index
  %c8 = arith.constant 1 : index
  %s8 = arith.constant 0.5 : f32
  %f8 = arith.constant 0.097 : f32
  %d8 = func.call @fill(%r8, %c8, %s8, %f8) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e8 = tensor.cast %d8 : tensor<?x?xf32> to tensor<32x1xf32>
  %y0 = func.call @qwen_style(%e1, %e2, %v3, %v4, %v5, %e6, %e7, %e8) : (tensor<100x32xf32>, tensor<32x8xf32>, tensor<8xf32>, tensor<8x32x48xf32>, tensor<8x24x32xf32>, tensor<32x32xf32>, tensor<16x32xf32>, tensor<32x1xf32>) -> tensor<100x32xf32>
  %yc0 = tensor.cast %y0 : tensor<100x32xf32> to tensor<?x?xf32>
  func.call @print2(%yc0) : (tensor<?x?xf32>) -> ()
  %r9 = arith.constant 70 : index
  %c9 = arith.constant 16 : index
  %s9 = arith.constant 1.0 : f32
  %f9 = arith.constant 0.0711 : f32
  %d9 = func.call @fill(%r9, %c9, %s9, %f9) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e9 = tensor.cast %d9 : tensor<?x?xf32> to tensor<70x16xf32>
  %r10 = arith.constant 16 : index
  %c10 = arith.constant 16 : index
  %s10 = arith.constant 1.0 : f32
  %f10 = arith.constant 1.913 : f32
  %d10 = func.call @fill(%r10, %c10, %s10, %f10) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e10 = tensor.cast %d10 : tensor<?x?xf32> to tensor<16x16xf32>
  %r11 = arith.constant 1 : index
  %c11 = arith.constant 16 : index
  %s11 = arith.constant 0.3 : f32
  %f11 = arith.constant 3.3 : f32
  %d11 = func.call @fill(%r11, %c11, %s11, %f11) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e11 = tensor.cast %d11 : tensor<?x?xf32> to tensor<1x16xf32>
  %v11 = tensor.collapse_shape %e11 [[0, 1]] : tensor<1x16xf32> into tensor<16xf32>
  %r12 = arith.constant 256 : index
  %c12 = arith.constant 16 : index
  %s12 = arith.constant 0.3 : f32
  %f12 = arith.constant 0.41 : f32
  %d12 = func.call @fill(%r12, %c12, %s12, %f12) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e12 = tensor.cast %d12 : tensor<?x?xf32> to tensor<256x16xf32>
  %v12 = tensor.expand_shape %e12 [[0, 1], [2]] output_shape [16, 16, 16] : tensor<256x16xf32> into tensor<16x16x16xf32>
  %r13 = arith.constant 256 : index
  %c13 = arith.constant 16 : index
  %s13 = arith.constant 0.3 : f32
  %f13 = arith.constant 0.37 : f32
  %d13 = func.call @fill(%r13, %c13, %s13, %f13) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e13 = tensor.cast %d13 : tensor<?x?xf32> to tensor<256x16xf32>
  %v13 = tensor.expand_shape %e13 [[0, 1], [2]] output_shape [16, 16, 16] : tensor<256x16xf32> into tensor<16x16x16xf32>
  %r14 = arith.constant 16 : index
  %c14 = arith.constant 24 : index
  %s14 = arith.constant 0.3 : f32
  %f14 = arith.constant 0.219 : f32
  %d14 = func.call @fill(%r14, %c14, %s14, %f14) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e14 = tensor.cast %d14 : tensor<?x?xf32> to tensor<16x24xf32>
  %r15 = arith.constant 24 : index
  %c15 = arith.constant 16 : index
  %s15 = arith.constant 0.3 : f32
  %f15 = arith.constant 0.097 : f32
  %d15 = func.call @fill(%r15, %c15, %s15, %f15) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e15 = tensor.cast %d15 : tensor<?x?xf32> to tensor<24x16xf32>
  %y1 = func.call @deepseek_style(%e9, %e10, %v11, %v12, %v13, %e14, %e15) : (tensor<70x16xf32>, tensor<16x16xf32>, tensor<16xf32>, tensor<16x16x16xf32>, tensor<16x16x16xf32>, tensor<16x24xf32>, tensor<24x16xf32>) -> tensor<70x16xf32>
  %yc1 = tensor.cast %y1 : tensor<70x16xf32> to tensor<?x?xf32>
  func.call @print2(%yc1) : (tensor<?x?xf32>) -> ()
  %r16 = arith.constant 45 : index
  %c16 = arith.constant 16 : index
  %s16 = arith.constant 1.0 : f32
  %f16 = arith.constant 0.291 : f32
  %d16 = func.call @fill(%r16, %c16, %s16, %f16) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e16 = tensor.cast %d16 : tensor<?x?xf32> to tensor<45x16xf32>
  %r17 = arith.constant 16 : index
  %c17 = arith.constant 8 : index
  %s17 = arith.constant 1.0 : f32
  %f17 = arith.constant 2.71 : f32
  %d17 = func.call @fill(%r17, %c17, %s17, %f17) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e17 = tensor.cast %d17 : tensor<?x?xf32> to tensor<16x8xf32>
  %r18 = arith.constant 1 : index
  %c18 = arith.constant 8 : index
  %s18 = arith.constant 0.2 : f32
  %f18 = arith.constant 0.0533 : f32
  %d18 = func.call @fill(%r18, %c18, %s18, %f18) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e18 = tensor.cast %d18 : tensor<?x?xf32> to tensor<1x8xf32>
  %v18 = tensor.collapse_shape %e18 [[0, 1]] : tensor<1x8xf32> into tensor<8xf32>
  %r19 = arith.constant 1 : index
  %c19 = arith.constant 8 : index
  %s19 = arith.constant 0.3 : f32
  %f19 = arith.constant 3.3 : f32
  %d19 = func.call @fill(%r19, %c19, %s19, %f19) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e19 = tensor.cast %d19 : tensor<?x?xf32> to tensor<1x8xf32>
  %v19 = tensor.collapse_shape %e19 [[0, 1]] : tensor<1x8xf32> into tensor<8xf32>
  %r20 = arith.constant 128 : index
  %c20 = arith.constant 32 : index
  %s20 = arith.constant 0.3 : f32
  %f20 = arith.constant 0.37 : f32
  %d20 = func.call @fill(%r20, %c20, %s20, %f20) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e20 = tensor.cast %d20 : tensor<?x?xf32> to tensor<128x32xf32>
  %v20 = tensor.expand_shape %e20 [[0, 1], [2]] output_shape [8, 16, 32] : tensor<128x32xf32> into tensor<8x16x32xf32>
  %r21 = arith.constant 128 : index
  %c21 = arith.constant 16 : index
  %s21 = arith.constant 0.3 : f32
  %f21 = arith.constant 0.219 : f32
  %d21 = func.call @fill(%r21, %c21, %s21, %f21) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e21 = tensor.cast %d21 : tensor<?x?xf32> to tensor<128x16xf32>
  %v21 = tensor.expand_shape %e21 [[0, 1], [2]] output_shape [8, 16, 16] : tensor<128x16xf32> into tensor<8x16x16xf32>
  %r22 = arith.constant 16 : index
  %c22 = arith.constant 48 : index
  %s22 = arith.constant 0.3 : f32
  %f22 = arith.constant 0.097 : f32
  %d22 = func.call @fill(%r22, %c22, %s22, %f22) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e22 = tensor.cast %d22 : tensor<?x?xf32> to tensor<16x48xf32>
  %r23 = arith.constant 24 : index
  %c23 = arith.constant 16 : index
  %s23 = arith.constant 0.3 : f32
  %f23 = arith.constant 0.113 : f32
  %d23 = func.call @fill(%r23, %c23, %s23, %f23) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e23 = tensor.cast %d23 : tensor<?x?xf32> to tensor<24x16xf32>
  %r24 = arith.constant 16 : index
  %c24 = arith.constant 1 : index
  %s24 = arith.constant 0.5 : f32
  %f24 = arith.constant 0.0711 : f32
  %d24 = func.call @fill(%r24, %c24, %s24, %f24) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e24 = tensor.cast %d24 : tensor<?x?xf32> to tensor<16x1xf32>
  %y2 = func.call @deepseek_style_swiglu(%e16, %e17, %v18, %v19, %v20, %v21, %e22, %e23, %e24) : (tensor<45x16xf32>, tensor<16x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8x16x32xf32>, tensor<8x16x16xf32>, tensor<16x48xf32>, tensor<24x16xf32>, tensor<16x1xf32>) -> tensor<45x16xf32>
  %yc2 = tensor.cast %y2 : tensor<45x16xf32> to tensor<?x?xf32>
  func.call @print2(%yc2) : (tensor<?x?xf32>) -> ()
  return
}
