// RUN: rm -rf %t && mkdir -p %t
// RUN: not moe-run %s --device=cpu --fill-random 2>&1 | FileCheck %s
// RUN: printf 'func.func @f( {' > %t/syntax.mlir
// RUN: not moe-run %t/syntax.mlir --device=cpu 2>&1 | FileCheck %s --check-prefix=SYNTAX
//
// IR that does not parse or verify: MLIR's diagnostics, then exit code 1.

// CHECK: error: 'func.return' op has 1 operands, but enclosing function (@f) returns 0
// SYNTAX: syntax.mlir:1:14: error: expected non-function type

func.func @f(%x: tensor<4xf32>) {
  return %x : tensor<4xf32>
}
