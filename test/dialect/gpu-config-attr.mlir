// RUN: moe-opt %s | FileCheck %s
// RUN: moe-opt %s | moe-opt | FileCheck %s
// RUN: moe-opt %s --mlir-print-op-generic | moe-opt | FileCheck %s
//
// #moe.gpu_config on the ops that take it (parameters in any order), beside
// a #moe.cpu_config; the GPU lowering's markers on the ops they mark.

// CHECK-LABEL: func.func @configured
// CHECK: moe.route %{{.*}} router(%{{.*}}) {moe.gpu_config = #moe.gpu_config<engine = cuda_core, big_tile_rows = 0, split_k = 0, stages = 0, groups_in_flight = 1>}
// CHECK-NEXT: moe.layer {{.*}} {activation = #moe.activation<silu>, moe.cpu_config = #moe.cpu_config<vector_bits = 256, registers = 16, micro_rows = 6, micro_vectors = 2, row_block = 48, col_block = 256, prefetch_rows = 128, bf16_dot = false>, moe.gpu_config = #moe.gpu_config<engine = wgmma, big_tile_rows = 128, split_k = 4, stages = 6, groups_in_flight = 0>, routing = #moe.top_k<k = 2>}
func.func @configured(%x: tensor<4x8xbf16>, %wr: tensor<8x4xbf16>, %w1: tensor<4x8x16xbf16>,
                      %w2: tensor<4x16x8xbf16>) -> (tensor<4x4xbf16>, tensor<4x8xbf16>) {
  %o = moe.route %x router(%wr) {moe.gpu_config = #moe.gpu_config<engine = cuda_core, big_tile_rows = 0, split_k = 0, stages = 0, groups_in_flight = 1>} : (tensor<4x8xbf16>, tensor<8x4xbf16>) -> tensor<4x4xbf16>
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.top_k<k = 2>, activation = #moe.activation<silu>,
      moe.gpu_config = #moe.gpu_config<split_k = 4, engine = wgmma, stages = 6, groups_in_flight = 0, big_tile_rows = 128>,
      moe.cpu_config = #moe.cpu_config<vector_bits = 256, registers = 16, micro_rows = 6, micro_vectors = 2, row_block = 48, col_block = 256, prefetch_rows = 128, bf16_dot = false>}
      : (tensor<4x8xbf16>, tensor<8x4xbf16>, tensor<4x8x16xbf16>, tensor<4x16x8xbf16>) -> tensor<4x8xbf16>
  return %o, %y : tensor<4x4xbf16>, tensor<4x8xbf16>
}

// CHECK-LABEL: func.func private @__moe_launch_k
// CHECK-SAME: attributes {moe.gpu_kernel = @moe_kernels::@k, moe.gpu_stream_ordered}
func.func private @__moe_launch_k(index) attributes {moe.gpu_kernel = @moe_kernels::@k, moe.gpu_stream_ordered}

// CHECK-LABEL: func.func @marked
// CHECK: gpu.alloc () {moe.gpu_device_result} : memref<16xf32>
// CHECK: linalg.generic {{.*}} attrs = {moe.gpu_device_elementwise}
func.func @marked(%a: tensor<4xf32>) -> tensor<4xf32> {
  %m = gpu.alloc () {moe.gpu_device_result} : memref<16xf32>
  %e = tensor.empty() : tensor<4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                       iterator_types = ["parallel"]}
       ins(%a : tensor<4xf32>) outs(%e : tensor<4xf32>) attrs = {moe.gpu_device_elementwise} {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %in, %in : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// CHECK: gpu.func @kernel() kernel attributes {moe.gpu_dynamic_shared_memory = 49152 : i64}
gpu.module @moe_kernels {
  gpu.func @kernel() kernel attributes {moe.gpu_dynamic_shared_memory = 49152 : i64} {
    gpu.return
  }
}
