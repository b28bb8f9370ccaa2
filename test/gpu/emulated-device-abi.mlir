// device-abi (--convert-moe-to-gpu="device-abi=true" + --moe-gpu-device-abi,
// the ABI of moe-compile --target=cuda): the kernels read the arguments in
// place and write the results into the caller's out-parameters. Run on the
// host by --moe-test-emulate-gpu (device memory is host memory there), the
// results equal the CPU path's: a static top-k layer, MOESART training (the
// seed is copied back to the host for the key, the loss is a result), a
// dynamic token count reached through tensor.cast views (and an argument
// returned as is), and a Soft MoE layer whose scale is read on the host.
// Also through the unfused chain, whose ops pass device tensors to each other.
//
// RUN: moe-opt %s --moe-cpu-pipeline=parallel=false --emit-bytecode \
// RUN:   | moe-test-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_libs > %t.cpu
// RUN: moe-opt %s --pass-pipeline="%moe_emulate_gpu_device_abi_pipeline" --emit-bytecode \
// RUN:   | moe-test-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_libs,%emulation_omp > %t.gpu
// RUN: %python %S/Inputs/compare-memrefs.py %t.cpu %t.gpu | FileCheck %s
// RUN: moe-opt %s --moe-decompose | moe-opt --pass-pipeline="%moe_emulate_gpu_device_abi_pipeline" --emit-bytecode \
// RUN:   | moe-test-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_libs,%emulation_omp > %t.chain
// RUN: %python %S/Inputs/compare-memrefs.py %t.cpu %t.chain | FileCheck %s
// CHECK: compare: OK, {{[0-9]+}} values

func.func private @printMemrefF32(memref<*xf32>)

/// Static a x b values sin((i*b + j) * freq) * scale.
func.func private @fill_1x8(%b: index, %scale: f32, %freq: f32) -> tensor<1x8xf32> {
  %t = tensor.generate {
  ^bb0(%i: index, %j: index):
    %k = arith.muli %i, %b : index
    %l = arith.addi %k, %j : index
    %li = arith.index_cast %l : index to i64
    %f = arith.sitofp %li : i64 to f32
    %g = arith.mulf %f, %freq : f32
    %v = math.sin %g : f32
    %r = arith.mulf %v, %scale : f32
    tensor.yield %r : f32
  } : tensor<1x8xf32>
  return %t : tensor<1x8xf32>
}

func.func private @fill_32x8(%b: index, %scale: f32, %freq: f32) -> tensor<32x8xf32> {
  %t = tensor.generate {
  ^bb0(%i: index, %j: index):
    %k = arith.muli %i, %b : index
    %l = arith.addi %k, %j : index
    %li = arith.index_cast %l : index to i64
    %f = arith.sitofp %li : i64 to f32
    %g = arith.mulf %f, %freq : f32
    %v = math.sin %g : f32
    %r = arith.mulf %v, %scale : f32
    tensor.yield %r : f32
  } : tensor<32x8xf32>
  return %t : tensor<32x8xf32>
}

func.func private @fill_40x32(%b: index, %scale: f32, %freq: f32) -> tensor<40x32xf32> {
  %t = tensor.generate {
  ^bb0(%i: index, %j: index):
    %k = arith.muli %i, %b : index
    %l = arith.addi %k, %j : index
    %li = arith.index_cast %l : index to i64
    %f = arith.sitofp %li : i64 to f32
    %g = arith.mulf %f, %freq : f32
    %v = math.sin %g : f32
    %r = arith.mulf %v, %scale : f32
    tensor.yield %r : f32
  } : tensor<40x32xf32>
  return %t : tensor<40x32xf32>
}

func.func private @fill_48x32(%b: index, %scale: f32, %freq: f32) -> tensor<48x32xf32> {
  %t = tensor.generate {
  ^bb0(%i: index, %j: index):
    %k = arith.muli %i, %b : index
    %l = arith.addi %k, %j : index
    %li = arith.index_cast %l : index to i64
    %f = arith.sitofp %li : i64 to f32
    %g = arith.mulf %f, %freq : f32
    %v = math.sin %g : f32
    %r = arith.mulf %v, %scale : f32
    tensor.yield %r : f32
  } : tensor<48x32xf32>
  return %t : tensor<48x32xf32>
}

func.func private @fill_128x2(%b: index, %scale: f32, %freq: f32) -> tensor<128x2xf32> {
  %t = tensor.generate {
  ^bb0(%i: index, %j: index):
    %k = arith.muli %i, %b : index
    %l = arith.addi %k, %j : index
    %li = arith.index_cast %l : index to i64
    %f = arith.sitofp %li : i64 to f32
    %g = arith.mulf %f, %freq : f32
    %v = math.sin %g : f32
    %r = arith.mulf %v, %scale : f32
    tensor.yield %r : f32
  } : tensor<128x2xf32>
  return %t : tensor<128x2xf32>
}

func.func private @fill_128x32(%b: index, %scale: f32, %freq: f32) -> tensor<128x32xf32> {
  %t = tensor.generate {
  ^bb0(%i: index, %j: index):
    %k = arith.muli %i, %b : index
    %l = arith.addi %k, %j : index
    %li = arith.index_cast %l : index to i64
    %f = arith.sitofp %li : i64 to f32
    %g = arith.mulf %f, %freq : f32
    %v = math.sin %g : f32
    %r = arith.mulf %v, %scale : f32
    tensor.yield %r : f32
  } : tensor<128x32xf32>
  return %t : tensor<128x32xf32>
}

func.func private @fill_128x40(%b: index, %scale: f32, %freq: f32) -> tensor<128x40xf32> {
  %t = tensor.generate {
  ^bb0(%i: index, %j: index):
    %k = arith.muli %i, %b : index
    %l = arith.addi %k, %j : index
    %li = arith.index_cast %l : index to i64
    %f = arith.sitofp %li : i64 to f32
    %g = arith.mulf %f, %freq : f32
    %v = math.sin %g : f32
    %r = arith.mulf %v, %scale : f32
    tensor.yield %r : f32
  } : tensor<128x40xf32>
  return %t : tensor<128x40xf32>
}

func.func private @fill_160x32(%b: index, %scale: f32, %freq: f32) -> tensor<160x32xf32> {
  %t = tensor.generate {
  ^bb0(%i: index, %j: index):
    %k = arith.muli %i, %b : index
    %l = arith.addi %k, %j : index
    %li = arith.index_cast %l : index to i64
    %f = arith.sitofp %li : i64 to f32
    %g = arith.mulf %f, %freq : f32
    %v = math.sin %g : f32
    %r = arith.mulf %v, %scale : f32
    tensor.yield %r : f32
  } : tensor<160x32xf32>
  return %t : tensor<160x32xf32>
}

func.func private @fill_192x32(%b: index, %scale: f32, %freq: f32) -> tensor<192x32xf32> {
  %t = tensor.generate {
  ^bb0(%i: index, %j: index):
    %k = arith.muli %i, %b : index
    %l = arith.addi %k, %j : index
    %li = arith.index_cast %l : index to i64
    %f = arith.sitofp %li : i64 to f32
    %g = arith.mulf %f, %freq : f32
    %v = math.sin %g : f32
    %r = arith.mulf %v, %scale : f32
    tensor.yield %r : f32
  } : tensor<192x32xf32>
  return %t : tensor<192x32xf32>
}

func.func private @fill_256x16(%b: index, %scale: f32, %freq: f32) -> tensor<256x16xf32> {
  %t = tensor.generate {
  ^bb0(%i: index, %j: index):
    %k = arith.muli %i, %b : index
    %l = arith.addi %k, %j : index
    %li = arith.index_cast %l : index to i64
    %f = arith.sitofp %li : i64 to f32
    %g = arith.mulf %f, %freq : f32
    %v = math.sin %g : f32
    %r = arith.mulf %v, %scale : f32
    tensor.yield %r : f32
  } : tensor<256x16xf32>
  return %t : tensor<256x16xf32>
}

func.func private @fill_256x32(%b: index, %scale: f32, %freq: f32) -> tensor<256x32xf32> {
  %t = tensor.generate {
  ^bb0(%i: index, %j: index):
    %k = arith.muli %i, %b : index
    %l = arith.addi %k, %j : index
    %li = arith.index_cast %l : index to i64
    %f = arith.sitofp %li : i64 to f32
    %g = arith.mulf %f, %freq : f32
    %v = math.sin %g : f32
    %r = arith.mulf %v, %scale : f32
    tensor.yield %r : f32
  } : tensor<256x32xf32>
  return %t : tensor<256x32xf32>
}

func.func private @fill_256x48(%b: index, %scale: f32, %freq: f32) -> tensor<256x48xf32> {
  %t = tensor.generate {
  ^bb0(%i: index, %j: index):
    %k = arith.muli %i, %b : index
    %l = arith.addi %k, %j : index
    %li = arith.index_cast %l : index to i64
    %f = arith.sitofp %li : i64 to f32
    %g = arith.mulf %f, %freq : f32
    %v = math.sin %g : f32
    %r = arith.mulf %v, %scale : f32
    tensor.yield %r : f32
  } : tensor<256x48xf32>
  return %t : tensor<256x48xf32>
}

func.func private @print2(%t: tensor<?x?xf32>) {
  %m = bufferization.to_buffer %t : tensor<?x?xf32> to memref<?x?xf32>
  %u = memref.cast %m : memref<?x?xf32> to memref<*xf32>
  func.call @printMemrefF32(%u) : (memref<*xf32>) -> ()
  return
}

func.func private @print0(%t: tensor<f32>) {
  %m = bufferization.to_buffer %t : tensor<f32> to memref<f32>
  %u = memref.cast %m : memref<f32> to memref<*xf32>
  func.call @printMemrefF32(%u) : (memref<*xf32>) -> ()
  return
}

func.func @topk_swiglu(%x: tensor<40x32xf32>, %wr: tensor<32x8xf32>, %br: tensor<8xf32>, %w1: tensor<8x32x48xf32>, %w2: tensor<8x24x32xf32>) -> tensor<40x32xf32> {
  %y = moe.layer %x router(%wr, %br) experts(%w1, %w2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>}
         : (tensor<40x32xf32>, tensor<32x8xf32>, tensor<8xf32>, tensor<8x32x48xf32>, tensor<8x24x32xf32>) -> tensor<40x32xf32>
  return %y : tensor<40x32xf32>
}

func.func @moesart_train(%x: tensor<160x32xf32>, %wr: tensor<32x8xf32>, %w1: tensor<8x32x16xf32>, %w2: tensor<8x16x32xf32>, %seed: tensor<i64>) -> (tensor<160x32xf32>, tensor<f32>) {
  %y, %loss = moe.layer %x router(%wr) experts(%w1, %w2) seed(%seed)
         {routing = #moe.moesart<k = 2>, activation = #moe.activation<relu>, training, capacity_factor = 1.0 : f64}
         : (tensor<160x32xf32>, tensor<32x8xf32>, tensor<8x32x16xf32>, tensor<8x16x32xf32>, tensor<i64>) -> (tensor<160x32xf32>, tensor<f32>)
  return %y, %loss : tensor<160x32xf32>, tensor<f32>
}

func.func @dynamic_tokens(%x: tensor<40x32xf32>, %wr: tensor<32x8xf32>, %w1: tensor<8x32x32xf32>, %w2: tensor<8x32x32xf32>) -> (tensor<40x32xf32>, tensor<40x32xf32>) {
  %xd = tensor.cast %x : tensor<40x32xf32> to tensor<?x32xf32>
  %yd = moe.layer %xd router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = 3>, activation = #moe.activation<gelu>}
         : (tensor<?x32xf32>, tensor<32x8xf32>, tensor<8x32x32xf32>, tensor<8x32x32xf32>) -> tensor<?x32xf32>
  %y = tensor.cast %yd : tensor<?x32xf32> to tensor<40x32xf32>
  return %y, %x : tensor<40x32xf32>, tensor<40x32xf32>
}

func.func @soft(%x: tensor<2x24x32xf32>, %phi: tensor<32x4x2xf32>, %scale: tensor<f32>,
                %w1: tensor<4x32x40xf32>, %w2: tensor<4x40x32xf32>) -> tensor<2x24x32xf32> {
  %y = moe.soft_layer %x slots(%phi) scale(%scale) experts(%w1, %w2)
         {activation = #moe.activation<gelu>, normalize}
         : (tensor<2x24x32xf32>, tensor<32x4x2xf32>, tensor<f32>, tensor<4x32x40xf32>, tensor<4x40x32xf32>) -> tensor<2x24x32xf32>
  return %y : tensor<2x24x32xf32>
}

func.func @main() {
  %c1 = arith.constant 32 : index
  %s1 = arith.constant 1.0 : f32
  %f1 = arith.constant 0.37 : f32
  %e1 = func.call @fill_40x32(%c1, %s1, %f1) : (index, f32, f32) -> tensor<40x32xf32>
  %c2 = arith.constant 8 : index
  %s2 = arith.constant 1.0 : f32
  %f2 = arith.constant 0.113 : f32
  %e2 = func.call @fill_32x8(%c2, %s2, %f2) : (index, f32, f32) -> tensor<32x8xf32>
  %c3 = arith.constant 8 : index
  %s3 = arith.constant 0.2 : f32
  %f3 = arith.constant 0.0711 : f32
  %e3 = func.call @fill_1x8(%c3, %s3, %f3) : (index, f32, f32) -> tensor<1x8xf32>
  %v3 = tensor.collapse_shape %e3 [[0, 1]] : tensor<1x8xf32> into tensor<8xf32>
  %c4 = arith.constant 48 : index
  %s4 = arith.constant 0.3 : f32
  %f4 = arith.constant 0.291 : f32
  %e4 = func.call @fill_256x48(%c4, %s4, %f4) : (index, f32, f32) -> tensor<256x48xf32>
  %v4 = tensor.expand_shape %e4 [[0, 1], [2]] output_shape [8, 32, 48] : tensor<256x48xf32> into tensor<8x32x48xf32>
  %c5 = arith.constant 32 : index
  %s5 = arith.constant 0.3 : f32
  %f5 = arith.constant 0.173 : f32
  %e5 = func.call @fill_192x32(%c5, %s5, %f5) : (index, f32, f32) -> tensor<192x32xf32>
  %v5 = tensor.expand_shape %e5 [[0, 1], [2]] output_shape [8, 24, 32] : tensor<192x32xf32> into tensor<8x24x32xf32>
  %y6_0 = func.call @topk_swiglu(%e1, %e2, %v3, %v4, %v5) : (tensor<40x32xf32>, tensor<32x8xf32>, tensor<8xf32>, tensor<8x32x48xf32>, tensor<8x24x32xf32>) -> (tensor<40x32xf32>)
  %w6_0 = tensor.cast %y6_0 : tensor<40x32xf32> to tensor<?x?xf32>
  func.call @print2(%w6_0) : (tensor<?x?xf32>) -> ()
  %seed = arith.constant dense<12345678902> : tensor<i64>
  %c7 = arith.constant 32 : index
  %s7 = arith.constant 1.0 : f32
  %f7 = arith.constant 0.0533 : f32
  %e7 = func.call @fill_160x32(%c7, %s7, %f7) : (index, f32, f32) -> tensor<160x32xf32>
  %c8 = arith.constant 8 : index
  %s8 = arith.constant 1.0 : f32
  %f8 = arith.constant 0.41 : f32
  %e8 = func.call @fill_32x8(%c8, %s8, %f8) : (index, f32, f32) -> tensor<32x8xf32>
  %c9 = arith.constant 16 : index
  %s9 = arith.constant 0.3 : f32
  %f9 = arith.constant 0.37 : f32
  %e9 = func.call @fill_256x16(%c9, %s9, %f9) : (index, f32, f32) -> tensor<256x16xf32>
  %v9 = tensor.expand_shape %e9 [[0, 1], [2]] output_shape [8, 32, 16] : tensor<256x16xf32> into tensor<8x32x16xf32>
  %c10 = arith.constant 32 : index
  %s10 = arith.constant 0.3 : f32
  %f10 = arith.constant 0.113 : f32
  %e10 = func.call @fill_128x32(%c10, %s10, %f10) : (index, f32, f32) -> tensor<128x32xf32>
  %v10 = tensor.expand_shape %e10 [[0, 1], [2]] output_shape [8, 16, 32] : tensor<128x32xf32> into tensor<8x16x32xf32>
  %y11_0,%y11_1 = func.call @moesart_train(%e7, %e8, %v9, %v10, %seed) : (tensor<160x32xf32>, tensor<32x8xf32>, tensor<8x32x16xf32>, tensor<8x16x32xf32>, tensor<i64>) -> (tensor<160x32xf32>, tensor<f32>)
  %w11_0 = tensor.cast %y11_0 : tensor<160x32xf32> to tensor<?x?xf32>
  func.call @print2(%w11_0) : (tensor<?x?xf32>) -> ()
  func.call @print0(%y11_1) : (tensor<f32>) -> ()
  %c12 = arith.constant 32 : index
  %s12 = arith.constant 1.0 : f32
  %f12 = arith.constant 0.0711 : f32
  %e12 = func.call @fill_40x32(%c12, %s12, %f12) : (index, f32, f32) -> tensor<40x32xf32>
  %c13 = arith.constant 8 : index
  %s13 = arith.constant 1.0 : f32
  %f13 = arith.constant 0.291 : f32
  %e13 = func.call @fill_32x8(%c13, %s13, %f13) : (index, f32, f32) -> tensor<32x8xf32>
  %c14 = arith.constant 32 : index
  %s14 = arith.constant 0.3 : f32
  %f14 = arith.constant 0.173 : f32
  %e14 = func.call @fill_256x32(%c14, %s14, %f14) : (index, f32, f32) -> tensor<256x32xf32>
  %v14 = tensor.expand_shape %e14 [[0, 1], [2]] output_shape [8, 32, 32] : tensor<256x32xf32> into tensor<8x32x32xf32>
  %c15 = arith.constant 32 : index
  %s15 = arith.constant 0.3 : f32
  %f15 = arith.constant 0.0533 : f32
  %e15 = func.call @fill_256x32(%c15, %s15, %f15) : (index, f32, f32) -> tensor<256x32xf32>
  %v15 = tensor.expand_shape %e15 [[0, 1], [2]] output_shape [8, 32, 32] : tensor<256x32xf32> into tensor<8x32x32xf32>
  %y16_0,%y16_1 = func.call @dynamic_tokens(%e12, %e13, %v14, %v15) : (tensor<40x32xf32>, tensor<32x8xf32>, tensor<8x32x32xf32>, tensor<8x32x32xf32>) -> (tensor<40x32xf32>, tensor<40x32xf32>)
  %w16_0 = tensor.cast %y16_0 : tensor<40x32xf32> to tensor<?x?xf32>
  func.call @print2(%w16_0) : (tensor<?x?xf32>) -> ()
  %w16_1 = tensor.cast %y16_1 : tensor<40x32xf32> to tensor<?x?xf32>
  func.call @print2(%w16_1) : (tensor<?x?xf32>) -> ()
  %scale = arith.constant dense<0.75> : tensor<f32>
  %c17 = arith.constant 32 : index
  %s17 = arith.constant 1.0 : f32
  %f17 = arith.constant 0.41 : f32
  %e17 = func.call @fill_48x32(%c17, %s17, %f17) : (index, f32, f32) -> tensor<48x32xf32>
  %v17 = tensor.expand_shape %e17 [[0, 1], [2]] output_shape [2, 24, 32] : tensor<48x32xf32> into tensor<2x24x32xf32>
  %c18 = arith.constant 2 : index
  %s18 = arith.constant 1.0 : f32
  %f18 = arith.constant 0.37 : f32
  %e18 = func.call @fill_128x2(%c18, %s18, %f18) : (index, f32, f32) -> tensor<128x2xf32>
  %v18 = tensor.expand_shape %e18 [[0, 1], [2]] output_shape [32, 4, 2] : tensor<128x2xf32> into tensor<32x4x2xf32>
  %c19 = arith.constant 40 : index
  %s19 = arith.constant 0.3 : f32
  %f19 = arith.constant 0.113 : f32
  %e19 = func.call @fill_128x40(%c19, %s19, %f19) : (index, f32, f32) -> tensor<128x40xf32>
  %v19 = tensor.expand_shape %e19 [[0, 1], [2]] output_shape [4, 32, 40] : tensor<128x40xf32> into tensor<4x32x40xf32>
  %c20 = arith.constant 32 : index
  %s20 = arith.constant 0.3 : f32
  %f20 = arith.constant 0.0711 : f32
  %e20 = func.call @fill_160x32(%c20, %s20, %f20) : (index, f32, f32) -> tensor<160x32xf32>
  %v20 = tensor.expand_shape %e20 [[0, 1], [2]] output_shape [4, 40, 32] : tensor<160x32xf32> into tensor<4x40x32xf32>
  %y21_0 = func.call @soft(%v17, %v18, %scale, %v19, %v20) : (tensor<2x24x32xf32>, tensor<32x4x2xf32>, tensor<f32>, tensor<4x32x40xf32>, tensor<4x40x32xf32>) -> (tensor<2x24x32xf32>)
  %z21_0 = tensor.collapse_shape %y21_0 [[0, 1], [2]] : tensor<2x24x32xf32> into tensor<48x32xf32>
  %w21_0 = tensor.cast %z21_0 : tensor<48x32xf32> to tensor<?x?xf32>
  func.call @print2(%w21_0) : (tensor<?x?xf32>) -> ()
  return
}
