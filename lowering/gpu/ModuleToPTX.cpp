//===- ModuleToPTX.cpp - --moe-gpu-module-to-ptx --------------------------===//
//
// The kernels' gpu.module to a gpu.binary holding PTX, through MLIR's
// LLVM::ModuleToObject (translation, LLVM optimization at the target's O,
// the NVPTX backend) as upstream's NVVM serializer does, but without its
// libdevice lookup, which fails without a CUDA toolkit even when no kernel
// calls libdevice. The kernels never do (moe-gpu-kernel-math,
// moe-gpu-math-to-nvvm); a call of an external function is an error here.
//
//===----------------------------------------------------------------------===//

#include "lowering/gpu/Passes.h"

#include "mlir/Dialect/GPU/IR/CompilationInterfaces.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Target/LLVM/ModuleToObject.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"

#include "llvm/IR/Module.h"
#include "llvm/Support/Debug.h"
#include "llvm/Support/TargetSelect.h"

#include <mutex>

#define DEBUG_TYPE "moe-gpu-module-to-ptx"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOEGPUMODULETOPTX
#include "lowering/gpu/Passes.h.inc"
} // namespace moe
} // namespace mlir

using namespace mlir;

namespace {

class PtxSerializer : public LLVM::ModuleToObject {
public:
  PtxSerializer(gpu::GPUModuleOp module, NVVM::NVVMTargetAttr target)
      : ModuleToObject(*module, target.getTriple(), target.getChip(), target.getFeatures(),
                       target.getO()) {
    // The NVPTX backend, once per process (what upstream's serializer does).
    static std::once_flag once;
    std::call_once(once, [] {
      llvm::InitializeAllTargets();
      llvm::InitializeAllTargetMCs();
      llvm::InitializeAllAsmPrinters();
    });
  }

protected:
  FailureOr<SmallVector<char, 0>> moduleToObject(llvm::Module &llvmModule) override {
    for (llvm::Function &function : llvmModule) {
      if (!function.isDeclaration() || function.isIntrinsic() || function.use_empty())
        continue;
      getOperation().emitError()
          << "kernel code calls the external function '" << function.getName()
          << "'; the MoE kernels link no device library (libdevice)";
      return failure();
    }
    FailureOr<llvm::TargetMachine *> machine = getOrCreateTargetMachine();
    if (failed(machine)) {
      getOperation().emitError() << "the NVPTX target (" << triple << ", " << chip
                                 << ") is not available in this LLVM";
      return failure();
    }
    FailureOr<SmallString<0>> ptx = translateModuleToISA(
        llvmModule, **machine, [&] { return getOperation().emitError(); });
    if (failed(ptx))
      return failure();
    // The text alone, as upstream's serializer stores it (the runtime adds
    // the NUL cuModuleLoadData needs, runtime/cuda/MgpuAbi.cpp).
    return SmallVector<char, 0>(ptx->begin(), ptx->end());
  }
};

struct MoEGPUModuleToPTXPass
    : public moe::impl::MoEGPUModuleToPTXBase<MoEGPUModuleToPTXPass> {
  void getDependentDialects(DialectRegistry &registry) const override {
    MoEGPUModuleToPTXBase::getDependentDialects(registry);
    // The kernels' dialects (gpu, llvm, nvvm) translated to LLVM IR, also
    // in tools that do not register the translations.
    registerAllGPUToLLVMIRTranslations(registry);
  }

  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] on " << getOperation()->getName()
                            << " at " << getOperation()->getLoc() << "\n");
    SmallVector<gpu::GPUModuleOp> modules(getOperation().getOps<gpu::GPUModuleOp>());
    for (gpu::GPUModuleOp module : modules) {
      ArrayAttr targets = module.getTargetsAttr();
      if (!targets || targets.size() != 1 || !isa<NVVM::NVVMTargetAttr>(targets[0])) {
        module.emitError() << "moe-gpu-module-to-ptx: gpu.module @" << module.getName()
                           << " needs exactly one #nvvm.target";
        return signalPassFailure();
      }
      auto target = cast<NVVM::NVVMTargetAttr>(targets[0]);
      PtxSerializer serializer(module, target);
      std::optional<SmallVector<char, 0>> ptx = serializer.run();
      if (!ptx)
        return signalPassFailure();
      MLIRContext *context = &getContext();
      Builder b(context);
      DictionaryAttr properties =
          b.getDictionaryAttr({b.getNamedAttr("O", b.getI32IntegerAttr(target.getO()))});
      Attribute object = gpu::ObjectAttr::get(
          context, target, gpu::CompilationTarget::Assembly,
          b.getStringAttr(StringRef(ptx->data(), ptx->size())), properties,
          /*kernels=*/nullptr);
      OpBuilder builder(module);
      gpu::BinaryOp::create(builder, module.getLoc(), module.getName(),
                            module.getOffloadingHandlerAttr(), ArrayRef<Attribute>{object});
      module.erase();
    }
  }
};

} // namespace
