//===- HostPipeline.h - host-side pieces shared by the pipelines -*- C++ -*-===//
//
// The CPU and the NVPTX pipelines bufferize and lower their host code the same
// way; these append those shared pieces to a textual pass pipeline.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_LOWERING_HOSTPIPELINE_H
#define MOE_LOWERING_HOSTPIPELINE_H

#include "llvm/Support/raw_ostream.h"

namespace mlir {
namespace moe {

/// One-shot bufferization across function boundaries (identity layouts),
/// optionally tensor results -> caller-allocated out-parameters, buffer
/// deallocation, and the remaining bufferization ops -> memref.
void appendHostBufferization(llvm::raw_ostream &os, bool resultsToOutParams);

/// memref, math (LLVM intrinsics, then libm for the rest) and everything else
/// -> the LLVM dialect.
void appendHostToLLVM(llvm::raw_ostream &os);

} // namespace moe
} // namespace mlir

#endif // MOE_LOWERING_HOSTPIPELINE_H
