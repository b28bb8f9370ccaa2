// REQUIRES: host-supports-nvptx
// RUN: moe-opt %s --moe-nvptx-pipeline="chip=sm_90 features=+ptx80 format=isa" | FileCheck %s
// RUN: moe-opt %s --moe-nvptx-pipeline="chip=sm_90 features=+ptx80 format=isa" \
// RUN:   | mlir-translate --mlir-to-llvmir | FileCheck %s --check-prefix=LLVMIR
// RUN: moe-opt %s --moe-nvptx-pipeline="chip=sm_80 format=isa results-to-out-params" \
// RUN:   | FileCheck %s --check-prefix=OUT

// The kernels end up as PTX in a gpu.binary; the host is LLVM dialect calling
// the mgpu* runtime ABI of upstream gpu-to-llvm.

// CHECK-LABEL: llvm.func @forward
// CHECK-NOT: func.call
// CHECK: llvm.call @mgpuStreamCreate()
// CHECK: llvm.call @mgpuMemAlloc
// CHECK: llvm.call @mgpuMemcpy
// A layer at T = 16 is four launches (router + gate, align, GEMM1, GEMM2
// with the combine): a fifth one anywhere fails the CHECK-NOTs.
// CHECK-NOT: gpu.launch_func
// CHECK: gpu.launch_func <%{{.*}} : !llvm.ptr> @moe_kernels::@moe_gate_kernel_topk_router blocks in (%{{.*}}, %{{.*}}, %{{.*}}) threads in (%{{.*}}, %{{.*}}, %{{.*}})
// CHECK-NOT: gpu.launch_func
// CHECK: gpu.launch_func <%{{.*}} : !llvm.ptr> @moe_kernels::@moe_align_kernel_weighted_combine
// CHECK-NOT: gpu.launch_func
// CHECK: gpu.launch_func <%{{.*}} : !llvm.ptr> @moe_kernels::@moe_gemm1_gather_kernel_gelu_tanh_bias
// CHECK-NOT: gpu.launch_func
// CHECK: gpu.launch_func <%{{.*}} : !llvm.ptr> @moe_kernels::@moe_gemm2_weighted_kernel_bias_combine
// CHECK-NOT: gpu.launch_func
// CHECK: llvm.call @mgpuMemcpy
// CHECK: llvm.call @mgpuMemFree
// CHECK: llvm.call @mgpuStreamSynchronize
// CHECK: llvm.call @mgpuStreamDestroy
// CHECK: gpu.binary @moe_kernels [#gpu.object<#nvvm.target<O = 3, chip = "sm_90", features = "+ptx80">
// CHECK-SAME: assembly = "
// CHECK-SAME: .target sm_90
// CHECK-SAME: .visible .entry moe_gate_kernel_topk_router(
// CHECK-SAME: bar.sync
// CHECK-SAME: .visible .entry moe_align_kernel_weighted_combine(
// CHECK-SAME: .visible .entry moe_gemm1_gather_kernel_gelu_tanh_bias(
// CHECK-SAME: .shared .align 4 .b8 __wg_moe_gemm1_gather_kernel_gelu_tanh_bias_0[4096];
// CHECK-SAME: .visible .entry moe_gemm2_weighted_kernel_bias_combine(
// CHECK-SAME: .shared .align 4 .b8 __wg_moe_gemm2_weighted_kernel_bias_combine_1[4096];
// CHECK-SAME: atom.global.add.u32
// The combine counts arrivals with integer atomics; no float atomics.
// CHECK-NOT: atom.global.add.f32

// With results-to-out-params the result is copied straight into the caller's
// buffer: no host allocation is left.
// OUT-LABEL: llvm.func @forward
// OUT-NOT: llvm.call @malloc
// OUT: llvm.call @mgpuMemcpy
// OUT: llvm.return
// OUT: gpu.binary @moe_kernels [#gpu.object<#nvvm.target<O = 3, chip = "sm_80", features = "+ptx80">

// LLVMIR-DAG: declare ptr @mgpuModuleLoadJIT(ptr, i32)
// LLVMIR-DAG: declare ptr @mgpuModuleGetFunction(ptr, ptr)
// LLVMIR-DAG: declare void @mgpuLaunchKernel(ptr, i64, i64, i64, i64, i64, i64, i32, ptr, ptr, ptr, i64)
// LLVMIR-DAG: declare ptr @mgpuMemAlloc(i64, ptr, i8)
// LLVMIR-DAG: declare void @mgpuMemFree(ptr, ptr)
// LLVMIR-DAG: declare void @mgpuMemcpy(ptr, ptr, i64, ptr)
// LLVMIR-DAG: declare ptr @mgpuStreamCreate()
// LLVMIR-DAG: declare void @mgpuStreamSynchronize(ptr)
// LLVMIR-DAG: declare void @mgpuStreamDestroy(ptr)
func.func @forward(%x: tensor<16x64xf32>, %wr: tensor<64x4xf32>, %w1: tensor<4x64x128xf32>,
                   %w2: tensor<4x128x64xf32>, %b1: tensor<4x128xf32>, %b2: tensor<4x64xf32>)
    -> tensor<16x64xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_biases(%b1, %b2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<gelu_tanh>}
         : (tensor<16x64xf32>, tensor<64x4xf32>, tensor<4x64x128xf32>, tensor<4x128x64xf32>,
            tensor<4x128xf32>, tensor<4x64xf32>) -> tensor<16x64xf32>
  return %y : tensor<16x64xf32>
}
