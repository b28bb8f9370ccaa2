// RUN: moe-opt %s -split-input-file --moe-generate-vjp -verify-diagnostics
// RUN: not moe-opt %s -split-input-file --moe-generate-vjp=entries=missing 2>&1 | FileCheck %s --check-prefix=ENTRIES
// ENTRIES: error: --moe-generate-vjp: entries names 'missing', which is not a function with a body in this module
// A layer sharded for expert parallelism: its exchanges have no adjoint yet
// (docs/spec.md §8).
// RUN: moe-opt %S/Inputs/sharded-layer.mlir --moe-shard-experts=ranks=2 -mlir-print-debuginfo \
// RUN:   | not moe-opt --moe-generate-vjp 2>&1 | FileCheck %s --check-prefix=SHARDED
// SHARDED: sharded-layer.mlir:4:{{[0-9]+}}: error: cannot differentiate 'moe.exchange_combine': it has no adjoint (AdjointOpInterface)

// An op on a path from an argument to a result without an adjoint.
func.func @f(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{cannot differentiate 'math.sin': it has no adjoint (AdjointOpInterface)}}
  %y = math.sin %x : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// Control flow on such a path.
func.func @f(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  // expected-error @+1 {{cannot differentiate 'scf.for': control flow is not supported by --moe-generate-vjp}}
  %r = scf.for %i = %c0 to %c2 step %c1 iter_args(%a = %x) -> tensor<8x16xf32> {
    %n = arith.mulf %a, %a : tensor<8x16xf32>
    scf.yield %n : tensor<8x16xf32>
  }
  return %r : tensor<8x16xf32>
}

// -----

// An op off every such path (it reads only constants) needs no adjoint.
func.func @f(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %c = arith.constant dense<1.0> : tensor<4xf32>
  %s = math.sin %c : tensor<4xf32>
  %y = arith.mulf %x, %x : tensor<4xf32>
  return %y, %s : tensor<4xf32>, tensor<4xf32>
}

// -----

// @f_vjp exists already.
// expected-error @+1 {{--moe-generate-vjp: cannot add @f_vjp, a symbol of that name exists}}
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
func.func @f_vjp() {
  return
}

// -----

// A scalar float result.
// expected-error @+1 {{--moe-generate-vjp: @f returns 'f32'; only ranked tensors are differentiated}}
func.func @f(%x: tensor<4xf32>) -> f32 {
  %c = arith.constant 1.0 : f32
  return %c : f32
}


// -----

// A function on no path at all (no float argument reaches a result): its
// f_vjp returns f's results and zero gradients.
func.func @g(%x: tensor<4xf32>, %n: tensor<4xi32>) -> tensor<4xi32> {
  return %n : tensor<4xi32>
}
