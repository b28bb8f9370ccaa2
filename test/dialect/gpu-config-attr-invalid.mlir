// RUN: moe-opt %s -split-input-file -verify-diagnostics
//
// #moe.gpu_config, the moe.gpu_config dialect attribute and the GPU
// lowering's markers: one case per verifier rule.

func.func @big_without_wgmma(%x: tensor<4x8xbf16>, %wr: tensor<8x4xbf16>) -> tensor<4x4xbf16> {
  // expected-error @+1 {{#moe.gpu_config: big_tile_rows = 128 needs engine = wgmma (128-row tiles are two wgmma warpgroups), got engine = mma_sync}}
  %o = moe.route %x router(%wr) {moe.gpu_config = #moe.gpu_config<engine = mma_sync, big_tile_rows = 128, split_k = 0, stages = 0, groups_in_flight = 1>} : (tensor<4x8xbf16>, tensor<8x4xbf16>) -> tensor<4x4xbf16>
  return %o : tensor<4x4xbf16>
}

// -----

func.func @negative_big(%x: tensor<4x8xbf16>, %wr: tensor<8x4xbf16>) -> tensor<4x4xbf16> {
  // expected-error @+1 {{#moe.gpu_config needs big_tile_rows >= 0, got -1}}
  %o = moe.route %x router(%wr) {moe.gpu_config = #moe.gpu_config<engine = wgmma, big_tile_rows = -1, split_k = 0, stages = 0, groups_in_flight = 1>} : (tensor<4x8xbf16>, tensor<8x4xbf16>) -> tensor<4x4xbf16>
  return %o : tensor<4x4xbf16>
}

// -----

func.func @split_k(%x: tensor<4x8xbf16>, %wr: tensor<8x4xbf16>) -> tensor<4x4xbf16> {
  // expected-error @+1 {{#moe.gpu_config needs split_k in 0..1024 (0 = chosen from the shape), got 1025}}
  %o = moe.route %x router(%wr) {moe.gpu_config = #moe.gpu_config<engine = mma_sync, big_tile_rows = 0, split_k = 1025, stages = 0, groups_in_flight = 1>} : (tensor<4x8xbf16>, tensor<8x4xbf16>) -> tensor<4x4xbf16>
  return %o : tensor<4x4xbf16>
}

// -----

func.func @one_stage(%x: tensor<4x8xbf16>, %wr: tensor<8x4xbf16>) -> tensor<4x4xbf16> {
  // expected-error @+1 {{#moe.gpu_config needs stages = 0 (the defaults) or in 2..8, got 1}}
  %o = moe.route %x router(%wr) {moe.gpu_config = #moe.gpu_config<engine = mma_sync, big_tile_rows = 0, split_k = 0, stages = 1, groups_in_flight = 1>} : (tensor<4x8xbf16>, tensor<8x4xbf16>) -> tensor<4x4xbf16>
  return %o : tensor<4x4xbf16>
}

// -----

func.func @nine_stages(%x: tensor<4x8xbf16>, %wr: tensor<8x4xbf16>) -> tensor<4x4xbf16> {
  // expected-error @+1 {{#moe.gpu_config needs stages = 0 (the defaults) or in 2..8, got 9}}
  %o = moe.route %x router(%wr) {moe.gpu_config = #moe.gpu_config<engine = wgmma, big_tile_rows = 0, split_k = 0, stages = 9, groups_in_flight = 1>} : (tensor<4x8xbf16>, tensor<8x4xbf16>) -> tensor<4x4xbf16>
  return %o : tensor<4x4xbf16>
}

// -----

func.func @in_flight(%x: tensor<4x8xbf16>, %wr: tensor<8x4xbf16>) -> tensor<4x4xbf16> {
  // expected-error @+1 {{#moe.gpu_config needs groups_in_flight = 0 or 1, got 2}}
  %o = moe.route %x router(%wr) {moe.gpu_config = #moe.gpu_config<engine = wgmma, big_tile_rows = 0, split_k = 0, stages = 0, groups_in_flight = 2>} : (tensor<4x8xbf16>, tensor<8x4xbf16>) -> tensor<4x4xbf16>
  return %o : tensor<4x4xbf16>
}

// -----

func.func @engine(%x: tensor<4x8xbf16>, %wr: tensor<8x4xbf16>) -> tensor<4x4xbf16> {
  // expected-error @+2 {{expected ::mlir::moe::GpuEngine to be one of: cuda_core, mma_sync, wgmma}}
  // expected-error @+1 {{failed to parse MoE_GpuConfigAttr parameter 'engine'}}
  %o = moe.route %x router(%wr) {moe.gpu_config = #moe.gpu_config<engine = tcgen05, big_tile_rows = 0, split_k = 0, stages = 0, groups_in_flight = 1>} : (tensor<4x8xbf16>, tensor<8x4xbf16>) -> tensor<4x4xbf16>
  return %o : tensor<4x4xbf16>
}

// -----

func.func @not_a_config(%x: tensor<4x8xbf16>, %wr: tensor<8x4xbf16>) -> tensor<4x4xbf16> {
  // expected-error @+1 {{'moe.gpu_config' must be a #moe.gpu_config, got #moe.cpu_config<}}
  %o = moe.route %x router(%wr) {moe.gpu_config = #moe.cpu_config<vector_bits = 256, registers = 16, micro_rows = 6, micro_vectors = 2, row_block = 48, col_block = 256, prefetch_rows = 128, bf16_dot = false>} : (tensor<4x8xbf16>, tensor<8x4xbf16>) -> tensor<4x4xbf16>
  return %o : tensor<4x4xbf16>
}

// -----

func.func @placement(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'moe.gpu_config' applies to the ops whose GPU lowering emits grouped GEMMs (moe.layer, moe.soft_layer, moe.route, moe.expert_ffn, moe.shared_expert, moe.fused_experts, moe.fused_soft_experts), not to 'arith.addf'}}
  %y = arith.addf %x, %x {moe.gpu_config = #moe.gpu_config<engine = mma_sync, big_tile_rows = 0, split_k = 0, stages = 0, groups_in_flight = 1>} : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// expected-error @+1 {{'moe.gpu_kernel' must be a symbol reference to a kernel on a function (a launch placeholder), got "k" on 'func.func'}}
func.func private @__moe_launch_k(index) attributes {moe.gpu_kernel = "k"}

// -----

func.func @kernel_on_op(%x: f32) -> f32 {
  // expected-error @+1 {{'moe.gpu_kernel' must be a symbol reference to a kernel on a function (a launch placeholder), got @moe_kernels::@k on 'arith.addf'}}
  %y = arith.addf %x, %x {moe.gpu_kernel = @moe_kernels::@k} : f32
  return %y : f32
}

// -----

gpu.module @moe_kernels {
  // expected-error @+1 {{'moe.gpu_dynamic_shared_memory' must be a non-negative integer (bytes) on a kernel, got -4 : i64 on 'gpu.func'}}
  gpu.func @kernel() kernel attributes {moe.gpu_dynamic_shared_memory = -4 : i64} {
    gpu.return
  }
}

// -----

func.func @device_result() {
  // expected-error @+1 {{'moe.gpu_device_result' must be a unit attribute, got 1 : i64}}
  %m = gpu.alloc () {moe.gpu_device_result = 1} : memref<16xf32>
  return
}

// -----

func.func @stream_ordered_on_op(%x: f32) -> f32 {
  // expected-error @+1 {{'moe.gpu_stream_ordered' marks a function, not 'arith.addf'}}
  %y = arith.addf %x, %x {moe.gpu_stream_ordered} : f32
  return %y : f32
}
