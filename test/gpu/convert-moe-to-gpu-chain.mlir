// REQUIRES: host-supports-nvptx
// RUN: moe-opt %s --moe-decompose --convert-moe-to-gpu --canonicalize | FileCheck %s --check-prefix=CHAIN
// RUN: moe-opt %s --moe-decompose --moe-fuse --convert-moe-to-gpu --canonicalize | FileCheck %s --check-prefix=FUSED

// The unfused chain: every op copies its operands in and its results out.
// CHAIN-LABEL: func.func @layer
// CHAIN: call @__moe_launch_moe_route_kernel_bias(
// CHAIN: call @__moe_launch_moe_gate_kernel_moesart(
// CHAIN: call @__moe_launch_moe_align_kernel(
// CHAIN: call @__moe_launch_moe_dispatch_rows_kernel(
// CHAIN: call @__moe_launch_moe_tile_map_kernel(
// CHAIN: gpu.memset
// CHAIN: call @__moe_launch_moe_gemm1_kernel_relu(
// CHAIN: call @__moe_launch_moe_gemm2_kernel(
// CHAIN: call @__moe_launch_moe_combine_kernel(
// CHAIN-NOT: moe.

// The fused op: the gather inside GEMM1, the routed weight and the
// per-token combine inside GEMM2 (three launches for moe.fused_experts).
// FUSED-LABEL: func.func @layer
// FUSED: call @__moe_launch_moe_route_kernel_bias(
// FUSED: call @__moe_launch_moe_gate_kernel_moesart(
// FUSED-NOT: call @__moe_launch
// FUSED: call @__moe_launch_moe_align_kernel_weighted_combine(
// FUSED-NOT: call @__moe_launch
// FUSED: call @__moe_launch_moe_gemm1_gather_kernel_relu(
// FUSED-NOT: call @__moe_launch
// FUSED: call @__moe_launch_moe_gemm2_weighted_kernel_combine(
// FUSED-NOT: call @__moe_launch
// FUSED-NOT: moe.
func.func @layer(%x: tensor<64x128xf32>, %wr: tensor<128x16xf32>, %br: tensor<16xf32>,
                 %w1: tensor<16x128x256xf32>, %w2: tensor<16x256x128xf32>) -> tensor<64x128xf32> {
  %y = moe.layer %x router(%wr, %br) experts(%w1, %w2)
         {routing = #moe.moesart<k = 2>, activation = #moe.activation<relu>}
         : (tensor<64x128xf32>, tensor<128x16xf32>, tensor<16xf32>, tensor<16x128x256xf32>,
            tensor<16x256x128xf32>) -> tensor<64x128xf32>
  return %y : tensor<64x128xf32>
}
