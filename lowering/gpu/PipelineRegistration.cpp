//===- PipelineRegistration.cpp - registration of --moe-nvptx-pipeline ----===//
//
// Part of the GPU lowering library MoEGpuLowering: the textual registration
// of the NVPTX pipeline and of the passes its builder names.
//
//===----------------------------------------------------------------------===//

#include "lowering/Passes.h"
#include "lowering/Pipelines.h"

#include "mlir/InitAllPasses.h"
#include "mlir/Pass/PassRegistry.h"

#include <mutex>

using namespace mlir;

/// Parts of the NVPTX pipeline are written as pass pipelines of registered
/// passes; make sure every pass they name is registered (the upstream passes
/// and moe-gpu-materialize-launches), so that embedders need not call
/// registerAllPasses() first. Registering a pass again with the same TypeID
/// is a no-op, so this is safe inside mlir-opt and its plugins.
void moe::ensurePipelinePassesRegistered() {
  static std::once_flag once;
  std::call_once(once, [] {
    registerAllPasses();
    registerMoEGPUMaterializeLaunches();
  });
}

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
}
