// RUN: moe-opt %s -split-input-file --moe-host-bf16-memory-as-i16 | FileCheck %s
//
// --moe-host-bf16-memory-as-i16: the LLVM dialect's loads and stores of bf16
// scalars and vectors move i16 (the same bits); a bitcast between i16 and
// bf16 next to one disappears, other users of a loaded value get one bitcast
// back; other types are left alone.

// A store of an i16 vector made bf16 by a bitcast stores the i16 vector.
// CHECK-LABEL: llvm.func @store_vector
// CHECK-NEXT: llvm.store %arg0, %arg1 {alignment = 2 : i64} : vector<8xi16>, !llvm.ptr
// CHECK-NEXT: llvm.return
llvm.func @store_vector(%bits: vector<8xi16>, %p: !llvm.ptr) {
  %v = llvm.bitcast %bits : vector<8xi16> to vector<8xbf16>
  llvm.store %v, %p {alignment = 2 : i64} : vector<8xbf16>, !llvm.ptr
  llvm.return
}

// -----

// The same for a masked store; a bf16 value that no bitcast made gets one.
// CHECK-LABEL: llvm.func @masked_store
// CHECK-NEXT: llvm.intr.masked.store %arg0, %arg2, %arg3 {alignment = 2 : i32} : vector<8xi16>, vector<8xi1> into !llvm.ptr
// CHECK-NEXT: %[[B:.*]] = llvm.bitcast %arg1 : vector<8xbf16> to vector<8xi16>
// CHECK-NEXT: llvm.intr.masked.store %[[B]], %arg2, %arg3 {alignment = 2 : i32} : vector<8xi16>, vector<8xi1> into !llvm.ptr
// CHECK-NEXT: llvm.return
llvm.func @masked_store(%bits: vector<8xi16>, %v1: vector<8xbf16>, %p: !llvm.ptr, %m: vector<8xi1>) {
  %v = llvm.bitcast %bits : vector<8xi16> to vector<8xbf16>
  llvm.intr.masked.store %v, %p, %m {alignment = 2 : i32} : vector<8xbf16>, vector<8xi1> into !llvm.ptr
  llvm.intr.masked.store %v1, %p, %m {alignment = 2 : i32} : vector<8xbf16>, vector<8xi1> into !llvm.ptr
  llvm.return
}

// -----

// A load read through a bitcast to i16 loads i16; the other users of a
// loaded scalar read it through one bitcast back to bf16.
// CHECK-LABEL: llvm.func @load
// CHECK-NEXT: %[[V:.*]] = llvm.load %arg0 {alignment = 2 : i64} : !llvm.ptr -> vector<16xi16>
// CHECK-NEXT: %[[S:.*]] = llvm.load %arg0 : !llvm.ptr -> i16
// CHECK-NEXT: %[[SB:.*]] = llvm.bitcast %[[S]] : i16 to bf16
// CHECK-NEXT: llvm.store %[[V]], %arg1 : vector<16xi16>, !llvm.ptr
// CHECK-NEXT: %[[W:.*]] = llvm.fpext %[[SB]] : bf16 to f32
// CHECK-NEXT: llvm.return %[[W]] : f32
llvm.func @load(%p: !llvm.ptr, %q: !llvm.ptr) -> f32 {
  %v = llvm.load %p {alignment = 2 : i64} : !llvm.ptr -> vector<16xbf16>
  %s = llvm.load %p : !llvm.ptr -> bf16
  %bits = llvm.bitcast %v : vector<16xbf16> to vector<16xi16>
  llvm.store %bits, %q : vector<16xi16>, !llvm.ptr
  %w = llvm.fpext %s : bf16 to f32
  llvm.return %w : f32
}

// -----

// A masked load: its pass-through value as i16 too.
// CHECK-LABEL: llvm.func @masked_load
// CHECK-NEXT: %[[Z:.*]] = llvm.mlir.zero : vector<8xbf16>
// CHECK-NEXT: %[[ZB:.*]] = llvm.bitcast %[[Z]] : vector<8xbf16> to vector<8xi16>
// CHECK-NEXT: %[[L:.*]] = llvm.intr.masked.load %arg0, %arg1, %[[ZB]] {alignment = 2 : i32} : (!llvm.ptr, vector<8xi1>, vector<8xi16>) -> vector<8xi16>
// CHECK-NEXT: llvm.return %[[L]] : vector<8xi16>
llvm.func @masked_load(%p: !llvm.ptr, %m: vector<8xi1>) -> vector<8xi16> {
  %z = llvm.mlir.zero : vector<8xbf16>
  %v = llvm.intr.masked.load %p, %m, %z {alignment = 2 : i32} : (!llvm.ptr, vector<8xi1>, vector<8xbf16>) -> vector<8xbf16>
  %bits = llvm.bitcast %v : vector<8xbf16> to vector<8xi16>
  llvm.return %bits : vector<8xi16>
}

// -----

// Other types stay.
// CHECK-LABEL: llvm.func @others
// CHECK-NEXT: %[[F:.*]] = llvm.load %arg0 : !llvm.ptr -> vector<8xf32>
// CHECK-NEXT: %[[H:.*]] = llvm.load %arg0 : !llvm.ptr -> f16
// CHECK-NEXT: llvm.store %[[F]], %arg1 : vector<8xf32>, !llvm.ptr
// CHECK-NEXT: llvm.store %[[H]], %arg1 : f16, !llvm.ptr
llvm.func @others(%p: !llvm.ptr, %q: !llvm.ptr) {
  %f = llvm.load %p : !llvm.ptr -> vector<8xf32>
  %h = llvm.load %p : !llvm.ptr -> f16
  llvm.store %f, %q : vector<8xf32>, !llvm.ptr
  llvm.store %h, %q : f16, !llvm.ptr
  llvm.return
}
