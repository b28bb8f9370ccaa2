// REQUIRES: host-supports-nvptx
// RUN: moe-opt %s -split-input-file --pass-pipeline="builtin.module(convert-moe-to-gpu{device-abi=true},one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map},buffer-results-to-out-params{modify-public-functions hoist-static-allocs},buffer-deallocation-pipeline,convert-bufferization-to-memref,moe-gpu-device-abi,moe-gpu-materialize-launches,func.func(gpu-async-region),canonicalize,cse)" \
// RUN:   | FileCheck %s

// device-abi: the arguments are device buffers used in place (views only, no
// gpu.alloc or gpu.memcpy of them), every launch is on one stream (one
// gpu.wait async at the start, one gpu.wait at the end), and the last kernel
// writes the caller's out-parameter %arg4 directly.

// CHECK-LABEL: func.func @top2(
// CHECK-SAME: %[[X:[a-z0-9]+]]: memref<32x256xf32>, %[[WR:[a-z0-9]+]]: memref<256x8xf32>, %[[W1:[a-z0-9]+]]: memref<8x256x1024xf32>, %[[W2:[a-z0-9]+]]: memref<8x512x256xf32>, %[[OUT:[a-z0-9]+]]: memref<32x256xf32>)
// CHECK-NOT: gpu.memcpy
// CHECK: memref.collapse_shape %[[X]]
// CHECK-NEXT: %[[XD:.*]] = memref.cast
// CHECK-NEXT: memref.collapse_shape %[[WR]]
// CHECK-NEXT: %[[WRD:.*]] = memref.cast
// CHECK-NEXT: memref.collapse_shape %[[W1]]
// CHECK-NEXT: memref.cast
// CHECK-NEXT: memref.collapse_shape %[[W2]]
// CHECK-NEXT: memref.cast
// CHECK-NEXT: %[[T0:.*]] = gpu.wait async
// CHECK-NOT: gpu.memcpy
// CHECK-NOT: gpu.wait
// The router+gate kernel reads x and Wr where they are.
// CHECK: gpu.launch_func async {{.*}} @moe_kernels::@moe_gate_kernel_topk_router {{.*}} args({{.*}}, %[[XD]] : memref<?xf32>, %[[WRD]] : memref<?xf32>
// The combine writes the caller's out-parameter from gemm2's epilogue.
// CHECK-NEXT: %[[OUTC:.*]] = memref.collapse_shape %[[OUT]] {{\[\[}}0, 1]] : memref<32x256xf32> into memref<8192xf32>
// CHECK-NEXT: %[[OUTD:.*]] = memref.cast %[[OUTC]] : memref<8192xf32> to memref<?xf32>
// CHECK-NOT: gpu.memcpy
// CHECK-NOT: gpu.wait
// CHECK: gpu.launch_func async {{.*}} @moe_kernels::@moe_align_kernel_weighted_combine
// CHECK-NOT: gpu.wait
// CHECK: gpu.launch_func async {{.*}} @moe_kernels::@moe_gemm1_gather_kernel_swiglu
// CHECK-NEXT: gpu.launch_func async {{.*}} @moe_kernels::@moe_gemm2_weighted_kernel_combine {{.*}}, %[[OUTD]] : memref<?xf32>, %{{.*}} : index)
// CHECK-NEXT: gpu.dealloc async
// CHECK-NOT: gpu.memcpy
// CHECK-NOT: gpu.launch_func
// CHECK-NOT: gpu.wait async
// CHECK: gpu.wait [%{{.*}}]
// CHECK-NEXT: return

func.func @top2(%x: tensor<32x256xf32>, %wr: tensor<256x8xf32>, %w1: tensor<8x256x1024xf32>,
                %w2: tensor<8x512x256xf32>) -> tensor<32x256xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>}
         : (tensor<32x256xf32>, tensor<256x8xf32>, tensor<8x256x1024xf32>, tensor<8x512x256xf32>)
         -> tensor<32x256xf32>
  return %y : tensor<32x256xf32>
}

// -----

// The unfused chain passes device tensors from op to op: no copies at all;
// a constant (here the router weights) is still uploaded; an argument
// returned as is goes device to device into its out-parameter.

// CHECK-LABEL: func.func @chain(
// CHECK-SAME: %[[X:[a-z0-9]+]]: memref<16x32xf32>, %{{.*}}: memref<4x32x32xf32>, %{{.*}}: memref<4x32x32xf32>, %[[Y:[a-z0-9]+]]: memref<16x32xf32>, %[[XOUT:[a-z0-9]+]]: memref<16x32xf32>)
// CHECK: %[[WR:.*]] = memref.get_global
// CHECK: %[[DEV:.*]], %{{.*}} = gpu.alloc async
// CHECK-NEXT: memref.collapse_shape %[[WR]]
// CHECK-NEXT: gpu.memcpy async {{.*}} %[[DEV]], %{{.*}} : memref<?xf32>, memref<128xf32>
// CHECK-NEXT: %[[LOGITS:.*]], %{{.*}} = gpu.alloc async
// CHECK-NEXT: gpu.launch_func async {{.*}} @moe_kernels::@moe_route_kernel
// CHECK-NOT: gpu.memcpy
// CHECK: gpu.launch_func async {{.*}} @moe_kernels::@moe_gate_kernel_topk
// CHECK-NOT: gpu.memcpy
// CHECK: gpu.launch_func async {{.*}} @moe_kernels::@moe_align_kernel_weighted_combine
// CHECK-NOT: gpu.memcpy
// CHECK: gpu.launch_func async {{.*}} @moe_kernels::@moe_gemm1_gather_kernel_gelu
// CHECK-NOT: gpu.memcpy
// CHECK: gpu.launch_func async {{.*}} @moe_kernels::@moe_gemm2_weighted_kernel_combine
// CHECK-NOT: gpu.memcpy
// CHECK: %[[XOUTC:.*]] = memref.collapse_shape %[[XOUT]]
// CHECK-NEXT: gpu.memcpy async {{.*}} %[[XOUTC]], %{{.*}} : memref<512xf32>, memref<512xf32>
// CHECK-NOT: gpu.memcpy
// CHECK: gpu.wait [
// CHECK-NEXT: return
func.func @chain(%x: tensor<16x32xf32>, %w1: tensor<4x32x32xf32>, %w2: tensor<4x32x32xf32>)
    -> (tensor<16x32xf32>, tensor<16x32xf32>) {
  %wr = arith.constant dense<0.5> : tensor<32x4xf32>
  %logits = moe.route %x router(%wr) : (tensor<16x32xf32>, tensor<32x4xf32>) -> tensor<16x4xf32>
  %w, %i = moe.gate %logits {routing = #moe.top_k<k = 2>} : (tensor<16x4xf32>) -> (tensor<16x2xf32>, tensor<16x2xi32>)
  %y = moe.fused_experts %x, %i, %w experts(%w1, %w2) {num_experts = 4 : i64, activation = #moe.activation<gelu>}
         : (tensor<16x32xf32>, tensor<16x2xi32>, tensor<16x2xf32>, tensor<4x32x32xf32>, tensor<4x32x32xf32>) -> tensor<16x32xf32>
  return %y, %x : tensor<16x32xf32>, tensor<16x32xf32>
}
