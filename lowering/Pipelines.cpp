//===- Pipelines.cpp - moe lowering pipelines -----------------------------===//

#include "lowering/Pipelines.h"

#include "lowering/HostPipeline.h"

#include "lowering/Passes.h"
#include "passes/Passes.h"

#include "mlir/InitAllPasses.h"

#include <mutex>

#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

/// The pipelines are written as pass pipelines of registered passes; make
/// sure every pass they name is registered, so that embedders need not call
/// registerAllPasses() first. Registering a pass again with the same TypeID
/// is a no-op, so this is safe inside mlir-opt and its plugins.
void moe::ensurePipelinePassesRegistered() {
  static std::once_flag once;
  std::call_once(once, [] {
    registerAllPasses();
    registerMoEPasses();
    registerMoELoweringPasses();
  });
}

void moe::appendHostBufferization(llvm::raw_ostream &os, bool resultsToOutParams) {
  os << "one-shot-bufferize{bufferize-function-boundaries allow-return-allocs-from-loops "
        "function-boundary-type-conversion=identity-layout-map},";
  if (resultsToOutParams)
    os << "buffer-results-to-out-params{modify-public-functions "
          "hoist-static-allocs},";
  os << "buffer-deallocation-pipeline,"
     << "convert-bufferization-to-memref,";
}

void moe::appendHostToLLVM(llvm::raw_ostream &os) {
  os << "finalize-memref-to-llvm,"
     << "convert-math-to-llvm,"
     << "convert-math-to-libm,"
     << "convert-to-llvm,";
}

void moe::buildCpuPipeline(OpPassManager &pm, const CpuPipelineOptions &options) {
  ensurePipelinePassesRegistered();
  std::string pipeline;
  llvm::raw_string_ostream os(pipeline);
  os << "convert-moe-to-linalg{pack-weights=" << (options.packWeights ? "true" : "false")
     << " bf16-dot=" << (options.bf16Dot ? "true" : "false")
     << " check-indices=" << (options.checkIndices ? "true" : "false")
     << "},func.func(moe-cpu-vector-math,convert-elementwise-to-linalg),"
     << "canonicalize,cse,";
  appendHostBufferization(os, options.resultsToOutParams);
  os << "func.func(convert-linalg-to-loops),"
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
     << "convert-vector-to-llvm{enable-x86vector=true},";
  appendHostToLLVM(os);
  os << "reconcile-unrealized-casts";
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
