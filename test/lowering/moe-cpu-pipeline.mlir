// RUN: for f in block dense moesart moesart_train soft top2_swiglu; do \
// RUN:   moe-opt %examples/$f.mlir --moe-cpu-pipeline -o %t.$f.mlir && \
// RUN:   mlir-translate --mlir-to-llvmir %t.$f.mlir -o /dev/null || exit 1; \
// RUN: done
// RUN: cat %t.*.mlir | FileCheck %s
// RUN: moe-opt %examples/dense.mlir --moe-cpu-pipeline="results-to-out-params=true" | FileCheck %s --check-prefix=OUT
// RUN: moe-opt %examples/dense.mlir --moe-cpu-pipeline="parallel=false" | FileCheck %s --check-prefix=SEQ
// RUN: moe-opt %examples/dense.mlir --moe-cpu-pipeline | FileCheck %s --check-prefix=PAR
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
// OUT: llvm.func @forward(%arg0: !llvm.ptr{{[^>]*}}) {

// The grouped FFN's expert loop runs on all cores through the async runtime,
// unless parallel=false.
// PAR: llvm.call @mlirAsyncRuntimeExecute
// SEQ-NOT: mlirAsyncRuntime

// PIPE: convert-moe-to-linalg
// PIPE: one-shot-bufferize
// PIPE: convert-linalg-to-loops
// PIPE: scf-forall-to-parallel
// PIPE: async-parallel-for
// PIPE: convert-to-llvm
