//===- MaterializeLaunches.cpp - --moe-gpu-materialize-launches -----------===//
//
// The second half of convert-moe-to-gpu's launches (ConvertMoEToGPU.cpp):
// after bufferization and buffer deallocation, which reject gpu.launch_func,
// every call of a launch placeholder `@__moe_launch_<kernel>(gx, gy, gz, bx,
// by, bz, args...)` (a private declaration carrying `moe.gpu_kernel`)
// becomes a gpu.launch_func of its kernel, with the dynamic shared memory the
// kernel declares, and the placeholders are dropped.
//
//===----------------------------------------------------------------------===//

#include "dialect/MoEDialect.h"
#include "lowering/gpu/Passes.h"
#include "lowering/gpu/MmaGemm.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOEGPUMATERIALIZELAUNCHES
#include "lowering/gpu/Passes.h.inc"
} // namespace moe
} // namespace mlir

#include "llvm/Support/Debug.h"

// Logs under the debug type of convert-moe-to-gpu, naming itself.
#define DEBUG_TYPE "convert-moe-to-gpu"

using namespace mlir;
using namespace mlir::moe;

namespace {

constexpr llvm::StringLiteral kLaunchAttr = moe::MoEDialect::getGpuKernelAttrName();

/// Turns the launch placeholders into gpu.launch_func (after bufferization
/// and buffer deallocation) and drops their declarations.
struct MaterializeLaunchesPass
    : public moe::impl::MoEGPUMaterializeLaunchesBase<MaterializeLaunchesPass> {
  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] " << getArgument() << " on "
                            << getOperation()->getName() << " at "
                            << getOperation()->getLoc() << "\n");
    ModuleOp module = getOperation();
    SmallVector<func::CallOp> calls;
    module.walk([&](func::CallOp call) {
      auto callee = module.lookupSymbol<func::FuncOp>(call.getCallee());
      if (callee && callee->hasAttr(kLaunchAttr))
        calls.push_back(call);
    });
    for (func::CallOp call : calls) {
      auto callee = module.lookupSymbol<func::FuncOp>(call.getCallee());
      auto kernelRef = cast<SymbolRefAttr>(callee->getAttr(kLaunchAttr));
      auto kernel = SymbolTable::lookupNearestSymbolFrom<gpu::GPUFuncOp>(module, kernelRef);
      if (!kernel) {
        call.emitError() << "kernel " << kernelRef << " not found";
        return signalPassFailure();
      }
      OpBuilder b(call);
      ValueRange ops = call.getOperands();
      // The dynamic shared memory the kernel declares (the tensor-core
      // GEMMs' staging buffers, MmaGemmConfig::dynamicSharedBytes).
      Value smem;
      if (auto bytes = kernel->getAttrOfType<IntegerAttr>(gpu_lowering::kDynamicSmemAttr))
        smem = arith::ConstantIntOp::create(b, call.getLoc(), b.getI32Type(), bytes.getInt());
      gpu::LaunchFuncOp::create(b, call.getLoc(), kernel,
                                gpu::KernelDim3{ops[0], ops[1], ops[2]},
                                gpu::KernelDim3{ops[3], ops[4], ops[5]}, smem,
                                ops.drop_front(6));
      call.erase();
    }
    for (func::FuncOp f : llvm::make_early_inc_range(module.getOps<func::FuncOp>()))
      if (f->hasAttr(kLaunchAttr))
        f.erase();
  }
};

} // namespace
