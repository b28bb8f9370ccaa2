//===- PipelineRegistration.cpp - registration of --moe-nvptx-pipeline ----===//
//
// Part of the GPU lowering library MoEGpuLowering: the textual registration
// of the NVPTX pipeline and of its first half, --moe-gpu-launch-pipeline.
//
//===----------------------------------------------------------------------===//

#include "lowering/gpu/Passes.h"
#include "lowering/Pipelines.h"

#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

/// Registers a pipeline that takes NVPTXPipelineOptions and is built by
/// `build(pm, options, errorHandler)`. The option values are checked by the
/// builders: a bad one is an error of the pipeline's parser (a diagnostic and
/// exit 1 in moe-opt), not an abort.
static void registerWithNVPTXOptions(
    StringRef name, StringRef description,
    LogicalResult (*build)(OpPassManager &, const moe::NVPTXPipelineOptions &,
                           function_ref<LogicalResult(const Twine &)>)) {
  registerPassPipeline(
      name, description,
      [build](OpPassManager &pm, StringRef optionsText,
              function_ref<LogicalResult(const Twine &)> errorHandler) {
        moe::NVPTXPipelineOptions options;
        if (failed(options.parseFromString(optionsText)))
          return failure();
        return build(pm, options, errorHandler);
      },
      [](function_ref<void(const mlir::detail::PassOptions &)> optionsHandler) {
        optionsHandler(moe::NVPTXPipelineOptions());
      });
}

void moe::registerNVPTXPipeline() {
  registerWithNVPTXOptions(
      "moe-nvptx-pipeline",
      "Lower moe IR to MoE kernels in a gpu.binary (NVVM/PTX) and host LLVM "
      "code calling the mgpu* runtime",
      [](OpPassManager &pm, const NVPTXPipelineOptions &options,
         function_ref<LogicalResult(const Twine &)> errorHandler) {
        return buildNVPTXPipeline(pm, options, errorHandler);
      });
  registerWithNVPTXOptions(
      "moe-gpu-launch-pipeline",
      "The first half of moe-nvptx-pipeline: moe IR to host code launching "
      "the kernels of gpu.module @moe_kernels (not yet lowered to NVVM; "
      "needs no CUDA toolkit)",
      [](OpPassManager &pm, const NVPTXPipelineOptions &options,
         function_ref<LogicalResult(const Twine &)> errorHandler) {
        return buildGpuLaunchPipeline(pm, options, errorHandler);
      });
}
