// REQUIRES: host-supports-nvptx
// RUN: moe-opt %s -split-input-file --convert-moe-to-gpu --canonicalize | FileCheck %s

// A Mixtral-style layer runs entirely on the device in four launches: the
// router inside the gate kernel (2 blocks of 16 tokens), the alignment, GEMM1
// with the gather and SwiGLU, GEMM2 with the routed weight and the combine in
// its epilogue; launches are placeholders until bufferization. At T*k = 64
// over 8 experts the row tile is 16 (the last argument of both GEMMs) and the
// grid has min(ceil(64/16) + 8, 64) = 12 row tiles.

// CHECK-LABEL: module attributes {gpu.container_module}
// CHECK-DAG: func.func private @__moe_launch_moe_gate_kernel_topk_router({{.*}}) attributes {moe.gpu_kernel = @moe_kernels::@moe_gate_kernel_topk_router}
// CHECK-LABEL: func.func @top2
// CHECK-NOT: moe.
// Host results are allocated before the GPU work (no extra stream sync).
// CHECK: %[[OUT:.*]] = memref.alloc() : memref<32x256xf32>
// CHECK: bufferization.to_buffer %{{.*}} read_only : tensor<32x256xf32> to memref<32x256xf32>
// CHECK: gpu.alloc (%{{.*}}) {bufferization.manual_deallocation} : memref<?xf32>
// CHECK: gpu.memcpy
// CHECK-NOT: call @__moe_launch
// CHECK: call @__moe_launch_moe_gate_kernel_topk_router(%c2, %c1, %c1, %c128, %c1, %c1,
// CHECK-NOT: call @__moe_launch
// CHECK: call @__moe_launch_moe_align_kernel_weighted_combine(%c1, %c1, %c1, %c256, %c1, %c1,
// CHECK-NOT: call @__moe_launch
// CHECK: call @__moe_launch_moe_gemm1_gather_kernel_swiglu(%c8, %c12, %c1, %c256, %c1, %c1, {{.*}}, %c256, %c512, %c16)
// CHECK-NOT: call @__moe_launch
// CHECK: call @__moe_launch_moe_gemm2_weighted_kernel_combine(%c4, %c12, %c1, %c256, %c1, %c1, {{.*}}, %c512, %c256, %c16,
// CHECK-NOT: call @__moe_launch
// CHECK: memref.collapse_shape %[[OUT]]
// CHECK: gpu.memcpy
// CHECK: bufferization.to_tensor %[[OUT]] restrict writable : memref<32x256xf32> to tensor<32x256xf32>
// CHECK: gpu.dealloc
// CHECK: return
// CHECK: gpu.module @moe_kernels
// Shared-memory tiles (A 64x16, B 16x64, gathered rows) on every GEMM.
// The router: an f32 fma chain per (token, expert), then a block barrier;
// the routing exp/log are the arith/math builders of lowering/RoutingMath
// (f64 fma), never math.exp / math.log (libdevice).
// CHECK: gpu.func @moe_gate_kernel_topk_router(
// CHECK-SAME: known_block_size = array<i32: 128, 1, 1>
// CHECK: math.fma %{{.*}}, %{{.*}}, %{{.*}} : f32
// CHECK: gpu.barrier
// CHECK-NOT: math.exp
// CHECK-NOT: math.log
// CHECK: math.fma %{{.*}}, %{{.*}}, %{{.*}} : f64
// CHECK-NOT: math.exp
// CHECK-NOT: math.log
// CHECK: gpu.func @moe_align_kernel_weighted_combine(
// CHECK: gpu.barrier
// Gated GEMM1: the B tile holds the gate and the up columns (2 x 16x64).
// CHECK: gpu.func @moe_gemm1_gather_kernel_swiglu(
// CHECK-SAME: workgroup(%{{.*}} : memref<1024xf32, #gpu.address_space<workgroup>>, %{{.*}} : memref<2048xf32, #gpu.address_space<workgroup>>, %{{.*}} : memref<64xi32, #gpu.address_space<workgroup>>)
// CHECK: gpu.barrier
// The combine in GEMM2's epilogue: a release fence, one arrival per (token,
// column tile), an acquire fence, then the completing block's sums.
// CHECK: gpu.func @moe_gemm2_weighted_kernel_combine(
// CHECK-SAME: workgroup(%{{.*}} : memref<1024xf32, #gpu.address_space<workgroup>>, %{{.*}} : memref<1024xf32, #gpu.address_space<workgroup>>, %{{.*}} : memref<64xi32, #gpu.address_space<workgroup>>, %{{.*}} : memref<64xi32, #gpu.address_space<workgroup>>)
// CHECK: llvm.fence syncscope("device") acq_rel
// CHECK: gpu.barrier
// CHECK: memref.atomic_rmw addi
// CHECK: gpu.barrier
// CHECK: llvm.fence syncscope("device") acq_rel
// CHECK-NOT: memref.atomic_rmw addf
func.func @top2(%x: tensor<32x256xf32>, %wr: tensor<256x8xf32>, %w1: tensor<8x256x1024xf32>,
                %w2: tensor<8x512x256xf32>) -> tensor<32x256xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>}
         : (tensor<32x256xf32>, tensor<256x8xf32>, tensor<8x256x1024xf32>, tensor<8x512x256xf32>)
         -> tensor<32x256xf32>
  return %y : tensor<32x256xf32>
}

// -----

// MOESART training: Philox-sampled routing keyed by the seed (low word, high
// word), trimmed-lasso partial sums per block and their fixed-order
// reduction (in the align kernel), GShard capacity ceil(cf * T * K / E).

// CHECK-LABEL: func.func @train
// CHECK: %[[SEED:.*]] = tensor.extract %{{.*}}[] : tensor<i64>
// CHECK: %[[K0:.*]] = arith.trunci %[[SEED]] : i64 to i32
// CHECK: %[[HI:.*]] = arith.shrui %[[SEED]], %{{.*}} : i64
// CHECK: %[[K1:.*]] = arith.trunci %[[HI]] : i64 to i32
// CHECK: call @__moe_launch_moe_gate_kernel_moesart_train_zero_loss_router({{.*}}, %[[K0]], %[[K1]],
// C = ceil(1.25 * 64 * 2 / 8) = 20 (folded by the canonicalizer); the loss
// reduction's (numPartials = 4 blocks, lambda, loss) end the align arguments.
// CHECK: call @__moe_launch_moe_align_kernel_weighted_combine_loss({{.*}}, %c64, %c2, %c8, %c20_i32, {{.*}}, %c4, %cst{{.*}}, %{{.*}}) : {{.*}} f32, memref<?xf32>) -> ()
// CHECK: call @__moe_launch_moe_gemm1_gather_kernel_geglu(
// CHECK: bufferization.to_tensor %{{.*}} : memref<f32> to tensor<f32>
// The loss partials, then the router's staged x [16 x 128] and Wr chunks.
// CHECK: gpu.func @moe_gate_kernel_moesart_train_zero_loss_router(
// CHECK-SAME: workgroup(%{{.*}} : memref<128xf32, #gpu.address_space<workgroup>>, %{{.*}} : memref<2048xf32, #gpu.address_space<workgroup>>, %{{.*}} : memref<4096xf32, #gpu.address_space<workgroup>>)
// Philox4x32-10 multipliers 0xD2511F53 and 0xCD9E8D57.
// CHECK-DAG: arith.constant -766435501 : i32
// CHECK-DAG: arith.constant -845247145 : i32
// CHECK: arith.mului_extended
// CHECK: gpu.barrier
// CHECK: gpu.func @moe_align_kernel_weighted_combine_loss(
// CHECK-SAME: known_block_size = array<i32: 256, 1, 1>
func.func @train(%x: tensor<64x32xf32>, %seed: tensor<i64>, %wr: tensor<32x8xf32>,
                 %w1: tensor<8x32x64xf32>, %w2: tensor<8x32x32xf32>)
    -> (tensor<64x32xf32>, tensor<f32>) {
  %y, %loss = moe.layer %x router(%wr) experts(%w1, %w2) seed(%seed)
         {routing = #moe.moesart<k = 2, adjust = zero>, activation = #moe.activation<geglu>,
          training, capacity_factor = 1.25 : f64}
         : (tensor<64x32xf32>, tensor<32x8xf32>, tensor<8x32x64xf32>, tensor<8x32x32xf32>,
            tensor<i64>) -> (tensor<64x32xf32>, tensor<f32>)
  return %y, %loss : tensor<64x32xf32>, tensor<f32>
}

// -----

// Soft MoE: norms, logits GEMM, the two softmaxes (over tokens, over slots),
// the slot GEMM, the expert GEMMs over the slot groups, the combine GEMM.

// CHECK-LABEL: func.func @soft
// CHECK: call @__moe_launch_moe_soft_norms_kernel(
// CHECK: call @__moe_launch_moe_soft_logits_kernel_normalize(
// CHECK: call @__moe_launch_moe_soft_dispatch_weights_kernel(
// CHECK: call @__moe_launch_moe_soft_combine_weights_kernel(
// CHECK: call @__moe_launch_moe_soft_slots_kernel(
// CHECK: call @__moe_launch_moe_tile_map_kernel(
// CHECK: call @__moe_launch_moe_gemm1_kernel_gelu_bias(
// CHECK: call @__moe_launch_moe_gemm2_kernel_bias(
// CHECK: call @__moe_launch_moe_soft_combine_kernel(
// CHECK: gpu.func @moe_soft_dispatch_weights_kernel(
// Max-subtraction: a running maximum from -inf, then exp(l - max).
// CHECK: arith.constant 0xFF800000 : f32
// CHECK: arith.maximumf
// CHECK: arith.subf
// CHECK: math.exp
func.func @soft(%x: tensor<4x64x128xf32>, %phi: tensor<128x8x2xf32>, %scale: tensor<f32>,
                %w1: tensor<8x128x512xf32>, %w2: tensor<8x512x128xf32>,
                %b1: tensor<8x512xf32>, %b2: tensor<8x128xf32>) -> tensor<4x64x128xf32> {
  %y = moe.soft_layer %x slots(%phi) scale(%scale) experts(%w1, %w2) expert_biases(%b1, %b2)
         {activation = #moe.activation<gelu>, normalize}
         : (tensor<4x64x128xf32>, tensor<128x8x2xf32>, tensor<f32>, tensor<8x128x512xf32>,
            tensor<8x512x128xf32>, tensor<8x512xf32>, tensor<8x128xf32>) -> tensor<4x64x128xf32>
  return %y : tensor<4x64x128xf32>
}

// -----

// docs/spec.md §3.1.1 on the device: a DeepSeek-style router (sigmoid scores, the
// selection bias, 4 expert groups of which the 2 best are kept, scale 2.5) in
// a production variant of the gate kernel, whose four extra arguments are
// (selection bias, groups, kept groups, scale) and whose scratch holds the
// group scores and kept-group flags ([T * 2E]). The shared expert is folded
// into the layer's four launches (docs/gpu.md): the gate kernel also writes
// its gate sigmoid(x sg) ([T], `_sgate`: sg and the gate are its last two
// arguments), and both GEMMs run ceil(T / 16) = 2 shared tiles before the
// plan's 24 (grid rows 26; GEMM1's columns cover max(H, Hs) = 64), with
// (s1, hs, Hs, T) and (hs, s2, gate, shared output, Hs, T) after their
// usual arguments; GEMM2's combine starts every token's sum from the shared
// output.

// CHECK-LABEL: func.func @deepseek
// CHECK-SAME: %[[X:[^:]*]]: tensor<32x64xf32>, %[[WR:[^:]*]]: tensor<64x16xf32>, %[[SB:[^:]*]]: tensor<16xf32>
// CHECK: %[[SBH:.*]] = bufferization.to_buffer %[[SB]]
// CHECK: %[[SBD:.*]] = gpu.alloc (%{{.*}}) {bufferization.manual_deallocation} : memref<?xf32>
// CHECK: gpu.memcpy %[[SBD]], %[[SBH]]
// CHECK: %[[SG:.*]] = gpu.alloc (%c64) {{.*}} : memref<?xf32>
// CHECK: %[[GATE:.*]] = gpu.alloc (%c32) {{.*}} : memref<?xf32>
// CHECK: %[[SCRATCH:.*]] = gpu.alloc (%c1024) {{.*}} : memref<?xf32>
// CHECK-NOT: call @__moe_launch
// CHECK: call @__moe_launch_moe_gate_kernel_topk_sigmoid_grouped_bias_router_sgate(%c2, %c1, %c1, %c128, %c1, %c1, %{{.*}}, %{{.*}}, %{{.*}}, %[[SCRATCH]], %{{.*}}, %c32, %c16, %c4, %c0_i32, %c0_i32, %[[SBD]], %c4, %c2, %[[SCALE:[^,]*]], %{{.*}}, %{{.*}}, %{{.*}}, %c64, %[[SG]], %[[GATE]])
// CHECK-NOT: call @__moe_launch
// CHECK: call @__moe_launch_moe_align_kernel_weighted_combine(
// CHECK-NOT: call @__moe_launch
// CHECK: call @__moe_launch_moe_gemm1_gather_kernel_swiglu_foldshared(%c1, %c26, %c1, %c256, %c1, %c1, {{.*}}, %c64, %c32, %c16, %{{[^,]*}}, %[[HS:[^,]*]], %c64, %c32)
// CHECK-NOT: call @__moe_launch
// CHECK: call @__moe_launch_moe_gemm2_weighted_kernel_combine_foldshared_gated(%c1, %c26, %c1, %c256, %c1, %c1, {{.*}}, %c32, %c64, %c16, {{.*}}, %c4, %[[HS]], %{{[^,]*}}, %[[GATE]], %{{[^,]*}}, %c64, %c32)
// CHECK-NOT: call @__moe_launch
// CHECK: return
// CHECK: gpu.func @moe_gate_kernel_topk_sigmoid_grouped_bias_router_sgate(
// CHECK-SAME: %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: memref<?xf32>, %{{.*}}: index, %{{.*}}: index, %{{.*}}: f32, %{{.*}}: memref<?xf32>, %{{.*}}: memref<?xf32>, %{{.*}}: memref<?xf32>, %{{.*}}: index, %{{.*}}: memref<?xf32>, %{{.*}}: memref<?xf32>)
// CHECK-SAME: known_block_size = array<i32: 128, 1, 1>
// sigmoid(o) = 1 / (1 + exp(-o)) with the routing exp (f64 range reduction).
// CHECK: arith.negf
// CHECK: arith.extf %{{.*}} : f32 to f64
// CHECK: gpu.func @moe_gemm1_gather_kernel_swiglu_foldshared(
// CHECK-SAME: %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: memref<?xf32>, %{{.*}}: memref<?xf32>, %{{.*}}: index, %{{.*}}: index)
// CHECK: gpu.func @moe_gemm2_weighted_kernel_combine_foldshared_gated(
// CHECK-SAME: %{{.*}}: index, %{{.*}}: memref<?xf32>, %{{.*}}: memref<?xf32>, %{{.*}}: memref<?xf32>, %{{.*}}: memref<?xf32>, %{{.*}}: index, %{{.*}}: index)
// CHECK-NOT: gpu.func @moe_sigmoid_kernel
func.func @deepseek(%x: tensor<32x64xf32>, %wr: tensor<64x16xf32>, %sb: tensor<16xf32>,
                    %w1: tensor<16x64x64xf32>, %w2: tensor<16x32x64xf32>,
                    %s1: tensor<64x128xf32>, %s2: tensor<64x64xf32>, %sg: tensor<64x1xf32>)
    -> tensor<32x64xf32> {
  %y = moe.layer %x router(%wr) selection_bias(%sb) experts(%w1, %w2) shared(%s1, %s2)
         shared_gate(%sg)
         {routing = #moe.top_k<k = 4, score = sigmoid, scale = 2.5, groups = 4, group_k = 2>,
          activation = #moe.activation<swiglu>}
         : (tensor<32x64xf32>, tensor<64x16xf32>, tensor<16xf32>, tensor<16x64x64xf32>,
            tensor<16x32x64xf32>, tensor<64x128xf32>, tensor<64x64xf32>, tensor<64x1xf32>)
         -> tensor<32x64xf32>
  return %y : tensor<32x64xf32>
}

// -----

// Qwen-style softmax router without renormalisation and no groups: the
// ungrouped production gate (no scratch, the weights buffer stands in for the
// absent selection bias), the shared expert without a gate (folded, its rows
// unweighted: `_foldshared` without `_gated`, a dummy gate buffer). At
// T*k = 192 < 64 E the row tile is 16: 3 shared tiles + min(12 + 16, 192) = 28 plan tiles.

// CHECK-LABEL: func.func @qwen
// CHECK-NOT: call @__moe_launch
// CHECK: call @__moe_launch_moe_gate_kernel_topk_softmax_nonorm_router(%c3, %c1, %c1, %c128, %c1, %c1, %{{.*}}, %[[W:[^,]*]], %{{.*}}, %[[W]], %[[W]], %c48, %c16, %c4, %c0_i32, %c0_i32, %[[W]], %c1, %c1, %{{[^,]*}}, %{{.*}}, %{{.*}}, %{{.*}}, %c128)
// CHECK-NOT: call @__moe_launch
// CHECK: call @__moe_launch_moe_align_kernel_weighted_combine(
// CHECK-NOT: call @__moe_launch
// CHECK: call @__moe_launch_moe_gemm1_gather_kernel_swiglu_foldshared(%c3, %c31, %c1, %c256,
// CHECK-NOT: call @__moe_launch
// CHECK: call @__moe_launch_moe_gemm2_weighted_kernel_combine_foldshared(%c2, %c31, %c1, %c256, {{.*}}, %c192, %c48)
// CHECK-NOT: call @__moe_launch
// CHECK: return
func.func @qwen(%x: tensor<48x128xf32>, %wr: tensor<128x16xf32>, %w1: tensor<16x128x128xf32>,
                %w2: tensor<16x64x128xf32>, %s1: tensor<128x384xf32>, %s2: tensor<192x128xf32>)
    -> tensor<48x128xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) shared(%s1, %s2)
         {routing = #moe.top_k<k = 4, normalize = false>, activation = #moe.activation<swiglu>}
         : (tensor<48x128xf32>, tensor<128x16xf32>, tensor<16x128x128xf32>, tensor<16x64x128xf32>,
            tensor<128x384xf32>, tensor<192x128xf32>) -> tensor<48x128xf32>
  return %y : tensor<48x128xf32>
}

// -----

// The chain: moe.gate with selection_bias, moe.shared_expert on its own
// (upload, tile map, GEMMs, download), moe.combine with shared_output (its
// positions are an argument: checked, docs/gpu.md "Index checks").

// CHECK-LABEL: func.func @chain
// CHECK: call @__moe_launch_moe_gate_kernel_topk_softmax_bias(
// CHECK: call @__moe_launch_moe_tile_map_kernel(
// CHECK: call @__moe_launch_moe_sigmoid_kernel(
// CHECK: call @__moe_launch_moe_gemm1_kernel_relu(
// CHECK: call @__moe_launch_moe_gemm2_weighted_kernel(
// CHECK: call @__moe_launch_moe_combine_shared_checked_kernel(
// CHECK: call @moeRuntimeIndexError(
// CHECK: gpu.func @moe_combine_shared_checked_kernel(
func.func @chain(%l: tensor<8x4xf32>, %b: tensor<4xf32>, %x: tensor<8x16xf32>,
                 %s1: tensor<16x24xf32>, %s2: tensor<24x16xf32>, %sg: tensor<16x1xf32>,
                 %out: tensor<16x16xf32>, %pos: tensor<8x2xi32>)
    -> (tensor<8x2xf32>, tensor<8x2xi32>, tensor<8x16xf32>) {
  %w, %i = moe.gate %l selection_bias(%b) {routing = #moe.top_k<k = 2>}
         : (tensor<8x4xf32>, tensor<4xf32>) -> (tensor<8x2xf32>, tensor<8x2xi32>)
  %s = moe.shared_expert %x shared(%s1, %s2) gate(%sg) {activation = #moe.activation<relu>}
         : (tensor<8x16xf32>, tensor<16x24xf32>, tensor<24x16xf32>, tensor<16x1xf32>)
         -> tensor<8x16xf32>
  %y = moe.combine %out, %w, %pos shared_output(%s)
         : (tensor<16x16xf32>, tensor<8x2xf32>, tensor<8x2xi32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  return %w, %i, %y : tensor<8x2xf32>, tensor<8x2xi32>, tensor<8x16xf32>
}
