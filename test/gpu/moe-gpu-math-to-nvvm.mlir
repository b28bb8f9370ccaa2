// --moe-gpu-math-to-nvvm: the math ops left in the kernels become NVVM
// intrinsics (or exact bit arithmetic), never libdevice calls, so
// convert-gpu-to-nvvm leaves them alone; any other math op is an error.
// RUN: moe-opt %s -split-input-file --pass-pipeline='builtin.module(gpu.module(moe-gpu-math-to-nvvm))' -verify-diagnostics | FileCheck %s
// After convert-gpu-to-nvvm, no __nv_ function is declared or called.
// RUN: moe-opt %s -split-input-file --pass-pipeline='builtin.module(gpu.module(moe-gpu-math-to-nvvm,convert-gpu-to-nvvm))' -verify-diagnostics | FileCheck %s --check-prefix=NVVM

// CHECK-LABEL: gpu.func @instructions
// CHECK-DAG: %[[MASK:.*]] = arith.constant 2147483647 : i32
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK: %[[FL:.*]] = llvm.call_intrinsic "llvm.nvvm.floor.f"(%arg0) : (f32) -> f32
// CHECK-NEXT: %[[CE:.*]] = llvm.call_intrinsic "llvm.nvvm.ceil.d"(%arg1) : (f64) -> f64
// CHECK-NEXT: %[[SQ:.*]] = llvm.call_intrinsic "llvm.nvvm.sqrt.rn.f"(%[[FL]]) : (f32) -> f32
// CHECK-NEXT: %[[RS:.*]] = llvm.call_intrinsic "llvm.nvvm.sqrt.rn.f"(%[[SQ]]) : (f32) -> f32
// CHECK-NEXT: %[[R:.*]] = arith.divf %[[ONE]], %[[RS]] : f32
// CHECK-NEXT: %[[BITS:.*]] = arith.bitcast %[[R]] : f32 to i32
// CHECK-NEXT: %[[AND:.*]] = arith.andi %[[BITS]], %[[MASK]] : i32
// CHECK-NEXT: %[[ABS:.*]] = arith.bitcast %[[AND]] : i32 to f32
// CHECK-NEXT: %[[FMA:.*]] = llvm.intr.fma(%[[ABS]], %[[ABS]], %[[ABS]]) : (f32, f32, f32) -> f32
// CHECK-NEXT: memref.store %[[FMA]]
// CHECK-NEXT: memref.store %[[CE]]
// NVVM-LABEL: llvm.func @instructions
// NVVM-NOT: __nv_
// NVVM: llvm.intr.fma
// NVVM-NOT: __nv_
gpu.module @moe_kernels {
  gpu.func @instructions(%x: f32, %d: f64, %out: memref<1xf32>, %outd: memref<1xf64>) kernel {
    %f = math.floor %x : f32
    %c = math.ceil %d : f64
    %s = math.sqrt %f : f32
    %r = math.rsqrt %s : f32
    %a = math.absf %r : f32
    %m = math.fma %a, %a, %a : f32
    %c0 = arith.constant 0 : index
    memref.store %m, %out[%c0] : memref<1xf32>
    memref.store %c, %outd[%c0] : memref<1xf64>
    gpu.return
  }
}

// -----

gpu.module @moe_kernels {
  gpu.func @exp(%x: f32, %out: memref<1xf32>) kernel {
    // expected-error @+1 {{'math.exp' op on 'f32' has no NVVM instruction here; it would need libdevice, which the MoE kernels do not link}}
    %e = math.exp %x : f32
    %c0 = arith.constant 0 : index
    memref.store %e, %out[%c0] : memref<1xf32>
    gpu.return
  }
}
