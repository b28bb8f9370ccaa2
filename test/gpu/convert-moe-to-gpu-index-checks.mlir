// Index checks of the GPU path (convert-moe-to-gpu's check-indices, on by
// default; docs/gpu.md "Index checks"): a chain op whose index data is an
// operand launches the checked kernel with a zeroed 4-word error word, and
// after its kernels the host copies the word back and calls
// moeRuntimeIndexError when its kind is not 0. With check-indices=false, and
// for data that moe ops of the function made (valid by construction), the
// unchecked kernels run and nothing is read back.
// RUN: moe-opt %s -split-input-file --convert-moe-to-gpu --canonicalize | FileCheck %s
// RUN: moe-opt %s -split-input-file --convert-moe-to-gpu=check-indices=false --canonicalize \
// RUN:   | FileCheck %s --check-prefix=OFF

// CHECK-LABEL: func.func @dispatch(
// CHECK: %[[ERR:.*]] = gpu.alloc  (%c4) {{.*}} : memref<?xi32>
// CHECK-NEXT: gpu.memset  %[[ERR]], %c0_i32 : memref<?xi32>, i32
// CHECK: call @__moe_launch_moe_align_kernel_checked({{.*}}, %[[ERR]]) :
// CHECK: call @__moe_launch_moe_dispatch_rows_kernel(
// CHECK: %[[HOST:.*]] = memref.alloca() : memref<4xi32>
// CHECK-NEXT: gpu.memcpy  %[[HOST]], %[[ERR]] : memref<4xi32>, memref<?xi32>
// CHECK-NEXT: %[[KIND:.*]] = memref.load %[[HOST]][%c0] : memref<4xi32>
// CHECK-NEXT: %[[BAD:.*]] = arith.cmpi ne, %[[KIND]], %c0_i32 : i32
// CHECK-NEXT: scf.if %[[BAD]] {
// CHECK-NEXT:   %[[AT:.*]] = memref.load %[[HOST]][%c1] : memref<4xi32>
// CHECK-NEXT:   %[[AT64:.*]] = arith.extsi %[[AT]] : i32 to i64
// CHECK-NEXT:   %[[V:.*]] = memref.load %[[HOST]][%c2] : memref<4xi32>
// CHECK-NEXT:   %[[V64:.*]] = arith.extsi %[[V]] : i32 to i64
// CHECK-NEXT:   %[[T:.*]] = arith.divsi %[[AT64]], %c2_i64 : i64
// CHECK-NEXT:   %[[S:.*]] = arith.remsi %[[AT64]], %c2_i64 : i64
// CHECK-NEXT:   func.call @moeRuntimeIndexError(%[[KIND]], %[[T]], %[[S]], %[[V64]], %c4_i64) : (i32, i64, i64, i64, i64) -> ()
// CHECK-NEXT: }
// CHECK: gpu.dealloc  %[[ERR]]
// CHECK: gpu.func @moe_align_kernel_checked(
// OFF-LABEL: func.func @dispatch(
// OFF-NOT: gpu.memset
// OFF: call @__moe_launch_moe_align_kernel(
// OFF-NOT: moeRuntimeIndexError
// OFF-NOT: memref<4xi32>
// OFF: return
func.func @dispatch(%x: tensor<4x8xf32>, %i: tensor<4x2xi32>)
    -> (tensor<8x8xf32>, tensor<5xi32>, tensor<8xi32>, tensor<4x2xi32>) {
  %rows, %off, %src, %pos = moe.dispatch %x, %i {num_experts = 4 : i64}
      : (tensor<4x8xf32>, tensor<4x2xi32>) -> (tensor<8x8xf32>, tensor<5xi32>, tensor<8xi32>, tensor<4x2xi32>)
  return %rows, %off, %src, %pos : tensor<8x8xf32>, tensor<5xi32>, tensor<8xi32>, tensor<4x2xi32>
}

// -----

// moe.expert_ffn: the checked tile map gets N (4 rows) and the word.
// CHECK-LABEL: func.func @ffn(
// CHECK: %[[ERR:.*]] = gpu.alloc  (%c4) {{.*}} : memref<?xi32>
// CHECK: call @__moe_launch_moe_tile_map_checked_kernel({{.*}}, %c4, %[[ERR]]) :
// CHECK: gpu.memcpy  %{{.*}}, %[[ERR]] : memref<4xi32>, memref<?xi32>
// CHECK: call @moeRuntimeIndexError(
// CHECK: gpu.func @moe_tile_map_checked_kernel(
// OFF-LABEL: func.func @ffn(
// OFF: call @__moe_launch_moe_tile_map_kernel(
// OFF-NOT: moeRuntimeIndexError
// OFF: return
func.func @ffn(%rows: tensor<4x16xf32>, %off: tensor<3xi32>, %w1: tensor<2x16x8xf32>, %w2: tensor<2x8x16xf32>) -> tensor<4x16xf32> {
  %o = moe.expert_ffn %rows, %off experts(%w1, %w2) {activation = #moe.activation<relu>}
         : (tensor<4x16xf32>, tensor<3xi32>, tensor<2x16x8xf32>, tensor<2x8x16xf32>) -> tensor<4x16xf32>
  return %o : tensor<4x16xf32>
}

// -----

// moe.combine: N = 8 expert output rows, and the word.
// CHECK-LABEL: func.func @combine(
// CHECK: call @__moe_launch_moe_combine_checked_kernel({{.*}}, %c8, %[[ERR:.*]]) :
// CHECK: gpu.memcpy  %{{.*}}, %[[ERR]] : memref<4xi32>, memref<?xi32>
// CHECK: call @moeRuntimeIndexError(
// OFF-LABEL: func.func @combine(
// OFF: call @__moe_launch_moe_combine_kernel(
// OFF-NOT: moeRuntimeIndexError
// OFF: return
func.func @combine(%out: tensor<8x4xf32>, %w: tensor<4x2xf32>, %pos: tensor<4x2xi32>) -> tensor<4x4xf32> {
  %y = moe.combine %out, %w, %pos : (tensor<8x4xf32>, tensor<4x2xf32>, tensor<4x2xi32>) -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

// moe.fused_experts on an argument: checked; on the indices of a moe.gate
// with the same num_experts: valid by construction, not checked.
// CHECK-LABEL: func.func @fused(
// CHECK: call @__moe_launch_moe_align_kernel_weighted_combine_checked(
// CHECK: call @moeRuntimeIndexError(
// CHECK-LABEL: func.func @gated(
// CHECK-NOT: _checked
// CHECK-NOT: moeRuntimeIndexError
// CHECK: call @__moe_launch_moe_align_kernel_weighted_combine(
// CHECK-NOT: moeRuntimeIndexError
// CHECK: return
func.func @fused(%x: tensor<4x8xf32>, %i: tensor<4x2xi32>, %w: tensor<4x2xf32>,
                 %w1: tensor<4x8x16xf32>, %w2: tensor<4x16x8xf32>) -> tensor<4x8xf32> {
  %y = moe.fused_experts %x, %i, %w experts(%w1, %w2) {activation = #moe.activation<relu>, num_experts = 4 : i64}
      : (tensor<4x8xf32>, tensor<4x2xi32>, tensor<4x2xf32>, tensor<4x8x16xf32>, tensor<4x16x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
func.func @gated(%x: tensor<4x8xf32>, %l: tensor<4x4xf32>,
                 %w1: tensor<4x8x16xf32>, %w2: tensor<4x16x8xf32>) -> tensor<4x8xf32> {
  %w, %i = moe.gate %l {routing = #moe.top_k<k = 2>} : (tensor<4x4xf32>) -> (tensor<4x2xf32>, tensor<4x2xi32>)
  %y = moe.fused_experts %x, %i, %w experts(%w1, %w2) {activation = #moe.activation<relu>, num_experts = 4 : i64}
      : (tensor<4x8xf32>, tensor<4x2xi32>, tensor<4x2xf32>, tensor<4x8x16xf32>, tensor<4x16x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
