// RUN: moe-opt %s -split-input-file --moe-gpu-stream-ordered | FileCheck %s

// A function marked by moe-gpu-device-abi (it reads no device data back):
// every mgpuStreamSynchronize becomes moeRuntimeSyncUnlessThreadStream (no
// wait on the caller's stream), those before the return and those in the
// middle (gpu-async-region's waits before host control flow) alike; the
// declaration of mgpuStreamSynchronize goes once nothing calls it, and the
// marker goes too.

// CHECK-LABEL: llvm.func @ordered(
// CHECK-SAME: %[[P:.*]]: !llvm.ptr, %[[C:.*]]: i1)
// CHECK-NOT: moe.gpu_stream_ordered
// CHECK-NEXT: %[[S:.*]] = llvm.call @mgpuStreamCreate()
// CHECK-NEXT: llvm.call @moeRuntimeSyncUnlessThreadStream(%[[S]])
// CHECK-NEXT: llvm.call @mgpuStreamDestroy(%[[S]])
// CHECK-NEXT: llvm.cond_br
// CHECK: %[[S2:.*]] = llvm.call @mgpuStreamCreate()
// CHECK-NEXT: llvm.call @mgpuMemFree(%[[P]], %[[S2]])
// CHECK-NEXT: llvm.call @moeRuntimeSyncUnlessThreadStream(%[[S2]])
// CHECK-NEXT: llvm.call @mgpuStreamDestroy(%[[S2]])
// CHECK-NEXT: llvm.return
// CHECK-NOT: @mgpuStreamSynchronize
// CHECK: llvm.func @moeRuntimeSyncUnlessThreadStream(!llvm.ptr)
// CHECK-NOT: @mgpuStreamSynchronize
llvm.func @ordered(%p: !llvm.ptr, %c: i1) attributes {moe.gpu_stream_ordered} {
  %s = llvm.call @mgpuStreamCreate() : () -> !llvm.ptr
  llvm.call @mgpuStreamSynchronize(%s) : (!llvm.ptr) -> ()
  llvm.call @mgpuStreamDestroy(%s) : (!llvm.ptr) -> ()
  llvm.cond_br %c, ^bb1, ^bb2
^bb1:
  llvm.br ^bb2
^bb2:
  %s2 = llvm.call @mgpuStreamCreate() : () -> !llvm.ptr
  llvm.call @mgpuMemFree(%p, %s2) : (!llvm.ptr, !llvm.ptr) -> ()
  llvm.call @mgpuStreamSynchronize(%s2) : (!llvm.ptr) -> ()
  llvm.call @mgpuStreamDestroy(%s2) : (!llvm.ptr) -> ()
  llvm.return
}
llvm.func @mgpuStreamCreate() -> !llvm.ptr
llvm.func @mgpuMemFree(!llvm.ptr, !llvm.ptr)
llvm.func @mgpuStreamSynchronize(!llvm.ptr)
llvm.func @mgpuStreamDestroy(!llvm.ptr)

// -----

// Not marked (a private function, a function that reads device data back,
// host code of another pipeline): kept, with its declaration. Marked but
// synchronizing an event (tokens across streams): kept too.

// CHECK-LABEL: llvm.func @unmarked(
// CHECK: llvm.call @mgpuStreamSynchronize(%[[S:.*]])
// CHECK-NEXT: llvm.call @mgpuStreamDestroy(%[[S]])
// CHECK-NEXT: llvm.return
llvm.func @unmarked() {
  %s = llvm.call @mgpuStreamCreate() : () -> !llvm.ptr
  llvm.call @mgpuStreamSynchronize(%s) : (!llvm.ptr) -> ()
  llvm.call @mgpuStreamDestroy(%s) : (!llvm.ptr) -> ()
  llvm.return
}

// CHECK-LABEL: llvm.func @events(
// CHECK-NOT: moe.gpu_stream_ordered
// CHECK: llvm.call @mgpuEventSynchronize
// CHECK: llvm.call @mgpuStreamSynchronize(%[[S:.*]])
// CHECK-NEXT: llvm.call @mgpuStreamDestroy(%[[S]])
// CHECK-NEXT: llvm.return
llvm.func @events(%e: !llvm.ptr) attributes {moe.gpu_stream_ordered} {
  llvm.call @mgpuEventSynchronize(%e) : (!llvm.ptr) -> ()
  %s = llvm.call @mgpuStreamCreate() : () -> !llvm.ptr
  llvm.call @mgpuStreamSynchronize(%s) : (!llvm.ptr) -> ()
  llvm.call @mgpuStreamDestroy(%s) : (!llvm.ptr) -> ()
  llvm.return
}
// CHECK-NOT: moeRuntimeSyncUnlessThreadStream
// CHECK: llvm.func @mgpuStreamSynchronize(!llvm.ptr)
// CHECK-NOT: moeRuntimeSyncUnlessThreadStream
llvm.func @mgpuStreamCreate() -> !llvm.ptr
llvm.func @mgpuEventSynchronize(!llvm.ptr)
llvm.func @mgpuStreamSynchronize(!llvm.ptr)
llvm.func @mgpuStreamDestroy(!llvm.ptr)
