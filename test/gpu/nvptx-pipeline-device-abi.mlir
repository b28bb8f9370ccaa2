// REQUIRES: host-supports-nvptx
// RUN: moe-opt %s -split-input-file --moe-nvptx-pipeline="device-abi=true format=isa" | FileCheck %s

// --moe-nvptx-pipeline="device-abi=true": the host code of a layer takes its
// result as a (device) out-parameter, creates one stream (which
// moeRuntimeSetStream of libMoECudaRuntime can replace by the caller's),
// copies nothing between host and device, frees its intermediates on that
// stream, and (moe-gpu-stream-ordered) waits at its end only when the stream
// is not the thread's: no mgpuStreamSynchronize.

// CHECK-LABEL: llvm.func @top2(
// CHECK-NOT: llvm.call @mgpuMemcpy
// CHECK: %[[S:.*]] = llvm.call @mgpuStreamCreate()
// CHECK-NOT: llvm.call @mgpuStreamCreate
// CHECK-NOT: llvm.call @mgpuMemcpy
// CHECK-COUNT-4: gpu.launch_func <%[[S]] : !llvm.ptr>
// CHECK-NOT: gpu.launch_func
// CHECK-NOT: llvm.call @mgpuMemcpy
// CHECK-NOT: llvm.call @mgpuStreamCreate
// CHECK-NOT: {{mgpuStreamSynchronize|moeRuntimeSyncUnlessThreadStream}}
// CHECK: llvm.call @mgpuMemFree({{.*}}, %[[S]])
// CHECK-NOT: {{mgpuStreamSynchronize|moeRuntimeSyncUnlessThreadStream}}
// CHECK: llvm.call @moeRuntimeSyncUnlessThreadStream(%[[S]])
// CHECK-NEXT: llvm.call @mgpuStreamDestroy(%[[S]])
// CHECK-NEXT: llvm.return
// CHECK-NEXT: }
// Nothing calls it any more: no declaration.
// CHECK-NOT: @mgpuStreamSynchronize
// CHECK-NOT: moe.gpu_stream_ordered
func.func @top2(%x: tensor<32x256xf32>, %wr: tensor<256x8xf32>, %w1: tensor<8x256x1024xf32>,
                %w2: tensor<8x512x256xf32>) -> tensor<32x256xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>}
         : (tensor<32x256xf32>, tensor<256x8xf32>, tensor<8x256x1024xf32>, tensor<8x512x256xf32>)
         -> tensor<32x256xf32>
  return %y : tensor<32x256xf32>
}

// -----

// Index checks (the caller's expert indices): the error word is copied back
// and read on the host, which waits for the stream; such a function stays
// synchronous, its final synchronization included.

// CHECK-LABEL: llvm.func @experts(
// CHECK: %[[S:.*]] = llvm.call @mgpuStreamCreate()
// CHECK-COUNT-3: gpu.launch_func <%[[S]] : !llvm.ptr>
// CHECK: %[[R:.*]] = llvm.call @mgpuStreamCreate()
// CHECK-NEXT: llvm.call @mgpuMemcpy({{.*}}, {{.*}}, {{.*}}, %[[R]])
// CHECK-NEXT: llvm.call @mgpuStreamSynchronize(%[[R]])
// CHECK-NEXT: llvm.call @mgpuStreamDestroy(%[[R]])
// CHECK: llvm.call @moeRuntimeIndexError(
// CHECK: llvm.call @mgpuStreamSynchronize(%[[S2:.*]])
// CHECK-NEXT: llvm.call @mgpuStreamDestroy(%[[S2]])
// CHECK-NEXT: llvm.return
// CHECK-NOT: moeRuntimeSyncUnlessThreadStream
// CHECK-NOT: moe.gpu_stream_ordered
func.func @experts(%x: tensor<4x8xf32>, %i: tensor<4x2xi32>, %w: tensor<4x2xf32>,
                   %w1: tensor<4x8x16xf32>, %w2: tensor<4x16x8xf32>) -> tensor<4x8xf32> {
  %y = moe.fused_experts %x, %i, %w experts(%w1, %w2) {activation = #moe.activation<relu>, num_experts = 4 : i64}
      : (tensor<4x8xf32>, tensor<4x2xi32>, tensor<4x2xf32>, tensor<4x8x16xf32>, tensor<4x16x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// A dynamic T: the host chooses the GEMMs' tile variant from T (scf.if), and
// gpu-async-region waits before that choice and at the end of each branch.
// Nothing is read back, so every one of those waits is
// moeRuntimeSyncUnlessThreadStream: no wait on the caller's stream.

// CHECK-LABEL: llvm.func @dyn(
// CHECK-NOT: mgpuStreamSynchronize
// CHECK: llvm.call @moeRuntimeSyncUnlessThreadStream(
// CHECK-NEXT: llvm.call @mgpuStreamDestroy(
// CHECK-NEXT: llvm.cond_br
// CHECK-NOT: mgpuStreamSynchronize
// CHECK: gpu.launch_func <%[[S:.*]] : !llvm.ptr> @moe_kernels::@moe_mma_gemm1_gather_swiglu_bf16_m16
// CHECK-NEXT: gpu.launch_func <%[[S]] : !llvm.ptr> @moe_kernels::@moe_mma_gemm2_weighted_combine_bf16_m16
// CHECK-NEXT: llvm.call @moeRuntimeSyncUnlessThreadStream(%[[S]])
// CHECK-NOT: mgpuStreamSynchronize
// CHECK: llvm.call @mgpuMemFree(
// CHECK-NOT: mgpuStreamSynchronize
// CHECK: llvm.call @moeRuntimeSyncUnlessThreadStream(
// CHECK-NEXT: llvm.call @mgpuStreamDestroy(
// CHECK-NEXT: llvm.return
// CHECK-NOT: mgpuStreamSynchronize
func.func @dyn(%x: tensor<?x64xbf16>, %wr: tensor<64x8xbf16>, %w1: tensor<8x64x128xbf16>,
               %w2: tensor<8x64x64xbf16>) -> tensor<?x64xbf16> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>}
         : (tensor<?x64xbf16>, tensor<64x8xbf16>, tensor<8x64x128xbf16>, tensor<8x64x64xbf16>) -> tensor<?x64xbf16>
  return %y : tensor<?x64xbf16>
}
