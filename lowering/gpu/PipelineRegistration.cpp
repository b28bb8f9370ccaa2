//===- PipelineRegistration.cpp - registration of --moe-nvptx-pipeline ----===//
//
// Part of the GPU lowering library MoEGpuLowering: the textual registration
// of the NVPTX pipeline and of its first half, --moe-gpu-launch-pipeline.
//
//===----------------------------------------------------------------------===//

#include "lowering/Passes.h"
#include "lowering/Pipelines.h"

#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

void moe::registerNVPTXPipeline() {
  // The NVPTX pipeline checks its option values: a bad one is an error of
  // the pipeline's parser (a diagnostic and exit 1 in moe-opt), not an abort.
  registerPassPipeline(
      "moe-nvptx-pipeline",
      "Lower moe IR to MoE kernels in a gpu.binary (NVVM/PTX) and host LLVM "
      "code calling the mgpu* runtime",
      [](OpPassManager &pm, StringRef optionsText,
         function_ref<LogicalResult(const Twine &)> errorHandler) {
        NVPTXPipelineOptions options;
        if (failed(options.parseFromString(optionsText)))
          return failure();
        return buildNVPTXPipeline(pm, options, errorHandler);
      },
      [](function_ref<void(const mlir::detail::PassOptions &)> optionsHandler) {
        optionsHandler(NVPTXPipelineOptions());
      });
  registerPassPipeline(
      "moe-gpu-launch-pipeline",
      "The first half of moe-nvptx-pipeline: moe IR to host code launching "
      "the kernels of gpu.module @moe_kernels (not yet lowered to NVVM; "
      "needs no CUDA toolkit)",
      [](OpPassManager &pm, StringRef optionsText,
         function_ref<LogicalResult(const Twine &)> errorHandler) {
        NVPTXPipelineOptions options;
        if (failed(options.parseFromString(optionsText)))
          return failure();
        return buildGpuLaunchPipeline(pm, options, /*toolkit=*/"", errorHandler);
      },
      [](function_ref<void(const mlir::detail::PassOptions &)> optionsHandler) {
        optionsHandler(NVPTXPipelineOptions());
      });
}
