//===- Pipelines.cpp - moe lowering pipelines -----------------------------===//

#include "lowering/Pipelines.h"

#include "lowering/HostPipeline.h"

#include "lowering/Passes.h"
#include "passes/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Async/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/Transforms/Passes.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Transforms/Passes.h"
#include "mlir/Pass/Pass.h"

#include <mutex>

#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

/// The pipelines are written as pass pipelines of registered passes; make
/// sure every pass they name is registered, so that embedders need not call
/// registerAllPasses() first. Registering a pass again with the same TypeID
/// is a no-op, so this is safe inside mlir-opt and its plugins.
void moe::ensurePipelinePassesRegistered() {
  static std::once_flag once;
  std::call_once(once, [] {
    registerAllPasses();
    registerMoEPasses();
    registerMoELoweringPasses();
    registerPass([] { return createCopyRepeatedResultsPass(); });
  });
}

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

void moe::buildCpuPipeline(OpPassManager &pm, const CpuPipelineOptions &options) {
  // Every pass from its typed constructor and option struct: nothing here
  // is parsed, so nothing here can fail at run time.
  pm.addNestedPass<func::FuncOp>(createMoECpuDecomposeAggregates());
  ConvertMoEToLinalgOptions toLinalg;
  toLinalg.packWeights = options.packWeights;
  toLinalg.bf16Dot = options.bf16Dot;
  toLinalg.checkIndices = options.checkIndices;
  pm.addPass(createConvertMoEToLinalg(toLinalg));
  pm.addNestedPass<func::FuncOp>(createMoECpuVectorMath());
  pm.addNestedPass<func::FuncOp>(createConvertElementwiseToLinalgPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  addHostBufferization(pm, options.resultsToOutParams);
  pm.addPass(createMoECpuCheckAllocs());
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  pm.addPass(createCanonicalizerPass());
  if (options.parallel) {
    pm.addNestedPass<func::FuncOp>(createForallToParallelLoopPass());
    AsyncParallelForPassOptions parallelFor;
    parallelFor.asyncDispatch = true;
    parallelFor.minTaskSize = 1;
    pm.addPass(createAsyncParallelForPass(parallelFor));
    pm.addPass(createAsyncToAsyncRuntimePass());
    pm.addPass(createAsyncRuntimeRefCountingPass());
    pm.addPass(createAsyncRuntimeRefCountingOptPass());
    pm.addPass(createConvertAsyncToLLVMPass());
  }
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  ConvertVectorToLLVMPassOptions toLLVM;
  toLLVM.x86Vector = true;
  pm.addPass(createConvertVectorToLLVMPass(toLLVM));
  addHostToLLVM(pm);
  pm.addPass(createReconcileUnrealizedCastsPass());
}

void moe::registerPipelines() {
  PassPipelineRegistration<CpuPipelineOptions>(
      "moe-cpu-pipeline",
      "Lower moe IR to the LLVM dialect for the host: moe -> linalg/tensor/"
      "scf/arith/math, one-shot bufferization, loops, LLVM",
      buildCpuPipeline);
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
      [](function_ref<void(const detail::PassOptions &)> optionsHandler) {
        optionsHandler(NVPTXPipelineOptions());
      });
}
