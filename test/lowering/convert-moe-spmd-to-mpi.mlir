// RUN: moe-opt %s --convert-moe-spmd-to-mpi -split-input-file -verify-diagnostics | FileCheck %s
// RUN: moe-opt %s --convert-moe-spmd-to-mpi="implementation=MPICH" -split-input-file -verify-diagnostics | FileCheck %s --check-prefix=MPICH
//
// --convert-moe-spmd-to-mpi: the ragged exchanges become our schedule of
// blocking mpi.send / mpi.recv on 1-D row ranges (pairs i < j in one global
// order: i sends then receives, j receives then sends; a rank's own chunks
// are copied); the shard ops go through upstream --convert-shard-to-mpi
// (process index -> mpi.comm_rank, all_reduce -> mpi.allreduce on the world
// communicator); the grid is erased and the module records the MPI ABI.

// CHECK-LABEL: module attributes {dlti.map = #dlti.map<"MPI:Implementation" = "OpenMPI">}
// MPICH-LABEL: module attributes {dlti.map = #dlti.map<"MPI:Implementation" = "MPICH">}
// CHECK-NOT: shard.
// CHECK-LABEL: func.func @exchange(
// CHECK-SAME: %[[ROWS:[^:]*]]: tensor<?x8xbf16>, %[[OFF:[^:]*]]: tensor<5xi32>, %[[COUNTS:[^:]*]]: tensor<2x4xi32>, %[[OUTR:[^:]*]]: tensor<?x8xf32>, %[[DESTT:[^:]*]]: tensor<?x8xf32>
// CHECK: %[[WORLD:.*]] = mpi.comm_world : !mpi.comm
// CHECK: %{{.*}}, %[[RANK:.*]] = mpi.comm_rank(%[[WORLD]]) : !mpi.retval, i32
// CHECK: %[[ME:.*]] = arith.index_cast %[[RANK]] : i32 to index
// bf16 rows travel as i16 words.
// CHECK: %[[BITS:.*]] = arith.bitcast %[[ROWS]] : tensor<?x8xbf16> to tensor<?x8xi16>
// CHECK: %[[IN:.*]] = bufferization.to_buffer %[[BITS]] read_only : tensor<?x8xi16> to memref<?x8xi16>
// CHECK: %[[OUT:.*]] = memref.alloc(%{{.*}}) : memref<?x8xi16>
// The rank's own chunks: copies.
// CHECK: memref.copy %{{.*}}, %{{.*}} : memref<?x8xi16, strided<[8, 1], offset: ?>> to memref<?x8xi16, strided<[8, 1], offset: ?>>
// The pairs (i, j), i < j.
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step
// CHECK: scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step
// CHECK: %[[ISI:.*]] = arith.cmpi eq, %[[ME]], %[[I]] : index
// CHECK: %[[ISJ:.*]] = arith.cmpi eq, %[[ME]], %[[J]] : index
// CHECK: scf.if %[[ISI]] {
// CHECK: %[[SENDV:.*]] = memref.subview %[[IN]]
// CHECK: %[[SENDF:.*]] = memref.collapse_shape %[[SENDV]] {{\[\[}}0, 1]] : memref<?x8xi16, strided<[8, 1], offset: ?>> into memref<?xi16, strided<[1], offset: ?>>
// CHECK: mpi.send(%[[SENDF]], %{{.*}}, %{{.*}}, %{{.*}}) : memref<?xi16, strided<[1], offset: ?>>, i32, i32
// CHECK: %[[RECVV:.*]] = memref.subview %[[OUT]]
// CHECK: %[[RECVF:.*]] = memref.collapse_shape %[[RECVV]]
// CHECK: mpi.recv(%[[RECVF]], %{{.*}}, %{{.*}}, %{{.*}}) : memref<?xi16, strided<[1], offset: ?>>, i32, i32
// CHECK: scf.if %[[ISJ]] {
// CHECK: mpi.recv(
// CHECK: mpi.send(
// CHECK: %[[T:.*]] = bufferization.to_tensor %[[OUT]] restrict writable : memref<?x8xi16> to tensor<?x8xi16>
// CHECK: %[[R:.*]] = arith.bitcast %[[T]] : tensor<?x8xi16> to tensor<?x8xbf16>
// The combine direction writes into a copy of dest (f32 rows as they are).
// CHECK: bufferization.to_buffer %[[OUTR]] read_only : tensor<?x8xf32> to memref<?x8xf32>
// CHECK-NEXT: %[[DEST:.*]] = bufferization.to_buffer %[[DESTT]] read_only : tensor<?x8xf32> to memref<?x8xf32>
// CHECK: %[[BACK:.*]] = memref.alloc(%{{.*}}) : memref<?x8xf32>
// CHECK-NEXT: memref.copy %[[DEST]], %[[BACK]] : memref<?x8xf32> to memref<?x8xf32>
// CHECK: mpi.send({{.*}}) : memref<?xf32, strided<[1], offset: ?>>, i32, i32
// CHECK: %[[B:.*]] = bufferization.to_tensor %[[BACK]] restrict writable
// The all-reduce: upstream's, on the world communicator (no comm_split).
// CHECK-NOT: mpi.comm_split
// CHECK: mpi.allreduce(%{{.*}}, %{{.*}}, MPI_SUM, %{{.*}}) : memref<2xi64>, memref<2xi64>
// CHECK: return %[[R]], %[[B]], %{{.*}} : tensor<?x8xbf16>, tensor<?x8xf32>, tensor<2xi64>
shard.grid @g(shape = 2)
func.func @exchange(%rows: tensor<?x8xbf16>, %off: tensor<5xi32>, %counts: tensor<2x4xi32>,
                    %out: tensor<?x8xf32>, %dest: tensor<?x8xf32>, %n: tensor<2xi64>)
    -> (tensor<?x8xbf16>, tensor<?x8xf32>, tensor<2xi64>) {
  %r = moe.exchange_dispatch %rows, %off, %counts on @g
         : (tensor<?x8xbf16>, tensor<5xi32>, tensor<2x4xi32>) -> tensor<?x8xbf16>
  %b = moe.exchange_combine %out, %off, %counts into %dest on @g
         : (tensor<?x8xf32>, tensor<5xi32>, tensor<2x4xi32>, tensor<?x8xf32>) -> tensor<?x8xf32>
  %s = shard.all_reduce %n on @g grid_axes = [0] : tensor<2xi64> -> tensor<2xi64>
  return %r, %b, %s : tensor<?x8xbf16>, tensor<?x8xf32>, tensor<2xi64>
}

// -----

// A module without a grid is left alone (no MPI attribute).
// CHECK-LABEL: func.func @plain
// CHECK-NOT: dlti.map
// MPICH-LABEL: func.func @plain
func.func @plain(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// Verifier of the exchanges.
shard.grid @g(shape = 2)
func.func @bad_counts(%rows: tensor<?x8xf32>, %off: tensor<5xi32>, %counts: tensor<3x4xi32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'moe.exchange_dispatch' op counts has 3 rows, but grid @g has 2 ranks}}
  %r = moe.exchange_dispatch %rows, %off, %counts on @g
         : (tensor<?x8xf32>, tensor<5xi32>, tensor<3x4xi32>) -> tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}

// -----

shard.grid @g(shape = 4)
func.func @uneven(%rows: tensor<?x8xf32>, %off: tensor<7xi32>, %counts: tensor<4x6xi32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'moe.exchange_dispatch' op E = 6 experts cannot be split over 4 ranks (E % N != 0)}}
  %r = moe.exchange_dispatch %rows, %off, %counts on @g
         : (tensor<?x8xf32>, tensor<7xi32>, tensor<4x6xi32>) -> tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}

// -----

func.func @no_grid(%rows: tensor<?x8xf32>, %off: tensor<5xi32>, %counts: tensor<2x4xi32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'moe.exchange_dispatch' op grid @nowhere does not name a shard.grid}}
  %r = moe.exchange_dispatch %rows, %off, %counts on @nowhere
         : (tensor<?x8xf32>, tensor<5xi32>, tensor<2x4xi32>) -> tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}

// -----

shard.grid @g(shape = 2)
func.func @bad_dest(%out: tensor<?x8xf32>, %off: tensor<5xi32>, %counts: tensor<2x4xi32>,
                    %dest: tensor<?x8xbf16>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'moe.exchange_combine' op result type 'tensor<?x8xf32>' must be the type of dest 'tensor<?x8xbf16>'}}
  %b = moe.exchange_combine %out, %off, %counts into %dest on @g
         : (tensor<?x8xf32>, tensor<5xi32>, tensor<2x4xi32>, tensor<?x8xbf16>) -> tensor<?x8xf32>
  return %b : tensor<?x8xf32>
}
