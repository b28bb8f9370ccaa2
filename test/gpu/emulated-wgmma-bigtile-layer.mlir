// bf16 layers whose routing plan takes the 128-row tile (T*k/E >= 128,
// convert-moe-to-gpu's default big-tile-rows), lowered with wgmma=true (what
// --moe-nvptx-pipeline passes for chip=sm_90a) and run on the host by
// --moe-test-emulate-gpu: GEMM1 and GEMM2 (with the combine epilogue) are the
// 128-row wgmma kernels (two consumer warpgroups per block, 256 threads;
// lowering/gpu/MmaGemm.cpp), compared with the CPU path within the bf16
// tolerance (docs/gpu.md, "Tolerances"):
//  * T = 320, E = 4, k = 2 (T*k/E = 160 rows per expert: R = 128; this
//    routing gives every expert 160 rows, so each has a full tile, where
//    both warpgroups compute real rows, and a 32-row tile, where warpgroup 1
//    computes padding only), static T;
//  * the same layer with a dynamic T, called with T = 320 (the run-time
//    scf.if takes the 128-row pair), T = 128 (64 rows per expert: the 64-row
//    wgmma pair) and T = 8 (the 16-row mma.sync pair);
//  * T = 320 with a gated shared expert (docs/spec.md §3.1.1), folded into
//    the routed GEMM launches: its ceil(320 / 128) = 3 tiles come first in
//    the `_foldshared` 128-row kernels (GEMM2 weighted by the sigmoid gate),
//    and the combine adds its row first.
// The host code names the kernels (BIG below): still four launches.
//
// The CPU side without AVX512_BF16's pairwise dot product (which sums in
// another order than the tensor cores' emulation), on any host:
// RUN: moe-opt %s --moe-cpu-pipeline="parallel=false cpu-features=-avx512bf16" --emit-bytecode \
// RUN:   | moe-test-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_libs > %t.cpu
// RUN: moe-opt %s --pass-pipeline="%moe_emulate_gpu_wgmma_pipeline" --emit-bytecode \
// RUN:   | moe-test-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_libs,%emulation_omp > %t.gpu
// RUN: %python %S/Inputs/compare-memrefs.py --dtype bf16 %t.cpu %t.gpu | FileCheck %s
// CHECK: compare: OK, 70144 values, max abs diff 0{{$}}
// With wgmma-groups-in-flight=0: the same bits as the default.
// RUN: moe-opt %s --pass-pipeline="builtin.module(moe-gpu-launch-pipeline{chip=sm_90a wgmma-groups-in-flight=0},%moe_emulate_tail)" --emit-bytecode \
// RUN:   | moe-test-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_libs,%emulation_omp > %t.gpu0
// RUN: %python %S/Inputs/compare-memrefs.py --atol 0 --rtol 0 %t.gpu %t.gpu0 | FileCheck %s
// RUN: moe-opt %s %moe_gpu_target_sm90a --moe-gpu-configure --convert-moe-to-gpu --canonicalize | FileCheck %s --check-prefix=BIG
// big-tile-rows=0 keeps the 64-row tile at T = 320.
// RUN: moe-opt %s %moe_gpu_target_sm90a --moe-gpu-configure=big-tile-rows=0 --convert-moe-to-gpu --canonicalize | FileCheck %s --check-prefix=OFF
// mma-stages=5: the prefill tiles' kernels (64 and 128 rows) are the
// 5-stage variants (`_s5`), the 16-row decode tiles keep their four; after
// bufferization every tensor-core launch passes its kernel's dynamic shared
// memory (128 rows: 5 x 16 KiB + 512 bytes of row map, + 512 of the
// combine's tokens; 64 rows: 5 x 12 KiB + 256 (+ 256); 16 rows: 40000
// (+ 64)); the other kernels take none.
// RUN: moe-opt %s --moe-gpu-launch-pipeline="chip=sm_90a mma-stages=5" | FileCheck %s --check-prefix=STAGES
// STAGES-LABEL: func.func @prefill
// STAGES: gpu.launch_func @moe_kernels::@moe_gate_kernel_topk_router_bf16 blocks in ({{[^)]*}}) threads in ({{[^)]*}}) args(
// STAGES: gpu.launch_func @moe_kernels::@moe_mma_gemm1_gather_swiglu_bf16_m128_wgmma_s5 blocks in ({{[^)]*}}) threads in (%c256, %c1, %c1) dynamic_shared_memory_size %c82432_i32 args(
// STAGES: gpu.launch_func @moe_kernels::@moe_mma_gemm2_weighted_combine_bf16_m128_outf32_wgmma_s5 blocks in ({{[^)]*}}) threads in (%c256, %c1, %c1) dynamic_shared_memory_size %c82944_i32 args(
// STAGES-LABEL: func.func @dynamic
// STAGES: gpu.launch_func @moe_kernels::@moe_mma_gemm1_gather_swiglu_bf16_m16 blocks in ({{[^)]*}}) threads in (%c128, %c1, %c1) dynamic_shared_memory_size %c40000_i32 args(
// STAGES: gpu.launch_func @moe_kernels::@moe_mma_gemm2_weighted_combine_bf16_m16_outf32 blocks in ({{[^)]*}}) threads in (%c128, %c1, %c1) dynamic_shared_memory_size %c40064_i32 args(
// STAGES: gpu.launch_func @moe_kernels::@moe_mma_gemm1_gather_swiglu_bf16_m128_wgmma_s5 {{.*}} dynamic_shared_memory_size %c82432_i32 args(
// STAGES: gpu.launch_func @moe_kernels::@moe_mma_gemm1_gather_swiglu_bf16_m64_wgmma_s5 blocks in ({{[^)]*}}) threads in (%c128, %c1, %c1) dynamic_shared_memory_size %c61696_i32 args(
// STAGES: gpu.launch_func @moe_kernels::@moe_mma_gemm2_weighted_combine_bf16_m64_outf32_wgmma_s5 {{.*}} dynamic_shared_memory_size %c61952_i32 args(
// Without wgmma (sm_80 .. sm_90) the plan never takes 128 rows.
// RUN: moe-opt %s --convert-moe-to-gpu --canonicalize | FileCheck %s --check-prefix=MMA

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

// BIG-LABEL: func.func @prefill
// BIG-NOT: call @__moe_launch
// BIG: call @__moe_launch_moe_gate_kernel_topk_router_bf16(
// BIG-NOT: call @__moe_launch
// BIG: call @__moe_launch_moe_align_kernel_weighted_combine_f32_bf16({{.*}}, %c9, %c128, %memref
// BIG-NOT: call @__moe_launch
// BIG: call @__moe_launch_moe_mma_gemm1_gather_swiglu_bf16_m128_wgmma(%c1, %{{[^,]*}}, %c1, %c256, %c1, %c1,
// BIG-NEXT: call @__moe_launch_moe_mma_gemm2_weighted_combine_bf16_m128_outf32_wgmma(%c1, %{{[^,]*}}, %c1, %c256, %c1, %c1,
// BIG-NOT: call @__moe_launch
// BIG: return
// BIG-LABEL: func.func @dynamic
// BIG: call @__moe_launch_moe_align_kernel_weighted_combine_f32_bf16({{.*}}, %[[R:[^,]*]], %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}})
// BIG: %[[SMALL:.*]] = arith.cmpi eq, %[[R]], %c16 : index
// BIG-NEXT: scf.if %[[SMALL]] {
// BIG-NEXT: call @__moe_launch_moe_mma_gemm1_gather_swiglu_bf16_m16(
// BIG-NEXT: call @__moe_launch_moe_mma_gemm2_weighted_combine_bf16_m16_outf32(
// BIG-NEXT: } else {
// BIG-NEXT: %[[LARGE:.*]] = arith.cmpi eq, %[[R]], %c128 : index
// BIG-NEXT: scf.if %[[LARGE]] {
// BIG-NEXT: call @__moe_launch_moe_mma_gemm1_gather_swiglu_bf16_m128_wgmma(
// BIG-NEXT: call @__moe_launch_moe_mma_gemm2_weighted_combine_bf16_m128_outf32_wgmma(
// BIG-NEXT: } else {
// BIG-NEXT: call @__moe_launch_moe_mma_gemm1_gather_swiglu_bf16_m64_wgmma(
// BIG-NEXT: call @__moe_launch_moe_mma_gemm2_weighted_combine_bf16_m64_outf32_wgmma(
// BIG-NEXT: }
// BIG-NEXT: }
// BIG-NOT: call @__moe_launch
// BIG: return
// The shared expert is folded into the routed GEMM launches (its tiles
// first), on the same 128-row tiles: still 4 launches.
// BIG-LABEL: func.func @withShared
// BIG: call @__moe_launch_moe_gate_kernel_topk_router_sgate_bf16(
// BIG-NOT: call @__moe_launch
// BIG: call @__moe_launch_moe_align_kernel_weighted_combine_f32_bf16(
// BIG-NOT: call @__moe_launch
// BIG: call @__moe_launch_moe_mma_gemm1_gather_swiglu_foldshared_bf16_m128_wgmma(%{{[^,]*}}, %{{[^,]*}}, %c1{{[_0-9]*}}, %c256{{[_0-9]*}}, %c1{{[_0-9]*}}, %c1{{[_0-9]*}},
// BIG-NEXT: call @__moe_launch_moe_mma_gemm2_weighted_combine_foldshared_gated_bf16_m128_outf32_wgmma(
// BIG-NOT: call @__moe_launch
// BIG: return
// OFF-LABEL: func.func @prefill
// OFF: call @__moe_launch_moe_align_kernel_weighted_combine_f32_bf16({{.*}}, %c64, %memref
// OFF: call @__moe_launch_moe_mma_gemm1_gather_swiglu_bf16_m64_wgmma(
// OFF-LABEL: func.func @dynamic
// OFF-NOT: m128
// OFF: return
// MMA-LABEL: func.func @prefill
// MMA: call @__moe_launch_moe_mma_gemm1_gather_swiglu_bf16_m64(
// MMA-NOT: m128
// MMA: return
func.func @prefill(%x: tensor<320x64xbf16>, %wr: tensor<64x4xbf16>, %w1: tensor<4x64x128xbf16>,
                   %w2: tensor<4x64x64xbf16>) -> tensor<320x64xbf16> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>}
         : (tensor<320x64xbf16>, tensor<64x4xbf16>, tensor<4x64x128xbf16>, tensor<4x64x64xbf16>)
         -> tensor<320x64xbf16>
  return %y : tensor<320x64xbf16>
}

func.func @dynamic(%x: tensor<?x64xbf16>, %wr: tensor<64x4xbf16>, %w1: tensor<4x64x128xbf16>,
                   %w2: tensor<4x64x64xbf16>) -> tensor<?x64xbf16> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>}
         : (tensor<?x64xbf16>, tensor<64x4xbf16>, tensor<4x64x128xbf16>, tensor<4x64x64xbf16>)
         -> tensor<?x64xbf16>
  return %y : tensor<?x64xbf16>
}

func.func @withShared(%x: tensor<320x64xbf16>, %wr: tensor<64x4xbf16>, %w1: tensor<4x64x128xbf16>,
                      %w2: tensor<4x64x64xbf16>, %s1: tensor<64x128xbf16>, %s2: tensor<64x64xbf16>,
                      %sg: tensor<64x1xbf16>) -> tensor<320x64xbf16> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) shared(%s1, %s2) shared_gate(%sg)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>}
         : (tensor<320x64xbf16>, tensor<64x4xbf16>, tensor<4x64x128xbf16>, tensor<4x64x64xbf16>,
            tensor<64x128xbf16>, tensor<64x64xbf16>, tensor<64x1xbf16>) -> tensor<320x64xbf16>
  return %y : tensor<320x64xbf16>
}

func.func @main() {
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c64 = arith.constant 64 : index
  %c128 = arith.constant 128 : index
  %c320 = arith.constant 320 : index
  %one = arith.constant 1.0 : f32
  %s03 = arith.constant 0.3 : f32
  %fa = arith.constant 0.37 : f32
  %fb = arith.constant 0.53 : f32
  %fc = arith.constant 0.011 : f32
  %fd = arith.constant 0.029 : f32
  %xd = func.call @fill(%c1, %c320, %c64, %one, %fa) : (index, index, index, f32, f32) -> tensor<?x?x?xbf16>
  %x3 = tensor.cast %xd : tensor<?x?x?xbf16> to tensor<1x320x64xbf16>
  %x = tensor.collapse_shape %x3 [[0, 1], [2]] : tensor<1x320x64xbf16> into tensor<320x64xbf16>
  %wrd = func.call @fill(%c1, %c64, %c4, %one, %fb) : (index, index, index, f32, f32) -> tensor<?x?x?xbf16>
  %wr3 = tensor.cast %wrd : tensor<?x?x?xbf16> to tensor<1x64x4xbf16>
  %wr = tensor.collapse_shape %wr3 [[0, 1], [2]] : tensor<1x64x4xbf16> into tensor<64x4xbf16>
  %w1d = func.call @fill(%c4, %c64, %c128, %s03, %fc) : (index, index, index, f32, f32) -> tensor<?x?x?xbf16>
  %w1 = tensor.cast %w1d : tensor<?x?x?xbf16> to tensor<4x64x128xbf16>
  %w2d = func.call @fill(%c4, %c64, %c64, %s03, %fd) : (index, index, index, f32, f32) -> tensor<?x?x?xbf16>
  %w2 = tensor.cast %w2d : tensor<?x?x?xbf16> to tensor<4x64x64xbf16>

  %y1 = func.call @prefill(%x, %wr, %w1, %w2) : (tensor<320x64xbf16>, tensor<64x4xbf16>, tensor<4x64x128xbf16>, tensor<4x64x64xbf16>) -> tensor<320x64xbf16>
  %p1 = tensor.cast %y1 : tensor<320x64xbf16> to tensor<?x64xbf16>
  func.call @print(%p1) : (tensor<?x64xbf16>) -> ()
  %xdyn = tensor.cast %x : tensor<320x64xbf16> to tensor<?x64xbf16>
  %y2 = func.call @dynamic(%xdyn, %wr, %w1, %w2) : (tensor<?x64xbf16>, tensor<64x4xbf16>, tensor<4x64x128xbf16>, tensor<4x64x64xbf16>) -> tensor<?x64xbf16>
  func.call @print(%y2) : (tensor<?x64xbf16>) -> ()
  %x128 = tensor.extract_slice %x[0, 0] [128, 64] [1, 1] : tensor<320x64xbf16> to tensor<128x64xbf16>
  %x128d = tensor.cast %x128 : tensor<128x64xbf16> to tensor<?x64xbf16>
  %y3 = func.call @dynamic(%x128d, %wr, %w1, %w2) : (tensor<?x64xbf16>, tensor<64x4xbf16>, tensor<4x64x128xbf16>, tensor<4x64x64xbf16>) -> tensor<?x64xbf16>
  func.call @print(%y3) : (tensor<?x64xbf16>) -> ()
  %x8 = tensor.extract_slice %x[0, 0] [8, 64] [1, 1] : tensor<320x64xbf16> to tensor<8x64xbf16>
  %x8d = tensor.cast %x8 : tensor<8x64xbf16> to tensor<?x64xbf16>
  %y4 = func.call @dynamic(%x8d, %wr, %w1, %w2) : (tensor<?x64xbf16>, tensor<64x4xbf16>, tensor<4x64x128xbf16>, tensor<4x64x64xbf16>) -> tensor<?x64xbf16>
  func.call @print(%y4) : (tensor<?x64xbf16>) -> ()
  %fe = arith.constant 0.017 : f32
  %ff = arith.constant 0.043 : f32
  %fg = arith.constant 0.61 : f32
  %s1d = func.call @fill(%c1, %c64, %c128, %s03, %fe) : (index, index, index, f32, f32) -> tensor<?x?x?xbf16>
  %s13 = tensor.cast %s1d : tensor<?x?x?xbf16> to tensor<1x64x128xbf16>
  %s1 = tensor.collapse_shape %s13 [[0, 1], [2]] : tensor<1x64x128xbf16> into tensor<64x128xbf16>
  %s2d = func.call @fill(%c1, %c64, %c64, %s03, %ff) : (index, index, index, f32, f32) -> tensor<?x?x?xbf16>
  %s23 = tensor.cast %s2d : tensor<?x?x?xbf16> to tensor<1x64x64xbf16>
  %s2 = tensor.collapse_shape %s23 [[0, 1], [2]] : tensor<1x64x64xbf16> into tensor<64x64xbf16>
  %sgd = func.call @fill(%c1, %c64, %c1, %one, %fg) : (index, index, index, f32, f32) -> tensor<?x?x?xbf16>
  %sg3 = tensor.cast %sgd : tensor<?x?x?xbf16> to tensor<1x64x1xbf16>
  %sg = tensor.collapse_shape %sg3 [[0, 1], [2]] : tensor<1x64x1xbf16> into tensor<64x1xbf16>
  %y5 = func.call @withShared(%x, %wr, %w1, %w2, %s1, %s2, %sg) : (tensor<320x64xbf16>, tensor<64x4xbf16>, tensor<4x64x128xbf16>, tensor<4x64x64xbf16>, tensor<64x128xbf16>, tensor<64x64xbf16>, tensor<64x1xbf16>) -> tensor<320x64xbf16>
  %p5 = tensor.cast %y5 : tensor<320x64xbf16> to tensor<?x64xbf16>
  func.call @print(%p5) : (tensor<?x64xbf16>) -> ()
  return
}
