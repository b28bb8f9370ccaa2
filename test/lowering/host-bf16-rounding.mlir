// The host's f32 -> bf16 rounding is exact round-to-nearest-even on every CPU
// (docs/spec.md), through --moe-host-expand-bf16 in --moe-cpu-pipeline: the
// bits of each result are what the definition gives (ties to even at normal
// and subnormal magnitudes, subnormals kept, overflow to infinity, NaN
// quieted). The inputs are loaded from a writable global at run time, so no
// constant folding decides the result. Without the pass, a CPU with
// AVX512_BF16 rounds the subnormal cases to 0 and one without it has no
// __truncsfbf2 to call.
// RUN: moe-opt %s --moe-cpu-pipeline --emit-bytecode | moe-test-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_libs | FileCheck %s

memref.global "private" @inputs : memref<12xi32> = dense<[
  1065353216,   // 0x3F800000 1.0                        -> 0x3F80
  1065385984,   // 0x3F808000 tie, even below            -> 0x3F80
  1065451520,   // 0x3F818000 tie, odd below             -> 0x3F82
  1065385985,   // 0x3F808001 above the tie              -> 0x3F81
  65536,        // 0x00010000 subnormal                  -> 0x0001
  32768,        // 0x00008000 subnormal tie to even 0    -> 0x0000
  98304,        // 0x00018000 subnormal tie, odd below   -> 0x0002
  8388607,      // 0x007FFFFF largest subnormal          -> 0x0080
  2139095039,   // 0x7F7FFFFF largest finite             -> 0x7F80 (inf)
  -8388608,     // 0xFF800000 -inf                       -> 0xFF80
  2143289345,   // 0x7FC00001 NaN                        -> 0x7FC0
  -2147450880   // 0x80008000 -0 tie, -subnormal         -> 0x8000
]>

// CHECK: 16256
// CHECK-NEXT: 16256
// CHECK-NEXT: 16258
// CHECK-NEXT: 16257
// CHECK-NEXT: 1
// CHECK-NEXT: 0
// CHECK-NEXT: 2
// CHECK-NEXT: 128
// CHECK-NEXT: 32640
// CHECK-NEXT: 65408
// CHECK-NEXT: 32704
// CHECK-NEXT: 32768
func.func @main() {
  %in = memref.get_global @inputs : memref<12xi32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c12 = arith.constant 12 : index
  scf.for %i = %c0 to %c12 step %c1 {
    %bits = memref.load %in[%i] : memref<12xi32>
    %x = arith.bitcast %bits : i32 to f32
    %b = arith.truncf %x : f32 to bf16
    %h = arith.bitcast %b : bf16 to i16
    %u = arith.extui %h : i16 to i32
    vector.print %u : i32
  }
  return
}
