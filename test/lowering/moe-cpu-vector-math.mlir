// RUN: moe-opt %s --moe-cpu-vector-math | FileCheck %s
//
// --moe-cpu-vector-math: math ops on vectors (the expert kernels' activations)
// become MLIR's polynomial approximations; scalar math (the routing's exp and
// log, which must stay libm's on every target) is left alone.

// CHECK-LABEL: func.func @vector_erf
// CHECK-NOT: math.erf
// CHECK: math.fma {{.*}} : vector<16xf32>
// CHECK-NOT: math.erf
// CHECK: return
func.func @vector_erf(%x: vector<16xf32>) -> vector<16xf32> {
  %y = math.erf %x : vector<16xf32>
  return %y : vector<16xf32>
}

// CHECK-LABEL: func.func @vector_exp_tanh
// CHECK-NOT: math.exp {{.*}} : vector<16xf32>
// CHECK-NOT: math.tanh
// CHECK: return
func.func @vector_exp_tanh(%x: vector<16xf32>) -> vector<16xf32> {
  %e = math.exp %x : vector<16xf32>
  %t = math.tanh %e : vector<16xf32>
  return %t : vector<16xf32>
}

// CHECK-LABEL: func.func @scalar_untouched
// CHECK-NEXT: %[[E:.*]] = math.exp %arg0 : f32
// CHECK-NEXT: %[[L:.*]] = math.log %[[E]] : f32
// CHECK-NEXT: %[[R:.*]] = math.erf %[[L]] : f32
// CHECK-NEXT: return %[[R]] : f32
func.func @scalar_untouched(%x: f32) -> f32 {
  %e = math.exp %x : f32
  %l = math.log %e : f32
  %r = math.erf %l : f32
  return %r : f32
}
