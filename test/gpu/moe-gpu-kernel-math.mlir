// --moe-gpu-kernel-math: the kernels' transcendental math as MLIR's
// polynomial approximations (what the CPU's vector kernels use), so no
// kernel calls libdevice; ops with an NVPTX instruction stay; anything else
// is an error naming the op.
// RUN: moe-opt %s -split-input-file --pass-pipeline='builtin.module(gpu.module(moe-gpu-kernel-math))' -verify-diagnostics | FileCheck %s

// CHECK-LABEL: gpu.func @activations
// The approximations: no exp, erf, tanh or log left, only arithmetic and
// the instruction ops they are built from.
// CHECK-NOT: math.exp
// CHECK-NOT: math.erf
// CHECK-NOT: math.tanh
// CHECK-NOT: math.log
// CHECK: math.fma
// CHECK-NOT: math.exp
// CHECK-NOT: math.erf
// CHECK-NOT: math.tanh
// CHECK-NOT: math.log
// f16 in f32, rounded back.
// CHECK: arith.extf %{{.*}} : f16 to f32
// CHECK: arith.truncf %{{.*}} : f32 to f16
// CHECK: gpu.return
gpu.module @moe_kernels {
  gpu.func @activations(%x: f32, %h: f16, %out: memref<5xf32>, %outh: memref<1xf16>) kernel {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %c4 = arith.constant 4 : index
    %e = math.exp %x : f32
    %r = math.erf %x : f32
    %t = math.tanh %x : f32
    %l = math.log %x : f32
    %s = math.rsqrt %x : f32
    memref.store %e, %out[%c0] : memref<5xf32>
    memref.store %r, %out[%c1] : memref<5xf32>
    memref.store %t, %out[%c2] : memref<5xf32>
    memref.store %l, %out[%c3] : memref<5xf32>
    memref.store %s, %out[%c4] : memref<5xf32>
    %eh = math.exp %h : f16
    memref.store %eh, %outh[%c0] : memref<1xf16>
    gpu.return
  }
}

// -----

// Instruction ops are left for --moe-gpu-math-to-nvvm.
// CHECK-LABEL: gpu.func @instructions
// CHECK-NEXT: math.rsqrt %{{.*}} : f32
// CHECK-NEXT: math.floor %{{.*}} : f32
// CHECK-NEXT: math.fma %{{.*}}, %{{.*}}, %{{.*}} : f64
gpu.module @moe_kernels {
  gpu.func @instructions(%x: f32, %d: f64, %out: memref<2xf32>, %outd: memref<1xf64>) kernel {
    %s = math.rsqrt %x : f32
    %f = math.floor %s : f32
    %m = math.fma %d, %d, %d : f64
    %c0 = arith.constant 0 : index
    memref.store %f, %out[%c0] : memref<2xf32>
    memref.store %m, %outd[%c0] : memref<1xf64>
    gpu.return
  }
}

// -----

// An f64 exp has no polynomial form: it would be a libdevice call.
gpu.module @moe_kernels {
  gpu.func @f64_exp(%d: f64, %out: memref<1xf64>) kernel {
    // expected-error @+1 {{'math.exp' op in a GPU kernel has no polynomial form for 'f64'; it would need libdevice, which the MoE kernels do not link}}
    %e = math.exp %d : f64
    %c0 = arith.constant 0 : index
    memref.store %e, %out[%c0] : memref<1xf64>
    gpu.return
  }
}
