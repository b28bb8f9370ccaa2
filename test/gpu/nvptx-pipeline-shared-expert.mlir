// REQUIRES: host-supports-nvptx
// RUN: moe-opt %s --moe-nvptx-pipeline="chip=sm_80 format=isa" | FileCheck %s
// RUN: moe-opt %s --moe-nvptx-pipeline="chip=sm_90a features=+ptx80 format=isa" | FileCheck %s

// A layer with a shared expert and its gate (Qwen2-MoE / DeepSeek style) at
// T = 16 is four launches on the final host code, in f32 (CUDA-core GEMMs)
// and bf16 (tensor-core GEMMs; at decode the 16-row mma.sync tile on sm_90a
// too): the gate kernel also computes sigmoid(x sg), GEMM1 and GEMM2 run the
// shared expert's tile (ceil(16 / 16) = 1) before the plan's 10 (grid rows
// 11), GEMM2's combine starts every token's sum from the shared output. No
// tile map, router GEMM or sigmoid launch is left: a fifth launch fails the
// CHECK-NOTs.

// CHECK-LABEL: llvm.func @shared_f32
// CHECK-NOT: gpu.launch_func
// CHECK: gpu.launch_func <%{{.*}} : !llvm.ptr> @moe_kernels::@moe_gate_kernel_topk_router_sgate blocks in
// CHECK-NOT: gpu.launch_func
// CHECK: gpu.launch_func <%{{.*}} : !llvm.ptr> @moe_kernels::@moe_align_kernel_weighted_combine blocks in
// CHECK-NOT: gpu.launch_func
// CHECK: gpu.launch_func <%{{.*}} : !llvm.ptr> @moe_kernels::@moe_gemm1_gather_kernel_swiglu_foldshared blocks in
// CHECK-NOT: gpu.launch_func
// CHECK: gpu.launch_func <%{{.*}} : !llvm.ptr> @moe_kernels::@moe_gemm2_weighted_kernel_combine_foldshared_gated blocks in
// CHECK-NOT: gpu.launch_func
// CHECK: llvm.return
func.func @shared_f32(%x: tensor<16x128xf32>, %wr: tensor<128x8xf32>, %w1: tensor<8x128x128xf32>,
                      %w2: tensor<8x64x128xf32>, %s1: tensor<128x192xf32>, %s2: tensor<96x128xf32>,
                      %sg: tensor<128x1xf32>) -> tensor<16x128xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) shared(%s1, %s2) shared_gate(%sg)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>}
         : (tensor<16x128xf32>, tensor<128x8xf32>, tensor<8x128x128xf32>, tensor<8x64x128xf32>,
            tensor<128x192xf32>, tensor<96x128xf32>, tensor<128x1xf32>) -> tensor<16x128xf32>
  return %y : tensor<16x128xf32>
}

// CHECK-LABEL: llvm.func @shared_bf16
// CHECK-NOT: gpu.launch_func
// CHECK: gpu.launch_func <%{{.*}} : !llvm.ptr> @moe_kernels::@moe_gate_kernel_topk_router_sgate_bf16 blocks in
// CHECK-NOT: gpu.launch_func
// CHECK: gpu.launch_func <%{{.*}} : !llvm.ptr> @moe_kernels::@moe_align_kernel_weighted_combine_f32_bf16 blocks in
// CHECK-NOT: gpu.launch_func
// CHECK: gpu.launch_func <%{{.*}} : !llvm.ptr> @moe_kernels::@moe_mma_gemm1_gather_swiglu_foldshared_bf16_m16 blocks in
// CHECK-NOT: gpu.launch_func
// CHECK: gpu.launch_func <%{{.*}} : !llvm.ptr> @moe_kernels::@moe_mma_gemm2_weighted_combine_foldshared_gated_bf16_m16_outf32 blocks in
// CHECK-NOT: gpu.launch_func
// CHECK: llvm.return
func.func @shared_bf16(%x: tensor<16x128xbf16>, %wr: tensor<128x8xbf16>,
                       %w1: tensor<8x128x128xbf16>, %w2: tensor<8x64x128xbf16>,
                       %s1: tensor<128x192xbf16>, %s2: tensor<96x128xbf16>,
                       %sg: tensor<128x1xbf16>) -> tensor<16x128xbf16> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) shared(%s1, %s2) shared_gate(%sg)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>}
         : (tensor<16x128xbf16>, tensor<128x8xbf16>, tensor<8x128x128xbf16>,
            tensor<8x64x128xbf16>, tensor<128x192xbf16>, tensor<96x128xbf16>,
            tensor<128x1xbf16>) -> tensor<16x128xbf16>
  return %y : tensor<16x128xbf16>
}
