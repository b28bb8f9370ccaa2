//===- TestMmaKernels.cpp - --moe-test-build-mma-kernels ------------------===//
//
// Builds the tensor-core GEMM kernels named by launch placeholders, so that
// kernel-level lit tests can launch them on hand-made routing plans (and run
// them through --moe-test-emulate-gpu or the NVPTX pipeline).
//
//===----------------------------------------------------------------------===//

#include "test/lib/TestPasses.h"

#include "lowering/gpu/Kernels.h"
#include "lowering/gpu/MmaGemm.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOETESTBUILDMMAKERNELS
#include "test/lib/TestPasses.h.inc"
} // namespace moe
} // namespace mlir

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "moe-test-build-mma-kernels"

using namespace mlir;
using namespace mlir::moe::gpu_lowering;

namespace {

/// The attribute of convert-moe-to-gpu's launch placeholders.
constexpr llvm::StringLiteral kLaunchAttr = moe::MoEDialect::getGpuKernelAttrName();

struct TestBuildMmaKernelsPass
    : public moe::impl::MoETestBuildMmaKernelsBase<TestBuildMmaKernelsPass> {
  void getDependentDialects(DialectRegistry &registry) const override {
    MoETestBuildMmaKernelsBase::getDependentDialects(registry);
    // For gpu-module-to-binary later in the same pipeline (as
    // convert-moe-to-gpu does).
    registerAllGPUToLLVMIRTranslations(registry);
  }
  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] " << getArgument() << " on "
                            << getOperation()->getName() << " at "
                            << getOperation()->getLoc() << "\n");
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> decls;
    for (auto f : module.getOps<func::FuncOp>())
      if (f.isDeclaration() && f->hasAttr(kLaunchAttr))
        decls.push_back(f);
    if (decls.empty())
      return;
    KernelLibrary lib(module);
    for (func::FuncOp f : decls) {
      auto ref = dyn_cast<SymbolRefAttr>(f->getAttr(kLaunchAttr));
      if (!ref || ref.getRootReference() != kKernelModuleName ||
          ref.getNestedReferences().size() != 1) {
        f.emitError() << "moe-test-build-mma-kernels: " << kLaunchAttr
                      << " must be @" << kKernelModuleName << "::@<kernel>";
        return signalPassFailure();
      }
      StringRef name = ref.getLeafReference().getValue();
      if (lib.getModule().lookupSymbol(name))
        continue;
      std::optional<MmaGemmConfig> config = MmaGemmConfig::parse(name);
      if (!config) {
        f.emitError() << "moe-test-build-mma-kernels: '" << name
                      << "' is not a tensor-core GEMM kernel name";
        return signalPassFailure();
      }
      buildMmaGemm(lib.getModule(), *config);
    }
  }
};

} // namespace
