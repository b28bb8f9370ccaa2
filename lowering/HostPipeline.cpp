//===- HostPipeline.cpp - host-side pieces shared by the pipelines --------===//
//
// lowering/HostPipeline.h: the host bufferization and the host-to-LLVM
// passes that the CPU pipeline (MoECpuLowering) and the NVPTX pipeline
// (MoEGpuLowering) share. Part of MoELoweringCommon.
//
//===----------------------------------------------------------------------===//

#include "lowering/HostPipeline.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

using namespace mlir;

namespace {
/// See createCopyRepeatedResultsPass().
struct CopyRepeatedResultsPass
    : public PassWrapper<CopyRepeatedResultsPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(CopyRepeatedResultsPass)

  StringRef getArgument() const final { return "moe-copy-repeated-results"; }
  StringRef getDescription() const final {
    return "Copy tensors that a public function returns more than once";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<bufferization::BufferizationDialect>();
  }
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal() || !func.isPublic())
        continue;
      func.walk([](func::ReturnOp ret) {
        OpBuilder builder(ret);
        for (OpOperand &operand : ret->getOpOperands()) {
          Value value = operand.get();
          auto type = dyn_cast<RankedTensorType>(value.getType());
          if (!type)
            continue;
          bool repeated = llvm::any_of(
              ret->getOpOperands().take_front(operand.getOperandNumber()),
              [&](OpOperand &earlier) { return earlier.get() == value; });
          if (!repeated)
            continue;
          operand.set(bufferization::AllocTensorOp::create(
              builder, ret.getLoc(), type, ValueRange(), value));
        }
      });
    }
  }
};
} // namespace

std::unique_ptr<Pass> moe::createCopyRepeatedResultsPass() {
  return std::make_unique<CopyRepeatedResultsPass>();
}

void moe::addHostBufferization(OpPassManager &pm, bool resultsToOutParams) {
  if (resultsToOutParams)
    pm.addPass(createCopyRepeatedResultsPass());
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  // A layer inside scf.for yields a new buffer every iteration.
  bufferize.allowReturnAllocsFromLoops = true;
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  if (resultsToOutParams) {
    bufferization::BufferResultsToOutParamsPassOptions outParams;
    outParams.modifyPublicFunctions = true;
    outParams.hoistStaticAllocs = true;
    pm.addPass(bufferization::createBufferResultsToOutParamsPass(outParams));
  }
  bufferization::buildBufferDeallocationPipeline(pm);
  pm.addPass(createConvertBufferizationToMemRefPass());
}

void moe::addHostToLLVM(OpPassManager &pm) {
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  pm.addPass(createConvertToLLVMPass());
}

