// RUN: moe-opt %s --moe-cpu-check-allocs | FileCheck %s
//
// --moe-cpu-check-allocs: after every memref.alloc, a null pointer for a
// non-empty buffer calls moeCpuAllocError with the bytes requested.

// CHECK: func.func private @moeCpuAllocError(i64)
// CHECK-LABEL: func.func @alloc
// CHECK: %[[M:.*]] = memref.alloc(%arg0) : memref<?x16xf32>
// CHECK: %[[BYTES0:.*]] = arith.muli %{{.*}}, %arg0 : index
// CHECK: %[[BYTES:.*]] = arith.muli %[[BYTES0]], %{{.*}} : index
// CHECK: %[[P:.*]] = memref.extract_aligned_pointer_as_index %[[M]]
// CHECK: %[[NULL:.*]] = arith.cmpi eq, %[[P]], %{{.*}} : index
// CHECK: %[[SOME:.*]] = arith.cmpi sgt, %[[BYTES]], %{{.*}} : index
// CHECK: %[[BAD:.*]] = arith.andi %[[NULL]], %[[SOME]] : i1
// CHECK: scf.if %[[BAD]] {
// CHECK-NEXT: %[[N:.*]] = arith.index_cast %[[BYTES]] : index to i64
// CHECK-NEXT: func.call @moeCpuAllocError(%[[N]]) : (i64) -> ()
func.func @alloc(%n: index) -> memref<?x16xf32> {
  %m = memref.alloc(%n) : memref<?x16xf32>
  return %m : memref<?x16xf32>
}
