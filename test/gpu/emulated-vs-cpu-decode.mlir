// The decode path of the GPU lowering (router + gate in one kernel, 16-row
// tiles, the combine in GEMM2's epilogue), run on the host by
// --moe-test-emulate-gpu, computes what the CPU path computes:
//  * a Mixtral-shaped decode step (T = 16, E = 8, k = 2);
//  * an uneven routing where the router bias sends every token to experts
//    0-2 (experts 3-7 get no rows: empty groups, no tiles) and expert 0
//    gets more than one tile of rows;
//  * capacity drops with a shared expert: tokens whose every assignment is
//    dropped get the shared expert's output alone (the shared expert is
//    folded into GEMM2: its row is such a token's only arrival);
//  * a single token, a dynamic T (the row tile chosen at run time), and
//    MOESART training at T = 16 (the aux loss reduced in the align kernel).
//
// RUN: moe-opt %s --moe-cpu-pipeline=parallel=false --emit-bytecode \
// RUN:   | moe-test-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_libs > %t.cpu
// RUN: moe-opt %s --pass-pipeline="%moe_emulate_gpu_pipeline" --emit-bytecode \
// RUN:   | moe-test-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_libs,%emulation_omp > %t.gpu
// RUN: %python %S/Inputs/compare-memrefs.py %t.cpu %t.gpu | FileCheck %s
// CHECK: compare: OK, 5697 values
// The same bits with the blocks of every launch in reverse order and in two
// shuffles (moe-test-emulate-gpu's block-order; docs/gpu.md, "Block order in
// the emulation"): the inter-block protocols (align, combine arrivals) do
// not depend on the order a GPU runs the blocks in.
// RUN: for o in reverse "shuffle seed=1" "shuffle seed=2"; do \
// RUN:   MOE_EMULATE_OPTIONS="block-order=$o"; echo "== $o"; \
// RUN:   moe-opt %s --pass-pipeline="%moe_emulate_gpu_pipeline" --emit-bytecode \
// RUN:     | moe-test-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_libs,%emulation_omp > %t.order \
// RUN:     && %python %S/Inputs/compare-memrefs.py --atol 0 --rtol 0 %t.gpu %t.order || exit 1; \
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

func.func @decode(%x: tensor<16x64xf32>, %wr: tensor<64x8xf32>, %w1: tensor<8x64x64xf32>,
                  %w2: tensor<8x32x64xf32>) -> tensor<16x64xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>}
         : (tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x64x64xf32>, tensor<8x32x64xf32>)
         -> tensor<16x64xf32>
  return %y : tensor<16x64xf32>
}

func.func @uneven(%x: tensor<24x64xf32>, %wr: tensor<64x8xf32>, %br: tensor<8xf32>,
                  %w1: tensor<8x64x32xf32>, %w2: tensor<8x32x64xf32>, %b1: tensor<8x32xf32>,
                  %b2: tensor<8x64xf32>) -> tensor<24x64xf32> {
  %y = moe.layer %x router(%wr, %br) experts(%w1, %w2) expert_biases(%b1, %b2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>}
         : (tensor<24x64xf32>, tensor<64x8xf32>, tensor<8xf32>, tensor<8x64x32xf32>,
            tensor<8x32x64xf32>, tensor<8x32xf32>, tensor<8x64xf32>) -> tensor<24x64xf32>
  return %y : tensor<24x64xf32>
}

func.func @dropped_shared(%x: tensor<16x64xf32>, %wr: tensor<64x8xf32>, %w1: tensor<8x64x32xf32>,
                          %w2: tensor<8x32x64xf32>, %s1: tensor<64x24xf32>, %s2: tensor<24x64xf32>,
                          %sg: tensor<64x1xf32>) -> tensor<16x64xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) shared(%s1, %s2) shared_gate(%sg)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<gelu>,
          capacity_factor = 0.25 : f64}
         : (tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x64x32xf32>, tensor<8x32x64xf32>,
            tensor<64x24xf32>, tensor<24x64xf32>, tensor<64x1xf32>) -> tensor<16x64xf32>
  return %y : tensor<16x64xf32>
}

func.func @single(%x: tensor<1x64xf32>, %wr: tensor<64x8xf32>, %w1: tensor<8x64x32xf32>,
                  %w2: tensor<8x32x64xf32>) -> tensor<1x64xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.moesart<k = 2>, activation = #moe.activation<silu>}
         : (tensor<1x64xf32>, tensor<64x8xf32>, tensor<8x64x32xf32>, tensor<8x32x64xf32>)
         -> tensor<1x64xf32>
  return %y : tensor<1x64xf32>
}

func.func @dynamic(%x: tensor<?x64xf32>, %wr: tensor<64x8xf32>, %w1: tensor<8x64x32xf32>,
                   %w2: tensor<8x32x64xf32>) -> tensor<?x64xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<gelu_tanh>}
         : (tensor<?x64xf32>, tensor<64x8xf32>, tensor<8x64x32xf32>, tensor<8x32x64xf32>)
         -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

func.func @train(%x: tensor<16x64xf32>, %wr: tensor<64x8xf32>, %w1: tensor<8x64x32xf32>,
                 %w2: tensor<8x32x64xf32>, %seed: tensor<i64>) -> (tensor<16x64xf32>, tensor<f32>) {
  %y, %loss = moe.layer %x router(%wr) experts(%w1, %w2) seed(%seed)
         {routing = #moe.moesart<k = 2>, activation = #moe.activation<relu>, training}
         : (tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x64x32xf32>, tensor<8x32x64xf32>,
            tensor<i64>) -> (tensor<16x64xf32>, tensor<f32>)
  return %y, %loss : tensor<16x64xf32>, tensor<f32>
}

func.func @main() {
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  %c24 = arith.constant 24 : index
  %c32 = arith.constant 32 : index
  %c64 = arith.constant 64 : index
  %c256 = arith.constant 256 : index
  %c512 = arith.constant 512 : index
  %one = arith.constant 1.0 : f32
  %s02 = arith.constant 0.2 : f32
  %s03 = arith.constant 0.3 : f32
  %s002 = arith.constant 0.02 : f32
  %fa = arith.constant 0.37 : f32
  %fb = arith.constant 0.113 : f32
  %fc = arith.constant 0.291 : f32
  %fd = arith.constant 0.173 : f32
  %fe = arith.constant 0.0533 : f32
  %ff = arith.constant 0.41 : f32

  // x (24 rows; the first 16 / 1 are the other layers' x).
  %xd = func.call @fill(%c24, %c64, %one, %fa) : (index, index, f32, f32) -> tensor<?x?xf32>
  %x24 = tensor.cast %xd : tensor<?x?xf32> to tensor<24x64xf32>
  %x16 = tensor.extract_slice %x24[0, 0] [16, 64] [1, 1] : tensor<24x64xf32> to tensor<16x64xf32>
  %x1 = tensor.extract_slice %x24[3, 0] [1, 64] [1, 1] : tensor<24x64xf32> to tensor<1x64xf32>
  %wrd = func.call @fill(%c64, %c8, %one, %fb) : (index, index, f32, f32) -> tensor<?x?xf32>
  %wr = tensor.cast %wrd : tensor<?x?xf32> to tensor<64x8xf32>
  %wrs = func.call @fill(%c64, %c8, %s002, %fb) : (index, index, f32, f32) -> tensor<?x?xf32>
  %wr_small = tensor.cast %wrs : tensor<?x?xf32> to tensor<64x8xf32>
  // Gated W1 [8, 64, 64] and plain W1 [8, 64, 32]; W2 [8, 32, 64].
  %w1gd = func.call @fill(%c512, %c64, %s03, %fc) : (index, index, f32, f32) -> tensor<?x?xf32>
  %w1g2 = tensor.cast %w1gd : tensor<?x?xf32> to tensor<512x64xf32>
  %w1g = tensor.expand_shape %w1g2 [[0, 1], [2]] output_shape [8, 64, 64] : tensor<512x64xf32> into tensor<8x64x64xf32>
  %w1d = func.call @fill(%c512, %c32, %s03, %fd) : (index, index, f32, f32) -> tensor<?x?xf32>
  %w12 = tensor.cast %w1d : tensor<?x?xf32> to tensor<512x32xf32>
  %w1 = tensor.expand_shape %w12 [[0, 1], [2]] output_shape [8, 64, 32] : tensor<512x32xf32> into tensor<8x64x32xf32>
  %w2d = func.call @fill(%c256, %c64, %s03, %fe) : (index, index, f32, f32) -> tensor<?x?xf32>
  %w22 = tensor.cast %w2d : tensor<?x?xf32> to tensor<256x64xf32>
  %w2 = tensor.expand_shape %w22 [[0, 1], [2]] output_shape [8, 32, 64] : tensor<256x64xf32> into tensor<8x32x64xf32>
  %b1d = func.call @fill(%c8, %c32, %s02, %ff) : (index, index, f32, f32) -> tensor<?x?xf32>
  %b1 = tensor.cast %b1d : tensor<?x?xf32> to tensor<8x32xf32>
  %b2d = func.call @fill(%c8, %c64, %s02, %fa) : (index, index, f32, f32) -> tensor<?x?xf32>
  %b2 = tensor.cast %b2d : tensor<?x?xf32> to tensor<8x64xf32>
  %br = arith.constant dense<[4.0, 3.0, 2.5, -9.0, -9.0, -9.0, -9.0, -9.0]> : tensor<8xf32>
  %s1d = func.call @fill(%c64, %c24, %s03, %fb) : (index, index, f32, f32) -> tensor<?x?xf32>
  %s1 = tensor.cast %s1d : tensor<?x?xf32> to tensor<64x24xf32>
  %s2d = func.call @fill(%c24, %c64, %s03, %fc) : (index, index, f32, f32) -> tensor<?x?xf32>
  %s2 = tensor.cast %s2d : tensor<?x?xf32> to tensor<24x64xf32>
  %sgd = func.call @fill(%c64, %c1, %s02, %fd) : (index, index, f32, f32) -> tensor<?x?xf32>
  %sg = tensor.cast %sgd : tensor<?x?xf32> to tensor<64x1xf32>
  %seed = arith.constant dense<8589934597> : tensor<i64>

  %y1 = func.call @decode(%x16, %wr, %w1g, %w2) : (tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x64x64xf32>, tensor<8x32x64xf32>) -> tensor<16x64xf32>
  %p1 = tensor.cast %y1 : tensor<16x64xf32> to tensor<?x?xf32>
  func.call @print2(%p1) : (tensor<?x?xf32>) -> ()
  %y2 = func.call @uneven(%x24, %wr_small, %br, %w1, %w2, %b1, %b2) : (tensor<24x64xf32>, tensor<64x8xf32>, tensor<8xf32>, tensor<8x64x32xf32>, tensor<8x32x64xf32>, tensor<8x32xf32>, tensor<8x64xf32>) -> tensor<24x64xf32>
  %p2 = tensor.cast %y2 : tensor<24x64xf32> to tensor<?x?xf32>
  func.call @print2(%p2) : (tensor<?x?xf32>) -> ()
  %y3 = func.call @dropped_shared(%x16, %wr, %w1, %w2, %s1, %s2, %sg) : (tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x64x32xf32>, tensor<8x32x64xf32>, tensor<64x24xf32>, tensor<24x64xf32>, tensor<64x1xf32>) -> tensor<16x64xf32>
  %p3 = tensor.cast %y3 : tensor<16x64xf32> to tensor<?x?xf32>
  func.call @print2(%p3) : (tensor<?x?xf32>) -> ()
  %y4 = func.call @single(%x1, %wr, %w1, %w2) : (tensor<1x64xf32>, tensor<64x8xf32>, tensor<8x64x32xf32>, tensor<8x32x64xf32>) -> tensor<1x64xf32>
  %p4 = tensor.cast %y4 : tensor<1x64xf32> to tensor<?x?xf32>
  func.call @print2(%p4) : (tensor<?x?xf32>) -> ()
  %xdyn = tensor.cast %x16 : tensor<16x64xf32> to tensor<?x64xf32>
  %y5 = func.call @dynamic(%xdyn, %wr, %w1, %w2) : (tensor<?x64xf32>, tensor<64x8xf32>, tensor<8x64x32xf32>, tensor<8x32x64xf32>) -> tensor<?x64xf32>
  %p5 = tensor.cast %y5 : tensor<?x64xf32> to tensor<?x?xf32>
  func.call @print2(%p5) : (tensor<?x?xf32>) -> ()
  %y6, %l6 = func.call @train(%x16, %wr, %w1, %w2, %seed) : (tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x64x32xf32>, tensor<8x32x64xf32>, tensor<i64>) -> (tensor<16x64xf32>, tensor<f32>)
  %p6 = tensor.cast %y6 : tensor<16x64xf32> to tensor<?x?xf32>
  func.call @print2(%p6) : (tensor<?x?xf32>) -> ()
  func.call @print0(%l6) : (tensor<f32>) -> ()
  return
}
