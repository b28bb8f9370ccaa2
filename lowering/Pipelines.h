//===- Pipelines.h - moe lowering pipelines ---------------------*- C++ -*-===//
//
// Pass pipelines that take moe IR to executable code. Embedders build them
// into their own PassManager; moe-opt exposes them as pipeline flags.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_LOWERING_PIPELINES_H
#define MOE_LOWERING_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir {
namespace moe {

/// Options of `--moe-cpu-pipeline`.
struct CpuPipelineOptions : public PassPipelineOptions<CpuPipelineOptions> {
  PassOptions::Option<bool> resultsToOutParams{
      *this, "results-to-out-params",
      llvm::cl::desc("Turn the tensor results of public functions into "
                     "caller-allocated out-parameters (what moe-run calls)"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> parallel{
      *this, "parallel",
      llvm::cl::desc("Run parallel loops (the experts of a grouped FFN) on all "
                     "cores through MLIR's async runtime; the program then "
                     "needs libmlir_async_runtime.so at run time"),
      llvm::cl::init(true)};
};

/// Builds `--moe-cpu-pipeline`: every moe op to upstream dialects, one-shot
/// bufferization, loops, and the LLVM dialect for the host.
void buildCpuPipeline(OpPassManager &pm, const CpuPipelineOptions &options);

/// Registers the pipelines as `--moe-cpu-pipeline` (and, later,
/// `--moe-nvptx-pipeline`).
void registerPipelines();

} // namespace moe
} // namespace mlir

#endif // MOE_LOWERING_PIPELINES_H
