// bf16 layers whose routing plan takes the 64-row (prefill) tile, lowered
// with wgmma=true (what --moe-nvptx-pipeline passes for chip=sm_90a) and run
// on the host by --moe-test-emulate-gpu: GEMM1 and GEMM2 (with the combine
// epilogue) are the wgmma kernels (lowering/gpu/MmaGemm.cpp, emulated from
// the PTX ISA's descriptor and fragment layouts), compared with the CPU path
// within the bf16 tolerance (docs/gpu.md, "Tolerances"):
//  * T = 128, E = 4, k = 2 (T*k = 256 = 64 E: R = 64), static T;
//  * the same layer with a dynamic T, called with T = 128 (the scf.if takes
//    the wgmma pair) and T = 8 (R = 16: the mma.sync pair).
// The host code of the static layer names the wgmma kernels (WGMMA below).
//
// The CPU side without AVX512_BF16's pairwise dot product (which sums in
// another order than the tensor cores' emulation), on any host:
// RUN: moe-opt %s --moe-cpu-pipeline="parallel=false cpu-features=-avx512bf16" --emit-bytecode \
// RUN:   | moe-test-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_libs > %t.cpu
// RUN: moe-opt %s --pass-pipeline="%moe_emulate_gpu_wgmma_pipeline" --emit-bytecode \
// RUN:   | moe-test-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_libs,%emulation_omp > %t.gpu
// RUN: %python %S/Inputs/compare-memrefs.py --dtype bf16 %t.cpu %t.gpu | FileCheck %s
// CHECK: compare: OK, 16896 values, max abs diff 0{{$}}
// With wgmma-groups-in-flight=0 (the `_inflight0` kernels: every stage's
// wgmmas retired before the next loads): the same bits as the default.
// RUN: moe-opt %s --pass-pipeline="builtin.module(moe-gpu-launch-pipeline{chip=sm_90a wgmma-groups-in-flight=0},%moe_emulate_tail)" --emit-bytecode \
// RUN:   | moe-test-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_libs,%emulation_omp > %t.gpu0
// RUN: %python %S/Inputs/compare-memrefs.py --atol 0 --rtol 0 %t.gpu %t.gpu0 | FileCheck %s
// RUN: moe-opt %s %moe_gpu_target_sm90a --moe-gpu-configure=wgmma-groups-in-flight=0 --convert-moe-to-gpu --canonicalize | FileCheck %s --check-prefix=INFLIGHT0
// INFLIGHT0-LABEL: func.func @prefill
// INFLIGHT0: call @__moe_launch_moe_mma_gemm1_gather_swiglu_bf16_m64_wgmma_inflight0(
// INFLIGHT0-NEXT: call @__moe_launch_moe_mma_gemm2_weighted_combine_bf16_m64_outf32_wgmma_inflight0(
// RUN: moe-opt %s %moe_gpu_target_sm90a --moe-gpu-configure --convert-moe-to-gpu --canonicalize | FileCheck %s --check-prefix=WGMMA

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

// Four launches, the GEMMs on wgmma; a dynamic T holds the three pairs
// (16, 128 and 64 rows) under scf.ifs on the run-time row tile (one pair
// runs).
// WGMMA-LABEL: func.func @prefill
// WGMMA-NOT: call @__moe_launch
// WGMMA: call @__moe_launch_moe_gate_kernel_topk_router_bf16(
// WGMMA-NOT: call @__moe_launch
// WGMMA: call @__moe_launch_moe_align_kernel_weighted_combine_f32_bf16(
// WGMMA-NOT: call @__moe_launch
// WGMMA: call @__moe_launch_moe_mma_gemm1_gather_swiglu_bf16_m64_wgmma(
// WGMMA-NEXT: call @__moe_launch_moe_mma_gemm2_weighted_combine_bf16_m64_outf32_wgmma(
// WGMMA-NOT: call @__moe_launch
// WGMMA: return
// WGMMA-LABEL: func.func @dynamic
// WGMMA: call @__moe_launch_moe_align_kernel_weighted_combine_f32_bf16({{.*}}, %[[R:[^,]*]], %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}})
// WGMMA: %[[SMALL:.*]] = arith.cmpi eq, %[[R]], %c16 : index
// WGMMA-NEXT: scf.if %[[SMALL]] {
// WGMMA-NEXT: call @__moe_launch_moe_mma_gemm1_gather_swiglu_bf16_m16(
// WGMMA-NEXT: call @__moe_launch_moe_mma_gemm2_weighted_combine_bf16_m16_outf32(
// WGMMA-NEXT: } else {
// WGMMA-NEXT: %[[LARGE:.*]] = arith.cmpi eq, %[[R]], %c128 : index
// WGMMA-NEXT: scf.if %[[LARGE]] {
// WGMMA-NEXT: call @__moe_launch_moe_mma_gemm1_gather_swiglu_bf16_m128_wgmma(
// WGMMA-NEXT: call @__moe_launch_moe_mma_gemm2_weighted_combine_bf16_m128_outf32_wgmma(
// WGMMA-NEXT: } else {
// WGMMA-NEXT: call @__moe_launch_moe_mma_gemm1_gather_swiglu_bf16_m64_wgmma(
// WGMMA-NEXT: call @__moe_launch_moe_mma_gemm2_weighted_combine_bf16_m64_outf32_wgmma(
// WGMMA-NEXT: }
// WGMMA-NEXT: }
// WGMMA-NOT: call @__moe_launch
// WGMMA: return
func.func @prefill(%x: tensor<128x64xbf16>, %wr: tensor<64x4xbf16>, %w1: tensor<4x64x128xbf16>,
                   %w2: tensor<4x64x64xbf16>) -> tensor<128x64xbf16> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>}
         : (tensor<128x64xbf16>, tensor<64x4xbf16>, tensor<4x64x128xbf16>, tensor<4x64x64xbf16>)
         -> tensor<128x64xbf16>
  return %y : tensor<128x64xbf16>
}

func.func @dynamic(%x: tensor<?x64xbf16>, %wr: tensor<64x4xbf16>, %w1: tensor<4x64x128xbf16>,
                   %w2: tensor<4x64x64xbf16>) -> tensor<?x64xbf16> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>}
         : (tensor<?x64xbf16>, tensor<64x4xbf16>, tensor<4x64x128xbf16>, tensor<4x64x64xbf16>)
         -> tensor<?x64xbf16>
  return %y : tensor<?x64xbf16>
}

func.func @main() {
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  %c128 = arith.constant 128 : index
  %one = arith.constant 1.0 : f32
  %s03 = arith.constant 0.3 : f32
  %fa = arith.constant 0.37 : f32
  %fb = arith.constant 0.53 : f32
  %fc = arith.constant 0.011 : f32
  %fd = arith.constant 0.029 : f32
  %xd = func.call @fill(%c1, %c128, %c64, %one, %fa) : (index, index, index, f32, f32) -> tensor<?x?x?xbf16>
  %x3 = tensor.cast %xd : tensor<?x?x?xbf16> to tensor<1x128x64xbf16>
  %x = tensor.collapse_shape %x3 [[0, 1], [2]] : tensor<1x128x64xbf16> into tensor<128x64xbf16>
  %wrd = func.call @fill(%c1, %c64, %c4, %one, %fb) : (index, index, index, f32, f32) -> tensor<?x?x?xbf16>
  %wr3 = tensor.cast %wrd : tensor<?x?x?xbf16> to tensor<1x64x4xbf16>
  %wr = tensor.collapse_shape %wr3 [[0, 1], [2]] : tensor<1x64x4xbf16> into tensor<64x4xbf16>
  %w1d = func.call @fill(%c4, %c64, %c128, %s03, %fc) : (index, index, index, f32, f32) -> tensor<?x?x?xbf16>
  %w1 = tensor.cast %w1d : tensor<?x?x?xbf16> to tensor<4x64x128xbf16>
  %w2d = func.call @fill(%c4, %c64, %c64, %s03, %fd) : (index, index, index, f32, f32) -> tensor<?x?x?xbf16>
  %w2 = tensor.cast %w2d : tensor<?x?x?xbf16> to tensor<4x64x64xbf16>

  %y1 = func.call @prefill(%x, %wr, %w1, %w2) : (tensor<128x64xbf16>, tensor<64x4xbf16>, tensor<4x64x128xbf16>, tensor<4x64x64xbf16>) -> tensor<128x64xbf16>
  %p1 = tensor.cast %y1 : tensor<128x64xbf16> to tensor<?x64xbf16>
  func.call @print(%p1) : (tensor<?x64xbf16>) -> ()
  %xdyn = tensor.cast %x : tensor<128x64xbf16> to tensor<?x64xbf16>
  %y2 = func.call @dynamic(%xdyn, %wr, %w1, %w2) : (tensor<?x64xbf16>, tensor<64x4xbf16>, tensor<4x64x128xbf16>, tensor<4x64x64xbf16>) -> tensor<?x64xbf16>
  func.call @print(%y2) : (tensor<?x64xbf16>) -> ()
  %x8 = tensor.extract_slice %x[0, 0] [8, 64] [1, 1] : tensor<128x64xbf16> to tensor<8x64xbf16>
  %x8d = tensor.cast %x8 : tensor<8x64xbf16> to tensor<?x64xbf16>
  %y3 = func.call @dynamic(%x8d, %wr, %w1, %w2) : (tensor<?x64xbf16>, tensor<64x4xbf16>, tensor<4x64x128xbf16>, tensor<4x64x64xbf16>) -> tensor<?x64xbf16>
  func.call @print(%y3) : (tensor<?x64xbf16>) -> ()
  return
}
