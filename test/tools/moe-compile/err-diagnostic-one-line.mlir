// moe-compile and moe-run print an MLIR error the same way
// (tools/diagnostics/OneLineDiagnostic.h): one line, the first file location
// found inside the op's location (here under a name location), the message's
// whitespace runs collapsed, the notes dropped.
// RUN: not moe-compile %s -o %t.so --target=cpu 2> %t.err
// RUN: FileCheck %s --check-prefix=COMPILE < %t.err && count 1 < %t.err
// RUN: not moe-run %s --device=cpu 2> %t.err
// RUN: FileCheck %s --check-prefix=EXEC < %t.err && count 1 < %t.err

// COMPILE: moe-compile: here.mlir:12:5: 'func.return' op has 1 operands, but enclosing function (@f) returns 0
// EXEC: moe-run: here.mlir:12:5: 'func.return' op has 1 operands, but enclosing function (@f) returns 0

func.func @f(%x: tensor<4xf32>) {
  return %x : tensor<4xf32> loc("the_return"("here.mlir":12:5))
}
