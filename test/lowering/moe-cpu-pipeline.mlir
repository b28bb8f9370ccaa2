// RUN: for f in block dense moesart moesart_train soft top2_swiglu; do \
// RUN:   moe-opt %examples/$f.mlir --moe-cpu-pipeline -o %t.$f.mlir && \
// RUN:   mlir-translate --mlir-to-llvmir %t.$f.mlir -o /dev/null || exit 1; \
// RUN: done
// RUN: cat %t.*.mlir | FileCheck %s
// RUN: moe-opt %examples/dense.mlir --moe-cpu-pipeline="results-to-out-params=true" | FileCheck %s --check-prefix=OUT
// RUN: moe-opt %examples/dense.mlir --moe-cpu-pipeline --dump-pass-pipeline 2>&1 >/dev/null | FileCheck %s --check-prefix=PIPE
//
// --moe-cpu-pipeline takes every example to the LLVM dialect only.
// CHECK-NOT: moe.
// CHECK-NOT: linalg.
// CHECK-NOT: tensor.
// CHECK-NOT: memref.
// CHECK-NOT: scf.
// CHECK-NOT: affine.
// CHECK-NOT: bufferization.
// CHECK-NOT: unrealized_conversion_cast
// CHECK: llvm.func @forward

// With results-to-out-params, the result is a caller-allocated argument.
// OUT: llvm.func @forward({{.*}}) {
// OUT-NOT: llvm.return %

// PIPE: convert-moe-to-linalg
// PIPE: one-shot-bufferize
// PIPE: convert-linalg-to-loops
// PIPE: convert-to-llvm
