// RUN: moe-opt %s --moe-cpu-inline-alloca-scopes -split-input-file | FileCheck %s

// A one-block scope: its body between a stack save and restore, its
// results the values it returned.
// CHECK-LABEL: func.func @scope(
// CHECK-SAME:    %[[V:.*]]: vector<4xf32>
// (The greedy driver folds the constant to the top.)
// CHECK-NEXT:    %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[SP:.*]] = llvm.intr.stacksave : !llvm.ptr
// CHECK-NEXT:    %[[BUF:.*]] = memref.alloca() : memref<4xf32>
// CHECK-NEXT:    vector.store %[[V]], %[[BUF]][%[[C0]]]
// CHECK-NEXT:    %[[R:.*]] = vector.load %[[BUF]][%[[C0]]]
// CHECK-NEXT:    llvm.intr.stackrestore %[[SP]] : !llvm.ptr
// CHECK-NEXT:    return %[[R]] : vector<4xf32>
func.func @scope(%v: vector<4xf32>) -> vector<4xf32> {
  %r = memref.alloca_scope -> (vector<4xf32>) {
    %buf = memref.alloca() : memref<4xf32>
    %c0 = arith.constant 0 : index
    vector.store %v, %buf[%c0] : memref<4xf32>, vector<4xf32>
    %l = vector.load %buf[%c0] : memref<4xf32>, vector<4xf32>
    memref.alloca_scope.return %l : vector<4xf32>
  }
  return %r : vector<4xf32>
}

// -----

// Inside a loop, with a loop inside the scope: every iteration frees what
// it allocated.
// CHECK-LABEL: func.func @in_loop(
// CHECK:         scf.for
// CHECK-NEXT:      %[[SP:.*]] = llvm.intr.stacksave : !llvm.ptr
// CHECK-NEXT:      memref.alloca() : memref<16xf32>
// CHECK-NEXT:      scf.for
// CHECK:           llvm.intr.stackrestore %[[SP]] : !llvm.ptr
// CHECK-NEXT:    }
// CHECK-NEXT:    return
// CHECK-NOT:     memref.alloca_scope
func.func @in_loop(%n: index, %x: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  scf.for %i = %c0 to %n step %c1 {
    memref.alloca_scope {
      %buf = memref.alloca() : memref<16xf32>
      scf.for %j = %c0 to %c16 step %c1 {
        memref.store %x, %buf[%j] : memref<16xf32>
      }
    }
  }
  return
}
