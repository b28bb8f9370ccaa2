// REQUIRES: host-supports-nvptx
// RUN: moe-opt %s -split-input-file --convert-moe-to-gpu --canonicalize | FileCheck %s

// Launches and row tiles of a fused layer (Kernels.h). The host picks the
// row tile R of the grouped GEMMs from T*k: R = 16 when T*k < 64 * E
// (decode), else 64 (prefill); the grid has
// maxTiles = max(1, min(ceil(T*k / R) + E, T*k)) row tiles.
//
// Mixtral decode, T = 16, E = 8, k = 2: four launches (router + gate, align,
// GEMM1, GEMM2 with the combine; a fifth launch anywhere fails the
// CHECK-NOTs), R = 16 and maxTiles = min(2 + 8, 32) = 10: the launched grid
// pads to 10 * 16 = 160 rows, 5x T*k = 32 (the bound is 6x; 64-row tiles
// gave 9 * 64 = 576 rows, 18x).

// CHECK-LABEL: func.func @decode
// CHECK-NOT: call @__moe_launch
// CHECK: call @__moe_launch_moe_gate_kernel_topk_router(%c1, %c1, %c1, %c128, %c1, %c1,
// CHECK-NOT: call @__moe_launch
// (..., Pmax = 160, maxTiles = 10, tileRows = 16, counters, 16 * ceil(64/64), y, D)
// CHECK: call @__moe_launch_moe_align_kernel_weighted_combine({{.*}}, %c160, %c10, %c16, %{{[^,]*}}, %c16, %{{[^,]*}}, %c64)
// CHECK-NOT: call @__moe_launch
// CHECK: call @__moe_launch_moe_gemm1_gather_kernel_swiglu(%c4, %c10, %c1, %c256, %c1, %c1, {{.*}}, %c64, %c224, %c16)
// CHECK-NOT: call @__moe_launch
// CHECK: call @__moe_launch_moe_gemm2_weighted_kernel_combine(%c1, %c10, %c1, %c256, %c1, %c1, {{.*}}, %c224, %c64, %c16,
// CHECK-NOT: call @__moe_launch
// CHECK: return
func.func @decode(%x: tensor<16x64xf32>, %wr: tensor<64x8xf32>, %w1: tensor<8x64x448xf32>,
                  %w2: tensor<8x224x64xf32>) -> tensor<16x64xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>}
         : (tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x64x448xf32>, tensor<8x224x64xf32>)
         -> tensor<16x64xf32>
  return %y : tensor<16x64xf32>
}

// -----

// Prefill, T = 4096: the same four launches; 256 router + gate blocks of 16
// tokens, R = 64 and maxTiles = min(128 + 8, 8192) = 136.

// CHECK-LABEL: func.func @prefill
// CHECK-NOT: call @__moe_launch
// CHECK: call @__moe_launch_moe_gate_kernel_topk_router(%c256, %c1, %c1, %c128, %c1, %c1,
// CHECK-NOT: call @__moe_launch
// CHECK: call @__moe_launch_moe_align_kernel_weighted_combine({{.*}}, %c8704, %c136, %c64,
// CHECK-NOT: call @__moe_launch
// CHECK: call @__moe_launch_moe_gemm1_gather_kernel_swiglu(%c4, %c136, %c1, %c256, %c1, %c1, {{.*}}, %c64, %c224, %c64)
// CHECK-NOT: call @__moe_launch
// CHECK: call @__moe_launch_moe_gemm2_weighted_kernel_combine(%c1, %c136, %c1, %c256, %c1, %c1, {{.*}}, %c224, %c64, %c64,
// CHECK-NOT: call @__moe_launch
// CHECK: return
func.func @prefill(%x: tensor<4096x64xf32>, %wr: tensor<64x8xf32>, %w1: tensor<8x64x448xf32>,
                   %w2: tensor<8x224x64xf32>) -> tensor<4096x64xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>}
         : (tensor<4096x64xf32>, tensor<64x8xf32>, tensor<8x64x448xf32>, tensor<8x224x64xf32>)
         -> tensor<4096x64xf32>
  return %y : tensor<4096x64xf32>
}

// -----

// Dynamic T: the row tile is chosen at run time (T*k < 512 ? 16 : 64) and
// passed to the align kernel and both GEMMs; still four launches.

// CHECK-LABEL: func.func @dynamic
// CHECK: %[[T:.*]] = tensor.dim %{{.*}}, %c0 : tensor<?x64xf32>
// CHECK-NOT: call @__moe_launch
// CHECK: call @__moe_launch_moe_gate_kernel_topk_router(
// CHECK-NOT: call @__moe_launch
// CHECK: %[[SMALL:.*]] = arith.cmpi ult, %{{.*}}, %c512 : index
// CHECK: %[[R:.*]] = arith.select %[[SMALL]], %c16, %c64 : index
// CHECK-NOT: call @__moe_launch
// CHECK: call @__moe_launch_moe_align_kernel_weighted_combine({{.*}}, %[[R]],
// CHECK-NOT: call @__moe_launch
// CHECK: call @__moe_launch_moe_gemm1_gather_kernel_swiglu({{.*}}, %[[R]])
// CHECK-NOT: call @__moe_launch
// CHECK: call @__moe_launch_moe_gemm2_weighted_kernel_combine({{.*}}, %[[R]],
// CHECK-NOT: call @__moe_launch
// CHECK: return
func.func @dynamic(%x: tensor<?x64xf32>, %wr: tensor<64x8xf32>, %w1: tensor<8x64x448xf32>,
                   %w2: tensor<8x224x64xf32>) -> tensor<?x64xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>}
         : (tensor<?x64xf32>, tensor<64x8xf32>, tensor<8x64x448xf32>, tensor<8x224x64xf32>)
         -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}
