// RUN: for f in block dense moesart moesart_train soft top2_swiglu; do \
// RUN:   moe-opt %examples/$f.mlir --moe-cpu-pipeline -o %t.$f.mlir && \
// RUN:   mlir-translate --mlir-to-llvmir %t.$f.mlir -o /dev/null || exit 1; \
// RUN: done
// No op of a non-LLVM dialect is left in any of the six modules (grep
// counts every line of every file, not only a prefix):
// RUN: not grep -n -E "(^|[^a-z_.])(moe|linalg|tensor|memref|scf|affine|bufferization|async|vector|arith|math|func|cf)\.[a-z_]+|unrealized_conversion_cast" %t.block.mlir %t.dense.mlir %t.moesart.mlir %t.moesart_train.mlir %t.soft.mlir %t.top2_swiglu.mlir
// RUN: cat %t.*.mlir | FileCheck %s
// RUN: moe-opt %examples/dense.mlir --moe-cpu-pipeline="results-to-out-params=true" | FileCheck %s --check-prefix=OUT
// RUN: moe-opt %examples/dense.mlir --moe-cpu-pipeline="parallel=false" | FileCheck %s --check-prefix=SEQ
// RUN: moe-opt %examples/dense.mlir --moe-cpu-pipeline | FileCheck %s --check-prefix=PAR
// RUN: moe-opt %examples/dense.mlir --moe-cpu-pipeline --dump-pass-pipeline 2>&1 >/dev/null | FileCheck %s --check-prefix=PIPE
//
// --moe-cpu-pipeline takes every example to the LLVM dialect only (the grep
// above), with the entry and the outlined kernels as llvm.func.
// CHECK-DAG: llvm.func @forward(
// CHECK-DAG: llvm.func @train_forward(
// CHECK-DAG: llvm.func @__moe_cpu_gemm1_

// With results-to-out-params, the result is a caller-allocated argument.
// OUT: llvm.func @forward(%arg0: !llvm.ptr{{[^>]*}}) {

// The grouped FFN's expert loop runs on all cores through the async runtime,
// unless parallel=false.
// The loops are cut into blocks by the runtime's thread count (num-workers
// = -1), not by a count fixed at compile time.
// PAR: llvm.call @mlirAsyncRuntimGetNumWorkerThreads() : () -> i64
// PAR: llvm.call @mlirAsyncRuntimeExecute
// SEQ-NOT: mlirAsyncRuntime

// PIPE: moe-cpu-decompose-aggregates
// PIPE: convert-moe-to-cpu
// PIPE: one-shot-bufferize
// PIPE: convert-linalg-to-loops
// PIPE: scf-forall-to-parallel
// PIPE: async-parallel-for{async-dispatch=true min-task-size=1 num-workers=-1}
// PIPE: convert-to-llvm
