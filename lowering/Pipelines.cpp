//===- Pipelines.cpp - moe lowering pipelines -----------------------------===//

#include "lowering/Pipelines.h"

#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

void moe::buildCpuPipeline(OpPassManager &pm, const CpuPipelineOptions &options) {
  std::string pipeline;
  llvm::raw_string_ostream os(pipeline);
  os << "func.func(convert-moe-to-linalg,convert-elementwise-to-linalg),"
     << "canonicalize,cse,"
     << "one-shot-bufferize{bufferize-function-boundaries "
        "function-boundary-type-conversion=identity-layout-map},";
  if (options.resultsToOutParams)
    os << "buffer-results-to-out-params{modify-public-functions "
          "hoist-static-allocs},";
  os << "buffer-deallocation-pipeline,"
     << "convert-bufferization-to-memref,"
     << "func.func(convert-linalg-to-loops),"
     << "canonicalize,";
  if (options.parallel)
    os << "func.func(scf-forall-to-parallel),"
       << "async-parallel-for{async-dispatch=true min-task-size=1},"
       << "async-to-async-runtime,"
       << "async-runtime-ref-counting,"
       << "async-runtime-ref-counting-opt,"
       << "convert-async-to-llvm,";
  os << "canonicalize,"
     << "convert-scf-to-cf,"
     << "expand-strided-metadata,"
     << "lower-affine,"
     << "finalize-memref-to-llvm,"
     << "convert-math-to-llvm,"
     << "convert-math-to-libm,"
     << "convert-to-llvm,"
     << "reconcile-unrealized-casts";
  if (failed(parsePassPipeline(pipeline, pm, llvm::errs())))
    llvm::report_fatal_error("moe-cpu-pipeline: invalid built-in pipeline");
}

void moe::registerPipelines() {
  PassPipelineRegistration<CpuPipelineOptions>(
      "moe-cpu-pipeline",
      "Lower moe IR to the LLVM dialect for the host: moe -> linalg/tensor/"
      "scf/arith/math, one-shot bufferization, loops, LLVM",
      buildCpuPipeline);
  PassPipelineRegistration<NVPTXPipelineOptions>(
      "moe-nvptx-pipeline",
      "Lower moe IR to MoE kernels in a gpu.binary (NVVM/PTX) and host LLVM "
      "code calling the mgpu* runtime",
      buildNVPTXPipeline);
}
