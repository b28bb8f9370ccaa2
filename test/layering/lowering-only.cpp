//===- lowering-only.cpp - programs that link one lowering library --------===//
//
// Built twice (test/layering/CMakeLists.txt): moe-layering-cpu-only links
// MoECpuLowering (and what it needs) but not MoEGpuLowering, and runs the
// CPU pipeline on a module; moe-layering-gpu-only links MoEGpuLowering but
// not MoECpuLowering (nor MoEPasses), builds the NVPTX pipeline and runs
// its first pass, convert-moe-to-gpu. That each links shows the two
// lowering libraries are independent of each other.
//
//   moe-layering-cpu-only FILE.mlir
//   moe-layering-gpu-only FILE.mlir
//
//===----------------------------------------------------------------------===//

#ifdef MOE_LAYERING_GPU
#include "lowering/gpu/Passes.h"
#else
#include "lowering/cpu/Passes.h"
#endif
#include "lowering/InitAllMoE.h"
#include "lowering/Pipelines.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

int main(int argc, char **argv) {
  if (argc != 2) {
    llvm::errs() << "usage: " << argv[0] << " FILE.mlir\n";
    return 2;
  }
  DialectRegistry registry;
  // The dialects and extensions the pipelines need: the one registration
  // (MoERegisterAllDialects), which links neither lowering library.
  moe::registerAllMoE(registry);
  MLIRContext context(registry);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(argv[1], &context);
  if (!module)
    return 1;
  PassManager pm(&context);
#ifdef MOE_LAYERING_GPU
  moe::NVPTXPipelineOptions options;
  options.format = "isa";
  PassManager nvptx(&context);
  if (failed(moe::buildNVPTXPipeline(nvptx, options)))
    return 1;
  llvm::outs() << "nvptx pipeline: " << nvptx.size() << " passes\n";
  pm.addPass(moe::createConvertMoEToGPU());
#else
  moe::buildCpuPipeline(pm, moe::CpuPipelineOptions());
#endif
  if (failed(pm.run(*module)))
    return 1;
  int moeOps = 0, gpuModules = 0, llvmFuncs = 0;
  module->walk([&](Operation *op) {
    StringRef dialect = op->getName().getDialectNamespace();
    moeOps += dialect == "moe";
    gpuModules += op->getName().getStringRef() == "gpu.module";
    llvmFuncs += op->getName().getStringRef() == "llvm.func";
  });
  llvm::outs() << "moe ops: " << moeOps << ", gpu.module: " << gpuModules
               << ", llvm.func: " << llvmFuncs << "\n";
  return 0;
}
