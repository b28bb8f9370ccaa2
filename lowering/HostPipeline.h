//===- HostPipeline.h - host-side pieces shared by the pipelines -*- C++ -*-===//
//
// The CPU and the NVPTX pipelines bufferize and lower their host code the same
// way; these add those shared pieces to a pass manager.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_LOWERING_HOSTPIPELINE_H
#define MOE_LOWERING_HOSTPIPELINE_H

#include "mlir/Pass/PassManager.h"

#include <memory>

namespace mlir {
namespace moe {

/// One-shot bufferization across function boundaries (identity layouts),
/// optionally tensor results -> caller-allocated out-parameters (a tensor
/// returned twice is copied first, so that every out-parameter gets its own
/// buffer), buffer deallocation, and the remaining bufferization ops ->
/// memref.
void addHostBufferization(OpPassManager &pm, bool resultsToOutParams);

/// memref, math (LLVM intrinsics, then libm for the rest) and everything else
/// -> the LLVM dialect.
void addHostToLLVM(OpPassManager &pm);

/// A module pass that makes every public function return distinct tensors:
/// an operand of func.return that repeats an earlier one (`return %y, %y`)
/// is replaced by a copy (bufferization.alloc_tensor copy(%y)). Upstream
/// buffer-results-to-out-params (hoist-static-allocs) crashes otherwise.
std::unique_ptr<Pass> createCopyRepeatedResultsPass();

} // namespace moe
} // namespace mlir

#endif // MOE_LOWERING_HOSTPIPELINE_H
