//===- Configure.cpp - the GPU strategy of each op, as data ----------------===//
//
// `--moe-gpu-kernel-module` creates the empty `gpu.module @moe_kernels` that
// the target is attached to (upstream's `--nvvm-attach-target`);
// `--moe-gpu-configure` reads that #nvvm.target and attaches a
// #moe.gpu_config to every op that takes a lowering configuration and has
// none. convert-moe-to-gpu reads it; lit tests check the choice per target.
//
//===----------------------------------------------------------------------===//

#include "lowering/gpu/Passes.h"

#include "dialect/MoEAttrs.h"
#include "dialect/MoEDialect.h"
#include "dialect/MoEOps.h"
#include "lowering/gpu/Kernels.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMRequiresSMTraits.h"
#include "mlir/IR/Builders.h"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOEGPUKERNELMODULE
#define GEN_PASS_DEF_MOEGPUCONFIGURE
#include "lowering/gpu/Passes.h.inc"
} // namespace moe
} // namespace mlir

using namespace mlir;
using namespace mlir::moe;

namespace {

bool holdsMoEOps(ModuleOp module) {
  return module
      .walk([](Operation *op) {
        return op->getDialect() && isa<MoEDialect>(op->getDialect()) ? WalkResult::interrupt()
                                                                     : WalkResult::advance();
      })
      .wasInterrupted();
}

struct MoEGPUKernelModulePass
    : public moe::impl::MoEGPUKernelModuleBase<MoEGPUKernelModulePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (module.lookupSymbol<gpu::GPUModuleOp>(gpu_lowering::kKernelModuleName) ||
        !holdsMoEOps(module))
      return;
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    UnitAttr::get(&getContext()));
    OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
    gpu::GPUModuleOp::create(b, module.getLoc(), gpu_lowering::kKernelModuleName);
  }
};

struct MoEGPUConfigurePass : public moe::impl::MoEGPUConfigureBase<MoEGPUConfigurePass> {
  using MoEGPUConfigureBase::MoEGPUConfigureBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    StringRef name = GpuConfigAttr::getAttrName();
    SmallVector<Operation *> ops;
    module.walk([&](Operation *op) {
      if (takesLoweringConfig(op) && !op->hasAttr(name))
        ops.push_back(op);
    });
    if (ops.empty())
      return;
    NVVM::NVVMTargetAttr target;
    if (auto kernels = module.lookupSymbol<gpu::GPUModuleOp>(gpu_lowering::kKernelModuleName))
      if (ArrayAttr targets = kernels.getTargetsAttr())
        for (Attribute t : targets)
          if ((target = dyn_cast<NVVM::NVVMTargetAttr>(t)))
            break;
    if (!target) {
      ops.front()->emitError()
          << "moe-gpu-configure: no #nvvm.target on gpu.module @"
          << gpu_lowering::kKernelModuleName
          << " to choose the GPU strategy from; attach one first "
             "(--moe-gpu-kernel-module --nvvm-attach-target=\"module="
          << gpu_lowering::kKernelModuleName << " chip=sm_90 features=+ptx80\")";
      return signalPassFailure();
    }
    // The chip's capabilities by upstream's SM-version rules.
    NVVM::NVVMCheckSMVersion sm =
        NVVM::NVVMCheckSMVersion::getTargetSMVersionFromStr(target.getChip());
    GpuEngine engine = GpuEngine::cuda_core;
    if (tensorCores && NVVM::NVVMCheckSMVersion(false, 80).isCompatibleWith(sm))
      engine = NVVM::NVVMCheckSMVersion(true, 90).isCompatibleWith(sm) ? GpuEngine::wgmma
                                                                        : GpuEngine::mma_sync;
    if (bigTileRows < 0) {
      ops.front()->emitError() << "moe-gpu-configure: big-tile-rows must be >= 0, got "
                               << static_cast<int64_t>(bigTileRows);
      return signalPassFailure();
    }
    int64_t big = engine == GpuEngine::wgmma ? static_cast<int64_t>(bigTileRows) : 0;
    auto emit = [&] { return ops.front()->emitError() << "moe-gpu-configure: "; };
    GpuConfigAttr config =
        GpuConfigAttr::getChecked(emit, &getContext(), engine, big,
                                  static_cast<int64_t>(decodeSplitK),
                                  static_cast<int64_t>(mmaStages),
                                  static_cast<int64_t>(wgmmaGroupsInFlight));
    if (!config)
      return signalPassFailure();
    // Quantized expert weights run on the chip's tensor cores (staged as
    // their exact factors, scaled once per block or group) without the
    // 128-row wgmma tiles (docs/gpu.md, "Quantized expert weights"); the
    // GEMMs of f32 layers, and of blocks or groups that are not whole
    // k-tiles, fall back to the CUDA cores as for dense f32.
    GpuConfigAttr quantized = GpuConfigAttr::get(
        &getContext(), engine,
        /*bigTileRows=*/0, static_cast<int64_t>(decodeSplitK),
        static_cast<int64_t>(mmaStages), static_cast<int64_t>(wgmmaGroupsInFlight));
    for (Operation *op : ops)
      op->setAttr(name, hasQuantizedExperts(op) ? quantized : config);
  }
};

} // namespace
