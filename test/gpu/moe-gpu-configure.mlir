// --moe-gpu-configure chooses each op's #moe.gpu_config from the
// #nvvm.target of gpu.module @moe_kernels, by upstream's SM-version rules:
// sm_90a (arch-accelerated) -> wgmma; sm_80 and newer -> mma.sync; older,
// or tensor-cores=false -> CUDA cores.
// REQUIRES: host-supports-nvptx
// RUN: moe-opt %s %moe_gpu_target_sm90a --moe-gpu-configure | FileCheck %s --check-prefixes=CHECK,WGMMA
// RUN: moe-opt %s %moe_gpu_target_sm90 --moe-gpu-configure | FileCheck %s --check-prefixes=CHECK,MMA
// RUN: moe-opt %s %moe_gpu_target_sm80 --moe-gpu-configure | FileCheck %s --check-prefixes=CHECK,MMA
// RUN: moe-opt %s %moe_gpu_target_sm75 --moe-gpu-configure | FileCheck %s --check-prefixes=CHECK,CUDA
// RUN: moe-opt %s %moe_gpu_target_sm90a --moe-gpu-configure=tensor-cores=false | FileCheck %s --check-prefixes=CHECK,CUDA
// The options become the parameters (big-tile-rows only with wgmma).
// RUN: moe-opt %s %moe_gpu_target_sm90a --moe-gpu-configure="big-tile-rows=256 decode-split-k=3 mma-stages=6 wgmma-groups-in-flight=0" | FileCheck %s --check-prefixes=CHECK,OPTS
// RUN: moe-opt %s %moe_gpu_target_sm80 --moe-gpu-configure="big-tile-rows=256 decode-split-k=3" | FileCheck %s --check-prefixes=CHECK,OPTS80
// The NVPTX pipeline: the kernel module, its target, then the choice.
// RUN: moe-opt %s --moe-nvptx-pipeline="chip=sm_90a decode-split-k=2" --dump-pass-pipeline -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=PIPE
// Errors: no target; option values out of range (the attribute's verifier).
// RUN: not moe-opt %s --moe-gpu-configure 2>&1 | FileCheck %s --check-prefix=NOTARGET
// RUN: not moe-opt %s %moe_gpu_target_sm90a --moe-gpu-configure=mma-stages=9 2>&1 | FileCheck %s --check-prefix=STAGES
// RUN: not moe-opt %s %moe_gpu_target_sm90a --moe-gpu-configure=wgmma-groups-in-flight=2 2>&1 | FileCheck %s --check-prefix=INFLIGHT
// RUN: not moe-opt %s %moe_gpu_target_sm90 --moe-gpu-configure=big-tile-rows=-1 2>&1 | FileCheck %s --check-prefix=BIG
// convert-moe-to-gpu reads the attribute: the chosen wgmma (128-row tiles:
// 128 rows per expert), and an override in the IR that wins over the target
// (CUDA cores on sm_90a). The chain's expert_ffn keeps its CUDA cores too.
// RUN: moe-opt %s %moe_gpu_target_sm90a --moe-gpu-configure --convert-moe-to-gpu | FileCheck %s --check-prefix=LOWER

// A decomposed (and fused) layer passes its configuration on to its chain.
// RUN: moe-opt %s %moe_gpu_target_sm90a --moe-gpu-configure --moe-decompose | FileCheck %s --check-prefix=DECOMP
// RUN: moe-opt %s %moe_gpu_target_sm90a --moe-gpu-configure --moe-decompose --moe-fuse | FileCheck %s --check-prefix=FUSED
// DECOMP-LABEL: func.func @layers
// DECOMP: moe.route {{.*}}moe.gpu_config = #moe.gpu_config<engine = wgmma,
// DECOMP: moe.expert_ffn {{.*}}moe.gpu_config = #moe.gpu_config<engine = wgmma,
// DECOMP: moe.route {{.*}}moe.gpu_config = #moe.gpu_config<engine = cuda_core,
// DECOMP: moe.expert_ffn {{.*}}moe.gpu_config = #moe.gpu_config<engine = cuda_core,
// FUSED-LABEL: func.func @layers
// FUSED: moe.fused_experts {{.*}}moe.gpu_config = #moe.gpu_config<engine = wgmma,
// FUSED: moe.fused_experts {{.*}}moe.gpu_config = #moe.gpu_config<engine = cuda_core,

// PIPE:      moe-gpu-kernel-module,
// PIPE-NEXT: nvvm-attach-target{{{.*}}chip=sm_90a {{.*}}module=^moe_kernels$
// PIPE-NEXT: moe-gpu-configure{big-tile-rows=128 decode-split-k=2 mma-stages=0 tensor-cores=true wgmma-groups-in-flight=1},
// PIPE-NEXT: convert-moe-to-gpu{

// NOTARGET: error: moe-gpu-configure: no #nvvm.target on gpu.module @moe_kernels to choose the GPU strategy from; attach one first (--moe-gpu-kernel-module --nvvm-attach-target="module=moe_kernels chip=sm_90 features=+ptx80")
// STAGES: error: moe-gpu-configure: #moe.gpu_config needs stages = 0 (the defaults) or in 2..8, got 9
// INFLIGHT: error: moe-gpu-configure: #moe.gpu_config needs groups_in_flight = 0 or 1, got 2
// BIG: error: moe-gpu-configure: big-tile-rows must be >= 0, got -1

// Every op that takes a configuration gets one; the gate does not; one
// already there is kept.
// CHECK-LABEL: func.func @chain
// WGMMA:  moe.route {{.*}} {moe.gpu_config = #moe.gpu_config<engine = wgmma, big_tile_rows = 128, split_k = 0, stages = 0, groups_in_flight = 1>}
// MMA:    moe.route {{.*}} {moe.gpu_config = #moe.gpu_config<engine = mma_sync, big_tile_rows = 0, split_k = 0, stages = 0, groups_in_flight = 1>}
// CUDA:   moe.route {{.*}} {moe.gpu_config = #moe.gpu_config<engine = cuda_core, big_tile_rows = 0, split_k = 0, stages = 0, groups_in_flight = 1>}
// OPTS:   moe.route {{.*}} {moe.gpu_config = #moe.gpu_config<engine = wgmma, big_tile_rows = 256, split_k = 3, stages = 6, groups_in_flight = 0>}
// OPTS80: moe.route {{.*}} {moe.gpu_config = #moe.gpu_config<engine = mma_sync, big_tile_rows = 0, split_k = 3, stages = 0, groups_in_flight = 1>}
// CHECK-NEXT: moe.gate
// CHECK-NOT: moe.gpu_config
// CHECK-SAME: : (tensor
// CHECK-NEXT: moe.expert_ffn {{.*}}moe.gpu_config = #moe.gpu_config<engine = cuda_core, big_tile_rows = 0, split_k = 0, stages = 0, groups_in_flight = 1>
func.func @chain(%x: tensor<16x64xbf16>, %wr: tensor<64x4xbf16>, %w1: tensor<4x64x128xbf16>,
                 %w2: tensor<4x128x64xbf16>, %rows: tensor<32x64xbf16>, %off: tensor<5xi32>)
    -> (tensor<16x2xf32>, tensor<16x2xi32>, tensor<32x64xbf16>) {
  %logits = moe.route %x router(%wr) : (tensor<16x64xbf16>, tensor<64x4xbf16>) -> tensor<16x4xf32>
  %w, %i = moe.gate %logits {routing = #moe.top_k<k = 2>} : (tensor<16x4xf32>) -> (tensor<16x2xf32>, tensor<16x2xi32>)
  %y = moe.expert_ffn %rows, %off experts(%w1, %w2) {activation = #moe.activation<silu>,
      moe.gpu_config = #moe.gpu_config<engine = cuda_core, big_tile_rows = 0, split_k = 0, stages = 0, groups_in_flight = 1>}
      : (tensor<32x64xbf16>, tensor<5xi32>, tensor<4x64x128xbf16>, tensor<4x128x64xbf16>) -> tensor<32x64xbf16>
  return %w, %i, %y : tensor<16x2xf32>, tensor<16x2xi32>, tensor<32x64xbf16>
}

// LOWER-LABEL: func.func @chain
// LOWER: call @__moe_launch_moe_gemm1_kernel_silu_bf16(
// LOWER-LABEL: func.func @layers
// LOWER: call @__moe_launch_moe_mma_gemm1_gather_swiglu_bf16_m128_wgmma(
// LOWER: call @__moe_launch_moe_mma_gemm2_weighted_combine_bf16_m128_outf32_wgmma(
// LOWER-NOT: moe_mma_gemm
// LOWER: call @__moe_launch_moe_gemm1_gather_kernel_swiglu_bf16(
// LOWER: call @__moe_launch_moe_gemm2_weighted_kernel_combine_bf16_bf16_f32_bf16(
// LOWER-NOT: moe_mma_gemm
// LOWER: return
func.func @layers(%x: tensor<256x64xbf16>, %wr: tensor<64x4xbf16>, %w1: tensor<4x64x256xbf16>,
                  %w2: tensor<4x128x64xbf16>) -> (tensor<256x64xbf16>, tensor<256x64xbf16>) {
  %a = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>}
      : (tensor<256x64xbf16>, tensor<64x4xbf16>, tensor<4x64x256xbf16>, tensor<4x128x64xbf16>) -> tensor<256x64xbf16>
  %b = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>,
      moe.gpu_config = #moe.gpu_config<engine = cuda_core, big_tile_rows = 0, split_k = 0, stages = 0, groups_in_flight = 1>}
      : (tensor<256x64xbf16>, tensor<64x4xbf16>, tensor<4x64x256xbf16>, tensor<4x128x64xbf16>) -> tensor<256x64xbf16>
  return %a, %b : tensor<256x64xbf16>, tensor<256x64xbf16>
}
