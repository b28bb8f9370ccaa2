// RUN: rm -rf %t && mkdir -p %t
// RUN: %expect_error moe-run %s --device=cpu --fill-random | FileCheck %s
// RUN: printf 'func.func @f( {' > %t/syntax.mlir
// RUN: %expect_error moe-run %t/syntax.mlir --device=cpu | FileCheck %s --check-prefix=SYNTAX
//
// IR that does not parse or verify: the first MLIR error as one line
// "moe-run: FILE:LINE:COL: message" (no source excerpt, no notes), exit 1.

// CHECK: moe-run: {{.*}}err-invalid-ir.mlir:[[@LINE+4]]:3: 'func.return' op has 1 operands, but enclosing function (@f) returns 0
// SYNTAX: moe-run: {{.*}}syntax.mlir:1:14: expected non-function type

func.func @f(%x: tensor<4xf32>) {
  return %x : tensor<4xf32>
}
