// RUN: moe-opt %s -split-input-file --moe-gpu-stream-ordered-return | FileCheck %s

// A function marked by moe-gpu-device-abi returns without waiting: its final
// mgpuStreamSynchronize goes (and its declaration once nothing calls it),
// mgpuStreamDestroy still releases the stream; the marker goes too.

// CHECK-LABEL: llvm.func @ordered(
// CHECK-SAME: %[[P:.*]]: !llvm.ptr)
// CHECK-NOT: moe_gpu.stream_ordered
// CHECK-NEXT: %[[S:.*]] = llvm.call @mgpuStreamCreate()
// CHECK-NEXT: llvm.call @mgpuMemFree(%[[P]], %[[S]])
// CHECK-NEXT: llvm.call @mgpuStreamDestroy(%[[S]])
// CHECK-NEXT: llvm.return
// CHECK-NOT: @mgpuStreamSynchronize
llvm.func @ordered(%p: !llvm.ptr) attributes {moe_gpu.stream_ordered} {
  %s = llvm.call @mgpuStreamCreate() : () -> !llvm.ptr
  llvm.call @mgpuMemFree(%p, %s) : (!llvm.ptr, !llvm.ptr) -> ()
  llvm.call @mgpuStreamSynchronize(%s) : (!llvm.ptr) -> ()
  llvm.call @mgpuStreamDestroy(%s) : (!llvm.ptr) -> ()
  llvm.return
}
llvm.func @mgpuStreamCreate() -> !llvm.ptr
llvm.func @mgpuMemFree(!llvm.ptr, !llvm.ptr)
llvm.func @mgpuStreamSynchronize(!llvm.ptr)
llvm.func @mgpuStreamDestroy(!llvm.ptr)

// -----

// Not marked (a private function, or host code of another pipeline): kept.
// A marked function that synchronizes elsewhere (a host readback before the
// return) stays synchronous; so does one whose synchronization is not right
// before the release and the return.

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

// CHECK-LABEL: llvm.func @readback(
// CHECK-NOT: moe_gpu.stream_ordered
// CHECK: llvm.call @mgpuMemcpy
// CHECK-NEXT: llvm.call @mgpuStreamSynchronize(%[[S:.*]])
// CHECK-NEXT: llvm.call @mgpuStreamDestroy(%[[S]])
// CHECK-NEXT: llvm.load
// CHECK: llvm.call @mgpuStreamSynchronize(%[[S2:.*]])
// CHECK-NEXT: llvm.call @mgpuStreamDestroy(%[[S2]])
// CHECK-NEXT: llvm.return
llvm.func @readback(%host: !llvm.ptr, %dev: !llvm.ptr) attributes {moe_gpu.stream_ordered} {
  %n = llvm.mlir.constant(16 : i64) : i64
  %s = llvm.call @mgpuStreamCreate() : () -> !llvm.ptr
  llvm.call @mgpuMemcpy(%host, %dev, %n, %s) : (!llvm.ptr, !llvm.ptr, i64, !llvm.ptr) -> ()
  llvm.call @mgpuStreamSynchronize(%s) : (!llvm.ptr) -> ()
  llvm.call @mgpuStreamDestroy(%s) : (!llvm.ptr) -> ()
  %v = llvm.load %host : !llvm.ptr -> i32
  %s2 = llvm.call @mgpuStreamCreate() : () -> !llvm.ptr
  llvm.call @mgpuMemFree(%dev, %s2) : (!llvm.ptr, !llvm.ptr) -> ()
  llvm.call @mgpuStreamSynchronize(%s2) : (!llvm.ptr) -> ()
  llvm.call @mgpuStreamDestroy(%s2) : (!llvm.ptr) -> ()
  llvm.return
}

// CHECK-LABEL: llvm.func @event_readback(
// CHECK: llvm.call @mgpuEventSynchronize
// CHECK: llvm.call @mgpuStreamSynchronize(%[[S:.*]])
// CHECK-NEXT: llvm.call @mgpuStreamDestroy(%[[S]])
// CHECK-NEXT: llvm.return
llvm.func @event_readback(%e: !llvm.ptr) attributes {moe_gpu.stream_ordered} {
  llvm.call @mgpuEventSynchronize(%e) : (!llvm.ptr) -> ()
  %s = llvm.call @mgpuStreamCreate() : () -> !llvm.ptr
  llvm.call @mgpuStreamSynchronize(%s) : (!llvm.ptr) -> ()
  llvm.call @mgpuStreamDestroy(%s) : (!llvm.ptr) -> ()
  llvm.return
}

// CHECK-LABEL: llvm.func @not_final(
// CHECK: llvm.call @mgpuStreamSynchronize(%[[S:.*]])
// CHECK-NEXT: llvm.call @mgpuMemFree
// CHECK-NEXT: llvm.call @mgpuStreamDestroy(%[[S]])
// CHECK-NEXT: llvm.return
llvm.func @not_final(%p: !llvm.ptr) attributes {moe_gpu.stream_ordered} {
  %s = llvm.call @mgpuStreamCreate() : () -> !llvm.ptr
  llvm.call @mgpuStreamSynchronize(%s) : (!llvm.ptr) -> ()
  llvm.call @mgpuMemFree(%p, %s) : (!llvm.ptr, !llvm.ptr) -> ()
  llvm.call @mgpuStreamDestroy(%s) : (!llvm.ptr) -> ()
  llvm.return
}
// The declaration stays while something calls it.
// CHECK: llvm.func @mgpuStreamSynchronize(!llvm.ptr)
llvm.func @mgpuStreamCreate() -> !llvm.ptr
llvm.func @mgpuMemFree(!llvm.ptr, !llvm.ptr)
llvm.func @mgpuMemcpy(!llvm.ptr, !llvm.ptr, i64, !llvm.ptr)
llvm.func @mgpuEventSynchronize(!llvm.ptr)
llvm.func @mgpuStreamSynchronize(!llvm.ptr)
llvm.func @mgpuStreamDestroy(!llvm.ptr)
