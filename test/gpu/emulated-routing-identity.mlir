// Routing is bit for bit the same on the CPU path and the GPU kernels
// (docs/spec.md §7): one definition of the routing exp/log (lowering/RoutingMath),
// the same f32 operations in the same order, the same Philox4x32-10. The GPU
// kernels run on the host under --moe-test-emulate-gpu; the chosen experts
// (i32) and the routing weights (their f32 bits, as i32) must be identical,
// for MOESART training (three seeds, one above 2^32, all three adjustments),
// MOESART inference, classic top-k and a DeepSeek-style production router.
// The test compares the printed outputs exactly (diff, addresses removed).
//
// RUN: moe-opt %s --moe-cpu-pipeline=parallel=false --emit-bytecode \
// RUN:   | moe-test-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_libs > %t.cpu
// RUN: moe-opt %s --pass-pipeline="%moe_emulate_gpu_pipeline" --emit-bytecode \
// RUN:   | moe-test-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_libs,%emulation_omp > %t.gpu
// RUN: sed -e 's/base@ = 0x[0-9a-f]*//' %t.cpu > %t.cpu.txt
// RUN: sed -e 's/base@ = 0x[0-9a-f]*//' %t.gpu > %t.gpu.txt
// RUN: diff %t.cpu.txt %t.gpu.txt
// RUN: FileCheck %s < %t.gpu
// Eight gates, each printing indices and weight bits.
// CHECK-COUNT-16: Unranked Memref base@ = {{.*}} rank = 2 offset = 0 sizes = [1024, {{[0-9]+}}]

func.func private @printMemrefI32(memref<*xi32>)

/// 1024 x 16 logits sin(l * 0.0913) * 3 + cos(l * 0.00771).
func.func @logits() -> tensor<1024x16xf32> {
  %t = tensor.generate {
  ^bb0(%i: index, %j: index):
    %c16 = arith.constant 16 : index
    %k = arith.muli %i, %c16 : index
    %l = arith.addi %k, %j : index
    %li = arith.index_cast %l : index to i64
    %f = arith.sitofp %li : i64 to f32
    %fa = arith.constant 0.0913 : f32
    %fb = arith.constant 0.00771 : f32
    %s = arith.constant 3.0 : f32
    %a = arith.mulf %f, %fa : f32
    %b = arith.mulf %f, %fb : f32
    %sa = math.sin %a : f32
    %cb = math.cos %b : f32
    %v = arith.mulf %sa, %s : f32
    %r = arith.addf %v, %cb : f32
    tensor.yield %r : f32
  } : tensor<1024x16xf32>
  return %t : tensor<1024x16xf32>
}

func.func @show(%w: tensor<1024x?xf32>, %i: tensor<1024x?xi32>) {
  %mi = bufferization.to_buffer %i : tensor<1024x?xi32> to memref<1024x?xi32>
  %ui = memref.cast %mi : memref<1024x?xi32> to memref<*xi32>
  func.call @printMemrefI32(%ui) : (memref<*xi32>) -> ()
  %bits = arith.bitcast %w : tensor<1024x?xf32> to tensor<1024x?xi32>
  %mw = bufferization.to_buffer %bits : tensor<1024x?xi32> to memref<1024x?xi32>
  %uw = memref.cast %mw : memref<1024x?xi32> to memref<*xi32>
  func.call @printMemrefI32(%uw) : (memref<*xi32>) -> ()
  return
}

func.func @train(%o: tensor<1024x16xf32>, %seed: tensor<i64>)
    -> (tensor<1024x2xf32>, tensor<1024x2xi32>, tensor<f32>) {
  %w, %i, %l = moe.gate %o seed(%seed) {routing = #moe.moesart<k = 2>, training}
      : (tensor<1024x16xf32>, tensor<i64>) -> (tensor<1024x2xf32>, tensor<1024x2xi32>, tensor<f32>)
  return %w, %i, %l : tensor<1024x2xf32>, tensor<1024x2xi32>, tensor<f32>
}

func.func @train_zero(%o: tensor<1024x16xf32>, %seed: tensor<i64>)
    -> (tensor<1024x3xf32>, tensor<1024x3xi32>, tensor<f32>) {
  %w, %i, %l = moe.gate %o seed(%seed) {routing = #moe.moesart<k = 3, adjust = zero>, training}
      : (tensor<1024x16xf32>, tensor<i64>) -> (tensor<1024x3xf32>, tensor<1024x3xi32>, tensor<f32>)
  return %w, %i, %l : tensor<1024x3xf32>, tensor<1024x3xi32>, tensor<f32>
}

func.func @train_large(%o: tensor<1024x16xf32>, %seed: tensor<i64>)
    -> (tensor<1024x4xf32>, tensor<1024x4xi32>, tensor<f32>) {
  %w, %i, %l = moe.gate %o seed(%seed) {routing = #moe.moesart<k = 4, adjust = large>, training}
      : (tensor<1024x16xf32>, tensor<i64>) -> (tensor<1024x4xf32>, tensor<1024x4xi32>, tensor<f32>)
  return %w, %i, %l : tensor<1024x4xf32>, tensor<1024x4xi32>, tensor<f32>
}

func.func @infer(%o: tensor<1024x16xf32>) -> (tensor<1024x2xf32>, tensor<1024x2xi32>) {
  %w, %i = moe.gate %o {routing = #moe.moesart<k = 2>}
      : (tensor<1024x16xf32>) -> (tensor<1024x2xf32>, tensor<1024x2xi32>)
  return %w, %i : tensor<1024x2xf32>, tensor<1024x2xi32>
}

func.func @topk(%o: tensor<1024x16xf32>) -> (tensor<1024x2xf32>, tensor<1024x2xi32>) {
  %w, %i = moe.gate %o {routing = #moe.top_k<k = 2>}
      : (tensor<1024x16xf32>) -> (tensor<1024x2xf32>, tensor<1024x2xi32>)
  return %w, %i : tensor<1024x2xf32>, tensor<1024x2xi32>
}

func.func @deepseek(%o: tensor<1024x16xf32>, %b: tensor<16xf32>) -> (tensor<1024x4xf32>, tensor<1024x4xi32>) {
  %w, %i = moe.gate %o selection_bias(%b)
      {routing = #moe.top_k<k = 4, score = sigmoid, scale = 2.5, groups = 4, group_k = 2>}
      : (tensor<1024x16xf32>, tensor<16xf32>) -> (tensor<1024x4xf32>, tensor<1024x4xi32>)
  return %w, %i : tensor<1024x4xf32>, tensor<1024x4xi32>
}

func.func @main() {
  %o = func.call @logits() : () -> tensor<1024x16xf32>
  %s1 = arith.constant dense<1> : tensor<i64>
  %s2 = arith.constant dense<77> : tensor<i64>
  %s3 = arith.constant dense<8589934597> : tensor<i64>
  %bias = arith.constant dense<[0.1, -0.2, 0.05, 0.0, 0.3, -0.1, 0.0, 0.2, -0.3, 0.1, 0.0, 0.05, 0.2, -0.05, 0.1, 0.0]> : tensor<16xf32>
  %w1, %i1, %l1 = func.call @train(%o, %s1) : (tensor<1024x16xf32>, tensor<i64>) -> (tensor<1024x2xf32>, tensor<1024x2xi32>, tensor<f32>)
  %w1c = tensor.cast %w1 : tensor<1024x2xf32> to tensor<1024x?xf32>
  %i1c = tensor.cast %i1 : tensor<1024x2xi32> to tensor<1024x?xi32>
  func.call @show(%w1c, %i1c) : (tensor<1024x?xf32>, tensor<1024x?xi32>) -> ()
  %w2, %i2, %l2 = func.call @train(%o, %s2) : (tensor<1024x16xf32>, tensor<i64>) -> (tensor<1024x2xf32>, tensor<1024x2xi32>, tensor<f32>)
  %w2c = tensor.cast %w2 : tensor<1024x2xf32> to tensor<1024x?xf32>
  %i2c = tensor.cast %i2 : tensor<1024x2xi32> to tensor<1024x?xi32>
  func.call @show(%w2c, %i2c) : (tensor<1024x?xf32>, tensor<1024x?xi32>) -> ()
  %w3, %i3, %l3 = func.call @train(%o, %s3) : (tensor<1024x16xf32>, tensor<i64>) -> (tensor<1024x2xf32>, tensor<1024x2xi32>, tensor<f32>)
  %w3c = tensor.cast %w3 : tensor<1024x2xf32> to tensor<1024x?xf32>
  %i3c = tensor.cast %i3 : tensor<1024x2xi32> to tensor<1024x?xi32>
  func.call @show(%w3c, %i3c) : (tensor<1024x?xf32>, tensor<1024x?xi32>) -> ()
  %w4, %i4, %l4 = func.call @train_zero(%o, %s3) : (tensor<1024x16xf32>, tensor<i64>) -> (tensor<1024x3xf32>, tensor<1024x3xi32>, tensor<f32>)
  %w4c = tensor.cast %w4 : tensor<1024x3xf32> to tensor<1024x?xf32>
  %i4c = tensor.cast %i4 : tensor<1024x3xi32> to tensor<1024x?xi32>
  func.call @show(%w4c, %i4c) : (tensor<1024x?xf32>, tensor<1024x?xi32>) -> ()
  %w5, %i5, %l5 = func.call @train_large(%o, %s2) : (tensor<1024x16xf32>, tensor<i64>) -> (tensor<1024x4xf32>, tensor<1024x4xi32>, tensor<f32>)
  %w5c = tensor.cast %w5 : tensor<1024x4xf32> to tensor<1024x?xf32>
  %i5c = tensor.cast %i5 : tensor<1024x4xi32> to tensor<1024x?xi32>
  func.call @show(%w5c, %i5c) : (tensor<1024x?xf32>, tensor<1024x?xi32>) -> ()
  %w6, %i6 = func.call @infer(%o) : (tensor<1024x16xf32>) -> (tensor<1024x2xf32>, tensor<1024x2xi32>)
  %w6c = tensor.cast %w6 : tensor<1024x2xf32> to tensor<1024x?xf32>
  %i6c = tensor.cast %i6 : tensor<1024x2xi32> to tensor<1024x?xi32>
  func.call @show(%w6c, %i6c) : (tensor<1024x?xf32>, tensor<1024x?xi32>) -> ()
  %w7, %i7 = func.call @topk(%o) : (tensor<1024x16xf32>) -> (tensor<1024x2xf32>, tensor<1024x2xi32>)
  %w7c = tensor.cast %w7 : tensor<1024x2xf32> to tensor<1024x?xf32>
  %i7c = tensor.cast %i7 : tensor<1024x2xi32> to tensor<1024x?xi32>
  func.call @show(%w7c, %i7c) : (tensor<1024x?xf32>, tensor<1024x?xi32>) -> ()
  %w8, %i8 = func.call @deepseek(%o, %bias) : (tensor<1024x16xf32>, tensor<16xf32>) -> (tensor<1024x4xf32>, tensor<1024x4xi32>)
  %w8c = tensor.cast %w8 : tensor<1024x4xf32> to tensor<1024x?xf32>
  %i8c = tensor.cast %i8 : tensor<1024x4xi32> to tensor<1024x?xi32>
  func.call @show(%w8c, %i8c) : (tensor<1024x?xf32>, tensor<1024x?xi32>) -> ()
  return
}
