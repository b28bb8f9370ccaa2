// REQUIRES: host-supports-nvptx
// bf16/f16 data and a dynamic T through --convert-moe-to-gpu: the device
// buffers keep the data's element type, the kernel variants are named by
// their types, routing buffers are f32, and every size of the dynamic T comes
// from tensor.dim of the tokens (memref.dim after bufferization).
// The CUDA-core GEMMs (tensor-cores=false; the tensor-core ones that bf16 takes
// by default: mma-gemm-structure.mlir, ptxas-examples.test MMA).
// RUN: moe-opt %examples/deepseek_style.mlir %moe_gpu_target_sm90 --moe-gpu-configure=tensor-cores=false --convert-moe-to-gpu -canonicalize -cse \
// RUN:   | FileCheck %s --check-prefix=DS
// RUN: moe-opt %s %moe_gpu_target_sm90 --moe-gpu-configure=tensor-cores=false --convert-moe-to-gpu -canonicalize -cse | FileCheck %s
// By default, with a static T (16 tokens: the plan's 16-row decode tile), the
// layer is 4 launches: router + gate, align, GEMM1 on tensor cores (m16), and
// the tensor-core GEMM2 with the combine epilogue (after the shared expert's
// output); the shared expert is folded into both tensor-core GEMMs.
// RUN: sed 's/tensor<?x256xbf16>/tensor<16x256xbf16>/g' %examples/deepseek_style.mlir \
// RUN:   | moe-opt --convert-moe-to-gpu -canonicalize -cse | FileCheck %s --check-prefix=MMA
// MMA-LABEL: func.func @forward(
// MMA: call @__moe_launch_moe_gate_kernel_topk_sigmoid_grouped_bias_router_bf16(
// MMA-NOT: call @__moe_launch_
// MMA: call @__moe_launch_moe_align_kernel_weighted_combine_f32_bf16(
// MMA-NOT: call @__moe_launch_
// MMA: call @__moe_launch_moe_mma_gemm1_gather_swiglu_foldshared_bf16_m16(
// MMA-NEXT: call @__moe_launch_moe_mma_gemm2_weighted_combine_foldshared_bf16_m16_outf32(
// MMA-NOT: call @__moe_launch_
// MMA: gpu.module @moe_kernels
// A dynamic T chooses the row tile at run time: both tensor-core pairs (the
// kernels are specialised on the tile) under an scf.if; one runs.
// RUN: moe-opt %examples/deepseek_style.mlir --convert-moe-to-gpu -canonicalize -cse \
// RUN:   | FileCheck %s --check-prefix=DYN
// DYN-LABEL: func.func @forward(
// DYN: call @__moe_launch_moe_align_kernel_weighted_combine_f32_bf16({{.*}}, %[[R:[^,]*]], %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}})
// DYN: %[[SMALL:.*]] = arith.cmpi eq, %[[R]], %c16 : index
// DYN: scf.if %[[SMALL]] {
// DYN: call @__moe_launch_moe_mma_gemm1_gather_swiglu_foldshared_bf16_m16(
// DYN: call @__moe_launch_moe_mma_gemm2_weighted_combine_foldshared_bf16_m16_outf32(
// DYN: } else {
// DYN: call @__moe_launch_moe_mma_gemm1_gather_swiglu_foldshared_bf16_m64(
// DYN: call @__moe_launch_moe_mma_gemm2_weighted_combine_foldshared_bf16_m64_outf32(
// DYN: }
// DYN-NOT: call @__moe_launch_

// DS-LABEL: func.func @forward(
// DS-SAME: %[[X:[^:]*]]: tensor<?x256xbf16>
// DS: %[[T:.*]] = tensor.dim %[[X]], %c0 : tensor<?x256xbf16>
// DS: %[[XH:.*]] = bufferization.to_buffer %[[X]] read_only : tensor<?x256xbf16> to memref<?x256xbf16>
// DS-NEXT: %[[TD:.*]] = arith.muli %[[T]], %c256 : index
// DS-NEXT: %[[XD:.*]] = gpu.alloc  (%[[TD]]) {bufferization.manual_deallocation} : memref<?xbf16>
// DS: %[[WR:.*]] = gpu.alloc  (%c8192) {bufferization.manual_deallocation} : memref<?xbf16>
// DS: %[[TE:.*]] = arith.muli %[[T]], %c32 : index
// DS-NEXT: %[[LOGITS:.*]] = gpu.alloc  (%[[TE]]) {bufferization.manual_deallocation} : memref<?xf32>
// Router + gate in one launch: x and Wr in bf16 (no router bias: Wr again),
// the logits, gate weights and indices in f32/i32.
// DS: call @__moe_launch_moe_gate_kernel_topk_sigmoid_grouped_bias_router_bf16({{.*}}, %[[LOGITS]], {{.*}}, %[[XD]], %[[WR]], %[[WR]], %c256) : ({{.*}}, f32, memref<?xbf16>, memref<?xbf16>, memref<?xbf16>, index) -> ()
// y in bf16: the align kernel zeroes the counters; GEMM1 and GEMM2 run the
// shared expert's tiles (folded: hs in bf16, its f32 output the first term
// of GEMM2's combine) before the plan's (GEMM2's rows f32).
// DS: %[[Y:.*]] = gpu.alloc  (%[[TD]]) {bufferization.manual_deallocation} : memref<?xbf16>
// DS: call @__moe_launch_moe_align_kernel_weighted_combine_f32_bf16({{.*}}, %[[T]], %c4, %c32, {{.*}}, %[[Y]], %c256) :
// DS: %[[H:.*]] = gpu.alloc  ({{.*}}) {bufferization.manual_deallocation} : memref<?xbf16>
// DS: %[[HS:.*]] = gpu.alloc  ({{.*}}) {bufferization.manual_deallocation} : memref<?xbf16>
// DS: %[[SHARED:.*]] = gpu.alloc  ({{.*}}) {bufferization.manual_deallocation} : memref<?xf32>
// DS: call @__moe_launch_moe_gemm1_gather_kernel_swiglu_foldshared_bf16({{.*}}, %[[XD]], {{.*}}, %[[H]], %c256, %c128, %[[R:[^,]*]], %{{[^,]*}}, %[[HS]], %c256, %[[T]]) :
// DS-NEXT: call @__moe_launch_moe_gemm2_weighted_kernel_combine_foldshared_bf16_bf16_f32_bf16({{.*}}, %[[H]], {{.*}}, %c128, %c256, %[[R]], {{.*}}, %[[Y]], %c4, %[[HS]], {{.*}}, %[[SHARED]], %c256, %[[T]]) :
// DS-NEXT: %[[OUT:.*]] = memref.alloc(%[[T]]) : memref<?x256xbf16>
// DS: gpu.memcpy  %{{.*}}, %[[Y]] : memref<?xbf16>, memref<?xbf16>
// DS-NEXT: bufferization.to_tensor %[[OUT]] restrict writable : memref<?x256xbf16> to tensor<?x256xbf16>
// DS: gpu.module @moe_kernels
// DS-LABEL: gpu.func @moe_gate_kernel_topk_sigmoid_grouped_bias_router_bf16(
// DS-SAME: %{{.*}}: memref<?xbf16>, %{{.*}}: memref<?xbf16>, %{{.*}}: memref<?xbf16>, %{{.*}}: index
// DS: memref.load %{{.*}} : memref<?xbf16>
// DS-NEXT: arith.extf %{{.*}} : bf16 to f32
// DS: math.fma
// DS-LABEL: gpu.func @moe_gemm1_gather_kernel_swiglu_foldshared_bf16(
// DS: math.fma
// DS: arith.truncf %{{.*}} : f32 to bf16
// DS: memref.store %{{.*}}, %{{.*}}[%{{.*}}] : memref<?xbf16>

// A hand-written f16 chain: expert rows in f16 (zero-filled with an f16
// memset), gate logits extended and weights rounded on the host.
// CHECK-LABEL: func.func @chain(
// CHECK: %[[L32:.*]] = arith.extf %{{.*}} : tensor<?x4xf16> to tensor<?x4xf32>
// CHECK: call @__moe_launch_moe_gate_kernel_topk(
// CHECK: %[[W:.*]] = bufferization.to_tensor %{{.*}} : memref<?x2xf32> to tensor<?x2xf32>
// CHECK: arith.truncf %[[W]] : tensor<?x2xf32> to tensor<?x2xf16>
// CHECK: gpu.memset  %[[OUT:.*]], %{{.*}} : memref<?xf16>, f16
// CHECK: call @__moe_launch_moe_gemm1_kernel_relu_f16(
// CHECK: call @__moe_launch_moe_gemm2_kernel_f16({{.*}}, %[[OUT]], %c32, %c16, %{{.*}}) :
// CHECK: call @__moe_launch_moe_combine_checked_kernel_f16_f32_f16(
func.func @chain(%logits: tensor<?x4xf16>, %rows: tensor<?x16xf16>, %off: tensor<5xi32>,
                 %w1: tensor<4x16x32xf16>, %w2: tensor<4x32x16xf16>, %pos: tensor<?x2xi32>,
                 %cw: tensor<?x2xf32>)
    -> (tensor<?x2xf16>, tensor<?x2xi32>, tensor<?x16xf16>) {
  %w, %i = moe.gate %logits {routing = #moe.top_k<k = 2>}
         : (tensor<?x4xf16>) -> (tensor<?x2xf16>, tensor<?x2xi32>)
  %o = moe.expert_ffn %rows, %off experts(%w1, %w2) {activation = #moe.activation<relu>}
         : (tensor<?x16xf16>, tensor<5xi32>, tensor<4x16x32xf16>, tensor<4x32x16xf16>)
         -> tensor<?x16xf16>
  %y = moe.combine %o, %cw, %pos
         : (tensor<?x16xf16>, tensor<?x2xf32>, tensor<?x2xi32>) -> tensor<?x16xf16>
  return %w, %i, %y : tensor<?x2xf16>, tensor<?x2xi32>, tensor<?x16xf16>
}
