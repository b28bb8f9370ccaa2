// RUN: moe-opt %s -split-input-file --pass-pipeline="builtin.module(func.func(moe-host-expand-bf16))" | FileCheck %s
//
// --moe-host-expand-bf16: f32 <-> bf16 conversions, scalar and vector, become
// integer arithmetic on the f32 bits (round to nearest even, NaN quieted);
// other conversions stay.

// CHECK-LABEL: func.func @scalar
// CHECK-NOT: arith.truncf
// CHECK: %[[NAN:.*]] = arith.cmpf une, %arg0, %arg0 : f32
// CHECK: arith.bitcast %arg0 : f32 to i32
// CHECK: arith.trunci %{{.*}} : i32 to i16
// CHECK-NEXT: %[[SEL:.*]] = arith.select %[[NAN]], %{{.*}}, %{{.*}} : i16
// CHECK-NEXT: %[[B:.*]] = arith.bitcast %[[SEL]] : i16 to bf16
// CHECK-NOT: arith.extf
// CHECK: arith.bitcast %[[B]] : bf16 to i16
// CHECK: arith.extui
// CHECK: arith.shli
// CHECK: arith.bitcast %{{.*}} : i32 to f32
func.func @scalar(%x: f32) -> f32 {
  %b = arith.truncf %x : f32 to bf16
  %y = arith.extf %b : bf16 to f32
  return %y : f32
}

// -----

// CHECK-LABEL: func.func @vector
// CHECK-NOT: arith.truncf
// CHECK: %[[NAN:.*]] = arith.cmpf une, %arg0, %arg0 : vector<16xf32>
// CHECK: arith.bitcast %arg0 : vector<16xf32> to vector<16xi32>
// CHECK: arith.trunci %{{.*}} : vector<16xi32> to vector<16xi16>
// CHECK-NEXT: %[[SEL:.*]] = arith.select %[[NAN]], %{{.*}}, %{{.*}} : vector<16xi1>, vector<16xi16>
// CHECK-NEXT: arith.bitcast %[[SEL]] : vector<16xi16> to vector<16xbf16>
// CHECK-NOT: arith.truncf
// CHECK: return
func.func @vector(%x: vector<16xf32>) -> vector<16xbf16> {
  %b = arith.truncf %x : vector<16xf32> to vector<16xbf16>
  return %b : vector<16xbf16>
}

// -----

// f16 and f64 conversions are not the pass's.
// CHECK-LABEL: func.func @others
// CHECK-NEXT: arith.truncf %{{.*}} : f32 to f16
// CHECK-NEXT: arith.extf %{{.*}} : f16 to f32
// CHECK-NEXT: arith.truncf %{{.*}} : f64 to f32
// CHECK-NEXT: return
func.func @others(%x: f32, %d: f64) -> (f32, f32) {
  %h = arith.truncf %x : f32 to f16
  %y = arith.extf %h : f16 to f32
  %z = arith.truncf %d : f64 to f32
  return %y, %z : f32, f32
}
