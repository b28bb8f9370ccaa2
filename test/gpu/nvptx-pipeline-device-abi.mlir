// REQUIRES: host-supports-nvptx, cuda-toolkit
// RUN: moe-opt %s --moe-nvptx-pipeline="device-abi=true format=isa" | FileCheck %s

// --moe-nvptx-pipeline="device-abi=true": the host code of a layer takes its
// result as a (device) out-parameter, creates one stream (which
// moeRuntimeSetStream of libMoECudaRuntime can replace by the caller's),
// copies nothing between host and device, and synchronizes once at the end.

// CHECK-LABEL: llvm.func @top2(
// CHECK-NOT: llvm.call @mgpuMemcpy
// CHECK: llvm.call @mgpuStreamCreate()
// CHECK-NOT: llvm.call @mgpuStreamCreate
// CHECK-NOT: llvm.call @mgpuMemcpy
// CHECK-COUNT-4: gpu.launch_func <%{{.*}} : !llvm.ptr>
// CHECK-NOT: gpu.launch_func
// CHECK-NOT: llvm.call @mgpuMemcpy
// CHECK-NOT: llvm.call @mgpuStreamCreate
// CHECK: llvm.call @mgpuStreamSynchronize(
// CHECK-NEXT: llvm.call @mgpuStreamDestroy(
// CHECK-NEXT: llvm.return
func.func @top2(%x: tensor<32x256xf32>, %wr: tensor<256x8xf32>, %w1: tensor<8x256x1024xf32>,
                %w2: tensor<8x512x256xf32>) -> tensor<32x256xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>}
         : (tensor<32x256xf32>, tensor<256x8xf32>, tensor<8x256x1024xf32>, tensor<8x512x256xf32>)
         -> tensor<32x256xf32>
  return %y : tensor<32x256xf32>
}
