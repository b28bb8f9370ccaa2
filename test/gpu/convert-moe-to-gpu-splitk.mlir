// REQUIRES: host-supports-nvptx
// Split-K of the fused layer's 16-row tensor-core GEMMs (docs/gpu.md,
// "Split-K at decode") on the Mixtral shape (D = 4096, H = 14336, E = 8,
// k = 2, bf16): S is chosen from the shape for about 512 blocks per GEMM,
// with slices of at least 8 k-tiles, and the layer stays 4 launches.
//  * T = 1 (2 rows, 2 tiles): GEMM1 224 column blocks x 2 tiles -> S = 2;
//    GEMM2 32 column blocks x 2 tiles -> S = 8.
//  * T = 16 (32 rows, 8 tiles): GEMM1 1792 blocks -> S = 1 (the plain
//    kernel); GEMM2 256 blocks -> S = 2.
//  * decode-split-k=1: the plain kernels; decode-split-k=5: S = 5 for both.
//  * A layer with a shared expert (folded into the GEMM launches) does not
//    split, even when decode-split-k asks for it: the split-K workspace and
//    tile counters do not cover the shared expert's tiles.
// RUN: moe-opt %s --convert-moe-to-gpu -canonicalize -cse | FileCheck %s
// RUN: moe-opt %s %moe_gpu_target_sm90 --moe-gpu-configure=decode-split-k=1 --convert-moe-to-gpu -canonicalize -cse | FileCheck %s --check-prefix=ONE
// RUN: moe-opt %s %moe_gpu_target_sm90 --moe-gpu-configure=decode-split-k=5 --convert-moe-to-gpu -canonicalize -cse | FileCheck %s --check-prefix=FIVE
// RUN: not moe-opt %s %moe_gpu_target_sm90 --moe-gpu-configure=decode-split-k=-1 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not moe-opt %s --moe-nvptx-pipeline=decode-split-k=2000 2>&1 | FileCheck %s --check-prefix=BADPIPE
// BAD: convert-moe-to-gpu-splitk.mlir:{{[0-9]+}}:{{[0-9]+}}: error: moe-gpu-configure: #moe.gpu_config needs split_k in 0..1024 (0 = chosen from the shape), got -1
// BADPIPE: moe-nvptx-pipeline: decode-split-k=2000 is out of range; expected 0 (chosen from the shape) to 1024

// CHECK-LABEL: func.func @t1(
// CHECK-NOT: call @__moe_launch
// CHECK: call @__moe_launch_moe_gate_kernel_topk_router_bf16(
// CHECK-NOT: call @__moe_launch
// CHECK: call @__moe_launch_moe_align_kernel_weighted_combine_f32_bf16(
// CHECK-NOT: call @__moe_launch
// CHECK: call @__moe_launch_moe_mma_gemm1_gather_swiglu_bf16_m16_splitk(%c224, %c2, %c2, %c128, %c1, %c1, {{.*}}, %c4096, %c14336, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %c2)
// CHECK-NEXT: call @__moe_launch_moe_mma_gemm2_weighted_combine_bf16_m16_outf32_splitk(%c32, %c2, %c8, %c128, %c1, %c1, {{.*}}, %c8)
// CHECK-NOT: call @__moe_launch
// CHECK: return
// CHECK-LABEL: func.func @t16(
// CHECK: call @__moe_launch_moe_gate_kernel_topk_router_bf16(
// CHECK: call @__moe_launch_moe_align_kernel_weighted_combine_f32_bf16(
// CHECK-NOT: call @__moe_launch
// CHECK: call @__moe_launch_moe_mma_gemm1_gather_swiglu_bf16_m16(%c224, %c10, %c1, %c128, %c1, %c1,
// CHECK-NEXT: call @__moe_launch_moe_mma_gemm2_weighted_combine_bf16_m16_outf32_splitk(%c32, %c10, %c2, %c128, %c1, %c1, {{.*}}, %c2)
// CHECK-NOT: call @__moe_launch
// CHECK: return

// ONE-LABEL: func.func @t1(
// ONE: call @__moe_launch_moe_mma_gemm1_gather_swiglu_bf16_m16(%c224, %c2, %c1,
// ONE-NEXT: call @__moe_launch_moe_mma_gemm2_weighted_combine_bf16_m16_outf32(%c32, %c2, %c1,
// ONE-NOT: splitk
// ONE-LABEL: func.func @t16(
// ONE: call @__moe_launch_moe_mma_gemm1_gather_swiglu_bf16_m16(
// ONE-NEXT: call @__moe_launch_moe_mma_gemm2_weighted_combine_bf16_m16_outf32(

// FIVE-LABEL: func.func @t16(
// FIVE: call @__moe_launch_moe_mma_gemm1_gather_swiglu_bf16_m16_splitk(%c224, %c10, %c5, {{.*}}, %c5)
// FIVE-NEXT: call @__moe_launch_moe_mma_gemm2_weighted_combine_bf16_m16_outf32_splitk(%c32, %c10, %c5, {{.*}}, %c5)
// FIVE-LABEL: func.func @shared(
// FIVE: call @__moe_launch_moe_mma_gemm1_gather_swiglu_foldshared_bf16_m16(%c224, %c3, %c1,
// FIVE-NEXT: call @__moe_launch_moe_mma_gemm2_weighted_combine_foldshared_gated_bf16_m16_outf32(%c32, %c3, %c1,
// FIVE-NOT: splitk
// FIVE: return

func.func @t1(%x: tensor<1x4096xbf16>, %wr: tensor<4096x8xbf16>, %w1: tensor<8x4096x28672xbf16>,
              %w2: tensor<8x14336x4096xbf16>) -> tensor<1x4096xbf16> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>}
         : (tensor<1x4096xbf16>, tensor<4096x8xbf16>, tensor<8x4096x28672xbf16>, tensor<8x14336x4096xbf16>)
         -> tensor<1x4096xbf16>
  return %y : tensor<1x4096xbf16>
}

func.func @t16(%x: tensor<16x4096xbf16>, %wr: tensor<4096x8xbf16>, %w1: tensor<8x4096x28672xbf16>,
               %w2: tensor<8x14336x4096xbf16>) -> tensor<16x4096xbf16> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>}
         : (tensor<16x4096xbf16>, tensor<4096x8xbf16>, tensor<8x4096x28672xbf16>, tensor<8x14336x4096xbf16>)
         -> tensor<16x4096xbf16>
  return %y : tensor<16x4096xbf16>
}

func.func @shared(%x: tensor<1x4096xbf16>, %wr: tensor<4096x8xbf16>, %w1: tensor<8x4096x28672xbf16>,
                  %w2: tensor<8x14336x4096xbf16>, %s1: tensor<4096x28672xbf16>,
                  %s2: tensor<14336x4096xbf16>, %sg: tensor<4096x1xbf16>) -> tensor<1x4096xbf16> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) shared(%s1, %s2) shared_gate(%sg)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>}
         : (tensor<1x4096xbf16>, tensor<4096x8xbf16>, tensor<8x4096x28672xbf16>, tensor<8x14336x4096xbf16>,
            tensor<4096x28672xbf16>, tensor<14336x4096xbf16>, tensor<4096x1xbf16>) -> tensor<1x4096xbf16>
  return %y : tensor<1x4096xbf16>
}
