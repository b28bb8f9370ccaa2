//===- NVPTXPipeline.cpp - --moe-nvptx-pipeline ---------------------------===//
//
// moe -> MoE kernels + host code (convert-moe-to-gpu), host bufferization and
// buffer deallocation, then the upstream NVVM path, modelled on
// mlir/lib/Dialect/GPU/Pipelines/GPUToNVVMPipeline.cpp
// (gpu-lower-to-nvvm-pipeline): kernels through convert-gpu-to-nvvm and
// gpu-module-to-binary, the host through gpu-to-llvm (mgpu* runtime calls).
//
//===----------------------------------------------------------------------===//

#include "lowering/Pipelines.h"

#include "lowering/HostPipeline.h"

#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

/// The CUDA toolkit the serialization uses: libdevice (the kernels' exp, log,
/// erf, tanh, rsqrt) is linked from it, so the PTX has no unresolved
/// __nv_* calls, and ptxas comes from it for format=bin/fatbin.
static std::string cudaToolkit(const moe::NVPTXPipelineOptions &options) {
  if (!options.cudaPath.empty())
    return options.cudaPath;
  for (const char *var : {"CUDA_ROOT", "CUDA_HOME", "CUDA_PATH"})
    if (std::optional<std::string> v = llvm::sys::Process::GetEnv(var))
      if (!v->empty() && llvm::sys::fs::is_directory(*v))
        return *v;
  if (llvm::sys::fs::is_directory("/usr/local/cuda"))
    return "/usr/local/cuda";
  return "";
}

void moe::buildNVPTXPipeline(OpPassManager &pm, const NVPTXPipelineOptions &options) {
  ensurePipelinePassesRegistered();
  std::string pipeline;
  llvm::raw_string_ostream os(pipeline);
  // 1. moe -> kernels (gpu.module @moe_kernels) + host code on tensors; the
  // host's own tensor ops (residual adds, ...) go through linalg.
  std::string toolkit = cudaToolkit(options);
  os << "convert-moe-to-gpu{toolkit=" << (toolkit.empty() ? "none" : toolkit) << "},"
     << "func.func(convert-elementwise-to-linalg),"
     << "canonicalize,cse,";
  // 2. Host bufferization and deallocation (device buffers are managed by
  // convert-moe-to-gpu: bufferization.manual_deallocation).
  appendHostBufferization(os, options.resultsToOutParams);
  // 3. Launch placeholders -> gpu.launch_func; host ops on one stream.
  os
     << "moe-gpu-materialize-launches,"
     << "func.func(convert-linalg-to-loops),"
     << "func.func(gpu-async-region),"
     << "canonicalize,"
     << "convert-scf-to-cf,"
     << "expand-strided-metadata,"
     << "lower-affine,"
     // 4. Kernels: NVVM target, gpu -> nvvm (as upstream's
     // buildGpuPassPipeline).
     << "nvvm-attach-target{triple=" << options.triple << " chip=" << options.chip
     << " features=" << options.features << " O=" << options.optLevel << "},"
     << "gpu.module(strip-debuginfo,convert-gpu-to-nvvm,canonicalize,cse,"
        "reconcile-unrealized-casts),"
     // 5. Host: mgpu* runtime calls (as upstream's buildHostPostPipeline),
     // then the serialization of the kernels.
     << "gpu-to-llvm,"
     << "gpu-module-to-binary{format=" << options.format;
  if (!toolkit.empty())
    os << " toolkit=" << toolkit;
  os << "},";
  appendHostToLLVM(os);
  os << "canonicalize,cse,"
     << "reconcile-unrealized-casts";
  if (failed(parsePassPipeline(pipeline, pm, llvm::errs())))
    llvm::report_fatal_error("moe-nvptx-pipeline: invalid built-in pipeline");
}
