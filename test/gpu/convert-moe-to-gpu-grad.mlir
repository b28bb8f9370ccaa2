// REQUIRES: host-supports-nvptx
// RUN: moe-opt %s -split-input-file --convert-moe-to-gpu --canonicalize | FileCheck %s
// Each maximum of the f16 backward is zeroed right before its reduction:
// RUN: moe-opt %s -split-input-file --convert-moe-to-gpu --canonicalize \
// RUN:   | grep -B1 '@__moe_launch_moe_absmax_bits_kernel(' | FileCheck %s --check-prefix=ZERO
// ZERO:      gpu.memset [[M:%[a-z0-9_]+]], %c0_i32 : memref<?xi32>, i32
// ZERO-NEXT: call @__moe_launch_moe_absmax_bits_kernel({{.*}}, [[M]], %c2048)
// ZERO:      gpu.memset [[M2:%[a-z0-9_]+]], %c0_i32 : memref<?xi32>, i32
// ZERO-NEXT: call @__moe_launch_moe_absmax_bits_kernel({{.*}}, [[M2]], %c6144)
//
// The backward ops (docs/spec.md §9) on the GPU (docs/gpu.md, "The
// backward"): the kernels each one launches, in order, with the buffers
// that connect them. Operands that come from function arguments get the
// checked variants (index checks, then moeRuntimeIndexError); a gradient
// --moe-generate-vjp wrote (last split) needs none.

// The expert FFN's backward, bf16 on tensor cores (MmaGemm.h, rowGrad and
// weightGrad; the f32 cotangents as two bf16 terms): dOut split into its
// terms; z = rows W1 + b1 (grid (ceil(96/128), maxTiles), 128 threads); dH =
// dOut W2^T with the activation's backward turning z into dZ's terms and
// writing h; dRows = dZ W1^T; dW2 = h^T dOut and dW1 = rows^T dZ (grid
// (ceil(N/128), ceil((M+1)/64), E): the bias gradient is the row of ones).
// CHECK-LABEL: func.func @expert_ffn_grad
// CHECK:       call @__moe_launch_moe_tile_map_checked_kernel(
// CHECK:       gpu.memset [[DROWS:%[a-z0-9_]+]], %{{[a-z0-9_]+}} : memref<?xf32>, f32
// CHECK:       call @__moe_launch_moe_split_terms_kernel_bf16(%c8, %c1, %c1, %c256, %c1, %c1, [[DOUT:%[a-z0-9_]+]], [[DOHI:%[a-z0-9_]+]], [[DOLO:%[a-z0-9_]+]], %c2048)
// CHECK-NEXT:  call @__moe_launch_moe_mma_rowgrad_bias_bf16_m16(%c1, %c8, %c1, %c128, %c1, %c1, [[ROWS:%[a-z0-9_]+]], %{{[a-z0-9_]+}}, [[ROWS]], %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, [[Z:%[a-z0-9_]+]], %c32, %c96, [[H:%[a-z0-9_]+]], [[DZHI:%[a-z0-9_]+]], [[DZLO:%[a-z0-9_]+]])
// CHECK-NEXT:  call @__moe_launch_moe_mma_rowgrad_bt_split_actgrad_swiglu_bf16_m16(%c1, %c8, %c1, %c128, %c1, %c1, [[DOHI]], %{{[a-z0-9_]+}}, [[DOLO]], %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, [[Z]], %c32, %c48, [[H]], [[DZHI]], [[DZLO]])
// CHECK-NEXT:  call @__moe_launch_moe_mma_rowgrad_bt_split_bf16_m16(%c1, %c8, %c1, %c128, %c1, %c1, [[DZHI]], %{{[a-z0-9_]+}}, [[DZLO]], %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, [[DROWS]], %c96, %c32,
// CHECK-NEXT:  call @__moe_launch_moe_mma_wgrad_bias_bf16_m64(%c1, %c1, %c4, %c128, %c1, %c1, [[H]], [[OFF:%[a-z0-9_]+]], [[DOHI]], [[DOLO]], %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %c48, %c32, %c64)
// CHECK-NEXT:  call @__moe_launch_moe_mma_wgrad_bias_bf16_m64(%c1, %c1, %c4, %c128, %c1, %c1, [[ROWS]], [[OFF]], [[DZHI]], [[DZLO]], %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %c32, %c96, %c64)
// CHECK:       func.call @moeRuntimeIndexError
// CHECK-NOT:   moe.expert_ffn_grad
func.func @expert_ffn_grad(%rows: tensor<64x32xbf16>, %off: tensor<5xi32>, %dout: tensor<64x32xf32>,
    %w1: tensor<4x32x96xbf16>, %w2: tensor<4x48x32xbf16>, %b1: tensor<4x96xbf16>, %b2: tensor<4x32xbf16>)
    -> (tensor<64x32xf32>, tensor<4x32x96xf32>, tensor<4x48x32xf32>, tensor<4x96xf32>, tensor<4x32xf32>) {
  %dr, %dw1, %dw2, %db1, %db2 = moe.expert_ffn_grad %rows, %off, %dout experts(%w1, %w2) expert_biases(%b1, %b2)
      {activation = #moe.activation<swiglu>}
      : (tensor<64x32xbf16>, tensor<5xi32>, tensor<64x32xf32>, tensor<4x32x96xbf16>, tensor<4x48x32xbf16>,
         tensor<4x96xbf16>, tensor<4x32xbf16>)
      -> (tensor<64x32xf32>, tensor<4x32x96xf32>, tensor<4x48x32xf32>, tensor<4x96xf32>, tensor<4x32xf32>)
  return %dr, %dw1, %dw2, %db1, %db2
      : tensor<64x32xf32>, tensor<4x32x96xf32>, tensor<4x48x32xf32>, tensor<4x96xf32>, tensor<4x32xf32>
}

// -----

// f16 on tensor cores: f16 cannot hold an f32 cotangent, so dOut and dZ are
// split as the terms of x * s, s a power of two of their largest finite
// magnitude (MmaGemm.h, scaledSplit): dOut's maximum (its bits, from 0),
// its scaled terms; the dH GEMM leaves dZ in f32 in z; dZ's maximum and
// terms; each GEMM that reads split terms takes their maximum last (and
// divides its sums by s).
// CHECK-LABEL: func.func @expert_ffn_grad_f16(
// CHECK:       call @__moe_launch_moe_absmax_bits_kernel({{.*}}, [[DOUT:%[a-z0-9_]+]], [[DOMAX:%[a-z0-9_]+]], %c2048)
// CHECK-NEXT:  call @__moe_launch_moe_split_terms_scaled_kernel_f16({{.*}}, [[DOUT]], [[DOHI:%[a-z0-9_]+]], [[DOLO:%[a-z0-9_]+]], %c2048, [[DOMAX]])
// CHECK-NEXT:  call @__moe_launch_moe_mma_rowgrad_bias_f16_m16({{.*}}, [[Z:%[a-z0-9_]+]], %c32, %c96, [[H:%[a-z0-9_]+]], [[DZHI:%[a-z0-9_]+]], [[DZLO:%[a-z0-9_]+]])
// CHECK-NEXT:  call @__moe_launch_moe_mma_rowgrad_bt_split_actgrad_swiglu_f16_m16({{.*}}, [[DOHI]], %{{[a-z0-9_]+}}, [[DOLO]], {{.*}}, [[Z]], %c32, %c48, [[H]], [[DZHI]], [[DZLO]], [[DOMAX]])
// CHECK-NEXT:  gpu.memset
// CHECK-NEXT:  call @__moe_launch_moe_absmax_bits_kernel({{.*}}, [[Z]], [[DZMAX:%[a-z0-9_]+]], %c6144)
// CHECK-NEXT:  call @__moe_launch_moe_split_terms_scaled_kernel_f16({{.*}}, [[Z]], [[DZHI]], [[DZLO]], %c6144, [[DZMAX]])
// CHECK-NEXT:  call @__moe_launch_moe_mma_rowgrad_bt_split_f16_m16({{.*}}, [[DZHI]], %{{[a-z0-9_]+}}, [[DZLO]], {{.*}}, %c96, %c32, {{.*}}, [[DZMAX]])
// CHECK-NEXT:  call @__moe_launch_moe_mma_wgrad_bias_f16_m64({{.*}}, [[H]], [[OFF:%[a-z0-9_]+]], [[DOHI]], [[DOLO]], {{.*}}, %c48, %c32, %c64, [[DOMAX]])
// CHECK-NEXT:  call @__moe_launch_moe_mma_wgrad_bias_f16_m64({{.*}}, [[OFF]], [[DZHI]], [[DZLO]], {{.*}}, %c32, %c96, %c64, [[DZMAX]])
func.func @expert_ffn_grad_f16(%rows: tensor<64x32xf16>, %off: tensor<5xi32>, %dout: tensor<64x32xf32>,
    %w1: tensor<4x32x96xf16>, %w2: tensor<4x48x32xf16>, %b1: tensor<4x96xf16>, %b2: tensor<4x32xf16>)
    -> (tensor<64x32xf32>, tensor<4x32x96xf32>, tensor<4x48x32xf32>, tensor<4x96xf32>, tensor<4x32xf32>) {
  %dr, %dw1, %dw2, %db1, %db2 = moe.expert_ffn_grad %rows, %off, %dout experts(%w1, %w2) expert_biases(%b1, %b2)
      {activation = #moe.activation<swiglu>}
      : (tensor<64x32xf16>, tensor<5xi32>, tensor<64x32xf32>, tensor<4x32x96xf16>, tensor<4x48x32xf16>,
         tensor<4x96xf16>, tensor<4x32xf16>)
      -> (tensor<64x32xf32>, tensor<4x32x96xf32>, tensor<4x48x32xf32>, tensor<4x96xf32>, tensor<4x32xf32>)
  return %dr, %dw1, %dw2, %db1, %db2
      : tensor<64x32xf32>, tensor<4x32x96xf32>, tensor<4x48x32xf32>, tensor<4x96xf32>, tensor<4x32xf32>
}

// -----

// One block of 128 threads per assignment (grid 32*2); the rows no
// assignment names are zeroed first.
// CHECK-LABEL: func.func @combine_grad
// CHECK:       gpu.memset [[DOUT:%[a-z0-9_]+]], %{{[a-z0-9_]+}} : memref<?xf32>, f32
// CHECK:       call @__moe_launch_moe_combine_grad_checked_kernel(%c64, %c1, %c1, %c128, %c1, %c1, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, [[DOUT]], %{{[a-z0-9_]+}}, %c32, %c2, %c16, %c64, %{{[a-z0-9_]+}})
// CHECK:       func.call @moeRuntimeIndexError
func.func @combine_grad(%dy: tensor<32x16xf32>, %out: tensor<64x16xf32>, %w: tensor<32x2xf32>,
                        %pos: tensor<32x2xi32>) -> (tensor<64x16xf32>, tensor<32x2xf32>) {
  %dout, %dw = moe.combine_grad %dy, %out, %w, %pos
      : (tensor<32x16xf32>, tensor<64x16xf32>, tensor<32x2xf32>, tensor<32x2xi32>)
      -> (tensor<64x16xf32>, tensor<32x2xf32>)
  return %dout, %dw : tensor<64x16xf32>, tensor<32x2xf32>
}

// -----

// The checked reduce: the token's rows summed in slot order.
// CHECK-LABEL: func.func @dispatch_grad
// CHECK:       call @__moe_launch_moe_reduce_checked_kernel(%c2, %c1, %c1, %c256, %c1, %c1, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %c32, %c2, %c16, %c64, %{{[a-z0-9_]+}})
// CHECK:       func.call @moeRuntimeIndexError
func.func @dispatch_grad(%dr: tensor<64x16xf32>, %pos: tensor<32x2xi32>) -> tensor<32x16xf32> {
  %dx = moe.dispatch_grad %dr, %pos : (tensor<64x16xf32>, tensor<32x2xi32>) -> tensor<32x16xf32>
  return %dx : tensor<32x16xf32>
}

// -----

// MOESART training: the Philox key of the seed read on the host, the aux
// loss's cotangent read by the kernel, lambda = 1e-3.
// CHECK-LABEL: func.func @gate_grad
// CHECK:       call @__moe_launch_moe_gate_grad_kernel_moesart_train_small_random_loss(%c1, %c1, %c1, %c128, %c1, %c1, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %c32, %c8, %c2, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}})
// CHECK-NOT:   call @__moe_launch
func.func @gate_grad(%o: tensor<32x8xf32>, %i: tensor<32x2xi32>, %dw: tensor<32x2xf32>,
                     %seed: tensor<i64>, %daux: tensor<f32>) -> tensor<32x8xf32> {
  %do = moe.gate_grad %o, %i, %dw seed(%seed) aux_loss_grad(%daux)
      {routing = #moe.moesart<k = 2, adjust = small_random, trimmed_lasso = 1.0e-3>, training}
      : (tensor<32x8xf32>, tensor<32x2xi32>, tensor<32x2xf32>, tensor<i64>, tensor<f32>)
      -> tensor<32x8xf32>
  return %do : tensor<32x8xf32>
}

// -----

// All T rows as one group (its offsets written by a kernel): dx = do Wr^T,
// then dWr = x^T do with dbr as its row of ones (grid (1, ceil(65/64), 1)).
// CHECK-LABEL: func.func @route_grad
// CHECK:       call @__moe_launch_moe_one_group_offsets_kernel(%c1, %c1, %c1, %c1, %c1, %c1, [[OFF:%[a-z0-9_]+]], [[T:%[a-z0-9_]+]])
// CHECK:       call @__moe_launch_moe_tile_map_kernel(%c1, %c1, %c1, %c256, %c1, %c1, [[OFF]], %c1,
// CHECK:       call @__moe_launch_moe_bwd_gemm_kernel_bt(
// CHECK:       call @__moe_launch_moe_wgrad_gemm_kernel_bias(%c1, %c2, %c1, %c256, %c1, %c1, %{{[a-z0-9_]+}}, [[OFF]], %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %c64, %c8, [[T]])
func.func @route_grad(%x: tensor<?x64xf32>, %wr: tensor<64x8xf32>, %do: tensor<?x8xf32>)
    -> (tensor<?x64xf32>, tensor<64x8xf32>, tensor<8xf32>) {
  %dx, %dwr, %dbr = moe.route_grad %x, %wr, %do
      : (tensor<?x64xf32>, tensor<64x8xf32>, tensor<?x8xf32>)
      -> (tensor<?x64xf32>, tensor<64x8xf32>, tensor<8xf32>)
  return %dx, %dwr, %dbr : tensor<?x64xf32>, tensor<64x8xf32>, tensor<8xf32>
}

// -----

// The gate's backward with f(x) recomputed by the forward's GEMMs, the FFN's
// backward on dOut * gate, dsg = x^T dO, dx += dO sg^T.
// CHECK-LABEL: func.func @shared_expert_grad
// CHECK:       call @__moe_launch_moe_route_kernel(
// CHECK:       call @__moe_launch_moe_gemm1_kernel_gelu(
// CHECK:       call @__moe_launch_moe_gemm2_kernel(
// CHECK:       call @__moe_launch_moe_shared_gate_grad_kernel(%c1, %c1, %c1, %c256, %c1, %c1, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, [[SCALED:%[a-z0-9_]+]], [[DO:%[a-z0-9_]+]], %c16, %c32)
// CHECK:       call @__moe_launch_moe_bwd_gemm_kernel(
// CHECK-NEXT:  call @__moe_launch_moe_bwd_gemm_kernel_bt_actgrad_gelu_h_f32(%c1, %{{[a-z0-9_]+}}, %c1, %c256, %c1, %c1, [[SCALED]],
// CHECK-NEXT:  call @__moe_launch_moe_wgrad_gemm_kernel(
// CHECK-NEXT:  call @__moe_launch_moe_wgrad_gemm_kernel(
// CHECK-NEXT:  call @__moe_launch_moe_bwd_gemm_kernel_bt(%c1, %{{[a-z0-9_]+}}, %c1, %c256, %c1, %c1, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, [[DX:%[a-z0-9_]+]],
// CHECK:       call @__moe_launch_moe_wgrad_gemm_kernel(%c1, %c1, %c1, %c256, %c1, %c1, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, [[DO]],
// CHECK-NEXT:  call @__moe_launch_moe_shared_gate_input_grad_kernel(%c2, %c1, %c1, %c256, %c1, %c1, [[DX]], [[DO]],
func.func @shared_expert_grad(%x: tensor<16x32xf32>, %dout: tensor<16x32xf32>, %s1: tensor<32x64xf32>,
                              %s2: tensor<64x32xf32>, %sg: tensor<32x1xf32>)
    -> (tensor<16x32xf32>, tensor<32x64xf32>, tensor<64x32xf32>, tensor<32x1xf32>) {
  %dx, %ds1, %ds2, %dsg = moe.shared_expert_grad %x, %dout shared(%s1, %s2) gate(%sg)
      {activation = #moe.activation<gelu>}
      : (tensor<16x32xf32>, tensor<16x32xf32>, tensor<32x64xf32>, tensor<64x32xf32>, tensor<32x1xf32>)
      -> (tensor<16x32xf32>, tensor<32x64xf32>, tensor<64x32xf32>, tensor<32x1xf32>)
  return %dx, %ds1, %ds2, %dsg : tensor<16x32xf32>, tensor<32x64xf32>, tensor<64x32xf32>, tensor<32x1xf32>
}

// -----

// A gradient as --moe-generate-vjp writes it: the backward ops read the
// plan of the recomputed forward's moe.dispatch, valid by construction, so
// no kernel is checked and nothing is copied back to check.
// CHECK-LABEL: func.func @f_vjp
// CHECK-NOT:   _checked_kernel
// CHECK-NOT:   moeRuntimeIndexError
// CHECK:       call @__moe_launch_moe_combine_grad_kernel(
// CHECK:       call @__moe_launch_moe_reduce_kernel(
// CHECK:       call @__moe_launch_moe_gate_grad_kernel_topk(
// CHECK-NOT:   _checked_kernel
// CHECK-NOT:   moeRuntimeIndexError
// CHECK:       return
func.func @f_vjp(%arg0: tensor<37x64xf32>, %arg1: tensor<64x8xf32>, %arg2: tensor<8x64x96xf32>, %arg3: tensor<8x96x64xf32>, %arg4: tensor<37x64xf32>) -> (tensor<37x64xf32>, tensor<37x64xf32>, tensor<64x8xf32>, tensor<8x64x96xf32>, tensor<8x96x64xf32>) {
  %0 = moe.route %arg0 router(%arg1) : (tensor<37x64xf32>, tensor<64x8xf32>) -> tensor<37x8xf32>
  %weights, %indices = moe.gate %0 {routing = #moe.top_k<k = 2>} : (tensor<37x8xf32>) -> (tensor<37x2xf32>, tensor<37x2xi32>)
  %rows, %offsets, %source_rows, %positions = moe.dispatch %arg0, %indices {num_experts = 8 : i64} : (tensor<37x64xf32>, tensor<37x2xi32>) -> (tensor<74x64xf32>, tensor<9xi32>, tensor<74xi32>, tensor<37x2xi32>)
  %1 = moe.expert_ffn %rows, %offsets experts(%arg2, %arg3) {activation = #moe.activation<gelu>} : (tensor<74x64xf32>, tensor<9xi32>, tensor<8x64x96xf32>, tensor<8x96x64xf32>) -> tensor<74x64xf32>
  %2 = moe.combine %1, %weights, %positions : (tensor<74x64xf32>, tensor<37x2xf32>, tensor<37x2xi32>) -> tensor<37x64xf32>
  %expert_output_grad, %weights_grad = moe.combine_grad %arg4, %1, %weights, %positions : (tensor<37x64xf32>, tensor<74x64xf32>, tensor<37x2xf32>, tensor<37x2xi32>) -> (tensor<74x64xf32>, tensor<37x2xf32>)
  %rows_grad, %w1_grad, %w2_grad = moe.expert_ffn_grad %rows, %offsets, %expert_output_grad experts(%arg2, %arg3) {activation = #moe.activation<gelu>} : (tensor<74x64xf32>, tensor<9xi32>, tensor<74x64xf32>, tensor<8x64x96xf32>, tensor<8x96x64xf32>) -> (tensor<74x64xf32>, tensor<8x64x96xf32>, tensor<8x96x64xf32>)
  %3 = moe.dispatch_grad %rows_grad, %positions : (tensor<74x64xf32>, tensor<37x2xi32>) -> tensor<37x64xf32>
  %4 = moe.gate_grad %0, %indices, %weights_grad {routing = #moe.top_k<k = 2>} : (tensor<37x8xf32>, tensor<37x2xi32>, tensor<37x2xf32>) -> tensor<37x8xf32>
  %input_grad, %router_weight_grad, %router_bias_grad = moe.route_grad %arg0, %arg1, %4 : (tensor<37x64xf32>, tensor<64x8xf32>, tensor<37x8xf32>) -> (tensor<37x64xf32>, tensor<64x8xf32>, tensor<8xf32>)
  %5 = arith.addf %3, %input_grad : tensor<37x64xf32>
  return %2, %5, %router_weight_grad, %w1_grad, %w2_grad : tensor<37x64xf32>, tensor<37x64xf32>, tensor<64x8xf32>, tensor<8x64x96xf32>, tensor<8x96x64xf32>
}

// -----

// Soft MoE: dOut by the slot kernel (Cw for the dispatch weights, dy for the
// tokens), dCw by the row dots.
// CHECK-LABEL: func.func @soft_combine_grad
// CHECK:       call @__moe_launch_moe_soft_slots_kernel(%c1, %c1, %c2, %c256, %c1, %c1,
// CHECK:       call @__moe_launch_moe_soft_row_dots_kernel(%c1, %c1, %c2, %c256, %c1, %c1,
// CHECK-NOT:   call @__moe_launch
func.func @soft_combine_grad(%dy: tensor<2x8x16xf32>, %out: tensor<16x16xf32>, %cw: tensor<2x8x4x2xf32>)
    -> (tensor<16x16xf32>, tensor<2x8x4x2xf32>) {
  %dout, %dcw = moe.soft_combine_grad %dy, %out, %cw
      : (tensor<2x8x16xf32>, tensor<16x16xf32>, tensor<2x8x4x2xf32>) -> (tensor<16x16xf32>, tensor<2x8x4x2xf32>)
  return %dout, %dcw : tensor<16x16xf32>, tensor<2x8x4x2xf32>
}

// -----

// The logits (L0, then L = scale L0) and both softmaxes recomputed, dDw and
// the dispatch softmax's backward, the slot averages' own term, the combine
// softmax's backward accumulated, the scale's gradient (one thread), the
// logits' product backward both ways, the normalizations' backward, the sum.
// CHECK-LABEL: func.func @soft_dispatch_grad
// CHECK:       call @__moe_launch_moe_soft_norms_kernel(
// CHECK:       call @__moe_launch_moe_soft_logits_kernel_normalize(%c1, %c1, %c1, %c256, %c1, %c1, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, [[L0:%[a-z0-9_]+]],
// CHECK:       call @__moe_launch_moe_soft_logits_kernel_normalize(
// CHECK:       call @__moe_launch_moe_soft_dispatch_weights_kernel(
// CHECK-NEXT:  call @__moe_launch_moe_soft_combine_weights_kernel(
// CHECK:       call @__moe_launch_moe_soft_row_dots_kernel(
// CHECK-NEXT:  call @__moe_launch_moe_soft_softmax_grad_kernel_dispatch(%c1, %c1, %c1, %c256, %c1, %c1, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, [[DL:%[a-z0-9_]+]],
// CHECK:       call @__moe_launch_moe_soft_combine_kernel(
// CHECK:       call @__moe_launch_moe_soft_softmax_grad_kernel_combine_acc(%c1, %c1, %c1, %c256, %c1, %c1, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, [[DL]],
// CHECK:       call @__moe_launch_moe_soft_scale_grad_kernel(%c1, %c1, %c1, %c1, %c1, %c1, [[DL]], [[L0]],
// CHECK:       call @__moe_launch_moe_soft_logits_grad_kernel_input_normalize(
// CHECK-NEXT:  call @__moe_launch_moe_soft_logits_grad_kernel_slots_normalize(
// CHECK-NEXT:  call @__moe_launch_moe_soft_norm_grad_kernel(
// CHECK-NEXT:  call @__moe_launch_moe_soft_norm_grad_kernel(
// CHECK-NEXT:  call @__moe_launch_moe_soft_add_kernel(
func.func @soft_dispatch_grad(%x: tensor<2x8x16xf32>, %phi: tensor<16x4x2xf32>, %scale: tensor<f32>,
                              %drows: tensor<16x16xf32>, %dcw: tensor<2x8x4x2xf32>)
    -> (tensor<2x8x16xf32>, tensor<16x4x2xf32>, tensor<f32>) {
  %dx, %dphi, %dscale = moe.soft_dispatch_grad %x slots(%phi) scale(%scale)
      rows_grad(%drows) combine_weights_grad(%dcw) {normalize}
      : (tensor<2x8x16xf32>, tensor<16x4x2xf32>, tensor<f32>, tensor<16x16xf32>, tensor<2x8x4x2xf32>)
      -> (tensor<2x8x16xf32>, tensor<16x4x2xf32>, tensor<f32>)
  return %dx, %dphi, %dscale : tensor<2x8x16xf32>, tensor<16x4x2xf32>, tensor<f32>
}
