// RUN: moe-opt %s --moe-lower-spmd-exchanges -split-input-file -verify-diagnostics \
// RUN:   | FileCheck %s --implicit-check-not=moe.exchange_ --implicit-check-not=mpi.comm_rank --implicit-check-not=dlti.map
//
// --moe-lower-spmd-exchanges, the first stage of --convert-moe-spmd-to-mpi:
// the ragged exchanges become our schedule of blocking mpi.send / mpi.recv
// on 1-D row ranges, the calling rank a shard.process_linear_index on the
// exchange's grid. Everything else of the shard dialect (the grid, the
// process index, shard.all_reduce) is left for upstream
// --convert-shard-to-mpi, and nothing records the MPI ABI yet
// (--moe-finish-spmd-to-mpi does). The whole schedule:
// test/lowering/convert-moe-spmd-to-mpi.mlir.

// CHECK-LABEL: shard.grid @g(shape = 2)
// CHECK-LABEL: func.func @exchange(
// CHECK-SAME: %[[ROWS:[^:]*]]: tensor<?x8xbf16>
// CHECK: %[[ME:.*]] = shard.process_linear_index on @g : index
// CHECK-NEXT: %[[WORLD:.*]] = mpi.comm_world : !mpi.comm
// CHECK-NEXT: %{{.*}} = arith.constant 0 : i32
// CHECK-NEXT: %[[BITS:.*]] = arith.bitcast %[[ROWS]] : tensor<?x8xbf16> to tensor<?x8xi16>
// CHECK-NEXT: %[[IN:.*]] = bufferization.to_buffer %[[BITS]] read_only : tensor<?x8xi16> to memref<?x8xi16>
// CHECK: %[[OUT:.*]] = memref.alloc(%{{.*}}) : memref<?x8xi16>
// CHECK: mpi.send(
// CHECK: mpi.recv(
// CHECK: %[[T:.*]] = bufferization.to_tensor %[[OUT]] restrict writable : memref<?x8xi16> to tensor<?x8xi16>
// CHECK-NEXT: %[[R:.*]] = arith.bitcast %[[T]] : tensor<?x8xi16> to tensor<?x8xbf16>
// CHECK: %[[S:.*]] = shard.all_reduce %{{.*}} on @g grid_axes = [0] : tensor<2xi64> -> tensor<2xi64>
// CHECK: return %[[R]], %[[S]] : tensor<?x8xbf16>, tensor<2xi64>
shard.grid @g(shape = 2)
func.func @exchange(%rows: tensor<?x8xbf16>, %off: tensor<5xi32>, %counts: tensor<2x4xi32>,
                    %n: tensor<2xi64>) -> (tensor<?x8xbf16>, tensor<2xi64>) {
  %r = moe.exchange_dispatch %rows, %off, %counts on @g
         : (tensor<?x8xbf16>, tensor<5xi32>, tensor<2x4xi32>) -> tensor<?x8xbf16>
  %s = shard.all_reduce %n on @g grid_axes = [0] : tensor<2xi64> -> tensor<2xi64>
  return %r, %s : tensor<?x8xbf16>, tensor<2xi64>
}

// -----

// A module without exchanges is left as it is.
// CHECK-LABEL: func.func @plain(
// CHECK-NEXT: return %arg0 : tensor<4xf32>
func.func @plain(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

shard.grid @g(shape = 2)
func.func @dynamic_width(%rows: tensor<?x?xf32>, %off: tensor<5xi32>, %counts: tensor<2x4xi32>) -> tensor<?x?xf32> {
  // expected-error @+1 {{'moe.exchange_dispatch' op needs a static row width D to lower to MPI}}
  %r = moe.exchange_dispatch %rows, %off, %counts on @g
         : (tensor<?x?xf32>, tensor<5xi32>, tensor<2x4xi32>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}
