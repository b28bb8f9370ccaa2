// Split-K of the fused layer's 16-row tensor-core GEMMs (docs/gpu.md,
// "Split-K at decode"), run on the host by --moe-test-emulate-gpu against
// the CPU path, within the bf16 tolerance (docs/gpu.md, "Tolerances"): a
// bf16 swiglu layer (E = 4, k = 2, D = 64, H = 512: GEMM1 2 k-tiles of 32,
// GEMM2 16) at T = 16, T = 1, and a dynamic T called with T = 8 and T = 3,
// lowered with
//  * decode-split-k = 0 (chosen from the shape: GEMM1 S = 1, GEMM2 S = 2),
//  * 1 (no split), 3 (GEMM1: slices of 1, 1, 0 k-tiles, one empty; GEMM2:
//    6, 6, 4: S does not divide the k-tiles) and 5 (GEMM1 1, 1, 0, 0, 0;
//    GEMM2 4, 4, 4, 4, 0).
// Every variant is also compared with the unsplit one (S = 1): the same
// rounding points, only the f32 order of the K sums differs. The split
// variants 3 and 5 also run with the blocks in reverse order and in a
// shuffle (moe-test-emulate-gpu's block-order; the last block of a tile is
// another slice; seeded by S): the same bits as
// in the forward order.
//
// The CPU side without AVX512_BF16's pairwise dot product (which sums in
// another order than the tensor cores' emulation), on any host:
// RUN: moe-opt %s --moe-cpu-pipeline="parallel=false cpu-features=-avx512bf16" --emit-bytecode \
// RUN:   | moe-test-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_libs > %t.cpu
// RUN: for s in 0 1 3 5; do \
// RUN:   moe-opt %s --pass-pipeline="builtin.module(moe-gpu-launch-pipeline{decode-split-k=$s},%moe_emulate_tail)" --emit-bytecode \
// RUN:     | moe-test-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_libs,%emulation_omp > %t.gpu$s || exit 1; \
// RUN: done
// RUN: %python %S/Inputs/compare-memrefs.py --dtype bf16 %t.cpu %t.gpu0 | FileCheck %s
// RUN: %python %S/Inputs/compare-memrefs.py --dtype bf16 %t.cpu %t.gpu1 | FileCheck %s
// RUN: %python %S/Inputs/compare-memrefs.py --dtype bf16 %t.cpu %t.gpu3 | FileCheck %s
// RUN: %python %S/Inputs/compare-memrefs.py --dtype bf16 %t.cpu %t.gpu5 | FileCheck %s
// RUN: %python %S/Inputs/compare-memrefs.py --dtype bf16 %t.gpu1 %t.gpu3 | FileCheck %s
// RUN: %python %S/Inputs/compare-memrefs.py --dtype bf16 %t.gpu1 %t.gpu5 | FileCheck %s
// RUN: for s in 3 5; do for o in reverse "shuffle seed=$s"; do \
// RUN:   MOE_EMULATE_OPTIONS="block-order=$o"; echo "== S=$s $o"; \
// RUN:   moe-opt %s --pass-pipeline="builtin.module(moe-gpu-launch-pipeline{decode-split-k=$s},%moe_emulate_tail)" --emit-bytecode \
// RUN:     | moe-test-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_libs,%emulation_omp > %t.order \
// RUN:     && %python %S/Inputs/compare-memrefs.py --atol 0 --rtol 0 %t.gpu$s %t.order || exit 1; \
// RUN: done; done | FileCheck %s --check-prefix=ORDER
// CHECK: compare: OK, 1792 values
// ORDER-LABEL: == S=3 reverse
// ORDER-NEXT: compare: OK, 1792 values, max abs diff 0{{$}}
// ORDER-LABEL: == S=3 shuffle seed=3
// ORDER-NEXT: compare: OK, 1792 values, max abs diff 0{{$}}
// ORDER-LABEL: == S=5 reverse
// ORDER-NEXT: compare: OK, 1792 values, max abs diff 0{{$}}
// ORDER-LABEL: == S=5 shuffle seed=5
// ORDER-NEXT: compare: OK, 1792 values, max abs diff 0{{$}}
// The launches: 4 per layer; the split kernels where S > 1.
// RUN: moe-opt %s %moe_gpu_target_sm90 --moe-gpu-configure=decode-split-k=3 --convert-moe-to-gpu -canonicalize -cse | FileCheck %s --check-prefix=HOST
// HOST-LABEL: func.func @t16(
// HOST: call @__moe_launch_moe_gate_kernel_topk_router_bf16(
// HOST-NOT: call @__moe_launch
// HOST: call @__moe_launch_moe_align_kernel_weighted_combine_f32_bf16(
// HOST-NOT: call @__moe_launch
// HOST: call @__moe_launch_moe_mma_gemm1_gather_swiglu_bf16_m16_splitk(%c8, %c6, %c3,
// HOST-NEXT: call @__moe_launch_moe_mma_gemm2_weighted_combine_bf16_m16_outf32_splitk(%c1, %c6, %c3,
// HOST-NOT: call @__moe_launch
// HOST: return

func.func private @printMemrefF32(memref<*xf32>)

/// a x b x c values sin(linear index * freq) * scale, rounded to bf16.
func.func @fill(%a: index, %b: index, %c: index, %scale: f32, %freq: f32) -> tensor<?x?x?xbf16> {
  %t = tensor.generate %a, %b, %c {
  ^bb0(%i: index, %j: index, %k: index):
    %ij = arith.muli %i, %b : index
    %ij2 = arith.addi %ij, %j : index
    %l0 = arith.muli %ij2, %c : index
    %l = arith.addi %l0, %k : index
    %li = arith.index_cast %l : index to i64
    %f = arith.sitofp %li : i64 to f32
    %g = arith.mulf %f, %freq : f32
    %v = math.sin %g : f32
    %r = arith.mulf %v, %scale : f32
    %h = arith.truncf %r : f32 to bf16
    tensor.yield %h : bf16
  } : tensor<?x?x?xbf16>
  return %t : tensor<?x?x?xbf16>
}

func.func @print(%t: tensor<?x64xbf16>) {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %t, %c0 : tensor<?x64xbf16>
  %e = tensor.empty(%n) : tensor<?x64xf32>
  %f = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
         ins(%t : tensor<?x64xbf16>) outs(%e : tensor<?x64xf32>) {
  ^bb0(%a: bf16, %o: f32):
    %x = arith.extf %a : bf16 to f32
    linalg.yield %x : f32
  } -> tensor<?x64xf32>
  %m = bufferization.to_buffer %f : tensor<?x64xf32> to memref<?x64xf32>
  %u = memref.cast %m : memref<?x64xf32> to memref<*xf32>
  func.call @printMemrefF32(%u) : (memref<*xf32>) -> ()
  return
}

func.func @t16(%x: tensor<16x64xbf16>, %wr: tensor<64x4xbf16>, %w1: tensor<4x64x1024xbf16>,
               %w2: tensor<4x512x64xbf16>) -> tensor<16x64xbf16> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>}
         : (tensor<16x64xbf16>, tensor<64x4xbf16>, tensor<4x64x1024xbf16>, tensor<4x512x64xbf16>)
         -> tensor<16x64xbf16>
  return %y : tensor<16x64xbf16>
}

func.func @t1(%x: tensor<1x64xbf16>, %wr: tensor<64x4xbf16>, %w1: tensor<4x64x1024xbf16>,
              %w2: tensor<4x512x64xbf16>) -> tensor<1x64xbf16> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>}
         : (tensor<1x64xbf16>, tensor<64x4xbf16>, tensor<4x64x1024xbf16>, tensor<4x512x64xbf16>)
         -> tensor<1x64xbf16>
  return %y : tensor<1x64xbf16>
}

func.func @dynamic(%x: tensor<?x64xbf16>, %wr: tensor<64x4xbf16>, %w1: tensor<4x64x1024xbf16>,
                   %w2: tensor<4x512x64xbf16>) -> tensor<?x64xbf16> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>}
         : (tensor<?x64xbf16>, tensor<64x4xbf16>, tensor<4x64x1024xbf16>, tensor<4x512x64xbf16>)
         -> tensor<?x64xbf16>
  return %y : tensor<?x64xbf16>
}

func.func @main() {
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %c512 = arith.constant 512 : index
  %c1024 = arith.constant 1024 : index
  %one = arith.constant 1.0 : f32
  %s03 = arith.constant 0.3 : f32
  %s01 = arith.constant 0.1 : f32
  %fa = arith.constant 0.37 : f32
  %fb = arith.constant 0.53 : f32
  %fc = arith.constant 0.011 : f32
  %fd = arith.constant 0.029 : f32
  %xd = func.call @fill(%c1, %c16, %c64, %one, %fa) : (index, index, index, f32, f32) -> tensor<?x?x?xbf16>
  %x3 = tensor.cast %xd : tensor<?x?x?xbf16> to tensor<1x16x64xbf16>
  %x = tensor.collapse_shape %x3 [[0, 1], [2]] : tensor<1x16x64xbf16> into tensor<16x64xbf16>
  %wrd = func.call @fill(%c1, %c64, %c4, %one, %fb) : (index, index, index, f32, f32) -> tensor<?x?x?xbf16>
  %wr3 = tensor.cast %wrd : tensor<?x?x?xbf16> to tensor<1x64x4xbf16>
  %wr = tensor.collapse_shape %wr3 [[0, 1], [2]] : tensor<1x64x4xbf16> into tensor<64x4xbf16>
  %w1d = func.call @fill(%c4, %c64, %c1024, %s03, %fc) : (index, index, index, f32, f32) -> tensor<?x?x?xbf16>
  %w1 = tensor.cast %w1d : tensor<?x?x?xbf16> to tensor<4x64x1024xbf16>
  %w2d = func.call @fill(%c4, %c512, %c64, %s01, %fd) : (index, index, index, f32, f32) -> tensor<?x?x?xbf16>
  %w2 = tensor.cast %w2d : tensor<?x?x?xbf16> to tensor<4x512x64xbf16>

  %y1 = func.call @t16(%x, %wr, %w1, %w2) : (tensor<16x64xbf16>, tensor<64x4xbf16>, tensor<4x64x1024xbf16>, tensor<4x512x64xbf16>) -> tensor<16x64xbf16>
  %p1 = tensor.cast %y1 : tensor<16x64xbf16> to tensor<?x64xbf16>
  func.call @print(%p1) : (tensor<?x64xbf16>) -> ()
  %x1 = tensor.extract_slice %x[5, 0] [1, 64] [1, 1] : tensor<16x64xbf16> to tensor<1x64xbf16>
  %y2 = func.call @t1(%x1, %wr, %w1, %w2) : (tensor<1x64xbf16>, tensor<64x4xbf16>, tensor<4x64x1024xbf16>, tensor<4x512x64xbf16>) -> tensor<1x64xbf16>
  %p2 = tensor.cast %y2 : tensor<1x64xbf16> to tensor<?x64xbf16>
  func.call @print(%p2) : (tensor<?x64xbf16>) -> ()
  %x8 = tensor.extract_slice %x[0, 0] [8, 64] [1, 1] : tensor<16x64xbf16> to tensor<8x64xbf16>
  %x8d = tensor.cast %x8 : tensor<8x64xbf16> to tensor<?x64xbf16>
  %y3 = func.call @dynamic(%x8d, %wr, %w1, %w2) : (tensor<?x64xbf16>, tensor<64x4xbf16>, tensor<4x64x1024xbf16>, tensor<4x512x64xbf16>) -> tensor<?x64xbf16>
  func.call @print(%y3) : (tensor<?x64xbf16>) -> ()
  %x3t = tensor.extract_slice %x[9, 0] [3, 64] [1, 1] : tensor<16x64xbf16> to tensor<3x64xbf16>
  %x3d = tensor.cast %x3t : tensor<3x64xbf16> to tensor<?x64xbf16>
  %y4 = func.call @dynamic(%x3d, %wr, %w1, %w2) : (tensor<?x64xbf16>, tensor<64x4xbf16>, tensor<4x64x1024xbf16>, tensor<4x512x64xbf16>) -> tensor<?x64xbf16>
  func.call @print(%y4) : (tensor<?x64xbf16>) -> ()
  return
}
