// The OpenMP runtime of the GPU emulation (test/lib/EmulationOpenMP.cpp,
// libMoEEmulationOpenMP.so): a team of 256 threads on fibers, with thread
// ids and barriers as the emulated kernels use them. Each thread writes its
// id, waits at a barrier, reads its neighbour's (which must be written by
// then), waits again, and overwrites its own slot; a nested region runs as
// a team of one. Printed: the mismatches (0), the sum of what was read
// (0 + 1 + ... + 255 = 32640), the team size seen inside (256) and outside
// (1) the region, and the nested team's size (1).
// RUN: moe-opt %s --pass-pipeline="builtin.module(convert-scf-to-cf,convert-openmp-to-llvm,finalize-memref-to-llvm,convert-func-to-llvm,convert-arith-to-llvm,convert-cf-to-llvm,reconcile-unrealized-casts)" --emit-bytecode \
// RUN:   | moe-test-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_libs,%emulation_omp | FileCheck %s
// CHECK:      0
// CHECK-NEXT: 32640
// CHECK-NEXT: 256
// CHECK-NEXT: 1
// CHECK-NEXT: 1

func.func private @omp_get_thread_num() -> i32
func.func private @omp_get_num_threads() -> i32
func.func private @printI64(i64)
func.func private @printNewline()

func.func @print(%v: i32) {
  %w = arith.extsi %v : i32 to i64
  call @printI64(%w) : (i64) -> ()
  call @printNewline() : () -> ()
  return
}

func.func @main() {
  %n = arith.constant 256 : i32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c256 = arith.constant 256 : index
  %zero = arith.constant 0 : i32
  %one = arith.constant 1 : i32
  %ids = memref.alloc() : memref<256xi32>
  %read = memref.alloc() : memref<256xi32>
  %sizes = memref.alloc() : memref<2xi32>
  omp.parallel num_threads(%n : i32) {
    %t = func.call @omp_get_thread_num() : () -> i32
    %i = arith.index_cast %t : i32 to index
    memref.store %t, %ids[%i] : memref<256xi32>
    omp.barrier
    %j0 = arith.addi %i, %c1 : index
    %j = arith.remui %j0, %c256 : index
    %v = memref.load %ids[%j] : memref<256xi32>
    memref.store %v, %read[%i] : memref<256xi32>
    omp.barrier
    memref.store %zero, %ids[%i] : memref<256xi32>
    %is0 = arith.cmpi eq, %t, %zero : i32
    scf.if %is0 {
      %s = func.call @omp_get_num_threads() : () -> i32
      memref.store %s, %sizes[%c0] : memref<2xi32>
      omp.parallel num_threads(%n : i32) {
        %s1 = func.call @omp_get_num_threads() : () -> i32
        memref.store %s1, %sizes[%c1] : memref<2xi32>
        omp.terminator
      }
    }
    omp.terminator
  }
  %r:2 = scf.for %i = %c0 to %c256 step %c1 iter_args(%bad = %zero, %sum = %zero) -> (i32, i32) {
    %v = memref.load %read[%i] : memref<256xi32>
    %j0 = arith.addi %i, %c1 : index
    %j = arith.remui %j0, %c256 : index
    %want = arith.index_cast %j : index to i32
    %ne = arith.cmpi ne, %v, %want : i32
    %inc = arith.select %ne, %one, %zero : i32
    %bad1 = arith.addi %bad, %inc : i32
    %sum1 = arith.addi %sum, %v : i32
    scf.yield %bad1, %sum1 : i32, i32
  }
  call @print(%r#0) : (i32) -> ()
  call @print(%r#1) : (i32) -> ()
  %inside = memref.load %sizes[%c0] : memref<2xi32>
  call @print(%inside) : (i32) -> ()
  %outside = func.call @omp_get_num_threads() : () -> i32
  call @print(%outside) : (i32) -> ()
  %nested = memref.load %sizes[%c1] : memref<2xi32>
  call @print(%nested) : (i32) -> ()
  return
}
