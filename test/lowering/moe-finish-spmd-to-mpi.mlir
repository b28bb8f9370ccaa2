// RUN: moe-opt %s --moe-finish-spmd-to-mpi -split-input-file -verify-diagnostics | FileCheck %s
// RUN: moe-opt %s --moe-finish-spmd-to-mpi="implementation=MPICH" -split-input-file -verify-diagnostics | FileCheck %s --check-prefix=MPICH
// A bad implementation: one error (the pipeline's flag, which users write,
// in the message), exit code 1.
// RUN: not moe-opt %s --moe-finish-spmd-to-mpi="implementation=LAM" -split-input-file 2>&1 | FileCheck %s --check-prefix=BADIMPL
// The pipeline --convert-moe-spmd-to-mpi passes its option to this pass.
// RUN: moe-opt %examples/dense.mlir --convert-moe-spmd-to-mpi="implementation=MPICH" --dump-pass-pipeline -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=PIPE
//
// --moe-finish-spmd-to-mpi, the last stage of --convert-moe-spmd-to-mpi, on
// what upstream --convert-shard-to-mpi leaves (the input below is its
// output): the grid is erased, the split of the world communicator is the
// world itself, the module records the MPI ABI (other DLTI entries kept)
// and moe.split is dropped.

// BADIMPL: error: --convert-moe-spmd-to-mpi: option 'implementation' must be OpenMPI or MPICH, got 'LAM'

// PIPE:      moe-lower-spmd-exchanges,
// PIPE-NEXT: convert-shard-to-mpi,
// PIPE-NEXT: moe-finish-spmd-to-mpi{implementation=MPICH}

// CHECK-LABEL: module attributes {dlti.map = #dlti.map<"other" = 1 : i64, "MPI:Implementation" = "OpenMPI">} {
// MPICH-LABEL: module attributes {dlti.map = #dlti.map<"other" = 1 : i64, "MPI:Implementation" = "MPICH">} {
// CHECK-NOT: shard.
// CHECK-LABEL: func.func @all_reduce(%arg0: tensor<2xi64>) -> tensor<2xi64> {
// CHECK-NOT: mpi.comm_split
// CHECK: mpi.comm_rank
// The split's input, then the world in place of the split.
// CHECK: mpi.comm_world : !mpi.comm
// CHECK-NEXT: %[[WORLD:.*]] = mpi.comm_world : !mpi.comm
// CHECK-NEXT: mpi.allreduce(%alloc, %alloc, MPI_SUM, %[[WORLD]]) : memref<2xi64>, memref<2xi64>
module attributes {dlti.map = #dlti.map<"MPI:Implementation" = "MPICH", "other" = 1 : i64>} {
  shard.grid @g(shape = 2)
  func.func @all_reduce(%arg0: tensor<2xi64> {moe.split = 0 : i64}) -> (tensor<2xi64> {moe.split = 0 : i64}) {
    %c0_i32 = arith.constant 0 : i32
    %c2 = arith.constant 2 : index
    %0 = bufferization.to_buffer %arg0 : tensor<2xi64> to memref<2xi64>
    %alloc = memref.alloc() : memref<2xi64>
    linalg.copy ins(%0 : memref<2xi64>) outs(%alloc : memref<2xi64>)
    %1 = mpi.comm_world : !mpi.comm
    %retval, %rank = mpi.comm_rank(%1) : !mpi.retval, i32
    %2 = arith.index_cast %rank : i32 to index
    %3 = arith.remsi %2, %c2 : index
    %4 = arith.index_cast %3 : index to i32
    %5 = mpi.comm_world : !mpi.comm
    %newcomm = mpi.comm_split(%5, %c0_i32, %4) : !mpi.comm
    mpi.allreduce(%alloc, %alloc, MPI_SUM, %newcomm) : memref<2xi64>, memref<2xi64>
    %6 = bufferization.to_tensor %alloc restrict : memref<2xi64> to tensor<2xi64>
    return %6 : tensor<2xi64>
  }
}

// -----

// A module without a grid is left as it is (no MPI attribute).
// CHECK-LABEL: module {
// CHECK-NEXT: func.func @plain(%arg0: tensor<4xf32> {moe.split = 0 : i64}) -> tensor<4xf32> {
// MPICH-LABEL: module {
// MPICH-NEXT: func.func @plain(
func.func @plain(%x: tensor<4xf32> {moe.split = 0 : i64}) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// A shard op upstream has no lowering for (the shape of a dynamic grid).
shard.grid @g(shape = ?)
func.func @dynamic_grid() -> index {
  // expected-error @+1 {{'shard.grid_shape' has no lowering to MPI (upstream --convert-shard-to-mpi left it)}}
  %s = shard.grid_shape @g : index
  return %s : index
}

// -----

// An exchange that --moe-lower-spmd-exchanges did not lower.
shard.grid @g(shape = 2)
func.func @exchange(%rows: tensor<?x8xf32>, %off: tensor<5xi32>, %counts: tensor<2x4xi32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'moe.exchange_dispatch' op is not lowered: run --moe-lower-spmd-exchanges before --moe-finish-spmd-to-mpi}}
  %r = moe.exchange_dispatch %rows, %off, %counts on @g
         : (tensor<?x8xf32>, tensor<5xi32>, tensor<2x4xi32>) -> tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}

// -----

// A 2-D grid: the split's color depends on the rank.
#map = affine_map<()[s0, s1] -> (s0 * s1)>
shard.grid @g(shape = 2x2)
func.func @two_d(%arg0: tensor<2xi64>) -> tensor<2xi64> {
  %c2 = arith.constant 2 : index
  %0 = bufferization.to_buffer %arg0 : tensor<2xi64> to memref<2xi64>
  %alloc = memref.alloc() : memref<2xi64>
  linalg.copy ins(%0 : memref<2xi64>) outs(%alloc : memref<2xi64>)
  %1 = mpi.comm_world : !mpi.comm
  %retval, %rank = mpi.comm_rank(%1) : !mpi.retval, i32
  %2 = arith.index_cast %rank : i32 to index
  %3 = arith.remsi %2, %c2 : index
  %4 = arith.divsi %2, %c2 : index
  %5 = arith.remsi %4, %c2 : index
  %6 = arith.index_cast %3 : index to i32
  %7 = affine.apply #map()[%5, %c2]
  %8 = arith.index_cast %7 : index to i32
  %9 = mpi.comm_world : !mpi.comm
  // expected-error @+1 {{a communicator split with a rank-dependent color (a grid of more than one dimension) is not supported}}
  %newcomm = mpi.comm_split(%9, %6, %8) : !mpi.comm
  mpi.allreduce(%alloc, %alloc, MPI_SUM, %newcomm) : memref<2xi64>, memref<2xi64>
  %10 = bufferization.to_tensor %alloc restrict : memref<2xi64> to tensor<2xi64>
  return %10 : tensor<2xi64>
}
