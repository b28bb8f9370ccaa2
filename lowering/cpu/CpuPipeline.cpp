//===- CpuPipeline.cpp - --moe-cpu-pipeline ------------------------------===//
//
// The CPU pipeline (`--moe-cpu-pipeline`), part of the CPU lowering library
// MoECpuLowering. The NVPTX pipeline is in lowering/gpu/ (MoEGpuLowering);
// the host pieces both use are in lowering/HostPipeline.cpp
// (MoELoweringCommon).
//
//===----------------------------------------------------------------------===//

#include "lowering/Pipelines.h"

#include "lowering/HostPipeline.h"

#include "lowering/cpu/Passes.h"
#include "lowering/mpi/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Async/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/Transforms/Passes.h"
#include "mlir/Transforms/Passes.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

void moe::buildCpuPipeline(OpPassManager &pm, const CpuPipelineOptions &options) {
  // Every pass from its typed constructor and option struct: nothing here
  // is parsed, so nothing here can fail at run time.
  // Expert parallelism (--moe-shard-experts): the exchanges and the shard
  // ops become mpi ops first, the stages of --convert-moe-spmd-to-mpi
  // (nothing to convert in a module without them).
  buildSpmdToMPIPipeline(pm);
  pm.addNestedPass<func::FuncOp>(createMoECpuDecomposeAggregates());
  // The strategy of every op as data, chosen from the target CPU; the
  // lowering reads it.
  MoECpuConfigureOptions configure;
  configure.cpu = options.cpu;
  configure.extraFeatures = options.cpuFeatures;
  pm.addPass(createMoECpuConfigure(configure));
  ConvertMoEToCPUOptions toCPU;
  toCPU.packWeights = options.packWeights;
  toCPU.checkIndices = options.checkIndices;
  pm.addPass(createConvertMoEToCPU(toCPU));
  pm.addNestedPass<func::FuncOp>(createMoECpuVectorMath());
  pm.addNestedPass<func::FuncOp>(createConvertElementwiseToLinalgPass());
  pm.addPass(createCanonicalizerPass());
  // No CSE before bufferization: the moe ops' lowering reads tensors through
  // bufferization.to_buffer, and CSE would merge a late to_buffer of a
  // tensor into an earlier one, hiding the late read from One-Shot
  // Bufferize, which could then let an elementwise op in between overwrite
  // that tensor's buffer in place (a wrong answer: the backward of a
  // residual block read x_l after x_{l+1} = x_l + layer(x_l) had reused
  // its buffer).
  addHostBufferization(pm, options.resultsToOutParams);
  pm.addPass(createCSEPass());
  pm.addPass(createMoECpuCheckAllocs());
  pm.addPass(createMoECpuInlineAllocaScopes());
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  pm.addPass(createCanonicalizerPass());
  if (options.parallel) {
    pm.addNestedPass<func::FuncOp>(createForallToParallelLoopPass());
    AsyncParallelForPassOptions parallelFor;
    parallelFor.asyncDispatch = true;
    parallelFor.minTaskSize = 1;
    // Blocks per loop from the runtime's thread count (MOE_CPU_THREADS or
    // the CPUs; 16 for 2 threads, 8 per thread up to 4), not the pass's
    // default of 8 workers (always 32 blocks: on 2 cores a decode layer
    // spent a tenth of its time in the tasks' overhead; on 64 cores half of
    // them had nothing to do).
    parallelFor.numWorkerThreads = -1;
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
  // bf16 conversions exact and without libcalls on every host CPU.
  pm.addPass(createMoEHostExpandBF16());
  ConvertVectorToLLVMPassOptions toLLVM;
  toLLVM.x86Vector = true;
  toLLVM.amx = true;
  pm.addPass(createConvertVectorToLLVMPass(toLLVM));
  addHostToLLVM(pm);
  // Expert parallelism: OpenMPI's reduction handles as OpenMPI names them.
  pm.addPass(createMoEFixOpenMPISymbols());
  pm.addPass(createReconcileUnrealizedCastsPass());
  // bf16 moved as i16, so that LLVM adds no bf16 arithmetic of its own.
  pm.addPass(createMoEHostBF16MemoryAsI16());
}

void moe::registerCpuPipeline() {
  PassPipelineRegistration<CpuPipelineOptions>(
      "moe-cpu-pipeline",
      "Lower moe IR to the LLVM dialect for the host: moe -> linalg/tensor/"
      "scf/arith/math, one-shot bufferization, loops, LLVM",
      buildCpuPipeline);
  // The pass's name before 2026-12 (it emits memrefs, scf.parallel and
  // vector ops, not linalg): a deprecated alias for one release, with the
  // pass's own options and a warning.
  registerPassPipeline(
      "convert-moe-to-linalg",
      "Deprecated alias of convert-moe-to-cpu (same options); will be removed",
      [](OpPassManager &pm, StringRef optionsText,
         function_ref<LogicalResult(const Twine &)> errorHandler) {
        std::unique_ptr<Pass> pass = createConvertMoEToCPU();
        if (failed(pass->initializeOptions(optionsText, errorHandler)))
          return failure();
        llvm::errs() << "warning: --convert-moe-to-linalg is deprecated; use "
                        "--convert-moe-to-cpu (the same pass and options)\n";
        pm.addPass(std::move(pass));
        return success();
      },
      [](function_ref<void(const mlir::detail::PassOptions &)>) {});
}
