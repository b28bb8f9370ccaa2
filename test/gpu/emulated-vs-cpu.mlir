// The GPU kernels, run on the host by --moe-test-emulate-gpu (one OpenMP
// thread per GPU thread, real barriers), compute what the CPU path computes:
// the layer directly, the unfused chain and the fused chain, for top-k,
// MOESART inference and training (same Philox selection, trimmed lasso,
// GShard capacity), dense and Soft MoE layers.
//
// RUN: moe-opt %s --moe-cpu-pipeline=parallel=false --emit-bytecode \
// RUN:   | moe-test-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_libs > %t.cpu
// RUN: moe-opt %s --pass-pipeline="%moe_emulate_gpu_pipeline" --emit-bytecode \
// RUN:   | moe-test-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_libs,%emulation_omp > %t.gpu
// RUN: %python %S/Inputs/compare-memrefs.py %t.cpu %t.gpu | FileCheck %s
// RUN: moe-opt %s --moe-decompose | moe-opt --pass-pipeline="%moe_emulate_gpu_pipeline" --emit-bytecode \
// RUN:   | moe-test-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_libs,%emulation_omp > %t.chain
// RUN: %python %S/Inputs/compare-memrefs.py %t.cpu %t.chain | FileCheck %s
// RUN: moe-opt %s --moe-decompose --moe-fuse | moe-opt --pass-pipeline="%moe_emulate_gpu_pipeline" --emit-bytecode \
// RUN:   | moe-test-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_libs,%emulation_omp > %t.fused
// RUN: %python %S/Inputs/compare-memrefs.py %t.cpu %t.fused | FileCheck %s
// CHECK: compare: OK, {{[0-9]+}} values
// The same bits with the blocks of every launch in reverse order and in two
// shuffles (moe-test-emulate-gpu's block-order; docs/gpu.md, "Block order in
// the emulation"): the inter-block protocols of the fused chain (align, the fused combine's arrivals) do
// not depend on the order a GPU runs the blocks in.
// RUN: for o in reverse "shuffle seed=1" "shuffle seed=2"; do \
// RUN:   MOE_EMULATE_OPTIONS="block-order=$o"; echo "== $o"; \
// RUN:   moe-opt %s --moe-decompose --moe-fuse | moe-opt --pass-pipeline="%moe_emulate_gpu_pipeline" --emit-bytecode \
// RUN:     | moe-test-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_libs,%emulation_omp > %t.order \
// RUN:     && %python %S/Inputs/compare-memrefs.py --atol 0 --rtol 0 %t.fused %t.order || exit 1; \
// RUN: done | FileCheck %s --check-prefix=ORDER
// ORDER-LABEL: == reverse
// ORDER-NEXT: compare: OK, {{[0-9]+}} values, max abs diff 0{{$}}
// ORDER-LABEL: == shuffle seed=1
// ORDER-NEXT: compare: OK, {{[0-9]+}} values, max abs diff 0{{$}}
// ORDER-LABEL: == shuffle seed=2
// ORDER-NEXT: compare: OK, {{[0-9]+}} values, max abs diff 0{{$}}

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

func.func @topk_swiglu(%x: tensor<40x32xf32>, %wr: tensor<32x8xf32>, %br: tensor<8xf32>, %w1: tensor<8x32x48xf32>, %w2: tensor<8x24x32xf32>, %b1: tensor<8x48xf32>, %b2: tensor<8x32xf32>) -> (tensor<40x32xf32>) {
  %y = moe.layer %x router(%wr, %br) experts(%w1, %w2) expert_biases(%b1, %b2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>}
         : (tensor<40x32xf32>, tensor<32x8xf32>, tensor<8xf32>, tensor<8x32x48xf32>, tensor<8x24x32xf32>, tensor<8x48xf32>, tensor<8x32xf32>) -> (tensor<40x32xf32>)
  return %y : tensor<40x32xf32>
}

func.func @moesart_train_small_random(%x: tensor<160x32xf32>, %wr: tensor<32x8xf32>, %br: tensor<8xf32>, %w1: tensor<8x32x16xf32>, %w2: tensor<8x16x32xf32>, %b1: tensor<8x16xf32>, %b2: tensor<8x32xf32>, %seed: tensor<i64>) -> (tensor<160x32xf32>, tensor<f32>) {
  %y, %loss = moe.layer %x router(%wr, %br) experts(%w1, %w2) expert_biases(%b1, %b2) seed(%seed)
         {routing = #moe.moesart<k = 2>, activation = #moe.activation<relu>, training, capacity_factor = 1.0 : f64}
         : (tensor<160x32xf32>, tensor<32x8xf32>, tensor<8xf32>, tensor<8x32x16xf32>, tensor<8x16x32xf32>, tensor<8x16xf32>, tensor<8x32xf32>, tensor<i64>) -> (tensor<160x32xf32>, tensor<f32>)
  return %y, %loss : tensor<160x32xf32>, tensor<f32>
}

func.func @moesart_train_large(%x: tensor<150x16xf32>, %wr: tensor<16x6xf32>, %w1: tensor<6x16x16xf32>, %w2: tensor<6x16x16xf32>, %seed: tensor<i64>) -> (tensor<150x16xf32>, tensor<f32>) {
  %y, %loss = moe.layer %x router(%wr) experts(%w1, %w2) seed(%seed)
         {routing = #moe.moesart<k = 3, adjust = large, trimmed_lasso = 1.0e-2>, activation = #moe.activation<gelu_tanh>, training}
         : (tensor<150x16xf32>, tensor<16x6xf32>, tensor<6x16x16xf32>, tensor<6x16x16xf32>, tensor<i64>) -> (tensor<150x16xf32>, tensor<f32>)
  return %y, %loss : tensor<150x16xf32>, tensor<f32>
}

func.func @moesart_train_zero(%x: tensor<70x16xf32>, %wr: tensor<16x5xf32>, %br: tensor<5xf32>, %w1: tensor<5x16x32xf32>, %w2: tensor<5x16x16xf32>, %seed: tensor<i64>) -> (tensor<70x16xf32>, tensor<f32>) {
  %y, %loss = moe.layer %x router(%wr, %br) experts(%w1, %w2) seed(%seed)
         {routing = #moe.moesart<k = 2, adjust = zero>, activation = #moe.activation<geglu>, training}
         : (tensor<70x16xf32>, tensor<16x5xf32>, tensor<5xf32>, tensor<5x16x32xf32>, tensor<5x16x16xf32>, tensor<i64>) -> (tensor<70x16xf32>, tensor<f32>)
  return %y, %loss : tensor<70x16xf32>, tensor<f32>
}

func.func @moesart_infer(%x: tensor<70x32xf32>, %wr: tensor<32x16xf32>, %br: tensor<16xf32>, %w1: tensor<16x32x16xf32>, %w2: tensor<16x16x32xf32>, %b1: tensor<16x16xf32>, %b2: tensor<16x32xf32>) -> (tensor<70x32xf32>) {
  %y = moe.layer %x router(%wr, %br) experts(%w1, %w2) expert_biases(%b1, %b2)
         {routing = #moe.moesart<k = 2>, activation = #moe.activation<silu>, capacity_factor = 0.5 : f64}
         : (tensor<70x32xf32>, tensor<32x16xf32>, tensor<16xf32>, tensor<16x32x16xf32>, tensor<16x16x32xf32>, tensor<16x16xf32>, tensor<16x32xf32>) -> (tensor<70x32xf32>)
  return %y : tensor<70x32xf32>
}

func.func @dense_gelu(%x: tensor<70x16xf32>, %wr: tensor<16x4xf32>, %w1: tensor<4x16x32xf32>, %w2: tensor<4x32x16xf32>, %b1: tensor<4x32xf32>, %b2: tensor<4x16xf32>) -> (tensor<70x16xf32>) {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_biases(%b1, %b2)
         {routing = #moe.dense, activation = #moe.activation<gelu>}
         : (tensor<70x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>, tensor<4x32xf32>, tensor<4x16xf32>) -> (tensor<70x16xf32>)
  return %y : tensor<70x16xf32>
}

func.func @soft(%x: tensor<2x24x32xf32>, %phi: tensor<32x4x2xf32>, %scale: tensor<f32>,
                %w1: tensor<4x32x40xf32>, %w2: tensor<4x40x32xf32>, %b1: tensor<4x40xf32>, %b2: tensor<4x32xf32>) -> tensor<2x24x32xf32> {
  %y = moe.soft_layer %x slots(%phi) scale(%scale) experts(%w1, %w2) expert_biases(%b1, %b2)
         {activation = #moe.activation<gelu>, normalize}
         : (tensor<2x24x32xf32>, tensor<32x4x2xf32>, tensor<f32>, tensor<4x32x40xf32>, tensor<4x40x32xf32>, tensor<4x40xf32>, tensor<4x32xf32>) -> tensor<2x24x32xf32>
  return %y : tensor<2x24x32xf32>
}

func.func @main() {
  %r1 = arith.constant 40 : index
  %c1 = arith.constant 32 : index
  %s1 = arith.constant 1.0 : f32
  %f1 = arith.constant 0.37 : f32
  %d1 = func.call @fill(%r1, %c1, %s1, %f1) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e1 = tensor.cast %d1 : tensor<?x?xf32> to tensor<40x32xf32>
  %r2 = arith.constant 32 : index
  %c2 = arith.constant 8 : index
  %s2 = arith.constant 1.0 : f32
  %f2 = arith.constant 0.113 : f32
  %d2 = func.call @fill(%r2, %c2, %s2, %f2) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e2 = tensor.cast %d2 : tensor<?x?xf32> to tensor<32x8xf32>
  %r3 = arith.constant 1 : index
  %c3 = arith.constant 8 : index
  %s3 = arith.constant 0.2 : f32
  %f3 = arith.constant 0.0711 : f32
  %d3 = func.call @fill(%r3, %c3, %s3, %f3) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e3 = tensor.cast %d3 : tensor<?x?xf32> to tensor<1x8xf32>
  %v3 = tensor.collapse_shape %e3 [[0, 1]] : tensor<1x8xf32> into tensor<8xf32>
  %r4 = arith.constant 256 : index
  %c4 = arith.constant 48 : index
  %s4 = arith.constant 0.3 : f32
  %f4 = arith.constant 0.291 : f32
  %d4 = func.call @fill(%r4, %c4, %s4, %f4) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e4 = tensor.cast %d4 : tensor<?x?xf32> to tensor<256x48xf32>
  %v4 = tensor.expand_shape %e4 [[0, 1], [2]] output_shape [8, 32, 48] : tensor<256x48xf32> into tensor<8x32x48xf32>
  %r5 = arith.constant 192 : index
  %c5 = arith.constant 32 : index
  %s5 = arith.constant 0.3 : f32
  %f5 = arith.constant 0.173 : f32
  %d5 = func.call @fill(%r5, %c5, %s5, %f5) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e5 = tensor.cast %d5 : tensor<?x?xf32> to tensor<192x32xf32>
  %v5 = tensor.expand_shape %e5 [[0, 1], [2]] output_shape [8, 24, 32] : tensor<192x32xf32> into tensor<8x24x32xf32>
  %r6 = arith.constant 8 : index
  %c6 = arith.constant 48 : index
  %s6 = arith.constant 0.2 : f32
  %f6 = arith.constant 0.0533 : f32
  %d6 = func.call @fill(%r6, %c6, %s6, %f6) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e6 = tensor.cast %d6 : tensor<?x?xf32> to tensor<8x48xf32>
  %r7 = arith.constant 8 : index
  %c7 = arith.constant 32 : index
  %s7 = arith.constant 0.2 : f32
  %f7 = arith.constant 0.41 : f32
  %d7 = func.call @fill(%r7, %c7, %s7, %f7) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e7 = tensor.cast %d7 : tensor<?x?xf32> to tensor<8x32xf32>
  %y8 = func.call @topk_swiglu(%e1, %e2, %v3, %v4, %v5, %e6, %e7) : (tensor<40x32xf32>, tensor<32x8xf32>, tensor<8xf32>, tensor<8x32x48xf32>, tensor<8x24x32xf32>, tensor<8x48xf32>, tensor<8x32xf32>) -> (tensor<40x32xf32>)
  %yc8 = tensor.cast %y8 : tensor<40x32xf32> to tensor<?x?xf32>
  func.call @print2(%yc8) : (tensor<?x?xf32>) -> ()
  %r9 = arith.constant 160 : index
  %c9 = arith.constant 32 : index
  %s9 = arith.constant 1.0 : f32
  %f9 = arith.constant 0.113 : f32
  %d9 = func.call @fill(%r9, %c9, %s9, %f9) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e9 = tensor.cast %d9 : tensor<?x?xf32> to tensor<160x32xf32>
  %r10 = arith.constant 32 : index
  %c10 = arith.constant 8 : index
  %s10 = arith.constant 1.0 : f32
  %f10 = arith.constant 0.0711 : f32
  %d10 = func.call @fill(%r10, %c10, %s10, %f10) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e10 = tensor.cast %d10 : tensor<?x?xf32> to tensor<32x8xf32>
  %r11 = arith.constant 1 : index
  %c11 = arith.constant 8 : index
  %s11 = arith.constant 0.2 : f32
  %f11 = arith.constant 0.291 : f32
  %d11 = func.call @fill(%r11, %c11, %s11, %f11) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e11 = tensor.cast %d11 : tensor<?x?xf32> to tensor<1x8xf32>
  %v11 = tensor.collapse_shape %e11 [[0, 1]] : tensor<1x8xf32> into tensor<8xf32>
  %r12 = arith.constant 256 : index
  %c12 = arith.constant 16 : index
  %s12 = arith.constant 0.3 : f32
  %f12 = arith.constant 0.173 : f32
  %d12 = func.call @fill(%r12, %c12, %s12, %f12) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e12 = tensor.cast %d12 : tensor<?x?xf32> to tensor<256x16xf32>
  %v12 = tensor.expand_shape %e12 [[0, 1], [2]] output_shape [8, 32, 16] : tensor<256x16xf32> into tensor<8x32x16xf32>
  %r13 = arith.constant 128 : index
  %c13 = arith.constant 32 : index
  %s13 = arith.constant 0.3 : f32
  %f13 = arith.constant 0.0533 : f32
  %d13 = func.call @fill(%r13, %c13, %s13, %f13) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e13 = tensor.cast %d13 : tensor<?x?xf32> to tensor<128x32xf32>
  %v13 = tensor.expand_shape %e13 [[0, 1], [2]] output_shape [8, 16, 32] : tensor<128x32xf32> into tensor<8x16x32xf32>
  %r14 = arith.constant 8 : index
  %c14 = arith.constant 16 : index
  %s14 = arith.constant 0.2 : f32
  %f14 = arith.constant 0.41 : f32
  %d14 = func.call @fill(%r14, %c14, %s14, %f14) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e14 = tensor.cast %d14 : tensor<?x?xf32> to tensor<8x16xf32>
  %r15 = arith.constant 8 : index
  %c15 = arith.constant 32 : index
  %s15 = arith.constant 0.2 : f32
  %f15 = arith.constant 0.37 : f32
  %d15 = func.call @fill(%r15, %c15, %s15, %f15) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e15 = tensor.cast %d15 : tensor<?x?xf32> to tensor<8x32xf32>
  %seed16 = arith.constant dense<12345678902> : tensor<i64>
  %y17, %l17 = func.call @moesart_train_small_random(%e9, %e10, %v11, %v12, %v13, %e14, %e15, %seed16) : (tensor<160x32xf32>, tensor<32x8xf32>, tensor<8xf32>, tensor<8x32x16xf32>, tensor<8x16x32xf32>, tensor<8x16xf32>, tensor<8x32xf32>, tensor<i64>) -> (tensor<160x32xf32>, tensor<f32>)
  %yc17 = tensor.cast %y17 : tensor<160x32xf32> to tensor<?x?xf32>
  func.call @print2(%yc17) : (tensor<?x?xf32>) -> ()
  func.call @print0(%l17) : (tensor<f32>) -> ()
  %r18 = arith.constant 150 : index
  %c18 = arith.constant 16 : index
  %s18 = arith.constant 1.0 : f32
  %f18 = arith.constant 0.0711 : f32
  %d18 = func.call @fill(%r18, %c18, %s18, %f18) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e18 = tensor.cast %d18 : tensor<?x?xf32> to tensor<150x16xf32>
  %r19 = arith.constant 16 : index
  %c19 = arith.constant 6 : index
  %s19 = arith.constant 1.0 : f32
  %f19 = arith.constant 0.291 : f32
  %d19 = func.call @fill(%r19, %c19, %s19, %f19) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e19 = tensor.cast %d19 : tensor<?x?xf32> to tensor<16x6xf32>
  %r20 = arith.constant 96 : index
  %c20 = arith.constant 16 : index
  %s20 = arith.constant 0.3 : f32
  %f20 = arith.constant 0.173 : f32
  %d20 = func.call @fill(%r20, %c20, %s20, %f20) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e20 = tensor.cast %d20 : tensor<?x?xf32> to tensor<96x16xf32>
  %v20 = tensor.expand_shape %e20 [[0, 1], [2]] output_shape [6, 16, 16] : tensor<96x16xf32> into tensor<6x16x16xf32>
  %r21 = arith.constant 96 : index
  %c21 = arith.constant 16 : index
  %s21 = arith.constant 0.3 : f32
  %f21 = arith.constant 0.0533 : f32
  %d21 = func.call @fill(%r21, %c21, %s21, %f21) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e21 = tensor.cast %d21 : tensor<?x?xf32> to tensor<96x16xf32>
  %v21 = tensor.expand_shape %e21 [[0, 1], [2]] output_shape [6, 16, 16] : tensor<96x16xf32> into tensor<6x16x16xf32>
  %seed22 = arith.constant dense<12345678903> : tensor<i64>
  %y23, %l23 = func.call @moesart_train_large(%e18, %e19, %v20, %v21, %seed22) : (tensor<150x16xf32>, tensor<16x6xf32>, tensor<6x16x16xf32>, tensor<6x16x16xf32>, tensor<i64>) -> (tensor<150x16xf32>, tensor<f32>)
  %yc23 = tensor.cast %y23 : tensor<150x16xf32> to tensor<?x?xf32>
  func.call @print2(%yc23) : (tensor<?x?xf32>) -> ()
  func.call @print0(%l23) : (tensor<f32>) -> ()
  %r24 = arith.constant 70 : index
  %c24 = arith.constant 16 : index
  %s24 = arith.constant 1.0 : f32
  %f24 = arith.constant 0.291 : f32
  %d24 = func.call @fill(%r24, %c24, %s24, %f24) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e24 = tensor.cast %d24 : tensor<?x?xf32> to tensor<70x16xf32>
  %r25 = arith.constant 16 : index
  %c25 = arith.constant 5 : index
  %s25 = arith.constant 1.0 : f32
  %f25 = arith.constant 0.173 : f32
  %d25 = func.call @fill(%r25, %c25, %s25, %f25) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e25 = tensor.cast %d25 : tensor<?x?xf32> to tensor<16x5xf32>
  %r26 = arith.constant 1 : index
  %c26 = arith.constant 5 : index
  %s26 = arith.constant 0.2 : f32
  %f26 = arith.constant 0.0533 : f32
  %d26 = func.call @fill(%r26, %c26, %s26, %f26) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e26 = tensor.cast %d26 : tensor<?x?xf32> to tensor<1x5xf32>
  %v26 = tensor.collapse_shape %e26 [[0, 1]] : tensor<1x5xf32> into tensor<5xf32>
  %r27 = arith.constant 80 : index
  %c27 = arith.constant 32 : index
  %s27 = arith.constant 0.3 : f32
  %f27 = arith.constant 0.41 : f32
  %d27 = func.call @fill(%r27, %c27, %s27, %f27) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e27 = tensor.cast %d27 : tensor<?x?xf32> to tensor<80x32xf32>
  %v27 = tensor.expand_shape %e27 [[0, 1], [2]] output_shape [5, 16, 32] : tensor<80x32xf32> into tensor<5x16x32xf32>
  %r28 = arith.constant 80 : index
  %c28 = arith.constant 16 : index
  %s28 = arith.constant 0.3 : f32
  %f28 = arith.constant 0.37 : f32
  %d28 = func.call @fill(%r28, %c28, %s28, %f28) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e28 = tensor.cast %d28 : tensor<?x?xf32> to tensor<80x16xf32>
  %v28 = tensor.expand_shape %e28 [[0, 1], [2]] output_shape [5, 16, 16] : tensor<80x16xf32> into tensor<5x16x16xf32>
  %seed29 = arith.constant dense<12345678904> : tensor<i64>
  %y30, %l30 = func.call @moesart_train_zero(%e24, %e25, %v26, %v27, %v28, %seed29) : (tensor<70x16xf32>, tensor<16x5xf32>, tensor<5xf32>, tensor<5x16x32xf32>, tensor<5x16x16xf32>, tensor<i64>) -> (tensor<70x16xf32>, tensor<f32>)
  %yc30 = tensor.cast %y30 : tensor<70x16xf32> to tensor<?x?xf32>
  func.call @print2(%yc30) : (tensor<?x?xf32>) -> ()
  func.call @print0(%l30) : (tensor<f32>) -> ()
  %r31 = arith.constant 70 : index
  %c31 = arith.constant 32 : index
  %s31 = arith.constant 1.0 : f32
  %f31 = arith.constant 0.173 : f32
  %d31 = func.call @fill(%r31, %c31, %s31, %f31) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e31 = tensor.cast %d31 : tensor<?x?xf32> to tensor<70x32xf32>
  %r32 = arith.constant 32 : index
  %c32 = arith.constant 16 : index
  %s32 = arith.constant 1.0 : f32
  %f32 = arith.constant 0.0533 : f32
  %d32 = func.call @fill(%r32, %c32, %s32, %f32) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e32 = tensor.cast %d32 : tensor<?x?xf32> to tensor<32x16xf32>
  %r33 = arith.constant 1 : index
  %c33 = arith.constant 16 : index
  %s33 = arith.constant 0.2 : f32
  %f33 = arith.constant 0.41 : f32
  %d33 = func.call @fill(%r33, %c33, %s33, %f33) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e33 = tensor.cast %d33 : tensor<?x?xf32> to tensor<1x16xf32>
  %v33 = tensor.collapse_shape %e33 [[0, 1]] : tensor<1x16xf32> into tensor<16xf32>
  %r34 = arith.constant 512 : index
  %c34 = arith.constant 16 : index
  %s34 = arith.constant 0.3 : f32
  %f34 = arith.constant 0.37 : f32
  %d34 = func.call @fill(%r34, %c34, %s34, %f34) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e34 = tensor.cast %d34 : tensor<?x?xf32> to tensor<512x16xf32>
  %v34 = tensor.expand_shape %e34 [[0, 1], [2]] output_shape [16, 32, 16] : tensor<512x16xf32> into tensor<16x32x16xf32>
  %r35 = arith.constant 256 : index
  %c35 = arith.constant 32 : index
  %s35 = arith.constant 0.3 : f32
  %f35 = arith.constant 0.113 : f32
  %d35 = func.call @fill(%r35, %c35, %s35, %f35) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e35 = tensor.cast %d35 : tensor<?x?xf32> to tensor<256x32xf32>
  %v35 = tensor.expand_shape %e35 [[0, 1], [2]] output_shape [16, 16, 32] : tensor<256x32xf32> into tensor<16x16x32xf32>
  %r36 = arith.constant 16 : index
  %c36 = arith.constant 16 : index
  %s36 = arith.constant 0.2 : f32
  %f36 = arith.constant 0.0711 : f32
  %d36 = func.call @fill(%r36, %c36, %s36, %f36) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e36 = tensor.cast %d36 : tensor<?x?xf32> to tensor<16x16xf32>
  %r37 = arith.constant 16 : index
  %c37 = arith.constant 32 : index
  %s37 = arith.constant 0.2 : f32
  %f37 = arith.constant 0.291 : f32
  %d37 = func.call @fill(%r37, %c37, %s37, %f37) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e37 = tensor.cast %d37 : tensor<?x?xf32> to tensor<16x32xf32>
  %y38 = func.call @moesart_infer(%e31, %e32, %v33, %v34, %v35, %e36, %e37) : (tensor<70x32xf32>, tensor<32x16xf32>, tensor<16xf32>, tensor<16x32x16xf32>, tensor<16x16x32xf32>, tensor<16x16xf32>, tensor<16x32xf32>) -> (tensor<70x32xf32>)
  %yc38 = tensor.cast %y38 : tensor<70x32xf32> to tensor<?x?xf32>
  func.call @print2(%yc38) : (tensor<?x?xf32>) -> ()
  %r39 = arith.constant 70 : index
  %c39 = arith.constant 16 : index
  %s39 = arith.constant 1.0 : f32
  %f39 = arith.constant 0.0533 : f32
  %d39 = func.call @fill(%r39, %c39, %s39, %f39) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e39 = tensor.cast %d39 : tensor<?x?xf32> to tensor<70x16xf32>
  %r40 = arith.constant 16 : index
  %c40 = arith.constant 4 : index
  %s40 = arith.constant 1.0 : f32
  %f40 = arith.constant 0.41 : f32
  %d40 = func.call @fill(%r40, %c40, %s40, %f40) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e40 = tensor.cast %d40 : tensor<?x?xf32> to tensor<16x4xf32>
  %r41 = arith.constant 64 : index
  %c41 = arith.constant 32 : index
  %s41 = arith.constant 0.3 : f32
  %f41 = arith.constant 0.37 : f32
  %d41 = func.call @fill(%r41, %c41, %s41, %f41) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e41 = tensor.cast %d41 : tensor<?x?xf32> to tensor<64x32xf32>
  %v41 = tensor.expand_shape %e41 [[0, 1], [2]] output_shape [4, 16, 32] : tensor<64x32xf32> into tensor<4x16x32xf32>
  %r42 = arith.constant 128 : index
  %c42 = arith.constant 16 : index
  %s42 = arith.constant 0.3 : f32
  %f42 = arith.constant 0.113 : f32
  %d42 = func.call @fill(%r42, %c42, %s42, %f42) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e42 = tensor.cast %d42 : tensor<?x?xf32> to tensor<128x16xf32>
  %v42 = tensor.expand_shape %e42 [[0, 1], [2]] output_shape [4, 32, 16] : tensor<128x16xf32> into tensor<4x32x16xf32>
  %r43 = arith.constant 4 : index
  %c43 = arith.constant 32 : index
  %s43 = arith.constant 0.2 : f32
  %f43 = arith.constant 0.0711 : f32
  %d43 = func.call @fill(%r43, %c43, %s43, %f43) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e43 = tensor.cast %d43 : tensor<?x?xf32> to tensor<4x32xf32>
  %r44 = arith.constant 4 : index
  %c44 = arith.constant 16 : index
  %s44 = arith.constant 0.2 : f32
  %f44 = arith.constant 0.291 : f32
  %d44 = func.call @fill(%r44, %c44, %s44, %f44) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e44 = tensor.cast %d44 : tensor<?x?xf32> to tensor<4x16xf32>
  %y45 = func.call @dense_gelu(%e39, %e40, %v41, %v42, %e43, %e44) : (tensor<70x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>, tensor<4x32xf32>, tensor<4x16xf32>) -> (tensor<70x16xf32>)
  %yc45 = tensor.cast %y45 : tensor<70x16xf32> to tensor<?x?xf32>
  func.call @print2(%yc45) : (tensor<?x?xf32>) -> ()
  %r46 = arith.constant 48 : index
  %c46 = arith.constant 32 : index
  %s46 = arith.constant 1.0 : f32
  %f46 = arith.constant 0.37 : f32
  %d46 = func.call @fill(%r46, %c46, %s46, %f46) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e46 = tensor.cast %d46 : tensor<?x?xf32> to tensor<48x32xf32>
  %v46 = tensor.expand_shape %e46 [[0, 1], [2]] output_shape [2, 24, 32] : tensor<48x32xf32> into tensor<2x24x32xf32>
  %pr47 = arith.constant 32 : index
  %pc47 = arith.constant 8 : index
  %ps47 = arith.constant 1.0 : f32
  %pf47 = arith.constant 0.113 : f32
  %pd47 = func.call @fill(%pr47, %pc47, %ps47, %pf47) : (index, index, f32, f32) -> tensor<?x?xf32>
  %pe47 = tensor.cast %pd47 : tensor<?x?xf32> to tensor<32x8xf32>
  %phi47 = tensor.expand_shape %pe47 [[0], [1, 2]] output_shape [32, 4, 2] : tensor<32x8xf32> into tensor<32x4x2xf32>
  %scale47 = arith.constant dense<1.5> : tensor<f32>
  %r48 = arith.constant 128 : index
  %c48 = arith.constant 40 : index
  %s48 = arith.constant 0.3 : f32
  %f48 = arith.constant 0.0711 : f32
  %d48 = func.call @fill(%r48, %c48, %s48, %f48) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e48 = tensor.cast %d48 : tensor<?x?xf32> to tensor<128x40xf32>
  %v48 = tensor.expand_shape %e48 [[0, 1], [2]] output_shape [4, 32, 40] : tensor<128x40xf32> into tensor<4x32x40xf32>
  %r49 = arith.constant 160 : index
  %c49 = arith.constant 32 : index
  %s49 = arith.constant 0.3 : f32
  %f49 = arith.constant 0.291 : f32
  %d49 = func.call @fill(%r49, %c49, %s49, %f49) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e49 = tensor.cast %d49 : tensor<?x?xf32> to tensor<160x32xf32>
  %v49 = tensor.expand_shape %e49 [[0, 1], [2]] output_shape [4, 40, 32] : tensor<160x32xf32> into tensor<4x40x32xf32>
  %r50 = arith.constant 4 : index
  %c50 = arith.constant 40 : index
  %s50 = arith.constant 0.2 : f32
  %f50 = arith.constant 0.173 : f32
  %d50 = func.call @fill(%r50, %c50, %s50, %f50) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e50 = tensor.cast %d50 : tensor<?x?xf32> to tensor<4x40xf32>
  %r51 = arith.constant 4 : index
  %c51 = arith.constant 32 : index
  %s51 = arith.constant 0.2 : f32
  %f51 = arith.constant 0.0533 : f32
  %d51 = func.call @fill(%r51, %c51, %s51, %f51) : (index, index, f32, f32) -> tensor<?x?xf32>
  %e51 = tensor.cast %d51 : tensor<?x?xf32> to tensor<4x32xf32>
  %ys52 = func.call @soft(%v46, %phi47, %scale47, %v48, %v49, %e50, %e51) : (tensor<2x24x32xf32>, tensor<32x4x2xf32>, tensor<f32>, tensor<4x32x40xf32>, tensor<4x40x32xf32>, tensor<4x40xf32>, tensor<4x32xf32>) -> tensor<2x24x32xf32>
  %ysc52 = tensor.collapse_shape %ys52 [[0, 1], [2]] : tensor<2x24x32xf32> into tensor<48x32xf32>
  %ysd52 = tensor.cast %ysc52 : tensor<48x32xf32> to tensor<?x?xf32>
  func.call @print2(%ysd52) : (tensor<?x?xf32>) -> ()
  return
}
