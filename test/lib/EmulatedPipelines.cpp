//===- EmulatedPipelines.cpp - the host tail of the emulated GPU tests -----===//
//
// `--moe-test-emulated-to-llvm`: what follows `--moe-test-emulate-gpu` in the
// lit tests that run the GPU kernels on the host: the host code (with the
// kernels inlined as OpenMP regions) to the LLVM dialect, built from the same
// C++ pieces as the real pipelines (addHostToLLVM), so that lit.cfg.py keeps
// no text copy of a pipeline. The front is the real one,
// `--moe-gpu-launch-pipeline` (buildGpuLaunchPipeline).
//
//===----------------------------------------------------------------------===//

#include "test/lib/TestPasses.h"

#include "lowering/HostPipeline.h"
#include "lowering/cpu/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void moe::buildTestEmulatedToLLVM(OpPassManager &pm) {
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createConvertOpenMPToLLVMPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createMoEHostExpandBF16());
  addHostToLLVM(pm);
  pm.addPass(createReconcileUnrealizedCastsPass());
}

void moe::registerTestEmulatedPipelines() {
  PassPipelineRegistration<>(
      "moe-test-emulated-to-llvm",
      "Testing: the host code after moe-test-emulate-gpu (OpenMP regions as "
      "the kernels) to the LLVM dialect",
      [](OpPassManager &pm) { buildTestEmulatedToLLVM(pm); });
}
